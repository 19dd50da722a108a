"""Committed results files: a grid's numbers as one JSON, and the report drawn from it.

A GPU machine keeps its checkpoints; only small files come back. :func:`collect_results`
gathers, on the machine, one record per arm, seed and iteration (the loop metrics of
``iter_<t>/metrics.json``, and solver pass@1 where an evaluation exists) plus the starting
checkpoint's pass@1 (arm ``base``, iteration 0) into one JSON (``docs/results/*.json``).
:func:`results_report` is the report step on that file alone: the figure of notebook 01's plot
function (:func:`vdlib.report.plots.diversity_dynamics`, the paper's curves beside ours), a table of
every field per arm and iteration (mean +- SE over seeds), the pass@1 table, and the effects
table (each VD arm minus the baseline: Welch's and the paired t-test of
:func:`vdlib.utils.stats.compare_seeds`) that docs/RESULTS.md quotes.
``vdlib results FILE --out DIR`` runs it and prints the effects table. The file is checked whole
first (:mod:`vdlib.report.results_file`, whose names this module re-exports).

One pooling rule: pass@1 cells pool each seed's evaluation runs as the notebooks do
(:func:`vdlib.evaluation.pool_accuracies`, i.e. :func:`vdlib.evaluation.pool_runs`) under the
file's ``evaluation.per_seed`` and ``evaluation.se_ddof``
(:func:`vdlib.report.results_file.pooling_rule`; :func:`collect_results` writes them), and the
rule is printed under every table. Every other cell (loop metrics over seeds) is mean ± SE
with the sample SD (ddof 1): no paper table prints an SE for them.

>>> RECORD_FIELDS[:3]
('valid_fraction', 'self_bleu', 'vendi')
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from vdlib.config import layout
from vdlib.evaluation.stats import pool_accuracies, seed_value
from vdlib.report.frames import LOOP_METRIC_COLUMNS, arm_label
from vdlib.report.results_contrasts import DIRECTION, comparison_fields
from vdlib.report.results_file import (
    ALPHA_RECORD_FIELDS,
    PASS1_PREFIX,
    RECORD_FIELDS,
    RESULTS_MAX_BYTES,
    PoolingRule,
    ResultsFileError,
    finite_or_null,
    load_results,
    pooling_rule,
    read_json_file,
)
from vdlib.report.table_format import format_cell
from vdlib.utils import safe_read
from vdlib.utils.artifacts import atomic_write_text
from vdlib.utils.stats import ALPHA, compare_seeds, mean_and_se

__all__ = ["RECORD_FIELDS", "PASS1_PREFIX", "collect_results", "merge_results", "load_results",
           "read_json_file", "ResultsFileError", "RESULTS_MAX_BYTES", "loop_frame",
           "pass1_frame", "summary_table", "SCALE_FIELDS", "scale_comparison", "pass1_table",
           "effects_table", "results_report", "table_markdown", "pooling_rule", "PoolingRule",
           "pass1_runs", "record_pooling_rule"]

#: spread of the SEs of every cell that is not pass@1 (:func:`summary_table`, the question
#: diversity table, the figures' bands): the sample SD (no paper table prints an SE for them)
SUMMARY_DDOF = 1


def _pass1_fields(summary: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, result in summary.results.items():
        out[f"{PASS1_PREFIX}{name}"] = round(100.0 * result.mean, 4)
        out[f"{PASS1_PREFIX}{name}_runs"] = [round(100.0 * a, 4) for a in result.accuracies]
    return out


def collect_results(runs: Mapping[tuple[str, int], str | os.PathLike],
                    evaluations: Mapping[tuple[str, int], Any] | None = None,
                    base: Any = None, meta: Mapping[str, Any] | None = None,
                    evaluation: Any = None) -> dict[str, Any]:
    """``{**meta, "records": [...]}``: per run ``(arm, seed)`` and finished iteration, the
    :data:`RECORD_FIELDS` of its metrics (None where absent) and, at the evaluated (last)
    iteration, solver pass@1 from ``evaluations[(arm, seed)]`` (an EvalSummary); ``base``: the
    starting checkpoint's EvalSummary, recorded as arm ``base``, seed None, iteration 0. The
    pooling rule is always written, in ``evaluation.per_seed`` and ``evaluation.se_ddof``: from
    ``meta["evaluation"]`` where it has them, else from ``evaluation`` (the runs'
    :class:`vdlib.config.EvaluationConfig`), else the config's defaults."""
    from vdlib.metrics.cov_activity import COV_RECORD_FIELDS

    records: list[dict[str, Any]] = []
    if base is not None:
        records.append({"arm": "base", "seed": None, "iteration": 0, **_pass1_fields(base)})
    for (arm, seed), run_dir in runs.items():
        finished = layout.iteration_dirs(Path(run_dir), layout.METRICS_FILE)
        for i, (t, folder) in enumerate(finished):
            m = safe_read.read_json(folder / layout.METRICS_FILE, RESULTS_MAX_BYTES)
            rec = {"arm": arm, "seed": seed, "iteration": t,
                   **{k: m.get(k) for k in RECORD_FIELDS},
                   **{k: m[k] for k in ALPHA_RECORD_FIELDS if k in m},
                   **{k: m[k] for k in COV_RECORD_FIELDS if k in m}}  # KL-Cov / Clip-Cov
            if evaluations and (arm, seed) in evaluations and i == len(finished) - 1:
                rec.update(_pass1_fields(evaluations[(arm, seed)]))
            records.append(rec)
    out = record_pooling_rule(dict(meta or {}), evaluation)
    return {**out, "records": records}


