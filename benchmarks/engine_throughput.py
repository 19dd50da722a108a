r"""Generation throughput of vdlib's two engines on one GPU, in one process: transformers
(``vdlib.engines.generation.HFEngine``) against vLLM (``vdlib.engines.vllm_engine.VLLMEngine``).

    PYTHONPATH=/tmp/site:$PWD VLLM_USE_FLASHINFER_SAMPLER=0 \
        python benchmarks/engine_throughput.py --out $OUT/engine_throughput_h100.json

Workloads, the ``gpu`` profile's shapes (sizes are options; defaults vLLM / HF):

- ``proposer_generation``: proposer prompt, temperature 1.0, top-p 0.99, 2,048 new tokens, alpha
  0.75 mask, one mask (new ``mask_seed``) per generate call: 256 prompts in calls of 256 /
  32 prompts in calls of 64 (HFEngine batch 32).
- ``solver_scoring``: solver prompts of 8 short word problems (cycled), M = 10 answers each,
  temperature 1.0, top-p 0.99, 2,048 new tokens, no mask: 32 / 4 questions (HF batch 40).
- ``evaluation``: evaluation prompts of the same problems, temperature 0.7, top-p 1.0, n = 1,
  new tokens = ``--context`` (4,096) minus the longest prompt: 128 / 16 prompts (HF batch 16).

tokens/s = generated tokens (sum of ``len(Sample.token_ids)``) / wall seconds of the workload's
generate calls (``torch.cuda.synchronize`` around them), after an untimed warm-up per engine;
ratio = vLLM / HF. HF runs first; its model is freed, then ``build_llm`` starts vLLM (0.85 of
GPU memory, ``max_model_len`` = ``--context``). Mask overhead in vLLM: ``--overhead-repeats``
pairs of masked / unmasked calls (128 proposer prompts x 512 new tokens, order AB, BA, ...),
after one untimed call of each arm at that shape; per pair the ratio of seconds per generated
token; ``vllm_mask_overhead`` = median - 1, reported on ``proposer_generation`` (scoring and
evaluation are unmasked in the paper), with the paired t on the log ratios (t, df, p).

Model ``qwen3-0.6b-shape`` (default): Qwen3-0.6B's architecture, random weights, SmolLM2's
tokenizer (nothing else offline): a folder under ``--work-dir`` with a hand-written Qwen3
``config.json`` (vocabulary = len(tokenizer) rounded up to 64); HF initialises it with a fixed
seed, vLLM with ``load_format="dummy"``. Random weights seldom emit EOS, so samples run to their
limit in both engines. ``smollm2-135m``: the packaged real model, whose samples stop at EOS.

Goals, reported not asserted: ratio >= 10 per workload, mask overhead <= 2%. Writes
``benchmarks/results/engine_throughput_<card>.json`` (``--out`` overrides); prints a table.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import math
import os
import re
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

logger = logging.getLogger("engine_throughput")

DEVICE = "cuda"
WORKLOADS = ("proposer_generation", "solver_scoring", "evaluation")
GOALS = {"ratio_min": 10, "mask_overhead_max": 0.02}
QUESTIONS = (
    "Tom has 3 boxes of 12 apples and gives away 7 apples. How many apples are left?",
    "A train travels at 60 km per hour for 2.5 hours. How far does it go?",
    "Sara buys 4 notebooks at $3 each and a pen for $2. How much does she spend?",
    "A rectangle is 8 cm long and 5 cm wide. What is its area?",
    "5 workers build a wall in 6 days. How many days do 10 workers need?",
    "What is the sum of the first 20 positive odd integers?",
    "A $40 shirt is sold at 25% off. What is the sale price?",
    "Ben is twice as old as Ann. In 4 years their ages add up to 38. How old is Ann now?",
)
SIZES = {  # option: (default, help)
    "new_tokens": (2048, "max new tokens, proposer and solver"),
    "context": (4096, "evaluation context (new tokens = context - longest prompt); max_model_len"),
    "vllm_proposer_prompts": (256, "proposer prompts, vLLM"),
    "vllm_mask_batch": (256, "proposer prompts per generate call / mask, vLLM"),
    "hf_proposer_prompts": (32, "proposer prompts, HF"),
    "hf_mask_batch": (64, "proposer prompts per generate call / mask, HF"),
    "hf_proposer_batch": (32, "HFEngine batch_size, proposer"),
    "answers": (10, "solver answers per question (M, n)"),
    "vllm_questions": (32, "solver questions, vLLM"),
    "hf_questions": (4, "solver questions, HF"),
    "hf_solver_batch": (40, "HFEngine batch_size, solver (rows = questions x answers)"),
    "vllm_eval_prompts": (128, "evaluation prompts, vLLM"),
    "hf_eval_prompts": (16, "evaluation prompts, HF"),
    "hf_eval_batch": (16, "HFEngine batch_size, evaluation"),
    "overhead_prompts": (128, "proposer prompts per mask-overhead call, vLLM"),
    "overhead_tokens": (512, "max new tokens per mask-overhead call"),
    "overhead_repeats": (5, "masked / unmasked pairs in vLLM (0: skip)"),
}


@dataclass(frozen=True)
class Spec:
    """One engine's share of a workload (``mask_batch``: prompts per generate call, one mask
    each, None = one call; ``engine_batch``: HFEngine's ``batch_size``)."""

    prompts: int
    n: int
    max_new_tokens: int
    temperature: float
    top_p: float
    masked: bool = False
    mask_batch: int | None = None
    engine_batch: int | None = None


