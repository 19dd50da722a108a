"""The BLEU kernel: nltk 3.10's smoothed sentence BLEU for every pair of a batch, vectorised and
exact to the bit. Used by R-Zero's repetition penalty (:mod:`vdlib.method.bleu_penalty`) and by
Self-BLEU (:mod:`vdlib.metrics.diversity`).

What nltk 3.10 computes for one pair (hypothesis ``h``, reference ``r``, token lists), and what
:func:`bleu_distance_matrix` reproduces bit for bit:

- ``m_k = sum_g min(count_h(g), count_r(g))`` over the k-grams ``g`` of ``h`` (k = 1..4) and
  ``den_k = max(1, len(h) - k + 1)``;
- if ``m_1 == 0`` (no shared token, or ``h`` empty) the score is exactly ``0``;
- ``p_k = m_k / den_k``, or, where ``m_k == 0``, method1's ``(0 + 0.1) / den_k`` (the
  *unreduced* denominator: nltk's Fraction keeps it, so a hypothesis shorter than k tokens gets
  ``0.1 / 1``);
- brevity penalty ``bp = 1`` if ``len(h) > len(r)`` else ``exp(1 - len(r) / len(h))``;
- score ``= bp * exp(fsum(0.25 * log(p_k)))``.

So identical questions are at distance exactly 0 only when they have at least 4 tokens (two
identical 2-token questions are at distance 1 - exp(0.5 * log 0.1) = 0.684), and questions
sharing no token are at distance exactly 1.

Speed-up (the nltk loop costs 70-250 us a pair, minutes for R-Zero's 2,048 rollouts): identical
token lists are computed once (and when repeats dominate, each ordered pair of distinct texts
once); for each order k, every (document, k-gram, r) with ``count >= r`` is one binary
feature, so ``min(a, b) = sum_r [a >= r][b >= r]`` makes all clipped match counts one product
``B B^T`` (features seen in one document only are dropped; frequent features go through a
dense float32 GEMM, exact for integers below 2**24, the rest through scipy.sparse). The
per-pair formula above is then evaluated on the upper triangle with numpy, with every
transcendental taken from Python's ``math`` (``log`` and the brevity penalty through small
exact lookup tables, ``exp`` mapped over the pairs: numpy's ``exp`` differs from ``math.exp``
in the last bit for a few percent of inputs) and ``math.fsum`` reproduced by an error-free
TwoSum expansion whose rounding is checked pair by pair (an undecided pair falls back to
``math.fsum``), so the matrix equals nltk's exactly, not merely to 1e-12. That matters: the
clustering compares distances, and ties (exact 0s and 1s, and averages of them) are common.

>>> bleu_distance_matrix(["a b c d", "a b c d", "x y"]).round(3).tolist()
[[0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0]]
>>> factorize(np.array([7, 3, 7, 9]))[0].tolist()
[1, 0, 1, 2]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import scipy.sparse as sp

__all__ = ["MAX_ORDER", "WEIGHT", "EPSILON", "tokenize_unique", "factorize", "bleu_match_counts",
           "exact_map", "fsum_rows", "log_term", "pair_bleu", "bleu_distance_matrix"]

MAX_ORDER = 4
WEIGHT = 0.25  # nltk's default uniform weights (0.25, 0.25, 0.25, 0.25)
EPSILON = 0.1  # SmoothingFunction().method1's epsilon
_DENSE_DF_FRACTION = 1 / 16  # features in more than this share of documents go through GEMM


def tokenize_unique(texts: Sequence[str]) -> tuple[list[int], np.ndarray, np.ndarray]:
    """Deduplicate by token list: (unique index of each text, token ids, lengths per unique)."""
    index: dict[str, int] = {}
    uniq_of: list[int] = []
    unique_tokens: list[list[str]] = []
    for text in texts:
        tokens = text.split()
        key = " ".join(tokens)  # tokens hold no whitespace, so this is injective
        u = index.get(key)
        if u is None:
            u = index[key] = len(unique_tokens)
            unique_tokens.append(tokens)
        uniq_of.append(u)
    vocab: dict[str, int] = {}
    ids = [vocab.setdefault(t, len(vocab)) for toks in unique_tokens for t in toks]
    lengths = np.fromiter((len(t) for t in unique_tokens), dtype=np.int64,
                          count=len(unique_tokens))
    return uniq_of, np.asarray(ids, dtype=np.int64), lengths


def factorize(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dense ids (0..m-1, in key order) of integer ``keys`` and the count of each id."""
    order = np.argsort(keys)  # default (SIMD) sort: ties need no stable order here
    sorted_keys = keys[order]
    new = np.empty(keys.size, dtype=bool)
    new[:1] = True
    new[1:] = sorted_keys[1:] != sorted_keys[:-1]
    ids = np.empty(keys.size, dtype=np.int64)
    ids[order] = np.cumsum(new) - 1
    counts = np.diff(np.append(np.flatnonzero(new), keys.size))
    return ids, counts


