"""vdlib.metrics.diversity against hand-computed cases and slow, obvious references."""

from __future__ import annotations

import math
import random
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

from vdlib.metrics import diversity
from vdlib.metrics.diversity import (
    cumulative_vendi,
    distinct_numbers,
    mean_pairwise_cosine_distance,
    novelty_rate,
    question_lengths,
    self_bleu,
    self_bleu_scores,
    unique_tokens,
    vendi_score,
)


# ----------------------------------------------------------------------------- references
def nltk_self_bleu_scores(texts, max_n=4, smoothing="method1", tokenize=str.split):
    """Texygen's loop: hypothesis i, references = every other text, nltk sentence_bleu."""
    tokens = [tokenize(t) for t in texts]
    smooth = getattr(SmoothingFunction(), smoothing)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # method0 warns on every zero precision
        return [float(sentence_bleu(tokens[:i] + tokens[i + 1:], tokens[i],
                                    weights=(1 / max_n,) * max_n, smoothing_function=smooth))
                for i in range(len(tokens))]


def kernel_vendi(x):
    """The definition: eigenvalues of the n x n cosine kernel K / n, entropy, exp."""
    x = np.asarray(x, dtype=np.float64)
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    lam = np.linalg.eigvalsh(x @ x.T / len(x))
    lam = lam[lam > 1e-12]
    lam = lam / lam.sum()
    return math.exp(-sum(v * math.log(v) for v in lam))


def brute_novelty(current, previous, threshold):
    novel = 0
    for c in current:
        dists = [1 - np.dot(c, p) / (np.linalg.norm(c) * np.linalg.norm(p)) for p in previous]
        novel += min(dists) > threshold
    return novel / len(current)


WORDS = "the of a is $x$ find sum all integers prime 2 3 = + value".split()


def random_corpus(rng: random.Random, n: int) -> list[str]:
    """Near-duplicates, exact repeats, empty strings and texts shorter than 4 tokens."""
    bases = [" ".join(rng.choices(WORDS, k=rng.randint(1, 14))) for _ in range(3)]
    out: list[str] = []
    for _ in range(n):
        u = rng.random()
        if u < 0.1:
            out.append(rng.choice(["", " ", "x"]))
        elif u < 0.25:
            out.append(" ".join(rng.choices(WORDS, k=rng.randint(1, 3))))
        elif u < 0.4 and out:
            out.append(rng.choice(out))
        else:
            toks = rng.choice(bases).split()
            for _ in range(rng.randint(0, 3)):
                toks[rng.randrange(len(toks))] = rng.choice(WORDS)
            out.append(" ".join(toks))
    return out


# ----------------------------------------------------------------------------- Self-BLEU
def test_self_bleu_identical_texts_is_one_as_nltk():
    texts = ["find the sum of all primes below 10"] * 3
    assert nltk_self_bleu_scores(texts) == [1.0, 1.0, 1.0]
    assert self_bleu(texts) == 1.0
    # two tokens: no 3- or 4-grams, method1 gives p3 = p4 = 0.1 / 1, so exp(0.5 log 0.1)
    short = ["a b", "a b"]
    assert self_bleu_scores(short) == nltk_self_bleu_scores(short)
    assert self_bleu(short) == pytest.approx(math.sqrt(0.1), abs=1e-15)


def test_self_bleu_multi_reference_clipping_and_brevity_by_hand():
    # hypothesis "a a a a" vs refs "a a" and "a a a": unigram max over refs 3 -> p1 = 3/4,
    # bigrams max 2 -> 2/3, trigrams 1 -> 1/2, 4-grams 0 -> 0.1/1; closest ref length 3 < 4.
    texts = ["a a a a", "a a", "a a a"]
    expected = math.exp(0.25 * (math.log(3 / 4) + math.log(2 / 3) + math.log(1 / 2)
                                + math.log(0.1)))
    assert self_bleu_scores(texts)[0] == pytest.approx(expected, rel=1e-14)
    # closest_ref_length tie: hyp length 3, refs of lengths 2 and 4 -> the shorter (no penalty)
    tie = ["p q r", "p q", "p q r s"]
    bp_free = math.exp(0.25 * (0 + 0 + 0 + math.log(0.1)))  # p4 = 0.1 / max(1, 0)
    assert self_bleu_scores(tie)[0] == pytest.approx(bp_free, rel=1e-14)
    assert self_bleu_scores(tie) == nltk_self_bleu_scores(tie)


