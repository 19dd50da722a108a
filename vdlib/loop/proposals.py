"""Proposer sampling: outputs -> question records (the questions before scoring).

:func:`generate_proposals` samples the proposer prompt ``n`` times with the curriculum settings
and :func:`proposal_records` parses every sample into a JSON-ready record:
``{"index", "question", "answer", "valid", "text", "finish_reason", "num_tokens", "seed",
"mask_seed"}`` (``question`` / ``answer`` are None when the output does not follow the
``<question>...</question>`` then ``\\boxed{...}`` format). Later stages add the solver's answers,
majority answer and acc to the same records.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vdlib.config.experiment import CurriculumConfig
from vdlib.engines.generation import GenerationBatch, GenerationEngine, Sample, generate_batches
from vdlib.method.parsing import extract_proposal
from vdlib.method.prompts import proposer_prompt
from vdlib.method.seeding import derive_seed
from vdlib.method.vocab_dropout import VocabDropout, mask_seed

__all__ = ["generate_proposals", "proposal_records", "valid_fraction"]


def generate_proposals(engine: GenerationEngine, tokenizer: Any, cfg: CurriculumConfig,
                       n: int | None = None, seed: int = 0, iteration: int = 1,
                       vocab_dropout: VocabDropout | None = None) -> list[Sample]:
    """``n`` (default ``cfg.num_questions``) samples of the proposer prompt.

    Generated in batches of ``cfg.batch_size``; batch ``b`` samples with
    ``derive_seed(seed, "curriculum", iteration, b)`` and, with ``vocab_dropout``, under the
    fresh mask of ``mask_seed(seed, iteration, "gen", b)`` (paper: one mask per generation batch).
    A vLLM engine receives all batches in one call
    (:func:`vdlib.engines.generation.generate_batches`); each keeps its own seed and mask.
    """
    prompt = proposer_prompt(tokenizer)
    total = n or cfg.num_questions
    batches = []
    for b, start in enumerate(range(0, total, cfg.batch_size)):
        masking = {}
        if vocab_dropout is not None:
            masking = {"vocab_dropout": vocab_dropout,
                       "mask_seed": mask_seed(seed, iteration, "gen", b)}
        batches.append(GenerationBatch([prompt], n=min(cfg.batch_size, total - start),
                                       seed=derive_seed(seed, "curriculum", iteration, b),
                                       **masking))
    per_batch = generate_batches(engine, batches, temperature=cfg.temperature, top_p=cfg.top_p,
                                 top_k=cfg.top_k, max_new_tokens=cfg.max_new_tokens)
    return [s for batch in per_batch for s in batch]


def proposal_records(samples: Sequence[Sample]) -> list[dict[str, Any]]:
    """One parsed record per sample (see the module docstring), in sample order."""
    records = []
    for i, s in enumerate(samples):
        proposal = extract_proposal(s.text)
        records.append({
            "index": i,
            "question": proposal.question if proposal else None,
            "answer": proposal.answer if proposal else None,
            "valid": proposal is not None,
            "text": s.text,
            "finish_reason": s.finish_reason,
            "num_tokens": len(s.token_ids),
            "seed": s.seed,
            "mask_seed": s.mask_seed,
        })
    return records


def valid_fraction(records: Sequence[dict[str, Any]]) -> float:
    """Fraction of records whose output parsed into a question and an answer (0 if empty)."""
    return sum(r["valid"] for r in records) / len(records) if records else 0.0
