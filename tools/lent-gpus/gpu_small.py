"""The GPU evidence run (issue 18) on the GPU machine: evaluation and export of a grid of
params/gpu-small/main_table.yaml (tools/lent-gpus/gpu_small.sh calls it).

  python tools/lent-gpus/gpu_small.py eval-base PARAMS --output-dir D
  python tools/lent-gpus/gpu_small.py eval-runs PARAMS --output-dir D --seeds 0 --arms vd75
  python tools/lent-gpus/gpu_small.py export PARAMS --output-dir D --seeds 0 --out OUT/file.json
  python tools/lent-gpus/gpu_small.py recompute PARAMS --generated G.jsonl.gz ... --out R.json
  python tools/lent-gpus/gpu_small.py merge PARAMS --parts OLD.json NEW.json --out MERGED.json \
      [--eval-log ARM SEED LOG ...]

``eval-base`` evaluates the starting checkpoint (the format-warm-started SmolLM2), ``eval-runs``
each listed run's final solver (vLLM, the params' evaluation protocol; a complete evaluation is
read back). ``export`` writes the results JSON (vdlib.report.results.collect_results: one record per
arm, seed and iteration, with ``card``, ``vllm_version``, ``K``, ``M``, ``iterations``) and
copies each run's small files (metrics, timing, questions gzipped, grid logs) beside it. An
iteration that the machine hold cut after its curriculum stage (its solver phase and metrics
stage not run) still gives a record, marked ``"partial": "before the solver phase"``: its
generation and curriculum metrics, computed on the machine with the metrics stage's own
function (``metrics_partial.json`` in the copied files).
``recompute`` (on any machine) gives the generation-side metrics of an iteration whose later
stages did not finish (valid fraction, Self-BLEU, Vendi, novelty, cumulative Vendi, distinct
token ids) from its ``generated.jsonl`` alone, with the loop's own functions; run it on an
iteration that did finish to check that it reproduces the loop's numbers. ``merge`` (on any
machine) joins exports of different machine holds into one file (vdlib.report.results.merge_results:
a later export's run replaces the same run's records in an earlier one). ``--eval-log``
adds the pass@1 of an evaluation that the machine hold cut short, read from its log: each
benchmark whose every evaluation run finished, on the run's last record, which then names the
benchmarks that did not finish (``pass1_unfinished``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import re
import shutil
import sys
from pathlib import Path

from vdlib.config import layout
from vdlib.config.experiment import load_params
from vdlib.evaluation import EvalSummary
from vdlib.experiments.evaluate import evaluate_base, evaluate_runs, read_evaluation
from vdlib.grid.launch import plan_grid
from vdlib.metrics.cov_activity import backfill_cov_fields
from vdlib.report.results import (
    PASS1_PREFIX,
    RECORD_FIELDS,
    collect_results,
    load_results,
    merge_results,
    record_pooling_rule,
)
from vdlib.utils.archive import Member, resolve

PARTIAL = "before the solver phase"
PARTIAL_FILE = "metrics_partial.json"

logger = logging.getLogger("gpu_small")


def _cfg(args: argparse.Namespace):
    return load_params(args.params, {"output_dir": args.output_dir})


def _runs(cfg, seeds, arms=None) -> dict:
    return {(r.arm, r.seed): r.run_dir for r in plan_grid(cfg, seeds)
            if arms is None or r.arm in arms}


def final_runs(runs: dict, iterations: int) -> dict:
    """The runs whose last planned iteration (``iterations``) finished: only their solvers are
    final. The others are left out with a warning, since evaluating an earlier solver would
    spend the machine hold's minutes on a number that the report cannot use as final."""
    done = {}
    for key, run_dir in runs.items():
        if (layout.iteration_dir(Path(run_dir), iterations) / layout.METRICS_FILE).is_file():
            done[key] = run_dir
        else:
            logger.warning("%s-seed%s: iteration %d has not finished; its solver is not final, "
                           "so it is not evaluated", key[0], key[1], iterations)
    return done


def _cut_iteration(run_dir: Path) -> tuple[int, Path] | None:
    """The first iteration whose curriculum exists but whose metrics stage did not run."""
    for t, folder in layout.iteration_dirs(run_dir, layout.CURRICULUM_FILE):
        if not (folder / layout.METRICS_FILE).is_file():
            return t, folder
    return None