def timed(call: Callable[[], list[Any]]) -> tuple[float, list[Any]]:
    """(wall seconds, samples) of ``call()``, the GPU synchronised before and after."""
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    sync()
    start = time.perf_counter()
    samples = call()
    sync()
    return time.perf_counter() - start, samples


def mask_kw(vd: Any, seed: int, iteration: int, batch: int) -> dict[str, Any]:
    """generate's mask arguments: the mask of one batch (none when ``vd`` is None)."""
    from vdlib.method.vocab_dropout import mask_seed

    return {} if vd is None else {"vocab_dropout": vd,
                                  "mask_seed": mask_seed(seed, iteration, "gen", batch)}


def card_slug(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'h100'; a slug of the whole name when no model number fits."""
    found = re.search(r"\b([a-z]{1,2}\d{1,3}[a-z]?)\b", name.lower())
    return found.group(1) if found else re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def build_dummy(work_dir: Path) -> Path:
    """A folder with a Qwen3-0.6B-shaped ``config.json`` and SmolLM2's tokenizer (no weights)."""
    from bench_common import QWEN3_SHAPES
    from transformers import AutoTokenizer

    from vdlib.engines.models import prepare_tokenizer, smollm2_tokenizer_dir

    folder = work_dir / "qwen3-0.6b-shape"
    folder.mkdir(parents=True, exist_ok=True)
    for f in smollm2_tokenizer_dir().iterdir():
        if f.is_file():
            shutil.copy2(f, folder / f.name)
    tok = prepare_tokenizer(AutoTokenizer.from_pretrained(folder))
    ids = {"bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id,
           "pad_token_id": tok.pad_token_id}
    config = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
              **QWEN3_SHAPES["qwen3-0.6b-shape"], "max_position_embeddings": 40960,
              "max_window_layers": 28, "rope_theta": 1_000_000, "rms_norm_eps": 1e-6,
              "hidden_act": "silu", "attention_bias": False, "attention_dropout": 0.0,
              "initializer_range": 0.02, "use_sliding_window": False, "use_cache": True,
              "tie_word_embeddings": True, "torch_dtype": "bfloat16",
              "vocab_size": -(-len(tok) // 64) * 64, **ids}
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (folder / "generation_config.json").write_text(json.dumps(ids, indent=2) + "\n")
    return folder


def load_hf(args: argparse.Namespace, path: str) -> tuple[Any, Any]:
    """(model, tokenizer) for the HF engine: seeded random init, or SmolLM2's real weights."""
    if args.model == "smollm2-135m":
        from vdlib.engines.models import load_model

        return load_model("smollm2-135m", dtype="bfloat16", device=DEVICE)
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from vdlib.engines.models import prepare_tokenizer

    tok = prepare_tokenizer(AutoTokenizer.from_pretrained(path))
    torch.manual_seed(args.seed)
    with torch.device(DEVICE):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path),
                                                 dtype=torch.bfloat16)
    return model.eval(), tok


def prompt_texts(name: str, tok: Any, count: int) -> list[str]:
    from vdlib.method.prompts import evaluation_prompt, proposer_prompt, solver_prompt

    if name == "proposer_generation":
        return [proposer_prompt(tok)] * count
    render = solver_prompt if name == "solver_scoring" else evaluation_prompt
    return [render(tok, QUESTIONS[i % len(QUESTIONS)]) for i in range(count)]


