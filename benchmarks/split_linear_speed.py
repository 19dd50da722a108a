r"""Decoding with linear layers split across CPU threads (``vdlib.engines.split_linear``) against
the layers' own product, in the same run: the quickstart notebook's mask cell.

    python benchmarks/split_linear_speed.py [--repeats 2] [--threads 2]

The cell's work on the packaged SmolLM2-135M (float32, CPU, the kernel's thread count): the
proposer prompt, 2 samples of 80 tokens at top-p 0.99 without a mask, then 2 under the 0.75
mask of the cell's seed. Each repeat runs ``HFEngine(split_decoding=True)`` and
``HFEngine(split_decoding=False)`` (order alternating); prints seconds per arm (median), the
ratio split / plain, the seconds of one ``lm_head`` product of 2 rows each way, and whether
every sample's tokens are equal (they must be: the change is speed only).
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

from vdlib.engines.generation import HFEngine  # noqa: E402
from vdlib.engines.models import load_model  # noqa: E402
from vdlib.engines.split_linear import split_product  # noqa: E402
from vdlib.method.prompts import proposer_prompt  # noqa: E402
from vdlib.method.vocab_dropout import VocabDropout, mask_seed  # noqa: E402

FORMAT_STRINGS = ["<question>", "</question>", "\\boxed{", "}", "\n\n", "?", "."]


def mask_cell(engine: HFEngine, prompt: str, vd: VocabDropout) -> list[list[int]]:
    """The notebook's two calls: unmasked, then under the mask of iteration 1's first batch."""
    kw = dict(n=2, temperature=1.0, top_p=0.99, max_new_tokens=80, seed=0)
    plain = engine.generate([prompt], **kw)
    masked = engine.generate([prompt], vocab_dropout=vd, mask_seed=mask_seed(0, 1, "gen", 0),
                             **kw)
    return [s.token_ids for s in plain + masked]


def lm_head_seconds(weight: torch.Tensor, parts: int, repeats: int = 20) -> float:
    x = torch.randn(2, weight.shape[1])
    fn = (lambda: split_product(x, weight, parts)) if parts > 1 else (
        lambda: torch.nn.functional.linear(x, weight))
    fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, tok = load_model("smollm2-135m", device="cpu")
    vd = VocabDropout.for_model(model, tok, alpha=0.75, format_strings=FORMAT_STRINGS)
    prompt = proposer_prompt(tok)
    engines = {"split": HFEngine(model, tok, batch_size=2, show_progress=False),
               "plain": HFEngine(model, tok, batch_size=2, show_progress=False,
                                 split_decoding=False)}
    seconds: dict[str, list[float]] = {name: [] for name in engines}
    tokens: dict[str, list[list[int]]] = {}
    for r in range(args.repeats):
        for name in (list(engines) if r % 2 == 0 else list(reversed(engines))):
            start = time.perf_counter()
            tokens[name] = mask_cell(engines[name], prompt, vd)
            seconds[name].append(time.perf_counter() - start)
    split, plain = (statistics.median(seconds[n]) for n in ("split", "plain"))
    head = model.get_output_embeddings().weight
    print(f"machine: {platform.processor() or platform.machine()}, torch threads "
          f"{torch.get_num_threads()}, repeats {args.repeats}")
    print(f"mask cell, split linears: {split:.2f} s  {[round(s, 2) for s in seconds['split']]}")
    print(f"mask cell, plain:         {plain:.2f} s  {[round(s, 2) for s in seconds['plain']]}")
    print(f"ratio split / plain: {split / plain:.3f}")
    print(f"lm_head product of 2 rows: plain {lm_head_seconds(head, 1) * 1e3:.1f} ms, split in "
          f"{args.threads}: {lm_head_seconds(head, args.threads) * 1e3:.1f} ms")
    equal = tokens["split"] == tokens["plain"]
    print(f"every sample's tokens equal: {equal} ({len(tokens['split'])} samples, "
          f"{sum(map(len, tokens['split']))} tokens)")
    return 0 if equal else 1


if __name__ == "__main__":
    raise SystemExit(main())
