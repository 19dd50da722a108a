"""The paper's figures regenerated from vdlib artifacts, with the paper's curves beside ours.

Inputs are tidy pandas frames (aggregation only; nothing here computes a metric):

- loop metrics: :func:`vdlib.metrics.run_metrics.summary_metrics` -> ``arm, seed, iteration,
  metric, value``;
- entropy trajectories: ``arm, seed, step, entropy``;
- per-iteration solver accuracy: ``arm, seed, iteration, benchmark, accuracy`` (a fraction).

Every statistic is the mean over seeds with its standard error ``std(ddof=1) / sqrt(n)`` (NaN for
one seed; :mod:`vdlib.report.frames`). Missing arms are skipped with a warning; missing metrics
leave a panel empty. Figures are matplotlib ``Figure`` objects (no pyplot state, no display needed,
drawn with :mod:`vdlib.report.drawing`) returned in a :class:`PlotResult` and, with ``out_dir``,
saved as PNG and PDF by :func:`save_figure` (:func:`show` displays one in a notebook under any
backend). Tables are in :mod:`vdlib.report.tables`; a notebook's report folder (tables and figures
on disk, ``summary.json``) is :mod:`vdlib.report`. The paper's numbers come from
:mod:`vdlib.report.paper_values`; docs/plots.md maps each function to its figure.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from vdlib.report.drawing import (
    draw_ours,
    draw_paper,
    figure_style,
    integer_xaxis,
    new_figure,
    note,
    pct_change_bars,
    shared_legend,
)
from vdlib.report.frames import (
    arm_label,
    metric_summary,
    pct_change,
    require_columns,
    seed_summary,
    select_arms,
)
from vdlib.report.paper_values import paper_series, paper_values

__all__ = [
    "PlotResult", "DPI", "show", "save_figure", "diversity_dynamics", "DYNAMICS_PANELS",
    "cumulative_vendi_figure", "embedding_diversity_figure", "SCALE_COLOURS",
    "phase_ablation_figure", "question_profile",
    "PROFILE_QUANTITIES", "annealing_figure", "entropy_figure",
]

logger = logging.getLogger(__name__)

DPI = 150  #: PNG resolution of :func:`save_figure`


@dataclass
class PlotResult:
    """A drawn figure, the files it was saved to (empty without ``out_dir``) and the
    aggregated numbers it shows (ours)."""

    figure: Any
    paths: list[Path] = field(default_factory=list)
    data: pd.DataFrame = field(default_factory=pd.DataFrame)

    def png(self) -> bytes:
        """The saved PNG's bytes, or the figure rendered to PNG in memory when unsaved."""
        saved = next((p for p in self.paths if p.suffix == ".png"), None)
        if saved is not None:
            return saved.read_bytes()
        import io

        buf = io.BytesIO()
        self.figure.savefig(buf, format="png", bbox_inches="tight", dpi=DPI)
        return buf.getvalue()

    def _repr_png_(self) -> bytes:  # a notebook cell ending in a figure call shows the figure
        return self.png()


