"""vdlib.method.bleu_penalty against the slow reference: R-Zero's nltk loop + scikit-learn
clustering."""

from __future__ import annotations

import math
import random
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
from sklearn.cluster import AgglomerativeClustering  # the dev extra

from vdlib.method.bleu import bleu_distance_matrix, bleu_match_counts, fsum_rows
from vdlib.method.bleu_penalty import average_linkage_clusters, bleu_cluster_penalty

SMOOTH = SmoothingFunction().method1


# ----------------------------------------------------------------------------- reference
def ref_distance_matrix(texts: list[str]) -> np.ndarray:
    """R-Zero's loop: hypothesis = lower index i, reference = j, mirrored; 0 on the diagonal."""
    tokens = [t.split() for t in texts]
    n = len(texts)
    d = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            d[i, j] = d[j, i] = 1 - sentence_bleu([tokens[j]], tokens[i], smoothing_function=SMOOTH)
    return d


def ref_labels(dist: np.ndarray, threshold: float) -> np.ndarray:
    model = AgglomerativeClustering(
        n_clusters=None, distance_threshold=threshold, metric="precomputed", linkage="average")
    return model.fit(dist).labels_


def ref_penalty(texts: list[str], threshold: float = 0.5) -> list[float]:
    if len(texts) < 2:  # sklearn refuses one sample: the documented choice is [1.0]
        return [1.0] * len(texts)
    labels = ref_labels(ref_distance_matrix(texts), threshold)
    sizes = np.bincount(labels)
    return [int(sizes[c]) / len(texts) for c in labels]


def canonical(labels) -> list[int]:
    seen: dict[int, int] = {}
    return [seen.setdefault(int(x), len(seen)) for x in labels]


# ----------------------------------------------------------------------------- batches
WORDS = ("the of a is $x$ $y$ find sum all integers such that prime 2 3 5 7 11 = + "
         "real value compute triangle area").split()
ODD = ["", " ", "\t\n", "x", "x y", "a b c", "数学 问题", "é è ê", "𝑥 + 𝑦 = 1", "a\u3000b\xa0c",
       "= = = = = =", "the the the the the the the", "(((( ))))", "1 2 3 4"]