def build_specs(args: argparse.Namespace, tok: Any) -> dict[str, dict[str, Spec]]:
    longest = max(len(tok(p, add_special_tokens=False).input_ids)
                  for p in prompt_texts("evaluation", tok, len(QUESTIONS)))
    eval_tokens = args.context - longest
    sample = {"temperature": 1.0, "top_p": 0.99}
    specs = {
        "proposer_generation": {
            "hf": Spec(args.hf_proposer_prompts, 1, args.new_tokens, masked=True,
                       mask_batch=args.hf_mask_batch, engine_batch=args.hf_proposer_batch,
                       **sample),
            "vllm": Spec(args.vllm_proposer_prompts, 1, args.new_tokens, masked=True,
                         mask_batch=args.vllm_mask_batch, **sample)},
        "solver_scoring": {
            "hf": Spec(args.hf_questions, args.answers, args.new_tokens,
                       engine_batch=args.hf_solver_batch, **sample),
            "vllm": Spec(args.vllm_questions, args.answers, args.new_tokens, **sample)},
        "evaluation": {
            "hf": Spec(args.hf_eval_prompts, 1, eval_tokens, 0.7, 1.0,
                       engine_batch=args.hf_eval_batch),
            "vllm": Spec(args.vllm_eval_prompts, 1, eval_tokens, 0.7, 1.0)},
    }
    return {name: specs[name] for name in args.workloads}


def run_spec(engine: Any, tok: Any, name: str, spec: Spec, vd: Any, seed: int) -> dict[str, Any]:
    """Time one engine's share of a workload: one generate call (one mask) per mask batch."""
    prompts = prompt_texts(name, tok, spec.prompts)
    step = spec.mask_batch or len(prompts)
    calls = list(enumerate(range(0, len(prompts), step)))
    seconds, samples = timed(lambda: [
        s for b, first in calls
        for s in engine.generate(prompts[first:first + step], n=spec.n, seed=seed + b,
                                 temperature=spec.temperature, top_p=spec.top_p,
                                 max_new_tokens=spec.max_new_tokens,
                                 **mask_kw(vd if spec.masked else None, seed, 1, b))])
    tokens = sum(len(s.token_ids) for s in samples)
    stopped = sum(s.finish_reason == "stop" for s in samples)
    logger.info("%s: %d samples, %d tokens (%d stopped at EOS) in %.1f s: %.0f tok/s", name,
                len(samples), tokens, stopped, seconds, tokens / seconds)
    return {"seconds": seconds, "tokens": tokens, "stopped": stopped, "calls": len(calls),
            "tok_s": tokens / seconds}


def warm_up(engine: Any, tok: Any, vd: Any, seed: int) -> None:
    for name, mask in (("proposer_generation", mask_kw(vd, seed, 0, 0)), ("solver_scoring", {})):
        engine.generate(prompt_texts(name, tok, 2), n=2, temperature=1.0, top_p=0.99,
                        max_new_tokens=16, seed=seed, **mask)


def hf_phase(args: argparse.Namespace, path: str) -> tuple[dict[str, Any], Any, dict]:
    """HF results per workload, the tokenizer, the specs (the HF model is freed on return)."""
    from vdlib.engines.generation import HFEngine
    from vdlib.method.vocab_dropout import VocabDropout

    start = time.perf_counter()
    model, tok = load_hf(args, path)
    logger.info("HF model loaded in %.1f s: %.3f B params", time.perf_counter() - start,
                sum(p.numel() for p in model.parameters()) / 1e9)
    specs = build_specs(args, tok)
    vd = VocabDropout.for_model(model, tok, args.alpha)
    warm_up(HFEngine(model, tok, batch_size=4, show_progress=False), tok, vd, args.seed)
    results = {}
    for name, spec in specs.items():
        engine = HFEngine(model, tok, batch_size=spec["hf"].engine_batch or 1,
                          show_progress=False)
        results[name] = run_spec(engine, tok, name, spec["hf"], vd, args.seed)
    del model, engine
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return results, tok, specs


