"""End-to-end `gpu`-profile co-evolution on one GPU with a random-init Qwen3-shaped model.

    python benchmarks/gpu_coevolution_smoke.py --tokenizer DIR --shape qwen3-0.6b-shape \
        --out outputs/gpu_smoke

The lent GPU machines have no model weights and no network, so the model is a random-init
Qwen3 config (logits width 151,936) saved with SmolLM2's tokenizer (``--tokenizer``: a copy of
vdlib's cached tokenizer folder). It runs the real loop (``vdlib.loop.coevolution.run``) of the VD75
arm: proposer GRPO under the mask in bf16 with gradient checkpointing, curriculum generation,
self-consistency scoring, filtering, solver phase, metrics; sizes are cut so it finishes in
minutes. Random weights produce no parseable questions, so the curriculum is empty and the
solver phase carries the solver forward: this run shows the machinery and its timing on a GPU,
not learning. Prints each stage's seconds and the iteration's metrics.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_common import QWEN3_SHAPES, qwen3_config  # noqa: E402


def build(shape: str, tokenizer: str, target: Path) -> Path:
    from transformers import AutoTokenizer, Qwen3ForCausalLM

    from vdlib.engines.models import prepare_tokenizer

    tok = prepare_tokenizer(AutoTokenizer.from_pretrained(tokenizer))
    cfg = qwen3_config(shape, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                       pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    Qwen3ForCausalLM(cfg).to(torch.bfloat16).save_pretrained(target)
    tok.save_pretrained(target)
    return target


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--shape", default="qwen3-0.6b-shape", choices=sorted(QWEN3_SHAPES))
    p.add_argument("--out", default="outputs/gpu_smoke")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    from vdlib.loop.coevolution import run

    model = build(args.shape, args.tokenizer, Path(args.out) / "model")
    grpo = {"global_batch_size": 4, "rollout_batch_size": 4, "micro_batch_size_update": 4,
            "max_response_length": 256, "max_steps": 2}
    params = {"profile": "gpu", "experiment": f"gpu_smoke_{args.shape}",
              "output_dir": args.out, "iterations": 1,
              "model": {"proposer": str(model), "dtype": "bfloat16", "device": "cuda"},
              "vocab_dropout": {"alpha": 0.75, "phases": "both"},
              "proposer": grpo, "solver": grpo,
              "scoring": {"num_solver_samples": 10, "max_new_tokens": 256},
              "curriculum": {"num_questions": 128, "batch_size": 64, "max_new_tokens": 256}}
    start = time.perf_counter()
    result = run(params)
    it = result.run_dir / "iter_1"
    report = {"device": torch.cuda.get_device_name(), "shape": args.shape,
              "seconds_total": round(time.perf_counter() - start, 1),
              "stage_seconds": json.loads((it / "timing.json").read_text()),
              "metrics": result.iterations[0]}
    sys.stdout.write(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
