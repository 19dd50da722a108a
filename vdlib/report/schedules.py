"""Alpha schedules side by side (notebook 05): fixed VD75, the linear anneal and the adaptive
schedule of :mod:`vdlib.method.adaptive_alpha` (issue 54), against the baseline.

- :func:`alpha_frame`: the alpha each run used at each iteration (``alpha_train``, ``alpha_gen``
  of its ``metrics.json``) and, for the adaptive arm, the controller's rule and reason (the
  ``alpha_decision`` of its ``proposer_train.json``);
- :func:`alpha_trajectory_figure`: alpha per iteration, one line per run (seed);
- :func:`schedule_metrics_figure`: valid fraction, Self-BLEU, Vendi and cumulative Vendi per
  iteration, mean ± SE over seeds;
- :func:`schedule_tests`: one arm against each reference at one iteration, per metric and per
  benchmark's pass@1, with the tests of docs/RESULTS.md (:func:`vdlib.utils.stats.compare_seeds`:
  Welch's t with its df, the paired t by seed);
- :func:`adaptive_goal`: issue 54's goal at one iteration: a valid fraction within ``margin`` of
  the baseline's while keeping at least ``share`` of VD75's Vendi gain over the baseline.

Loop metrics are the tidy ``arm, seed, iteration, metric, value`` frame of
:func:`vdlib.metrics.run_metrics.summary_metrics` (``Report.loop_metrics()``); accuracies the
``arm, seed, iteration, benchmark, accuracy`` frame of
:func:`vdlib.report.experiments.accuracy_frame`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from vdlib.config import layout
from vdlib.report.drawing import arm_style, draw_ours, figure_style, integer_xaxis, new_figure
from vdlib.report.frames import arm_label, metric_summary, require_columns, select_arms
from vdlib.report.plots import PlotResult, save_figure
from vdlib.report.results_ablations import GOAL_MARGIN, GOAL_SHARE, goal_rows
from vdlib.utils.safe_read import read_json
from vdlib.utils.stats import compare_seeds

__all__ = ["SCHEDULE_ARMS", "SCHEDULE_METRICS", "alpha_frame", "alpha_trajectory_figure",
           "schedule_metrics_figure", "schedule_tests", "adaptive_goal"]

logger = logging.getLogger(__name__)

#: the arms notebook 05 compares, in column order
SCHEDULE_ARMS = ("baseline", "vd75", "anneal", "adaptive")
#: metric -> panel title (lower Self-BLEU = more diverse)
SCHEDULE_METRICS = {"valid_fraction": "Valid questions (fraction)", "self_bleu": "Self-BLEU ↓",
                    "vendi": "Vendi ↑", "cumulative_vendi": "Cumulative Vendi ↑"}
_JSON_MAX_BYTES = 64 << 20


def _result(fig: Any, out_dir: str | os.PathLike | None, name: str,
            data: pd.DataFrame) -> PlotResult:
    return PlotResult(fig, save_figure(fig, out_dir, name) if out_dir is not None else [], data)


def alpha_frame(runs: Mapping[tuple[str, int], str | os.PathLike]) -> pd.DataFrame:
    """``arm, seed, iteration, alpha_train, alpha_gen, rule, reason``: one row per finished
    iteration (``metrics.json``) of each run; ``rule`` and ``reason`` from the adaptive
    controller's decision in ``proposer_train.json`` (empty for a timetable schedule)."""
    rows = []
    for (arm, seed), run in runs.items():
        for t, folder in layout.iteration_dirs(Path(run), layout.METRICS_FILE):
            m = read_json(folder / layout.METRICS_FILE, _JSON_MAX_BYTES)
            decision: dict[str, Any] = {}
            ptrain = folder / layout.PROPOSER_TRAIN_FILE
            if ptrain.is_file():
                decision = read_json(ptrain, _JSON_MAX_BYTES).get("alpha_decision") or {}
            rows.append({"arm": arm, "seed": seed, "iteration": t,
                         "alpha_train": m.get("alpha_train"), "alpha_gen": m.get("alpha_gen"),
                         "rule": decision.get("rule", ""), "reason": decision.get("reason", "")})
    columns = ["arm", "seed", "iteration", "alpha_train", "alpha_gen", "rule", "reason"]
    return pd.DataFrame(rows, columns=columns).sort_values(["arm", "seed", "iteration"],
                                                           ignore_index=True)


def alpha_trajectory_figure(alphas: pd.DataFrame, out_dir: str | os.PathLike | None = None, *,
                            arms: Sequence[str] | None = SCHEDULE_ARMS,
                            name: str = "alpha_trajectory") -> PlotResult:
    """Alpha of the generation phase (``alpha_gen``; ``alpha_train`` where generation is
    unmasked) per iteration, one line per run of each arm in ``arms`` (those present)."""
    require_columns(alphas, ["arm", "seed", "iteration", "alpha_train", "alpha_gen"],
                    "alpha frame")
    arms = select_arms(alphas["arm"].unique(), arms, "alpha_trajectory_figure")
    with figure_style():
        fig, axes = new_figure(1, 1, w=5.2, h=3.4)
        ax = axes[0][0]
        for arm in arms:
            color, ls, marker = arm_style(arm)
            for i, (seed, d) in enumerate(alphas[alphas["arm"] == arm].groupby("seed")):
                d = d.sort_values("iteration")
                alpha = d["alpha_gen"].where(d["alpha_gen"] < 1, d["alpha_train"])
                ax.plot(d["iteration"], alpha, color=color, ls=ls, marker=marker, ms=4,
                        lw=1.3, alpha=0.85, label=arm_label(arm) if i == 0 else None)
                if arm == "adaptive":
                    last = d.iloc[-1]
                    ax.annotate(f"seed {seed}", (last["iteration"], alpha.iloc[-1]),
                                xytext=(4, 0), textcoords="offset points", fontsize=8,
                                color=color)
        ax.set(title="Alpha per iteration (one line per seed)", xlabel="Iteration",
               ylabel="alpha (retention)", ylim=(0.7, 1.02))
        integer_xaxis(ax)
        if arms:
            ax.legend(loc="lower right")
    return _result(fig, out_dir, name, alphas)


