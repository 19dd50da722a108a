r"""What vocabulary dropout costs at generation time, measured against no mask in the same run.

    python benchmarks/mask_overhead.py --model smollm2-135m --device cpu --batch 8 --new-tokens 128
    python benchmarks/mask_overhead.py --model qwen3-4b-shape --device cuda --dtype bfloat16 \
        --batch 64 --new-tokens 256

For each model: transformers ``generate`` with and without the vocabulary-dropout logits
processor (alpha 0.75, a fresh mask per repeat), repeats alternating the order of the two arms;
every run generates exactly ``--new-tokens`` tokens per row (``min_new_tokens``), so both arms
do the same work. Prints tokens/s per arm (median over repeats) and the ratio masked/unmasked
(1.0 = free). ``*-shape`` models are random-init Qwen3 configs (logits width 151,936, 151,669
real ids, as Qwen3's tokenizer), so no weights or tokenizer are needed.

It also times the two vLLM routes' per-batch CPU work for a 64-request batch: building the
per-request ``allowed_token_ids`` lists (and their pickled size, what vLLM ships to its engine
core), against the seeded route (a small ``extra_args`` dict per request, plus one mask rebuilt
from its seed on the device per batch).
"""

from __future__ import annotations

import argparse
import pickle
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_common import QWEN3_REAL_IDS, QWEN3_SHAPES, QWEN3_WIDTH, qwen3_config, report  # noqa: E402, I001

from vdlib.method.vocab_dropout import VocabDropout  # noqa: E402


def build(name: str, device: str, dtype: torch.dtype):
    """(model, prompt input_ids for one row, VocabDropout over the model's logits)."""
    if name in QWEN3_SHAPES:
        from transformers import Qwen3ForCausalLM

        cfg = qwen3_config(name)
        with torch.device(device):
            torch.manual_seed(0)
            model = Qwen3ForCausalLM(cfg).to(dtype).eval()
        prompt = torch.randint(0, QWEN3_REAL_IDS, (1, 64),
                               generator=torch.Generator().manual_seed(0))
        protected = list(range(151_643, 151_669))  # Qwen3's added/special tokens (stand-in)
        vd = VocabDropout.from_sizes(QWEN3_REAL_IDS, QWEN3_WIDTH, 0.75, protected)
        return model, prompt, vd
    from vdlib.engines.models import load_model
    from vdlib.method.prompts import proposer_prompt

    model, tok = load_model(name, dtype=dtype, device=device)
    prompt = tok(proposer_prompt(tok), return_tensors="pt", add_special_tokens=False).input_ids
    return model, prompt, VocabDropout.for_model(model, tok, alpha=0.75)


def timed_generate(model, input_ids, new_tokens: int, processors, seed: int) -> float:
    from transformers import GenerationConfig, LogitsProcessorList

    gc = GenerationConfig(do_sample=True, temperature=1.0, top_p=0.99, top_k=0,
                          max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                          pad_token_id=0, eos_token_id=None)
    sync = torch.cuda.synchronize if input_ids.is_cuda else (lambda: None)
    torch.manual_seed(seed)
    sync()
    start = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                             generation_config=gc, logits_processor=LogitsProcessorList(processors))
    sync()
    elapsed = time.perf_counter() - start
    assert out.shape[1] - input_ids.shape[1] == new_tokens
    return elapsed


def bench_generation(args) -> dict:
    device = args.device
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[args.dtype]
    model, prompt, vd = build(args.model, device, dtype)
    ids = prompt.repeat(args.batch, 1).to(device)
    for procs in ([], [vd.logits_processor(seed=-1, device=device)]):  # full-length warm-up
        timed_generate(model, ids, args.new_tokens, procs, seed=0)
    times = {"unmasked": [], "masked": []}
    for r in range(args.repeats):
        order = ("unmasked", "masked") if r % 2 == 0 else ("masked", "unmasked")
        for arm in order:
            procs = [vd.logits_processor(seed=r, device=device)] if arm == "masked" else []
            times[arm].append(timed_generate(model, ids, args.new_tokens, procs, seed=r))
    step_ms = processor_ms_per_step(vd, args.batch, device)
    tokens = args.batch * args.new_tokens
    tps = {arm: tokens / statistics.median(t) for arm, t in times.items()}
    per_repeat = [u / m for u, m in zip(times["unmasked"], times["masked"], strict=True)]
    return {
        "model": args.model, "device": device_name(device), "dtype": args.dtype,
        "batch": args.batch, "new_tokens": args.new_tokens, "repeats": args.repeats,
        "alpha": vd.alpha, "logits_width": vd.vocab_width, "real_ids": vd.n_real,
        "tokens_per_s_unmasked": round(tps["unmasked"], 1),
        "tokens_per_s_masked": round(tps["masked"], 1),
        "ratio_masked_over_unmasked": round(tps["masked"] / tps["unmasked"], 4),
        "per_repeat_speed_ratios": [round(x, 4) for x in per_repeat],
        "processor_ms_per_step": round(step_ms, 4),
        "processor_share_of_a_step": round(
            step_ms / (1e3 * statistics.median(times["unmasked"]) / args.new_tokens), 5),
        "seconds": {k: [round(x, 3) for x in v] for k, v in times.items()},
    }