def save_figure(fig: Any, out_dir: str | os.PathLike, name: str,
                formats: Sequence[str] = ("png", "pdf"), dpi: int | None = None) -> list[Path]:
    """Save ``fig`` as ``out_dir/name.<fmt>`` for each format, atomically (temp file + rename);
    returns the paths. The files hold no timestamp, so a figure saved again is byte-identical."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        path = out / f"{name}.{fmt}"
        tmp = out / f".{path.name}.{os.getpid()}.tmp"  # open() keeps the umask's mode
        try:
            with open(tmp, "wb") as fh:
                # no creation date in a PDF: the same figure gives the same bytes
                meta = {"CreationDate": None} if fmt == "pdf" else None
                fig.savefig(fh, format=fmt, bbox_inches="tight", dpi=dpi or DPI, metadata=meta)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        paths.append(path)
    logger.info("saved %s", ", ".join(str(p) for p in paths))
    return paths


def show(result: PlotResult) -> Any:
    """Something a notebook displays whatever the matplotlib backend: an
    ``IPython.display.Image`` of the saved PNG (rendered in memory when unsaved)."""
    from IPython.display import Image

    return Image(data=result.png())


def _result(fig: Any, out_dir: str | os.PathLike | None, name: str,
            data: pd.DataFrame) -> PlotResult:
    paths = save_figure(fig, out_dir, name) if out_dir is not None else []
    return PlotResult(fig, paths, data)


# ----------------------------------------------------------------------------- figures

#: (metric, title, y label, paper (label, metric) or None, paper on its own right-hand axis)
DYNAMICS_PANELS = [
    ("proposer_entropy", "Policy entropy ↑", "nats/token",
     ("fig:diversity_combined", "proposer_entropy"), False),
    ("self_bleu", "Self-BLEU ↓", "Self-BLEU", ("fig:diversity_combined", "self_bleu"), False),
    ("mean_acc", "Mean difficulty (solver acc) ↓", "mean acc",
     ("fig:diversity_combined", "mean_acc"), False),
    ("vendi", "Vendi score ↑", "effective types", ("fig:diversity_combined", "vendi"), True),
    ("novelty_rate", "Novelty rate ↑", "fraction novel",
     ("fig:diversity_combined", "novelty_rate"), False),
    ("epiplexity", "Epiplexity ↑", "per token", ("fig:diversity_combined", "epiplexity"), True),
    ("cumulative_vendi", "Cumulative Vendi ↑", "effective types",
     ("fig:embedding_diversity", "cumulative_vendi"), True),
    ("valid_fraction", "Valid questions (fraction)", "fraction", None, False),
    ("curriculum_size", "Curriculum size", "questions", None, False),
]


def diversity_dynamics(metrics: pd.DataFrame, out_dir: str | os.PathLike | None = None, *,
                       arms: Sequence[str] | None = None, paper_model: str | None = "Qwen3-4B",
                       panels: Sequence[str] | None = None,
                       name: str = "diversity_dynamics") -> PlotResult:
    """fig:diversity_combined (+ cumulative Vendi, valid fraction, curriculum size): each metric
    over iterations, mean +- SE over seeds, baseline dashed, VD solid; the paper's baseline and
    VD75 of ``paper_model`` faded (count-like metrics, whose scale depends on the sample size,
    on a grey right-hand axis). ``arms=None``: every arm present."""
    specs = [p for p in DYNAMICS_PANELS if panels is None or p[0] in panels]
    agg = metric_summary(metrics, [p[0] for p in specs])
    arms = select_arms(agg["arm"], arms, "diversity_dynamics")
    keep = []
    for spec in specs:
        ours = agg[(agg["metric"] == spec[0]) & agg["arm"].isin(arms)]
        has_paper = spec[3] is not None and paper_model is not None
        if not ours.empty or has_paper:
            keep.append((spec, ours, has_paper))
    ncols = min(3, max(1, len(keep)))
    nrows = max(1, math.ceil(len(keep) / ncols))
    with figure_style():
        fig, axes = new_figure(nrows, ncols)
        for ax, ((metric, title, ylabel, paper, twin), ours, has_paper) in zip(
                axes.ravel(), keep, strict=False):
            for arm in arms:
                draw_ours(ax, ours, arm)
            if ours.empty:
                note(ax, "not in these runs")
            if has_paper:
                pax = ax
                if twin:
                    pax = ax.twinx()
                    pax.grid(False)
                    pax.tick_params(axis="y", colors="#888888")
                    pax.set_ylabel(f"paper ({paper_model})", color="#888888")
                    ax._vd_twins = (pax,)
                for arm in ("baseline", "vd75"):
                    draw_paper(pax, paper_series(paper[0], paper_model, paper[1], arm), arm,
                               f"paper {paper_model}: {arm_label(arm)}")
            if metric == "mean_acc":
                ax.axhline(0.7, color="#999999", ls=":", lw=1)
                ax.text(0.02, 0.7, "τmax", transform=ax.get_yaxis_transform(), va="bottom",
                        fontsize=9, color="#777777")
            ax.set(title=title, xlabel="Iteration", ylabel=ylabel)
            integer_xaxis(ax)
        for ax in axes.ravel()[len(keep):]:
            ax.set_visible(False)
        shared_legend(fig, axes)
    return _result(fig, out_dir, name, agg)


def cumulative_vendi_figure(metrics: pd.DataFrame, out_dir: str | os.PathLike | None = None, *,
                            arms: Sequence[str] | None = ("baseline", "vd75"),
                            name: str = "cumulative_vendi") -> PlotResult:
    """fig:embedding_diversity: cumulative Vendi (iterations 1..N pooled) per arm (left) and
    the paper's 4B / 8B baseline and VD75 (right)."""
    agg = metric_summary(metrics, ["cumulative_vendi"])
    arms = select_arms(agg["arm"], arms, "cumulative_vendi_figure")
    with figure_style():
        fig, axes = new_figure(1, 2, w=4.6, h=3.4)
        ax, pax = axes[0]
        for arm in arms:
            draw_ours(ax, agg, arm)
        if not arms:
            note(ax, "no cumulative Vendi in these runs")
        ax.set(title="Ours: cumulative Vendi ↑", xlabel="Iteration",
               ylabel="effective # distinct questions")
        for model, alpha in (("Qwen3-4B", 0.9), ("Qwen3-8B", 0.45)):
            for arm in ("baseline", "vd75"):
                draw_paper(pax, paper_series("fig:embedding_diversity", model,
                                             "cumulative_vendi", arm), arm,
                           f"{model} {arm_label(arm)}", alpha=alpha)
        pax.set(title="Paper: cumulative Vendi ↑", xlabel="Iteration")
        pax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
        for a in axes[0]:
            integer_xaxis(a)
        if arms:
            ax.legend(loc="best")
    return _result(fig, out_dir, name, agg)