def random_batch(seed: int, n: int) -> list[str]:
    """Near-duplicates (a few tokens mutated), exact repeats, odd strings and unique ones."""
    rng = random.Random(seed)
    bases = [" ".join(rng.choices(WORDS, k=rng.randint(5, 30))) for _ in range(max(1, n // 8))]
    out: list[str] = []
    for _ in range(n):
        u = rng.random()
        if u < 0.12:
            out.append(rng.choice(ODD))
        elif u < 0.22 and out:
            out.append(rng.choice(out))
        elif u < 0.8:
            toks = rng.choice(bases).split()
            for _ in range(rng.randint(0, 4)):
                toks[rng.randrange(len(toks))] = rng.choice(WORDS + [str(rng.randint(0, 99))])
            out.append(" ".join(toks))
        else:
            out.append(" ".join(rng.choices(WORDS, k=rng.randint(1, 40))))
    return out


# ----------------------------------------------------------------------------- distances
@pytest.mark.parametrize(("seed", "n"), [(0, 2), (1, 5), (2, 17), (3, 50), (4, 50), (5, 50)])
def test_distance_matrix_is_nltk_bit_for_bit(seed, n):
    texts = random_batch(seed, n)
    d = bleu_distance_matrix(texts)
    assert d.dtype == np.float64 and d.shape == (n, n)
    assert np.array_equal(d, ref_distance_matrix(texts))


def test_distance_matrix_edge_cases():
    texts = ["", "", "a", "a", "a b", "a b", "a b c", "a b c", "a b c d", "a b c d", "b a",
             "x y z w", "a b c d a b c d", "Ω Ω Ω", "a\u3000b c\xa0d"]
    assert np.array_equal(bleu_distance_matrix(texts), ref_distance_matrix(texts))
    assert bleu_distance_matrix([]).shape == (0, 0)
    assert bleu_distance_matrix(["anything"]).tolist() == [[0.0]]
    d = bleu_distance_matrix(["a b c d", "a b c d", "e f", ""])
    assert d[0, 1] == 0.0  # identical, >= 4 tokens: BLEU exactly 1
    assert d[0, 2] == d[0, 3] == d[2, 3] == 1.0  # no shared token (or empty): BLEU exactly 0
    # identical 2-token strings: p3 = p4 = 0.1 / 1 after method1 smoothing
    assert bleu_distance_matrix(["e f", "e f"])[0, 1] == 1 - math.exp(0.5 * math.log(0.1))


def test_distance_matrix_with_many_repeats():
    """Few distinct texts (each ordered pair of distinct texts is scored once): still nltk's."""
    rng = random.Random(3)
    pool = ["", "a b", "find the sum of all primes below 30", "find the sum of all primes below 40",
            "a\u3000b c d"]
    texts = [rng.choice(pool) for _ in range(40)]
    assert np.array_equal(bleu_distance_matrix(texts), ref_distance_matrix(texts))
    assert bleu_cluster_penalty(texts) == ref_penalty(texts)


def test_hypothesis_is_the_lower_index():
    short, long = "a b c d", "a b c d e f g h"
    d = bleu_distance_matrix([short, long])
    assert d[0, 1] == 1 - sentence_bleu([long.split()], short.split(), smoothing_function=SMOOTH)
    d_rev = bleu_distance_matrix([long, short])
    assert d_rev[0, 1] == 1 - sentence_bleu([short.split()], long.split(),
                                             smoothing_function=SMOOTH)
    assert d[0, 1] == 1 - math.exp(1 - 8 / 4)  # precisions 1, brevity penalty exp(1 - 8/4)
    assert d_rev[0, 1] != d[0, 1]


def test_match_counts_are_clipped_ngram_overlaps():
    rng = random.Random(7)
    docs = [rng.choices("abcab", k=rng.randint(0, 12)) for _ in range(12)]
    vocab = {t: i for i, t in enumerate("abc")}
    ids = np.array([vocab[t] for doc in docs for t in doc], dtype=np.int64)
    counts = bleu_match_counts(ids, np.array([len(doc) for doc in docs]))
    for k, m in enumerate(counts, start=1):
        grams = [Counter(tuple(doc[p:p + k]) for p in range(len(doc) - k + 1)) for doc in docs]
        want = [[sum((a & b).values()) for b in grams] for a in grams]
        assert m.tolist() == want


def test_fsum_rows_matches_math_fsum_including_halfway_cases():
    rng = np.random.default_rng(0)
    cols = [-rng.random(20000) * rng.choice([1e-6, 1e-3, 1, 4], 20000) for _ in range(4)]
    cols[0][:5] = [1.0, 1.0, -0.0, 0.0, 2.0**-1022]
    cols[1][:5] = [2.0**-53, 3 * 2.0**-53, 0.0, -0.0, 2.0**-1074]
    cols[2][:5] = [0.0, 0.0, 0.0, 0.0, 0.0]
    cols[3][:5] = [0.0, 2.0**-106, 0.0, 0.0, 0.0]
    # errors that do not add up exactly: residual at exactly half a gap -> math.fsum fallback
    cols[0][5:8] = [1.0, 1.0, -1.0]
    cols[1][5:8] = [2.0**-53, 2.0**-53, -(2.0**-53)]
    cols[2][5:8] = [2.0**-106, -(2.0**-106), -(2.0**-106)]
    cols[3][5:8] = [0.0, 0.0, 0.0]
    got = fsum_rows(cols)
    want = [math.fsum(row) for row in zip(*(c.tolist() for c in cols), strict=True)]
    assert got.tolist() == want
    assert want[5] == 1.0 + 2.0**-52 and want[6] == 1.0  # rounded away from the naive sum
    assert fsum_rows([np.array([0.5])]).tolist() == [0.5]


# ----------------------------------------------------------------------------- clustering
@pytest.mark.parametrize("threshold", [0.25, 0.375, 0.5, 0.75, 1.0])
def test_clusters_match_sklearn_with_ties(threshold):
    rng = np.random.default_rng(int(threshold * 8))
    for _ in range(40):
        n = int(rng.integers(2, 14))
        d = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], size=(n, n))
        d = np.triu(d, 1)
        d = d + d.T
        assert canonical(average_linkage_clusters(d, threshold)) == canonical(
            ref_labels(d, threshold))


def test_merge_at_exactly_the_threshold_is_not_made():
    from scipy.cluster.hierarchy import fcluster, linkage

    d = np.array([[0.0, 0.5], [0.5, 0.0]])
    assert average_linkage_clusters(d, 0.5).tolist() == [0, 1]
    assert canonical(ref_labels(d, 0.5)) == [0, 1]
    # scipy's fcluster(criterion="distance") merges at <= t, so it would differ here
    assert len(set(fcluster(linkage([0.5], "average"), 0.5, "distance"))) == 1
    # an average of an exact 0 and an exact 1 BLEU distance sits exactly at 0.5
    texts = ["p q r s", "p q r s", "x y z w"]
    d = bleu_distance_matrix(texts)
    assert d[0, 1] == 0.0 and d[0, 2] == d[1, 2] == 1.0
    for t in (1.0, np.nextafter(1.0, 2.0)):
        assert canonical(average_linkage_clusters(d, t)) == canonical(ref_labels(d, t))
    assert average_linkage_clusters(d, 1.0).tolist() == [0, 0, 1]
    assert average_linkage_clusters(d, np.nextafter(1.0, 2.0)).tolist() == [0, 0, 0]
    four = np.array([[0, 0, 1, 1], [0, 0, 1, 1], [1, 1, 0, 0], [1, 1, 0, 0]], dtype=float)
    four[0, 2] = four[2, 0] = 0.0  # cluster distance (0 + 1 + 1 + 1) / 4 = 0.75
    for t in (0.75, 0.7500000000000001):
        assert canonical(average_linkage_clusters(four, t)) == canonical(ref_labels(four, t))


def test_clusters_small_and_bad_input():
    assert average_linkage_clusters(np.zeros((0, 0)), 0.5).tolist() == []
    assert average_linkage_clusters(np.zeros((1, 1)), 0.5).tolist() == [0]
    with pytest.raises(ValueError, match="square"):
        average_linkage_clusters(np.zeros((2, 3)), 0.5)


# ----------------------------------------------------------------------------- penalties
@pytest.mark.parametrize(("seed", "n"), [(10, 2), (11, 3), (12, 20), (13, 50), (14, 50)])
def test_penalty_matches_rzero_reference(seed, n):
    texts = random_batch(seed, n)
    assert bleu_cluster_penalty(texts) == ref_penalty(texts)
    assert bleu_cluster_penalty(texts, threshold=0.8) == ref_penalty(texts, 0.8)


def test_penalty_on_many_near_duplicates():
    base = "Let f(x) = {} x^2 + 3 x - 7 . Find the sum of all real x such that f(f(x)) = 12 ."
    texts = [base.format(k) for k in range(6)] + ["How many primes are below 100 ?"] * 2
    pen = bleu_cluster_penalty(texts)
    assert pen == ref_penalty(texts)
    assert pen == [6 / 8] * 6 + [2 / 8] * 2


def test_penalty_small_batches():
    assert bleu_cluster_penalty([]) == []
    assert bleu_cluster_penalty([None], include_failed=False) == [0.0]
    assert bleu_cluster_penalty([None]) == [1.0]
    assert bleu_cluster_penalty(["what is 1 + 1 ?"]) == [1.0]
    assert bleu_cluster_penalty([None, "what is 1 + 1 ?", None],
                                include_failed=False) == [0.0, 1.0, 0.0]
    assert bleu_cluster_penalty([None, "what is 1 + 1 ?", None]) == [1 / 3] * 3


def test_include_failed_switch():
    qs = ["a b c d e f", None, "a b c d e f", "u v w x y z", None]
    assert bleu_cluster_penalty(qs, include_failed=False) == [2 / 3, 0.0, 2 / 3, 1 / 3, 0.0]
    with_failed = bleu_cluster_penalty(qs)  # the default: R-Zero's, over the whole batch
    assert with_failed == [2 / 5, 1 / 5, 2 / 5, 1 / 5, 1 / 5]  # "" is a singleton
    assert with_failed == ref_penalty(["" if q is None else q for q in qs])


token_text = st.lists(st.sampled_from(["a", "b", "c", "d", "1", "=", "é"]), max_size=9).map(
    " ".join)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.none(), token_text, token_text, st.text(max_size=12)), max_size=12),
       st.booleans())
def test_penalty_properties(questions, include_failed):
    pen = bleu_cluster_penalty(questions, include_failed=include_failed)
    assert len(pen) == len(questions) and all(isinstance(p, float) for p in pen)
    members = [i for i, q in enumerate(questions) if include_failed or q is not None]
    assert all(pen[i] == 0.0 for i in range(len(questions)) if i not in members)
    if not members:
        return
    texts = ["" if questions[i] is None else questions[i] for i in members]
    n = len(texts)
    assert all(0 < pen[i] <= 1 for i in members)
    labels = average_linkage_clusters(bleu_distance_matrix(texts), 0.5)
    for c in set(labels.tolist()):
        idx = [members[k] for k in np.flatnonzero(labels == c)]
        assert math.isclose(sum(pen[i] for i in idx), len(idx) ** 2 / n)
    assert [pen[i] for i in members] == ref_penalty(texts)
    assert np.array_equal(bleu_distance_matrix(texts), ref_distance_matrix(texts))
