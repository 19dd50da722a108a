"""The paper's figures and tables regenerated from vdlib artifacts, with the paper's values beside.

Inputs are tidy pandas frames (aggregation only; nothing here computes a metric):

- loop metrics: :func:`vdlib.metrics.run_metrics.summary_metrics` -> ``arm, seed, iteration,
  metric, value``;
- evaluations: :class:`vdlib.evaluation.EvalSummary` per arm (:func:`load_eval_summary` reads an
  evaluation folder's ``summary.json``);
- entropy trajectories: ``arm, seed, step, entropy``;
- per-iteration solver accuracy: ``arm, seed, iteration, benchmark, accuracy`` (a fraction);
- verification: ``arm, seed, iteration, correct`` (per question) or ``correctness`` (a fraction
  per run and iteration, :func:`load_correctness`), and for :func:`wellposed_table` per-question
  ``acc``, ``well_posed``, ``correct``.

Every statistic is the mean over seeds with its standard error ``std(ddof=1) / sqrt(n)`` (NaN for
one seed). Missing arms are skipped with a warning; missing metrics leave a panel (or cell)
empty. Figures are matplotlib ``Figure`` objects (no pyplot state, no display needed) returned in
a :class:`PlotResult` and, with ``out_dir``, saved as PNG and PDF by :func:`save_figure`
(:func:`show` displays one in a notebook under any backend). Table builders return a
:class:`Table` (``["frame"]``, ``["markdown"]``, ``["latex"]``; ``fmt=`` picks one form); ours
come first, then the paper's rows labelled ``paper <model>: <setting>``. :func:`write_outputs`
writes tables and figures to a report folder. The paper's numbers come from
:mod:`vdlib.paper_values`; docs/plots.md maps each function to its table or figure.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from vdlib.evaluation import EvalSummary, format_table, latex_escape
from vdlib.paper_values import ARM_LABELS, paper_cells, paper_series, paper_values

__all__ = [
    "PlotResult", "Table", "show", "write_outputs", "save_figure", "load_eval_summary",
    "load_correctness", "seed_summary",
    "render_table", "diversity_dynamics", "cumulative_vendi_figure", "phase_ablation_figure",
    "question_profile", "annealing_figure", "entropy_figure", "main_table", "proposer_table",
    "transfer_table", "vanilla_grpo_table", "cross_scale_table", "ood_table", "instruct_table",
    "vocab_util_table", "question_diversity_table", "nli_diversity_table", "correctness_table",
    "wellposed_table", "paper_values",
]

logger = logging.getLogger(__name__)

ARM_ORDER = ["base", "baseline", "vd95", "vd85", "vd85_gen", "vd75", "train_only", "gen_only",
             "anneal", "kl_cov", "clip_cov"]
#: colour, line style, marker per arm; baseline dashed as in the paper
ARM_STYLE = {
    "baseline": ("#787878", "--", "o"), "vd95": ("#DD8452", "-", "s"),
    "vd85": ("#E6B422", "-", "D"), "vd75": ("#DD8452", "-", "s"),
    "train_only": ("#4C72B0", "-", "^"), "gen_only": ("#1F8A70", "-", "D"),
    "anneal": ("#55A868", "-", "v"), "kl_cov": ("#8172B3", ":", "P"),
    "clip_cov": ("#937860", ":", "X"), "vd85_gen": ("#DA8BC3", "-", "*"),
}
_RC = {"font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "xtick.labelsize": 9,
       "ytick.labelsize": 9, "legend.fontsize": 9}
PAPER_ALPHA = 0.45
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


# ----------------------------------------------------------------------------- helpers


def save_figure(fig: Any, out_dir: str | os.PathLike, name: str,
                formats: Sequence[str] = ("png", "pdf"), dpi: int | None = None) -> list[Path]:
    """Save ``fig`` as ``out_dir/name.<fmt>`` for each format, atomically (temp file + rename);
    returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        path = out / f"{name}.{fmt}"
        tmp = out / f".{path.name}.{os.getpid()}.tmp"  # open() keeps the umask's mode
        try:
            with open(tmp, "wb") as fh:
                fig.savefig(fh, format=fmt, bbox_inches="tight", dpi=dpi or DPI)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        paths.append(path)
    logger.info("saved %s", ", ".join(str(p) for p in paths))
    return paths


def load_eval_summary(path: str | os.PathLike) -> EvalSummary:
    """An :class:`EvalSummary` from an evaluation folder (its ``summary.json``) or the file."""
    path = Path(path)
    if path.is_dir():
        path = path / "summary.json"
    return EvalSummary.from_dict(json.loads(path.read_text(encoding="utf-8")))


def load_correctness(run_dirs: str | os.PathLike | Iterable[str | os.PathLike]) -> pd.DataFrame:
    """``arm, seed, iteration, correctness`` from each run's
    ``verification/proposer_correctness.json`` (runs without one are skipped)."""
    from vdlib.metrics.run_metrics import _arm_and_seed, _run_folders

    if isinstance(run_dirs, str | os.PathLike):
        run_dirs = [run_dirs]
    rows = []
    for run in _run_folders(run_dirs):
        f = run / "verification" / "proposer_correctness.json"
        if not f.is_file():
            logger.warning("%s: no verification/proposer_correctness.json; skipped", run)
            continue
        arm, seed = _arm_and_seed(run)
        for t, v in json.loads(f.read_text())["correctness"].items():
            rows.append((arm, seed, int(t), np.nan if v is None else float(v)))
    return pd.DataFrame(rows, columns=["arm", "seed", "iteration", "correctness"])


def seed_summary(frame: pd.DataFrame, by: Sequence[str], value: str = "value") -> pd.DataFrame:
    """``by`` columns plus ``mean``, ``se`` (NaN for one seed) and ``n`` of ``value`` over the
    remaining rows (seeds); NaN values are dropped first."""
    cols = [*by, "mean", "se", "n"]
    d = frame.dropna(subset=[value])
    if d.empty:
        return pd.DataFrame(columns=cols)
    out = d.groupby(list(by), sort=True)[value].agg(mean="mean", std="std", n="count")
    out = out.reset_index()
    out["se"] = out["std"] / np.sqrt(out["n"])
    return out[cols]


