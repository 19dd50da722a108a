r"""Proposer GRPO step time with and without vocabulary dropout, measured in the same run.

    python benchmarks/coevolution_step.py --model smollm2-135m --device cpu
    python benchmarks/coevolution_step.py --model qwen3-0.6b-shape --device cuda \
        --prompts 16 --new-tokens 256 --micro-batch 16

One proposer GRPO step as the loop runs it (vdlib's TRL trainer: rollout of G = 4 completions
per prompt with the proposer prompt, full-vocabulary loss with the k3 KL term, AdamW update),
with a cheap seeded reward in place of the frozen solver so that only the policy step is timed.
Arms alternate (masked alpha 0.75 / unmasked), ``--repeats`` times each, on the same model; the
first step of every run is a warm-up and not counted. Prints seconds per step per arm (median)
and the ratio masked / unmasked (1.0 = free).

``qwen3-*-shape`` are random-init Qwen3 configs saved to a temporary folder (TRL builds its
reference model from a path), with SmolLM2's tokenizer (``--tokenizer DIR`` where the packaged
model is not installed, e.g. a copy of vdlib's cached SmolLM2 tokenizer folder); random weights
are fine for speed.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_common import QWEN3_SHAPES, SeededReward, qwen3_config, report  # noqa: E402

from vdlib.config.experiment import GRPOConfig  # noqa: E402
from vdlib.loop.trainer import MaskedGRPOTrainer, trl_args  # noqa: E402
from vdlib.method.vocab_dropout import VocabDropout, mask_seed  # noqa: E402


def model_dir(name: str, root: Path, tokenizer: str | None = None) -> Path:
    """A checkpoint folder for ``name`` (registered vdlib model or a Qwen3 shape)."""
    from transformers import AutoTokenizer

    from vdlib.engines.models import load_model, load_tokenizer, prepare_tokenizer

    path = root / name
    if name in QWEN3_SHAPES:
        from transformers import Qwen3ForCausalLM

        tok = (prepare_tokenizer(AutoTokenizer.from_pretrained(tokenizer)) if tokenizer
               else load_tokenizer("smollm2-135m"))
        cfg = qwen3_config(name, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                           pad_token_id=tok.pad_token_id)
        torch.manual_seed(0)
        model = Qwen3ForCausalLM(cfg)
    else:
        model, tok = load_model(name, device="cpu")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path




class StepTimer:
    def __init__(self) -> None:
        self.times: list[float] = []
        self._t = 0.0

    def on_step_begin(self, args, state, control, **kw):
        self._t = time.perf_counter()

    def on_step_end(self, args, state, control, **kw):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        self.times.append(time.perf_counter() - self._t)


def one_run(path: Path, args, masked: bool, out: Path) -> list[float]:
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback

    from vdlib.method.prompts import proposer_prompt

    tok = AutoTokenizer.from_pretrained(path)
    g = GRPOConfig(global_batch_size=args.prompts, rollout_batch_size=args.prompts,
                   num_generations=4, micro_batch_size_update=args.micro_batch,
                   max_response_length=args.new_tokens, max_steps=args.steps,
                   precision="bfloat16" if args.device != "cpu" else "float32",
                   gradient_checkpointing=args.device != "cpu")
    targs = trl_args(g, output_dir=str(out), seed=0, use_cpu=args.device == "cpu",
                     masked=masked)
    timer = StepTimer()
    cb = type("CB", (TrainerCallback,), {"on_step_begin": timer.on_step_begin,
                                         "on_step_end": timer.on_step_end})()
    data = Dataset.from_dict({"prompt": [proposer_prompt(tok)] * (args.steps * args.prompts)})
    trainer = MaskedGRPOTrainer(model=str(path), reward_funcs=[SeededReward()], args=targs,
                                train_dataset=data, processing_class=tok, callbacks=[cb])
    if masked:
        trainer.vocab_dropout = VocabDropout.from_sizes(
            len(tok), trainer.model.get_output_embeddings().weight.shape[0], 0.75,
            [tok.eos_token_id, tok.pad_token_id])
        trainer.mask_seed_fn = lambda step: mask_seed(0, 1, "train", step)
    trainer.generation_config.min_new_tokens = args.new_tokens  # same work in both arms
    trainer.train()
    del trainer
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return timer.times[1:]  # first step: warm-up


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--device", default="cpu")
    p.add_argument("--prompts", type=int, default=1, help="prompts per step (x G = 4)")
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--steps", type=int, default=3, help="steps per run (first is warm-up)")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--tokenizer", help="tokenizer folder for the *-shape models")
    p.add_argument("--json", help="append the result as one JSON line to this file")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = model_dir(args.model, root, args.tokenizer)
        times: dict[str, list[float]] = {"unmasked": [], "masked": []}
        for r in range(args.repeats):
            for arm in (("unmasked", "masked") if r % 2 == 0 else ("masked", "unmasked")):
                times[arm] += one_run(path, args, arm == "masked", root / f"trl-{arm}-{r}")
    med = {k: statistics.median(v) for k, v in times.items()}
    device = (torch.cuda.get_device_name() if args.device.startswith("cuda")
              else f"CPU ({platform.machine()}, {torch.get_num_threads()} threads)")
    result = {"model": args.model, "device": device, "prompts": args.prompts, "G": 4,
              "new_tokens": args.new_tokens,
              "seconds_per_step_unmasked": round(med["unmasked"], 3),
              "seconds_per_step_masked": round(med["masked"], 3),
              "ratio_masked_over_unmasked": round(med["masked"] / med["unmasked"], 4),
              "step_seconds": {k: [round(x, 3) for x in v] for k, v in times.items()}}
    report(result, f"{args.model} on {device}: proposer step "
                   f"{result['seconds_per_step_unmasked']} s unmasked, "
                   f"{result['seconds_per_step_masked']} s masked, ratio "
                   f"{result['ratio_masked_over_unmasked']}", args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
