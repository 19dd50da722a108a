"""fig:question_complexity's four quantities per arm and iteration, from the committed gpu-small
questions, and the largest % change of each arm from the baseline (issue 51, item 3).

The quantities (:mod:`vdlib.report.question_profile`): valid questions, mean tokens per valid
question (SmolLM2's tokenizer, the gpu-small proposer's, packaged offline as ``tiny-random``),
mean distinct numbers per valid question, mean self-consistency acc ("Score"). Each run's
values are checked against the ``metrics.json`` the run wrote (the same definitions, computed
on the GPU host) and the valid count and mean acc against ``docs/results/<experiment>.json``;
any disagreement fails the script.

    .venv/bin/python benchmarks/question_profile.py \\
        --out docs/results/gpu_small/question_profile.md

writes the Markdown table and, beside it, ``question_profile.json`` (per run and iteration,
and the pooled table).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from committed_questions import iterations, read_questions, results_records, runs  # noqa: E402

from vdlib.report.question_profile import (  # noqa: E402
    PROFILE_METRICS,
    iteration_profile,
    largest_changes,
    profile_table,
)

logger = logging.getLogger("question_profile")
LABELS = {"valid_questions": "#Q (valid questions)", "mean_question_tokens": "Tok/q",
          "mean_distinct_numbers": "Nums / q", "mean_acc": "Score (mean acc)"}


def _close(a, b, rel: float = 1e-6) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(float(a), float(b), rel_tol=rel, abs_tol=1e-6)


def collect() -> tuple[list[dict], list[str]]:
    """Per (experiment, arm, seed, iteration) the four quantities, and the disagreements with
    the runs' metrics.json and the results JSON."""
    from vdlib.engines.models import load_tokenizer

    tok = load_tokenizer("tiny-random")
    rows, problems = [], []
    for experiment, arm, seed, run_dir in runs():
        recorded = results_records(experiment)
        for t, path in iterations(run_dir):
            prof = iteration_profile(read_questions(path), tok)
            rows.append({"experiment": experiment, "arm": arm, "seed": seed, "iteration": t,
                         **prof})
            mfile = path.parent / "metrics.json"
            metrics = json.loads(mfile.read_text()) if mfile.is_file() else {}
            for k in PROFILE_METRICS:
                if k in metrics and not _close(prof[k], metrics[k], 1e-4):
                    problems.append(f"{mfile}: {k} {metrics[k]} here {prof[k]}")
            rec = recorded.get((arm, seed, t))
            if rec is None:
                problems.append(f"{experiment}.json has no record of {arm} seed {seed} it. {t}")
                continue
            for k in ("valid_questions", "mean_acc"):
                if not _close(prof[k], rec.get(k), 1e-4):
                    problems.append(f"{experiment}.json {arm} seed {seed} it. {t}: {k} "
                                    f"{rec.get(k)} here {prof[k]}")
    return rows, problems


def markdown(table: list[dict], largest: dict, rows: list[dict]) -> str:
    arms = list(dict.fromkeys(r["arm"] for r in table))
    iters = sorted({r["iteration"] for r in table})
    seeds = {a: sorted({r["seed"] for r in rows if r["arm"] == a}) for a in arms}
    cell = {(r["arm"], r["iteration"], r["metric"]): r for r in table}
    lines = [
        "# Question profile (fig:question_complexity's four quantities), gpu-small",
        "",
        "Made by `benchmarks/question_profile.py` from the committed questions of the runs "
        "behind docs/results/*.json (issue 51, item 3). Each cell: the mean over seeds, then "
        "the % change from the baseline's mean at the same iteration. #Q: valid questions of "
        "the iteration's 1,024; Tok/q: mean SmolLM2 tokens per valid question; Nums / q: mean "
        "distinct numeric values per valid question; Score: mean self-consistency acc of the "
        "valid questions (the paper does not define its 'Score'; mapped as in "
        "vdlib/data/paper_values.yaml). The paper's figure shows iteration 5 only; gpu-small "
        "ran 3.",
        "",
        "Seeds: " + "; ".join(f"{a} {', '.join(map(str, s))}" for a, s in seeds.items()) + ".",
        "",
    ]
    for metric in PROFILE_METRICS:
        lines += [f"**{LABELS[metric]}**", "",
                  "| arm | " + " | ".join(f"it. {t}" for t in iters) + " |",
                  "|---|" + "---|" * len(iters)]
        for arm in arms:
            cells = []
            for t in iters:
                r = cell.get((arm, t, metric))
                if r is None or r["mean"] is None:
                    cells.append("-")
                    continue
                v = f"{r['mean']:.0f}" if metric == "valid_questions" else f"{r['mean']:.3f}"
                if r["pct_change"] is not None:
                    v += f" ({r['pct_change']:+.1f} %)"
                cells.append(v)
            lines.append(f"| {arm} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["**Largest absolute change from the baseline, any iteration and quantity**", "",
              "| arm | largest change | quantity | iteration |", "|---|---|---|---|"]
    for arm, b in largest.items():
        lines.append(f"| {arm} | {b['pct_change']:+.1f} % | {LABELS[b['metric']]} | "
                     f"{b['iteration']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="Markdown table to write (and .json beside it)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    rows, problems = collect()
    table = profile_table(rows)
    largest = largest_changes(table)
    text = markdown(table, largest, rows)
    print(text)
    for p in problems:
        logger.error("disagreement: %s", p)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
        args.out.with_suffix(".json").write_text(
            json.dumps({"runs": rows, "table": table, "largest_changes": largest},
                       indent=1) + "\n", encoding="utf-8")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
