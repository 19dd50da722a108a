"""The paper's tables of the curriculum itself: how much of the vocabulary the proposer uses
(:func:`vocab_util_table`), how diverse its questions are (:func:`question_diversity_table`,
:func:`nli_diversity_table`), how often its answers are right (:func:`correctness_table`) and
what the final curricula hold (:func:`wellposed_table`). Import them from
:mod:`vdlib.report.tables`.

Inputs are tidy frames (aggregation only; nothing here computes a metric): loop metrics
``arm, seed, iteration, metric, value`` (:func:`vdlib.metrics.run_metrics.summary_metrics`),
correctness ``arm, seed, iteration, correct | correctness``
(:func:`vdlib.report.frames.load_correctness`,
:func:`vdlib.experiments.evaluate.correctness_frame`) and the curricula's composition and
diversity (:mod:`vdlib.report.curriculum_sets`, or one row per question). Per-run frames may
carry a ``group`` (the model scale, :func:`vdlib.report.curriculum_sets.run_scale`): each group
gets its own rows
(``ours <group>: <arm>``), compared with its own baseline. Every statistic is the mean over seeds
with its standard error; each builder returns a :class:`vdlib.report.table_format.Table` (``fmt=``
picks one form), ours first, then the paper's rows.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from vdlib.config.experiment import ScoringConfig
from vdlib.method.curriculum import in_window
from vdlib.report.frames import (
    LOOP_METRIC_COLUMNS,
    arm_label,
    metric_summary,
    pct_change,
    require_columns,
    row_label,
    seed_summary,
    select_arms,
)
from vdlib.report.paper_values import paper_values
from vdlib.report.table_format import ours_row, paper_rows, table_output
from vdlib.utils.stats import mean_and_se

__all__ = ["TAU_MIN", "TAU_MAX", "vocab_util_table", "question_diversity_table",
           "nli_diversity_table", "correctness_table", "wellposed_table", "annealing_table"]

logger = logging.getLogger(__name__)

#: the paper's difficulty window, from the config's defaults (its single source)
TAU_MIN, TAU_MAX = ScoringConfig().tau_min, ScoringConfig().tau_max


def _at_last(agg: pd.DataFrame, arm: str, metric: str, t: int | None) -> tuple[float, float,
                                                                                int | None]:
    """``(mean, se, iteration)`` of ``arm``'s ``metric`` at iteration ``t`` (None: its last)."""
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
    agg = metric_summary(metrics, ["unique_tokens", "valid_questions"])
    arms = select_arms(agg["arm"], arms, "vocab_util_table")
    # one iteration for every arm (default: the last any arm reached); an arm with no valid
    # question there has no unique-token count (NaN), not one from an earlier iteration
    if iteration is None and not agg.empty:
        iteration = int(agg["iteration"].max())
    base = _at_last(agg, "baseline", "unique_tokens", iteration)[0]
    recs = []
    for arm in arms:
        u, u_se, t = _at_last(agg, arm, "unique_tokens", iteration)
        q, q_se, _ = _at_last(agg, arm, "valid_questions", iteration)
        recs.append(ours_row(arm, iteration=t, unique_tokens=u, unique_tokens_se=u_se,
                              num_questions=q, num_questions_se=q_se,
                              delta_unique_pct=pct_change(u, base)))
    pv = paper_values("tab:vocab_util")
    for rec in paper_rows("tab:vocab_util", dict):
        b = pv["data"][rec["group"]]["baseline"]["unique_tokens"]
        rec.update(iteration=5, delta_unique_pct=pct_change(rec["unique_tokens"], b))
        recs.append(rec)
    return table_output(pd.DataFrame(recs), fmt, 0)


def vendi_growth(metrics: pd.DataFrame) -> pd.DataFrame:
    """``arm, seed, iteration, value``: per arm, seed and iteration t > 1, cumulative Vendi at t
    minus at iteration 1 (a run without iteration 1 has none); tab:question_diversity's
    ``Growth`` is the row of the run's last iteration.

    >>> f = pd.DataFrame({"arm": ["a"] * 2, "seed": [0] * 2, "iteration": [1, 3],
    ...                   "metric": ["cumulative_vendi"] * 2, "value": [40.0, 46.5]})
    >>> vendi_growth(f).values.tolist()
    [['a', 0, 3, 6.5]]
    """
    cv = metrics[metrics["metric"] == "cumulative_vendi"].dropna(subset=["value"])
    rows = []
    for (arm, seed), d in cv.groupby(["arm", "seed"], sort=True):
        d = d.set_index("iteration")["value"]
        if 1 in d.index:
            rows += [(arm, seed, t, float(d[t] - d[1])) for t in sorted(d.index) if t > 1]
    return pd.DataFrame(rows, columns=["arm", "seed", "iteration", "value"])


