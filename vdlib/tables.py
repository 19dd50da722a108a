"""The paper's tables regenerated from vdlib artifacts, with the paper's rows below ours.

Inputs are tidy pandas frames or evaluation summaries (aggregation only; nothing here computes
a metric):

- evaluations: ``{row: EvalSummary}`` (:func:`load_eval_summary` reads an evaluation folder's
  ``summary.json``); rows keyed by a vdlib arm name (``vd85``), or ``<prefix>: <arm>``, are
  shown under the arm's display name (:data:`vdlib.paper_values.ARM_LABELS`), other keys as
  they are;
- loop metrics: :func:`vdlib.metrics.run_metrics.summary_metrics` -> ``arm, seed, iteration,
  metric, value``;
- verification: ``arm, seed, iteration, correct`` (per question) or ``correctness`` (a fraction
  per run and iteration, :func:`load_correctness`), and for :func:`wellposed_table` per-question
  ``acc``, ``well_posed``, ``correct`` or one row per run.

Every statistic is the mean over seeds with its standard error ``std(ddof=1) / sqrt(n)`` (NaN for
one seed; :func:`seed_summary`). Missing arms are skipped with a warning; missing metrics leave a
cell empty. Table builders return a :class:`Table` (``["frame"]``, ``["markdown"]``,
``["latex"]``; ``fmt=`` picks one form); ours come first, then the paper's rows labelled
``paper <model>: <setting>``. The paper's numbers come from :mod:`vdlib.paper_values`.

The loading and aggregation helpers (arm order, labels, per-seed summaries) are shared with
:mod:`vdlib.plots`, which imports this module (never the reverse) and re-exports its public
names; docs/plots.md maps each function to its table.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from vdlib.config import ScoringConfig
from vdlib.curriculum import in_window
from vdlib.evaluation import EvalSummary, format_table, latex_escape
from vdlib.paper_values import ARM_LABELS, paper_cells, paper_values
from vdlib.stats import grouped_mean_se, mean_and_se

__all__ = [
    "Table", "render_table", "load_eval_summary", "load_correctness", "seed_summary",
    "main_table", "proposer_table", "transfer_table", "vanilla_grpo_table", "cross_scale_table",
    "ood_table", "instruct_table", "vocab_util_table", "question_diversity_table",
    "nli_diversity_table", "correctness_table", "wellposed_table",
]

logger = logging.getLogger(__name__)

#: the paper's difficulty window, from the config's defaults (its single source)
TAU_MIN, TAU_MAX = ScoringConfig().tau_min, ScoringConfig().tau_max

ARM_ORDER = ["base", "baseline", "vd95", "vd85", "vd85_gen", "vd75", "train_only", "gen_only",
             "anneal", "kl_cov", "clip_cov"]


# -------------------------------------------------- loading and aggregation (shared with plots)


def load_eval_summary(path: str | os.PathLike) -> EvalSummary:
    """An :class:`EvalSummary` from an evaluation folder (its ``summary.json``) or the file."""
    path = Path(path)
    if path.is_dir():
        path = path / "summary.json"
    return EvalSummary.from_dict(json.loads(path.read_text(encoding="utf-8")))


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
        for t, v in json.loads(f.read_text())["correctness"].items():
            rows.append((arm, seed, int(t), np.nan if v is None else float(v)))
    return pd.DataFrame(rows, columns=["arm", "seed", "iteration", "correctness"])


def seed_summary(frame: pd.DataFrame, by: Sequence[str], value: str = "value") -> pd.DataFrame:
    """``by`` columns plus ``mean``, ``se`` (NaN for one seed) and ``n`` of ``value`` over the
    remaining rows (seeds); NaN values are dropped first."""
    return grouped_mean_se(frame, by, value)


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


def _label(arm: str) -> str:
    return ARM_LABELS.get(arm, arm)


def _row_label(key: str) -> str:
    """A table row's display label: a vdlib arm name (``vd85`` -> ``VD85``), or the arm part of
    ``<prefix>: <arm>`` (``symmetric: baseline`` -> ``symmetric: Baseline``); other keys
    (``Base (no training)``) as they are.

    >>> _row_label("kl_cov"), _row_label("cross-scale: vd85_gen"), _row_label("Base (no training)")
    ('KL-Cov', 'cross-scale: VD85 (gen-only)', 'Base (no training)')
    """
    if key in ARM_LABELS:
        return ARM_LABELS[key]
    prefix, sep, arm = key.rpartition(": ")
    return f"{prefix}{sep}{ARM_LABELS[arm]}" if sep and arm in ARM_LABELS else key


def _relabel(summaries: Mapping[str, EvalSummary]) -> dict[str, EvalSummary]:
    """``summaries`` keyed by :func:`_row_label`, in order; keys whose labels coincide (``base``
    beside ``Base (no training)``) keep their own names, so no row is lost."""
    labels = [_row_label(k) for k in summaries]
    dup = {lab for lab in labels if labels.count(lab) > 1}
    return {k if lab in dup else lab: s
            for lab, (k, s) in zip(labels, summaries.items(), strict=True)}


def _metric_agg(metrics: pd.DataFrame, names: Iterable[str]) -> pd.DataFrame:
    _require(metrics, ["arm", "seed", "iteration", "metric", "value"], "loop metrics")
    d = metrics[metrics["metric"].isin(list(names))]
    return seed_summary(d, ["arm", "metric", "iteration"])


def _pct_change(value: float, base: float) -> float:
    """``100 * (value / base - 1)``; NaN when either is missing or ``base`` is 0.

    >>> _pct_change(3377, 6771)
    -50.12553537143701
    """
    if not (np.isfinite(value) and np.isfinite(base)) or base == 0:
        return float("nan")
    return 100.0 * (value / base - 1.0)


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
    text = format_table(_relabel(summaries), fmt, benchmarks)  # arm keys -> display labels
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
    from vdlib.evaluation import display_name

    header = ["Model", *(display_name(b) for b in benchmarks)] + (["Avg."] if avg else [])
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
    return {"source": "ours", "group": "ours", "arm": arm, "label": f"ours: {_row_label(arm)}",
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
    # one iteration for every arm (default: the last any arm reached); an arm with no valid
    # question there has no unique-token count (NaN), not one from an earlier iteration
    if iteration is None and not agg.empty:
        iteration = int(agg["iteration"].max())
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
                    band: tuple[float, float] = (TAU_MIN, TAU_MAX),
                    iteration: int | None = None) -> Any:
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
            mean, se = mean_and_se(x.tolist())
            rec[c], rec[f"{c}_se"] = mean, np.nan if se is None else se
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
        inb = d["in_band"].astype(bool) if "in_band" in d else \
            d["acc"].map(lambda a: in_window(None if pd.isna(a) else a, *band))
        rows.append((arm, seed, t, int(inb.sum()), inb.sum() / len(d),
                     int((inb & (d["well_posed"] == True)).sum()),  # noqa: E712 (None: no verdict)
                     int((inb & d["correct"].fillna(False).astype(bool)).sum())))
    return pd.DataFrame(rows, columns=["arm", "seed", "iteration", "filter_pass", "pass_rate",
                                       "well_posed", "correct"])
