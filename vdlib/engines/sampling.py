"""Nucleus (top-p) filtering without sorting the whole vocabulary, for the transformers engine.

transformers' ``TopPLogitsWarper`` sorts every row's full logits at every decoding step. On one
CPU thread, SmolLM2's 49,152-wide rows cost 0.24 s a step for 64 rows: 25 s (15 %) of a tiny
quickstart iteration went to ``torch.sort`` (cProfile; benchmarks/hf_generation_speed.py). The same
filter needs only the tokens that can be kept: with ``1 - top_p = eps``, every token whose
probability is below ``eps / V`` is removed (all of them together weigh less than ``eps``, and
they are the smallest), so only the others are ranked; an LM's next-token distribution has a few
dozen to a few thousand of them, and the filter then runs ~10x faster on real logits.

:class:`NucleusFilter` keeps transformers' rule exactly (ascending cumulative probability,
remove while ``<= 1 - top_p``, keep ``min_tokens_to_keep``); only the order in which the
removed tail's probabilities are summed differs, which can move the boundary only where a
cumulative sum lies within float rounding of ``1 - top_p`` (tests/test_sampling.py compares it
with transformers' warper).

:func:`sampling_processors` gives the warpers in transformers' own order (temperature, top-k,
top-p) as explicit processors, to append after any logits processor (e.g. the vocabulary mask)
while the generation config samples plainly (temperature 1, no top-k, no top-p): the same chain
``generate`` builds, with the nucleus filter swapped.
"""

from __future__ import annotations

import torch
from transformers import LogitsProcessor, TemperatureLogitsWarper, TopKLogitsWarper

__all__ = ["NucleusFilter", "sampling_processors"]


class NucleusFilter(LogitsProcessor):
    """Top-p filtering as ``transformers.TopPLogitsWarper``, ranking only the tokens that can be
    kept (see the module docstring)."""

    def __init__(self, top_p: float, filter_value: float = -float("inf"),
                 min_tokens_to_keep: int = 1) -> None:
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p = {top_p}; allowed: 0 < top_p <= 1")
        if min_tokens_to_keep < 1:
            raise ValueError(f"min_tokens_to_keep = {min_tokens_to_keep}; allowed: >= 1")
        self.top_p = float(top_p)
        self.filter_value = filter_value
        self.min_tokens_to_keep = min_tokens_to_keep

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.top_p >= 1.0:
            return scores
        eps = 1.0 - self.top_p
        probs = scores.softmax(dim=-1)
        candidate = probs >= eps / scores.shape[-1]
        width = max(int(candidate.sum(dim=-1).max()), self.min_tokens_to_keep)
        width = min(width, scores.shape[-1])
        # the removed tail below the candidates: its mass starts every row's cumulative sum
        tail = torch.where(candidate, torch.zeros_like(probs), probs).sum(dim=-1, keepdim=True)
        top, index = torch.topk(torch.where(candidate, probs, torch.full_like(probs, -1.0)),
                                width, dim=-1)
        # ascending, as transformers sorts; the non-candidates (-1) come first and are removed
        ascending = top.flip(-1)
        cumulative = tail + ascending.clamp(min=0).cumsum(dim=-1)
        remove = (cumulative <= eps) | (ascending < 0)
        remove[..., -self.min_tokens_to_keep:] = False
        keep = torch.zeros_like(scores, dtype=torch.bool)
        keep.scatter_(-1, index.flip(-1), ~remove)
        return scores.masked_fill(~keep, self.filter_value)


def sampling_processors(temperature: float, top_k: int, top_p: float) -> list[LogitsProcessor]:
    """transformers' sampling warpers for these settings, in its order, with
    :class:`NucleusFilter` for top-p; empty for plain sampling (temperature 1, no filters)."""
    out: list[LogitsProcessor] = []
    if temperature != 1.0:
        out.append(TemperatureLogitsWarper(temperature))
    if top_k:
        out.append(TopKLogitsWarper(top_k=top_k))
    if top_p < 1.0:
        out.append(NucleusFilter(top_p))
    return out
