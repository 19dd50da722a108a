"""The tidy frames that tables and figures are built from: loading them from artifacts,
checking their columns, choosing and labelling arms, and aggregating over seeds.

Shared by :mod:`vdlib.report.tables` (with :mod:`vdlib.report.curriculum_tables`) and
:mod:`vdlib.report.plots`; nothing here draws or formats. Frames:

- loop metrics: :func:`vdlib.metrics.run_metrics.summary_metrics` -> ``arm, seed, iteration,
  metric, value``; :func:`metric_summary` gives their mean +- SE over seeds;
- correctness: :func:`load_correctness` -> ``arm, seed, iteration, correctness``;
- evaluations: :func:`load_eval_summary` reads one evaluation folder's ``summary.json``.

Every statistic is the mean over seeds with its standard error (:mod:`vdlib.utils.stats`, NaN for
one seed). Arms come in :data:`ARM_ORDER` and show under their display names
(:data:`vdlib.report.paper_values.ARM_LABELS`).

>>> arm_label("vd85_gen"), row_label("symmetric: baseline"), row_label("Base (no training)")
('VD85 (gen-only)', 'symmetric: Baseline', 'Base (no training)')
>>> select_arms(["vd75", "custom", "baseline"], None, "demo")
['baseline', 'vd75', 'custom']
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from vdlib.evaluation import EvalSummary
from vdlib.report.paper_values import ARM_LABELS
from vdlib.utils import safe_read
from vdlib.utils.stats import grouped_mean_se

__all__ = ["ARM_ORDER", "LOOP_METRIC_COLUMNS", "load_eval_summary", "load_correctness",
           "require_columns", "select_arms", "arm_label", "row_label", "seed_summary",
           "SEED_SUMMARY_DDOF",
           "metric_summary", "pct_change"]

logger = logging.getLogger(__name__)

#: the order arms are shown in (others follow, alphabetically)
ARM_ORDER = ["base", "baseline", "vd95", "vd85", "vd85_gen", "vd75", "train_only", "gen_only",
             "anneal", "adaptive", "kl_cov", "kl_cov_offpolicy", "clip_cov"]

#: an evaluation summary or correctness file larger than this is not read (a few KB each);
#: reads are bounded, non-blocking, and a link must lead to a regular file (vdlib.utils.safe_read)
REPORT_JSON_MAX_BYTES = 16 << 20

#: the columns of the loop metrics frame
LOOP_METRIC_COLUMNS = ["arm", "seed", "iteration", "metric", "value"]


def load_eval_summary(path: str | os.PathLike) -> EvalSummary:
    """An :class:`EvalSummary` from an evaluation folder (its ``summary.json``) or the file."""
    path = Path(path)
    if path.is_dir():
        path = path / "summary.json"
    return EvalSummary.from_dict(safe_read.read_json(path, REPORT_JSON_MAX_BYTES,
                                                     follow_links=True))


def load_correctness(run_dirs: str | os.PathLike | Iterable[str | os.PathLike]) -> pd.DataFrame:
    """``arm, seed, iteration, correctness`` from each run's
    ``verification/proposer_correctness.json`` (runs without one are skipped)."""
    from vdlib.metrics.run_metrics import arm_and_seed, run_folders

    if isinstance(run_dirs, str | os.PathLike):
        run_dirs = [run_dirs]
    rows = []
    for run in run_folders(run_dirs):
        f = run / "verification" / "proposer_correctness.json"
        if not f.is_file():
            logger.warning("%s: no verification/proposer_correctness.json; skipped", run)
            continue
        arm, seed = arm_and_seed(run)
        data = safe_read.read_json(f, REPORT_JSON_MAX_BYTES, follow_links=True)
        for t, v in data["correctness"].items():
            rows.append((arm, seed, int(t), np.nan if v is None else float(v)))
    return pd.DataFrame(rows, columns=["arm", "seed", "iteration", "correctness"])


def require_columns(frame: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    """Raise ``ValueError`` naming ``what`` and the missing columns unless ``frame`` has all of
    ``columns``."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{what}: the frame lacks columns {missing}; it has {list(frame.columns)}")