def _require(frame: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{what}: the frame lacks columns {missing}; it has {list(frame.columns)}")


def _arm_key(arm: str) -> tuple[int, str]:
    return (ARM_ORDER.index(arm) if arm in ARM_ORDER else len(ARM_ORDER), arm)


def _select_arms(present: Iterable[str], wanted: Sequence[str] | None, what: str) -> list[str]:
    present = set(present)
    if wanted is None:
        return sorted(present, key=_arm_key)
    for a in wanted:
        if a not in present:
            logger.warning("%s: arm %r has no data; skipped", what, a)
    return [a for a in wanted if a in present]


def _style_of(arm: str) -> tuple[str, str, str]:
    if arm in ARM_STYLE:
        return ARM_STYLE[arm]
    import seaborn as sns

    palette = sns.color_palette("deep", 10).as_hex()
    return palette[sum(map(ord, arm)) % 10], "-", "o"


def _label(arm: str) -> str:
    return ARM_LABELS.get(arm, arm)


@contextlib.contextmanager
def _style():
    import matplotlib as mpl
    import seaborn as sns

    with sns.axes_style("whitegrid"), mpl.rc_context(_RC):
        yield


def _figure(nrows: int, ncols: int, w: float = 4.0, h: float = 3.1):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(ncols * w, nrows * h + 0.6), layout="constrained")
    return fig, fig.subplots(nrows, ncols, squeeze=False)


def _int_xaxis(ax) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _draw_ours(ax, agg: pd.DataFrame, arm: str, x: str = "iteration", scale: float = 1.0,
               band: bool = False) -> None:
    d = agg[agg["arm"] == arm].sort_values(x)
    if d.empty:
        return
    color, ls, marker = _style_of(arm)
    y, se = d["mean"].to_numpy(float) * scale, d["se"].to_numpy(float) * scale
    if band:
        ax.plot(d[x], y, color=color, ls=ls, lw=1.5, label=_label(arm),
                marker=marker if len(d) <= 12 else None, ms=4)
        ok = np.isfinite(se)
        ax.fill_between(d[x].to_numpy()[ok], (y - se)[ok], (y + se)[ok], color=color, alpha=0.2,
                        lw=0)
    else:
        ax.errorbar(d[x], y, yerr=np.nan_to_num(se), color=color, ls=ls, marker=marker, ms=5,
                    lw=1.6, capsize=3, label=_label(arm))


def _draw_paper(ax, pts: Sequence[tuple[float, float]], arm: str, label: str,
                alpha: float = PAPER_ALPHA) -> None:
    if not pts:
        return
    color, ls, marker = _style_of(arm)
    xs, ys = zip(*pts, strict=True)
    ax.plot(xs, ys, color=color, ls=ls, marker=marker if len(xs) <= 12 else None, mfc="none",
            ms=4, lw=1.2, alpha=alpha, label=label)


def _note(ax, text: str) -> None:
    ax.text(0.5, 0.96, text, transform=ax.transAxes, ha="center", va="top", fontsize=9,
            color="#555555", style="italic")


def _legend(fig, axes) -> None:
    handles: dict[str, Any] = {}
    for ax in np.ravel(axes):
        for a in (ax, *getattr(ax, "_vd_twins", ())):
            for h, lab in zip(*a.get_legend_handles_labels(), strict=True):
                handles.setdefault(lab, h)
    if handles:  # ours first, then the paper's
        order = sorted(handles, key=lambda lab: lab.startswith("paper"))
        fig.legend([handles[k] for k in order], order, loc="outside lower center",
                   ncol=min(len(handles), 4), frameon=False)


def _finish(fig, out_dir, name: str, data: pd.DataFrame) -> PlotResult:
    paths = save_figure(fig, out_dir, name) if out_dir is not None else []
    return PlotResult(fig, paths, data)


def _metric_agg(metrics: pd.DataFrame, names: Iterable[str]) -> pd.DataFrame:
    _require(metrics, ["arm", "seed", "iteration", "metric", "value"], "loop metrics")
    d = metrics[metrics["metric"].isin(list(names))]
    return seed_summary(d, ["arm", "metric", "iteration"])


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
    agg = _metric_agg(metrics, [p[0] for p in specs])
    arms = _select_arms(agg["arm"], arms, "diversity_dynamics")
    keep = []
    for spec in specs:
        ours = agg[(agg["metric"] == spec[0]) & agg["arm"].isin(arms)]
        has_paper = spec[3] is not None and paper_model is not None
        if not ours.empty or has_paper:
            keep.append((spec, ours, has_paper))
    ncols = min(3, max(1, len(keep)))
    nrows = max(1, math.ceil(len(keep) / ncols))
    with _style():
        fig, axes = _figure(nrows, ncols)
        for ax, ((metric, title, ylabel, paper, twin), ours, has_paper) in zip(
                axes.ravel(), keep, strict=False):
            for arm in arms:
                _draw_ours(ax, ours, arm)
            if ours.empty:
                _note(ax, "not in these runs")
            if has_paper:
                pax = ax
                if twin:
                    pax = ax.twinx()
                    pax.grid(False)
                    pax.tick_params(axis="y", colors="#888888")
                    pax.set_ylabel(f"paper ({paper_model})", color="#888888")
                    ax._vd_twins = (pax,)
                for arm in ("baseline", "vd75"):
                    _draw_paper(pax, paper_series(paper[0], paper_model, paper[1], arm), arm,
                                f"paper {paper_model}: {_label(arm)}")
            if metric == "mean_acc":
                ax.axhline(0.7, color="#999999", ls=":", lw=1)
                ax.text(0.02, 0.7, "τmax", transform=ax.get_yaxis_transform(), va="bottom",
                        fontsize=9, color="#777777")
            ax.set(title=title, xlabel="Iteration", ylabel=ylabel)
            _int_xaxis(ax)
        for ax in axes.ravel()[len(keep):]:
            ax.set_visible(False)
        _legend(fig, axes)
    return _finish(fig, out_dir, name, agg)


