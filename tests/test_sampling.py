"""vdlib.engines.sampling: the nucleus filter against transformers' own top-p warper."""

from __future__ import annotations

import pytest
import torch
from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from vdlib.engines.sampling import NucleusFilter, sampling_processors


def _logits(kind: str, rows: int, vocab: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, vocab, generator=g)
    if kind == "peaked":  # an LM's next-token shape: a few likely tokens over a long tail
        x = x * 2.0
        x[:, :5] += torch.linspace(12, 4, 5)
    elif kind == "flat":  # a random-init model: nearly uniform
        x = x * 0.05
    elif kind == "masked":  # a vocabulary mask's -inf ids, a quarter of them
        drop = torch.rand(rows, vocab, generator=g) < 0.25
        x = (x * 3.0).masked_fill(drop, float("-inf"))
    return x


@pytest.mark.parametrize("kind", ["peaked", "flat", "masked", "plain"])
@pytest.mark.parametrize("top_p", [0.3, 0.9, 0.99, 0.999, 1.0])
def test_the_nucleus_filter_keeps_what_transformers_keeps(kind, top_p):
    scores = _logits(kind, 16, 4_099, seed=int(top_p * 1000) + len(kind))
    ours = NucleusFilter(top_p)(None, scores.clone())
    if top_p == 1.0:
        assert torch.equal(ours, scores)
        return
    theirs = TopPLogitsWarper(top_p)(None, scores.clone())
    assert torch.equal(torch.isinf(ours), torch.isinf(theirs))
    assert torch.equal(ours[~torch.isinf(ours)], scores[~torch.isinf(ours)])  # kept: unchanged


def test_at_least_min_tokens_are_kept_and_bad_settings_fail():
    scores = torch.tensor([[10.0, 0.0, -1.0, -2.0]])
    assert (~torch.isinf(NucleusFilter(0.01)(None, scores))).sum() == 1
    assert (~torch.isinf(NucleusFilter(0.01, min_tokens_to_keep=3)(None, scores))).sum() == 3
    for bad in (0.0, 1.5):
        with pytest.raises(ValueError, match="top_p"):
            NucleusFilter(bad)


def test_the_processors_follow_transformers_order():
    chain = sampling_processors(0.7, 20, 0.95)
    assert [type(p) for p in chain] == [TemperatureLogitsWarper, TopKLogitsWarper, NucleusFilter]
    assert sampling_processors(1.0, 0, 1.0) == []
    scores = _logits("peaked", 4, 1_000, seed=1)
    ours, theirs = scores.clone(), scores.clone()
    for p in chain:
        ours = p(None, ours)
    for p in (TemperatureLogitsWarper(0.7), TopKLogitsWarper(20), TopPLogitsWarper(0.95)):
        theirs = p(None, theirs)
    assert torch.equal(ours, theirs)
