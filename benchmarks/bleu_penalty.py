"""R-Zero's BLEU-cluster repetition penalty: vdlib's implementation against the nltk + sklearn loop.

    python benchmarks/bleu_penalty.py [--n 2048] [--subset 256] [--seed 0] [--out PATH]

A reproducible synthetic rollout batch of ``--n`` R-Zero-like math questions (30-120
whitespace tokens): most are instances of a few dozen templates with varied numbers and names
(near-duplicates), some are exact repeats, the rest are built from a shared phrase pool (unique).
Times :func:`vdlib.method.bleu_penalty.bleu_cluster_penalty` on the whole batch (distance matrix and
clustering separately). The reference (R-Zero's loop: nltk ``sentence_bleu`` per pair i < j,
then scikit-learn ``AgglomerativeClustering``) takes minutes at 2,048, so it is timed on a random
subset of ``--subset`` questions and extrapolated by the pair count ``n(n-1)/2`` (the clustering
is a small share); the fast one is timed on the same subset, and the two must agree there (the
distance matrices bit for bit, the penalties exactly).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vdlib.method.bleu_penalty import (  # noqa: E402
    average_linkage_clusters,
    bleu_cluster_penalty,
    bleu_distance_matrix,
)

NAMES = ["Alice", "Bob", "Carla", "Deepak", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jamal"]
OBJECTS = ["marbles", "coins", "cards", "books", "apples", "tokens", "stamps", "pencils"]
SHAPES = ["triangle", "rectangle", "trapezoid", "regular hexagon", "circle", "square"]
CLAUSES = [
    "Let $f(x) = {a}x^2 + {b}x - {c}$ be a quadratic polynomial with real coefficients.",
    "{name} has {a} {obj} and gives {b} of them to {name2}, who already had {c} {obj}.",
    "A {shape} has a perimeter of {a} units and one side of length {b} units.",
    "Find the sum of all real values of $x$ such that $f(f(x)) = {c}$.",
    "Express your answer as a common fraction in lowest terms.",
    "How many positive integers $n \\le {d}$ satisfy $n^2 \\equiv {a} \\pmod{{{b}}}$?",
    "The sequence $a_1, a_2, \\dots$ satisfies $a_{{n+1}} = {a} a_n - {b}$ with $a_1 = {c}$.",
    "What is the remainder when $a_{{{d}}}$ is divided by ${b}$?",
    "Two fair dice with {a} faces each are rolled and the product of the results is recorded.",
    "What is the probability that the product is divisible by ${b}$?",
    "In triangle $ABC$, $AB = {a}$, $BC = {b}$, and $CA = {c}$.",
    "Point $D$ lies on $BC$ such that $AD$ bisects angle $BAC$.",
    "Compute the length of $AD$ and give your answer in simplest radical form.",
    "Each of the {d} students in a class chose exactly one of {a} clubs.",
    "If no club has more than {b} members, what is the least possible number of clubs with "
    "exactly {c} members?",
    "A bag contains {a} red, {b} blue and {c} green {obj}; {name} draws {d} without replacement.",
    "Determine the number of ordered pairs $(x, y)$ of integers with $x^2 + y^2 = {d}$.",
    "The area of the {shape} is {a} square units; find its largest possible diameter.",
    "Round your answer to the nearest whole number if necessary.",
    "Suppose $p$ and $q$ are primes with $p + q = {d}$ and $p - q = {a}$.",
]
FILLER = ("the of a to and is in that for with as on be by this are from at which an it "
          "number value sum product integer real positive given such each every least most "
          "find compute determine show prove exactly possible distinct total set point line "
          "angle area length radius circle function polynomial root roots digit digits").split()


def _fill(clause: str, rng: random.Random) -> str:
    return clause.format(
        a=rng.randint(2, 99), b=rng.randint(2, 60), c=rng.randint(1, 200),
        d=rng.randint(10, 2025), name=rng.choice(NAMES), name2=rng.choice(NAMES),
        obj=rng.choice(OBJECTS), shape=rng.choice(SHAPES))


def _question(clauses: list[str], rng: random.Random, lo: int = 30, hi: int = 120) -> str:
    words = " ".join(_fill(c, rng) for c in clauses).split()
    while len(words) < lo:  # pad with a closing request
        words += _fill(rng.choice(CLAUSES), rng).split()
    return " ".join(words[:hi])


def synthetic_questions(n: int, seed: int = 0, n_templates: int = 40,
                        templated: float = 0.7, repeats: float = 0.1) -> list[str]:
    """``n`` R-Zero-like math questions (30-120 whitespace tokens), reproducible from ``seed``.

    A share ``templated`` are instances of ``n_templates`` clause templates with fresh numbers
    and names (near-duplicates), ``repeats`` are exact copies of earlier questions, and the
    rest are unique (random clauses interleaved with random filler words).
    """
    rng = random.Random(seed)
    templates = [rng.sample(CLAUSES, rng.randint(3, 7)) for _ in range(n_templates)]
    out: list[str] = []
    for _ in range(n):
        u = rng.random()
        if out and u < repeats:
            out.append(rng.choice(out))
        elif u < repeats + templated:
            out.append(_question(rng.choice(templates), rng))
        else:
            clauses = rng.sample(CLAUSES, rng.randint(2, 6))
            words = _question(clauses, rng).split()
            for _ in range(rng.randint(3, 20)):
                words.insert(rng.randrange(len(words) + 1), rng.choice(FILLER))
            out.append(" ".join(words[: rng.randint(30, 120)]))
    return out


def reference_distance_matrix(texts: list[str]) -> np.ndarray:
    """R-Zero's loop: nltk sentence_bleu for each pair i < j (hypothesis i), mirrored."""
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    smooth = SmoothingFunction().method1
    tokens = [t.split() for t in texts]
    n = len(texts)
    d = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            score = sentence_bleu([tokens[j]], tokens[i], smoothing_function=smooth)
            d[i, j] = d[j, i] = 1 - score
    return d