def cumulative_vendi_figure(metrics: pd.DataFrame, out_dir: str | os.PathLike | None = None, *,
                            arms: Sequence[str] | None = ("baseline", "vd75"),
                            name: str = "cumulative_vendi") -> PlotResult:
    """fig:embedding_diversity: cumulative Vendi (iterations 1..N pooled) per arm (left) and
    the paper's 4B / 8B baseline and VD75 (right)."""
    agg = _metric_agg(metrics, ["cumulative_vendi"])
    arms = _select_arms(agg["arm"], arms, "cumulative_vendi_figure")
    with _style():
        fig, axes = _figure(1, 2, w=4.6, h=3.4)
        ax, pax = axes[0]
        for arm in arms:
            _draw_ours(ax, agg, arm)
        if not arms:
            _note(ax, "no cumulative Vendi in these runs")
        ax.set(title="Ours: cumulative Vendi ↑", xlabel="Iteration",
               ylabel="effective # distinct questions")
        for model, alpha in (("Qwen3-4B", 0.9), ("Qwen3-8B", 0.45)):
            for arm in ("baseline", "vd75"):
                _draw_paper(pax, paper_series("fig:embedding_diversity", model,
                                              "cumulative_vendi", arm), arm,
                            f"{model} {_label(arm)}", alpha=alpha)
        pax.set(title="Paper: cumulative Vendi ↑", xlabel="Iteration")
        pax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
        for a in axes[0]:
            _int_xaxis(a)
        if arms:
            ax.legend(loc="best")
    return _finish(fig, out_dir, name, agg)


def phase_ablation_figure(metrics: pd.DataFrame, out_dir: str | os.PathLike | None = None, *,
                          arms: Sequence[str] | None = ("baseline", "train_only", "gen_only",
                                                        "vd75"),
                          paper_model: str = "Qwen3-4B",
                          name: str = "phase_ablation") -> PlotResult:
    """fig:embedding_ablations: Vendi, Self-BLEU and novelty per dropout phase (train-only,
    gen-only, both = VD75, baseline); ours on top, the paper's ``paper_model`` below."""
    panels = [("vendi", "Vendi ↑"), ("self_bleu", "Self-BLEU ↓"), ("novelty_rate", "Novelty ↑")]
    agg = _metric_agg(metrics, [m for m, _ in panels])
    arms = _select_arms(agg["arm"], arms, "phase_ablation_figure")
    with _style():
        fig, axes = _figure(2, 3)
        for j, (metric, title) in enumerate(panels):
            ax, pax = axes[0, j], axes[1, j]
            ours = agg[agg["metric"] == metric]
            for arm in arms:
                _draw_ours(ax, ours, arm)
            if ours.empty:
                _note(ax, "not in these runs")
            for arm in ("baseline", "train_only", "gen_only", "vd75"):
                pts = paper_series("fig:embedding_ablations", paper_model, metric, arm)
                _draw_paper(pax, pts, arm, _label(arm), alpha=0.85)
            ax.set(title=f"Ours: {title}", xlabel="Iteration")
            pax.set(title=f"Paper ({paper_model}): {title}", xlabel="Iteration")
            _int_xaxis(ax)
            _int_xaxis(pax)
        _legend(fig, axes)
    return _finish(fig, out_dir, name, agg)


#: fig:question_complexity's four quantities: (paper key, our metric, label)
PROFILE_QUANTITIES = [("num_questions", "valid_questions", "#Q"),
                      ("tokens_per_question", "mean_question_tokens", "Tok/q ↑"),
                      ("distinct_numbers", "mean_distinct_numbers", "Nums ↑"),
                      ("score", "mean_acc", "Score ↓")]


def _pct_change(value: float, base: float) -> float:
    """``100 * (value / base - 1)``; NaN when either is missing or ``base`` is 0.

    >>> _pct_change(3377, 6771)
    -50.12553537143701
    """
    if not (np.isfinite(value) and np.isfinite(base)) or base == 0:
        return float("nan")
    return 100.0 * (value / base - 1.0)


def _profile_frame(metrics: pd.DataFrame, arms: Sequence[str] | None, baseline: str
                   ) -> pd.DataFrame:
    agg = _metric_agg(metrics, [q[1] for q in PROFILE_QUANTITIES])
    cols = ["arm", "iteration", "quantity", "label", "metric", "value", "baseline_value",
            "pct_change"]
    present = set(agg["arm"])
    if baseline not in present:
        logger.warning("question_profile: baseline arm %r has no data", baseline)
        return pd.DataFrame(columns=cols)
    arms = [a for a in _select_arms(present, arms, "question_profile") if a != baseline]
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
            rows.append((arm, int(t), key, label, metric, v, b, _pct_change(v, b)))
    return pd.DataFrame(rows, columns=cols)


def _hbars(ax, groups: Mapping[str, Sequence[float]], labels: Sequence[str]) -> None:
    n = max(1, len(groups))
    height = 0.8 / n
    y = np.arange(len(labels))
    vals = [v for vs in groups.values() for v in vs if np.isfinite(v)] + [0.0]
    for i, (arm, values) in enumerate(groups.items()):
        color = _style_of(arm)[0]
        bars = ax.barh(y + (i - (n - 1) / 2) * height, np.nan_to_num(values), height=height,
                       color=color, label=_label(arm))
        ax.bar_label(bars, labels=[f"{v:+.0f}%" if np.isfinite(v) else "n/a" for v in values],
                     padding=2, fontsize=9)
    lo, hi = min(vals), max(vals)
    pad = 0.35 * max(hi - lo, 10.0)
    ax.set_xlim(lo - pad if lo < 0 else -pad / 3, hi + pad if hi > 0 else pad / 3)
    ax.axvline(0, color="#444444", lw=0.8)
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.set_xlabel("% change from baseline")


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
    with _style():
        fig, axes = _figure(1, 3, w=4.2, h=3.2)
        ours = {arm: [float(frame[(frame["arm"] == arm) & (frame["quantity"] == q[0])]
                            ["pct_change"].iloc[0]) for q in PROFILE_QUANTITIES]
                for arm in dict.fromkeys(frame["arm"])}
        _hbars(axes[0, 0], ours, labels)
        t = sorted(set(frame["iteration"]))
        axes[0, 0].set_title(f"Ours (iteration {', '.join(map(str, t)) or '-'})")
        if not ours:
            _note(axes[0, 0], "needs the baseline and another arm")
        for ax, model in zip(axes[0, 1:], ("Qwen3-4B", "Qwen3-8B"), strict=True):
            _hbars(ax, {arm: [pv[model][arm][q[0]] for q in PROFILE_QUANTITIES]
                        for arm in ("vd85", "vd75")}, labels)
            ax.set_title(f"Paper {model} (iteration 5)")
        _legend(fig, axes)
    return _finish(fig, out_dir, name, frame)