def partial_records(runs: dict) -> list[dict]:
    """A record (``partial``) per run cut after its curriculum stage, from the metrics stage's
    own function over that iteration's files; the metrics also go to ``metrics_partial.json``
    in the iteration folder."""
    from vdlib.engines.models import load_tokenizer
    from vdlib.loop.alpha_records import run_phase_alphas  # the adaptive schedule reads records
    from vdlib.metrics.run_metrics import compute_iteration_metrics, config_metric_kwargs
    from vdlib.utils.artifacts import atomic_write_json

    records = []
    for (arm, seed), run_dir in runs.items():
        cut = _cut_iteration(Path(run_dir))
        if cut is None:
            continue
        t, folder = cut
        rcfg = load_params(layout.config_path(run_dir))
        previous = [f for s, f in layout.iteration_dirs(Path(run_dir)) if s < t]
        proposer = folder / "proposer_model"
        m = compute_iteration_metrics(  # the metrics stage's settings, without costly extras
            folder, t, run_phase_alphas(rcfg, run_dir, t), previous_dirs=previous,
            tokenizer=load_tokenizer(str(proposer if proposer.is_dir() else rcfg.model.proposer)),
            **{**config_metric_kwargs(rcfg), "extra": ()})
        atomic_write_json(folder / PARTIAL_FILE, m)
        records.append({"arm": arm, "seed": seed, "iteration": t,
                        **{k: m.get(k) for k in RECORD_FIELDS}, "partial": PARTIAL})
        logger.info("%s-seed%s: iteration %d cut %s; its generation metrics recorded", arm,
                    seed, t, PARTIAL)
    return records


def _read_eval(run_dir: Path, cfg) -> EvalSummary | None:
    """The final solver's finished evaluation (the last finished iteration's), or None."""
    finished = layout.iteration_dirs(run_dir, layout.METRICS_FILE)
    if not finished:
        return None
    return read_evaluation(layout.evaluation_dir(run_dir, "solver", finished[-1][0]), cfg)


_RUN_LINE = re.compile(r"evaluation\.runner: (\S+) run (\d+) \(seed \d+\): pass@1 "
                       r"([0-9.]+) over (\d+) items")


def pass1_from_log(text: str, runs: int, benchmarks: list[str]) -> dict:
    """Record fields (``pass1_<b>``, ``pass1_<b>_runs`` in %, ``pass1_unfinished``) from an
    evaluation log's per-run lines; a benchmark counts only if all ``runs`` runs finished.

    >>> line = "x evaluation.runner: {} run {} (seed 0): pass@1 {} over 9 items"
    >>> log = "\\n".join([line.format("gsm8k", 0, 0.0152), line.format("gsm8k", 1, 0.0136),
    ...                    line.format("math500", 0, 0.004)])
    >>> pass1_from_log(log, 2, ["gsm8k", "math500"])
    {'pass1_gsm8k': 1.44, 'pass1_gsm8k_runs': [1.52, 1.36], 'pass1_unfinished': ['math500']}
    """
    accs: dict[str, dict[int, float]] = {}
    for bench, run, acc, _n in _RUN_LINE.findall(text):
        accs.setdefault(bench, {})[int(run)] = float(acc)
    out: dict = {}
    for b in benchmarks:
        got = accs.get(b, {})
        if sorted(got) == list(range(runs)):
            values = [round(100.0 * got[r], 4) for r in range(runs)]
            out[f"{PASS1_PREFIX}{b}"] = round(sum(values) / runs, 4)
            out[f"{PASS1_PREFIX}{b}_runs"] = values
    out["pass1_unfinished"] = [b for b in benchmarks if f"{PASS1_PREFIX}{b}" not in out]
    return out


def _load_part(spec: str) -> dict:
    """A ``--parts`` entry: ``FILE``, or ``FILE::RUN,RUN`` to take only those runs of it (the
    base record always comes along; ``arms`` then lists only the arms taken). Its runs record
    the entry as their ``source``. ``FILE`` may run through a zip (read in place:
    ``docs/results/archives/gpu_small_main_h200x1_h200x4.zip/h200x1/export.json``)."""
    path, _, only = spec.partition("::")
    where = resolve(path)  # a part may be a member of a committed archive (docs/results/archives)
    data = load_results(path, json.loads(where.read_text(encoding="utf-8"))
                        if isinstance(where, Member) else None)
    data["source"] = path
    if only:
        keep = set(only.split(","))
        found = {layout.arm_run_id(r["arm"], r["seed"]) for r in data["records"]
                 if r["arm"] != "base"}
        if keep - found:
            raise SystemExit(f"--parts {spec}: no run {sorted(keep - found)} in {path}; "
                             f"it has {sorted(found)}")
        data["records"] = [r for r in data["records"] if r["arm"] == "base"
                           or layout.arm_run_id(r["arm"], r["seed"]) in keep]
        data["seeds"] = sorted({r["seed"] for r in data["records"] if r["arm"] != "base"})
        taken = {r["arm"] for r in data["records"]}
        data["arms"] = [a for a in data.get("arms") or [] if a in taken]
    return data


