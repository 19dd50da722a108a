"""The paper's sampling stages at a 4B/8B shape on one GPU, through vdlib's own engine code:
the K questions at batch scale and scoring, each against its decode ceiling (issue 49).

    python benchmarks/paper_throughput.py --shape qwen3-4b --tokenizer .q3tok --bench-dir .bench \
        --out $OUT/paper_throughput_h200.json

A random-init checkpoint of the shape (``vdlib plan --measure --dummy-weights``' builder, the
real Qwen3 tokenizer), ONE ``vllm.LLM`` started as the run's engine starts it
(``engine.gpu_memory_utilization``, CUDA graphs), then:

1. **the K questions**: ``--questions`` proposer prompts in generation batches of 64, each batch
   under its own fresh VD75 mask (``generate_proposals``: every batch goes to vLLM in one call,
   the mask travelling with each request as its seed), every output at the 2,048-token cap
   (random weights never stop);
2. **scoring**: ``--score-questions`` GSM8K questions x M = 10 answers (``score_questions``:
   one request per question with ``n = M``, so the M answers share the prompt's prefill),
   once for each cap on the sequences in flight (``--caps``): vLLM's default (1,024 on an
   H200 for the ``LLM`` class) admits more sequences than the KV cache holds at full length,
   and every sequence of a wave grows at once, so it preempts and recomputes; ``fit`` is the
   largest count whose sequences all fit at full length (KV tokens // max_model_len).
   The cap is the engine's ``max_num_seqs``; here it is set on the running scheduler so that
   one engine start serves every variant (the same field ``max_num_seqs`` sets at start).

For each: generated tokens, seconds, tokens/s, vLLM's preemptions, and the decode ceiling of
the run: each decode step reads the weights once and the KV cache of every sequence in flight,
at the card's copy bandwidth (``--bandwidth``, GB/s, measured here with a device-to-device copy
when not given), so ceiling tokens/s = mean sequences in flight / (bytes per step / bandwidth).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

logger = logging.getLogger("paper_throughput")


def copy_bandwidth_gbs() -> float:
    """Device-to-device copy bandwidth of GPU 0 (GB/s; a copy reads and writes each byte)."""
    import torch

    src = torch.empty(4 * 2**30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    torch.cuda.synchronize()
    start = time.perf_counter()
    reps = 20
    for _ in range(reps):
        dst.copy_(src)
    torch.cuda.synchronize()
    gbs = 2 * src.numel() * reps / (time.perf_counter() - start) / 1e9
    del src, dst
    torch.cuda.empty_cache()
    return gbs


def _core(llm):
    """The in-process engine core (vdlib's engines run with VLLM_ENABLE_V1_MULTIPROCESSING=0)."""
    client = llm.llm_engine.engine_core
    return getattr(client, "engine_core", client)


def _stats(core) -> dict:
    return {"preemptions": getattr(core.scheduler, "_vdlib_preemptions", 0)}


def count_preemptions(core) -> None:
    """Count the scheduler's preemptions (vLLM 0.25.1: ``Scheduler._preempt_request``)."""
    sched = core.scheduler
    sched._vdlib_preemptions = 0
    original = sched._preempt_request

    def preempt(*a, **k):
        sched._vdlib_preemptions += 1
        return original(*a, **k)

    sched._preempt_request = preempt


class InFlight:
    """Samples the number of running sequences (each step's batch) to average for the ceiling."""

    def __init__(self, core) -> None:
        self.core, self.samples = core, []
        sched = core.scheduler
        self._orig = sched.schedule
        self._preempt = 0

        def schedule(*a, **k):
            out = self._orig(*a, **k)
            self.samples.append(len(sched.running))
            return out

        sched.schedule = schedule

    def reset(self) -> None:
        self.samples = []

    def mean(self) -> float:
        busy = [s for s in self.samples if s]
        return sum(busy) / len(busy) if busy else 0.0


def kv_bytes_per_token(cfg: dict) -> int:
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    return 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * head_dim * 2  # K+V, bf16


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="qwen3-4b")
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--bench-dir", default=".bench")
    ap.add_argument("--work", default="/tmp/paper_throughput")
    ap.add_argument("--questions", type=int, default=512)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--score-questions", type=int, default=48)
    ap.add_argument("--m", type=int, default=10)
    ap.add_argument("--max-new-tokens", type=int, default=2048)
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.4)
    ap.add_argument("--caps", default="default,fit,1.5fit",
                    help="comma-separated: default (vLLM's), fit, <x>fit, or a number")
    ap.add_argument("--gen-cap", default="default")
    ap.add_argument("--bandwidth", type=float, default=None, help="GB/s; measured if omitted")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    os.environ.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")

    import torch

    from vdlib.app.plan_measure import _dummy_checkpoint, _real_problems
    from vdlib.app.plan_table import load_table, resolve_shape
    from vdlib.config.config_sections import CurriculumConfig
    from vdlib.engines.models import load_tokenizer
    from vdlib.engines.vllm_backend import build_llm
    from vdlib.engines.vllm_engine import VLLMEngine
    from vdlib.loop.proposals import generate_proposals
    from vdlib.loop.scoring import score_questions
    from vdlib.method.vocab_dropout import VocabDropout
    from vdlib.utils.artifacts import atomic_write_text

    result: dict = {"shape": args.shape, "card_name": torch.cuda.get_device_name(0),
                    "torch": torch.__version__, "runs": {}}
    out = Path(args.out)

    def save() -> None:
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out, json.dumps(result, indent=1) + "\n")

    bw = args.bandwidth or copy_bandwidth_gbs()
    result["bandwidth_gbs"] = round(bw, 1)
    result["bandwidth_source"] = ("given" if args.bandwidth else
                                  "measured: 4 GiB device-to-device copy, 2 bytes moved a byte")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    model_name = {"qwen3-4b": "Qwen/Qwen3-4B-Base", "qwen3-8b": "Qwen/Qwen3-8B-Base",
                  "qwen3-0.6b": "Qwen/Qwen3-0.6B-Base"}.get(args.shape, args.shape)
    t0 = time.perf_counter()
    folder, _ = _dummy_checkpoint(model_name, args.tokenizer, work)
    result["checkpoint_s"] = round(time.perf_counter() - t0, 1)
    shape = resolve_shape(model_name, load_table())
    mcfg = json.loads((folder / "config.json").read_text())
    weight_bytes = sum(f.stat().st_size for f in folder.glob("*.safetensors"))
    kvb = kv_bytes_per_token(mcfg)
    result.update(weight_bytes=weight_bytes, kv_bytes_per_token=kvb, shape_name=shape.name)
    tok = load_tokenizer(str(folder))
    max_len = 512 + args.max_new_tokens
    t0 = time.perf_counter()
    llm = build_llm(str(folder), gpu_memory_utilization=args.gpu_memory_utilization,
                    max_model_len=max_len, seed=0, enforce_eager=False)
    result["engine_start_s"] = round(time.perf_counter() - t0, 1)
    core = _core(llm)
    cache = llm.llm_engine.vllm_config.cache_config
    kv_tokens = int(cache.num_gpu_blocks * cache.block_size)
    default_cap = int(core.scheduler.max_num_running_reqs)
    fit = max(1, kv_tokens // max_len)
    result.update(kv_tokens=kv_tokens, kv_gib=round(kv_tokens * kvb / 2**30, 1),
                  max_model_len=max_len, default_max_num_seqs=default_cap, fit_max_num_seqs=fit,
                  gpu_memory_utilization=args.gpu_memory_utilization,
                  vllm_version=__import__("vllm").__version__)
    save()
    meter = InFlight(core)
    count_preemptions(core)
    engine = VLLMEngine(llm, tok, show_progress=False)

    def cap_of(spec: str) -> int:
        if spec == "default":
            return default_cap
        if spec.endswith("fit"):
            return max(1, int(float(spec[:-3] or 1) * fit))
        return int(spec)

    def run(name: str, cap: int, fn) -> None:
        core.scheduler.max_num_running_reqs = cap
        meter.reset()
        before = _stats(core)["preemptions"]
        torch.cuda.synchronize()
        start = time.perf_counter()
        tokens, seqs = fn()
        secs = time.perf_counter() - start
        inflight = meter.mean()
        # one decode step: the weights once, plus the KV of every sequence in flight at its
        # mean length (half the cap for sequences that all run to it, plus the prompt)
        mean_ctx = tokens / seqs / 2 + 100
        step_bytes = weight_bytes + inflight * mean_ctx * kvb
        ceiling = inflight / (step_bytes / (bw * 1e9)) if inflight else None
        # the ceiling at this cap if every admitted sequence stayed in flight
        full = min(cap, fit * 2)
        rec = {"cap": cap, "tokens": tokens, "sequences": seqs, "seconds": round(secs, 1),
               "tokens_per_s": round(tokens / secs, 1),
               "mean_in_flight": round(inflight, 1),
               "preemptions": _stats(core)["preemptions"] - before,
               "ceiling_tokens_per_s": round(ceiling, 1) if ceiling else None,
               "fraction_of_ceiling": round(tokens / secs / ceiling, 3) if ceiling else None,
               "note": f"ceiling = in flight / ((weights + in flight x {mean_ctx:.0f} tokens x "
                       f"{kvb} B) / {bw:.0f} GB/s); cap {cap} (fit {fit}, full {full})"}
        result["runs"][name] = rec
        logger.info("%s: %s", name, rec)
        save()

    problems = _real_problems(Path(args.bench_dir))
    vd = VocabDropout.for_checkpoint(str(folder), tok, 0.75)
    ccfg = CurriculumConfig(num_questions=args.questions, batch_size=args.batch_size,
                            max_new_tokens=args.max_new_tokens, temperature=1.0, top_p=0.99)

    def questions():
        samples = generate_proposals(engine, tok, ccfg, seed=0, iteration=1, vocab_dropout=vd)
        return sum(len(s.token_ids) for s in samples), len(samples)

    run(f"questions_k{args.questions}_{args.gen_cap}", cap_of(args.gen_cap), questions)
    qs = [q for q, _ in problems[:args.score_questions]]

    def scoring():
        scores = score_questions(qs, engine, tok, args.m, seed=0, temperature=1.0, top_p=0.99,
                                 max_new_tokens=args.max_new_tokens, show_progress=False)
        n = sum(len(s.answers) for s in scores)
        return scoring.tokens, n

    from vdlib.engines import vllm_engine as ve

    original = ve.VLLMEngine.generate_batches

    def counted(self, *a, **k):
        res = original(self, *a, **k)
        scoring.tokens = sum(len(s.token_ids) for b in res for s in b)
        return res

    ve.VLLMEngine.generate_batches = counted
    for spec in args.caps.split(","):
        run(f"score_q{args.score_questions}_m{args.m}_{spec}", cap_of(spec), scoring)
    ve.VLLMEngine.generate_batches = original
    result["done"] = True
    save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