def _alpha_ticks(ax, schedule: Mapping[int, float] | None) -> None:
    _int_xaxis(ax)
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
    _require(accuracy, ["arm", "seed", "iteration", "benchmark", "accuracy"], "accuracy")
    acc = accuracy.copy()
    if benchmarks is not None:
        acc = acc[acc["benchmark"].isin(list(benchmarks))]
    bms = list(benchmarks) if benchmarks is not None else sorted(set(acc["benchmark"]))
    avg = acc.groupby(["arm", "seed", "iteration"], as_index=False,
                      dropna=False)["accuracy"].mean()
    avg["benchmark"] = "average"
    agg = seed_summary(pd.concat([avg, acc], ignore_index=True),
                       ["arm", "benchmark", "iteration"], "accuracy")
    arms = _select_arms(agg["arm"], arms, "annealing_figure")
    pv = paper_values("fig:annealing")
    paper_panels = [("math_avg", "Math avg."), ("math500", "MATH500"),
                    ("olympiadbench", "OlympiadBench")]
    if panels is None:  # the paper's per-benchmark panels when we have them, else two of ours
        panels = [b for b in ("math500", "olympiadbench") if b in bms] or bms[:2]
    avg_title = "mean over " + (", ".join(bms) if len(bms) <= 2 else f"{len(bms)} benchmarks")
    ours_panels = [("average", avg_title), *((b, b) for b in panels)]
    ncols = max(3, len(ours_panels))
    with _style():
        fig, axes = _figure(2, ncols, w=3.8, h=3.2)
        for ax, (key, title) in zip(axes[0], ours_panels, strict=False):
            for arm in arms:
                _draw_ours(ax, agg[agg["benchmark"] == key], arm, scale=100.0)
            ax.set(title=f"Ours: {title}", xlabel="Iteration", ylabel="Pass@1 (%)")
            _alpha_ticks(ax, alpha_schedule)
        for ax in axes[0, len(ours_panels):]:
            ax.set_visible(False)
        sched = {int(t): a for t, a in pv["alpha_schedule"]}
        for ax, (key, title) in zip(axes[1], paper_panels, strict=False):
            for arm in ("baseline", "vd75", "anneal"):
                _draw_paper(ax, paper_series("fig:annealing", "Qwen3-8B", key, arm), arm,
                            _label(arm), alpha=0.85)
            ax.set(title=f"Paper (Qwen3-8B): {title}", xlabel="Iteration",
                   ylabel="Pass@1 (%)")
            _alpha_ticks(ax, sched)
        for ax in axes[1, len(paper_panels):]:
            ax.set_visible(False)
        _legend(fig, axes)
    return _finish(fig, out_dir, name, agg)


def entropy_figure(entropy: pd.DataFrame, out_dir: str | os.PathLike | None = None, *,
                   arms: Sequence[str] | None = None,
                   name: str = "entropy_trajectory") -> PlotResult:
    """tab:vanilla_entropy (right panel): the single GRPO policy's mean per-token entropy per
    step, mean +- SE band over seeds (left), and the paper's baseline vs VD (alpha 0.95) on
    Qwen3-4B-Base (right). ``entropy``: ``arm, seed, step, entropy``."""
    _require(entropy, ["arm", "seed", "step", "entropy"], "entropy")
    agg = seed_summary(entropy, ["arm", "step"], "entropy")
    arms = _select_arms(agg["arm"], arms, "entropy_figure")
    with _style():
        fig, axes = _figure(1, 2, w=4.6, h=3.2)
        ax, pax = axes[0]
        for arm in arms:
            _draw_ours(ax, agg, arm, x="step", band=True)
        if not arms:
            _note(ax, "no entropy logged")
        ax.set(title="Ours: policy entropy", xlabel="GRPO step", ylabel="entropy (nats/token)")
        for arm, lab in (("baseline", "Baseline (α=1.0)"), ("vd95", "VD (α=0.95)")):
            _draw_paper(pax, paper_series("tab:vanilla_entropy", "Qwen3-4B-Base", "entropy",
                                          arm), arm, lab, alpha=0.9)
        pax.set(title="Paper: Qwen3-4B-Base on GSM8K", xlabel="GRPO step")
        for a in axes[0]:
            _int_xaxis(a)
            if a.get_legend_handles_labels()[0]:
                a.legend(loc="upper right")
    return _finish(fig, out_dir, name, agg)


# ----------------------------------------------------------------------------- tables


class Table(dict):
    """A table in three forms: ``["frame"]`` (a DataFrame: ``source`` ours / paper, ``group``,
    ``arm``, ``label``, then value columns with ``<col>_se`` companions), ``["markdown"]`` and
    ``["latex"]`` (a ``tabular``). Displays as Markdown in a notebook."""

    @property
    def frame(self) -> pd.DataFrame:
        return self["frame"]

    def _repr_markdown_(self) -> str:
        return self["markdown"]


def _check_fmt(fmt: str | None) -> None:
    if fmt not in (None, "frame", "markdown", "latex"):
        raise ValueError(f"fmt = {fmt!r}; allowed: None (all three), frame, markdown, latex")


def _cell(mean: float, se: float | None, fmt: str, decimals: int) -> str:
    if mean is None or not np.isfinite(mean):
        return "–" if fmt == "markdown" else "--"
    text = f"{mean:,.{decimals}f}" if abs(mean) >= 1000 else f"{mean:.{decimals}f}"
    if se is not None and np.isfinite(se):
        text += (" ± " if fmt == "markdown" else r" $\pm$ ") + f"{se:.{decimals}f}"
    return text