def _cov_from_runs(data: dict, path: str) -> None:
    """KL-Cov / Clip-Cov records exported before they carried their activity get it from the
    part's own run folders (``<part dir>/runs/<arm>-seed<s>/iter_<t>/proposer_train.json``,
    read in place through an archive): :func:`vdlib.metrics.cov_activity.backfill_cov_fields`."""
    runs = Path(path).parent / "runs"

    def read_log(arm: str, seed: int, t: int) -> list | None:
        f = resolve(str(runs / layout.arm_run_id(arm, seed) / f"iter_{t}" / "proposer_train.json"))
        if not f.exists():
            return None
        return json.loads(f.read_text(encoding="utf-8")).get("log_history")

    n = backfill_cov_fields(data["records"], read_log)
    logger.info("%s: KL-Cov / Clip-Cov activity added to %d records from its runs", path, n)


def _rename_arm(data: dict, old: str, new: str, path: str) -> None:
    """Arm ``old`` of a part as ``new`` (e.g. the KL-Cov runs that never acted as
    ``kl_cov_inert``); its runs keep their folders, which the part's ``source`` names."""
    if old not in {r["arm"] for r in data["records"]}:
        raise SystemExit(f"--rename-arm {path} {old} {new}: no arm {old!r} in that part")
    for r in data["records"]:
        if r["arm"] == old:
            r["arm"] = new
    data["arms"] = [new if a == old else a for a in data.get("arms") or []]


def _merge(args: argparse.Namespace) -> int:
    parts = []
    for spec in args.parts:
        part = _load_part(spec)
        path = spec.partition("::")[0]
        if args.cov_from_runs:
            _cov_from_runs(part, path)
        for file, old, new in args.rename_arm or []:
            if file == path:
                _rename_arm(part, old, new, path)
        parts.append(part)
    unknown = {f for f, _, _ in args.rename_arm or []} - {s.partition("::")[0] for s in args.parts}
    if unknown:
        raise SystemExit(f"--rename-arm: {sorted(unknown)} is not one of the --parts")
    data = merge_results(parts)
    cfg = load_params(args.params)
    for arm, seed, log in args.eval_log or []:
        recs = [r for r in data["records"] if r["arm"] == arm and r["seed"] == int(seed)]
        if not recs:
            raise SystemExit(f"--eval-log {arm} {seed}: no such run in the parts")
        last = max(recs, key=lambda r: r["iteration"])
        last.update(pass1_from_log(Path(log).read_text(encoding="utf-8"), cfg.evaluation.runs,
                                   list(cfg.evaluation.benchmarks)))
        data["runs"][layout.arm_run_id(arm, int(seed))]["evaluated"] = "partial (log)"
    for key, text in args.note or []:
        data[key] = text
    record_pooling_rule(data, cfg.evaluation)  # the rule the file's pass@1 cells pool by
    data = {k: v for k, v in data.items() if k != "records"} | {"records": data["records"]}
    Path(args.out).write_text(json.dumps(data, indent=1) + "\n")
    logger.info("%d records from %d parts -> %s", len(data["records"]), len(args.parts), args.out)
    return 0


