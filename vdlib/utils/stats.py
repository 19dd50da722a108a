"""Mean +- standard error: the one rule every table, figure and evaluation summary uses.

``SE = std(ddof) / sqrt(k)`` over ``k`` values (seeds, or evaluation runs); no SE for one
value. The default spread is the population standard deviation (``ddof = 0``,
:data:`SE_DDOF`): it is the rule that reproduces the paper's printed cells (paper, Sec.
"Standard benchmarks": "mean +- standard error", Miller 2024). Its AIME'24 cell 12.2 +- 0.9
is 3, 4 and 4 correct of 30 in three runs: ``pstdev / sqrt(3)`` = 0.91 %, while the sample
standard deviation would print 1.1 (``tests/test_fidelity_eval.py`` reproduces dozens of such
cells). ``ddof = 1`` (the sample SD, Miller's unbiased estimator) is the config switch
``evaluation.se_ddof``.

Comparisons of two arms over seeds are another matter (:func:`compare_seeds`): they report
the difference with its standard error from the sample SDs, Welch's t (Welch–Satterthwaite df)
and, where the arms share their seeds, the paired t by seed, each with its two-sided p-value,
and exact permutation p-values. Tables that compare arms mark significance from those p-values
(:data:`ALPHA`), never from a multiple of a standard error. The population-SD rule above is
for the cells that reproduce the paper's printed mean +- SE; the paper itself states no test.

>>> mean_and_se([0.5, 0.7, 0.6])
(0.6, 0.04714045207910316)
>>> mean_and_se([0.5, 0.7, 0.6], ddof=1)
(0.6, 0.05773502691896257)
>>> mean_and_se([0.5])
(0.5, None)
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["SE_DDOF", "SE_DDOF_CHOICES", "mean_and_se", "grouped_mean_se", "ALPHA",
           "Comparison", "compare_seeds"]

#: The spread is the population standard deviation (the paper's cells; see the module text).
SE_DDOF = 0
SE_DDOF_CHOICES = (0, 1)


def mean_and_se(values: Sequence[float], ddof: int = SE_DDOF) -> tuple[float, float | None]:
    """``(mean, standard error)`` of ``values``: ``SE = std(ddof) / sqrt(k)``; the SE is None
    for one value. An empty sequence is an error."""
    if not values:
        raise ValueError("mean_and_se of no values")
    if ddof not in SE_DDOF_CHOICES:
        raise ValueError(f"ddof = {ddof!r}; allowed: 0 (population SD), 1 (sample SD)")
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, None
    sd = statistics.pstdev(values) if ddof == 0 else statistics.stdev(values)
    return mean, sd / math.sqrt(len(values))


def grouped_mean_se(frame: Any, by: Sequence[str], value: str = "value",
                    ddof: int = SE_DDOF) -> Any:
    """A pandas frame of the ``by`` columns plus ``mean``, ``se`` (NaN for one row) and ``n`` of
    ``value`` over each group's rows; NaN values are dropped first."""
    import numpy as np
    import pandas as pd

    cols = [*by, "mean", "se", "n"]
    d = frame.dropna(subset=[value])
    if d.empty:
        return pd.DataFrame(columns=cols)
    out = d.groupby(list(by), sort=True)[value].agg(mean="mean", n="count",
                                                    std=lambda x: x.std(ddof=ddof))
    out = out.reset_index()
    out["se"] = out["std"] / np.sqrt(out["n"])
    out.loc[out["n"] < 2, "se"] = np.nan
    return out[cols]


# ----------------------------------------------------------------------------- comparisons

#: Two-sided level at which the comparison tables mark a difference significant.
ALPHA = 0.05
#: Exact permutation p-values enumerate up to this many relabellings (else a fixed-seed sample).
MAX_EXACT_PERMUTATIONS = 100_000
PERMUTATION_SAMPLES = 20_000


@dataclass(frozen=True)
class Comparison:
    """Arm ``b`` against arm ``a`` over training seeds (:func:`compare_seeds`).

    ``diff = mean_b - mean_a``; ``se = sqrt(s_a² / n_a + s_b² / n_b)`` with the sample SDs
    (``ddof = 1``); ``welch_t = diff / se`` with the Welch–Satterthwaite ``welch_df`` and the
    two-sided ``welch_p``. The ``paired_*`` fields test the per-seed differences ``b - a`` over
    the ``n_pairs`` seeds both arms ran (``paired_se``: their sample SD / sqrt(n_pairs);
    ``paired_t`` on ``n_pairs - 1`` df). ``perm_p``: the exact two-sided permutation p of the
    difference of means over every relabelling of the pooled values; ``paired_perm_p``: the
    exact sign-flip p of the mean per-seed difference (with 3 seeds a side neither can be below
    0.1 and 0.25). A field is None where it is undefined (fewer than 2 values, or no spread)."""

    n_a: int
    n_b: int
    mean_a: float
    mean_b: float
    diff: float
    se: float | None
    welch_t: float | None
    welch_df: float | None
    welch_p: float | None
    n_pairs: int
    paired_diff: float | None
    paired_se: float | None
    paired_t: float | None
    paired_df: int | None
    paired_p: float | None
    perm_p: float | None
    paired_perm_p: float | None

    @property
    def welch_significant(self) -> bool:
        """Welch's two-sided p below :data:`ALPHA`."""
        return self.welch_p is not None and self.welch_p < ALPHA

    @property
    def paired_significant(self) -> bool:
        """The paired t-test's two-sided p below :data:`ALPHA`."""
        return self.paired_p is not None and self.paired_p < ALPHA

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "welch_significant": self.welch_significant,
                "paired_significant": self.paired_significant}