def render_table(frame: pd.DataFrame, fmt: str = "markdown", decimals: int = 1) -> str:
    """A table builder's frame as Markdown or a LaTeX ``tabular``: the ``label`` column, then
    each value column as ``mean ± se`` (its ``<col>_se`` companion) or ``mean``."""
    if fmt not in ("markdown", "latex"):
        raise ValueError(f"fmt = {fmt!r}; allowed: markdown, latex")
    meta = {"source", "group", "arm", "label", "iteration"}
    cols = [c for c in frame.columns if c not in meta and not str(c).endswith("_se")]
    header = ["Setting", *map(str, cols)]
    rows = [[str(r["label"])] + [_cell(r[c], r.get(f"{c}_se"), fmt, decimals) for c in cols]
            for _, r in frame.iterrows()]
    if fmt == "markdown":
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows]) + "\n"
    lines = [rf"\begin{{tabular}}{{l{'c' * len(cols)}}}", r"\toprule",
             " & ".join(latex_escape(h) for h in header) + r" \\", r"\midrule"]
    lines += [" & ".join([latex_escape(r[0]), *r[1:]]) + r" \\" for r in rows]
    return "\n".join([*lines, r"\bottomrule", r"\end{tabular}"]) + "\n"


def _eval_frame(summaries: Mapping[str, EvalSummary], benchmarks: list[str],
                paper_rows: list[tuple[str, str, dict]]) -> pd.DataFrame:
    recs = []
    for arm, s in summaries.items():
        rec: dict[str, Any] = _ours_rec(arm)
        for b in benchmarks:
            r = s.results.get(b)
            rec[b] = 100 * r.mean if r else np.nan
            rec[f"{b}_se"] = 100 * r.se if r and r.se is not None else np.nan
        has_all = all(b in s.results for b in benchmarks)
        m, se = s.average(benchmarks) if has_all else (np.nan, None)
        rec["avg"], rec["avg_se"] = 100 * m, 100 * se if se is not None else np.nan
        recs.append(rec)
    for g, row, cells in paper_rows:
        rec = {"source": "paper", "group": g, "arm": row, "label": f"paper {g}: {_label(row)}"}
        for c in [*benchmarks, "avg"]:
            v = cells.get(c, {})
            rec[c] = v.get("mean", np.nan)
            rec[f"{c}_se"] = v.get("se") if v.get("se") is not None else np.nan
        recs.append(rec)
    return pd.DataFrame(recs)


def _eval_text(summaries: Mapping[str, EvalSummary], label: str, benchmarks: list[str],
               paper_rows: list[tuple[str, str, dict]], fmt: str) -> str:
    pv = paper_values(label)
    paper_cols = [c for c in pv["columns"] if c != "avg"]
    dash = "–" if fmt == "markdown" else "--"

    def rows(cols: Sequence[str]) -> list[list[str]]:
        return [[f"paper {g}: {_label(row)}",
                 *(_cell(cells[c]["mean"], cells[c]["se"], fmt, 1) if c in cells else dash
                   for c in cols)] for g, row, cells in paper_rows]

    if not summaries:  # no runs: the paper's rows alone
        return _paper_only(rows([*benchmarks, "avg"]), benchmarks, fmt)
    text = format_table(summaries, fmt, benchmarks)
    if not set(benchmarks) & set(paper_cols):  # nothing shared: the paper's table below ours
        head = f"Paper ({label}), its own benchmarks:"
        head = head + "\n\n" if fmt == "markdown" else f"% {head}\n"
        return text + "\n" + head + _paper_only(rows(pv["columns"]), paper_cols, fmt,
                                                 "avg" in pv["columns"])
    extra = rows([*benchmarks, "avg"])
    if fmt == "markdown":
        return text + "".join("| " + " | ".join(r) + " |\n" for r in extra)
    lines = [" & ".join([latex_escape(r[0]), *r[1:]]) + r" \\" for r in extra]
    return text.replace(r"\bottomrule", "\n".join([r"\midrule", *lines, r"\bottomrule"]), 1)


def _eval_table(summaries: Mapping[str, EvalSummary], label: str, groups: Sequence[str],
                fmt: str | None, benchmarks: Sequence[str] | None, paper_columns: bool) -> Any:
    _check_fmt(fmt)
    paper_cols = [c for c in paper_values(label)["columns"] if c != "avg"]
    if benchmarks is None:
        benchmarks = list(dict.fromkeys(b for s in summaries.values() for b in s.results))
        benchmarks = benchmarks or paper_cols
    benchmarks = list(benchmarks)
    if paper_columns:
        benchmarks += [c for c in paper_cols if c not in benchmarks]
    paper_rows = [(g, row, cells) for g in groups for row, cells in paper_cells(label, g).items()]
    if fmt == "frame":
        return _eval_frame(summaries, benchmarks, paper_rows)
    if fmt is not None:
        return _eval_text(summaries, label, benchmarks, paper_rows, fmt)
    return Table(frame=_eval_frame(summaries, benchmarks, paper_rows),
                 markdown=_eval_text(summaries, label, benchmarks, paper_rows, "markdown"),
                 latex=_eval_text(summaries, label, benchmarks, paper_rows, "latex"))


def _paper_only(rows: list[list[str]], benchmarks: Sequence[str], fmt: str,
                avg: bool = True) -> str:
    from vdlib.evaluation import _display

    header = ["Model", *(_display(b) for b in benchmarks)] + (["Avg."] if avg else [])
    if fmt == "markdown":
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows]) + "\n"
    body = [" & ".join([latex_escape(r[0]), *r[1:]]) + r" \\" for r in rows]
    return "\n".join([rf"\begin{{tabular}}{{l{'c' * (len(header) - 1)}}}", r"\toprule",
                      " & ".join(latex_escape(h) for h in header) + r" \\", r"\midrule",
                      *body, r"\bottomrule", r"\end{tabular}"]) + "\n"


