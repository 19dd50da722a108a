"""The evaluation loop: the protocol over benchmarks x runs with resumable per-run records.

:func:`evaluate`'s protocol defaults (runs, temperature, top-p, max context, batch size) are those
of the config's ``evaluation`` section (:class:`vdlib.config.experiment.EvaluationConfig`), their
single source. Part of :mod:`vdlib.evaluation` (the protocol is described there)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vdlib.config.experiment import EvaluationConfig
from vdlib.evaluation.answers import grade
from vdlib.evaluation.benchmarks import BENCHMARKS, load_benchmark
from vdlib.evaluation.stats import BenchmarkResult, EvalSummary
from vdlib.method.prompts import evaluation_prompt
from vdlib.method.seeding import derive_seed
from vdlib.utils.artifacts import atomic_write_json, read_jsonl, write_jsonl

__all__ = ["ROUND_TOKENS", "evaluate", "protocol_kwargs"]

logger = logging.getLogger(__name__)


#: Tokens per generation round of the transformers engine (see HFEngine.round_tokens).
ROUND_TOKENS = 512

#: The ``evaluation`` section's defaults (the paper's protocol): :func:`evaluate`'s defaults.
_PROTOCOL = EvaluationConfig()


def protocol_kwargs(ev: EvaluationConfig) -> dict[str, Any]:
    """:func:`evaluate`'s keyword arguments from a config's ``evaluation`` section (the one
    mapping of its keys onto the protocol; the benchmark list is passed separately)."""
    return {"runs": ev.runs, "temperature": ev.temperature, "top_p": ev.top_p,
            "max_context": ev.max_context, "max_new_tokens": ev.max_new_tokens,
            "data_dir": ev.data_dir, "limit": ev.limit, "batch_size": ev.batch_size,
            "olympiadbench_subset": ev.olympiadbench_subset, "se_ddof": ev.se_ddof}


def _as_engine(model_or_engine: Any, tokenizer: Any, batch_size: int) -> Any:
    try:
        import torch
    except ImportError:  # pragma: no cover
        torch = None
    if torch is not None and isinstance(model_or_engine, torch.nn.Module):
        from vdlib.engines.generation import HFEngine

        # rounds of 512 tokens: rows that ended stop decoding instead of riding along until the
        # slowest row of the batch reaches the 4096-token context (same sampling distribution)
        return HFEngine(model_or_engine, tokenizer, batch_size=batch_size, show_progress=False,
                        round_tokens=ROUND_TOKENS)
    if not callable(getattr(model_or_engine, "generate", None)):
        raise TypeError("evaluate() needs a transformers model or an engine with .generate()")
    return model_or_engine


def _prompt_lengths(tokenizer: Any, prompts: list[str]) -> list[int]:
    if tokenizer is None:
        return [0] * len(prompts)
    ids = tokenizer(prompts, add_special_tokens=False)["input_ids"]
    return [len(x) for x in ids]


def _run_benchmark(engine: Any, tokenizer: Any, name: str, items: list[dict[str, Any]],
                   run: int, run_seed: int, *, temperature: float, top_p: float,
                   max_context: int, max_new_tokens: int | None, batch_size: int,
                   template_kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
    prompts = [evaluation_prompt(tokenizer, it["problem"], **template_kwargs) for it in items]
    lengths = _prompt_lengths(tokenizer, prompts)
    completions: list[str | None] = [None] * len(items)
    n_tokens: list[int | None] = [None] * len(items)
    # Similar lengths share a generate call whose budget is max_context - its longest prompt.
    order = sorted(range(len(items)), key=lambda i: lengths[i])
    order_fit = [i for i in order if lengths[i] < max_context]
    for i in order:
        if lengths[i] >= max_context:
            logger.warning("%s item %s: prompt (%d tokens) fills max_context %d; scored wrong",
                           name, items[i]["id"], lengths[i], max_context)
            completions[i] = ""
    for c, start in enumerate(range(0, len(order_fit), batch_size)):
        chunk = order_fit[start : start + batch_size]
        budget = max_context - max(lengths[i] for i in chunk)
        if max_new_tokens is not None:
            budget = min(budget, max_new_tokens)
        logger.debug("%s run %d: batch %d (%d prompts, budget %d new tokens)", name, run, c,
                     len(chunk), budget)
        samples = engine.generate([prompts[i] for i in chunk], n=1, temperature=temperature,
                                  top_p=top_p, top_k=0, max_new_tokens=budget,
                                  seed=derive_seed(run_seed, "eval", name, c))
        for s in samples:
            i = chunk[s.prompt_index]
            completions[i] = s.text
            n_tokens[i] = len(s.token_ids)
    records = []
    for i, item in enumerate(items):
        g = grade(item, completions[i])
        records.append({"benchmark": name, "id": item["id"], "problem": item["problem"],
                        "gold": item["answer"], "completion": completions[i],
                        "extracted": g["extracted"], "correct": bool(g["correct"]),
                        "completion_tokens": n_tokens[i], "seed": run_seed, "run": run})
    return records


def evaluate(model_or_engine: Any, tokenizer: Any, benchmarks: Sequence[str],
             runs: int = _PROTOCOL.runs, *, seed: int = 0,
             temperature: float = _PROTOCOL.temperature, top_p: float = _PROTOCOL.top_p,
             max_context: int = _PROTOCOL.max_context,
             max_new_tokens: int | None = _PROTOCOL.max_new_tokens,
             data_dir: str | Path | None = _PROTOCOL.data_dir,
             limit: int | None = _PROTOCOL.limit, out_dir: str | Path | None = None,
             batch_size: int = _PROTOCOL.batch_size,
             template_kwargs: Mapping[str, Any] | None = None,
             olympiadbench_subset: str = _PROTOCOL.olympiadbench_subset,
             se_ddof: int = _PROTOCOL.se_ddof) -> EvalSummary:
    """Evaluate under the paper's protocol (module docstring); returns an :class:`EvalSummary`.

    The keyword defaults are :class:`vdlib.config.experiment.EvaluationConfig`'s (the ``paper``
    profile).

    ``model_or_engine``: a transformers model (wrapped in :class:`vdlib.engines.generation.HFEngine`
    with ``batch_size``) or any engine with the ``generate`` interface (vLLM, a fake in tests).
    Run ``r`` (0-based) uses seed ``seed + r``. With ``out_dir``, each run's records go to
    ``out_dir/<benchmark>/run<r>.jsonl`` (atomic) and the summary to ``out_dir/summary.json``;
    a run whose file exists is read back instead of generated (resume). The protocol is saved
    in ``out_dir/protocol.json`` and a different protocol in a folder that holds records is an
    error (a folder whose evaluation failed before any record takes the new protocol).
    ``template_kwargs`` go to the chat template (e.g. ``enable_thinking=False`` for Qwen3).
    ``olympiadbench_subset`` picks OlympiadBench's items (part of the protocol when it is
    evaluated); ``se_ddof`` is the spread rule of the summary's SEs (not part of the protocol:
    it changes no record).
    """
    if runs < 1:
        raise ValueError(f"runs = {runs}; allowed: runs >= 1")
    for b in benchmarks:
        BENCHMARKS.get(b)  # unknown names fail before any model work
    protocol = {"benchmarks": list(benchmarks), "seed": seed, "temperature": temperature,
                "top_p": top_p, "max_context": max_context, "max_new_tokens": max_new_tokens,
                "data_dir": str(data_dir) if data_dir is not None else None, "limit": limit}
    if "olympiadbench" in benchmarks:
        protocol["olympiadbench_subset"] = olympiadbench_subset
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        pfile = out / "protocol.json"
        has_records = any(out.glob("*/run*.jsonl"))
        if pfile.is_file() and has_records:  # a protocol without records protects nothing
            try:
                old = json.loads(pfile.read_text(encoding="utf-8"))
            except ValueError as e:
                raise ValueError(f"{pfile} is not valid JSON ({e}); use another output "
                                 "folder") from None
            diff = {k: (old.get(k), v) for k, v in protocol.items()
                    if k != "benchmarks" and old.get(k) != v}
            if diff:
                raise ValueError(f"{out} holds an evaluation with another protocol {diff} "
                                 "(old, new); use another output folder")
        atomic_write_json(pfile, protocol)
    engine = None
    summary = EvalSummary(protocol={**protocol, "se_ddof": se_ddof})
    for name in benchmarks:
        items = load_benchmark(name, data_dir=data_dir, limit=limit,
                               olympiadbench_subset=olympiadbench_subset)
        accs, seeds = [], []
        for r in range(runs):
            run_seed = seed + r
            path = out / name / f"run{r}.jsonl" if out is not None else None
            if path is not None and path.is_file():
                records = read_jsonl(path)
                if [x["id"] for x in records] != [it["id"] for it in items]:
                    raise ValueError(f"{path} does not hold this benchmark's items; use another "
                                     "output folder")
                logger.info("%s run %d: read back %s", name, r, path)
            else:
                if engine is None:
                    engine = _as_engine(model_or_engine, tokenizer, batch_size)
                records = _run_benchmark(engine, tokenizer, name, items, r, run_seed,
                                         temperature=temperature, top_p=top_p,
                                         max_context=max_context,
                                         max_new_tokens=max_new_tokens, batch_size=batch_size,
                                         template_kwargs=template_kwargs or {})
                if path is not None:
                    write_jsonl(path, records)
            acc = sum(x["correct"] for x in records) / len(records) if records else 0.0
            logger.info("%s run %d (seed %d): pass@1 %.4f over %d items", name, r, run_seed,
                        acc, len(records))
            accs.append(acc)
            seeds.append(run_seed)
        summary.results[name] = BenchmarkResult(name, len(items), accs, seeds, se_ddof)
    if out is not None:
        atomic_write_json(out / "summary.json", summary.to_dict())
    return summary


