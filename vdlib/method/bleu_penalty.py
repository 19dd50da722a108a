"""R-Zero's BLEU-cluster repetition penalty for the proposer reward, computed fast and exactly
(the pairwise BLEU itself is :mod:`vdlib.method.bleu`, the kernel).

Definition (R-Zero's code, github.com/Chengsong-Huang/R-Zero, "Proposer
reward"): for a batch of ``n`` questions, tokens are ``s.split()`` (whitespace) and the distance
matrix is ``d[i][i] = 0`` and, for ``i < j``,
``d[i][j] = d[j][i] = 1 - nltk.translate.bleu_score.sentence_bleu([tokens_j], tokens_i,
smoothing_function=SmoothingFunction().method1)`` (uniform 4-gram weights; the question with the
*lower* index is the hypothesis, BLEU being asymmetric). The questions are then clustered with
scikit-learn's ``AgglomerativeClustering(n_clusters=None, distance_threshold=0.5,
metric="precomputed", linkage="average")`` and the penalty of question ``i`` is
``|cluster(i)| / n`` (lambda = 1); the proposer's reward is ``r(acc) - penalty``.

Clustering: :func:`average_linkage_clusters` runs the same ``scipy.cluster.hierarchy.linkage
(method="average")`` on the same condensed upper triangle that scikit-learn calls, and applies
scikit-learn's cut: ``n_clusters = #(merge distances >= threshold) + 1`` and the last
``n_clusters - 1`` merges undone. A merge at a distance exactly equal to the threshold is
therefore *not* made (scipy's ``fcluster(criterion="distance")`` would make it). scikit-learn
is not needed at run time; the tests compare against it.

Decisions where R-Zero's code is silent or fails:

- ``n == 1``: scikit-learn refuses a single sample (``ensure_min_samples=2``); one question is
  its own cluster, penalty ``[1.0]``. ``n == 0``: ``[]``.
- Failed rollouts (``None``): with ``include_failed=True`` (default: R-Zero, which clustered
  every rollout; the paper says only "a penalty proportional to cluster size", config
  ``scoring.penalty_scope: batch``) each one is clustered as the
  empty string ``""`` and the denominator is the whole batch; ``""`` is at distance 1 from
  everything (even another ``""``), so at any threshold <= 1 each failed rollout is a
  singleton with penalty ``1/n`` (it still enlarges the denominator of the valid ones).
  R-Zero's reward function (``examples/reward_function/caller_penalty.py``, read in a public
  copy of its code) stores the question ``""`` for a rollout without a parsable question and
  answer, clusters it with the rest over ``len(batch)``, and rewards it ``-1 - penalty``.
  With ``include_failed=False`` (``penalty_scope: valid``) failed rollouts get penalty 0.0, are
  left out of the clustering, and the denominator is the number of valid questions.

>>> qs = ["What is 2 + 3 times 4 ?", "What is 2 + 3 times 5 ?",
...       "Find all primes p such that p + 2 is prime.", None]
>>> [round(p, 3) for p in bleu_cluster_penalty(qs)]
[0.5, 0.5, 0.25, 0.25]
>>> [round(p, 3) for p in bleu_cluster_penalty(qs, include_failed=False)]
[0.667, 0.667, 0.333, 0.0]
>>> bleu_distance_matrix(["a b c d", "a b c d", "x y"]).round(3).tolist()
[[0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0]]
>>> average_linkage_clusters(np.array([[0, 0.5, 1], [0.5, 0, 1], [1, 1, 0]]), 0.5).tolist()
[0, 1, 2]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.cluster.hierarchy import linkage

from vdlib.method.bleu import bleu_distance_matrix

__all__ = [
    "average_linkage_clusters",
    "BleuClusters",
    "bleu_clusters",
    "bleu_cluster_penalty",
    "bleu_distance_matrix",  # the kernel's, for the penalty's callers
]


def average_linkage_clusters(dist: np.ndarray, threshold: float) -> np.ndarray:
    """Cluster labels (n,) int64 of scikit-learn's average-linkage clustering at ``threshold``.

    Same partition as ``AgglomerativeClustering(n_clusters=None, distance_threshold=threshold,
    linkage="average", metric="precomputed").fit(dist).labels_`` (only the upper triangle of
    ``dist`` is read, as there); a merge at distance ``>= threshold`` is not made. Labels are
    numbered by first appearance. ``n == 1`` gives ``[0]`` (scikit-learn raises).

    >>> d = np.array([[0, 0.2, 0.9], [0.2, 0, 0.8], [0.9, 0.8, 0]])
    >>> average_linkage_clusters(d, 0.5).tolist(), average_linkage_clusters(d, 0.86).tolist()
    ([0, 0, 1], [0, 0, 0])
    """
    dist = np.asarray(dist, dtype=np.float64)
    n = dist.shape[0]
    if dist.ndim != 2 or dist.shape[1] != n:
        raise ValueError(f"distance matrix must be square, got shape {dist.shape}")
    if n < 2:
        return np.zeros(n, dtype=np.int64)
    i, j = np.triu_indices(n, k=1)
    z = linkage(dist[i, j], method="average")
    n_merges = (n - 1) - int(np.count_nonzero(z[:, 2] >= threshold))
    parent = np.arange(2 * n - 1)
    for row in range(n_merges):  # union-find over the merges kept, as sklearn's _hc_cut
        a, b = int(z[row, 0]), int(z[row, 1])
        parent[a] = parent[b] = n + row
    for node in range(2 * n - 2, -1, -1):  # children have smaller ids than their parent
        parent[node] = parent[parent[node]]
    return _first_appearance(parent[:n])


def _first_appearance(labels: np.ndarray) -> np.ndarray:
    seen: dict[int, int] = {}
    return np.array([seen.setdefault(int(x), len(seen)) for x in labels], dtype=np.int64)


@dataclass(frozen=True)
class BleuClusters:
    """The steps of the penalty on one batch (:func:`bleu_clusters`)."""

    distance: np.ndarray  #: (n, n) float64, 1 - BLEU (:func:`bleu_distance_matrix`)
    labels: np.ndarray  #: (n,) int64 cluster of each text (:func:`average_linkage_clusters`)
    penalties: list[float]  #: |cluster(i)| / n


def bleu_clusters(texts: Sequence[str], threshold: float = 0.5) -> BleuClusters:
    """The BLEU-distance matrix of ``texts``, their average-linkage clusters at ``threshold``
    and each text's penalty ``|cluster(i)| / n``: what :func:`bleu_cluster_penalty` computes
    on a batch without failed rollouts, every step kept.

    >>> c = bleu_clusters(["a b c d e", "a b c d e", "p q r s t"])
    >>> c.labels.tolist(), c.penalties
    ([0, 0, 1], [0.6666666666666666, 0.6666666666666666, 0.3333333333333333])
    """
    texts = [str(t) for t in texts]
    if not texts:
        return BleuClusters(np.zeros((0, 0)), np.zeros(0, dtype=np.int64), [])
    dist = bleu_distance_matrix(texts)
    labels = average_linkage_clusters(dist, threshold)
    sizes = np.bincount(labels)
    return BleuClusters(dist, labels, [int(sizes[k]) / len(texts) for k in labels.tolist()])


def bleu_cluster_penalty(questions: Sequence[str | None], threshold: float = 0.5,
                         include_failed: bool = True) -> list[float]:
    """R-Zero's repetition penalty ``|cluster(i)| / batch size`` for each question.

    ``questions`` is the rollout batch, ``None`` for a failed rollout. With
    ``include_failed=True`` (default, R-Zero) failed rollouts are clustered as ``""`` and the
    denominator is ``len(questions)``; with ``include_failed=False`` they get 0.0 and the
    clustering and the denominator use the valid questions only. Never raises on any strings.

    >>> bleu_cluster_penalty([])
    []
    >>> bleu_cluster_penalty(["only one question here"])
    [1.0]
    >>> bleu_cluster_penalty(["a b c d e", "a b c d e", None, "p q r s t"])
    [0.5, 0.5, 0.25, 0.25]
    >>> bleu_cluster_penalty(["a b c d e", "a b c d e", None, "p q r s t"], include_failed=False)
    [0.6666666666666666, 0.6666666666666666, 0.0, 0.3333333333333333]
    """
    valid = [i for i, q in enumerate(questions) if q is not None]
    if include_failed:
        texts = ["" if q is None else str(q) for q in questions]
        members = list(range(len(questions)))
    else:
        texts = [str(questions[i]) for i in valid]
        members = valid
    penalty = [0.0] * len(questions)
    for idx, value in zip(members, bleu_clusters(texts, threshold).penalties, strict=True):
        penalty[idx] = value
    return penalty