#: the paper's colours of its two model scales (fig:diversity_combined, fig:embedding_diversity:
#: 4B blue, 8B orange); other scales take the next of :data:`_MORE_COLOURS`
SCALE_COLOURS = {"Qwen3-4B": "#4C72B0", "Qwen3-8B": "#DD8452"}
_MORE_COLOURS = ("#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C")
_SCALE_ARM_STYLE = {"baseline": ("--", "o")}  # (line style, marker); VD arms solid squares


def _scale_colours(scales: Sequence[str]) -> dict[str, str]:
    extra = iter(_MORE_COLOURS * (1 + len(scales) // len(_MORE_COLOURS)))
    return {s: SCALE_COLOURS.get(s) or next(extra) for s in scales}


def _draw_scale(ax: Any, xs: Sequence[float], ys: Sequence[float], se: Sequence[float] | None,
                colour: str, arm: str, label: str, paper: bool) -> None:
    ls, marker = _SCALE_ARM_STYLE.get(arm, ("-", "s"))
    if paper:
        ax.plot(xs, ys, color=colour, ls=ls, marker=marker, mfc="none", ms=4, lw=1.2,
                alpha=0.9, label=label)
    else:
        ax.errorbar(xs, ys, yerr=se, color=colour, ls=ls, marker=marker, ms=5, lw=1.6,
                    capsize=3, label=label)


def embedding_diversity_figure(metrics_by_scale: Mapping[str, pd.DataFrame],
                               out_dir: str | os.PathLike | None = None, *,
                               arms: Sequence[str] | None = ("baseline", "vd75"),
                               paper_models: Sequence[str] = ("Qwen3-4B", "Qwen3-8B"),
                               name: str = "embedding_diversity") -> PlotResult:
    """fig:embedding_diversity as the paper draws it: the cumulative Vendi score (iterations
    1..N pooled) of the baseline (dashed) and VD75 (solid) at every model scale together, one
    colour per scale (4B blue, 8B orange). Left: ours, from one loop-metrics frame per scale
    (``{"Qwen3-4B": ..., "Qwen3-8B": ...}``; notebook 01 passes its own runs and those of its
    ``reference_experiments``), mean +- SE over seeds; right: the paper's ``paper_models``.
    ``data``: ``source`` (ours / paper), ``scale``, ``arm``, ``iteration``, ``mean``, ``se``,
    ``n`` (the paper's points with no SE)."""
    scales = list(metrics_by_scale)
    colours = _scale_colours([*scales, *(m for m in paper_models if m not in scales)])
    frames = []
    for scale, metrics in metrics_by_scale.items():
        agg = metric_summary(metrics, ["cumulative_vendi"])
        present = select_arms(agg["arm"], arms, "embedding_diversity_figure")
        mine = agg[agg["arm"].isin(present)]
        if not mine.empty:
            frames.append(mine.assign(source="ours", scale=scale))
    paper_rows = [{"source": "paper", "scale": model, "arm": arm, "iteration": x, "mean": y,
                   "se": float("nan"), "n": None}
                  for model in paper_models for arm in ("baseline", "vd75")
                  for x, y in paper_series("fig:embedding_diversity", model, "cumulative_vendi",
                                           arm)]
    cols = ["source", "scale", "arm", "iteration", "mean", "se", "n"]
    ours = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols)
    ours = ours.reindex(columns=cols)
    with figure_style():
        fig, axes = new_figure(1, 2, w=4.6, h=3.4)
        ax, pax = axes[0]
        for scale in scales:
            mine = ours[ours["scale"] == scale]
            for arm in dict.fromkeys(mine["arm"]):
                d = mine[mine["arm"] == arm].sort_values("iteration")
                _draw_scale(ax, d["iteration"], d["mean"].to_numpy(float),
                            np.nan_to_num(d["se"].to_numpy(float)), colours[scale], arm,
                            f"{scale} {arm_label(arm)}", paper=False)
        if ours.empty:
            note(ax, "no cumulative Vendi in these runs")
        ax.set(title="Ours: cumulative Vendi ↑", xlabel="Iteration",
               ylabel="effective # distinct questions")
        for model in paper_models:
            for arm in ("baseline", "vd75"):
                pts = paper_series("fig:embedding_diversity", model, "cumulative_vendi", arm)
                if pts:
                    xs, ys = zip(*pts, strict=True)
                    _draw_scale(pax, xs, ys, None, colours[model], arm,
                                f"{model} {arm_label(arm)}", paper=True)
        pax.set(title="Paper: cumulative Vendi ↑", xlabel="Iteration")
        for a in (ax, pax):
            integer_xaxis(a)
            if a.get_legend_handles_labels()[0]:
                a.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2,
                         frameon=False)
    paper = pd.DataFrame(paper_rows, columns=cols)
    data = pd.concat([ours, paper], ignore_index=True) if not ours.empty else paper
    return _result(fig, out_dir, name, data)