def question_diversity_table(metrics: pd.DataFrame, fmt: str | None = None, *,
                             arms: Sequence[str] | None = ("baseline", "train_only",
                                                           "gen_only", "vd75")) -> Any:
    """tab:question_diversity: cumulative Vendi of iterations 1..N pooled (columns ``It. 1``,
    ``1-2``, ...) and Growth = cumulative Vendi at the run's last iteration minus iteration 1
    (per seed, then mean +- SE); then the paper's rows."""
    require_columns(metrics, LOOP_METRIC_COLUMNS, "loop metrics")
    cv = metrics[metrics["metric"] == "cumulative_vendi"].dropna(subset=["value"])
    arms = select_arms(cv["arm"], arms, "question_diversity_table")
    col = lambda t: "It. 1" if t == 1 else f"1-{t}"  # noqa: E731
    growth = vendi_growth(cv)
    last = growth.groupby(["arm", "seed"])["iteration"].transform("max") == growth["iteration"]
    g = seed_summary(growth[last], ["arm"])
    agg = seed_summary(cv, ["arm", "iteration"])
    recs = []
    for arm in arms:
        rec = ours_row(arm)
        for _, r in agg[agg["arm"] == arm].iterrows():
            rec[col(int(r["iteration"]))], rec[f"{col(int(r['iteration']))}_se"] = r["mean"], \
                r["se"]
        gr = g[g["arm"] == arm]
        rec["Growth"] = float(gr["mean"].iloc[0]) if len(gr) else np.nan
        rec["Growth_se"] = float(gr["se"].iloc[0]) if len(gr) else np.nan
        recs.append(rec)
    recs += paper_rows("tab:question_diversity", lambda v: {
        **{col(int(t)): x for t, x in v["cumulative_vendi"]}, "Growth": v["growth"]})
    frame = pd.DataFrame(recs)
    meta = ["source", "group", "arm", "label"]
    vals = sorted((c for c in frame.columns if c not in meta and c != "Growth"
                   and not c.endswith("_se")), key=lambda c: int(c.split()[-1].split("-")[-1]))
    order = [x for c in [*vals, "Growth"] for x in (c, f"{c}_se") if x in frame.columns]
    return table_output(frame[meta + order], fmt)


#: tab:nli_diversity's values (:func:`vdlib.report.curriculum_sets.set_diversity`): the paper's two
#: columns, then the robustness checks (encoder swap, unidirectional NLI)
NLI_TABLE_VALUES = ("semantic", "logical", "semantic_swap", "logical_unidirectional")


def _ours(group: str, arm: str, **values: Any) -> dict[str, Any]:
    """Our row of ``arm`` in ``group`` (``ours`` = no group: :func:`ours_row`)."""
    if group == "ours":
        return ours_row(arm, **values)
    return {"source": "ours", "group": group, "arm": arm,
            "label": f"ours {group}: {row_label(arm)}", **values}


def _groups(frame: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(frame["group"])) if "group" in frame else ["ours"]