def main_table(summaries: Mapping[str, EvalSummary], fmt: str | None = None, *,
               paper_models: Sequence[str] = ("Qwen3-4B", "Qwen3-8B"),
               benchmarks: Sequence[str] | None = None, paper_columns: bool = False) -> Any:
    """tab:vanilla_eval: :func:`vdlib.evaluation.format_table` of ``summaries`` (arm -> solver
    evaluation) with the paper's rows appended (``paper Qwen3-4B: Baseline`` ...), filled
    under the benchmarks both share and Avg.; ``paper_columns=True`` adds the paper's other
    benchmarks as columns (then our rows have no Avg.). ``fmt``: markdown, latex or frame (a
    DataFrame in percent with ``<col>_se`` companions)."""
    return _eval_table(summaries, "tab:vanilla_eval", paper_models, fmt, benchmarks,
                       paper_columns)


def proposer_table(summaries: Mapping[str, EvalSummary], fmt: str | None = None,
                   **kw: Any) -> Any:
    """tab:proposer_eval: the trained proposers' own pass@1, as :func:`main_table`."""
    return _eval_table(summaries, "tab:proposer_eval", ("Qwen3-4B", "Qwen3-8B"), fmt,
                       kw.get("benchmarks"), kw.get("paper_columns", False))


def transfer_table(summaries: Mapping[str, EvalSummary], fmt: str | None = None,
                   **kw: Any) -> Any:
    """tab:curriculum_transfer: a fresh solver trained on each arm's verified curriculum."""
    return _eval_table(summaries, "tab:curriculum_transfer", ("Qwen3-4B-Base",), fmt,
                       kw.get("benchmarks"), kw.get("paper_columns", False))


def vanilla_grpo_table(summaries: Mapping[str, EvalSummary], fmt: str | None = None,
                       **kw: Any) -> Any:
    """tab:vanilla_grpo: single-policy GRPO with and without VD (alpha 0.95)."""
    return _eval_table(summaries, "tab:vanilla_grpo", ("Qwen3-4B-Base",), fmt,
                       kw.get("benchmarks"), kw.get("paper_columns", False))


def cross_scale_table(summaries: Mapping[str, EvalSummary], fmt: str | None = None,
                      **kw: Any) -> Any:
    """tab:cross_scale: 8B proposer -> 4B solver beside the symmetric 4B runs."""
    return _eval_table(summaries, "tab:cross_scale", ("proposer Qwen3-4B", "proposer Qwen3-8B"),
                       fmt, kw.get("benchmarks"), kw.get("paper_columns", False))


def ood_table(summaries: Mapping[str, EvalSummary], fmt: str | None = None, **kw: Any) -> Any:
    """tab:ood: zero-shot out-of-domain benchmarks of the solvers."""
    return _eval_table(summaries, "tab:ood", ("Qwen3-8B",), fmt, kw.get("benchmarks"),
                       kw.get("paper_columns", False))


def instruct_table(summaries: Mapping[str, EvalSummary], fmt: str | None = None,
                   **kw: Any) -> Any:
    """tab:instruct: co-evolution of an instruction-tuned model."""
    return _eval_table(summaries, "tab:instruct", ("Qwen2.5-1.5B-Instruct",), fmt,
                       kw.get("benchmarks"), kw.get("paper_columns", False))


def _out(frame: pd.DataFrame, fmt: str | None, decimals: int = 1) -> Any:
    _check_fmt(fmt)
    if fmt is None:
        return Table(frame=frame, markdown=render_table(frame, "markdown", decimals),
                     latex=render_table(frame, "latex", decimals))
    return frame if fmt == "frame" else render_table(frame, fmt, decimals)


def _paper_block(label: str, make) -> list[dict[str, Any]]:
    """Rows ``{source: paper, group, arm, label, ...make(values)}`` of every group and row."""
    recs = []
    for g, rows in paper_values(label)["data"].items():
        for arm, vals in rows.items():
            recs.append({"source": "paper", "group": g, "arm": arm,
                         "label": f"paper {g}: {_label(arm)}", **make(vals)})
    return recs


def _ours_rec(arm: str, **vals: Any) -> dict[str, Any]:
    return {"source": "ours", "group": "ours", "arm": arm, "label": f"ours: {_label(arm)}",
            **vals}


def _at_last(agg: pd.DataFrame, arm: str, metric: str, t: int | None) -> tuple[float, float,
                                                                                int | None]:
    d = agg[(agg["arm"] == arm) & (agg["metric"] == metric)]
    if d.empty:
        return np.nan, np.nan, None
    t = int(d["iteration"].max()) if t is None else t
    r = d[d["iteration"] == t]
    return (float(r["mean"].iloc[0]), float(r["se"].iloc[0]), t) if len(r) else (np.nan,
                                                                               np.nan, t)


def vocab_util_table(metrics: pd.DataFrame, fmt: str | None = None, *,
                     arms: Sequence[str] | None = ("baseline", "vd75"),
                     iteration: int | None = None) -> Any:
    """tab:vocab_util: unique tokens and valid questions at ``iteration`` (default each arm's
    last) and the % change of unique tokens from the baseline; then the paper's rows."""
    agg = _metric_agg(metrics, ["unique_tokens", "valid_questions"])
    arms = _select_arms(agg["arm"], arms, "vocab_util_table")
    base = _at_last(agg, "baseline", "unique_tokens", iteration)[0]
    recs = []
    for arm in arms:
        u, u_se, t = _at_last(agg, arm, "unique_tokens", iteration)
        q, q_se, _ = _at_last(agg, arm, "valid_questions", iteration)
        recs.append(_ours_rec(arm, iteration=t, unique_tokens=u, unique_tokens_se=u_se,
                              num_questions=q, num_questions_se=q_se,
                              delta_unique_pct=_pct_change(u, base)))
    pv = paper_values("tab:vocab_util")
    for rec in _paper_block("tab:vocab_util", dict):
        b = pv["data"][rec["group"]]["baseline"]["unique_tokens"]
        rec.update(iteration=5, delta_unique_pct=_pct_change(rec["unique_tokens"], b))
        recs.append(rec)
    return _out(pd.DataFrame(recs), fmt, 0)


