"""The paper's configuration as a run: several iterations back to back in ONE process, through
vdlib's own loop (``vdlib.loop.coevolution.run``), at a 4B/8B shape with dummy weights and the
real tokenizer (issue 49).

    python benchmarks/paper_run.py params/paper/main_table.yaml --tokenizer .q3tok \
        --bench-dir .bench --iterations 2 --questions 64 --steps 1 \
        --out $OUT/paper_run_h200.json

It is ``vdlib plan --measure --dummy-weights`` (:mod:`vdlib.app.plan_measure`: the same config
cuts, the same random-init checkpoint, the same stand-ins that hand scoring and the solver real
GSM8K problems because random weights never write a parseable question) run for
``--iterations`` iterations instead of one, with every counter kept per iteration and stage:

- seconds (each iteration's ``timing.json``), tokens generated through vLLM, tokens/s per GPU;
- vLLM engine starts (``build_llm``) and the run engine's weight pushes (vdlib's checkpoint
  pushes, ``RunEngine.push``, and TRL's policy pushes, ``VLLMGeneration.sync_weights``);
- peak GiB of every GPU (nvidia-smi every second, every process on the card).

The cuts (K, steps, lengths) are written into the JSON under ``cuts``. One GPU: every role on
one card under ``engine.lifetime: run`` (the paper's 2-GPU topology is projected from these
per-GPU rates in docs/SCALING.md and labelled so).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

logger = logging.getLogger("paper_run")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("params")
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--bench-dir", default=".bench")
    ap.add_argument("--work", default="/tmp/paper_run")
    ap.add_argument("--iterations", type=int, default=2)
    ap.add_argument("--questions", type=int, default=64)
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--engine", default="{}", help="JSON merged into the engine section")
    ap.add_argument("--max-len", type=int, default=None,
                    help="cut every output length (rollouts, questions, answers) to this")
    ap.add_argument("--alpha", type=float, default=0.75, help="both phases' alpha (VD75)")
    ap.add_argument("--no-prune", dest="prune", action="store_false",
                    help="keep every checkpoint (4B: 16 GB each, fp32)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")

    import torch
    import vllm

    from vdlib.app import plan_measure as pm
    from vdlib.app.plan_meter import Meter, instrument, time_calls
    from vdlib.config import layout, load_params, to_dict
    from vdlib.engines import engine_lifetime
    from vdlib.loop import coevolution
    from vdlib.utils.artifacts import atomic_write_text

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    cfg = pm._measured_config(args.params, work, 1, 32, Path(args.bench_dir), steps=args.steps,
                              questions=args.questions)
    folder, sha = pm._dummy_checkpoint(cfg.model.proposer, args.tokenizer, work)
    d = to_dict(cfg)
    d.update(iterations=args.iterations)
    d["model"].update(proposer=str(folder), solver=None)
    d["engine"].update(json.loads(args.engine))
    if args.max_len:
        for role in ("proposer", "solver"):
            d[role]["max_response_length"] = min(d[role]["max_response_length"], args.max_len)
        for sec in ("curriculum", "scoring"):
            d[sec]["max_new_tokens"] = min(d[sec]["max_new_tokens"], args.max_len)
    d["vocab_dropout"].update(alpha=args.alpha, phases="both")  # the params' first arm may be
    # the unmasked baseline; the run measures the masked method
    cfg = load_params(d)
    table = pm._real_work_table(pm._real_problems(Path(args.bench_dir)),
                                max(cfg.solver.max_steps * cfg.solver.global_batch_size, 64),
                                checkpoint=folder, num_questions=cfg.curriculum.num_questions)
    meter = Meter()
    instrument(meter)
    time_calls(engine_lifetime.RunEngine, "push", meter.add, "push_s", count="pushes")
    time_calls(engine_lifetime.RunEngine, "_start", meter.add, "run_engine_start_s",
               count="engine_starts")
    try:
        from trl.generation.vllm_generation import VLLMGeneration
        time_calls(VLLMGeneration, "sync_weights", meter.add, "trl_push_s", count="trl_pushes")
    except (ImportError, AttributeError):
        logger.warning("TRL's sync_weights not found: TRL's pushes are not counted")
    import vdlib.engines.vllm_backend as vb
    starts = {"n": 0}
    original_build = vb.build_llm

    def build(*a, **k):
        starts["n"] += 1
        meter.add("build_llm_calls", 1)
        return original_build(*a, **k)

    vb.build_llm = build
    run_dir = layout.run_path(cfg)
    out = Path(args.out)
    cuts = {"num_questions": cfg.curriculum.num_questions, "paper_num_questions": 8000,
            "proposer_steps": cfg.proposer.max_steps, "solver_steps": cfg.solver.max_steps,
            "iterations": args.iterations, "max_new_tokens": cfg.curriculum.max_new_tokens,
            "proposer_max_response_length": cfg.proposer.max_response_length,
            "scoring_max_new_tokens": cfg.scoring.max_new_tokens,
            "num_solver_samples": cfg.scoring.num_solver_samples,
            "alpha": args.alpha, "pruned_checkpoints": args.prune,
            "note": "dummy weights: every output runs to its token limit; generated questions "
                    "are replaced by GSM8K test questions before scoring, the curriculum by "
                    "GSM8K problems before the solver (vdlib plan --measure --dummy-weights)"}

    def save(error: str | None = None, done: bool = False) -> None:
        iters = {}
        for t in range(1, args.iterations + 1):
            it = layout.iteration_dir(run_dir, t)
            timing = {}
            if (it / "timing.json").exists():
                timing = json.loads((it / "timing.json").read_text())
            stages = {}
            for key, c in meter.c.items():
                if not key.endswith(f"@{t}"):
                    continue
                stage = key.rsplit("@", 1)[0]
                secs = timing.get(stage)
                tok = c.get("tokens", 0.0)
                stages[stage] = {
                    "seconds": round(secs, 1) if secs is not None else None,
                    "tokens": int(tok),
                    "tokens_per_s_per_gpu": round(tok / secs, 1) if secs and tok else None,
                    "engine_starts": int(c.get("build_llm_calls", 0)),
                    "engine_start_s": round(c.get("engine_start_s", 0.0), 1),
                    "weight_pushes": int(c.get("pushes", 0)),
                    "push_s": round(c.get("push_s", 0.0), 2),
                    "trl_weight_pushes": int(c.get("trl_pushes", 0)),
                    "trl_push_s": round(c.get("trl_push_s", 0.0), 2),
                    "train_s": round(c.get("train_s", 0.0), 1),
                    "peak_gib_per_gpu": {str(g): v for g, v in
                                         sorted(meter.peak.get(key, {}).items())},
                }
            iters[str(t)] = {"stages": stages, "timing_s": timing,
                             "seconds": round(sum(timing.values()), 1) if timing else None}
        doc = {"params": args.params, "shape": cfg.model.proposer, "card_name":
               torch.cuda.get_device_name(0), "gpus": torch.cuda.device_count(),
               "vllm_version": vllm.__version__, "torch": torch.__version__,
               "engine": to_dict(cfg)["engine"], "cuts": cuts, "tokenizer_sha256": sha,
               "iterations": iters, "setup": {k: dict(v) for k, v in meter.c.items()
                                               if "@" not in k},
               "setup_peak_gib": {k: dict(v) for k, v in meter.peak.items() if "@" not in k},
               "engine_starts_total": starts["n"], "torch_memory_at_stage_starts": boundaries,
               "error": error, "done": done}
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out, json.dumps(doc, indent=1) + "\n")

    boundaries: list[dict] = []

    def on_stage(t: int, stage: str) -> None:
        # what this process's PyTorch holds at each stage start: nvidia-smi's peaks count the
        # caching allocator's reserved blocks too, which a later trainer reuses but vLLM's
        # sleep-mode pool cannot (tells a freed-but-reserved block from a leak)
        boundaries.append({"before": f"{stage}@{t}",
                           "allocated_gib": round(torch.cuda.memory_allocated() / 2**30, 2),
                           "reserved_gib": round(torch.cuda.memory_reserved() / 2**30, 2)})
        save()
        meter.stage = f"{stage}@{t}"
        if args.prune:  # a proposer checkpoint no later stage reads: at 4B (16 GB a checkpoint,
            # fp32) 2 iterations then need 56 GB of disk, not 72 (the lent machine has 64).
            # The last proposer stays: the metrics stage reads its tokenizer (pruning it made
            # the first run stop in metrics@2, benchmarks/results/paper_run/)
            import shutil
            done = []
            if stage == "generate" and t >= 2:
                done.append(layout.role_model_dir(run_dir, t - 1, "proposer"))
            for p in done:
                shutil.rmtree(p, ignore_errors=True)
                logger.info("pruned %s (no later stage reads it)", p)

    meter.start()
    coevolution.STAGE_TABLE = table
    error = None
    start = time.perf_counter()
    try:
        coevolution.run(cfg, on_stage=on_stage, force=True)
    except Exception as e:  # noqa: BLE001 - what did not fit is a result
        error = f"{meter.stage}: {type(e).__name__}: {e}"
        logger.exception("paper_run stopped in %s", meter.stage)
    finally:
        meter.stop()
    meter.stage = "end"
    save(error, done=error is None)
    logger.info("paper_run: %.0f s, engine starts %d, error %s", time.perf_counter() - start,
                starts["n"], error)
    return 0 if error is None else 1


if __name__ == "__main__":
    raise SystemExit(main())
