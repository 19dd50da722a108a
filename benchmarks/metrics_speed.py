"""Diversity metrics: vdlib's Self-BLEU and Vendi score against the usual implementations.

    python benchmarks/metrics_speed.py [--sizes 2000 7000] [--subset 300] [--out PATH]

Self-BLEU (Texygen style: each question against all the others, nltk ``sentence_bleu``,
method1, uniform 4-gram weights) on ``--sizes`` synthetic R-Zero-like questions (30-120
whitespace tokens, mostly near-duplicates of a few dozen templates, some exact repeats; the
generator of ``benchmarks/bleu_penalty.py``). The nltk loop is O(n^2) (n hypotheses, each against
n - 1 references), so it is timed on a random subset of ``--subset`` questions and extrapolated
by ``(n / subset)^2``; vdlib is timed on the same subset and must agree there bit for bit.
``fast-bleu`` (C++, ``fast_bleu.SelfBLEU``) and ``vendi-score`` are timed on the full inputs in
the same run when importable. Vendi: ``--vendi-n`` random embeddings (clustered) of 384 and 1,536
dimensions, against the n x n kernel eigendecomposition (the definition) and vendi-score's
``score_dual`` / ``score_X``. Also times the novelty rate against four earlier iterations.
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
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bleu_penalty import synthetic_questions  # noqa: E402

from vdlib.metrics.diversity import (  # noqa: E402
    novelty_rate,
    self_bleu,
    self_bleu_scores,
    vendi_score,
)


def best_of(repeats: int, fn, *args, **kwargs) -> tuple[float, object]:
    """(least wall time in seconds over ``repeats`` calls, last result)."""
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn(*args, **kwargs)
        times.append(time.perf_counter() - t0)
    return min(times), result


def nltk_self_bleu_scores(texts: list[str]) -> list[float]:
    """Texygen's loop (``SelfBleu.get_bleu_parallel`` without the process pool)."""
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    smooth = SmoothingFunction().method1
    tokens = [t.split() for t in texts]
    return [float(sentence_bleu(tokens[:i] + tokens[i + 1:], tokens[i],
                                weights=(0.25, 0.25, 0.25, 0.25), smoothing_function=smooth))
            for i in range(len(tokens))]


def kernel_vendi(x: np.ndarray) -> float:
    """The definition: exp(entropy) of the eigenvalues of the n x n cosine kernel K / n."""
    import scipy.linalg
    import scipy.stats

    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    eigenvalues = scipy.linalg.eigvalsh(unit @ unit.T / len(unit))
    return float(np.exp(scipy.stats.entropy(eigenvalues[eigenvalues > 1e-12])))


def clustered_embeddings(n: int, d: int, seed: int, n_clusters: int = 60) -> np.ndarray:
    """``n`` points around ``n_clusters`` fixed centres (the same for every ``seed``)."""
    centres = np.random.default_rng(12345 + d).standard_normal((n_clusters, d))
    rng = np.random.default_rng(seed)
    return (centres[rng.integers(0, n_clusters, n)] + 0.7 * rng.standard_normal((n, d))
            ).astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 7000])
    parser.add_argument("--subset", type=int, default=300)
    parser.add_argument("--vendi-n", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).parent / "results" / "metrics_speed_cpu.txt")
    args = parser.parse_args()
    lines: list[str] = []

    def say(msg: str) -> None:
        print(msg, flush=True)
        lines.append(msg)

    try:
        import fast_bleu
    except ImportError:
        fast_bleu = None
    try:
        from vendi_score import vendi
    except ImportError:
        vendi = None
    say(f"machine: {platform.platform()}, python {platform.python_version()}, "
        f"{os.cpu_count()} cpus, load average {os.getloadavg()[0]:.2f} at start; "
        f"numpy {np.__version__}; fast-bleu {'importable' if fast_bleu else 'not importable'}; "
        f"vendi-score {'importable' if vendi else 'not importable'}")

    # ------------------------------------------------------------------ Self-BLEU
    big = synthetic_questions(max(args.sizes), seed=args.seed)
    sub = [big[i] for i in sorted(random.Random(args.seed + 1).sample(range(len(big)),
                                                                       args.subset))]
    t0 = time.perf_counter()
    ref_scores = nltk_self_bleu_scores(sub)
    t_nltk = time.perf_counter() - t0
    t_fast_sub, fast_scores = best_of(args.repeats, self_bleu_scores, sub)
    say(f"Self-BLEU subset of {args.subset}: nltk loop {t_nltk:.2f} s, vdlib "
        f"{t_fast_sub:.4f} s, ratio {t_nltk / t_fast_sub:.0f}x; per-text scores bit-identical "
        f"{fast_scores == ref_scores}, mean {sum(ref_scores) / len(ref_scores):.6f}")
    for n in args.sizes:
        qs = big[:n]
        lens = [len(q.split()) for q in qs]
        t_ours, value = best_of(args.repeats, self_bleu, qs)
        t_ref = t_nltk * (n / args.subset) ** 2
        say(f"Self-BLEU n={n} (tokens min/median/max {min(lens)}/{int(np.median(lens))}/"
            f"{max(lens)}, {len(set(qs))} distinct): vdlib {t_ours:.3f} s (best of "
            f"{args.repeats}) = {value:.6f}; nltk extrapolated by (n/{args.subset})^2: "
            f"{t_ref:.0f} s ({t_ref / 60:.1f} min), ratio {t_ref / t_ours:.0f}x")
        if fast_bleu is not None:
            tokens = [q.split() for q in qs]
            t_fb, fb = best_of(1, lambda t: fast_bleu.SelfBLEU(
                t, {"4": (0.25,) * 4}).get_score()["4"], tokens)
            diff = float(np.max(np.abs(np.asarray(fb) - self_bleu_scores(qs))))
            say(f"  fast-bleu 0.0.90 n={n}: {t_fb:.3f} s = {sum(fb) / len(fb):.6f} "
                f"(max |per-text diff| vs vdlib {diff:.1e}); vdlib/fast-bleu time "
                f"{t_ours / t_fb:.2f}")

    # ------------------------------------------------------------------ Vendi
    for d in (384, 1536):
        x = clustered_embeddings(args.vendi_n, d, args.seed)
        t_ours, value = best_of(args.repeats, vendi_score, x)
        t_ker, ker = best_of(1, kernel_vendi, x.astype(np.float64))
        say(f"Vendi {args.vendi_n} x {d}: vdlib {t_ours:.3f} s = {value:.6f}; n x n kernel "
            f"eigendecomposition {t_ker:.2f} s = {ker:.6f} (|diff| {abs(value - ker):.1e}), "
            f"ratio {t_ker / t_ours:.0f}x")
        if vendi is not None:
            t_dual, dual = best_of(args.repeats, vendi.score_dual, x.astype(np.float64))
            t_k, vk = best_of(1, vendi.score_X, x.astype(np.float64))
            say(f"  vendi-score 0.0.3: score_dual {t_dual:.3f} s = {dual:.6f}, score_X "
                f"{t_k:.2f} s = {vk:.6f} (max |diff| vs vdlib "
                f"{max(abs(value - dual), abs(value - vk)):.1e})")

    # ------------------------------------------------------------------ novelty rate
    prev = [clustered_embeddings(7000, 384, args.seed + t) for t in range(1, 5)]
    cur = clustered_embeddings(7000, 384, args.seed + 5)
    t_nov, nov = best_of(args.repeats, novelty_rate, cur, prev)
    say(f"novelty rate 7,000 vs 4 x 7,000 earlier (384-d): {t_nov:.3f} s = {nov:.4f}")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