def question_diversity_table(metrics: pd.DataFrame, fmt: str | None = None, *,
                             arms: Sequence[str] | None = ("baseline", "train_only",
                                                           "gen_only", "vd75")) -> Any:
    """tab:question_diversity: cumulative Vendi of iterations 1..N pooled (columns ``It. 1``,
    ``1-2``, ...) and Growth = cumulative Vendi at the run's last iteration minus iteration 1
    (per seed, then mean +- SE); then the paper's rows."""
    _require(metrics, ["arm", "seed", "iteration", "metric", "value"], "loop metrics")
    cv = metrics[metrics["metric"] == "cumulative_vendi"].dropna(subset=["value"])
    arms = _select_arms(cv["arm"], arms, "question_diversity_table")
    col = lambda t: "It. 1" if t == 1 else f"1-{t}"  # noqa: E731
    growth = []
    for (arm, seed), d in cv.groupby(["arm", "seed"], dropna=False):
        d = d.set_index("iteration")["value"]
        if 1 in d.index and d.index.max() > 1:
            growth.append((arm, seed, d[d.index.max()] - d[1]))
    g = seed_summary(pd.DataFrame(growth, columns=["arm", "seed", "value"]), ["arm"])
    agg = seed_summary(cv, ["arm", "iteration"])
    recs = []
    for arm in arms:
        rec = _ours_rec(arm)
        for _, r in agg[agg["arm"] == arm].iterrows():
            rec[col(int(r["iteration"]))], rec[f"{col(int(r['iteration']))}_se"] = r["mean"], \
                r["se"]
        gr = g[g["arm"] == arm]
        rec["Growth"] = float(gr["mean"].iloc[0]) if len(gr) else np.nan
        rec["Growth_se"] = float(gr["se"].iloc[0]) if len(gr) else np.nan
        recs.append(rec)
    recs += _paper_block("tab:question_diversity", lambda v: {
        **{col(int(t)): x for t, x in v["cumulative_vendi"]}, "Growth": v["growth"]})
    frame = pd.DataFrame(recs)
    meta = ["source", "group", "arm", "label"]
    vals = sorted((c for c in frame.columns if c not in meta and c != "Growth"
                   and not c.endswith("_se")), key=lambda c: int(c.split()[-1].split("-")[-1]))
    order = [x for c in [*vals, "Growth"] for x in (c, f"{c}_se") if x in frame.columns]
    return _out(frame[meta + order], fmt)


def nli_diversity_table(metrics: pd.DataFrame, fmt: str | None = None, *,
                        arms: Sequence[str] | None = ("baseline", "vd75"),
                        iteration: int | None = None) -> Any:
    """tab:nli_diversity: semantic (mean pairwise cosine distance) and logical (NLI, the
    curriculum's ``curriculum_nli_diversity``, else ``nli_diversity``) diversity at the last
    iteration with the % change from the baseline; then the paper's rows."""
    agg = _metric_agg(metrics, ["mean_pairwise_cosine_distance", "curriculum_nli_diversity",
                                "nli_diversity"])
    logical = "curriculum_nli_diversity" if (agg["metric"] == "curriculum_nli_diversity").any() \
        else "nli_diversity"
    arms = _select_arms(agg["arm"], arms, "nli_diversity_table")
    b_sem = _at_last(agg, "baseline", "mean_pairwise_cosine_distance", iteration)[0]
    b_log = _at_last(agg, "baseline", logical, iteration)[0]
    recs = []
    for arm in arms:
        s, s_se, t = _at_last(agg, arm, "mean_pairwise_cosine_distance", iteration)
        lg, l_se, _ = _at_last(agg, arm, logical, iteration)
        recs.append(_ours_rec(arm, iteration=t, semantic=s, semantic_se=s_se,
                              semantic_delta_pct=_pct_change(s, b_sem), logical=lg,
                              logical_se=l_se, logical_delta_pct=_pct_change(lg, b_log)))
    recs += _paper_block("tab:nli_diversity", lambda v: {
        "iteration": 5, "semantic": v["semantic"]["mean"], "semantic_se": np.nan,
        "semantic_delta_pct": v["semantic_delta_pct"], "logical": v["logical"]["mean"],
        "logical_se": v["logical"]["se"], "logical_delta_pct": v["logical_delta_pct"]})
    return _out(pd.DataFrame(recs), fmt, 3)


def correctness_table(correctness: pd.DataFrame, fmt: str | None = None, *,
                      arms: Sequence[str] | None = None) -> Any:
    """tab:correctness: proposer answer correctness (%) per iteration, mean +- SE over seeds.
    ``correctness``: ``arm, seed, iteration`` and either ``correctness`` (a fraction per run
    and iteration, :func:`load_correctness`) or ``correct`` (one boolean per question, or the
    fraction per run and iteration as :func:`vdlib.experiments.correctness_frame` gives)."""
    _require(correctness, ["arm", "seed", "iteration"], "correctness")
    if "correctness" in correctness.columns:
        per_run = correctness
    else:
        _require(correctness, ["correct"], "correctness")
        per_run = correctness.assign(correct=correctness["correct"].astype(float)).groupby(
            ["arm", "seed", "iteration"], as_index=False, dropna=False)["correct"].mean().rename(
            columns={"correct": "correctness"})
    agg = seed_summary(per_run.assign(value=100 * per_run["correctness"].astype(float)),
                       ["arm", "iteration"])
    recs = []
    for arm in _select_arms(agg["arm"], arms, "correctness_table"):
        rec = _ours_rec(arm)
        for _, r in agg[agg["arm"] == arm].iterrows():
            rec[f"It. {int(r['iteration'])}"] = r["mean"]
            rec[f"It. {int(r['iteration'])}_se"] = r["se"]
        recs.append(rec)
    recs += _paper_block("tab:correctness", lambda v: {f"It. {int(t)}": x for t, x in v})
    frame = pd.DataFrame(recs)
    meta = ["source", "group", "arm", "label"]
    its = sorted({c.removesuffix("_se") for c in frame.columns if c.startswith("It. ")},
                 key=lambda c: int(c.split()[1]))
    order = [x for c in its for x in (c, f"{c}_se") if x in frame.columns]
    return _out(frame[meta + order], fmt)


