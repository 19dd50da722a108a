"""The paper's comparisons between two arms of a results file (issue 30's experiments).

:func:`vdlib.report.results.effects_table` sets every arm against the baseline. The ablations,
baselines and annealing ask other questions: does the mask in generation alone give most of
the diversity (gen-only against train-only), do both phases together give more than either,
does VD75 reshape the questions where KL-Cov and Clip-Cov do not, what does annealing change,
and does a failed parse's reward (0 in the paper, -1 in R-Zero) move the masked arms' valid
questions? :data:`PAPER_CONTRASTS` lists each pair with the place the paper makes its claim
and the direction it reports (None where it reports none on diversity);
:func:`contrasts_table` runs :func:`vdlib.utils.stats.compare_seeds` on every pair present in
a file, per metric and iteration: the diversity metrics, their costs (valid fraction,
curriculum size) and the growth of cumulative Vendi from iteration 1 (tab:question_diversity's
``Growth``, per seed).

>>> [(c.reference, c.arm) for c in PAPER_CONTRASTS][:2]
[('train_only', 'gen_only'), ('gen_only', 'vd75')]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from vdlib.report.curriculum_tables import vendi_growth
from vdlib.report.frames import LOOP_METRIC_COLUMNS, arm_label
from vdlib.utils.stats import compare_seeds

__all__ = ["DIRECTION", "comparison_fields", "Contrast", "PAPER_CONTRASTS", "CONTRAST_METRICS",
           "GROWTH", "growth_frame", "contrasts_table"]

#: the paper's direction for each diversity metric: +1 = VD should raise it, -1 = lower it
DIRECTION = {"self_bleu": -1, "vendi": 1, "novelty_rate": 1, "cumulative_vendi": 1,
             "unique_tokens": 1, "proposer_entropy": 1}


def comparison_fields(c: Any, counts: tuple[str, str], means: tuple[str, str]
                      ) -> dict[str, Any]:
    """A :class:`vdlib.utils.stats.Comparison` as table columns (rounded): the seeds of each
    side (columns ``counts``), the two means (``means``), then diff, SE, Welch, paired and
    permutation results."""
    return {counts[0]: c.n_a, counts[1]: c.n_b, means[0]: _r(c.mean_a, 4),
            means[1]: _r(c.mean_b, 4), "diff": _r(c.diff, 4), "se": _r(c.se, 4),
            "welch_t": _r(c.welch_t, 2), "welch_df": _r(c.welch_df, 2),
            "welch_p": _r(c.welch_p, 4), "n_pairs": c.n_pairs,
            "paired_diff": _r(c.paired_diff, 4), "paired_se": _r(c.paired_se, 4),
            "paired_t": _r(c.paired_t, 2), "paired_df": c.paired_df,
            "paired_p": _r(c.paired_p, 4), "perm_p": _r(c.perm_p, 4),
            "paired_perm_p": _r(c.paired_perm_p, 4)}


def _r(x: float | None, digits: int) -> float | None:
    return None if x is None else round(x, digits)


@dataclass(frozen=True)
class Contrast:
    """``arm`` against ``reference``; ``expects`` +1: the paper finds ``arm`` the more diverse
    (each metric's :data:`DIRECTION` then says which sign agrees), None:
    the paper states no diversity direction for this pair; ``claim``: where and what."""

    reference: str
    arm: str
    claim: str
    expects: int | None = 1


_PHASE = ("app:embedding_ablations / tab:question_diversity: gen-only contributes the larger "
          "share of diversity; both phases combined yield the highest cumulative diversity")
_ENTROPY = ("sec:results_diversity (fig:question_complexity's paragraph): KL-Cov and Clip-Cov "
            "stay within 2% of the baseline on the question profile's four quantities (valid "
            "questions; tokens and distinct numbers per question; score) where vocabulary "
            "dropout reshapes it")
_REWARD = ("issue 30's reward-ordering question (not in the paper): a failed parse pays -1 "
           "(R-Zero's code: -1 minus the 1/B repetition penalty) instead of the paper's 0")

#: the pairs, each taken when a results file holds both arms
PAPER_CONTRASTS = (
    Contrast("train_only", "gen_only", _PHASE),
    Contrast("gen_only", "vd75", _PHASE),
    Contrast("train_only", "vd75", _PHASE),
    Contrast("kl_cov", "vd75", _ENTROPY),
    Contrast("clip_cov", "vd75", _ENTROPY),
    Contrast("vd75", "anneal", "app:annealing: alpha 0.75 -> 1.0 over the iterations; the "
             "paper reports accuracy (peaks earlier, steadier), no diversity direction", None),
    Contrast("baseline", "baseline_fail_neg", _REWARD, None),
    Contrast("vd75", "vd75_fail_neg", _REWARD, None),
    Contrast("baseline_fail_neg", "vd75_fail_neg", _REWARD + "; VD75 against the baseline "
             "under it", 1),
)

#: the growth of cumulative Vendi from iteration 1, per seed (a row at each later iteration)
GROWTH = "cumulative_vendi_growth"
#: the loop metrics compared: the diversity metrics, then the costs (and :data:`GROWTH`, from
#: cumulative Vendi)
CONTRAST_METRICS = (*DIRECTION, "valid_fraction", "curriculum_size")


def growth_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows of metric :data:`GROWTH` from a loop frame: per arm, seed and iteration t > 1,
    cumulative Vendi at t minus at iteration 1
    (:func:`vdlib.report.curriculum_tables.vendi_growth`).

    >>> f = pd.DataFrame({"arm": ["a"] * 2, "seed": [0] * 2, "iteration": [1, 3],
    ...                   "metric": ["cumulative_vendi"] * 2, "value": [40.0, 46.5]})
    >>> growth_frame(f)[["iteration", "value"]].values.tolist()
    [[3.0, 6.5]]
    """
    return vendi_growth(frame).assign(metric=GROWTH)[LOOP_METRIC_COLUMNS]


def contrasts_table(frame: pd.DataFrame,
                    contrasts: Sequence[Contrast] = PAPER_CONTRASTS) -> pd.DataFrame:
    """Every contrast whose two arms the loop frame (``arm, seed, iteration, metric, value``:
    :func:`vdlib.report.results.loop_frame` of a results file) holds, per metric and iteration,
    :data:`GROWTH` included where cumulative Vendi is: the seeds on each side, the two means
    (``reference_mean``, ``arm_mean``), :func:`comparison_fields` (difference arm minus
    reference, SE from the sample SDs, Welch's t on Welch–Satterthwaite df, the paired t by
    seed, exact permutation p-values), ``paper_direction`` (the difference goes the paper's
    way; None where the paper states none or the metric has no direction: the costs) and
    ``claim``. Empty (with its columns) when no pair applies."""
    growth = growth_frame(frame)
    if not growth.empty:
        frame = pd.concat([frame, growth], ignore_index=True)
    order = (*CONTRAST_METRICS, GROWTH)
    metrics = sorted(set(frame["metric"]),
                     key=lambda m: (order.index(m) if m in order else len(order), m))
    present = set(frame["arm"])
    rows = []
    for con in contrasts:
        if not {con.reference, con.arm} <= present:
            continue
        for metric in metrics:
            ref = frame[(frame["arm"] == con.reference) & (frame["metric"] == metric)]
            arm = frame[(frame["arm"] == con.arm) & (frame["metric"] == metric)]
            for t in sorted(set(ref["iteration"]) & set(arm["iteration"])):
                a, b = ref[ref["iteration"] == t], arm[arm["iteration"] == t]
                c = compare_seeds(dict(zip(a["seed"], a["value"], strict=True)),
                                  dict(zip(b["seed"], b["value"], strict=True)))
                sign = DIRECTION.get(metric.removesuffix("_growth"))
                rows.append({
                    "reference": arm_label(con.reference), "arm": arm_label(con.arm),
                    "metric": metric, "iteration": int(t),
                    **comparison_fields(c, ("n_reference", "n_arm"),
                                         ("reference_mean", "arm_mean")),
                    "paper_direction": (None if con.expects is None or sign is None
                                        else bool(c.diff * sign * con.expects > 0)),
                    "welch_significant": c.welch_significant,
                    "paired_significant": c.paired_significant, "claim": con.claim})
    return pd.DataFrame(rows) if rows else pd.DataFrame(
        columns=["reference", "arm", "metric", "iteration", "n_reference", "n_arm",
                 "reference_mean", "arm_mean", "diff", "claim"])