def _values(x: Mapping[Any, float] | Sequence[float]) -> dict[Any, float] | list[float]:
    if isinstance(x, Mapping):
        return {k: float(v) for k, v in x.items() if v is not None and not math.isnan(v)}
    return [float(v) for v in x if v is not None and not math.isnan(v)]


def _t_p(t: float, df: float) -> float:
    from scipy import stats as st

    return float(2.0 * st.t.sf(abs(t), df))


def _at_least(values: Sequence[float], observed: float) -> int:
    tol = 1e-12 * max(1.0, abs(observed))
    return sum(abs(v) >= abs(observed) - tol for v in values)


def _permutation_p(a: Sequence[float], b: Sequence[float]) -> float | None:
    pooled, n_b = [*a, *b], len(b)
    if len(a) < 1 or n_b < 1:
        return None
    total = sum(pooled)
    observed = statistics.fmean(b) - statistics.fmean(a)

    def diff(idx: Sequence[int]) -> float:
        s = sum(pooled[i] for i in idx)
        return s / n_b - (total - s) / len(a)

    if math.comb(len(pooled), n_b) <= MAX_EXACT_PERMUTATIONS:
        diffs = [diff(idx) for idx in itertools.combinations(range(len(pooled)), n_b)]
        return _at_least(diffs, observed) / len(diffs)
    rng = random.Random(0)
    diffs = [diff(rng.sample(range(len(pooled)), n_b)) for _ in range(PERMUTATION_SAMPLES)]
    return (_at_least(diffs, observed) + 1) / (PERMUTATION_SAMPLES + 1)


def _sign_flip_p(d: Sequence[float]) -> float | None:
    if not d:
        return None
    observed = statistics.fmean(d)
    if 2 ** len(d) <= MAX_EXACT_PERMUTATIONS:
        means = [statistics.fmean(s * x for s, x in zip(signs, d, strict=True))
                 for signs in itertools.product((1, -1), repeat=len(d))]
        return _at_least(means, observed) / len(means)
    rng = random.Random(0)
    means = [statistics.fmean(x * rng.choice((1, -1)) for x in d)
             for _ in range(PERMUTATION_SAMPLES)]
    return (_at_least(means, observed) + 1) / (PERMUTATION_SAMPLES + 1)


def _spread(se: float, values: Sequence[float]) -> bool:
    """Whether an SE is more than the rounding of ``values``: differences that are equal but for
    float rounding (0.9333 - 0.8667 and 0.6667 - 0.6) have no spread, and a t built on the
    rounding would be arbitrary (t = 1,333 on 1 df), so such a t is left undefined."""
    return se > 1e-9 * max(1.0, *(abs(v) for v in values))


def compare_seeds(a: Mapping[Any, float] | Sequence[float],
                  b: Mapping[Any, float] | Sequence[float],
                  permutation: bool = True) -> Comparison:
    """Arm ``b`` against arm ``a`` over training seeds: the one comparison every arm-vs-arm
    table uses (:class:`Comparison`). ``a`` and ``b``: ``{seed: value}`` (pairs are the seeds
    both have) or plain sequences (unpaired only); None and NaN values are dropped. Welch's t
    and the paired t match ``scipy.stats.ttest_ind(equal_var=False)`` and ``ttest_rel``.

    >>> c = compare_seeds({0: 1.0, 1: 2.0, 2: 3.0}, {0: 2.0, 1: 3.5, 2: 4.0})
    >>> round(c.diff, 3), round(c.welch_t, 3), round(c.welch_df, 2), round(c.paired_t, 3)
    (1.167, 1.4, 3.99, 7.0)
    >>> c.n_pairs, c.paired_df, c.perm_p, c.paired_perm_p
    (3, 2, 0.3, 0.25)
    """
    va, vb = _values(a), _values(b)
    xa = list(va.values()) if isinstance(va, dict) else va
    xb = list(vb.values()) if isinstance(vb, dict) else vb
    if not xa or not xb:
        raise ValueError("compare_seeds needs at least one value on each side")
    na, nb = len(xa), len(xb)
    ma, mb = statistics.fmean(xa), statistics.fmean(xb)
    diff = mb - ma
    se = t = df = p = None
    if na >= 2 and nb >= 2:
        qa, qb = statistics.variance(xa) / na, statistics.variance(xb) / nb
        se = math.sqrt(qa + qb)
        if _spread(se, [*xa, *xb]):
            t = diff / se
            df = (qa + qb) ** 2 / (qa ** 2 / (na - 1) + qb ** 2 / (nb - 1))
            p = _t_p(t, df)
    pairs = ([vb[k] - va[k] for k in va if k in vb]
             if isinstance(va, dict) and isinstance(vb, dict) else [])
    p_mean = statistics.fmean(pairs) if pairs else None
    p_se = p_t = p_df = p_p = None
    if len(pairs) >= 2:
        p_se = statistics.stdev(pairs) / math.sqrt(len(pairs))
        if _spread(p_se, [*xa, *xb]):
            p_t, p_df = p_mean / p_se, len(pairs) - 1
            p_p = _t_p(p_t, p_df)
    return Comparison(
        n_a=na, n_b=nb, mean_a=ma, mean_b=mb, diff=diff, se=se, welch_t=t, welch_df=df,
        welch_p=p, n_pairs=len(pairs), paired_diff=p_mean, paired_se=p_se, paired_t=p_t,
        paired_df=p_df, paired_p=p_p,
        perm_p=_permutation_p(xa, xb) if permutation and na >= 2 and nb >= 2 else None,
        paired_perm_p=_sign_flip_p(pairs) if permutation and len(pairs) >= 2 else None)
