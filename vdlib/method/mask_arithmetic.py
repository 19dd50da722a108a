"""The arithmetic of the retention probability alpha: what Bernoulli(alpha) masks do to fixed
token sets, over one batch and over many (paper Sec. "Vocabulary dropout", Eq. 3: every
non-protected token survives a batch's mask independently with probability alpha, and the mask
is redrawn every batch, Algorithm 1: "fresh mask per batch").

- :func:`template_survival`: a fixed template whose L distinct tokens are all non-protected
  survives one mask (every one of its tokens allowed) with probability ``alpha ** L``. Under one
  fixed mask that is decided once for the whole run; under fresh masks it is the share of batches
  in which the template can be written at all.
- :func:`allowed_at_least_once` / :func:`allowed_every_batch`: over B independent masks a
  non-protected token is allowed in at least one batch with probability ``1 - (1 - alpha) ** B``
  and in every batch with probability ``alpha ** B``; a single fixed mask (any B) gives alpha for
  both.
- :func:`expected_dropped_mass`: the probability a next-token distribution puts on the dropped
  ids, in expectation over the mask: ``(1 - alpha)`` times its mass on the drawn, non-protected
  ids, plus its mass on ids that are always dropped (undrawn, padded).
- :func:`distinct_free_tokens`: L of a token sequence, its distinct non-protected ids.

Pure functions of floats and tensors; :mod:`vdlib.method.vocab_dropout` draws the masks these
formulas describe (tests/test_mask_arithmetic.py checks each against real draws).

>>> round(template_survival(0.75, 10), 4), round(template_survival(0.75, 10, batches=3), 6)
(0.0563, 0.000179)
>>> round(allowed_at_least_once(0.75, 4), 4), round(allowed_every_batch(0.75, 4), 4)
(0.9961, 0.3164)
>>> allowed_at_least_once(0.75, 4, fresh=False), allowed_every_batch(0.75, 4, fresh=False)
(0.75, 0.75)
>>> import torch
>>> p = torch.tensor([0.5, 0.3, 0.2])  # id 0 protected
>>> round(float(expected_dropped_mass(p, 0.75, protected=torch.tensor([True, False, False]))), 4)
0.125
>>> distinct_free_tokens([5, 7, 5, 2, 9], protected=[2])
3
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

__all__ = ["template_survival", "allowed_at_least_once", "allowed_every_batch",
           "expected_dropped_mass", "distinct_free_tokens"]


def _alpha(alpha: float) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 < alpha <= 1:
        raise ValueError(f"alpha = {alpha!r} is out of range; allowed: 0 < alpha <= 1")
    return float(alpha)


def _count(value: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} = {value!r} must be an integer >= 0")
    return value


def template_survival(alpha: float, length: int, batches: int = 1) -> float:
    """Probability that a template of ``length`` distinct non-protected tokens is allowed by
    one mask (``alpha ** length``), or by every one of ``batches`` independent masks
    (``alpha ** (length * batches)``)."""
    return _alpha(alpha) ** (_count(length, "length") * _count(batches, "batches"))


def allowed_at_least_once(alpha: float, batches: int, fresh: bool = True) -> float:
    """Probability that a non-protected token is allowed in at least one of ``batches`` masks:
    ``1 - (1 - alpha) ** batches`` for fresh (independent) masks, ``alpha`` for one fixed mask
    (0 when there is no batch). The expected share of the vocabulary a run can reach."""
    a, b = _alpha(alpha), _count(batches, "batches")
    if b == 0:
        return 0.0
    return 1.0 - (1.0 - a) ** b if fresh else a


def allowed_every_batch(alpha: float, batches: int, fresh: bool = True) -> float:
    """Probability that a non-protected token is allowed in every one of ``batches`` masks:
    ``alpha ** batches`` for fresh masks, ``alpha`` for one fixed mask (1 when there is no
    batch). The expected share of the vocabulary a policy could rely on throughout."""
    a, b = _alpha(alpha), _count(batches, "batches")
    if b == 0:
        return 1.0
    return a ** b if fresh else a


def expected_dropped_mass(probs: torch.Tensor, alpha: float, protected: torch.Tensor,
                          always_dropped: torch.Tensor | None = None) -> torch.Tensor:
    """Expected probability mass on the dropped ids, over Bernoulli(``alpha``) masks.

    ``probs`` (..., V): next-token distributions (rows sum to 1, e.g. one per generation step);
    ``protected`` bool (V,): ids every mask keeps; ``always_dropped`` bool (V,): ids every mask
    drops (outside the draw and not protected; default none). Returns (...,):
    ``(1 - alpha) * p(drawn, not protected) + p(always dropped)``. The realised dropped mass of
    one mask scatters around it (:func:`vdlib.report.walkthrough.mask_effect`)."""
    a = _alpha(alpha)
    if protected.shape != probs.shape[-1:]:
        raise ValueError(f"protected {tuple(protected.shape)} does not match the distributions' "
                         f"width {probs.shape[-1]}")
    always = (torch.zeros_like(protected, dtype=torch.bool) if always_dropped is None
              else always_dropped.bool() & ~protected.bool())
    if always.shape != protected.shape:
        raise ValueError(f"always_dropped {tuple(always.shape)} does not match protected "
                         f"{tuple(protected.shape)}")
    drawn = ~protected.bool() & ~always
    p = probs.float()
    return (1.0 - a) * p[..., drawn].sum(-1) + p[..., always].sum(-1)


def distinct_free_tokens(token_ids: Iterable[int], protected: Iterable[int] = ()) -> int:
    """L of a template: the number of distinct ids in ``token_ids`` that are not protected
    (a repeated id is one Bernoulli draw; a protected one always survives)."""
    return len({int(t) for t in token_ids} - {int(p) for p in protected})
