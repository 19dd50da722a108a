"""Where a co-evolution iteration's wall time goes, under the old and the new engine lifetime.

Runs one arm of a params file (default: params/gpu-small/main_table.yaml, baseline, seed 0) for
N iterations in THIS process with ``engine.lifetime`` = ``stage`` (an engine per sampling stage,
TRL's own engine per trainer) or ``run`` (one engine for the run, asleep between uses, weights
pushed in memory), and records per iteration: the stages' wall seconds (the run's
``timing.json``), start-up seconds (vLLM engine starts, trainer builds, transformers model
loads), engine starts, weight pushes, generated tokens (every ``vllm.LLM.generate`` output) and
optimizer-update seconds (TRL's ``training_step`` minus its generation-and-scoring). Before the
run, the same process measures vLLM's generation throughput on scoring-shaped work (256 GSM8K
prompts x n = 10, the params' answer length and engine mode, the run's base solver), so that

    floor_s = generated_tokens / tokens_per_s + update_s,   wall_over_floor = wall_s / floor_s.

One lifetime per invocation, each in its own work folder; the results of both go into one JSON
(``--out``; an existing file's other lifetime is kept), so that both run on one machine, alone
on the card, one after the other:

    python benchmarks/iteration_profile.py --lifetime run   --out $OUT/iteration_profile_h100.json
    python benchmarks/iteration_profile.py --lifetime stage --out $OUT/iteration_profile_h100.json

A run cut off by a time limit resumes when the same command runs again (the loop's resume; the
iterations already profiled are kept in ``<work>/<lifetime>/profile_partial.json``; a resumed
run-lifetime engine starts again, and the record says so).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

logger = logging.getLogger("iteration_profile")


class Profile:
    """Per-iteration counters, fed by the patches of :func:`instrument`."""

    def __init__(self) -> None:
        self.t = 0
        self.it: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.paused = False  # the throughput measurement is not part of any iteration

    def add(self, key: str, value: float) -> None:
        if not self.paused:
            self.it[self.t][key] += value


def _timed(owner: Any, name: str, prof: Profile, key: str, count: str | None = None) -> None:
    from vdlib.app.plan_measure import time_calls

    time_calls(owner, name, prof.add, key, count)


def instrument(prof: Profile) -> None:
    """Patch vLLM, TRL and vdlib entry points to count into ``prof`` (this process only)."""
    import trl.generation.vllm_generation as trl_vllm
    import vllm

    import vdlib.engines.models as models
    import vdlib.loop.model_store as model_store
    import vdlib.loop.stages as stages
    import vdlib.loop.trainer as trainer
    from vdlib.engines.engine_lifetime import RunEngine

    original_init = vllm.LLM.__init__

    def llm_init(self: Any, *args: Any, **kwargs: Any) -> None:
        start = time.perf_counter()
        original_init(self, *args, **kwargs)
        prof.add("engine_start_s", time.perf_counter() - start)
        prof.add("engine_starts", 1)

    vllm.LLM.__init__ = llm_init
    if getattr(trl_vllm, "LLM", None) is not None:
        trl_vllm.LLM = vllm.LLM
    original_generate = vllm.LLM.generate

    def generate(self: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        outs = original_generate(self, *args, **kwargs)
        prof.add("generate_s", time.perf_counter() - start)
        prof.add("generated_tokens", sum(len(c.token_ids) for o in outs for c in o.outputs))
        return outs

    vllm.LLM.generate = generate
    _timed(trainer.MaskedGRPOTrainer, "__init__", prof, "trainer_build_s", "trainer_builds")
    _timed(trainer.MaskedGRPOTrainer, "training_step", prof, "training_step_s")
    _timed(trainer.MaskedGRPOTrainer, "_generate_and_score_completions", prof,
           "generate_and_score_s")
    for mod in (models, model_store, stages):
        if hasattr(mod, "load_model"):
            _timed(mod, "load_model", prof, "model_load_s", "model_loads")
    _timed(model_store.ModelStore, "save_model", prof, "save_s")
    _timed(RunEngine, "push", prof, "push_s", "pushes")
    _timed(RunEngine, "sleep", prof, "sleep_wake_s")
    _timed(RunEngine, "wake", prof, "sleep_wake_s")


def measure_throughput(cfg: Any, bench_dir: str, prof: Profile) -> dict[str, Any]:
    """Generated tokens per second of a plain engine on scoring-shaped work (256 GSM8K
    prompts x n = 10 at the params' scoring settings), on the run's base solver."""
    from vdlib.engines.models import checkpoint_path, load_tokenizer
    from vdlib.engines.setting import vllm_max_len
    from vdlib.engines.vllm_backend import build_llm, require_vllm, shutdown_llm
    from vdlib.loop.model_store import ModelStore
    from vdlib.method.prompts import solver_prompt

    prof.paused = True
    store = ModelStore(cfg)
    path = checkpoint_path(store.solver(0), cfg.model.cache_dir)
    tok = load_tokenizer(path)
    rows = [json.loads(x) for x in Path(bench_dir, "gsm8k", "test.jsonl").read_text().splitlines()
            if x.strip()][:256]
    prompts = [solver_prompt(tok, r["question"]) for r in rows]
    s = cfg.scoring
    llm = build_llm(path, dtype=cfg.model.dtype, max_model_len=vllm_max_len(1024, s.max_new_tokens),
                    gpu_memory_utilization=cfg.engine.gpu_memory_utilization,
                    enforce_eager=cfg.engine.enforce_eager,
                    **({"kv_cache_memory_bytes": int(cfg.engine.kv_cache_gb * 2**30)}
                       if cfg.engine.kv_cache_gb else {}))
    params = require_vllm().SamplingParams(n=s.num_solver_samples, temperature=s.temperature,
                                           top_p=s.top_p, max_tokens=s.max_new_tokens, seed=0)
    ids = [{"prompt_token_ids": tok(p, add_special_tokens=False)["input_ids"]} for p in prompts]
    llm.generate(ids[:8], params, use_tqdm=False)  # warm-up
    start = time.perf_counter()
    outs = llm.generate(ids, params, use_tqdm=False)
    seconds = time.perf_counter() - start
    tokens = sum(len(c.token_ids) for o in outs for c in o.outputs)
    shutdown_llm(llm)
    prof.paused = False
    return {"tokens": tokens, "seconds": round(seconds, 2),
            "tokens_per_s": round(tokens / seconds, 1),
            "work": f"{len(ids)} GSM8K prompts x n = {s.num_solver_samples}, <= {s.max_new_tokens} "
                    f"new tokens, T = {s.temperature}, eager = {cfg.engine.enforce_eager}"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("params", nargs="?", default="params/gpu-small/main_table.yaml")
    ap.add_argument("--lifetime", choices=("run", "stage"), required=True)
    ap.add_argument("--arm", default="baseline")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--iterations", type=int, default=2)
    ap.add_argument("--work", default="/tmp/iteration_profile")
    ap.add_argument("--bench-dir", default=".bench")
    ap.add_argument("--out", required=True)
    ap.add_argument("--graphs", action="store_true",
                    help="engine.enforce_eager: false (CUDA graphs) instead of the params' value; "
                         "the record's lifetime gets a '+graphs' suffix")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")

    import torch
    import vllm

    from vdlib.config.experiment import load_params, to_dict
    from vdlib.loop import coevolution
    from vdlib.loop.arms import arm_params

    base = to_dict(load_params(args.params))
    base.update(seed=args.seed, iterations=args.iterations)
    engine = {**base["engine"], "lifetime": args.lifetime}
    if args.graphs:
        engine["enforce_eager"] = False
    label = args.lifetime + ("+graphs" if args.graphs else "")
    work = Path(args.work) / label
    cfg = load_params(arm_params({**base, "output_dir": str(work), "engine": engine}, args.arm))
    prof = Profile()
    partial_path = work / "profile_partial.json"
    partial = json.loads(partial_path.read_text()) if partial_path.exists() else {}
    instrument(prof)
    throughput = partial.get("throughput") or measure_throughput(cfg, args.bench_dir, prof)
    earlier = {int(k): v for k, v in partial.get("iterations", {}).items()}  # killed runs

    def flush() -> None:
        its: dict[str, dict[str, float]] = {}
        for t in sorted(set(earlier) | {t for t in prof.it if t}):
            c = dict(earlier.get(t, {}))
            for k, v in prof.it.get(t, {}).items():
                c[k] = c.get(k, 0.0) + v
            its[str(t)] = c
        work.mkdir(parents=True, exist_ok=True)
        partial_path.write_text(json.dumps({"throughput": throughput, "iterations": its}))

    def on_stage(t: int, stage: str) -> None:
        flush()  # what the stages before this one counted survives a kill
        prof.t = t
        if t in earlier and "processes" not in prof.it[t]:
            prof.it[t]["processes"] = 1.0  # this iteration spans two processes (a resume)

    wall_start = time.perf_counter()
    result = coevolution.run(cfg, on_stage=on_stage)
    logger.info("run finished in %.1f s", time.perf_counter() - wall_start)
    flush()
    its = json.loads(partial_path.read_text())["iterations"]
    per_it = []
    for t in range(1, args.iterations + 1):
        c = its.get(str(t), {})
        timing = json.loads((result.run_dir / f"iter_{t}" / "timing.json").read_text())
        wall = sum(float(v) for v in timing.values())
        startup = (c.get("engine_start_s", 0) + c.get("trainer_build_s", 0)
                   + c.get("model_load_s", 0))
        update = max(c.get("training_step_s", 0) - c.get("generate_and_score_s", 0), 0.0)
        floor = c.get("generated_tokens", 0) / throughput["tokens_per_s"] + update
        per_it.append({
            "iteration": t, "wall_s": round(wall, 1), "stages_s": timing,
            "startup_s": round(startup, 1), "engine_starts": int(c.get("engine_starts", 0)),
            "engine_start_s": round(c.get("engine_start_s", 0), 1),
            "trainer_builds": int(c.get("trainer_builds", 0)),
            "trainer_build_s": round(c.get("trainer_build_s", 0), 1),
            "model_loads": int(c.get("model_loads", 0)),
            "model_load_s": round(c.get("model_load_s", 0), 1),
            "weight_pushes": int(c.get("pushes", 0)), "push_s": round(c.get("push_s", 0), 2),
            "sleep_wake_s": round(c.get("sleep_wake_s", 0), 2),
            "save_s": round(c.get("save_s", 0), 1),
            "generated_tokens": int(c.get("generated_tokens", 0)),
            "generate_s": round(c.get("generate_s", 0), 1),
            "update_s": round(update, 1), "floor_s": round(floor, 1),
            "wall_over_floor": round(wall / floor, 2) if floor else None,
            "processes": 1 + int(c.get("processes", 0)),
        })
    keys = ("wall_s", "startup_s", "engine_starts", "generated_tokens", "floor_s")
    record = {"lifetime": label, "iterations": args.iterations,
              **{k: round(sum(p[k] for p in per_it), 1) for k in keys},
              "stages_s": {s: round(sum(float(p["stages_s"].get(s, 0)) for p in per_it), 1)
                           for s in per_it[0]["stages_s"]},
              "per_iteration": per_it, "throughput": throughput,
              "arm": args.arm, "seed": args.seed, "params": args.params}
    record["wall_over_floor"] = round(record["wall_s"] / record["floor_s"], 2)
    out = Path(args.out)
    data = json.loads(out.read_text()) if out.exists() else {}
    runs = [r for r in data.get("runs", []) if r.get("lifetime") != label] + [record]
    data.update(card=torch.cuda.get_device_name(), vllm_version=vllm.__version__,
                runs=sorted(runs, key=lambda r: r["lifetime"]))
    by = {r["lifetime"]: r for r in data["runs"]}
    if {"run", "stage"} <= set(by):
        def later(r: dict) -> float:  # mean wall of the iterations after the first
            rest = [p["wall_s"] for p in r["per_iteration"][1:]] or [r["wall_s"]]
            return sum(rest) / len(rest)
        data["stage_over_run_per_iteration_after_first"] = round(
            later(by["stage"]) / later(by["run"]), 2)
        data["stage_over_run_total"] = round(by["stage"]["wall_s"] / by["run"]["wall_s"], 2)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1))
    print(json.dumps({k: v for k, v in record.items() if k != "per_iteration"}, indent=1))
    for p in per_it:
        print(f"iteration {p['iteration']}: wall {p['wall_s']} s, startup {p['startup_s']} s, "
              f"{p['engine_starts']} engine starts, {p['generated_tokens']} tokens, floor "
              f"{p['floor_s']} s, wall/floor {p['wall_over_floor']}")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
