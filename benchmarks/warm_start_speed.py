"""The format warm-start's step time with every weight trained against the top N layers only
(``warm_start.train_layers``), in one run on this machine, and the ratio:

    python benchmarks/warm_start_speed.py [--steps 6] [--layers 6] [--threads 2]

Each arm loads the packaged SmolLM2-135M afresh and runs ``steps`` SFT steps of the same rows
(:func:`vdlib.loop.warm_start.sft`); the first step is left out of the mean.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import time

import torch

from vdlib.config.experiment import load_params
from vdlib.engines.models import load_model
from vdlib.loop import warm_start

logger = logging.getLogger("warm_start_speed")


def step_seconds(cfg, steps: int) -> tuple[float, list[float]]:
    model, tok = load_model("smollm2-135m", dtype="float32", device="cpu")
    times: list[float] = []
    orig = warm_start.batch_loss

    def timed(*a, **k):  # one call a step: time from one call to the next
        times.append(time.perf_counter())
        return orig(*a, **k)

    warm_start.batch_loss = timed
    try:
        torch.manual_seed(0)
        losses = warm_start.sft(model, tok, dataclasses.replace(cfg, steps=steps), 0)
    finally:
        warm_start.batch_loss = orig
    gaps = [b - a for a, b in zip(times[1:-1], times[2:], strict=True)]
    return sum(gaps) / len(gaps), losses


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(args.threads)
    tiny = load_params("params/tiny/quickstart.yaml").warm_start
    full, _ = step_seconds(dataclasses.replace(tiny, train_layers=0), args.steps)
    top, _ = step_seconds(dataclasses.replace(tiny, train_layers=args.layers), args.steps)
    logger.info("threads %d, %d steps: every weight %.2f s a step, top %d layers %.2f s a step, "
                "ratio %.2fx", args.threads, args.steps, full, args.layers, top, full / top)


if __name__ == "__main__":
    main()