def reference_penalty(texts: list[str],
                      threshold: float = 0.5) -> tuple[list[float], np.ndarray, float]:
    """R-Zero's penalty: (penalties, nltk distance matrix, seconds spent in the nltk loop)."""
    from sklearn.cluster import AgglomerativeClustering

    t0 = time.perf_counter()
    d = reference_distance_matrix(texts)
    t_bleu = time.perf_counter() - t0
    labels = AgglomerativeClustering(n_clusters=None, distance_threshold=threshold,
                                     metric="precomputed", linkage="average").fit(d).labels_
    sizes = np.bincount(labels)
    return [int(sizes[c]) / len(texts) for c in labels], d, t_bleu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2048)
    parser.add_argument("--subset", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).parent / "results" / "bleu_penalty_cpu.txt")
    args = parser.parse_args()

    lines: list[str] = []

    def say(msg: str) -> None:
        print(msg, flush=True)
        lines.append(msg)

    qs = synthetic_questions(args.n, seed=args.seed)
    lens = [len(q.split()) for q in qs]
    say(f"machine: {platform.platform()}, python {platform.python_version()}, "
        f"{os.cpu_count()} cpus, load average {os.getloadavg()[0]:.2f} at start")
    say(f"batch: {args.n} synthetic questions (seed {args.seed}), tokens min/median/max "
        f"{min(lens)}/{int(np.median(lens))}/{max(lens)}, {len(set(qs))} distinct")

    t_mat, t_clu, t_all = [], [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        d = bleu_distance_matrix(qs)
        t1 = time.perf_counter()
        average_linkage_clusters(d, 0.5)
        t2 = time.perf_counter()
        pen = bleu_cluster_penalty(qs)
        t3 = time.perf_counter()
        t_mat.append(t1 - t0)
        t_clu.append(t2 - t1)
        t_all.append(t3 - t2)
    say(f"fast, n={args.n}: bleu_cluster_penalty {min(t_all):.3f} s (best of {args.repeats}; "
        f"distance matrix {min(t_mat):.3f} s, clustering {min(t_clu):.3f} s); "
        f"{len(set(pen))} distinct penalties, max {max(pen):.4f}")

    rng = random.Random(args.seed + 1)
    sub = [qs[i] for i in sorted(rng.sample(range(args.n), args.subset))]
    t0 = time.perf_counter()
    fast_sub = bleu_cluster_penalty(sub)
    t_fast_sub = time.perf_counter() - t0
    d_fast = bleu_distance_matrix(sub)
    t0 = time.perf_counter()
    ref_sub, d_ref, t_ref_bleu = reference_penalty(sub)
    t_ref_sub = time.perf_counter() - t0
    same_d = bool(np.array_equal(d_fast, d_ref))
    max_diff = float(np.abs(d_fast - d_ref).max())
    same_p = fast_sub == ref_sub
    pairs_sub = args.subset * (args.subset - 1) // 2
    pairs_all = args.n * (args.n - 1) // 2
    t_ref_all = t_ref_sub * pairs_all / pairs_sub
    say(f"subset of k={args.subset}: reference (nltk loop + sklearn) {t_ref_sub:.2f} s "
        f"({t_ref_bleu / pairs_sub * 1e6:.1f} us per nltk pair), fast {t_fast_sub:.4f} s, "
        f"ratio {t_ref_sub / t_fast_sub:.0f}x")
    say(f"agreement on the subset: distance matrix bit-identical {same_d} "
        f"(max |diff| {max_diff:.1e}), penalties identical {same_p}")
    say(f"reference extrapolated to n={args.n} by pair count k(k-1)/2={pairs_sub} -> "
        f"n(n-1)/2={pairs_all}: {t_ref_all:.0f} s; fast measured {min(t_all):.3f} s; "
        f"ratio {t_ref_all / min(t_all):.0f}x")
    if not (same_d and same_p):
        say("MISMATCH between the fast and the reference implementation")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    if not (same_d and same_p):
        sys.exit(1)


if __name__ == "__main__":
    main()
