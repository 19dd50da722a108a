"""The transformers engine's sampling on CPU in float32 against bfloat16 (``engine.cpu_dtype``),
at the quickstart's two sampling shapes, in one run on this machine, and the ratios:

    python benchmarks/cpu_dtype_speed.py [--threads 1] [--repeats 2]

Shapes (params/tiny/quickstart.yaml): the K questions (the proposer prompt, n = 16, at most 96
new tokens: one shared ~300-token prompt, then 16 rows decoding) and scoring (16 short
questions x M = 4 answers, at most 48 new tokens: 64 rows). Variants: float32 with torch's SDPA
attention (transformers' default), bfloat16 with SDPA, and bfloat16 with transformers' eager
attention (what ``open_engine`` uses for ``cpu_dtype: bfloat16``). The packaged SmolLM2-135M;
one thread by default, as each quickstart arm has one core. Each variant samples with the same
seeds; the rows stop at their own EOS, so the time is also given per decoding step (the longest
row's length), which does not depend on where the samples stop. The best of ``repeats`` runs.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import time

import torch

from vdlib.config import EngineConfig
from vdlib.engines.generation import HFEngine
from vdlib.engines.models import load_model
from vdlib.engines.setting import open_engine
from vdlib.method.prompts import proposer_prompt, solver_prompt

logger = logging.getLogger("cpu_dtype_speed")

QUESTIONS = [f"Tom has {a} apples and buys {b} more bags of {c} apples each. How many apples "
             f"does he have now?" for a, b, c in zip(range(3, 19), range(2, 18), range(4, 20),
                                                     strict=True)]


def shapes(tok) -> dict[str, dict]:
    return {"questions": dict(prompts=[proposer_prompt(tok)], n=16, max_new_tokens=96),
            "scoring": dict(prompts=[solver_prompt(tok, q) for q in QUESTIONS], n=4,
                            max_new_tokens=48)}


def timed(engine, prompts, n, max_new_tokens, repeats) -> tuple[float, int]:
    best, steps = float("inf"), 0
    for _ in range(repeats):
        start = time.perf_counter()
        out = engine.generate(prompts, n=n, temperature=1.0, top_p=0.99,
                              max_new_tokens=max_new_tokens, seed=0)
        best = min(best, time.perf_counter() - start)
        steps = max(len(s.token_ids) for s in out)
    return best, steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(args.threads)
    results: dict[tuple[str, str], tuple[float, int]] = {}
    variants = ("float32 sdpa", "bfloat16 sdpa", "bfloat16 eager")
    for variant in variants:
        dtype, attn = variant.split()
        if attn == "eager":  # the engine as the loop opens it for cpu_dtype: bfloat16
            ctx = open_engine(EngineConfig(backend="hf", cpu_dtype=dtype), "smollm2-135m",
                              device="cpu", batch_size=64, show_progress=False)
        else:
            model, tok = load_model("smollm2-135m", dtype=dtype, device="cpu")
            ctx = contextlib.nullcontext(HFEngine(model, tok, batch_size=64, show_progress=False))
        with ctx as engine:
            attn_used = engine.model.config._attn_implementation
            for name, shape in shapes(engine.tokenizer).items():
                results[(variant, name)] = timed(engine, repeats=args.repeats, **shape)
                secs, steps = results[(variant, name)]
                logger.info("%-15s (%s) %-9s %6.2f s, %3d steps, %5.0f ms a step", variant,
                            attn_used, name, secs, steps, 1000 * secs / steps)
    for name in ("questions", "scoring"):
        base_s, base_n = results[("float32 sdpa", name)]
        for variant in variants[1:]:
            s, n = results[(variant, name)]
            logger.info("%-9s float32 sdpa / %-14s: %.2fx wall, %.2fx per step", name, variant,
                        base_s / s, (base_s / base_n) / (s / n))


if __name__ == "__main__":
    main()
