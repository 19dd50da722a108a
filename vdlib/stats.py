"""Mean +- standard error: the one rule every table, figure and evaluation summary uses.

``SE = stdev(ddof=1) / sqrt(k)`` over ``k`` values (seeds, or evaluation runs); no SE for one
value. Miller (2024), "Adding error bars to evals".

>>> mean_and_se([0.5, 0.7, 0.6])
(0.6, 0.05773502691896257)
>>> mean_and_se([0.5])
(0.5, None)
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

__all__ = ["SE_DDOF", "mean_and_se", "grouped_mean_se"]

SE_DDOF = 1  # the spread is the sample standard deviation


def mean_and_se(values: Sequence[float]) -> tuple[float, float | None]:
    """``(mean, standard error)`` of ``values``; the SE is None for one value. An empty
    sequence is an error."""
    if not values:
        raise ValueError("mean_and_se of no values")
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, None
    return mean, statistics.stdev(values) / math.sqrt(len(values))


def grouped_mean_se(frame: Any, by: Sequence[str], value: str = "value") -> Any:
    """A pandas frame of the ``by`` columns plus ``mean``, ``se`` (NaN for one row) and ``n`` of
    ``value`` over each group's rows; NaN values are dropped first."""
    import numpy as np
    import pandas as pd

    cols = [*by, "mean", "se", "n"]
    d = frame.dropna(subset=[value])
    if d.empty:
        return pd.DataFrame(columns=cols)
    out = d.groupby(list(by), sort=True)[value].agg(mean="mean", n="count",
                                                    std=lambda x: x.std(ddof=SE_DDOF))
    out = out.reset_index()
    out["se"] = out["std"] / np.sqrt(out["n"])
    return out[cols]
