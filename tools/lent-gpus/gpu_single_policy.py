"""Single-policy GRPO at GPU scale (issue 30; notebook 04's runs, one process per run):
GRPO of SmolLM2-135M on gsm_symbolic with and without a light mask (``params/gpu-small/
single_policy.yaml``: arms baseline and vd95, 3 seeds, 100 steps, a checkpoint every 10).

    python tools/lent-gpus/gpu_single_policy.py run PARAMS --arm vd95 --seed 0 --output-dir D
    python tools/lent-gpus/gpu_single_policy.py eval PARAMS --output-dir D --arm vd95 --seed 0
    python tools/lent-gpus/gpu_single_policy.py export PARAMS --output-dir D --out FILE.json
    python tools/lent-gpus/gpu_single_policy.py merge PARAMS --parts A.json B.json --out FILE.json
    python tools/lent-gpus/gpu_single_policy.py data PARAMS     # here, before the GPU session

``data`` writes every seed's training problems into the params' ``evaluation.data_dir`` (.bench/
gsm_symbolic/seed<10000+seed>_n<N>.jsonl): the lent machines have no reasoning-gym, and
:func:`vdlib.loop.policy.training_problems` reads that copy there (the same items).

``run`` trains one run (notebook 04's :func:`vdlib.loop.policy.run_single_policy`; started again
it goes on from its last checkpoint, and a finished run is skipped); ``eval`` evaluates its
policy on the params' benchmarks with the params' evaluation runs (GSM8K and MATH500, 3 runs at
T = 0.7) and the starting checkpoint once per output folder (``--base``); ``export`` writes
what exists as one JSON: per run its per-step policy entropy and mean reward (TRL's log
history), its pass@1, the base checkpoint's, and the settings (card, vLLM version, sizes).
``tools/lent-gpus/gpu_single_policy.sh`` runs them on a lent machine in 10-minute commands.
``merge`` joins the exports of lanes that ran different seeds (each lane's export lists every
run of the params, finished or not): each run from the one part that finished it, the
starting checkpoint's pass@1 from the part that evaluated it, the settings checked equal.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import logging
import sys
from pathlib import Path

from vdlib.config import layout
from vdlib.config.experiment import load_params
from vdlib.experiments.experiment_results import merge_single_policy
from vdlib.report.results import record_pooling_rule
from vdlib.utils.archive import resolve

logger = logging.getLogger("gpu_single_policy")


def _grid(params: str, output_dir: str) -> dict:
    from vdlib.grid.launch import grid_configs

    return grid_configs(load_params(params, {"output_dir": output_dir}))


def _summary(summary) -> dict | None:
    """Per benchmark: n, accuracies, seeds, mean, se (EvalSummary's own serialisation)."""
    return None if summary is None else summary.to_dict()["benchmarks"]


def export(params: str, output_dir: str) -> dict:
    """The experiment's records from the run folders under ``output_dir`` (pure reading)."""
    from vdlib.experiments.evaluate import read_evaluation

    grid = _grid(params, output_dir)
    cfg = next(iter(grid.values()))
    runs = []
    for (arm, seed), c in grid.items():
        run_dir = layout.run_path(c)
        train = run_dir / layout.POLICY_TRAIN_FILE
        log = json.loads(train.read_text(encoding="utf-8")) if train.is_file() else None
        history = (log or {}).get("log_history", [])
        runs.append({
            "arm": arm, "seed": seed, "finished": log is not None,
            "alpha_train": (log or {}).get("alpha_train"),
            "mean_reward": (log or {}).get("mean_reward"),
            "steps": [{"step": int(h.get("step", i + 1)), "entropy": h.get("entropy"),
                       "reward": h.get("reward")}
                      for i, h in enumerate(r for r in history if "entropy" in r)],
            "pass1": _summary(read_evaluation(layout.evaluation_dir(run_dir, "policy"), c)),
        })
    base_dir = layout.base_evaluation_dir(cfg.output_dir, cfg.experiment, cfg.model.proposer)
    try:
        vllm_version = importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:  # a CPU dry run
        vllm_version = None
    try:
        import torch

        card = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    except ImportError:  # pragma: no cover - torch is a core dependency
        card = "cpu"
    return {"experiment": cfg.experiment, "params": params, "card": card,
            "vllm_version": vllm_version, "steps_planned": cfg.solver.max_steps,
            "batch": {"prompts": cfg.solver.global_batch_size,
                      "generations": cfg.solver.num_generations,
                      "max_response_length": cfg.solver.max_response_length},
            "dataset": cfg.single_policy.dataset,
            # the starting checkpoint (a run from the raw model and one from the format
            # warm-start answer different questions: merge refuses to mix them)
            "warm_start": dataclasses.asdict(cfg.warm_start),
            "evaluation": {"benchmarks": list(cfg.evaluation.benchmarks),
                           "runs": cfg.evaluation.runs,
                           "temperature": cfg.evaluation.temperature,
                           # the pooling rule vdlib results pools pass@1 by
                           "per_seed": cfg.evaluation.per_seed,
                           "se_ddof": cfg.evaluation.se_ddof},
            "base_pass1": _summary(read_evaluation(base_dir, cfg)), "runs": runs}


def merge(parts: dict[str, dict], experiment: str | None = None) -> dict:
    """One export from several (name -> export):
    :func:`vdlib.experiments.experiment_results.merge_single_policy` (each (arm, seed) from the
    part that finished it, shared settings checked), after checking that the parts are the
    params' ``experiment``."""
    if experiment is not None and parts:
        first = parts[next(iter(parts))]
        if first.get("experiment") != experiment:
            raise ValueError(f"merge: the parts are experiment {first.get('experiment')!r}, "
                             f"the params {experiment!r}")
    return merge_single_policy(parts)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("step", choices=["run", "eval", "export", "data", "merge"])
    p.add_argument("params")
    p.add_argument("--output-dir", default="outputs")
    p.add_argument("--arm")
    p.add_argument("--seed", type=int)
    p.add_argument("--base", action="store_true", help="eval: the starting checkpoint")
    p.add_argument("--out", help="export, merge: the JSON to write")
    p.add_argument("--parts", nargs="+", default=[], help="merge: the lanes' exports")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.step == "merge":
        if not args.parts or not args.out:
            p.error("merge needs --parts FILE... and --out FILE")
        try:
            cfg = load_params(args.params)
            data = merge({Path(f).as_posix(): json.loads(resolve(f).read_text(encoding="utf-8"))
                          for f in args.parts}, cfg.experiment)
            record_pooling_rule(data, cfg.evaluation)  # the rule its pass@1 cells pool by
        except (OSError, ValueError) as e:  # a missing or unreadable part, or one that differs
            p.error(str(e))
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        logger.info("%d runs (%d finished) from %d parts -> %s", len(data["runs"]),
                    sum(bool(r["finished"]) for r in data["runs"]), len(args.parts), args.out)
        return 0
    if args.step == "export":
        data = export(args.params, args.output_dir)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        logger.info("%d runs (%d finished) -> %s", len(data["runs"]),
                    sum(r["finished"] for r in data["runs"]), args.out)
        return 0
    grid = _grid(args.params, args.output_dir)
    if args.step == "data":
        from vdlib.evaluation.benchmarks import write_stand_in_copy
        from vdlib.loop.policy import training_seed

        for c in {c.seed: c for c in grid.values()}.values():  # one file a seed
            sp = c.single_policy
            if sp.dataset == "gsm_symbolic" and c.evaluation.data_dir:
                logger.info("wrote %s", write_stand_in_copy(
                    "gsm_symbolic", c.evaluation.data_dir, sp.train_examples,
                    training_seed(c.seed)))
        return 0
    if args.step == "eval" and args.base:
        from vdlib.experiments.evaluate import evaluate_base

        cfg = next(iter(grid.values()))
        s = evaluate_base(cfg, cfg.model.proposer)
        logger.info("base: %s", {b: round(r.mean, 4) for b, r in s.results.items()})
        return 0
    if (args.arm, args.seed) not in grid:
        p.error(f"--arm {args.arm} --seed {args.seed}: not a run of {args.params}; runs: "
                f"{', '.join(f'{a} {s}' for a, s in grid)}")
    c = grid[(args.arm, args.seed)]
    if args.step == "run":
        from vdlib.loop.policy import run_single_policy

        logger.info("trained: %s", run_single_policy(c))
        return 0
    from vdlib.experiments.evaluate import evaluate_runs

    if not (layout.policy_model_dir(layout.run_path(c)) / "config.json").is_file():
        logger.info("%s seed %d: not trained yet; nothing to evaluate", args.arm, args.seed)
        return 0
    s = evaluate_runs({(args.arm, args.seed): layout.run_path(c)}, c, "policy")
    logger.info("%s seed %d: %s", args.arm, args.seed,
                {b: round(r.mean, 4) for b, r in s[(args.arm, args.seed)].results.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