def wellposed_table(composition: pd.DataFrame, fmt: str | None = None, *,
                    vendi: pd.DataFrame | None = None,
                    arms: Sequence[str] | None = ("baseline", "vd75"),
                    band: tuple[float, float] = (0.3, 0.7), iteration: int | None = None) -> Any:
    """tab:wellposed at ``iteration`` (default each run's last): Filter pass (questions in the
    difficulty ``band``), Pass rate (% of generated), Well-posed and Correct (verifier
    judgments of the band's questions), mean +- SE over seeds, and Delta Vendi = arm minus
    baseline on the well-posed (WP) and correct (C) subsets. ``composition``: one row per run
    (``arm, seed, iteration, filter_pass, pass_rate`` as a fraction, ``well_posed``,
    ``correct``, optional ``vendi_wp`` / ``vendi_c``: :func:`vdlib.experiments.composition_frame`)
    or one row per generated question (``arm, seed, iteration, acc`` or ``in_band``,
    ``well_posed``, ``correct``; then ``vendi`` may give ``arm, seed, subset, vendi`` with
    subset ``well_posed`` / ``correct``)."""
    cols = ["filter_pass", "pass_rate", "well_posed", "correct"]
    if "filter_pass" in composition.columns:
        _require(composition, ["arm", "seed", "iteration", *cols], "composition")
        per_run = composition
    else:
        per_run = _runs_from_questions(composition, band)
    per_run = per_run.assign(pass_rate=100 * per_run["pass_rate"].astype(float))
    if vendi is not None:
        wide = vendi.pivot_table(index=["arm", "seed"], columns="subset", values="vendi")
        wide = wide.rename(columns={"well_posed": "vendi_wp", "correct": "vendi_c"})
        per_run = per_run.drop(columns=["vendi_wp", "vendi_c"], errors="ignore").merge(
            wide.reset_index(), on=["arm", "seed"], how="left")
    last = per_run.groupby(["arm", "seed"], dropna=False)["iteration"].transform("max")
    per_run = per_run[per_run["iteration"] == (last if iteration is None else iteration)]
    vmean = {k: per_run.groupby("arm")[k].mean() for k in ("vendi_wp", "vendi_c")
             if k in per_run}
    recs = []
    for arm in _select_arms(per_run["arm"], arms, "wellposed_table"):
        d = per_run[per_run["arm"] == arm]
        rec = _ours_rec(arm, iteration=int(d["iteration"].max()))
        for c in cols:
            x = d[c].astype(float)
            rec[c], rec[f"{c}_se"] = float(x.mean()), float(x.std(ddof=1) / math.sqrt(len(x))) \
                if len(x) > 1 else np.nan
        for key, out in (("vendi_wp", "delta_vendi_wp"), ("vendi_c", "delta_vendi_c")):
            v = vmean.get(key, pd.Series(dtype=float))
            rec[out] = float(v[arm] - v["baseline"]) if arm != "baseline" and arm in v \
                and "baseline" in v else np.nan
        recs.append(rec)
    recs += _paper_block("tab:wellposed", lambda v: {"iteration": 5, **{
        k: (np.nan if x is None else x) for k, x in v.items()}})
    return _out(pd.DataFrame(recs), fmt)


def _runs_from_questions(questions: pd.DataFrame, band: tuple[float, float]) -> pd.DataFrame:
    """Per-question verdicts -> one row per (arm, seed, iteration) with the table's counts."""
    _require(questions, ["arm", "seed", "iteration", "well_posed", "correct"], "questions")
    rows = []
    for (arm, seed, t), d in questions.groupby(["arm", "seed", "iteration"], dropna=False):
        inb = d["in_band"].astype(bool) if "in_band" in d else d["acc"].between(*band)
        rows.append((arm, seed, t, int(inb.sum()), inb.sum() / len(d),
                     int((inb & (d["well_posed"] == True)).sum()),  # noqa: E712 (None: no verdict)
                     int((inb & d["correct"].fillna(False).astype(bool)).sum())))
    return pd.DataFrame(rows, columns=["arm", "seed", "iteration", "filter_pass", "pass_rate",
                                       "well_posed", "correct"])


# ----------------------------------------------------------------------------- output


def show(result: PlotResult) -> Any:
    """Something a notebook displays whatever the matplotlib backend: an
    ``IPython.display.Image`` of the saved PNG (rendered in memory when unsaved)."""
    from IPython.display import Image

    return Image(data=result.png())


def write_outputs(out_dir: str | os.PathLike, *, tables: Mapping[str, Any] | None = None,
                  figures: Mapping[str, PlotResult] | None = None) -> list[Path]:
    """Write each table as ``<name>.md``, ``<name>.tex`` and ``<name>.csv`` (its frame), save
    each figure not saved yet as ``<name>.png/.pdf``, and write each figure's numbers as
    ``<stem>.csv`` next to its PNG; atomic writes. Returns every file, figures included."""
    from vdlib.artifacts import atomic_write_text

    out = Path(out_dir)
    written: list[Path] = []
    for name, table in (tables or {}).items():
        if isinstance(table, pd.DataFrame):
            table = Table(frame=table, markdown=render_table(table), latex="")
        elif isinstance(table, str):
            table = Table(markdown=table)
        for key, ext in (("markdown", "md"), ("latex", "tex")):
            if table.get(key):
                written.append(atomic_write_text(out / f"{name}.{ext}", table[key]))
        if table.get("frame") is not None:
            written.append(atomic_write_text(out / f"{name}.csv",
                                             table["frame"].to_csv(index=False)))
    for name, fig in (figures or {}).items():
        paths = list(fig.paths) or save_figure(fig.figure, out, name)
        written += paths
        written.append(atomic_write_text(paths[0].with_suffix(".csv"),
                                         fig.data.to_csv(index=False)))
    logger.info("wrote %d files to %s", len(written), out)
    return written