def phase_ablation_figure(metrics: pd.DataFrame, out_dir: str | os.PathLike | None = None, *,
                          arms: Sequence[str] | None = ("baseline", "train_only", "gen_only",
                                                        "vd75"),
                          paper_model: str = "Qwen3-4B",
                          name: str = "phase_ablation") -> PlotResult:
    """fig:embedding_ablations: Vendi, Self-BLEU and novelty per dropout phase (train-only,
    gen-only, both = VD75, baseline); ours on top, the paper's ``paper_model`` below."""
    panels = [("vendi", "Vendi ↑"), ("self_bleu", "Self-BLEU ↓"), ("novelty_rate", "Novelty ↑")]
    agg = metric_summary(metrics, [m for m, _ in panels])
    arms = select_arms(agg["arm"], arms, "phase_ablation_figure")
    with figure_style():
        fig, axes = new_figure(2, 3)
        for j, (metric, title) in enumerate(panels):
            ax, pax = axes[0, j], axes[1, j]
            ours = agg[agg["metric"] == metric]
            for arm in arms:
                draw_ours(ax, ours, arm)
            if ours.empty:
                note(ax, "not in these runs")
            for arm in ("baseline", "train_only", "gen_only", "vd75"):
                pts = paper_series("fig:embedding_ablations", paper_model, metric, arm)
                draw_paper(pax, pts, arm, arm_label(arm), alpha=0.85)
            ax.set(title=f"Ours: {title}", xlabel="Iteration")
            pax.set(title=f"Paper ({paper_model}): {title}", xlabel="Iteration")
            integer_xaxis(ax)
            integer_xaxis(pax)
        shared_legend(fig, axes)
    return _result(fig, out_dir, name, agg)


#: fig:question_complexity's four quantities: (paper key, our metric, label)
PROFILE_QUANTITIES = [("num_questions", "valid_questions", "#Q"),
                      ("tokens_per_question", "mean_question_tokens", "Tok/q ↑"),
                      ("distinct_numbers", "mean_distinct_numbers", "Nums ↑"),
                      ("score", "mean_acc", "Score ↓")]