def _self_product(rows: np.ndarray, cols: np.ndarray, n_docs: int,
                  dtype: type[np.floating]) -> np.ndarray:
    """``B @ B.T`` (n_docs, n_docs) for the 0/1 matrix B with ones at (rows, cols), no repeats.

    Features (columns) present in one row only are dropped, so the diagonal is not ``B B^T``'s
    and the caller sets it. Exact: ``dtype`` holds every integer up to the largest row sum.
    """
    out = np.zeros((n_docs, n_docs), dtype=dtype)
    if cols.size == 0:
        return out
    cols, df = factorize(cols)
    keep = df[cols] >= 2
    rows, cols = rows[keep], cols[keep]
    dense_feature = df >= max(2, int(_DENSE_DF_FRACTION * n_docs))
    is_dense = dense_feature[cols]
    if is_dense.any():  # frequent features: one GEMM
        dcols = (np.cumsum(dense_feature) - 1)[cols[is_dense]]
        mat = np.zeros((n_docs, int(dense_feature.sum())), dtype=dtype)
        mat[rows[is_dense], dcols] = 1
        np.matmul(mat, mat.T, out=out)
    sparse = ~is_dense
    if sparse.any():  # the long tail: scipy.sparse
        sr, sc = rows[sparse], cols[sparse]
        sc = (np.cumsum(~dense_feature) - 1)[sc]
        b = sp.csr_matrix((np.ones(sr.size, dtype=np.int32), (sr, sc)),
                          shape=(n_docs, int(sc.max()) + 1))
        prod = (b @ b.T).tocoo()
        out[prod.row, prod.col] += prod.data
    return out


def bleu_match_counts(token_ids: np.ndarray, lengths: np.ndarray,
                      max_order: int = MAX_ORDER) -> list[np.ndarray]:
    """Clipped k-gram match counts ``sum_g min(c_a(g), c_b(g))`` for all document pairs.

    ``token_ids`` (total_tokens,) concatenates the documents' integer token ids; ``lengths``
    (n_docs,) their token counts. Returns ``max_order`` symmetric float arrays (n_docs, n_docs)
    of exact integers (float32 below 2**24 tokens a document), one per order k = 1..max_order;
    the diagonal is the number of k-grams of each document.

    >>> [m.tolist() for m in bleu_match_counts(np.array([0, 1, 0, 0, 1]), np.array([3, 2]), 2)]
    [[[3.0, 2.0], [2.0, 2.0]], [[2.0, 1.0], [1.0, 1.0]]]
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    token_ids = np.asarray(token_ids, dtype=np.int64)
    n_docs = lengths.size
    dtype = np.float32 if n_docs == 0 or lengths.max() < 2**24 else np.float64
    doc = np.repeat(np.arange(n_docs, dtype=np.int64), lengths)
    starts = np.cumsum(lengths) - lengths
    room = np.repeat(starts + lengths, lengths) - np.arange(token_ids.size)  # tokens left
    gram = token_ids  # gram[p]: id of the k-gram starting at p (where room[p] >= k)
    n_ids = int(token_ids.max()) + 1 if token_ids.size else 1
    out = []
    for k in range(1, max_order + 1):
        valid = np.flatnonzero(room >= k)
        n_grams = n_ids
        if k > 1 and valid.size:
            dense, counts = factorize(gram[valid] * n_ids + token_ids[valid + k - 1])
            gram = np.zeros_like(gram)
            gram[valid] = dense
            n_grams = counts.size
        g, d = gram[valid], doc[valid]
        # Feature (g, r): the r-th occurrence of k-gram g in document d, so that
        # min(c_a(g), c_b(g)) = sum_r [c_a(g) >= r][c_b(g) >= r] = (B B^T)[a, b].
        order = np.argsort(d * n_grams + g)
        dg = (d * n_grams + g)[order]
        run_start = np.ones(dg.size, dtype=bool)
        run_start[1:] = dg[1:] != dg[:-1]
        idx = np.arange(dg.size)
        rank = idx - np.maximum.accumulate(np.where(run_start, idx, 0))
        feature = g[order] * (int(rank.max()) + 1 if rank.size else 1) + rank
        m = _self_product(d[order], feature, n_docs, dtype)
        np.fill_diagonal(m, np.maximum(lengths - k + 1, 0))
        out.append(m)
    return out


def exact_map(func: Callable[[int], float], keys: np.ndarray) -> np.ndarray:
    """``func`` (a Python float function) applied to integer ``keys``, evaluated once per value."""
    if keys.size == 0:
        return np.zeros(0)
    if int(keys.max()) < 4 * keys.size + 1024:
        present = np.flatnonzero(np.bincount(keys))
        table = np.zeros(int(keys.max()) + 1)
        table[present] = [func(int(k)) for k in present]
        return table[keys]
    uniq, inv = np.unique(keys, return_inverse=True)
    return np.array([func(int(k)) for k in uniq])[inv]


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``s = fl(a + b)`` and its rounding error ``e``: ``a + b == s + e`` exactly (Knuth)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def fsum_rows(terms: Sequence[np.ndarray]) -> np.ndarray:
    """``math.fsum`` of each row of the columns ``terms``, bit for bit, vectorised.

    TwoSum gives ``exact = s + e_1 + ... + e_m`` exactly. Where the errors add up without
    rounding (checked with TwoSum again), ``fl(s + sum e)`` is one IEEE addition of the exact
    value, hence correctly rounded with ties to even, as ``math.fsum``. Elsewhere ``r`` is kept
    where the residual ``exact - r`` is clearly inside half the gap to r's neighbours; the rest
    (rare) use ``math.fsum``.
    """
    s, errors = terms[0], []
    for t in terms[1:]:
        s, e = _two_sum(s, t)
        errors.append(e)
    if not errors:
        return np.array(s, dtype=np.float64)
    err, exact = errors[0], np.ones(s.shape, dtype=bool)
    for e in errors[1:]:
        err, f = _two_sum(err, e)
        exact &= f == 0
    r = s + err
    undecided = np.flatnonzero(~exact)
    if undecided.size:
        su, eu, ru = s[undecided], err[undecided], r[undecided]
        resid = (su - ru) + eu  # s - r is exact (Sterbenz); error of resid ~ 2**-50 ulp(r)
        margin = 1 - 2.0**-20
        ok = (resid < 0.5 * (np.nextafter(ru, np.inf) - ru) * margin) & (
            resid > -0.5 * (ru - np.nextafter(ru, -np.inf)) * margin)
        bad = undecided[~ok]
        if bad.size:
            cols = [t[bad].tolist() for t in terms]
            r[bad] = list(map(math.fsum, zip(*cols, strict=True)))
    return r


def log_term(stride: int) -> Callable[[int], float]:
    """``key = num * stride + den`` -> nltk's ``0.25 * math.log(p)``, method1 for ``num == 0``."""
    def term(key: int) -> float:
        num, den = divmod(key, stride)
        p = num / den if num else (num + EPSILON) / den
        return WEIGHT * math.log(p)

    return term


