"""Mean +- standard error: the one rule every table, figure and evaluation summary uses.

``SE = std(ddof) / sqrt(k)`` over ``k`` values (seeds, or evaluation runs); no SE for one
value. The default spread is the population standard deviation (``ddof = 0``,
:data:`SE_DDOF`): it is the rule that reproduces the paper's printed cells (paper, Sec.
"Standard benchmarks": "mean +- standard error", Miller 2024). Its AIME'24 cell 12.2 +- 0.9
is 3, 4 and 4 correct of 30 in three runs: ``pstdev / sqrt(3)`` = 0.91 %, while the sample
standard deviation would print 1.1 (``tests/test_fidelity_eval.py`` reproduces dozens of such
cells). ``ddof = 1`` (the sample SD, Miller's unbiased estimator) is the config switch
``evaluation.se_ddof``.

>>> mean_and_se([0.5, 0.7, 0.6])
(0.6, 0.04714045207910316)
>>> mean_and_se([0.5, 0.7, 0.6], ddof=1)
(0.6, 0.05773502691896257)
>>> mean_and_se([0.5])
(0.5, None)
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

__all__ = ["SE_DDOF", "SE_DDOF_CHOICES", "mean_and_se", "grouped_mean_se"]

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
