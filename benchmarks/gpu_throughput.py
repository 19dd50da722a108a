r"""GPU throughput of a Qwen3-4B-shaped model: sampling tokens/s and GRPO step time, with and
without vocabulary dropout, on 1 GPU and (under ``accelerate launch``) on several.

    # once: a random-init checkpoint (Qwen3-4B shape, logits width 151,936)
    python benchmarks/gpu_throughput.py build --tokenizer TOKDIR --model-dir /tmp/q4b
    # 1 GPU: generation tokens/s and proposer / solver GRPO step time, masked and unmasked
    CUDA_VISIBLE_DEVICES=0 python benchmarks/gpu_throughput.py run --model-dir /tmp/q4b \
        --json results/gpu_throughput_1gpu.json
    # 2 GPUs (DDP over NCCL): the same GRPO steps
    accelerate launch --config_file configs/accelerate_2gpu_ddp.yaml \
        benchmarks/gpu_throughput.py run --model-dir /tmp/q4b --no-generation \
        --json results/gpu_throughput_2gpu_ddp.json
    # ratios and speed-ups (Markdown)
    python benchmarks/gpu_throughput.py summary results/gpu_throughput_1gpu.json \
        results/gpu_throughput_2gpu_ddp.json --md results/gpu_throughput.md

``build`` writes a random-init ``Qwen3ForCausalLM`` (Qwen3-4B's shape: hidden 2560, 36 layers,
32 heads, 8 KV heads, intermediate 9728, tied embeddings, vocabulary 151,936) in bf16 with the
given tokenizer (SmolLM2's on the offline GPU machines: its ids are a subset of the width;
Qwen3's own tokenizer is not available offline). ``--layers N`` shrinks the depth for quick
runs; the output records it.

``run`` measures, on the same model in the same process:

- **generation**: tokens/s of :class:`vdlib.engines.generation.HFEngine` (transformers ``generate``)
  sampling ``--gen-batch`` proposer prompts for ``--new-tokens`` tokens, with and without the
  alpha = 0.75 mask (vdlib's ``VocabDropout`` logits processor); arms alternate, first call of
  each arm is a warm-up.
- **GRPO**: seconds per optimizer step of :class:`vdlib.loop.trainer.MaskedGRPOTrainer` as the loop
  builds it (``trl_args`` from the paper's batch sizes: proposer 16 prompts x G = 4, solver 8
  prompts x G = 4, micro-batch 2, k3 KL with a reference model, gradient checkpointing, bf16,
  AdamW), with the response length cut to ``--new-tokens`` (``min_new_tokens`` pins it so both
  arms do the same work) and a cheap seeded reward in place of the frozen solver (the reward's
  own cost is not timed here). Masked = the proposer's sampling under the alpha = 0.75 mask;
  the solver arm with a mask measures the same trainer path on solver prompts (the paper's loop
  masks only the proposer). The first step of every run is a warm-up. Peak GPU memory per arm
  is recorded (rank 0).

Under ``accelerate launch`` every process runs the same script; TRL splits each step's
completions over the processes, so the global batch is the same as on 1 GPU, and rank 0
writes the JSON. ``summary`` prints ratios masked / unmasked and the multi-GPU speed-up
against a 1-GPU file measured on the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import QWEN3_SHAPES, qwen3_config  # noqa: E402

ALPHA = 0.75
QUESTION = "What is the sum of the first 20 positive odd integers?"


def rank() -> int:
    return int(os.environ.get("RANK", "0"))


def world() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def log(msg: str) -> None:
    if rank() == 0:
        sys.stdout.write(f"[{time.strftime('%H:%M:%S')}] {msg}\n")
        sys.stdout.flush()


def distributed() -> str:
    """The accelerate backend of this process (from the variables accelerate launch sets)."""
    if os.environ.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true":
        return "DEEPSPEED"
    if os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true":
        return "FSDP"
    return "DDP" if world() > 1 else "none"


def device_name() -> str:
    return torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU"


# ----------------------------------------------------------------------------- build


def build(args: argparse.Namespace) -> None:
    from transformers import AutoTokenizer, Qwen3ForCausalLM

    from vdlib.engines.models import prepare_tokenizer

    tok = prepare_tokenizer(AutoTokenizer.from_pretrained(args.tokenizer))
    shape = dict(QWEN3_SHAPES[args.shape])
    if args.layers:
        shape["num_hidden_layers"] = args.layers
    if args.hidden:  # tiny CPU smoke runs only
        shape.update(hidden_size=args.hidden, intermediate_size=3 * args.hidden,
                     num_attention_heads=4, num_key_value_heads=2, head_dim=args.hidden // 4)
    cfg = qwen3_config(args.shape, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                       pad_token_id=tok.pad_token_id)
    for k, v in shape.items():
        setattr(cfg, k, v)
    cfg.layer_types = ["full_attention"] * cfg.num_hidden_layers
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    t0 = time.perf_counter()
    with torch.device(device):
        model = Qwen3ForCausalLM(cfg).to(torch.bfloat16)
    n_params = sum(p.numel() for p in model.parameters())
    out = Path(args.model_dir)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    info = {"shape": args.shape, "layers": cfg.num_hidden_layers, "hidden": cfg.hidden_size,
            "params": n_params, "vocab_width": cfg.vocab_size, "tokenizer_ids": len(tok),
            "shrunk": bool(args.layers or args.hidden)}
    (out / "bench_shape.json").write_text(json.dumps(info))
    log(f"built {out}: {n_params / 1e9:.3f} B params, {cfg.num_hidden_layers} layers "
        f"({time.perf_counter() - t0:.1f} s)" + (" [SHRUNK: not the full 4B depth]"
                                                 if info["shrunk"] else ""))


# ----------------------------------------------------------------------------- helpers


def load(model_dir: str, device: str) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from vdlib.engines.models import prepare_tokenizer

    tok = prepare_tokenizer(AutoTokenizer.from_pretrained(model_dir))
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).to(device)
    return model, tok


def make_vd(model: Any, tok: Any) -> Any:
    from vdlib.method.vocab_dropout import VocabDropout

    return VocabDropout.for_model(model, tok, ALPHA)


def local_device() -> str:
    if not torch.cuda.is_available():
        return "cpu"
    return f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


# ----------------------------------------------------------------------------- generation


def bench_generation(args: argparse.Namespace) -> dict[str, Any]:
    from vdlib.engines.generation import HFEngine
    from vdlib.method.prompts import proposer_prompt
    from vdlib.method.vocab_dropout import mask_seed

    model, tok = load(args.model_dir, local_device())
    model.eval()
    vd = make_vd(model, tok)
    engine = HFEngine(model, tok, batch_size=args.gen_batch, show_progress=False)
    prompts = [proposer_prompt(tok)] * args.gen_batch
    rates: dict[str, list[float]] = {"unmasked": [], "masked": []}
    for r in range(args.repeats + 1):
        for arm in (("unmasked", "masked") if r % 2 == 0 else ("masked", "unmasked")):
            kw = {"vocab_dropout": vd, "mask_seed": mask_seed(0, 1, "gen", r)} \
                if arm == "masked" else {}
            sync()
            t0 = time.perf_counter()
            samples = engine.generate(prompts, n=1, temperature=1.0, top_p=0.99,
                                      max_new_tokens=args.new_tokens, seed=r, **kw)
            sync()
            dt = time.perf_counter() - t0
            tokens = sum(len(s.token_ids) for s in samples)
            if r > 0:  # round 0 is the warm-up
                rates[arm].append(tokens / dt)
            log(f"generation {arm:8s} round {r}: {tokens} tokens in {dt:.2f} s "
                f"({tokens / dt:.0f} tok/s){' (warm-up)' if r == 0 else ''}")
    del engine, model
    torch.cuda.empty_cache() if torch.cuda.is_available() else None
    med = {k: statistics.median(v) for k, v in rates.items()}
    return {"batch": args.gen_batch, "new_tokens": args.new_tokens, "engine": "HFEngine",
            "tokens_per_s_unmasked": round(med["unmasked"], 1),
            "tokens_per_s_masked": round(med["masked"], 1),
            "ratio_masked_over_unmasked": round(med["masked"] / med["unmasked"], 4),
            "per_round_tokens_per_s": {k: [round(x, 1) for x in v] for k, v in rates.items()}}


# ----------------------------------------------------------------------------- GRPO


class SeededReward:
    """A cheap reward in place of the frozen solver (only the policy step is timed)."""

    __name__ = "seeded_reward"

    def __init__(self) -> None:
        self.rng = random.Random(0)

    def __call__(self, prompts: list, completions: list, **kwargs: Any) -> list[float]:
        return [self.rng.random() for _ in completions]


def grpo_run(args: argparse.Namespace, role: str, masked: bool, out: Path) -> dict[str, Any]:
    from datasets import Dataset
    from transformers import TrainerCallback

    from vdlib.config.experiment import GRPOConfig
    from vdlib.loop.trainer import MaskedGRPOTrainer, trl_args
    from vdlib.method.prompts import proposer_prompt, solver_prompt
    from vdlib.method.vocab_dropout import mask_seed

    on_gpu = torch.cuda.is_available()
    model, tok = load(args.model_dir, local_device())
    prompts_per_step = 16 if role == "proposer" else 8  # params/paper/base.yaml
    g = GRPOConfig(global_batch_size=prompts_per_step, rollout_batch_size=prompts_per_step,
                   num_generations=4, micro_batch_size_update=args.micro_batch,
                   max_response_length=args.new_tokens, max_steps=args.steps,
                   precision="bfloat16" if on_gpu else "float32",
                   gradient_checkpointing=on_gpu)
    targs = trl_args(g, output_dir=str(out), seed=0, use_cpu=not on_gpu, masked=masked,
                     num_processes=world())
    times: list[float] = []
    state = {"t": 0.0}

    class Timer(TrainerCallback):
        def on_step_begin(self, a, s, c, **kw):  # noqa: ANN001
            sync()
            state["t"] = time.perf_counter()

        def on_step_end(self, a, s, c, **kw):  # noqa: ANN001
            sync()
            times.append(time.perf_counter() - state["t"])

    text = proposer_prompt(tok) if role == "proposer" else solver_prompt(tok, QUESTION)
    data = Dataset.from_dict({"prompt": [text] * (args.steps * prompts_per_step)})
    vd = make_vd(model, tok) if masked else None
    if on_gpu:
        torch.cuda.reset_peak_memory_stats()
    trainer = MaskedGRPOTrainer(
        model=model, reward_funcs=[SeededReward()], args=targs, train_dataset=data,
        processing_class=tok, callbacks=[Timer()], vocab_dropout=vd,
        mask_seed_fn=(lambda step: mask_seed(0, 1, "train", step)) if masked else None)
    trainer.generation_config.min_new_tokens = args.new_tokens  # same work in both arms
    trainer.train()
    peak = torch.cuda.max_memory_allocated() / 2**30 if on_gpu else None
    del trainer, model
    if on_gpu:
        torch.cuda.empty_cache()
    log(f"GRPO {role} {'masked' if masked else 'unmasked'}: steps "
        f"{[round(t, 2) for t in times]} s, peak {peak and round(peak, 1)} GiB (rank 0)")
    return {"step_seconds": times[1:], "warmup_seconds": times[:1], "peak_gib": peak}


def bench_grpo(args: argparse.Namespace) -> dict[str, Any]:
    import tempfile

    results: dict[str, Any] = {}
    roles = [r for r in args.roles.split(",") if r]
    with tempfile.TemporaryDirectory() as tmp:
        for role in roles:
            arms = [a for a in ("unmasked", "masked") if a in args.arms.split(",")]
            steps: dict[str, list[float]] = {a: [] for a in arms}
            peaks: dict[str, float | None] = {}
            for r in range(args.grpo_repeats):
                for arm in (arms if r % 2 == 0 else arms[::-1]):
                    res = grpo_run(args, role, arm == "masked", Path(tmp) / f"{role}-{arm}-{r}")
                    steps[arm] += res["step_seconds"]
                    peaks[arm] = max(peaks.get(arm) or 0.0, res["peak_gib"] or 0.0) or None
            med = {k: statistics.median(v) for k, v in steps.items()}
            prompts = 16 if role == "proposer" else 8
            results[role] = {
                "prompts_per_step": prompts, "G": 4, "completions_per_step": prompts * 4,
                "new_tokens": args.new_tokens, "micro_batch": args.micro_batch,
                **{f"seconds_per_step_{a}": round(m, 3) for a, m in med.items()},
                "ratio_masked_over_unmasked": round(med["masked"] / med["unmasked"], 4)
                if len(med) == 2 else None,
                "peak_gib_rank0": {k: (round(v, 1) if v else None) for k, v in peaks.items()},
                "step_seconds": {k: [round(x, 3) for x in v] for k, v in steps.items()}}
    return results


def run(args: argparse.Namespace) -> None:
    shape = json.loads((Path(args.model_dir) / "bench_shape.json").read_text())
    result: dict[str, Any] = {
        "device": device_name(), "num_processes": world(),
        "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        if torch.cuda.is_available() else [],
        "torch": torch.__version__, "model": shape, "alpha": ALPHA,
        "launcher": "accelerate" if "ACCELERATE_MIXED_PRECISION" in os.environ
        or world() > 1 else "python",
        "distributed": distributed(),
        "label": args.label,
    }
    if shape.get("shrunk"):
        log(f"NOTE: shrunk model ({shape['layers']} layers, hidden {shape['hidden']}), "
            "not the full Qwen3-4B shape")
    log(f"device {result['device']}, {world()} process(es), model {shape}")
    t0 = time.perf_counter()
    if args.generation and world() == 1:
        result["generation"] = bench_generation(args)
    if args.roles:
        result["grpo"] = bench_grpo(args)
    result["seconds_total"] = round(time.perf_counter() - t0, 1)
    if rank() == 0:
        text = json.dumps(result, indent=2)
        sys.stdout.write(text + "\n")
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(text + "\n")


# ----------------------------------------------------------------------------- summary


def summary(args: argparse.Namespace) -> None:
    runs = [json.loads(Path(p).read_text()) for p in args.files]
    base = next((r for r in runs if r["num_processes"] == 1 and r.get("grpo")), None)
    lines = ["# GPU throughput (measured)", ""]
    for r in runs:
        m = r["model"]
        lines.append(f"- `{r.get('label') or ''}`: {r['num_processes']} process(es), "
                     f"distributed {r['distributed']}, GPUs {', '.join(r['gpus']) or 'none'}; "
                     f"model {m['params'] / 1e9:.2f} B params, {m['layers']} layers"
                     + (" (SHRUNK)" if m.get("shrunk") else ""))
    lines.append("")
    gens = [r for r in runs if "generation" in r]
    if gens:
        lines += ["## Sampling (transformers generate, HFEngine)", "",
                  "| run | device | batch x new tokens | tok/s unmasked | tok/s masked | "
                  "masked / unmasked |", "|---|---|---|---|---|---|"]
        for r in gens:
            g = r["generation"]
            lines.append(f"| {r.get('label')} | {r['device']} | {g['batch']} x {g['new_tokens']}"
                         f" | {g['tokens_per_s_unmasked']} | {g['tokens_per_s_masked']} | "
                         f"{g['ratio_masked_over_unmasked']} |")
        lines.append("")
    lines += ["## GRPO step (vdlib MaskedGRPOTrainer on TRL)", "",
              "| run | processes | role | completions x new tokens | s/step unmasked | "
              "s/step masked | masked / unmasked | speed-up vs 1 GPU (unmasked, masked) | "
              "peak GiB rank 0 (unmasked, masked) |", "|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        for role, g in r.get("grpo", {}).items():
            speeds = []
            b = base["grpo"].get(role) if base is not None and r is not base else None
            for a in ("unmasked", "masked"):
                key = f"seconds_per_step_{a}"
                ok = b is not None and b.get(key) and g.get(key)
                speeds.append(f"{b[key] / g[key]:.2f}x" if ok else "-")
            speed = ", ".join(speeds) if b is not None else ""
            pk = g["peak_gib_rank0"]
            lines.append(f"| {r.get('label')} | {r['num_processes']} | {role} | "
                         f"{g['completions_per_step']} x {g['new_tokens']} | "
                         f"{g.get('seconds_per_step_unmasked', '-')} | "
                         f"{g.get('seconds_per_step_masked', '-')} | "
                         f"{g['ratio_masked_over_unmasked']} | {speed} | "
                         f"{pk.get('unmasked')}, {pk.get('masked')} |")
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.md:
        Path(args.md).write_text(text)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="write a random-init Qwen3-shaped checkpoint")
    b.add_argument("--tokenizer", required=True)
    b.add_argument("--model-dir", required=True)
    b.add_argument("--shape", default="qwen3-4b-shape", choices=sorted(QWEN3_SHAPES))
    b.add_argument("--layers", type=int, default=0, help="shrink depth (quick runs)")
    b.add_argument("--hidden", type=int, default=0, help="shrink width (CPU smoke runs only)")
    r = sub.add_parser("run", help="measure (1 process, or under accelerate launch)")
    r.add_argument("--model-dir", required=True)
    r.add_argument("--new-tokens", type=int, default=256)
    r.add_argument("--gen-batch", type=int, default=64)
    r.add_argument("--repeats", type=int, default=2, help="timed generation rounds per arm")
    r.add_argument("--no-generation", dest="generation", action="store_false")
    r.add_argument("--roles", default="proposer,solver", help="GRPO roles ('' = none)")
    r.add_argument("--steps", type=int, default=3, help="GRPO steps per run (first: warm-up)")
    r.add_argument("--arms", default="unmasked,masked", help="GRPO arms to run")
    r.add_argument("--grpo-repeats", type=int, default=1, help="runs per arm")
    r.add_argument("--micro-batch", type=int, default=2, help="per-device update micro-batch")
    r.add_argument("--label", default="")
    r.add_argument("--json")
    s = sub.add_parser("summary", help="Markdown table of result files")
    s.add_argument("files", nargs="+")
    s.add_argument("--md")
    args = p.parse_args(argv)
    {"build": build, "run": run, "summary": summary}[args.cmd](args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
