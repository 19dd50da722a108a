"""The pieces every figure of :mod:`vdlib.report.plots` is drawn with: one style per arm (baseline
dashed, VD solid), a pyplot-free figure, our mean +- SE curves, the paper's faded curves, % change
bars and one legend below the panels (ours first, then the paper's).

Figures are matplotlib ``Figure`` objects made without pyplot, so nothing depends on the
backend or a display.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from vdlib.report.frames import arm_label

__all__ = ["ARM_STYLE", "PAPER_ALPHA", "arm_style", "figure_style", "new_figure",
           "integer_xaxis", "draw_ours", "draw_paper", "note", "shared_legend",
           "pct_change_bars"]

#: colour, line style, marker per arm; baseline dashed as in the paper
ARM_STYLE = {
    "baseline": ("#787878", "--", "o"), "vd95": ("#DD8452", "-", "s"),
    "vd85": ("#E6B422", "-", "D"), "vd75": ("#DD8452", "-", "s"),
    "train_only": ("#4C72B0", "-", "^"), "gen_only": ("#1F8A70", "-", "D"),
    "anneal": ("#55A868", "-", "v"), "kl_cov": ("#8172B3", ":", "P"),
    "kl_cov_offpolicy": ("#8172B3", "-.", "p"),
    "clip_cov": ("#937860", ":", "X"), "vd85_gen": ("#DA8BC3", "-", "*"),
    "adaptive": ("#C44E52", "-", "h"),
}
_RC = {"font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "xtick.labelsize": 9,
       "ytick.labelsize": 9, "legend.fontsize": 9}
#: opacity of the paper's curves drawn beside ours
PAPER_ALPHA = 0.45


def arm_style(arm: str) -> tuple[str, str, str]:
    """``(colour, line style, marker)`` of ``arm``: :data:`ARM_STYLE`, else a seaborn "deep"
    colour chosen from the name (stable across runs), solid, circles."""
    if arm in ARM_STYLE:
        return ARM_STYLE[arm]
    import seaborn as sns

    palette = sns.color_palette("deep", 10).as_hex()
    return palette[sum(map(ord, arm)) % 10], "-", "o"


@contextlib.contextmanager
def figure_style() -> Iterator[None]:
    """Seaborn's whitegrid and the figures' font sizes, for the duration of the block."""
    import matplotlib as mpl
    import seaborn as sns

    with sns.axes_style("whitegrid"), mpl.rc_context(_RC):
        yield


def new_figure(nrows: int, ncols: int, w: float = 4.0, h: float = 3.1) -> tuple[Any, Any]:
    """A constrained-layout ``Figure`` of ``nrows x ncols`` panels of ``w x h`` inches (room
    below for the legend) and its axes as a 2-D array."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(ncols * w, nrows * h + 0.6), layout="constrained")
    return fig, fig.subplots(nrows, ncols, squeeze=False)


def integer_xaxis(ax: Any) -> None:
    """Integer ticks only on ``ax``'s x axis (iterations, steps)."""
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))


def draw_ours(ax: Any, agg: pd.DataFrame, arm: str, x: str = "iteration", scale: float = 1.0,
              band: bool = False) -> None:
    """``arm``'s rows of ``agg`` (``arm, <x>, mean, se``) times ``scale``: error bars, or a
    line with a +- SE band (``band``); nothing when the arm has no rows."""
    d = agg[agg["arm"] == arm].sort_values(x)
    if d.empty:
        return
    color, ls, marker = arm_style(arm)
    y, se = d["mean"].to_numpy(float) * scale, d["se"].to_numpy(float) * scale
    if band:
        ax.plot(d[x], y, color=color, ls=ls, lw=1.5, label=arm_label(arm),
                marker=marker if len(d) <= 12 else None, ms=4)
        ok = np.isfinite(se)
        ax.fill_between(d[x].to_numpy()[ok], (y - se)[ok], (y + se)[ok], color=color, alpha=0.2,
                        lw=0)
    else:
        ax.errorbar(d[x], y, yerr=np.nan_to_num(se), color=color, ls=ls, marker=marker, ms=5,
                    lw=1.6, capsize=3, label=arm_label(arm))


def draw_paper(ax: Any, pts: Sequence[tuple[float, float]], arm: str, label: str,
               alpha: float = PAPER_ALPHA) -> None:
    """The paper's curve ``pts`` (``[(x, y), ...]``) in ``arm``'s style, faded, hollow
    markers; nothing for no points."""
    if not pts:
        return
    color, ls, marker = arm_style(arm)
    xs, ys = zip(*pts, strict=True)
    ax.plot(xs, ys, color=color, ls=ls, marker=marker if len(xs) <= 12 else None, mfc="none",
            ms=4, lw=1.2, alpha=alpha, label=label)


def note(ax: Any, text: str) -> None:
    """A grey italic remark at the top of a panel (e.g. "not in these runs")."""
    ax.text(0.5, 0.96, text, transform=ax.transAxes, ha="center", va="top", fontsize=9,
            color="#555555", style="italic")


def shared_legend(fig: Any, axes: Any) -> None:
    """One legend below the panels with every label of ``axes`` (and their twin axes, listed
    in ``ax._vd_twins``) once: ours first, then the paper's."""
    handles: dict[str, Any] = {}
    for ax in np.ravel(axes):
        for a in (ax, *getattr(ax, "_vd_twins", ())):
            for h, lab in zip(*a.get_legend_handles_labels(), strict=True):
                handles.setdefault(lab, h)
    if handles:
        order = sorted(handles, key=lambda lab: lab.startswith("paper"))
        fig.legend([handles[k] for k in order], order, loc="outside lower center",
                   ncol=min(len(handles), 4), frameon=False)


def pct_change_bars(ax: Any, groups: Mapping[str, Sequence[float]],
                    labels: Sequence[str]) -> None:
    """Horizontal bars of % changes, one group of bars per label and one colour per arm of
    ``groups`` (arm -> a value per label), each bar annotated (``n/a`` for NaN)."""
    n = max(1, len(groups))
    height = 0.8 / n
    y = np.arange(len(labels))
    vals = [v for vs in groups.values() for v in vs if np.isfinite(v)] + [0.0]
    for i, (arm, values) in enumerate(groups.items()):
        bars = ax.barh(y + (i - (n - 1) / 2) * height, np.nan_to_num(values), height=height,
                       color=arm_style(arm)[0], label=arm_label(arm))
        ax.bar_label(bars, labels=[f"{v:+.0f}%" if np.isfinite(v) else "n/a" for v in values],
                     padding=2, fontsize=9)
    lo, hi = min(vals), max(vals)
    pad = 0.35 * max(hi - lo, 10.0)
    ax.set_xlim(lo - pad if lo < 0 else -pad / 3, hi + pad if hi > 0 else pad / 3)
    ax.axvline(0, color="#444444", lw=0.8)
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.set_xlabel("% change from baseline")