def pair_bleu(match: list[np.ndarray], lengths: np.ndarray, hyp: np.ndarray,
               ref: np.ndarray) -> np.ndarray:
    """nltk's smoothed sentence BLEU of documents ``hyp`` against ``ref`` (index arrays)."""
    n_docs = lengths.size
    flat = hyp * n_docs + ref
    score = np.zeros(hyp.size)
    m1 = np.take(match[0].ravel(), flat)
    live = np.flatnonzero(m1 > 0)  # nltk returns exactly 0 when no unigram matches
    if live.size == 0:
        return score
    if live.size < hyp.size:
        hyp, ref, flat, m1 = hyp[live], ref[live], flat[live], m1[live]
    h_len, r_len = lengths[hyp], lengths[ref]
    stride = int(h_len.max()) + 1
    term = log_term(stride)
    terms = []
    for k in range(1, MAX_ORDER + 1):
        num = m1 if k == 1 else np.take(match[k - 1].ravel(), flat)
        key = num.astype(np.int64) * stride + np.maximum(h_len - (k - 1), 1)
        terms.append(exact_map(term, key))
    total = fsum_rows(terms)
    value = np.fromiter(map(math.exp, total.tolist()), dtype=np.float64, count=total.size)
    short = np.flatnonzero(h_len <= r_len)  # brevity penalty exp(1 - r / h), else 1
    if short.size:
        len_stride = int(r_len.max()) + 1
        bp = exact_map(lambda key: math.exp(1 - (key % len_stride) / (key // len_stride)),
                        h_len[short] * len_stride + r_len[short])
        value[short] = bp * value[short]
    score[live] = value
    return score


def bleu_distance_matrix(texts: Sequence[str]) -> np.ndarray:
    """R-Zero's BLEU distance matrix (n, n) float64, equal to the nltk loop bit for bit.

    ``d[i, j] = d[j, i] = 1 - sentence_bleu([texts[j].split()], texts[i].split(),
    smoothing_function=SmoothingFunction().method1)`` for ``i < j`` and ``d[i, i] = 0``.

    >>> d = bleu_distance_matrix(["the cat sat on the mat", "the cat sat on a mat", "dogs"])
    >>> d.shape, float(d[0, 2]), bool(d[0, 1] == d[1, 0]), round(float(d[0, 1]), 4)
    ((3, 3), 1.0, True, 0.4627)
    """
    n = len(texts)
    dist = np.zeros((n, n))
    if n < 2:
        return dist
    uniq_of, token_ids, lengths = tokenize_unique(texts)
    match = bleu_match_counts(token_ids, lengths)
    u = np.asarray(uniq_of, dtype=np.int64)
    i, j = np.triu_indices(n, k=1)
    n_uniq = lengths.size
    if n_uniq * n_uniq < i.size:  # many repeats: every ordered pair of distinct texts once
        grid = np.arange(n_uniq * n_uniq)
        scores = pair_bleu(match, lengths, grid // n_uniq, grid % n_uniq)
        dist[i, j] = 1 - scores[u[i] * n_uniq + u[j]]
    else:
        dist[i, j] = 1 - pair_bleu(match, lengths, u[i], u[j])
    dist += dist.T  # exact: one of the two terms is 0
    return dist
