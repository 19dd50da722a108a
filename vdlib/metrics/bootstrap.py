"""Bootstrap standard errors of pair statistics (paper tab:nli_diversity: "Standard errors
bootstrapped from 100 resamples").

Both columns of that table are means over pairs of questions: the cosine distance ``1 - cos``
of two embeddings (:func:`pairwise_cosine_distances`) and the NLI score of a (premise,
hypothesis) pair (:func:`vdlib.metrics.nli.nli_pair_scores`). Two resampling units are offered;
the paper does not say which it used:

- ``pairs`` (:func:`bootstrap_se`): the scored pairs are resampled with replacement and the SE
  is the standard deviation (ddof 1) of the resampled means. With the 10^5+ pairs of a
  curriculum it is expected to give semantic SEs below 0.001, as the paper prints them
  (consistent with it; the paper's data are not available to confirm it).
- ``questions`` (:func:`item_bootstrap_se`): the questions are resampled with replacement
  (multinomial counts ``c``) and each resample's statistic is the pair mean weighted by
  ``c_i c_j``; this keeps the dependence between pairs that share a question, so it is larger.

Both are pure functions of their inputs and a seed (``numpy.random.default_rng(seed)``).

>>> bootstrap_se([1.0, 1.0, 1.0], resamples=10)
0.0
>>> pairs, d = pairwise_cosine_distances([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
>>> pairs.tolist(), d.round(6).tolist()
([[0, 1], [0, 2], [1, 2]], [1.0, 2.0, 1.0])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["BOOTSTRAP_UNITS", "bootstrap_se", "item_bootstrap_se", "pair_bootstrap_se",
           "pairwise_cosine_distances"]

BOOTSTRAP_UNITS = ("pairs", "questions")


def bootstrap_se(values: Sequence[float] | np.ndarray, resamples: int = 100,
                 seed: int = 0) -> float:
    """Bootstrap SE of the mean of ``values`` (m,): the standard deviation (ddof 1) of the
    means of ``resamples`` resamples of size m drawn with replacement (``default_rng(seed)``).
    Fewer than 2 values: ``nan``."""
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size < 2:
        return float("nan")
    if resamples < 2:
        raise ValueError(f"resamples must be >= 2, got {resamples}")
    rng = np.random.default_rng(seed)
    means = np.array([x[rng.integers(0, x.size, x.size)].mean() for _ in range(resamples)])
    return float(means.std(ddof=1))


def item_bootstrap_se(pairs: np.ndarray, scores: Sequence[float] | np.ndarray, n_items: int,
                      resamples: int = 100, seed: int = 0) -> float:
    """Bootstrap SE of a pair mean when the ``n_items`` items, not the pairs, are resampled:
    per resample, counts ``c ~ Multinomial(n_items, 1/n_items)`` and the statistic
    ``sum_k c[i_k] c[j_k] s_k / sum_k c[i_k] c[j_k]`` over the scored ``pairs`` (m, 2) with
    ``scores`` (m,); SE = standard deviation (ddof 1) of the statistics (a resample whose
    weights are all zero is drawn again). Fewer than 2 items or no pairs: ``nan``."""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    s = np.asarray(scores, dtype=np.float64).ravel()
    if len(s) != len(pairs):
        raise ValueError(f"{len(pairs)} pairs but {len(s)} scores")
    if n_items < 2 or s.size == 0:
        return float("nan")
    if resamples < 2:
        raise ValueError(f"resamples must be >= 2, got {resamples}")
    rng = np.random.default_rng(seed)
    stats: list[float] = []
    while len(stats) < resamples:
        c = rng.multinomial(n_items, np.full(n_items, 1.0 / n_items)).astype(np.float64)
        w = c[pairs[:, 0]] * c[pairs[:, 1]]
        if w.sum() > 0:
            stats.append(float(w @ s / w.sum()))
    return float(np.std(stats, ddof=1))


def pair_bootstrap_se(pairs: np.ndarray, scores: Sequence[float] | np.ndarray, n_items: int,
                      unit: str = "pairs", resamples: int = 100, seed: int = 0) -> float:
    """:func:`bootstrap_se` (``unit="pairs"``) or :func:`item_bootstrap_se` (``"questions"``)."""
    if unit == "pairs":
        return bootstrap_se(scores, resamples, seed)
    if unit == "questions":
        return item_bootstrap_se(pairs, scores, n_items, resamples, seed)
    raise ValueError(f"unit = {unit!r}; allowed: {', '.join(BOOTSTRAP_UNITS)}")


def pairwise_cosine_distances(embeddings: Any, max_pairs: int | None = None,
                              seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The pairs ``i < j`` (m, 2) of ``embeddings`` (n, d) and their cosine distances
    ``1 - cos`` (m,); with ``max_pairs`` a uniform sample of that many pairs (without
    replacement, ``default_rng(seed)``, kept in order). Rows are L2-normalised; the mean of the
    distances over all pairs is :func:`vdlib.metrics.diversity.mean_pairwise_cosine_distance`."""
    x = np.asarray(embeddings, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"embeddings must be a 2-d (n, d) array, got shape {x.shape}")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    if x.shape[0] and not np.all(norms > 0):
        raise ValueError("embedding rows must be non-zero")
    u = x / norms if x.shape[0] else x
    i, j = np.triu_indices(u.shape[0], k=1)
    if max_pairs is not None and max_pairs < i.size:
        keep = np.sort(np.random.default_rng(seed).choice(i.size, max_pairs, replace=False))
        i, j = i[keep], j[keep]
    dist = 1.0 - (u @ u.T)[i, j]  # the (n, n) Gram matrix: small for curriculum-sized sets
    return np.stack([i, j], axis=1).astype(np.int64), dist
