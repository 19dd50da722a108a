"""Does ``vdlib plan`` predict a run it never saw? Out-of-sample checks from committed runs only.

Each check fits the plan's figures (``benchmarks/cost_table.py``'s formulas: per-stage rates,
seconds per GRPO step at its generated tokens, start-ups, output lengths) on some measured
run-iterations, then runs ``vdlib plan``'s own arithmetic (:func:`vdlib.app.plan.make_plan`,
measured lengths, the fit's entry alone in the table) for run-iterations that were NOT in the
fit, and compares per stage: relative error = (predicted - measured) / measured, of the mean
stage seconds of the held-out run-iterations. A stage is within the goal when |error| <= 25 %.

Checks (the gpu-small and smollm2 runs; the 4B / 8B ones wait for the GPU session's runs):

- ``k_and_steps``: fitted on one run alone on an H200 at K = 1,024, 3 proposer and 10 solver
  steps (the table's ``smollm2-135m@h200/vllm-stage/x1``, benchmarks/results/
  iteration_profile_h200.json); checked on ``params/smollm2/timed_iteration.yaml`` (K = 128,
  2 and 4 steps) and ``params/smollm2/loop_vllm.yaml`` (K = 512, 6 and 20 steps), iteration 1
  each, one run alone on an H200 (older code: before the engine lifetime and the parallel
  votes; their logs are in benchmarks/results/);
- ``iterations``: fitted on iterations 1-2 of the gpu-small runs on one H100 (three runs a
  card, ``h100x1``: as if the runs had 2 iterations); checked on their iteration 3, and on
  another H100's runs (``h100x1_rerun``, iterations 1-2);
  and the same on one H200 (``h200x1``: fitted on iterations 1-2, checked on iteration 3).

A fit needs two iterations: iteration 1 spends more on start-up (the warm-start, cold caches;
under ``engine.lifetime: run`` every engine start), which the table keeps apart as
``first_iteration_extra_s`` and the plan adds once a run. Fitted on iteration 1 alone, the
plan priced the H200 runs' later proposer stages 52 % high (198 s against 130 s).

    python benchmarks/plan_heldout.py            # compute, print
    python benchmarks/plan_heldout.py --write    # and write benchmarks/results/plan_heldout.json
                                                 # and docs/SCALING.md's block of it
    python benchmarks/plan_heldout.py --check    # exit 1 if either differs (tests/test_plan.py)
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import cost_table as ct  # noqa: E402  (benchmarks/cost_table.py)

OUT = ct.RESULTS / "plan_heldout.json"
BEGIN, END = "<!-- BEGIN plan_heldout.py:checks -->", "<!-- END plan_heldout.py:checks -->"
STAGES = ("proposer", "generate", "score", "solver", "metrics")
GOAL = 0.25


def fitted_entry(folder: str, card: str, keep: Any, answers_from: dict | None = None
                 ) -> dict[str, Any]:
    """``cost_table.gpu_small_entry`` of ``folder`` fitted on the run-iterations ``keep``
    accepts (the others are held out)."""
    rows = [r for r in ct.run_iterations(ct.gpu_small(folder)) if keep(r)]
    original = ct.run_iterations
    ct.run_iterations = lambda _folder: rows
    try:
        entry = ct.gpu_small_entry(ct.gpu_small(folder), card,
                                   answers_from=answers_from)
    finally:
        ct.run_iterations = original
    entry["id"] += f" (fit: {len(rows)} run-iterations)"
    return entry


def held_out(folder: str, keep: Any) -> dict[str, Any]:
    rows = [r for r in ct.run_iterations(ct.gpu_small(folder)) if keep(r)]
    return {"run_iterations": len(rows),
            "first_share": sum(r["iteration"] == 1 for r in rows) / len(rows),
            "stages_s": {s: round(statistics.fmean(r["stages_s"][s] for r in rows), 1)
                         for s in STAGES}}


def predict(entry: dict[str, Any], params: str, card: str, runs_per_gpu: int,
            first_share: float) -> dict[str, float]:
    """Per-stage seconds of the held-out run-iterations, ``vdlib plan``'s arithmetic with
    ``entry`` alone: a later iteration's, plus iteration 1's extra start-up for the share
    ``first_share`` of them that are an iteration 1."""
    from vdlib.app.plan import make_plan
    from vdlib.app.plan_table import load_table
    from vdlib.config.experiment import load_params

    table = copy.deepcopy(load_table())
    entry = copy.deepcopy(entry)
    if "evaluate" not in entry["stages"]:  # not compared; the plan needs one
        entry["stages"]["evaluate"] = {"tokens_per_s": 1.0, "startup_s": 0.0}
    table["entries"] = [entry]
    cfg = load_params(ROOT / params, {"engine": {"lifetime": entry["lifetime"]}})
    plan = make_plan(cfg, params=params, card=card, runs_per_gpu=runs_per_gpu, table=table)
    return {s.name: s.seconds + first_share * s.first_extra_s for s in plan.stages
            if s.name in STAGES}


def compare(predicted: dict[str, float], measured: dict[str, float]) -> dict[str, Any]:
    rows = {}
    for s in STAGES:
        err = (predicted[s] - measured[s]) / measured[s]
        rows[s] = {"predicted_s": round(predicted[s], 1), "measured_s": measured[s],
                   "relative_error": round(err, 3), "within_25pct": abs(err) <= GOAL}
    p, m = sum(predicted.values()), sum(measured.values())
    rows["iteration"] = {"predicted_s": round(p, 1), "measured_s": round(m, 1),
                         "relative_error": round((p - m) / m, 3),
                         "within_25pct": abs(p - m) / m <= GOAL}
    return rows


def checks() -> list[dict[str, Any]]:
    from vdlib.app.plan_table import load_table

    table = load_table()
    x1 = next(e for e in table["entries"] if e["id"] == "smollm2-135m@h200/vllm-stage/x1")
    out = []
    for key in ("timed_iteration_h200", "loop_vllm_h200"):
        m = table["measured"][key]
        out.append({"check": "k_and_steps", "fit": x1["id"] + " (" + x1["params"] + ", K = "
                    f"{x1['measured_at']['num_questions']:,}, "
                    f"{x1['measured_at']['proposer_steps']} + "
                    f"{x1['measured_at']['solver_steps']} steps)",
                    "held_out": f"{m['params']}: {m['what']} ({m['source']})",
                    "stages": compare(predict(x1, m["params"], "h200", 1, 1.0),
                                      m["stages_s"])})
    h200 = next(e for e in table["entries"] if e["id"] == "smollm2-135m@h200/vllm-stage/x3")
    fit = fitted_entry("h100x1", "h100", lambda r: r["iteration"] <= 2, answers_from=h200)
    for folder, keep, what in (
            ("h100x1", lambda r: r["iteration"] == 3, "iteration 3 of the same runs"),
            ("h100x1_rerun", lambda r: True, "another H100's runs (part 5), iterations 1-2")):
        m = held_out(folder, keep)
        out.append({"check": "iterations", "fit": fit["id"] + ": h100x1 iterations 1-2",
                    "held_out": f"{session(folder)}: {what} ({m['run_iterations']} "
                                "run-iterations)",
                    "stages": compare(predict(fit, ct.GPU_SMALL, "h100", 3,
                                              m["first_share"]), m["stages_s"])})
    fit = fitted_entry("h200x1", "h200", lambda r: r["iteration"] <= 2)
    m = held_out("h200x1", lambda r: r["iteration"] == 3)
    out.append({"check": "iterations", "fit": fit["id"] + ": h200x1 iterations 1-2",
                "held_out": f"{session('h200x1')}: iteration 3 of the same runs "
                            f"({m['run_iterations']} run-iterations)",
                "stages": compare(predict(fit, ct.GPU_SMALL, "h200", 3, m["first_share"]),
                                  m["stages_s"])})
    return out


def session(folder: str) -> str:
    """Where a session of the main table lies: ``h200x1/ of gpu_small_main_h200x1_h200x4.zip``."""
    return f"{folder}/ of {ct.gpu_small(folder).archive.name}"


def build() -> dict[str, Any]:
    rows = checks()
    return {"about": "vdlib plan fitted on some runs, checked on runs it never saw, per stage "
                     "(benchmarks/plan_heldout.py; docs/SCALING.md, 'Does the plan predict?')",
            "goal": f"|relative error| <= {GOAL:.0%} per stage",
            "checks": rows,
            "stages_within_goal": sum(r["within_25pct"] for c in rows
                                      for s, r in c["stages"].items() if s != "iteration"),
            "stages_checked": sum(len(STAGES) for _ in rows)}


def format_result(result: dict[str, Any]) -> str:
    lines = ["| check | held out | " + " | ".join(STAGES) + " | iteration |",
             "|---|---|" + "---:|" * (len(STAGES) + 1)]
    for c in result["checks"]:
        cells = []
        for s in (*STAGES, "iteration"):
            r = c["stages"][s]
            mark = "" if r["within_25pct"] else " **x**"
            cells.append(f"{r['predicted_s']:.0f} / {r['measured_s']:.0f} "
                         f"({100 * r['relative_error']:+.0f} %){mark}")
        lines.append(f"| {c['check']} | {c['held_out'].split(' (')[0]} | "
                     + " | ".join(cells) + " |")
    lines.append(f"\npredicted / measured seconds (relative error); **x**: outside "
                 f"{result['goal']}. {result['stages_within_goal']} of "
                 f"{result['stages_checked']} stage checks within the goal.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true", help=f"write {ct.rel(OUT)}")
    ap.add_argument("--check", action="store_true", help=f"exit 1 if {ct.rel(OUT)} differs")
    args = ap.parse_args(argv)
    result = build()
    text = json.dumps(result, indent=1) + "\n"
    doc = ct.SCALING.read_text()
    head, sep, rest = doc.partition(BEGIN)
    if not sep or END not in rest:
        raise SystemExit(f"{ct.rel(ct.SCALING)}: no {BEGIN} ... {END} block")
    new_doc = head + BEGIN + "\n" + format_result(result) + "\n" + END + rest.split(END, 1)[1]
    if args.check:
        same = OUT.is_file() and OUT.read_text() == text and new_doc == doc
        print(f"{ct.rel(OUT)} and docs/SCALING.md's block are "
              f"{'current' if same else 'NOT current'}")
        return 0 if same else 1
    if args.write:
        OUT.write_text(text)
        ct.SCALING.write_text(new_doc)
    print(format_result(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