def record_pooling_rule(data: dict[str, Any], evaluation: Any = None) -> dict[str, Any]:
    """``data`` with its pooling rule written (in place): ``evaluation.per_seed`` and
    ``evaluation.se_ddof`` kept where the file has them, else from ``evaluation`` (the runs'
    :class:`vdlib.config.EvaluationConfig`), else the config's defaults; so every results file,
    exported or merged, names the rule its pass@1 cells are pooled by.

    >>> record_pooling_rule({"evaluation": {"runs": 3}})["evaluation"]
    {'runs': 3, 'per_seed': 'first_run', 'se_ddof': 0}
    """
    ev = dict(data.get("evaluation") or {})
    rule = pooling_rule({"evaluation": {k: getattr(evaluation, k) for k in ("per_seed", "se_ddof")
                                        if evaluation is not None}})
    ev.setdefault("per_seed", rule.per_seed)
    ev.setdefault("se_ddof", rule.se_ddof)
    data["evaluation"] = ev
    return data


def _update_meta(dst: dict[str, Any], src: Mapping[str, Any]) -> None:
    for key, value in src.items():
        if isinstance(value, Mapping) and isinstance(dst.get(key), dict):
            _update_meta(dst[key], value)
        elif value is not None:
            dst[key] = value


def _run_summary(parts: Sequence[Mapping[str, Any]], index: int,
                 recs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A run's entry in ``runs``: finished iterations, whether the last finished one was
    evaluated, its part and card, and (if any) the iteration cut before its solver phase. A
    part that is itself a merge keeps its own word on the run's card and on an evaluation read
    from a log."""
    full = [r for r in recs if not r.get("partial")]
    runs = parts[index].get("runs")
    own = runs.get(layout.arm_run_id(recs[0]["arm"], recs[0]["seed"]), {}) \
        if isinstance(runs, dict) else {}
    evaluated = bool(full) and any(k.startswith(PASS1_PREFIX) and v is not None
                                   for k, v in full[-1].items())
    entry: dict[str, Any] = {
        "iterations": [r["iteration"] for r in full],
        "evaluated": own["evaluated"] if evaluated and isinstance(own.get("evaluated"), str)
        else evaluated,
        "part": index, "card": own.get("card") or parts[index].get("card")}
    if parts[index].get("source"):  # the file it came from (a run shared with another experiment)
        entry["source"] = parts[index]["source"]
    cut = [r["iteration"] for r in recs if r.get("partial")]
    if cut:
        entry["partial_iterations"] = cut
    return entry


def merge_results(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One results dict from several (:func:`collect_results` of grids run at different
    times, e.g. seeds on different machine holds), in order: a later part's run ``(arm, seed)``
    replaces every record of that run in earlier parts (a rerun supersedes), and a later
    ``base`` record replaces an earlier one. Meta keys come from the last part that has them
    (not None; nested dicts key by key), except ``arms``, the union of every part's arms in
    order, and ``source``, kept per run;
    ``seeds`` becomes the sorted union, ``iterations`` the most iterations any run finished,
    and ``runs`` maps ``<arm>-seed<seed>`` to its finished iterations, whether its last one
    was evaluated, which part (index) it came from, that part's ``card`` and ``source`` (if it
    names one: e.g. the results file whose runs another experiment reuses), and
    ``partial_iterations`` (the records marked ``partial``, cut before the solver phase, which
    count in the tables but not as finished); the top-level ``card`` names every card of the
    merged runs, in part order. Parts that record different pooling rules
    (``evaluation.per_seed``, ``se_ddof``) are refused (:class:`ResultsFileError`).

    >>> a = {"seeds": [0], "records": [{"arm": "x", "seed": 0, "iteration": 1}]}
    >>> b = {"seeds": [2], "records": [{"arm": "x", "seed": 2, "iteration": t} for t in (1, 2)]}
    >>> m = merge_results([a, b])
    >>> m["seeds"], m["iterations"], m["runs"]["x-seed2"]
    ([0, 2], 2, {'iterations': [1, 2], 'evaluated': False, 'part': 1, 'card': None})
    """
    rules = {(ev.get("per_seed"), ev.get("se_ddof")) for part in parts
             if isinstance(ev := part.get("evaluation"), Mapping)
             and ("per_seed" in ev or "se_ddof" in ev)}
    if len(rules) > 1:  # one file, one pooling rule (its tables read it from the file)
        raise ResultsFileError("the parts pool pass@1 by different rules (evaluation.per_seed, "
                               f"se_ddof): {', '.join(map(str, sorted(rules, key=str)))}; "
                               "merge parts evaluated under one rule")
    meta: dict[str, Any] = {}
    by_run: dict[tuple[str, Any], tuple[int, list[dict[str, Any]]]] = {}
    base: dict[str, Any] | None = None
    seeds: set[int] = set()
    arms: list[str] = []
    for index, part in enumerate(parts):
        _update_meta(meta, {k: v for k, v in part.items() if k not in ("records", "source")})
        arms += [a for a in part.get("arms") or [] if a not in arms]
        seeds.update(part.get("seeds") or [])
        runs: dict[tuple[str, Any], list[dict[str, Any]]] = {}
        for rec in part["records"]:
            if rec["arm"] == "base":
                base = dict(rec)
            else:
                runs.setdefault((rec["arm"], rec["seed"]), []).append(dict(rec))
        for key, recs in runs.items():
            by_run[key] = (index, sorted(recs, key=lambda r: r["iteration"]))
    if arms:
        meta["arms"] = arms
    order = sorted(by_run, key=lambda k: (arms.index(k[0]) if k[0] in arms else len(arms),
                                          k[0], k[1]))
    records = ([base] if base else []) + [r for k in order for r in by_run[k][1]]
    summary = {layout.arm_run_id(arm, seed): _run_summary(parts, *by_run[(arm, seed)])
               for arm, seed in order}
    cards = [v["card"] for v in sorted(summary.values(), key=lambda v: v["part"])]
    if any(cards):
        meta["card"] = ", ".join(dict.fromkeys(c for c in cards if c))
    meta.update(seeds=sorted(seeds), runs=summary,
                iterations=max((len(v["iterations"]) for v in summary.values()), default=0))
    return {**meta, "records": records}


def loop_frame(data: Mapping[str, Any], fields: Iterable[str] = RECORD_FIELDS) -> pd.DataFrame:
    """The records' loop metrics as notebook 01's frame (``arm, seed, iteration, metric,
    value``), which the plot and table functions take."""
    rows = [{"arm": r["arm"], "seed": r["seed"], "iteration": r["iteration"], "metric": f,
             "value": float(r[f])}
            for r in data["records"] if r["arm"] != "base" for f in fields
            if r.get(f) is not None]
    return pd.DataFrame(rows, columns=LOOP_METRIC_COLUMNS)


def pass1_runs(record: Mapping[str, Any], benchmark: str) -> list[float] | None:
    """A record's evaluation runs (%) on ``benchmark``: ``pass1_<b>_runs``, or, where a file has
    only the mean, ``[pass1_<b>]``; None where it has neither."""
    runs = record.get(f"{PASS1_PREFIX}{benchmark}_runs")
    if runs:
        return [float(v) for v in runs]
    mean = record.get(f"{PASS1_PREFIX}{benchmark}")
    return None if mean is None else [float(mean)]


def pass1_frame(data: Mapping[str, Any], per_seed: str | None = None) -> pd.DataFrame:
    """``arm, seed, iteration, benchmark, accuracy`` (%): what each trained record (a training
    seed) adds to a pooled cell, :func:`vdlib.evaluation.seed_value` of its runs under
    ``per_seed`` (default: the file's ``evaluation.per_seed``, :func:`pooling_rule`): its first
    evaluation run or their mean. The starting checkpoint (arm ``base``, no training seed; its
    cell pools its runs) has the mean of its runs."""
    rule = per_seed or pooling_rule(data).per_seed
    benches = {k[len(PASS1_PREFIX):].removesuffix("_runs") for r in data["records"] for k in r
               if k.startswith(PASS1_PREFIX) and k != "pass1_unfinished"}
    rows = [{"arm": r["arm"], "seed": r["seed"], "iteration": r["iteration"], "benchmark": b,
             "accuracy": seed_value(runs, "mean" if r["arm"] == "base" else rule)}
            for r in data["records"] for b in sorted(benches)
            if (runs := pass1_runs(r, b)) is not None]
    return pd.DataFrame(rows, columns=["arm", "seed", "iteration", "benchmark", "accuracy"])


def _cell(values: Sequence[float], digits: int = 3, ddof: int = SUMMARY_DDOF) -> str:
    return format_cell(*mean_and_se(list(values), ddof), "markdown", digits)


def summary_table(data: Mapping[str, Any], fields: Sequence[str] = RECORD_FIELDS,
                  ddof: int = SUMMARY_DDOF) -> pd.DataFrame:
    """One row per arm and iteration, each field as ``mean ± SE`` over seeds (``n`` seeds); the
    SE is ``std(ddof) / sqrt(n)``, by default the sample SD (:data:`SUMMARY_DDOF`: the loop
    metrics are no paper table's cells, and :func:`effects_table` tests with the sample SD)."""
    frame = loop_frame(data, fields)
    rows = []
    for (arm, t), g in frame.groupby(["arm", "iteration"], sort=False):
        row = {"arm": arm_label(arm), "iteration": int(t), "seeds": g["seed"].nunique()}
        for f in fields:
            v = g[g["metric"] == f]["value"]
            row[f] = _cell(v, 3, ddof) if len(v) else ""
        rows.append(row)
    return pd.DataFrame(rows).sort_values(["iteration", "arm"], kind="stable",
                                          ignore_index=True)


#: what :func:`scale_comparison` shows by default: the counts beside the diversity metrics
SCALE_FIELDS = ("generated", "valid_questions", "self_bleu", "vendi")


def scale_comparison(small: pd.DataFrame, data: Mapping[str, Any],
                     fields: Sequence[str] = SCALE_FIELDS, *, small_label: str = "tiny",
                     large_label: str = "GPU") -> pd.DataFrame:
    """One row per arm and iteration of ``small`` (loop metrics, ``arm, seed, iteration,
    metric, value``: a notebook's own runs), each field twice: ``"<small_label> <field>"``
    (the mean over ``small``'s seeds, 3 digits) and ``"<large_label> <field>"`` (the results
    file ``data`` at the same arm and iteration, mean ± SE over its seeds as
    :func:`summary_table`; empty where it has none). The quickstart shows its 135M CPU numbers
    beside the GPU-scale ones of docs/RESULTS.md this way, counts first: a Vendi score cannot
    exceed the number of questions it is computed on."""
    large = summary_table(data, fields).set_index(["arm", "iteration"])
    d = small[small["metric"].isin(list(fields))]
    rows = []
    for (arm, t), g in d.groupby(["arm", "iteration"], sort=True):
        key = (arm_label(arm), int(t))
        row: dict[str, Any] = {"arm": key[0], "iteration": key[1]}
        for f in fields:
            v = g[g["metric"] == f]["value"]
            row[f"{small_label} {f}"] = round(float(v.mean()), 3) if len(v) else None
            row[f"{large_label} {f}"] = large.at[key, f] if key in large.index else ""
        rows.append(row)
    return pd.DataFrame(rows, columns=["arm", "iteration",
                                       *(f"{x} {f}" for f in fields
                                         for x in (small_label, large_label))])


def pass1_table(data: Mapping[str, Any], rule: PoolingRule | None = None) -> pd.DataFrame:
    """Solver pass@1 (%) per arm, evaluated iteration and benchmark: the notebooks' cell
    (:func:`vdlib.evaluation.pool_accuracies`) under ``rule`` (default: the file's,
    :func:`pooling_rule`): mean ± SE (``std(se_ddof) / sqrt(k)``) over the seeds evaluated on
    that benchmark, each adding its first evaluation run or the mean of its runs
    (``per_seed``); one seed, or the starting checkpoint: over its evaluation runs. And how many
    seeds that is (``<benchmark> seeds``; a seed whose evaluation was cut short lacks the
    benchmarks it did not finish; blank for the starting checkpoint, which has no training
    seed)."""
    rule = rule or pooling_rule(data)
    records = data["records"]
    benches = sorted({k[len(PASS1_PREFIX):-len("_runs")] for r in records for k in r
                      if k.startswith(PASS1_PREFIX) and k.endswith("_runs")})
    groups: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    for r in records:
        if any(r.get(f"{PASS1_PREFIX}{b}") is not None for b in benches):
            groups.setdefault((r["arm"], r["iteration"]), []).append(r)
    rows = []
    for (arm, t), evaluated in groups.items():
        row: dict[str, Any] = {"arm": arm_label(arm), "iteration": t}
        for b in benches:
            have = [r for r in evaluated if pass1_runs(r, b) is not None]
            if have:
                cell = pool_accuracies({None if arm == "base" else r["seed"]: pass1_runs(r, b)
                                        for r in have}, rule.per_seed, rule.se_ddof)
                row[b] = format_cell(cell.mean, cell.se, "markdown", 1)
            else:
                row[b] = ""
            row[f"{b} seeds"] = len(have) if arm != "base" else ""  # no training seed
        rows.append(row)
    return pd.DataFrame(rows)


def paper_table(data: Mapping[str, Any], label: str = "tab:vanilla_eval",
                rule: PoolingRule | None = None) -> pd.DataFrame:
    """Our pass@1 (%) beside the paper's: per arm and benchmark, ours at the arm's last
    evaluated iteration (mean ± SE over its seeds, :func:`pass1_table`'s rule) and the paper's
    printed cell of ``label`` for each co-evolved model (Qwen3-4B and -8B after 5 iterations;
    blank where the paper has no such arm or benchmark). Different models and scales: the
    columns sit side by side for the direction of each arm against the baseline, not for
    their levels."""
    from vdlib.report.paper_values import paper_cells, paper_values

    groups = list(paper_values(label)["data"])
    table = pass1_table(data, rule)
    if table.empty:
        return pd.DataFrame(columns=["arm", "iteration", "benchmark", "ours",
                                     *(f"paper {g}" for g in groups)])
    last = table.loc[table.groupby("arm", sort=False)["iteration"].idxmax()]
    names = {arm_label(r["arm"]): r["arm"] for r in data["records"]}
    rows = []
    for _, r in last.iterrows():
        arm = names.get(r["arm"], r["arm"])
        for b in (c for c in table.columns if c not in ("arm", "iteration")
                  and not c.endswith(" seeds")):
            if not r[b]:
                continue
            row = {"arm": r["arm"], "iteration": r["iteration"], "benchmark": b, "ours": r[b]}
            for g in groups:
                cell = paper_cells(label, g).get(arm, {}).get(b)
                row[f"paper {g}"] = ("" if cell is None else f"{cell['mean']:.1f}"
                                     + (f" ± {cell['se']:.1f}" if cell["se"] is not None else ""))
            rows.append(row)
    return pd.DataFrame(rows)


def effects_table(data: Mapping[str, Any], baseline: str = "baseline",
                  metrics: Sequence[str] = tuple(DIRECTION)) -> pd.DataFrame:
    """Each VD arm minus the baseline, per metric and iteration, from
    :func:`vdlib.utils.stats.compare_seeds` (rounded): the seeds on each side, the seed means, their
    difference and its SE from the sample SDs, Welch's t, its Welch–Satterthwaite df and
    two-sided p; the same on the seeds both arms ran (``paired_*``: the mean per-seed
    difference, its SE, the paired t on ``n_pairs - 1`` df and its p); the exact permutation
    p-values (``perm_p``: relabelling the pooled seeds; ``paired_perm_p``: sign flips of the
    per-seed differences); ``paper_direction`` (the difference goes the way the paper reports,
    :data:`DIRECTION`) and ``welch_significant`` / ``paired_significant`` (two-sided p <
    :data:`vdlib.utils.stats.ALPHA`). A seed fixes the sampling seeds of every arm, so arms of one
    seed share their random draws and much of the between-seed spread cancels in the pairs."""
    frame = loop_frame(data, metrics)
    rows = []
    for (arm, metric, t), g in frame.groupby(["arm", "metric", "iteration"], sort=True):
        if arm == baseline:
            continue
        b = frame[(frame["arm"] == baseline) & (frame["metric"] == metric)
                  & (frame["iteration"] == t)]
        if b.empty:
            continue
        c = compare_seeds(dict(zip(b["seed"], b["value"], strict=True)),
                          dict(zip(g["seed"], g["value"], strict=True)))
        rows.append({"arm": arm_label(arm), "metric": metric, "iteration": int(t),
                     **comparison_fields(c, ("n_baseline", "n_vd"), ("baseline", "vd")),
                     "paper_direction": bool(c.diff * DIRECTION[metric] > 0),
                     "welch_significant": c.welch_significant,
                     "paired_significant": c.paired_significant})
    return pd.DataFrame(rows)


#: the first line of each table's ``.md``: which rule its cells use (the pooling rule of pass@1,
#: :func:`pooling_rule`, is printed under each table)
TABLE_NOTES = {
    "summary": f"Mean ± SE over seeds; SE = sample SD (ddof {SUMMARY_DDOF}) / sqrt(n seeds).",
    "pass1": "pass@1 in %, mean ± SE over k values, pooled as the notebooks pool "
             "(vdlib.evaluation.pool_runs under the pooling rule printed below the table): k = "
             "the seeds (one value each), or the evaluation runs of a model with one seed or "
             "none (the starting checkpoint).",
    "paper": "pass@1 in %: ours at each arm's last evaluated iteration (the pass1 table's "
             "cells) beside the paper's printed tab:vanilla_eval cells (Qwen3-4B / -8B after 5 "
             "iterations; blank: the paper has no such cell). Other models and scales: compare "
             "each arm's direction against its baseline, not the levels.",
    "effects": "VD arm minus baseline (vdlib.utils.stats.compare_seeds): se from the sample SDs; "
               "Welch's t on Welch–Satterthwaite df; paired t by seed on n_pairs - 1 df; "
               "two-sided p-values; exact permutation p-values (perm_p: relabelling the pooled "
               "seeds; paired_perm_p: sign flips of the per-seed differences); *_significant: "
               f"p < {ALPHA}.",
    "contrasts": "Arm minus reference for the paper's comparisons between trained arms "
                 "(vdlib.report.results_contrasts.PAPER_CONTRASTS; claim: where the paper makes "
                 "it): the effects table's columns; paper_direction blank where the paper states "
                 "no direction or the metric has none (valid fraction, curriculum size).",
    "question_diversity": "tab:question_diversity: cumulative Vendi of iterations 1..N pooled, "
                          "Growth = the last iteration minus iteration 1 (per seed); mean and "
                          f"SE (_se: sample SD, ddof {SUMMARY_DDOF}, / sqrt(n seeds); the paper "
                          "prints this table without SE) over seeds; the paper's rows after "
                          "ours (5 iterations, text-embedding-3-small; ours: the runs' embedder "
                          "and iterations).",
}


def results_report(path: str | os.PathLike, out_dir: str | os.PathLike,
                   name: str | None = None, data: Any = None) -> list[Path]:
    """The report step on a results JSON alone: ``<name>_dynamics.{png,pdf,csv}`` (notebook 01's
    :func:`vdlib.report.plots.diversity_dynamics`, with the paper's Qwen3-4B curves), and the tables
    ``<name>_summary``, ``<name>_pass1``, ``<name>_paper`` (ours beside the paper's cells),
    ``<name>_effects``, ``<name>_contrasts`` (where the file holds a pair of
    :data:`vdlib.report.results_contrasts.PAPER_CONTRASTS`) and ``<name>_question_diversity``
    (with 2+ iterations) (``.md``, headed by the rule of its cells, :data:`TABLE_NOTES`, and
    ``.csv``), plus
    ``<name>_report.json`` listing them; the written paths. Nothing is written (not even
    ``out_dir``) until the file has been checked (:func:`load_results`) and every table
    computed (``data``: the file's value, already read, as :func:`load_results` takes it)."""
    from vdlib.report import plots
    from vdlib.report.curriculum_tables import question_diversity_table
    from vdlib.report.results_contrasts import CONTRAST_METRICS, contrasts_table

    data = load_results(path, data)
    name = name or Path(path).stem
    frame = loop_frame(data)
    if frame.empty:  # the figure and the tables are drawn from the loop metrics
        raise ResultsFileError(f"{path}: no record of a trained arm holds a loop metric "
                               f"({', '.join(RECORD_FIELDS[:3])}, ...); nothing to report")
    rule = pooling_rule(data)
    tables = [("summary", summary_table(data)), ("pass1", pass1_table(data, rule)),
              ("paper", paper_table(data, rule=rule)), ("effects", effects_table(data))]
    contrasts = contrasts_table(frame[frame["metric"].isin(CONTRAST_METRICS)])
    if not contrasts.empty:  # a pair of trained arms the paper compares
        tables.append(("contrasts", contrasts))
    if frame[frame["metric"] == "cumulative_vendi"]["iteration"].nunique() > 1:
        tables.append(("question_diversity",
                       question_diversity_table(frame, "frame", arms=None).round(3)))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fig = plots.diversity_dynamics(frame, out, name=f"{name}_dynamics",
                                   paper_model="Qwen3-4B")
    meta = {k: v for k, v in data.items() if k != "records"}
    return write_report(out, name, path, meta, list(fig.paths), tables, TABLE_NOTES, rule)


def table_markdown(table: pd.DataFrame, note: str, rule: PoolingRule | None = None) -> str:
    """A table's ``.md`` text: ``note`` (the rule of its cells), the table, and the pooling
    ``rule`` of pass@1 under it (where given)."""
    footer = f"\n{rule.note()}\n" if rule is not None else ""
    return f"{note}\n\n{table.to_markdown(index=False)}\n{footer}"


def write_report(out: Path, name: str, source: Any, meta: Mapping[str, Any],
                 written: list[Path], tables: Sequence[tuple[str, pd.DataFrame]],
                 notes: Mapping[str, str], rule: PoolingRule | None = None) -> list[Path]:
    """Each table as ``<name>_<suffix>.csv`` and ``.md`` (headed by ``notes[suffix]``, the
    pooling ``rule`` under the table), then ``<name>_report.json`` (source, ``meta``, the
    ``pooling`` rule, every file's name); ``written`` plus those."""
    for suffix, table in tables:
        base = out / f"{name}_{suffix}"
        table.to_csv(base.with_suffix(".csv"), index=False)
        base.with_suffix(".md").write_text(table_markdown(table, notes[suffix], rule),
                                           encoding="utf-8")
        written += [base.with_suffix(".csv"), base.with_suffix(".md")]
    pooling = {"pooling": rule.as_dict()} if rule is not None else {}
    report = finite_or_null({"source": str(source), **meta, **pooling,
                             "files": [p.name for p in written]})
    # never Infinity or NaN: a report JSON is read by strict JSON parsers
    written.append(atomic_write_text(out / f"{name}_report.json",
                                     json.dumps(report, indent=2, ensure_ascii=False,
                                                allow_nan=False) + "\n"))
    return written