def nli_diversity_table(metrics: pd.DataFrame, fmt: str | None = None, *,
                        arms: Sequence[str] | None = ("baseline", "vd75"),
                        iteration: int | None = None) -> Any:
    """tab:nli_diversity: semantic (mean pairwise cosine distance) and logical (NLI) diversity
    with the % change from the baseline; then the paper's rows.

    ``metrics``: one row per run (:func:`vdlib.report.curriculum_sets.diversity_frame`:
    ``group, arm, seed, iteration`` and the :data:`NLI_TABLE_VALUES` with ``<name>_se``, the
    bootstrap SE): per group and arm the mean over seeds, its SE ``sqrt(sum se_i^2) / k`` (the
    bootstrap SE itself for one seed), the robustness columns beside the paper's two. Or loop
    metrics (``mean_pairwise_cosine_distance`` and ``curriculum_nli_diversity``, else
    ``nli_diversity``, at ``iteration``, default the last; SE over seeds)."""
    if "semantic" not in metrics.columns:
        return _nli_table_from_loop(metrics, fmt, arms, iteration)
    require_columns(metrics, ["arm", "seed", "iteration", "semantic", "logical"], "diversity")
    recs = []
    for group in _groups(metrics):
        d = metrics[metrics["group"] == group] if "group" in metrics else metrics
        agg: dict[str, dict[str, tuple[float, float]]] = {}
        for arm, r in d.groupby("arm"):
            agg[arm] = {}
            for c in NLI_TABLE_VALUES:
                x = pd.to_numeric(r[c], errors="coerce") if c in r else pd.Series(dtype=float)
                se = pd.to_numeric(r[f"{c}_se"], errors="coerce") if f"{c}_se" in r \
                    else pd.Series(np.nan, index=x.index)
                ok = x.notna()
                agg[arm][c] = ((float(x[ok].mean()), float(np.sqrt((se[ok] ** 2).sum())
                                                           / ok.sum()))
                               if ok.any() else (np.nan, np.nan))
        for arm in select_arms(agg, arms, "nli_diversity_table"):
            rec = _ours(group, arm, iteration=int(d[d["arm"] == arm]["iteration"].max()),
                        n=float(pd.to_numeric(d[d["arm"] == arm].get("n"),
                                              errors="coerce").mean()))
            for c in NLI_TABLE_VALUES:
                mean, se = agg[arm][c]
                base = agg.get("baseline", {}).get(c, (np.nan, np.nan))[0]
                rec.update({c: mean, f"{c}_se": se, f"{c}_delta_pct": pct_change(mean, base)})
            recs.append(rec)
    recs += paper_rows("tab:nli_diversity", _paper_nli)
    return table_output(pd.DataFrame(recs), fmt, 3)


def _paper_nli(v: dict[str, Any]) -> dict[str, Any]:
    return {"iteration": 5, "semantic": v["semantic"]["mean"], "semantic_se": np.nan,
            "semantic_delta_pct": v["semantic_delta_pct"], "logical": v["logical"]["mean"],
            "logical_se": v["logical"]["se"], "logical_delta_pct": v["logical_delta_pct"]}


def _nli_table_from_loop(metrics: pd.DataFrame, fmt: str | None, arms: Sequence[str] | None,
                         iteration: int | None) -> Any:
    """nli_diversity_table from loop metrics (the earlier form; no bootstrap)."""
    agg = metric_summary(metrics, ["mean_pairwise_cosine_distance", "curriculum_nli_diversity",
                                "nli_diversity"])
    logical = "curriculum_nli_diversity" if (agg["metric"] == "curriculum_nli_diversity").any() \
        else "nli_diversity"
    arms = select_arms(agg["arm"], arms, "nli_diversity_table")
    b_sem = _at_last(agg, "baseline", "mean_pairwise_cosine_distance", iteration)[0]
    b_log = _at_last(agg, "baseline", logical, iteration)[0]
    recs = []
    for arm in arms:
        s, s_se, t = _at_last(agg, arm, "mean_pairwise_cosine_distance", iteration)
        lg, l_se, _ = _at_last(agg, arm, logical, iteration)
        recs.append(ours_row(arm, iteration=t, semantic=s, semantic_se=s_se,
                              semantic_delta_pct=pct_change(s, b_sem), logical=lg,
                              logical_se=l_se, logical_delta_pct=pct_change(lg, b_log)))
    recs += paper_rows("tab:nli_diversity", _paper_nli)
    return table_output(pd.DataFrame(recs), fmt, 3)


