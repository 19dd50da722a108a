r"""The transformers engine's sampling path against plain ``generate``, in the same run.

    python benchmarks/hf_generation_speed.py [--repeats 2] [--threads 1]

Two shapes of the tiny quickstart on the packaged SmolLM2-135M (float32, CPU, one thread as an
arm of ``make demo`` has): **scoring** (16 questions x M = 4 answers of 64 tokens, top-p 0.99)
and **generation** (the proposer prompt x 16 questions of 96 tokens under a 0.75 vocabulary
mask). Each shape runs vdlib's ``HFEngine`` (prefix sharing: each distinct prompt prefilled
once; top-p through ``vdlib.engines.sampling.NucleusFilter``, which ranks only the tokens that
can be kept) against the same engine on transformers' own path (every row prefilled,
``TopPLogitsWarper`` sorting all 49,152 logits a step), same seeds, order alternating per
repeat. Prints seconds per arm (median), the ratio vdlib / plain, and whether every sample's
tokens are equal (they must be: the change is speed only).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from transformers import GenerationConfig  # noqa: E402

import vdlib.engines.generation as generation  # noqa: E402
from vdlib.engines.generation import HFEngine  # noqa: E402
from vdlib.engines.models import load_model  # noqa: E402
from vdlib.method.prompts import proposer_prompt, solver_prompt  # noqa: E402
from vdlib.method.vocab_dropout import VocabDropout  # noqa: E402


class PlainEngine(HFEngine):
    """HFEngine on transformers' own path: top-p in the generation config, no prefix sharing."""

    def _generation_config(self, temperature, top_p, top_k, max_new_tokens):
        return GenerationConfig(do_sample=True, temperature=temperature, top_p=top_p,
                                top_k=top_k, max_new_tokens=max_new_tokens,
                                eos_token_id=self.eos_ids or None, pad_token_id=self.pad_id)

    def _shared_prompt_cache(self, rows, device):
        return None

    def generate(self, *args, **kwargs):
        real = generation.sampling_processors
        generation.sampling_processors = lambda *a: []
        try:
            return super().generate(*args, **kwargs)
        finally:
            generation.sampling_processors = real


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, tok = load_model("smollm2-135m", dtype="float32", device="cpu")
    questions = [f"Tom has {i + 3} apples and buys {i + 5} more. Then he gives {i % 3 + 1} to "
                 "Sally. How many apples does he have now?" for i in range(16)]
    vd = VocabDropout(tok, alpha=0.75, vocab_width=model.config.vocab_size)
    shapes = {
        "scoring 16 x 4 x 64": dict(prompts=[solver_prompt(tok, q) for q in questions], n=4,
                                    max_new_tokens=64),
        "generation 1 x 16 x 96, masked": dict(prompts=[proposer_prompt(tok)], n=16,
                                               max_new_tokens=96, vocab_dropout=vd,
                                               mask_seed=3),
    }
    engines = {"vdlib": HFEngine(model, tok, batch_size=64, show_progress=False),
               "plain": PlainEngine(model, tok, batch_size=64, show_progress=False)}
    print(f"# {platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"{args.threads} thread(s), {args.repeats} repeats")
    for label, kw in shapes.items():
        times: dict[str, list[float]] = {k: [] for k in engines}
        samples = {}
        for r in range(args.repeats):
            for name in (list(engines) if r % 2 == 0 else list(engines)[::-1]):
                start = time.perf_counter()
                out = engines[name].generate(temperature=1.0, top_p=0.99, seed=1, **kw)
                times[name].append(time.perf_counter() - start)
                samples[name] = [s.token_ids for s in out]
        ours, plain = (statistics.median(times[k]) for k in ("vdlib", "plain"))
        equal = sum(a == b for a, b in zip(samples["vdlib"], samples["plain"], strict=True))
        print(f"{label}: vdlib {ours:.1f} s, plain {plain:.1f} s, ratio {ours / plain:.2f}; "
              f"samples equal {equal}/{len(samples['plain'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
