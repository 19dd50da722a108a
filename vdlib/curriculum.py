"""Proposer outputs -> question records (the curriculum before scoring).

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

from vdlib.config import CurriculumConfig
from vdlib.generation import GenerationEngine, Sample
from vdlib.parsing import extract_proposal
from vdlib.prompts import proposer_prompt

__all__ = ["generate_proposals", "proposal_records", "valid_fraction"]


def generate_proposals(engine: GenerationEngine, tokenizer: Any, cfg: CurriculumConfig,
                       n: int | None = None, seed: int = 0) -> list[Sample]:
    """``n`` (default ``cfg.num_questions``) samples of the proposer prompt."""
    prompt = proposer_prompt(tokenizer)
    return engine.generate([prompt], n=n or cfg.num_questions, temperature=cfg.temperature,
                           top_p=cfg.top_p, top_k=cfg.top_k, max_new_tokens=cfg.max_new_tokens,
                           seed=seed)


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