def correctness_table(correctness: pd.DataFrame, fmt: str | None = None, *,
                      arms: Sequence[str] | None = None) -> Any:
    """tab:correctness: proposer answer correctness (%) per iteration, mean +- SE over seeds.
    ``correctness``: ``arm, seed, iteration`` and either ``correctness`` (a fraction per run
    and iteration, :func:`load_correctness`) or ``correct`` (one boolean per question, or the
    fraction per run and iteration as :func:`vdlib.experiments.evaluate.correctness_frame`
    gives)."""
    require_columns(correctness, ["arm", "seed", "iteration"], "correctness")
    if "correctness" in correctness.columns:
        per_run = correctness
    else:
        require_columns(correctness, ["correct"], "correctness")
        per_run = correctness.assign(correct=correctness["correct"].astype(float)).groupby(
            ["arm", "seed", "iteration"], as_index=False, dropna=False)["correct"].mean().rename(
            columns={"correct": "correctness"})
    agg = seed_summary(per_run.assign(value=100 * per_run["correctness"].astype(float)),
                       ["arm", "iteration"])
    recs = []
    for arm in select_arms(agg["arm"], arms, "correctness_table"):
        rec = ours_row(arm)
        for _, r in agg[agg["arm"] == arm].iterrows():
            rec[f"It. {int(r['iteration'])}"] = r["mean"]
            rec[f"It. {int(r['iteration'])}_se"] = r["se"]
        recs.append(rec)
    recs += paper_rows("tab:correctness", lambda v: {f"It. {int(t)}": x for t, x in v})
    frame = pd.DataFrame(recs)
    meta = ["source", "group", "arm", "label"]
    its = sorted({c.removesuffix("_se") for c in frame.columns if c.startswith("It. ")},
                 key=lambda c: int(c.split()[1]))
    order = [x for c in its for x in (c, f"{c}_se") if x in frame.columns]
    return table_output(frame[meta + order], fmt)


def wellposed_table(composition: pd.DataFrame, fmt: str | None = None, *,
                    vendi: pd.DataFrame | None = None,
                    arms: Sequence[str] | None = ("baseline", "vd75"),
                    band: tuple[float, float] = (TAU_MIN, TAU_MAX),
                    iteration: int | None = None) -> Any:
    """tab:wellposed at ``iteration`` (default each run's last): Filter pass (questions in the
    difficulty ``band``), Pass rate (% of generated), Well-posed and Correct (verifier
    judgments of the band's questions), mean +- SE over seeds, and Delta Vendi = arm minus
    baseline on the well-posed (WP) and correct (C) subsets, and Delta NLI (WP), the same gap of
    the well-posed subset's NLI diversity (the paper gives it in the text of App. "Curriculum
    diversity controlling for correctness": +0.12 at 4B, +0.03 at 8B). ``composition``: one row
    per run (``arm, seed, iteration, filter_pass, pass_rate`` as a fraction, ``well_posed``,
    ``correct``, optional ``group``, ``vendi_wp`` / ``vendi_c`` / ``nli_wp``:
    :func:`vdlib.report.curriculum_sets.composition_frame`)
    or one row per generated question (``arm, seed, iteration, acc`` or ``in_band``,
    ``well_posed``, ``correct``; then ``vendi`` may give ``arm, seed, subset, vendi`` with
    subset ``well_posed`` / ``correct``)."""
    cols = ["filter_pass", "pass_rate", "well_posed", "correct"]
    if "filter_pass" in composition.columns:
        require_columns(composition, ["arm", "seed", "iteration", *cols], "composition")
        per_run = composition
    else:
        per_run = _runs_from_questions(composition, band)
    per_run = per_run.assign(pass_rate=100 * per_run["pass_rate"].astype(float))
    if vendi is not None:
        wide = vendi.pivot_table(index=["arm", "seed"], columns="subset", values="vendi")
        wide = wide.rename(columns={"well_posed": "vendi_wp", "correct": "vendi_c"})
        per_run = per_run.drop(columns=["vendi_wp", "vendi_c"], errors="ignore").merge(
            wide.reset_index(), on=["arm", "seed"], how="left")
    if "group" not in per_run:
        per_run = per_run.assign(group="ours")
    last = per_run.groupby(["group", "arm", "seed"], dropna=False)["iteration"].transform("max")
    per_run = per_run[per_run["iteration"] == (last if iteration is None else iteration)]
    deltas = (("vendi_wp", "delta_vendi_wp"), ("vendi_c", "delta_vendi_c"),
              ("nli_wp", "delta_nli_wp"))
    recs = []
    for group in _groups(per_run):
        g = per_run[per_run["group"] == group]
        vmean = {k: pd.to_numeric(g[k], errors="coerce").groupby(g["arm"]).mean()
                 for k, _ in deltas if k in g}
        for arm in select_arms(g["arm"], arms, "wellposed_table"):
            d = g[g["arm"] == arm]
            rec = _ours(group, arm, iteration=int(d["iteration"].max()))
            for c in cols:
                mean, se = mean_and_se(d[c].astype(float).tolist(), ddof=1)  # no paper SE
                rec[c], rec[f"{c}_se"] = mean, np.nan if se is None else se
            for key, out in deltas:
                v = vmean.get(key, pd.Series(dtype=float))
                rec[out] = float(v[arm] - v["baseline"]) if arm != "baseline" and arm in v \
                    and "baseline" in v else np.nan
            recs.append(rec)
    nli_wp = paper_values("tab:wellposed")["text_values"]["delta_nli_wp"]
    for rec in paper_rows("tab:wellposed", lambda v: {"iteration": 5, **{
            k: (np.nan if x is None else x) for k, x in v.items()}}):
        rec["delta_nli_wp"] = nli_wp.get(rec["group"], np.nan) if rec["arm"] != "baseline" \
            else np.nan
        recs.append(rec)
    return table_output(pd.DataFrame(recs), fmt, 2)  # 2 places: the NLI gaps are 0.12 / 0.03


