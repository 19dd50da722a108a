"""Diversity metrics of generated questions: lexical, semantic and structural.

The paper ("Diversity metrics", appendices "Vendi score computation", "Cumulative embedding
diversity", "Vocabulary utilization") tracks, per co-evolution iteration:

- :func:`self_bleu`, Texygen's Self-BLEU (Zhu et al. 2018, arXiv 1802.01886; its
  ``SelfBleu.get_bleu_parallel``): each text is the hypothesis of nltk ``sentence_bleu`` with all
  the *other* texts as references (uniform ``max_n``-gram weights, ``SmoothingFunction().method1``),
  averaged over texts. Equal to that nltk loop (nltk 3.10) bit for bit, in O(total tokens):
  nltk's multi-reference clipping uses, per n-gram, the maximum count over the references, and
  the maximum over "all texts but me" is the global maximum unless I alone attain it (then the
  second largest count). 2,000 questions take ~0.1 s where the nltk loop takes minutes.
  Texygen's serial ``get_bleu`` also keeps the hypothesis among its own references (every text
  of 4+ tokens then scores 1); like its parallel version, the reference is the *other* texts.
- :func:`vendi_score` (Friedman & Dieng 2023, arXiv 2210.02410): ``exp`` of the Shannon entropy
  of the eigenvalues of ``K / n``, ``K = E E^T`` the cosine kernel of L2-normalised embeddings;
  computed from the ``d x d`` matrix ``E^T E / n`` (same non-zero eigenvalues) when ``n > d``.
- :func:`novelty_rate`: the share of this iteration's questions whose nearest-neighbour cosine
  distance to every earlier question exceeds 0.3; :func:`cumulative_vendi`: Vendi of iterations
  ``1..t`` pooled, subsampled to 2,000; :func:`mean_pairwise_cosine_distance`.
- :func:`unique_tokens` (distinct token ids across questions), :func:`question_lengths` (tokens a
  question) and :func:`distinct_numbers` (distinct numeric literals in a question).

Where a metric is undefined (too few texts or rows) it is ``nan``, as each function says;
malformed input (zero embedding rows, unknown option names) raises ``ValueError``.

>>> round(self_bleu(["the cat sat on the mat", "the cat sat on a mat", "a dog ran"]), 6)
0.380475
>>> round(vendi_score(np.eye(3)), 6), round(vendi_score(np.ones((4, 2))), 6)
(3.0, 1.0)
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import numpy as np

from vdlib.method.bleu import EPSILON, exact_map, factorize, fsum_rows, tokenize_unique

__all__ = [
    "self_bleu",
    "self_bleu_scores",
    "vendi_score",
    "novelty_rate",
    "cumulative_vendi",
    "mean_pairwise_cosine_distance",
    "unique_tokens",
    "question_lengths",
    "distinct_numbers",
    "NUMBER_PATTERN",
]

SMOOTHINGS = ("method0", "method1")  # nltk SmoothingFunction methods reproduced exactly
_CHUNK_ELEMENTS = 1 << 23  # float64 similarity block of at most 64 MiB in novelty_rate


# ----------------------------------------------------------------------------- Self-BLEU
def _token_texts(texts: Sequence[str], tokenize: str | Callable[[str], Sequence[str]]
                 ) -> list[str]:
    """Texts whose whitespace tokens stand for ``tokenize``'s tokens one to one."""
    if tokenize == "whitespace":
        return [str(t) for t in texts]
    if not callable(tokenize):
        raise ValueError(f"unknown tokenize {tokenize!r}; valid: 'whitespace' or a callable")
    vocab: dict[Any, int] = {}
    return [" ".join(str(vocab.setdefault(tok, len(vocab))) for tok in tokenize(str(t)))
            for t in texts]