def _recompute(cfg, files: list[str], out: Path) -> int:
    from vdlib.engines.models import load_tokenizer
    from vdlib.metrics import diversity as div
    from vdlib.metrics.embeddings import embed

    tok = load_tokenizer(cfg.model.proposer)
    results = {}
    for f in files:
        opener = gzip.open if f.endswith(".gz") else open
        with opener(f, "rt", encoding="utf-8") as src:
            rows = [json.loads(line) for line in src if line.strip()]
        texts = [r["question"] for r in rows if r.get("valid") and r.get("question")]
        emb = embed(texts, cfg.metrics.embedder)
        m = {"generated": len(rows), "valid_questions": len(texts),
             "valid_fraction": round(len(texts) / max(len(rows), 1), 6),
             "self_bleu": div.self_bleu(texts), "vendi": div.vendi_score(emb),
             "novelty_rate": div.novelty_rate(emb, [], threshold=cfg.metrics.novelty_threshold),
             "cumulative_vendi": div.cumulative_vendi([emb])[-1],
             "unique_tokens": div.unique_tokens(texts, tok)}
        results[Path(f).name] = {k: (float(v) if hasattr(v, "item") else v) for k, v in m.items()}
        logger.info("%s: %s", Path(f).name, results[Path(f).name])
    out.write_text(json.dumps(results, indent=1) + "\n")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("step", choices=["eval-base", "eval-runs", "export", "recompute", "merge"])
    p.add_argument("params")
    p.add_argument("--output-dir", default="outputs")
    p.add_argument("--seeds", nargs="+", type=int)
    p.add_argument("--arms", nargs="+")
    p.add_argument("--out", help="export, recompute: the JSON to write")
    p.add_argument("--generated", nargs="+", help="recompute: generated.jsonl(.gz) files")
    p.add_argument("--parts", nargs="+",
                   help="merge: results JSONs, earliest first; FILE::RUN,RUN takes only those runs")
    p.add_argument("--note", nargs=2, action="append", metavar=("KEY", "TEXT"),
                   help="merge: set a top-level field (e.g. completed, solver_eval)")
    p.add_argument("--eval-log", nargs=3, action="append", metavar=("ARM", "SEED", "LOG"),
                   help="merge: pass@1 of a cut-short evaluation, from its log (repeatable)")
    p.add_argument("--rename-arm", nargs=3, action="append", metavar=("FILE", "OLD", "NEW"),
                   help="merge: arm OLD of the part FILE as NEW (repeatable)")
    p.add_argument("--cov-from-runs", action="store_true",
                   help="merge: KL-Cov / Clip-Cov records without their activity get it from "
                        "the part's runs/<run>/iter_<t>/proposer_train.json")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.step == "merge":
        return _merge(args)
    cfg = _cfg(args)
    if args.step == "recompute":
        return _recompute(cfg, args.generated, Path(args.out))
    if args.step == "eval-base":
        s = evaluate_base(cfg)
        logger.info("base: %s", {b: round(r.mean, 4) for b, r in s.results.items()})
        return 0
    runs = _runs(cfg, args.seeds, args.arms)
    if args.step == "eval-runs":
        for key, s in evaluate_runs(final_runs(runs, cfg.iterations), cfg, "solver").items():
            logger.info("%s: %s", key, {b: round(r.mean, 4) for b, r in s.results.items()})
        return 0
    import importlib.metadata

    import torch

    try:
        vllm_version = importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:  # a CPU dry run
        vllm_version = None

    base_dir = layout.base_evaluation_dir(cfg.output_dir, cfg.experiment, cfg.solver_model)
    base = read_evaluation(base_dir, cfg)
    evals = {k: s for k, s in ((k, _read_eval(Path(d), cfg)) for k, d in runs.items()) if s}
    meta = {"card": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
            "vllm_version": vllm_version, "K": cfg.curriculum.num_questions,
            "M": cfg.scoring.num_solver_samples, "iterations": cfg.iterations,
            "params": args.params, "arms": list(cfg.arms), "seeds": args.seeds,
            "proposer_steps": cfg.proposer.max_steps, "solver_steps": cfg.solver.max_steps,
            "evaluation": {"benchmarks": list(cfg.evaluation.benchmarks),
                           "runs": cfg.evaluation.runs,
                           "temperature": cfg.evaluation.temperature,
                           "max_new_tokens": cfg.evaluation.max_new_tokens,
                           "items": {b: r.n for b, r in base.results.items()} if base else None}}
    data = collect_results(runs, evals, base, meta, cfg.evaluation)  # + the pooling rule
    data["records"] += partial_records(runs)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n")
    files = out.parent / "runs"
    for (arm, seed), run_dir in runs.items():
        for t, folder in layout.iteration_dirs(Path(run_dir)):
            if not any((folder / f).is_file() for f in (layout.METRICS_FILE, PARTIAL_FILE)):
                continue
            dest = files / f"{arm}-seed{seed}" / f"iter_{t}"
            dest.mkdir(parents=True, exist_ok=True)
            for name in ("metrics.json", PARTIAL_FILE, "timing.json", "proposer_train.json",
                         "solver_train.json"):
                if (folder / name).is_file():
                    shutil.copy(folder / name, dest / name)
            with open(folder / layout.QUESTIONS_FILE, "rb") as src, \
                    gzip.open(dest / (layout.QUESTIONS_FILE + ".gz"), "wb") as dst:
                shutil.copyfileobj(src, dst)
    grid = layout.grid_dir(cfg.output_dir, cfg.experiment)
    for log in sorted(grid.glob("*.log")) if grid.is_dir() else []:
        shutil.copy(log, files / log.name)
    logger.info("%d records -> %s", len(data["records"]), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