def _runs_from_questions(questions: pd.DataFrame, band: tuple[float, float]) -> pd.DataFrame:
    """Per-question verdicts -> one row per (arm, seed, iteration) with the table's counts."""
    require_columns(questions, ["arm", "seed", "iteration", "well_posed", "correct"], "questions")
    rows = []
    for (arm, seed, t), d in questions.groupby(["arm", "seed", "iteration"], dropna=False):
        inb = d["in_band"].astype(bool) if "in_band" in d else \
            d["acc"].map(lambda a: in_window(None if pd.isna(a) else a, *band))
        rows.append((arm, seed, t, int(inb.sum()), inb.sum() / len(d),
                     int((inb & (d["well_posed"] == True)).sum()),  # noqa: E712 (None: no verdict)
                     int((inb & d["correct"].fillna(False).astype(bool)).sum())))
    return pd.DataFrame(rows, columns=["arm", "seed", "iteration", "filter_pass", "pass_rate",
                                       "well_posed", "correct"])


def annealing_table(accuracy: pd.DataFrame, fmt: str | None = None, *,
                    arms: Sequence[str] | None = ("baseline", "vd75", "anneal"),
                    benchmarks: Sequence[str] | None = None) -> Any:
    """fig:annealing as numbers: solver pass@1 (%) averaged over ``benchmarks`` (default the
    figure's math average, MATH500, GSM8K, OlympiadBench and Minerva, where present, else all)
    per iteration (``It. 0`` = the starting checkpoint), mean +- SE over seeds; then the paper's
    Qwen3-8B math-average rows (baseline, VD75 fixed, VD75 anneal; iterations 1-5). The
    benchmarks averaged are logged.
    ``accuracy``: ``arm, seed, iteration, benchmark, accuracy`` (a fraction;
    :func:`vdlib.report.experiments.accuracy_frame`)."""
    require_columns(accuracy, ["arm", "seed", "iteration", "benchmark", "accuracy"], "accuracy")
    pv = paper_values("fig:annealing")
    present = list(dict.fromkeys(accuracy["benchmark"]))
    bms = list(benchmarks) if benchmarks is not None else (
        [b for b in pv["math_avg_benchmarks"] if b in present] or present)
    acc = accuracy[accuracy["benchmark"].isin(bms)]
    logger.info("annealing_table: pass@1 averaged over %s", ", ".join(bms))
    avg = acc.groupby(["arm", "seed", "iteration"], as_index=False, dropna=False)[
        "accuracy"].mean()
    agg = seed_summary(avg.assign(value=100 * avg["accuracy"]), ["arm", "iteration"])
    recs = []
    for arm in select_arms(agg["arm"], arms, "annealing_table"):
        rec = ours_row(arm)
        for _, r in agg[agg["arm"] == arm].sort_values("iteration").iterrows():
            rec[f"It. {int(r['iteration'])}"], rec[f"It. {int(r['iteration'])}_se"] = \
                r["mean"], r["se"]
        recs.append(rec)
    for group, panels in pv["data"].items():
        for arm, pts in panels["math_avg"].items():
            recs.append({"source": "paper", "group": group, "arm": arm,
                         "label": f"paper {group}: {arm_label(arm)}",
                         **{f"It. {int(t)}": y for t, y in pts}})
    frame = pd.DataFrame(recs)
    its = sorted({c.removesuffix("_se") for c in frame.columns if c.startswith("It. ")},
                 key=lambda c: int(c.split()[1]))
    order = [x for c in its for x in (c, f"{c}_se") if x in frame.columns]
    return table_output(frame[["source", "group", "arm", "label", *order]], fmt)