def _arm_key(arm: str) -> tuple[int, str]:
    return (ARM_ORDER.index(arm) if arm in ARM_ORDER else len(ARM_ORDER), arm)


def select_arms(present: Iterable[str], wanted: Sequence[str] | None, what: str) -> list[str]:
    """The arms to show: every arm ``present`` in :data:`ARM_ORDER` when ``wanted`` is None,
    else those of ``wanted`` that are present, in its order (a missing one is skipped with a
    warning naming ``what``)."""
    present = set(present)
    if wanted is None:
        return sorted(present, key=_arm_key)
    for a in wanted:
        if a not in present:
            logger.warning("%s: arm %r has no data; skipped", what, a)
    return [a for a in wanted if a in present]


def arm_label(arm: str) -> str:
    """An arm's display name (``kl_cov`` -> ``KL-Cov``); unknown arms as they are."""
    return ARM_LABELS.get(arm, arm)


def row_label(key: str) -> str:
    """A table row's display label: a vdlib arm name (``vd85`` -> ``VD85``), or the arm part of
    ``<prefix>: <arm>`` (``symmetric: baseline`` -> ``symmetric: Baseline``); other keys
    (``Base (no training)``) as they are.

    >>> row_label("kl_cov"), row_label("cross-scale: vd85_gen")
    ('KL-Cov', 'cross-scale: VD85 (gen-only)')
    """
    if key in ARM_LABELS:
        return ARM_LABELS[key]
    prefix, sep, arm = key.rpartition(": ")
    return f"{prefix}{sep}{ARM_LABELS[arm]}" if sep and arm in ARM_LABELS else key


#: spread of :func:`seed_summary`'s SEs: the sample SD. Its cells (the diversity and entropy
#: figures' bands, tab:question_diversity, tab:correctness, the annealing table) are none the
#: paper prints with an SE; the population SD is kept for the pass@1 cells the paper prints
#: with one (``evaluation.se_ddof``).
SEED_SUMMARY_DDOF = 1


def seed_summary(frame: pd.DataFrame, by: Sequence[str], value: str = "value",
                 ddof: int = SEED_SUMMARY_DDOF) -> pd.DataFrame:
    """``by`` columns plus ``mean``, ``se`` (NaN for one seed) and ``n`` of ``value`` over the
    remaining rows (seeds); NaN values are dropped first; SE = std(``ddof``) / sqrt(n), by
    default the sample SD (:data:`SEED_SUMMARY_DDOF`; :func:`vdlib.utils.stats.grouped_mean_se`).

    >>> f = pd.DataFrame({"arm": ["a", "a"], "value": [7.0, 8.0]})
    >>> seed_summary(f, ["arm"])[["mean", "se", "n"]].values.tolist()
    [[7.5, 0.5, 2.0]]
    """
    return grouped_mean_se(frame, by, value, ddof)


def metric_summary(metrics: pd.DataFrame, names: Iterable[str]) -> pd.DataFrame:
    """``arm, metric, iteration, mean, se, n``: the loop metrics ``names`` averaged over seeds.
    ``metrics``: :data:`LOOP_METRIC_COLUMNS` (``ValueError`` naming a missing column)."""
    require_columns(metrics, LOOP_METRIC_COLUMNS, "loop metrics")
    d = metrics[metrics["metric"].isin(list(names))]
    return seed_summary(d, ["arm", "metric", "iteration"])


def pct_change(value: float, base: float) -> float:
    """``100 * (value / base - 1)``; NaN when either is missing or ``base`` is 0.

    >>> pct_change(3377, 6771)
    -50.12553537143701
    >>> pct_change(1.0, 0.0)
    nan
    """
    if not (np.isfinite(value) and np.isfinite(base)) or base == 0:
        return float("nan")
    return 100.0 * (value / base - 1.0)