def test_self_bleu_disjoint_texts_and_small_inputs():
    assert self_bleu(["a b c d", "e f g h", "i j k l"]) == 0.0
    assert math.isnan(self_bleu([])) and math.isnan(self_bleu(["only one"]))
    assert self_bleu_scores(["only one"])[0] != self_bleu_scores(["only one"])[0]  # nan
    assert self_bleu(["", ""]) == 0.0
    with pytest.raises(ValueError, match="method1"):
        self_bleu(["a", "b"], smoothing="method7")
    with pytest.raises(ValueError, match="whitespace"):
        self_bleu(["a", "b"], tokenize="nltk")


@pytest.mark.parametrize("seed", range(40))
def test_self_bleu_equals_nltk_loop_bit_for_bit(seed):
    rng = random.Random(seed)
    texts = random_corpus(rng, rng.randint(2, 14))
    max_n = 1 + seed % 5
    smoothing = "method0" if seed % 7 == 3 else "method1"
    expected = nltk_self_bleu_scores(texts, max_n, smoothing)
    assert self_bleu_scores(texts, max_n, smoothing) == expected
    assert self_bleu(texts, max_n, smoothing) == sum(expected) / len(expected)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from("abcd"), max_size=7).map(" ".join),
                min_size=2, max_size=8))
def test_self_bleu_property_equals_nltk(texts):
    assert self_bleu_scores(texts) == nltk_self_bleu_scores(texts)


def test_self_bleu_custom_tokenizer_and_sample():
    rng = random.Random(7)
    texts = random_corpus(rng, 12)
    chars = lambda s: list(s.replace(" ", ""))  # noqa: E731
    assert self_bleu_scores(texts, tokenize=chars) == nltk_self_bleu_scores(texts, tokenize=chars)
    keep = np.sort(np.random.default_rng(3).choice(len(texts), 5, replace=False))
    assert self_bleu(texts, sample=5, seed=3) == self_bleu([texts[i] for i in keep])
    assert self_bleu(texts, sample=50) == self_bleu(texts)


def test_self_bleu_matches_fast_bleu_when_installed():
    fast_bleu = pytest.importorskip("fast_bleu")
    texts = random_corpus(random.Random(1), 60)
    texts = [t for t in texts if t.split()]  # fast-bleu's handling of empty texts differs
    ours = self_bleu_scores(texts)
    theirs = fast_bleu.SelfBLEU([t.split() for t in texts], {"4": (0.25,) * 4}).get_score()["4"]
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------- Vendi
def test_vendi_identical_and_orthogonal_by_hand():
    assert vendi_score(np.tile([0.3, -1.2, 2.0], (7, 1))) == pytest.approx(1.0, abs=1e-12)
    assert vendi_score(np.eye(5)) == pytest.approx(5.0, abs=1e-12)
    assert vendi_score(np.eye(6)[:4] * [[1], [2], [3], [4]]) == pytest.approx(4.0, abs=1e-12)
    # 3 copies of e1 and 1 of e2 (n > d: the d x d route): eigenvalues 3/4, 1/4
    x = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    expected = math.exp(-(0.75 * math.log(0.75) + 0.25 * math.log(0.25)))
    assert vendi_score(x) == pytest.approx(expected, abs=1e-12)
    assert math.isnan(vendi_score(np.zeros((0, 3))))
    with pytest.raises(ValueError, match="zero"):
        vendi_score([[1.0, 0.0], [0.0, 0.0]])


@pytest.mark.parametrize(("n", "d"), [(30, 8), (8, 30), (40, 40), (1, 5)])
def test_vendi_equals_kernel_eigendecomposition(n, d):
    rng = np.random.default_rng(n * 100 + d)
    x = rng.standard_normal((n, d)) + rng.standard_normal(d)  # correlated rows
    assert vendi_score(x) == pytest.approx(kernel_vendi(x), abs=1e-9)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # its scipy.sparse.csr import
def test_vendi_matches_vendi_score_package():
    vendi = pytest.importorskip("vendi_score.vendi")
    rng = np.random.default_rng(0)
    for n, d in [(200, 16), (12, 50)]:
        x = rng.standard_normal((n, d)) + 2 * rng.standard_normal(d)
        assert vendi_score(x) == pytest.approx(float(vendi.score_dual(x)), abs=1e-6)
        assert vendi_score(x) == pytest.approx(float(vendi.score_X(x)), abs=1e-6)


def test_vendi_subsamples_with_seed():
    x = np.random.default_rng(5).standard_normal((300, 6))
    rows = np.sort(np.random.default_rng(42).choice(300, 50, replace=False))
    assert vendi_score(x, max_samples=50) == pytest.approx(kernel_vendi(x[rows]), abs=1e-9)
    assert vendi_score(x, max_samples=50, seed=1) != vendi_score(x, max_samples=50)
    assert vendi_score(x, max_samples=None) == pytest.approx(kernel_vendi(x), abs=1e-9)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 12), st.integers(1, 6), st.integers(0, 2**31 - 1))
