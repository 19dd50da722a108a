"""vdlib.utils.stats.compare_seeds, the one arm-vs-arm comparison over seeds (issue 27, item 4):
Welch's t against scipy.stats.ttest_ind(equal_var=False), the paired t against ttest_rel, the
exact permutation p-values against enumeration."""

from __future__ import annotations

import itertools
import math
import statistics

import pytest
from scipy import stats

from vdlib.utils.stats import ALPHA, compare_seeds

#: fixed data: five seeds of a baseline and a VD arm (the VD arm lacks seed 4, has seed 5)
BASE = {0: 0.482, 1: 0.371, 2: 0.298, 3: 0.405, 4: 0.350}
VD = {0: 0.301, 1: 0.219, 2: 0.147, 3: 0.260, 5: 0.199}


def test_welch_matches_scipy_ttest_ind_unequal_variances():
    c = compare_seeds(BASE, VD)
    ref = stats.ttest_ind(list(VD.values()), list(BASE.values()), equal_var=False)
    assert c.welch_t == pytest.approx(ref.statistic, rel=1e-12)
    assert c.welch_df == pytest.approx(ref.df, rel=1e-12)
    assert c.welch_p == pytest.approx(ref.pvalue, rel=1e-10)
    assert c.diff == pytest.approx(statistics.fmean(VD.values()) - statistics.fmean(BASE.values()))
    # the SE of the difference uses the sample SDs
    se = math.sqrt(statistics.variance(BASE.values()) / 5 + statistics.variance(VD.values()) / 5)
    assert c.se == pytest.approx(se) and c.diff / c.se == pytest.approx(c.welch_t)
    assert (c.n_a, c.n_b) == (5, 5)


def test_paired_matches_scipy_ttest_rel_on_the_shared_seeds():
    c = compare_seeds(BASE, VD)
    shared = [0, 1, 2, 3]
    ref = stats.ttest_rel([VD[s] for s in shared], [BASE[s] for s in shared])
    assert c.n_pairs == 4 and c.paired_df == 3
    assert c.paired_t == pytest.approx(ref.statistic, rel=1e-12)
    assert c.paired_p == pytest.approx(ref.pvalue, rel=1e-10)
    d = [VD[s] - BASE[s] for s in shared]
    assert c.paired_diff == pytest.approx(statistics.fmean(d))
    assert c.paired_se == pytest.approx(statistics.stdev(d) / 2)
    assert c.paired_significant == (ref.pvalue < ALPHA)


@pytest.mark.parametrize(("a", "b"), [([1.0, 2.0, 4.0], [3.0, 3.5, 6.0, 7.0]),
                                      ([0.1, 0.5], [0.2, 0.25, 0.3])])
def test_unequal_sizes_and_plain_sequences(a, b):
    c = compare_seeds(a, b)
    ref = stats.ttest_ind(b, a, equal_var=False)
    assert (c.welch_t, c.welch_df, c.welch_p) == pytest.approx((ref.statistic, ref.df,
                                                                ref.pvalue))
    assert c.n_pairs == 0 and c.paired_t is None and c.paired_perm_p is None


def test_three_seeds_a_side():
    """The GPU grid's case: 3 seeds per arm, shared. A consistent per-seed gap passes the paired
    test where the between-seed spread sinks Welch's; no exact permutation test of 3 + 3 seeds
    can go below 0.1 (2 of 20 relabellings), nor a sign-flip test of 3 pairs below 0.25."""
    base = {0: 0.48, 1: 0.37, 2: 0.30}
    vd = {0: 0.29, 1: 0.22, 2: 0.15}
    c = compare_seeds(base, vd)
    welch = stats.ttest_ind(list(vd.values()), list(base.values()), equal_var=False)
    paired = stats.ttest_rel(list(vd.values()), list(base.values()))
    assert c.welch_p == pytest.approx(welch.pvalue) and c.paired_p == pytest.approx(paired.pvalue)
    assert not c.welch_significant and c.paired_significant
    assert c.perm_p == pytest.approx(0.1) and c.paired_perm_p == pytest.approx(0.25)


def test_exact_permutation_p_values_enumerate_every_relabelling():
    a, b = [1.0, 2.0, 4.0, 3.0], [3.0, 3.5, 6.0]
    c = compare_seeds(a, b)
    pooled, obs = a + b, statistics.fmean(b) - statistics.fmean(a)
    diffs = [statistics.fmean([pooled[i] for i in idx])
             - statistics.fmean([pooled[i] for i in range(7) if i not in idx])
             for idx in itertools.combinations(range(7), 3)]
    assert c.perm_p == pytest.approx(sum(abs(d) >= abs(obs) - 1e-12 for d in diffs)
                                     / len(diffs))
    pairs = compare_seeds({0: 1.0, 1: 2.0, 2: 3.0, 3: 5.0}, {0: 1.5, 1: 2.1, 2: 3.9, 3: 4.8})
    d = [0.5, 0.1, 0.9, -0.2]
    flips = [sum(s * x for s, x in zip(signs, d, strict=True)) / 4
             for signs in itertools.product((1, -1), repeat=4)]
    assert pairs.paired_perm_p == pytest.approx(
        sum(abs(m) >= abs(sum(d) / 4) - 1e-12 for m in flips) / 16)


def test_undefined_fields_are_none():
    one = compare_seeds({0: 1.0}, {0: 2.0, 1: 3.0})
    assert one.se is None and one.welch_t is None and one.welch_p is None
    assert one.n_pairs == 1 and one.paired_t is None and not one.welch_significant
    flat = compare_seeds({0: 1.0, 1: 1.0}, {0: 1.0, 1: 1.0})  # no spread: no test
    assert flat.se == 0 and flat.welch_t is None and flat.paired_t is None
    # equal differences but for float rounding (pass@1 of 3 runs of 500 items, in %): no spread
    # either, not t = 1,333
    rounded = compare_seeds({1: 13 / 15, 2: 9 / 15}, {1: 14 / 15, 2: 10 / 15})
    assert rounded.paired_se < 1e-12 and rounded.paired_t is None and rounded.paired_p is None
    assert rounded.welch_t is not None  # the arms themselves do spread
    nan = compare_seeds({0: 1.0, 1: float("nan"), 2: 2.0}, {0: 1.5, 1: 2.0, 2: None})
    assert (nan.n_a, nan.n_b, nan.n_pairs) == (2, 2, 1)
    with pytest.raises(ValueError, match="at least one value"):
        compare_seeds([], [1.0])
    assert set(one.as_dict()) >= {"welch_significant", "paired_significant", "perm_p"}