def schedule_metrics_figure(metrics: pd.DataFrame, out_dir: str | os.PathLike | None = None, *,
                            arms: Sequence[str] | None = SCHEDULE_ARMS,
                            name: str = "schedule_metrics") -> PlotResult:
    """:data:`SCHEDULE_METRICS` per iteration, mean ± SE over seeds, one panel each."""
    agg = metric_summary(metrics, SCHEDULE_METRICS)
    arms = select_arms(agg["arm"].unique(), arms, "schedule_metrics_figure")
    with figure_style():
        fig, axes = new_figure(1, len(SCHEDULE_METRICS), w=3.4, h=3.1)
        for ax, (metric, title) in zip(axes[0], SCHEDULE_METRICS.items(), strict=True):
            d = agg[agg["metric"] == metric]
            for arm in arms:
                draw_ours(ax, d, arm)
            ax.set(title=title, xlabel="Iteration")
            integer_xaxis(ax)
        if arms:
            axes[0][0].legend(loc="best")
    return _result(fig, out_dir, name, agg)


def _by_seed(frame: pd.DataFrame, arm: str, t: int, metric: str | None = None,
             benchmark: str | None = None) -> dict[Any, float]:
    if benchmark is None:
        d = frame[(frame["arm"] == arm) & (frame["iteration"] == t) & (frame["metric"] == metric)]
        return dict(zip(d["seed"], d["value"].astype(float), strict=True))
    d = frame[(frame["arm"] == arm) & (frame["iteration"] == t) & (frame["benchmark"] == benchmark)]
    return {s: 100.0 * float(v) for s, v in d.groupby("seed")["accuracy"].mean().items()}


def _test_row(a: dict, b: dict, arm: str, ref: str, what: str, t: int) -> dict[str, Any]:
    c = compare_seeds(a, b)
    return {"contrast": f"{arm_label(arm)} − {arm_label(ref)}", "metric": what, "iteration": t,
            "mean_ref": c.mean_a, "mean_arm": c.mean_b, "diff": c.diff,
            "welch_t": c.welch_t, "welch_df": c.welch_df, "welch_p": c.welch_p,
            "paired_t": c.paired_t, "paired_df": c.paired_df, "paired_p": c.paired_p,
            "n_ref": c.n_a, "n_arm": c.n_b}


def schedule_tests(metrics: pd.DataFrame, accuracy: pd.DataFrame | None = None, *,
                   arm: str = "adaptive", references: Sequence[str] = ("vd75", "baseline",
                                                                        "anneal"),
                   iteration: int | None = None) -> pd.DataFrame:
    """``arm`` against each reference present at ``iteration`` (default the last with
    metrics): the :data:`SCHEDULE_METRICS` and, given ``accuracy``, pass@1 (%) per benchmark,
    each with Welch's t (df, p) and the paired t by seed (df, p), as docs/RESULTS.md's
    ablation blocks test. A metric either side lacks is left out."""
    require_columns(metrics, ["arm", "seed", "iteration", "metric", "value"], "loop metrics")
    t = int(iteration if iteration is not None else metrics["iteration"].max())
    rows = []
    for ref in references:
        if ref == arm or ref not in set(metrics["arm"]):
            continue
        for metric in SCHEDULE_METRICS:
            a, b = _by_seed(metrics, ref, t, metric), _by_seed(metrics, arm, t, metric)
            if a and b:
                rows.append(_test_row(a, b, arm, ref, metric, t))
        if accuracy is None or accuracy.empty:
            continue
        for bench in sorted(set(accuracy["benchmark"])):
            a, b = _by_seed(accuracy, ref, t, benchmark=bench), \
                _by_seed(accuracy, arm, t, benchmark=bench)
            if a and b:
                rows.append(_test_row(a, b, arm, ref, f"pass1_{bench}", t))
    return pd.DataFrame(rows)


def adaptive_goal(metrics: pd.DataFrame, *, arm: str = "adaptive", iteration: int | None = None,
                  margin: float = GOAL_MARGIN, share: float = GOAL_SHARE) -> pd.DataFrame:
    """Issue 54's goal at ``iteration`` (default the last) on a metrics frame: the arm's mean
    valid fraction at least the baseline's minus ``margin``, and its Vendi gain over the
    baseline at least ``share`` of VD75's (per-iteration Vendi, the goal's words; cumulative
    Vendi beside it); the rule of docs/RESULTS.md's block
    (:func:`vdlib.report.results_ablations.goal_rows`). One row per quantity: ``value``,
    ``threshold``, ``met`` (None where an arm is missing)."""
    t = int(iteration if iteration is not None else metrics["iteration"].max())

    def mean(a: str, metric: str) -> float | None:
        v = _by_seed(metrics, a, t, metric)
        return sum(v.values()) / len(v) if v else None

    return pd.DataFrame(goal_rows(mean, arm, t, margin, share))