def test_vendi_bounds_and_invariances(n, d, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)) + 0.1
    v = vendi_score(x)
    assert 1 - 1e-9 <= v <= min(n, d) + 1e-9
    scaled = x[rng.permutation(n)] * rng.uniform(0.1, 10, size=(n, 1))
    assert vendi_score(scaled) == pytest.approx(v, abs=1e-8)


def test_cumulative_vendi_pools_and_subsamples():
    rng = np.random.default_rng(2)
    iters = [rng.standard_normal((m, 5)) for m in (20, 15, 30)]
    got = cumulative_vendi(iters, subsample=25, seed=9)
    for t, value in enumerate(got, start=1):
        pooled = np.vstack(iters[:t])
        if len(pooled) > 25:
            pooled = pooled[np.sort(np.random.default_rng(9).choice(len(pooled), 25,
                                                                    replace=False))]
        assert value == pytest.approx(kernel_vendi(pooled), abs=1e-9)
    assert cumulative_vendi([]) == []


# ----------------------------------------------------------------------------- embeddings
def test_novelty_rate_known_nearest_neighbour():
    previous = [np.array([[1.0, 0.0, 0.0]]), np.array([[0.0, 1.0, 0.0]])]
    current = np.array([
        [0.0, 0.0, 1.0],   # distance 1 to both: novel
        [1.0, 0.1, 0.0],   # nearest e1, cos 0.995: not novel
        [1.0, 1.0, 0.0],   # nearest e1 / e2, distance 1 - 1/sqrt(2) = 0.293: not novel
        [1.0, 1.0, 1.5],   # cos to e1 = 1/sqrt(4.25) = 0.485, distance 0.515: novel
    ])
    assert novelty_rate(current, previous) == 0.5
    assert novelty_rate(current, previous, threshold=0.25) == 0.75
    assert novelty_rate(current, np.vstack(previous)) == 0.5
    assert novelty_rate([[0.0, 1.0]], [[1.0, 0.0]], threshold=1.0) == 0.0  # strictly exceeds
    assert novelty_rate(current, []) == 1.0 and novelty_rate(current, np.zeros((0, 3))) == 1.0
    assert math.isnan(novelty_rate(np.zeros((0, 3)), previous))


def test_novelty_rate_equals_brute_force_in_small_chunks(monkeypatch):
    rng = np.random.default_rng(4)
    prev = rng.standard_normal((37, 6))
    cur = np.vstack([rng.standard_normal((20, 6)), prev[:5] + 0.01])
    expected = brute_novelty(cur, prev, 0.3)
    assert novelty_rate(cur, prev) == expected
    monkeypatch.setattr(diversity, "_CHUNK_ELEMENTS", 40)  # one row per block
    assert novelty_rate(cur, [prev[:10], prev[10:]]) == expected


def test_mean_pairwise_cosine_distance_equals_double_loop():
    x = np.random.default_rng(3).standard_normal((25, 7))
    u = x / np.linalg.norm(x, axis=1, keepdims=True)
    pairs = [1 - u[i] @ u[j] for i in range(25) for j in range(i + 1, 25)]
    assert mean_pairwise_cosine_distance(x) == pytest.approx(np.mean(pairs), abs=1e-12)
    assert mean_pairwise_cosine_distance(np.ones((4, 3))) == pytest.approx(0.0, abs=1e-12)
    assert math.isnan(mean_pairwise_cosine_distance(np.ones((1, 3))))


# ----------------------------------------------------------------------------- structure
def test_unique_tokens_and_lengths_with_the_proposer_tokenizer(tokenizer):
    texts = ["What is 2 + 2?", "What is 12 + 7?", ""]
    ids = [tokenizer.encode(t, add_special_tokens=False) for t in texts]
    assert question_lengths(texts, tokenizer) == [len(i) for i in ids]
    assert unique_tokens(texts, tokenizer) == len(set().union(*ids))
    assert unique_tokens([], tokenizer) == 0 and question_lengths([], tokenizer) == []


@pytest.mark.parametrize(("text", "count"), [
    ("", 0),
    ("Compute 3 + 4.", 2),
    ("Compute 3/4 + 3/4 and \\frac{3}{4}.", 2),
    ("The points (1,2,3) and 1,000 marbles; 1000 is 1,000.", 4),
    ("x = 2.0, y = 2, z = 02 and w = 2.50 or 2.5", 2),
    ("a_1 + a_2 + x^2 = 12,345.5", 3),
    ("Find -7 and 7", 1),
])
def test_distinct_numbers(text, count):
    assert distinct_numbers(text) == count
