"""One co-evolution iteration timed with two engines on the same card, in the same session.

Runs ``vdlib run PARAMS --engine E`` for each engine (default ``hf`` then ``vllm``), each in its
own process and output folder, reads every stage's wall time from the runs' ``timing.json``,
and writes the per-stage seconds, the total and the ratio hf / vllm (the speed-up), plus
whether the two runs' artifact trees are the same (same files, same folders):

    python benchmarks/iteration_timing.py params/smollm2/timed_iteration.yaml \\
        --out benchmarks/results/iteration_timing_h100.json

A run that finished before is not re-run (``vdlib run`` resumes; its recorded times are read),
so a command cut off by a time limit can be repeated. The format warm-start of the packaged
model is cached once per machine: build it first (any run of the same params) so that neither
engine's proposer stage pays for it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

logger = logging.getLogger("iteration_timing")

SKIP_PARTS = {".trl_proposer", ".trl_solver"}


def artifact_tree(run_dir: Path) -> list[str]:
    """Relative paths of a run's files, without TRL scratch folders."""
    out = []
    for p in sorted(run_dir.rglob("*")):
        rel = p.relative_to(run_dir)
        if p.is_file() and not SKIP_PARTS & set(rel.parts):
            out.append(str(rel))
    return out


def run_engine(params: str, engine: str, output_dir: Path, timeout: float,
               iterations: int | None = None, timed: int = 1) -> dict:
    start = time.perf_counter()
    cmd = [sys.executable, "-m", "vdlib.app.cli", "run", params, "--engine", engine,
           "--output-dir", str(output_dir)]
    if iterations:
        cmd += ["--iterations", str(iterations)]
    logger.info("running: %s", " ".join(cmd))
    proc = subprocess.run(cmd, timeout=timeout, env=os.environ.copy())
    wall = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"{engine}: vdlib run exited {proc.returncode}")
    runs = sorted(p.parent for p in output_dir.rglob("manifest.json"))
    if len(runs) != 1:
        raise SystemExit(f"{engine}: expected one run folder under {output_dir}, got {runs}")
    run_dir = runs[0]
    timing = run_dir / f"iter_{timed}" / "timing.json"
    stages = {k: float(v) for k, v in json.loads(timing.read_text()).items()}
    iterations_done = sorted(int(p.parent.name[5:]) for p in run_dir.glob("iter_*/metrics.json"))
    tree = [f for f in artifact_tree(run_dir)
            if not f.startswith("iter_") or f.startswith(f"iter_{timed}/")]
    return {"engine": engine, "run_dir": str(run_dir), "timed_iteration": timed,
            "iterations_done": iterations_done, "stages_s": stages,
            "total_s": round(sum(stages.values()), 2), "process_wall_s": round(wall, 1),
            "tree": tree, "metrics": json.loads((timing.parent / "metrics.json").read_text())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("params", help="params YAML (one iteration), e.g. "
                    "params/smollm2/timed_iteration.yaml")
    ap.add_argument("--engines", nargs="+", default=["hf", "vllm"])
    ap.add_argument("--work-dir", default="outputs/iteration_timing",
                    help="one output folder per engine below this")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per engine run")
    ap.add_argument("--iterations", nargs="*", default=[], metavar="ENGINE=N",
                    help="iterations per engine (default: the params'); the timed one is "
                    "--timed-iteration, e.g. vllm=2 makes the vllm run also the loop run")
    ap.add_argument("--timed-iteration", type=int, default=1)
    ap.add_argument("--out", default=None, help="JSON result path")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")

    import torch

    card = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    per_engine = dict(x.split("=", 1) for x in args.iterations)
    results = [run_engine(args.params, e, Path(args.work_dir) / e, args.timeout,
                          int(per_engine[e]) if e in per_engine else None, args.timed_iteration)
               for e in args.engines]
    report = {"card": card, "params": args.params, "runs": results}
    if len(results) == 2:
        a, b = results
        report["speedup_total"] = round(a["total_s"] / b["total_s"], 2)
        report["speedup_by_stage"] = {
            s: round(a["stages_s"][s] / b["stages_s"][s], 2)
            for s in a["stages_s"] if b["stages_s"].get(s)}
        report["same_artifact_tree"] = a["tree"] == b["tree"]
        report["tree_difference"] = sorted(set(a["tree"]) ^ set(b["tree"]))
    try:
        import vllm

        report["vllm_version"] = vllm.__version__
    except ImportError:
        report["vllm_version"] = None
    text = json.dumps(report, indent=1)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
    rows = [f"{'stage':<12}" + "".join(f"{r['engine']:>10}" for r in results)]
    for stage in results[0]["stages_s"]:
        rows.append(f"{stage:<12}" + "".join(f"{r['stages_s'].get(stage, 0):>10.1f}"
                                             for r in results))
    rows.append(f"{'total':<12}" + "".join(f"{r['total_s']:>10.1f}" for r in results))
    print("\n".join(rows))
    if "speedup_total" in report:
        print(f"speed-up {results[0]['engine']}/{results[1]['engine']}: "
              f"{report['speedup_total']}x; same artifact tree: {report['same_artifact_tree']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