def _clipped_matches(token_ids: np.ndarray, lengths: np.ndarray, mult: np.ndarray,
                     max_n: int) -> np.ndarray:
    """(max_n, n_docs) clipped k-gram matches of each distinct text against all other texts.

    Documents are the distinct token lists (``mult`` (n_docs,) copies of each among the texts).
    For k-gram ``g`` of document ``u`` with count ``c``, nltk's clipped count is
    ``min(c, max over the other texts of their count of g)``: ``c`` unless ``u`` is the only text
    (counting copies) holding the maximum, then the largest count among the others (0 if none).
    """
    n_docs = lengths.size
    out = np.zeros((max_n, n_docs))
    doc = np.repeat(np.arange(n_docs, dtype=np.int64), lengths)
    left = np.repeat(np.cumsum(lengths), lengths) - np.arange(token_ids.size)
    base = int(token_ids.max()) + 1 if token_ids.size else 1
    gram = token_ids.copy()  # gram[p]: id of the k-gram starting at p (valid where left >= k)
    for k in range(1, max_n + 1):
        pos = np.flatnonzero(left >= k)
        if pos.size == 0:
            break
        if k > 1:
            gram[pos] = factorize(gram[pos] * base + token_ids[pos + k - 1])[0]
        keys = gram[pos] * n_docs + doc[pos]
        pair, count = factorize(keys)  # (k-gram, document) pairs sorted by k-gram
        key = np.empty(count.size, dtype=np.int64)
        key[pair] = keys
        g, d = key // n_docs, key % n_docs
        new = np.ones(g.size, dtype=bool)
        new[1:] = g[1:] != g[:-1]
        starts, group = np.flatnonzero(new), np.cumsum(new) - 1
        top_count = np.maximum.reduceat(count, starts)[group]
        top = count == top_count
        holders = np.add.reduceat(np.where(top, mult[d], 0), starts)[group]
        runner_up = np.maximum.reduceat(np.where(top, 0, count), starts)[group]
        clipped = np.where(top & (holders == 1), runner_up, count)
        out[k - 1] = np.bincount(d, weights=clipped, minlength=n_docs)
    return out


def _closest_other_length(lengths: np.ndarray, mult: np.ndarray) -> np.ndarray:
    """nltk's ``closest_ref_length`` of each document over the lengths of all *other* texts.

    Closest to the hypothesis length, the shorter on a tie; needs at least two texts.
    """
    values, counts = np.unique(np.repeat(lengths, mult), return_counts=True)
    at = np.searchsorted(values, lengths)
    below = values[np.maximum(at - 1, 0)]
    above = values[np.minimum(at + 1, values.size - 1)]
    has_below, has_above = at > 0, at + 1 < values.size
    take_below = has_below & (~has_above | (lengths - below <= above - lengths))
    closest = np.where(take_below, below, above)
    return np.where(counts[at] >= 2, lengths, closest)