def processor_ms_per_step(vd: VocabDropout, batch: int, device: str, steps: int = 200) -> float:
    """Time of the processor alone on a (batch, width) float32 logits tensor, per call: a
    precise bound on the mask's share of a decoding step, free of run-to-run noise."""
    proc = vd.logits_processor(seed=0, device=device)
    scores = torch.randn(batch, vd.vocab_width, device=device)
    sync = torch.cuda.synchronize if scores.is_cuda else (lambda: None)
    for _ in range(10):
        proc(None, scores)
    sync()
    start = time.perf_counter()
    for _ in range(steps):
        proc(None, scores)
    sync()
    return 1e3 * (time.perf_counter() - start) / steps


def bench_vllm_routes(device: str, n_requests: int = 64, repeats: int = 20) -> dict:
    """CPU cost per 64-request batch: allowed_token_ids lists vs the seeded processor.

    The list route builds the batch's list once and serialises it once per request (vLLM sends
    each request's SamplingParams to its engine core); the seeded route serialises a small dict
    per request and rebuilds the mask once from its seed on ``device``.
    """
    protected = list(range(151_643, 151_669))
    lists_s, pickled, seeded_s = [], 0, []
    for r in range(repeats):
        vd = VocabDropout.from_sizes(QWEN3_REAL_IDS, QWEN3_WIDTH, 0.75, protected, cache_size=1)
        start = time.perf_counter()
        ids = vd.allowed_token_ids(seed=r)  # one list per batch, shared by its requests,
        pickled = sum(len(pickle.dumps(ids)) for _ in range(n_requests))  # shipped per request
        lists_s.append(time.perf_counter() - start)
        vd = VocabDropout.from_sizes(QWEN3_REAL_IDS, QWEN3_WIDTH, 0.75, protected, cache_size=1)
        start = time.perf_counter()
        args = [{"vd_seed": r, "vd_alpha": 0.75, "vd_n_real": QWEN3_REAL_IDS,
                 "vd_protected": protected} for _ in range(n_requests)]
        pickle.dumps(args)
        mask = vd.sample(seed=r, device=device)  # the worker rebuilds one mask per batch
        if mask.is_cuda:
            torch.cuda.synchronize()
        seeded_s.append(time.perf_counter() - start)
    return {
        "requests": n_requests, "vocab": QWEN3_REAL_IDS,
        "allowed_token_ids_ms_per_batch": round(1e3 * statistics.median(lists_s), 2),
        "allowed_token_ids_pickled_mb_per_batch": round(pickled / 2**20, 2),
        "seeded_processor_ms_per_batch": round(1e3 * statistics.median(seeded_s), 2),
        "ratio_lists_over_seeded": round(statistics.median(lists_s)
                                         / statistics.median(seeded_s), 1),
        "note": "vLLM's own per-request validation of allowed_token_ids (~3 ms each, "
                "ecosystem_facts.md) comes on top of the list cost and is not measured here",
    }


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    return f"CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-135m",
                   help="smollm2-135m, tiny-random, qwen3-0.6b-shape or qwen3-4b-shape")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--repeats", type=int, default=6)
    p.add_argument("--routes", action="store_true", help="also time the two vLLM routes")
    p.add_argument("--json", help="append the result as one JSON line to this file")
    args = p.parse_args(argv)
    result = {"generation": bench_generation(args)}
    if args.routes:
        result["vllm_routes"] = bench_vllm_routes(args.device)
    g = result["generation"]
    report(result, f"{g['model']} on {g['device']}, batch {g['batch']} x {g['new_tokens']} "
                   f"tokens: unmasked {g['tokens_per_s_unmasked']} tok/s, masked "
                   f"{g['tokens_per_s_masked']} tok/s, ratio {g['ratio_masked_over_unmasked']}",
           args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
