r"""vLLM without CUDA graphs (``enforce_eager``, what ``params/gpu-small`` runs) against CUDA
graphs, on the packaged SmolLM2-135M and the GPU evidence run's two big sampling stages, in one
process and one run (these machines are noisy: only same-run ratios count).

    PYTHONPATH=/tmp/site:$PWD:/tmp/vdsite VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 \
        python benchmarks/cudagraph_modes.py --out $OUT/cudagraph_modes.json

Modes, each a fresh ``vdlib.engines.vllm_backend.build_llm`` engine (the previous one shut down):

- ``eager``: ``enforce_eager=True`` (no torch.compile, no CUDA graphs);
- ``full_decode``: no torch.compile (``compilation_config.mode NONE``), full CUDA graphs for
  decode-only batches (``cudagraph_mode FULL_DECODE_ONLY``): graphs without compile time;
- ``compiled``: vLLM's default (torch.compile plus piecewise and full graphs).

Workloads, ``params/gpu-small``'s shapes (sizes are options):

- ``scoring``: the score stage: ``--questions`` solver prompts (short word problems, cycled),
  M = ``--answers`` each, temperature 1.0, top-p 0.99, ``--new-tokens``, no mask;
- ``generation``: the generate stage: ``--proposer-prompts`` proposer prompts in batches of
  ``--batch``, each batch its own alpha = ``--alpha`` mask and seed, all in one
  ``generate_batches`` call.

Per mode: engine start seconds, each workload's wall seconds (after an untimed warm-up call)
and generated tokens/s, and the ratio of each to ``eager`` (> 1: faster than eager). The
engine's KV cache is fixed (``--kv-cache-gb``), as in the grid runs. Reported, not asserted.
"""

from __future__ import annotations

import argparse
import logging
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_common import report  # noqa: E402
from engine_throughput import QUESTIONS, timed  # noqa: E402

logger = logging.getLogger("cudagraph_modes")

MODES = {
    "eager": {"enforce_eager": True},
    "full_decode": {"compilation_config": {"mode": "NONE", "cudagraph_mode": "FULL_DECODE_ONLY"}},
    "compiled": {},
}


def workloads(args: argparse.Namespace, path: str, tok: Any) -> dict[str, Any]:
    """name -> callable(engine) -> samples (the same requests in every mode)."""
    from vdlib.engines.generation import GenerationBatch, generate_batches
    from vdlib.method.prompts import proposer_prompt, solver_prompt
    from vdlib.method.vocab_dropout import VocabDropout, mask_seed

    solver = [solver_prompt(tok, QUESTIONS[i % len(QUESTIONS)]) for i in range(args.questions)]
    vd = VocabDropout.for_checkpoint(path, tok, args.alpha)  # the checkpoint's logits width
    prompts = [proposer_prompt(tok)] * args.proposer_prompts
    batches = [GenerationBatch(prompts[i:i + args.batch], seed=args.seed + b, vocab_dropout=vd,
                               mask_seed=mask_seed(args.seed, 1, "gen", b))
               for b, i in enumerate(range(0, len(prompts), args.batch))]
    sampling = {"temperature": 1.0, "top_p": 0.99, "max_new_tokens": args.new_tokens}
    return {
        "scoring": lambda eng: eng.generate(solver, n=args.answers, seed=args.seed, **sampling),
        "generation": lambda eng: [s for b in generate_batches(eng, batches, **sampling)
                                   for s in b],
    }


def run_mode(name: str, path: str, tok: Any, args: argparse.Namespace) -> dict[str, Any]:
    from vdlib.engines.vllm_backend import build_llm
    from vdlib.engines.vllm_engine import VLLMEngine

    start = time.perf_counter()
    llm = build_llm(path, dtype="bfloat16", max_model_len=args.max_model_len, seed=args.seed,
                    kv_cache_memory_bytes=int(args.kv_cache_gb * 2**30), **MODES[name])
    started = time.perf_counter() - start
    engine = VLLMEngine(llm, tok, show_progress=False)
    out: dict[str, Any] = {"start_s": round(started, 2)}
    try:
        engine.generate([QUESTIONS[0]], n=2, max_new_tokens=16, seed=1)  # warm-up, untimed
        for wname, call in workloads(args, path, tok).items():
            seconds, samples = timed(lambda call=call: call(engine))
            tokens = sum(len(s.token_ids) for s in samples)
            out[wname] = {"seconds": round(seconds, 2), "samples": len(samples),
                          "tokens": tokens, "tokens_per_s": round(tokens / seconds, 1)}
            logger.info("%s %s: %.1f s, %d tokens, %.0f tokens/s", name, wname, seconds,
                        tokens, tokens / seconds)
    finally:
        engine.close()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--modes", default=",".join(MODES),
                   type=lambda s: [m for m in s.split(",") if m], help="comma-separated, in order")
    p.add_argument("--questions", type=int, default=885, help="scoring: questions (885: a run's "
                   "valid questions of 1,024 at VD85)")
    p.add_argument("--answers", type=int, default=10, help="scoring: answers per question (M)")
    p.add_argument("--proposer-prompts", type=int, default=1024, help="generation: prompts (K)")
    p.add_argument("--batch", type=int, default=64, help="generation: prompts per mask")
    p.add_argument("--alpha", type=float, default=0.75)
    p.add_argument("--new-tokens", type=int, default=512)
    p.add_argument("--max-model-len", type=int, default=2048)
    p.add_argument("--kv-cache-gb", type=float, default=8.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="append the JSON result to this file")
    args = p.parse_args(argv)
    if set(args.modes) - set(MODES) or "eager" not in args.modes:
        p.error(f"--modes: a subset of {', '.join(MODES)} that includes eager (the baseline)")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    import torch

    if not torch.cuda.is_available():
        p.error("needs a CUDA GPU (and vLLM)")
    from vdlib.engines.models import checkpoint_path, load_tokenizer

    path = checkpoint_path("smollm2-135m")
    tok = load_tokenizer("smollm2-135m")
    results = {m: run_mode(m, path, tok, args) for m in args.modes}
    base = results["eager"]
    for r in results.values():
        r["speedup_vs_eager"] = {w: round(base[w]["seconds"] / r[w]["seconds"], 2)
                                 for w in ("scoring", "generation")}
        r["stage_s_incl_start"] = {w: round(r["start_s"] + r[w]["seconds"], 1)
                                   for w in ("scoring", "generation")}
    import vllm

    result = {"benchmark": "cudagraph_modes", "card": torch.cuda.get_device_name(),
              "vllm_version": vllm.__version__, "model": "smollm2-135m",
              "sizes": {k: getattr(args, k) for k in ("questions", "answers", "proposer_prompts",
                                                      "batch", "alpha", "new_tokens",
                                                      "kv_cache_gb")},
              "modes": {m: MODES[m] for m in args.modes},
              "results": results, "python": platform.python_version()}
    summary = "; ".join(f"{m}: start {r['start_s']} s, scoring x{r['speedup_vs_eager']['scoring']}"
                        f", generation x{r['speedup_vs_eager']['generation']}"
                        for m, r in results.items())
    report(result, summary, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