def _profile_frame(metrics: pd.DataFrame, arms: Sequence[str] | None, baseline: str
                   ) -> pd.DataFrame:
    agg = metric_summary(metrics, [q[1] for q in PROFILE_QUANTITIES])
    cols = ["arm", "iteration", "quantity", "label", "metric", "value", "baseline_value",
            "pct_change"]
    present = set(agg["arm"])
    if baseline not in present:
        logger.warning("question_profile: baseline arm %r has no data", baseline)
        return pd.DataFrame(columns=cols)
    arms = [a for a in select_arms(present, arms, "question_profile") if a != baseline]
    base = agg[agg["arm"] == baseline]
    rows = []
    for arm in arms:
        mine = agg[agg["arm"] == arm]
        t = min(mine["iteration"].max(), base["iteration"].max())
        for key, metric, label in PROFILE_QUANTITIES:
            def at(d, metric=metric, t=t):
                v = d[(d["metric"] == metric) & (d["iteration"] == t)]["mean"]
                return float(v.iloc[0]) if len(v) else float("nan")
            v, b = at(mine), at(base)
            rows.append((arm, int(t), key, label, metric, v, b, pct_change(v, b)))
    return pd.DataFrame(rows, columns=cols)


def question_profile(metrics: pd.DataFrame, out_dir: str | os.PathLike | None = None, *,
                     arms: Sequence[str] | None = None, baseline: str = "baseline",
                     name: str = "question_profile") -> PlotResult:
    """fig:question_complexity: % change from ``baseline`` at the last iteration both arms
    reached, of valid questions (#Q), mean tokens per question, mean distinct numbers per
    question and mean solver acc ('Score'); ours, then the paper's 4B and 8B panels.
    ``data``: one row per (arm, quantity) with both values and the % change."""
    frame = _profile_frame(metrics, arms, baseline)
    labels = [q[2] for q in PROFILE_QUANTITIES]
    pv = paper_values("fig:question_complexity")["data"]
    with figure_style():
        fig, axes = new_figure(1, 3, w=4.2, h=3.2)
        ours = {arm: [float(frame[(frame["arm"] == arm) & (frame["quantity"] == q[0])]
                            ["pct_change"].iloc[0]) for q in PROFILE_QUANTITIES]
                for arm in dict.fromkeys(frame["arm"])}
        pct_change_bars(axes[0, 0], ours, labels)
        t = sorted(set(frame["iteration"]))
        axes[0, 0].set_title(f"Ours (iteration {', '.join(map(str, t)) or '-'})")
        if not ours:
            note(axes[0, 0], "needs the baseline and another arm")
        for ax, model in zip(axes[0, 1:], ("Qwen3-4B", "Qwen3-8B"), strict=True):
            pct_change_bars(ax, {arm: [pv[model][arm][q[0]] for q in PROFILE_QUANTITIES]
                            for arm in ("vd85", "vd75")}, labels)
            ax.set_title(f"Paper {model} (iteration 5)")
        shared_legend(fig, axes)
    return _result(fig, out_dir, name, frame)


def _alpha_ticks(ax, schedule: Mapping[int, float] | None) -> None:
    integer_xaxis(ax)
    if schedule:
        ts = sorted(schedule)
        ax.set_xticks(ts, [f"{t}\nα={schedule[t]:.2f}" for t in ts])


