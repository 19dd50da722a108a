"""The paper's tables regenerated from vdlib artifacts, with the paper's rows below ours.

This module is where every table is imported from. It holds the evaluation tables of the
paper's main results (pass@1 per benchmark: :func:`main_table`, :func:`proposer_table`,
:func:`transfer_table`, :func:`vanilla_grpo_table`, :func:`cross_scale_table`,
:func:`ood_table`, :func:`instruct_table`); the tables of the curriculum itself (vocabulary,
diversity, correctness, composition) live in :mod:`vdlib.report.curriculum_tables`, the table forms
in :mod:`vdlib.report.table_format` and the loaders in :mod:`vdlib.report.frames`, and all of them
are importable from here (``from vdlib.report import tables; tables.wellposed_table(...)``).

Inputs are tidy pandas frames or evaluation summaries (aggregation only; nothing here computes
a metric):

- evaluations: ``{row: EvalSummary}`` (:func:`load_eval_summary` reads an evaluation folder's
  ``summary.json``); rows keyed by a vdlib arm name (``vd85``), or ``<prefix>: <arm>``, are
  shown under the arm's display name (:data:`vdlib.report.paper_values.ARM_LABELS`), other keys as
  they are;
- loop metrics: :func:`vdlib.metrics.run_metrics.summary_metrics` -> ``arm, seed, iteration,
  metric, value``;
- verification: ``arm, seed, iteration, correct`` (per question) or ``correctness`` (a fraction
  per run and iteration, :func:`load_correctness`), and for :func:`wellposed_table` per-question
  ``acc``, ``well_posed``, ``correct`` or one row per run.

Every statistic is the mean over seeds with its standard error ``std(ddof=0) / sqrt(n)`` (NaN for
one seed; :func:`seed_summary`). Missing arms are skipped with a warning; missing metrics leave a
cell empty. Table builders return a :class:`Table` (``["frame"]``, ``["markdown"]``,
``["latex"]``; ``fmt=`` picks one form); ours come first, then the paper's rows labelled
``paper <model>: <setting>``. The paper's numbers come from :mod:`vdlib.report.paper_values`;
docs/plots.md maps each function to its table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from vdlib.evaluation import EvalSummary, format_table, latex_escape
from vdlib.report.curriculum_tables import (
    TAU_MAX,
    TAU_MIN,
    annealing_table,
    correctness_table,
    nli_diversity_table,
    question_diversity_table,
    vocab_util_table,
    wellposed_table,
)
from vdlib.report.frames import (
    arm_label,
    load_correctness,
    load_eval_summary,
    row_label,
    seed_summary,
)
from vdlib.report.paper_values import paper_cells, paper_values
from vdlib.report.table_format import (
    Table,
    check_fmt,
    format_cell,
    ours_row,
    render_table,
    table_output,
)

__all__ = [
    "Table", "render_table", "load_eval_summary", "load_correctness", "seed_summary",
    "main_table", "proposer_table", "transfer_table", "vanilla_grpo_table", "cross_scale_table",
    "ood_table", "judged_table", "OOD_COLUMNS", "olympiad_note", "pooling_note_of",
    "instruct_table",
    "vocab_util_table", "question_diversity_table",
    "nli_diversity_table", "correctness_table", "wellposed_table", "annealing_table",
    "TAU_MIN", "TAU_MAX",
]

#: one paper row: (group, row key, cells ``{column: {mean, se}}``)
PaperRow = tuple[str, str, dict]


def _relabel(summaries: Mapping[str, EvalSummary]) -> dict[str, EvalSummary]:
    """``summaries`` keyed by :func:`vdlib.report.frames.row_label`, in order; keys whose labels
    coincide (``base`` beside ``Base (no training)``) keep their own names, so no row is lost."""
    labels = [row_label(k) for k in summaries]
    dup = {lab for lab in labels if labels.count(lab) > 1}
    return {k if lab in dup else lab: s
            for lab, (k, s) in zip(labels, summaries.items(), strict=True)}


def _eval_frame(summaries: Mapping[str, EvalSummary], benchmarks: list[str],
                paper_rows: list[PaperRow]) -> pd.DataFrame:
    recs = []
    for arm, s in summaries.items():
        rec: dict[str, Any] = ours_row(arm)
        for b in benchmarks:
            r = s.results.get(b)
            rec[b] = 100 * r.mean if r else np.nan
            rec[f"{b}_se"] = 100 * r.se if r and r.se is not None else np.nan
        has_all = all(b in s.results for b in benchmarks)
        m, se = s.average(benchmarks) if has_all else (np.nan, None)
        rec["avg"], rec["avg_se"] = 100 * m, 100 * se if se is not None else np.nan
        recs.append(rec)
    for g, row, cells in paper_rows:
        rec = {"source": "paper", "group": g, "arm": row, "label": f"paper {g}: {arm_label(row)}"}
        for c in [*benchmarks, "avg"]:
            v = cells.get(c, {})
            rec[c] = v.get("mean", np.nan)
            rec[f"{c}_se"] = v.get("se") if v.get("se") is not None else np.nan
        recs.append(rec)
    return pd.DataFrame(recs)


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


def _eval_text(summaries: Mapping[str, EvalSummary], label: str, benchmarks: list[str],
               paper_rows: list[PaperRow], fmt: str) -> str:
    pv = paper_values(label)
    paper_cols = [c for c in pv["columns"] if c != "avg"]
    dash = "–" if fmt == "markdown" else "--"

    def rows(cols: Sequence[str]) -> list[list[str]]:
        return [[f"paper {g}: {arm_label(row)}",
                 *(format_cell(cells[c]["mean"], cells[c]["se"], fmt, 1) if c in cells else dash
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
    check_fmt(fmt)
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

    def text(f: str) -> str:
        notes = [olympiad_note(summaries) if "olympiadbench" in benchmarks else "",
                 pooling_note_of(summaries)]
        body = _eval_text(summaries, label, benchmarks, paper_rows, f)
        return body + "".join(("\n" + n + "\n" if f == "markdown" else f"% {n}\n")
                              for n in notes if n)

    if fmt is not None:
        return text(fmt)
    return Table(frame=_eval_frame(summaries, benchmarks, paper_rows),
                 markdown=text("markdown"), latex=text("latex"))


def pooling_note_of(summaries: Mapping[str, EvalSummary]) -> str:
    """The line printed under a pass@1 table whose rows were pooled over seeds
    (:func:`vdlib.evaluation.pool_runs`, which records ``per_seed`` and ``se_ddof`` in each
    pooled summary's protocol): :func:`vdlib.evaluation.pooling_note`; "" when no row was."""
    from vdlib.evaluation.stats import pooling_note

    rules = {(s.protocol["per_seed"], s.protocol.get("se_ddof", 0))
             for s in summaries.values() if "per_seed" in s.protocol}
    return " ".join(pooling_note(p, int(d)) for p, d in sorted(rules))


def olympiad_note(summaries: Mapping[str, EvalSummary]) -> str:
    """The tables' OlympiadBench footnote: how many items ours had (and which subset) against
    the paper's 910 (tab:benchmarks); "" when no summary holds OlympiadBench."""
    held = [(s.results["olympiadbench"].n, s.protocol.get("olympiadbench_subset"))
            for s in summaries.values() if "olympiadbench" in s.results]
    if not held:
        return ""
    sizes = ", ".join(sorted({str(n) for n, _ in held}))
    subsets = ", ".join(sorted({str(x) for _, x in held if x}))
    which = f" (evaluation.olympiadbench_subset: {subsets})" if subsets else ""
    return (f"Olympiad: {sizes} items{which}; the paper's tab:benchmarks: 910 (English "
            "text-only open-ended maths 674 + physics 236).")


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


#: tab:ood's settings (paper columns Base / Baseline / VD / Delta) and their summary keys.
OOD_COLUMNS = (("Base", ("base", "Base (no training)")), ("Baseline", ("baseline", "Baseline")),
               ("VD", ("vd75", "VD75")))


def _pick(summaries: Mapping[str, EvalSummary], keys: Sequence[str]) -> EvalSummary | None:
    return next((summaries[k] for k in keys if k in summaries), None)


def ood_table(summaries: Mapping[str, EvalSummary], fmt: str | None = None, *,
              benchmarks: Sequence[str] | None = None, group: str = "Qwen3-8B") -> Any:
    """tab:ood in the paper's layout: one row per out-of-domain benchmark (label = its display
    name: BBH, MedQA-USMLE, SuperGPQA, WinoGrande), columns ``Base``, ``Baseline``, ``VD``,
    ``Δ`` (VD minus Baseline; its SE the root sum of squares) from ``summaries`` (keys
    ``base`` / ``baseline`` / ``vd75``, as :func:`vdlib.experiments.eval_grid.evaluate_ood`
    returns, or their display labels), then the paper's ``paper Base`` ... ``paper Δ`` beside them.
    Benchmarks default to the paper's four, then any other the summaries hold."""
    from vdlib.evaluation import display_name

    cells = paper_cells("tab:ood", group)
    if benchmarks is None:
        held = [b for s in summaries.values() for b in s.results]
        benchmarks = list(dict.fromkeys([*paper_values("tab:ood")["columns"], *held]))
    recs = []
    for b in benchmarks:
        rec: dict[str, Any] = {"source": "ours", "group": group, "arm": b,
                               "label": display_name(b)}
        for col, keys in OOD_COLUMNS:
            s = _pick(summaries, keys)
            r = s.results.get(b) if s is not None else None
            rec[col] = 100 * r.mean if r else np.nan
            rec[f"{col}_se"] = 100 * r.se if r and r.se is not None else np.nan
        rec["Δ"] = round(rec["VD"] - rec["Baseline"], 9) + 0.0  # no "-0.0"
        rec["Δ_se"] = float(np.hypot(rec["Baseline_se"], rec["VD_se"]))
        for col, keys in [*OOD_COLUMNS, ("Δ", ("delta",))]:
            v = cells.get(keys[0], {}).get(b, {})
            rec[f"paper {col}"] = v.get("mean", np.nan) if v else np.nan
        recs.append(rec)
    frame = pd.DataFrame(recs)
    if fmt == "frame":
        return frame
    out = table_output(frame, fmt)
    rename = (("| Setting |", "| Benchmark |"), ("Setting &", "Benchmark &"))
    if isinstance(out, str):
        for a, b in rename:
            out = out.replace(a, b, 1)
        return out
    for form in ("markdown", "latex"):
        for a, b in rename:
            out[form] = out[form].replace(a, b, 1)
    return out


def judged_table(scores: Mapping[str, EvalSummary], judged: Mapping[str, EvalSummary],
                 fmt: str | None = None, benchmarks: Sequence[str] | None = None) -> Any:
    """Math-verify and judged pass@1 side by side (``evaluation.judge``, beyond the paper):
    one row per key of ``scores`` (``ours: <label>``), for each benchmark the columns
    ``<Benchmark> math-verify`` and ``<Benchmark> judged`` (``–`` where the judge has no
    score), in percent with ``_se`` companions."""
    from vdlib.evaluation import display_name

    if benchmarks is None:
        benchmarks = list(dict.fromkeys(b for s in scores.values() for b in s.results))
    recs = []
    for key, s in scores.items():
        vals: dict[str, float] = {}
        for b in benchmarks:
            for kind, src in (("math-verify", s), ("judged", judged.get(key))):
                r = src.results.get(b) if src is not None else None
                col = f"{display_name(b)} {kind}"
                vals[col] = 100 * r.mean if r else np.nan
                vals[f"{col}_se"] = 100 * r.se if r and r.se is not None else np.nan
        recs.append(ours_row(str(key), **vals))
    return table_output(pd.DataFrame(recs), fmt)


def instruct_table(summaries: Mapping[str, EvalSummary], fmt: str | None = None,
                   **kw: Any) -> Any:
    """tab:instruct: co-evolution of an instruction-tuned model."""
    return _eval_table(summaries, "tab:instruct", ("Qwen2.5-1.5B-Instruct",), fmt,
                       kw.get("benchmarks"), kw.get("paper_columns", False))