def mask_overhead(engine: Any, tok: Any, vd: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Alternating masked / unmasked vLLM calls of one shape; per-pair per-token time ratios."""
    from vdlib.utils.stats import compare_seeds

    prompts = prompt_texts("proposer_generation", tok, args.overhead_prompts)
    per_token: dict[str, list[float]] = {"unmasked": [], "masked": []}
    for arm in ("unmasked", "masked"):  # untimed, one call per arm at the pairs' own shape
        engine.generate(prompts, n=1, temperature=1.0, top_p=0.99,
                        max_new_tokens=args.overhead_tokens, seed=args.seed + 999,
                        **mask_kw(vd if arm == "masked" else None, args.seed, 2,
                                 args.overhead_repeats))
    for r in range(args.overhead_repeats):
        for arm in (("unmasked", "masked") if r % 2 == 0 else ("masked", "unmasked")):
            mask = mask_kw(vd if arm == "masked" else None, args.seed, 2, r)
            seconds, samples = timed(lambda mask=mask, r=r: engine.generate(
                prompts, n=1, temperature=1.0, top_p=0.99, max_new_tokens=args.overhead_tokens,
                seed=args.seed + 1000 + r, **mask))
            tokens = sum(len(s.token_ids) for s in samples)
            per_token[arm].append(seconds / tokens)
            logger.info("mask overhead pair %d %s: %d tokens in %.2f s", r, arm, tokens, seconds)
    ratios = [m / u for m, u in zip(per_token["masked"], per_token["unmasked"], strict=True)]
    test = compare_seeds(dict(enumerate(map(math.log, per_token["unmasked"]))),
                         dict(enumerate(map(math.log, per_token["masked"]))), permutation=False)
    return {"prompts": args.overhead_prompts, "max_new_tokens": args.overhead_tokens,
            "pairs": args.overhead_repeats, "per_repeat_ratios": [round(x, 4) for x in ratios],
            "overhead": statistics.median(ratios) - 1,
            "log_ratio_paired_t": {"t": test.paired_t, "df": test.paired_df, "p": test.paired_p},
            "us_per_token": {k: [round(1e6 * x, 3) for x in v] for k, v in per_token.items()}}


def vllm_phase(args: argparse.Namespace, path: str, tok: Any,
               specs: dict) -> tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any]]:
    from vdlib.engines.vllm_backend import build_llm, vllm_interfaces
    from vdlib.engines.vllm_engine import VLLMEngine
    from vdlib.method.vocab_dropout import VocabDropout

    info = vllm_interfaces()
    start = time.perf_counter()
    llm = build_llm(path, dtype="bfloat16", gpu_memory_utilization=args.gpu_memory_utilization,
                    max_model_len=args.context, seed=args.seed, enforce_eager=args.enforce_eager,
                    load_format="dummy" if args.model == "qwen3-0.6b-shape" else "auto")
    info["start_seconds"] = round(time.perf_counter() - start, 1)
    engine = VLLMEngine(llm, tok, route=args.route, show_progress=False)
    try:
        vd = VocabDropout.for_checkpoint(path, tok, args.alpha)
        warm_up(engine, tok, vd, args.seed)
        results = {name: run_spec(engine, tok, name, spec["vllm"], vd, args.seed)
                   for name, spec in specs.items()}
        overhead = mask_overhead(engine, tok, vd, args) if args.overhead_repeats > 0 else None
    finally:
        engine.close()
    return results, overhead, info


def summarise(specs: dict, hf: dict, vl: dict,
              overhead: dict[str, Any] | None) -> tuple[list[dict], dict[str, bool]]:
    entries, met_all = [], {}
    for name, spec in specs.items():
        ratio = vl[name]["tok_s"] / hf[name]["tok_s"]
        ovh = overhead["overhead"] if overhead and name == "proposer_generation" else None
        met = {"ratio": ratio >= GOALS["ratio_min"],
               "mask_overhead": None if ovh is None else ovh <= GOALS["mask_overhead_max"]}
        met_all[name] = all(v for v in met.values() if v is not None)
        entries.append({
            "name": name, "hf_tok_s": round(hf[name]["tok_s"], 1),
            "vllm_tok_s": round(vl[name]["tok_s"], 1), "ratio": round(ratio, 2),
            "vllm_mask_overhead": None if ovh is None else round(ovh, 4),
            "sizes": {"hf": asdict(spec["hf"]), "vllm": asdict(spec["vllm"])},
            **{f"{e}_{k}": round(r[name][k], 2) if k == "seconds" else r[name][k]
               for e, r in (("hf", hf), ("vllm", vl))
               for k in ("seconds", "tokens", "stopped", "calls")},
            "goals_met": met})
    return entries, met_all


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="qwen3-0.6b-shape",
                   choices=["qwen3-0.6b-shape", "smollm2-135m"])
    p.add_argument("--work-dir", default="/tmp/engine_throughput",
                   help="where the qwen3-0.6b-shape folder is written")
    p.add_argument("--out", help="result JSON (default benchmarks/results/"
                                 "engine_throughput_<card>.json)")
    p.add_argument("--workloads", default=",".join(WORKLOADS),
                   type=lambda s: [w for w in s.split(",") if w], help="comma-separated subset")
    p.add_argument("--alpha", type=float, default=0.75)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--route", default="processor", choices=["processor", "allowed_token_ids"],
                   help="VLLMEngine mask route")
    for name, (default, what) in SIZES.items():
        p.add_argument(f"--{name.replace('_', '-')}", type=int, default=default,
                       help=f"{what} (default {default})")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.85)
    p.add_argument("--enforce-eager", action="store_true", help="vLLM without CUDA graphs")
    p.add_argument("--hf-results", help="JSON of an earlier transformers phase on the same "
                   "machine (written beside --out as *.hf.json): run only the vLLM phase")
    args = p.parse_args(argv)
    if not args.workloads or set(args.workloads) - set(WORKLOADS):
        p.error(f"--workloads: a comma-separated subset of {', '.join(WORKLOADS)}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if not torch.cuda.is_available():
        p.error("needs a CUDA GPU (and vLLM)")
    import transformers

    start = time.perf_counter()
    if args.model == "qwen3-0.6b-shape":
        path = str(build_dummy(Path(args.work_dir)))
    else:
        from vdlib.engines.models import checkpoint_path

        path = checkpoint_path("smollm2-135m")
    card = torch.cuda.get_device_name()
    logger.info("%s on %s; model folder %s", args.model, card, path)
    if args.hf_results:  # transformers measured earlier on this machine (same script and sizes)
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(path)
        specs = build_specs(args, tok)
        hf = json.loads(Path(args.hf_results).read_text())["results"]
        logger.info("transformers results read from %s", args.hf_results)
    else:
        hf, tok, specs = hf_phase(args, path)
        hf_out = Path(args.out or ROOT / "benchmarks" / "results"
                      / f"engine_throughput_{card_slug(card)}.json").with_suffix(".hf.json")
        hf_out.write_text(json.dumps({"card": card, "model": args.model, "results": hf},
                                     indent=2) + "\n")  # kept if the vLLM phase is cut off
    vl, overhead, info = vllm_phase(args, path, tok, specs)
    entries, goals_met = summarise(specs, hf, vl, overhead)
    config = json.loads((Path(path) / "config.json").read_text())
    result = {
        "benchmark": "engine_throughput", "card": card, "card_slug": card_slug(card),
        "vllm_version": info["vllm_version"],
        "vllm_interfaces": {k: info[k] for k in ("v1", "v2")},
        "torch": torch.__version__, "transformers": transformers.__version__,
        "env": {k: os.environ.get(k) for k in ("VLLM_USE_FLASHINFER_SAMPLER",
                                               "VLLM_USE_V2_MODEL_RUNNER")},
        "model": {"name": args.model, "path": path,
                  "weights": "random (HF: seeded from_config; vLLM: load_format=dummy)"
                  if args.model == "qwen3-0.6b-shape" else "real (SmolLM2-135M-Instruct)",
                  **{k: config.get(k) for k in ("hidden_size", "num_hidden_layers",
                                                "vocab_size")},
                  "tokenizer_ids": len(tok)},
        "alpha": args.alpha, "route": args.route, "seed": args.seed,
        "hf_source": args.hf_results or "this process",
        "vllm": {"gpu_memory_utilization": args.gpu_memory_utilization,
                 "max_model_len": args.context, "enforce_eager": args.enforce_eager,
                 "start_seconds": info["start_seconds"]},
        "workloads": entries, "mask_overhead": overhead,
        "mask_overhead_repeats": overhead["per_repeat_ratios"] if overhead else [],
        "goals": GOALS, "goals_met": goals_met,
        "seconds_total": round(time.perf_counter() - start, 1),
    }
    out = Path(args.out or ROOT / "benchmarks" / "results"
               / f"engine_throughput_{card_slug(card)}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    logger.info("wrote %s", out)
    print(f"{args.model} on {card}, vLLM {info['vllm_version']}")
    print(f"{'workload':<22}{'HF tok/s':>10}{'vLLM tok/s':>12}{'ratio':>8}"
          f"{'mask overhead':>15}  goals met")
    for e in entries:
        ovh = "-" if e["vllm_mask_overhead"] is None else f"{100 * e['vllm_mask_overhead']:.2f}%"
        print(f"{e['name']:<22}{e['hf_tok_s']:>10.0f}{e['vllm_tok_s']:>12.0f}"
              f"{e['ratio']:>8.1f}{ovh:>15}  {goals_met[e['name']]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