def self_bleu_scores(texts: Sequence[str], max_n: int = 4, smoothing: str = "method1",
                     tokenize: str | Callable[[str], Sequence[str]] = "whitespace"
                     ) -> list[float]:
    """Per-text Self-BLEU: ``sentence_bleu(others, text_i, weights=(1/max_n,) * max_n,
    smoothing_function=SmoothingFunction().<smoothing>)`` for each text, as nltk 3.10 computes it.

    ``others`` are the token lists of every other text (a repeated text has its copy among
    them). Tokens: ``str.split()`` or ``tokenize(text)``. Fewer than 2 texts: ``[nan] * n``.

    >>> self_bleu_scores(["a b c d", "a b c d", "x y"])
    [1.0, 1.0, 0.0]
    """
    if smoothing not in SMOOTHINGS:
        raise ValueError(f"unknown smoothing {smoothing!r}; valid: {', '.join(SMOOTHINGS)}")
    if max_n < 1:
        raise ValueError(f"max_n must be >= 1, got {max_n}")
    n = len(texts)
    if n < 2:
        return [math.nan] * n
    uniq_of, token_ids, lengths = tokenize_unique(_token_texts(texts, tokenize))
    mult = np.bincount(np.asarray(uniq_of, dtype=np.int64), minlength=lengths.size)
    match = _clipped_matches(token_ids, lengths, mult, max_n).astype(np.int64)
    score = np.zeros(lengths.size)
    live = np.flatnonzero(match[0] > 0)  # nltk returns 0 when no unigram matches
    if live.size:
        h_len = lengths[live]
        stride = int(h_len.max()) + 1
        weight = 1 / max_n

        def log_term(key: int) -> float:  # key = numerator * stride + denominator
            num, den = divmod(key, stride)
            if num:
                p = num / den
            else:  # method1: (0 + epsilon) / den; method0: the smallest normal float
                p = EPSILON / den if smoothing == "method1" else sys.float_info.min
            return weight * math.log(p)

        terms = [exact_map(log_term, match[k, live] * stride + np.maximum(h_len - k, 1))
                 for k in range(max_n)]
        total = fsum_rows(terms).tolist()
        value = np.fromiter(map(math.exp, total), dtype=np.float64, count=len(total))
        r_len = _closest_other_length(lengths, mult)[live]
        short = np.flatnonzero(h_len <= r_len)  # brevity penalty exp(1 - r / h), else 1
        if short.size:
            r_stride = int(r_len.max()) + 1
            value[short] *= exact_map(
                lambda key: math.exp(1 - (key % r_stride) / (key // r_stride)),
                h_len[short] * r_stride + r_len[short])
        score[live] = value
    return score[uniq_of].tolist()


def self_bleu(texts: Sequence[str], max_n: int = 4, smoothing: str = "method1",
              tokenize: str | Callable[[str], Sequence[str]] = "whitespace",
              sample: int | None = None, seed: int = 42) -> float:
    """Texygen's Self-BLEU of ``texts`` (lower = more diverse): the mean of
    :func:`self_bleu_scores`, summed in text order as ``sum(scores) / len(scores)``.

    ``sample``: score a random subset of that many texts (``numpy.random.default_rng(seed)``,
    without replacement, kept in input order) as both hypotheses and references, as Texygen's
    ``get_bleu_fast`` does for large sets; ``None`` or ``sample >= len(texts)`` uses all.
    Fewer than 2 texts: ``nan`` (nltk cannot score a hypothesis without references).

    >>> round(self_bleu(["What is 2 + 2 ?", "What is 2 + 3 ?"]), 6)
    0.537285
    >>> self_bleu(["same words here", "same words here"], max_n=3)
    1.0
    """
    texts = list(texts)
    if sample is not None and sample < len(texts):
        keep = np.sort(np.random.default_rng(seed).choice(len(texts), sample, replace=False))
        texts = [texts[i] for i in keep.tolist()]
    scores = self_bleu_scores(texts, max_n=max_n, smoothing=smoothing, tokenize=tokenize)
    return sum(scores) / len(scores) if len(scores) >= 2 else math.nan


# ----------------------------------------------------------------------------- embeddings
def _unit_rows(embeddings: Any) -> np.ndarray:
    """``embeddings`` (n, d) as float64 with rows scaled to unit L2 norm; zero rows raise."""
    x = np.asarray(embeddings, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"embeddings must be a 2-d (n, d) array, got shape {x.shape}")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    if x.shape[0] and not np.all(norms > 0):
        raise ValueError(f"{int(np.sum(norms == 0))} embedding rows are zero (no direction)")
    return x / norms


def _subsample(x: np.ndarray, size: int | None, seed: int) -> np.ndarray:
    """``size`` rows of ``x`` drawn without replacement by ``default_rng(seed)`` (kept in order)."""
    if size is None or x.shape[0] <= size:
        return x
    return x[np.sort(np.random.default_rng(seed).choice(x.shape[0], size, replace=False))]


def vendi_score(embeddings: Any, max_samples: int | None = 5000, seed: int = 42,
                eig_threshold: float = 1e-12) -> float:
    """Vendi score (Friedman & Dieng 2023) of ``embeddings`` (n, d) under the cosine kernel.

    Rows are L2-normalised (appendix "Vendi score computation": kernel ``K = E E^T``); ``n >
    max_samples`` rows are first subsampled (:func:`_subsample`, seed 42, 5,000 as in the paper).
    ``VS = exp(-sum_i l_i log l_i)`` over the eigenvalues ``l_i = lambda_i / sum_j lambda_j``
    of ``K / n`` that exceed ``eig_threshold`` (``1e-12``, the paper's). Eigenvalues come from
    ``E^T E / n`` (d x d) when ``n > d``, else from ``K / n``; they are the same non-zero set.
    Between 1 (all rows parallel) and ``min(n, d)`` (orthogonal). No rows: ``nan``.

    >>> round(vendi_score([[1.0, 0.0], [0.0, 2.0], [1.0, 0.0], [0.0, 1.0]]), 9)
    2.0
    """
    x = _subsample(_unit_rows(embeddings), max_samples, seed)
    n, d = x.shape
    if n == 0:
        return math.nan
    gram = x.T @ x if n > d else x @ x.T
    eig = np.clip(np.linalg.eigvalsh(gram / n), 0, None)
    eig = eig / eig.sum()
    eig = eig[eig > eig_threshold]
    return float(np.exp(-np.sum(eig * np.log(eig))))


def cumulative_vendi(per_iteration_embeddings: Sequence[Any], subsample: int | None = 2000,
                     seed: int = 42) -> list[float]:
    """Cumulative Vendi (appendix "Cumulative embedding diversity"): for each ``t``, the Vendi
    score of iterations ``1..t`` pooled and subsampled to ``subsample`` rows.

    The subsample is drawn from the pooled rows (iteration order) with ``seed`` for every ``t``,
    i.e. ``vendi_score(vstack(iterations[:t]), max_samples=subsample, seed=seed)``.

    >>> [round(v, 6) for v in cumulative_vendi([np.eye(3)[:1], np.eye(3)[1:], np.eye(3)])]
    [1.0, 3.0, 3.0]
    """
    out: list[float] = []
    pooled: list[np.ndarray] = []
    for emb in per_iteration_embeddings:
        pooled.append(np.asarray(emb, dtype=np.float64))
        out.append(vendi_score(np.vstack(pooled), max_samples=subsample, seed=seed))
    return out


def novelty_rate(current: Any, previous: Any, threshold: float = 0.3) -> float:
    """Share of ``current`` (m, d) rows whose nearest-neighbour cosine distance ``1 - cos`` to
    all ``previous`` rows exceeds ``threshold`` (paper: 0.3, previous = every earlier iteration).

    ``previous``: an (p, d) array or a sequence of such arrays (stacked). No previous rows
    (iteration 1): every question is novel, ``1.0``. No current rows: ``nan``. Computed in row
    blocks (at most ``2**23`` similarities at a time).

    >>> novelty_rate([[1.0, 0.0], [0.0, 1.0]], [[[1.0, 0.1]], [[2.0, 0.0]]])
    0.5
    >>> novelty_rate([[1.0, 0.0]], [])
    1.0
    """
    cur = _unit_rows(current)
    if cur.shape[0] == 0:
        return math.nan
    if not isinstance(previous, np.ndarray):
        parts = [np.atleast_2d(np.asarray(p, dtype=np.float64)) for p in previous]
        parts = [p for p in parts if p.size]
        previous = np.vstack(parts) if parts else np.zeros((0, cur.shape[1]))
    if previous.size == 0:
        return 1.0
    prev = _unit_rows(previous)
    rows = max(1, _CHUNK_ELEMENTS // prev.shape[0])
    novel = 0
    for start in range(0, cur.shape[0], rows):
        nearest = (cur[start:start + rows] @ prev.T).max(axis=1)
        novel += int(np.count_nonzero(1 - nearest > threshold))
    return novel / cur.shape[0]


def mean_pairwise_cosine_distance(embeddings: Any) -> float:
    """Mean of ``1 - cos(e_i, e_j)`` over all pairs ``i < j`` of ``embeddings`` (n, d).

    ``sum_{i != j} cos = |sum_i u_i|^2 - sum_i |u_i|^2`` for the unit rows ``u``: O(n d).
    Fewer than 2 rows: ``nan``.

    >>> round(mean_pairwise_cosine_distance([[1.0, 0.0], [0.0, 3.0], [-1.0, 0.0]]), 6)
    1.333333
    """
    u = _unit_rows(embeddings)
    n = u.shape[0]
    if n < 2:
        return math.nan
    total = u.sum(axis=0)
    off_diagonal = float(total @ total) - float(np.einsum("ij,ij->", u, u))
    return 1 - off_diagonal / (n * (n - 1))


# ----------------------------------------------------------------------------- structure
def _token_ids(texts: Sequence[str], tokenizer: Any) -> list[list[int]]:
    """Token ids of each text: a Hugging Face tokenizer without special tokens (no BOS), or
    any callable ``text -> list[int]``."""
    texts = [str(t) for t in texts]
    if hasattr(tokenizer, "convert_tokens_to_ids"):  # transformers tokenizer
        return list(tokenizer(texts, add_special_tokens=False)["input_ids"]) if texts else []
    return [list(tokenizer(t)) for t in texts]


def unique_tokens(texts: Sequence[str], tokenizer: Any) -> int:
    """Number of distinct token ids used across ``texts`` (appendix "Vocabulary utilization"),
    with the proposer's ``tokenizer`` (special tokens such as BOS are not added).

    >>> unique_tokens(["abba", "abc"], lambda s: [ord(c) for c in s])
    3
    """
    return len({tok for ids in _token_ids(texts, tokenizer) for tok in ids})


def question_lengths(texts: Sequence[str], tokenizer: Any) -> list[int]:
    """Tokens per question (no special tokens added), the paper's "Tok/q".

    >>> question_lengths(["abba", ""], lambda s: [ord(c) for c in s])
    [4, 0]
    """
    return [len(ids) for ids in _token_ids(texts, tokenizer)]


NUMBER_PATTERN = re.compile(r"[0-9]{1,3}(?:,[0-9]{3})+(?![0-9])(?:\.[0-9]+)?|[0-9]+(?:\.[0-9]+)?")
"""A numeric literal: ASCII digits with an optional decimal part (``3``, ``0.25``, ``2025``),
or digits grouped in thousands by commas (``1,000``, ``12,345.5``). No sign (in ``x - 3`` the
minus is an operator); ``3/4`` and ``\\frac{3}{4}`` are two literals; digits in names and
exponents count (``a_1`` holds ``1``, ``x^2`` holds ``2``); ``1,2,3`` is three literals."""


def distinct_numbers(text: str) -> int:
    """Number of distinct numeric *values* among the :data:`NUMBER_PATTERN` literals of
    ``text`` (the paper's "Nums"): ``2``, ``2.0`` and ``02`` are one value, ``1,000`` is
    ``1000``.

    >>> distinct_numbers("Alice has 1,000 coins, gives 2.50 to Bob and 2.5 to x_2; 1000 left.")
    3
    >>> distinct_numbers("no digits here")
    0
    """
    return len({Decimal(m.replace(",", "")).normalize()
                for m in NUMBER_PATTERN.findall(str(text))})