def annealing_figure(accuracy: pd.DataFrame, out_dir: str | os.PathLike | None = None, *,
                     arms: Sequence[str] | None = ("baseline", "vd75", "anneal"),
                     benchmarks: Sequence[str] | None = None,
                     panels: Sequence[str] | None = None,
                     alpha_schedule: Mapping[int, float] | None = None,
                     name: str = "annealing") -> PlotResult:
    """fig:annealing: solver pass@1 (%) per iteration for fixed VD75 vs the 0.75 -> 1.0 anneal
    (and the baseline): ours on top (the mean over ``benchmarks``, default all, then each of
    ``panels``, default MATH500 and OlympiadBench as in the paper, else two of ours), the
    paper's Qwen3-8B panels below. ``accuracy``: ``arm, seed, iteration, benchmark, accuracy``
    with accuracy a fraction; ``alpha_schedule``: iteration -> alpha of the anneal arm, shown
    under the ticks."""
    require_columns(accuracy, ["arm", "seed", "iteration", "benchmark", "accuracy"], "accuracy")
    acc = accuracy.copy()
    if benchmarks is not None:
        acc = acc[acc["benchmark"].isin(list(benchmarks))]
    bms = list(benchmarks) if benchmarks is not None else sorted(set(acc["benchmark"]))
    avg = acc.groupby(["arm", "seed", "iteration"], as_index=False,
                      dropna=False)["accuracy"].mean()
    avg["benchmark"] = "average"
    agg = seed_summary(pd.concat([avg, acc], ignore_index=True),
                       ["arm", "benchmark", "iteration"], "accuracy")
    arms = select_arms(agg["arm"], arms, "annealing_figure")
    pv = paper_values("fig:annealing")
    paper_panels = [("math_avg", "Math avg."), ("math500", "MATH500"),
                    ("olympiadbench", "OlympiadBench")]
    if panels is None:  # the paper's per-benchmark panels when we have them, else two of ours
        panels = [b for b in ("math500", "olympiadbench") if b in bms] or bms[:2]
    avg_title = "mean over " + (", ".join(bms) if len(bms) <= 2 else f"{len(bms)} benchmarks")
    ours_panels = [("average", avg_title), *((b, b) for b in panels)]
    ncols = max(3, len(ours_panels))
    with figure_style():
        fig, axes = new_figure(2, ncols, w=3.8, h=3.2)
        for ax, (key, title) in zip(axes[0], ours_panels, strict=False):
            for arm in arms:
                draw_ours(ax, agg[agg["benchmark"] == key], arm, scale=100.0)
            ax.set(title=f"Ours: {title}", xlabel="Iteration", ylabel="Pass@1 (%)")
            _alpha_ticks(ax, alpha_schedule)
        for ax in axes[0, len(ours_panels):]:
            ax.set_visible(False)
        sched = {int(t): a for t, a in pv["alpha_schedule"]}
        for ax, (key, title) in zip(axes[1], paper_panels, strict=False):
            for arm in ("baseline", "vd75", "anneal"):
                draw_paper(ax, paper_series("fig:annealing", "Qwen3-8B", key, arm), arm,
                           arm_label(arm), alpha=0.85)
            ax.set(title=f"Paper (Qwen3-8B): {title}", xlabel="Iteration",
                   ylabel="Pass@1 (%)")
            _alpha_ticks(ax, sched)
        for ax in axes[1, len(paper_panels):]:
            ax.set_visible(False)
        shared_legend(fig, axes)
    return _result(fig, out_dir, name, agg)


def entropy_figure(entropy: pd.DataFrame, out_dir: str | os.PathLike | None = None, *,
                   arms: Sequence[str] | None = None,
                   name: str = "entropy_trajectory") -> PlotResult:
    """tab:vanilla_entropy (right panel): the single GRPO policy's mean per-token entropy per
    step, mean +- SE band over seeds (left), and the paper's baseline vs VD (alpha 0.95) on
    Qwen3-4B-Base (right). ``entropy``: ``arm, seed, step, entropy``."""
    require_columns(entropy, ["arm", "seed", "step", "entropy"], "entropy")
    agg = seed_summary(entropy, ["arm", "step"], "entropy")
    arms = select_arms(agg["arm"], arms, "entropy_figure")
    with figure_style():
        fig, axes = new_figure(1, 2, w=4.6, h=3.2)
        ax, pax = axes[0]
        for arm in arms:
            draw_ours(ax, agg, arm, x="step", band=True)
        if not arms:
            note(ax, "no entropy logged")
        ax.set(title="Ours: policy entropy", xlabel="GRPO step", ylabel="entropy (nats/token)")
        for arm, lab in (("baseline", "Baseline (α=1.0)"), ("vd95", "VD (α=0.95)")):
            draw_paper(pax, paper_series("tab:vanilla_entropy", "Qwen3-4B-Base", "entropy",
                                         arm), arm, lab, alpha=0.9)
        pax.set(title="Paper: Qwen3-4B-Base on GSM8K", xlabel="GRPO step")
        for a in axes[0]:
            integer_xaxis(a)
            if a.get_legend_handles_labels()[0]:
                a.legend(loc="upper right")
    return _result(fig, out_dir, name, agg)
