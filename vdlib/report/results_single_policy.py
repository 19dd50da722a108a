"""Single-policy GRPO results files (notebook 04 at GPU scale): the report step on the JSON alone.

``tools/lent-gpus/gpu_single_policy.py export`` writes one object per experiment: ``runs``, a list
of ``{arm, seed, finished, steps: [{step, entropy, reward}], pass1: {benchmark: {accuracies,
...}} | null}``, and ``base_pass1`` (the starting checkpoint). The paper's claim
(tab:vanilla_entropy): over the first 100 GRPO steps the baseline policy's entropy falls from
0.59 to about 0.10 nats/token, and with the mask at alpha 0.95 it stays about twice as high.
:func:`single_policy_report` draws notebook 04's entropy figure
(:func:`vdlib.report.plots.entropy_figure`, the paper's curves beside), the entropy table (each
arm at its first logged step and over its last :data:`ENTROPY_WINDOW` steps, the paper's same
two numbers beside), the entropy effects (each arm against the baseline:
:func:`vdlib.utils.stats.compare_seeds` on the per-seed values, and the ratio of the means the
paper's "2x" is), the reward signal GRPO had (:func:`reward_table`: with a binary reward
the batch-mean reward is the share of correct rollouts, and a step whose rollouts are all
wrong gives every advantage 0), the pass@1 table with tab:vanilla_grpo's cells beside, and
the pass@1 effects (each arm against the baseline per benchmark; the paper finds accuracy
close, +1.6 on GSM8K and -7.6 on MATH500 for Qwen3-4B-Base). pass@1 pools each seed's
evaluation runs as the notebooks do, under the file's ``evaluation.per_seed`` and
``evaluation.se_ddof`` (:func:`vdlib.report.results_file.pooling_rule`), printed under each
table; every other SE uses the sample SD.

>>> is_single_policy({"runs": [], "base_pass1": None}), is_single_policy({"records": []})
(True, False)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from vdlib.config.names import name_problem
from vdlib.evaluation.stats import pool_accuracies, seed_value
from vdlib.report.frames import arm_label
from vdlib.report.paper_values import paper_cells, paper_series
from vdlib.report.results import table_markdown, write_report
from vdlib.report.results_contrasts import comparison_fields
from vdlib.report.results_file import (
    MAX_SEED,
    PoolingRule,
    ResultsFileError,
    check_pooling,
    is_finite_number,
    pooling_rule,
    read_json_file,
)
from vdlib.report.table_format import format_cell
from vdlib.utils.stats import compare_seeds, mean_and_se

__all__ = ["ENTROPY_WINDOW", "is_single_policy", "load_single_policy", "entropy_frame",
           "entropy_table", "entropy_effects", "reward_table", "single_policy_pass1_table",
           "single_policy_pass1_effects", "single_policy_tables", "single_policy_markdown",
           "single_policy_report"]

#: the last steps whose mean entropy stands for "after training" (the paper's curves are noisy
#: step to step: 0.07-0.26 over its baseline's last 30 steps)
ENTROPY_WINDOW = 10
_PAPER = ("tab:vanilla_entropy", "Qwen3-4B-Base")
#: the largest training step of a logged step
MAX_STEP = 10**9


def is_single_policy(data: Any) -> bool:
    """Whether a results file's value is a single-policy export (a ``runs`` list, no
    ``records``)."""
    return isinstance(data, dict) and "records" not in data and isinstance(data.get("runs"),
                                                                          list)


def _check_run(path: Any, i: int, run: Any) -> None:
    where = f"{path}: runs[{i}]"
    if not isinstance(run, dict):
        raise ResultsFileError(f"{where} is a {type(run).__name__}, not an object")
    problem = name_problem(run.get("arm"))
    if problem:  # the rule of experiment, arm and run names (vdlib.config.names)
        raise ResultsFileError(f"{where}: 'arm' is not a name ({problem})")
    seed = run.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ResultsFileError(f"{where}: 'seed' is not an integer 0 to {MAX_SEED}")
    if not isinstance(run.get("steps"), list):
        raise ResultsFileError(f"{where}: 'steps' is not a list")
    for j, s in enumerate(run["steps"]):
        if not isinstance(s, dict) or isinstance(s.get("step"), bool) \
                or not isinstance(s.get("step"), int) or not 0 <= s["step"] <= MAX_STEP:
            raise ResultsFileError(f"{where}.steps[{j}]: no integer 'step' 0 to {MAX_STEP}")
        for key in ("entropy", "reward"):
            if s.get(key) is not None and not is_finite_number(s[key]):
                raise ResultsFileError(f"{where}.steps[{j}]: {key!r} is not a finite number "
                                       "(at most 1e15 in magnitude)")
    _check_pass1(f"{where}.pass1", run.get("pass1"))


def _check_pass1(where: str, pass1: Any) -> None:
    if pass1 is None:
        return
    if not isinstance(pass1, dict):
        raise ResultsFileError(f"{where} is not an object or null")
    for bench, r in pass1.items():
        acc = r.get("accuracies") if isinstance(r, dict) else None
        if not isinstance(acc, list) or not acc or not all(is_finite_number(a) for a in acc):
            raise ResultsFileError(f"{where}[{bench!r}]: 'accuracies' is not a list of numbers")


def load_single_policy(path: str | os.PathLike, data: Any = None) -> dict[str, Any]:
    """A single-policy export, checked whole (:func:`vdlib.report.results.read_json_file`, then
    every run, step and pass@1 entry, one run per arm and seed); a
    :class:`vdlib.report.results.ResultsFileError` naming the file, run and key otherwise.
    ``data``: the file's value, already read."""
    data = read_json_file(path) if data is None else data
    if not is_single_policy(data):
        raise ResultsFileError(f"{path}: not a single-policy results file (no 'runs' list)")
    check_pooling(path, data)
    seen: dict[tuple[str, int], int] = {}
    for i, run in enumerate(data["runs"]):
        _check_run(path, i, run)
        first = seen.setdefault((run["arm"], run["seed"]), i)
        if first != i:  # the per-seed tables and tests need one run per arm and seed
            raise ResultsFileError(f"{path}: runs[{first}] and runs[{i}] are both "
                                   f"{run['arm']} seed {run['seed']}")
    _check_pass1(f"{path}: base_pass1", data.get("base_pass1"))
    return data


def entropy_frame(data: Mapping[str, Any]) -> pd.DataFrame:
    """``arm, seed, step, entropy``: every logged step of every run (plots.entropy_figure's
    frame)."""
    rows = [{"arm": r["arm"], "seed": r["seed"], "step": s["step"], "entropy": s["entropy"]}
            for r in data["runs"] for s in r["steps"] if s.get("entropy") is not None]
    return pd.DataFrame(rows, columns=["arm", "seed", "step", "entropy"])


def _per_seed(frame: pd.DataFrame, window: int) -> pd.DataFrame:
    """Per arm and seed: entropy at the first logged step, the mean of the last ``window``
    logged steps, and the steps logged; arms and seeds in the file's order (a stable sort: an
    unstable one let the order of the table's rows depend on the sort's pivots)."""
    rows = []
    for (arm, seed), d in frame.sort_values("step", kind="stable").groupby(
            ["arm", "seed"], sort=False):
        rows.append({"arm": arm, "seed": seed, "first": float(d["entropy"].iloc[0]),
                     "last": float(d["entropy"].iloc[-window:].mean()),
                     "steps": int(d["step"].iloc[-1])})
    return pd.DataFrame(rows, columns=["arm", "seed", "first", "last", "steps"])


def _paper_ends(arm: str, window: int) -> tuple[float | None, float | None]:
    pts = paper_series(*_PAPER, "entropy", arm)
    if not pts:
        return None, None
    ys = [y for _, y in sorted(pts)]
    return ys[0], sum(ys[-window:]) / len(ys[-window:])


def entropy_table(data: Mapping[str, Any], window: int = ENTROPY_WINDOW) -> pd.DataFrame:
    """Per arm: seeds, the last step logged, entropy at the first step and over the last
    ``window`` steps (mean ± SE over seeds, SE from the sample SD), their ratio to the
    baseline's, and the paper's same two numbers (Qwen3-4B-Base, first 100 steps)."""
    per = _per_seed(entropy_frame(data), window)
    base = per[per["arm"] == "baseline"]["last"].mean() if "baseline" in set(per["arm"]) \
        else None
    rows = []
    for arm, d in per.groupby("arm", sort=False):
        first, last = mean_and_se(list(d["first"]), 1), mean_and_se(list(d["last"]), 1)
        p_first, p_last = _paper_ends(arm, window)
        b_first, b_last = _paper_ends("baseline", window)
        rows.append({
            "arm": arm_label(arm), "seeds": len(d), "last step": int(d["steps"].max()),
            "entropy, first step": format_cell(*first, "markdown", 3),
            f"entropy, last {window} steps": format_cell(*last, "markdown", 3),
            "last vs baseline": (f"{last[0] / base:.2f}x" if base else ""),
            "paper: first step": "" if p_first is None else f"{p_first:.3f}",
            f"paper: last {window} steps": "" if p_last is None else f"{p_last:.3f}",
            "paper: last vs baseline": ("" if p_last is None or not b_last
                                        else f"{p_last / b_last:.2f}x")})
    return pd.DataFrame(rows)


def entropy_effects(data: Mapping[str, Any], window: int = ENTROPY_WINDOW,
                    baseline: str = "baseline") -> pd.DataFrame:
    """Each arm against ``baseline`` on the per-seed entropy at the first step and over the
    last ``window`` steps: :func:`vdlib.report.results_contrasts.comparison_fields` (Welch and
    paired tests, permutation p-values), the ratio of the means (``ratio``: the paper's claim
    is about 2x over the last steps) and ``paper_direction`` (the arm's entropy the higher)."""
    per = _per_seed(entropy_frame(data), window)
    ref = per[per["arm"] == baseline]
    rows = []
    if ref.empty:
        return pd.DataFrame(rows)
    for arm, d in per.groupby("arm", sort=False):
        if arm == baseline:
            continue
        for what, label in (("first", "first step"), ("last", f"last {window} steps")):
            c = compare_seeds(dict(zip(ref["seed"], ref[what], strict=True)),
                              dict(zip(d["seed"], d[what], strict=True)))
            rows.append({"arm": arm_label(arm), "entropy": label,
                         **comparison_fields(c, ("n_baseline", "n_vd"), ("baseline", "vd")),
                         "ratio": round(c.mean_b / c.mean_a, 3) if c.mean_a else None,
                         "paper_direction": bool(c.diff > 0),
                         "welch_significant": c.welch_significant,
                         "paired_significant": c.paired_significant})
    return pd.DataFrame(rows)


def reward_table(data: Mapping[str, Any], window: int = ENTROPY_WINDOW) -> pd.DataFrame:
    """Per arm: seeds, the share of correct rollouts in % over all logged steps and over the
    last ``window`` (each step's batch-mean reward; mean ± SE over seeds, sample SD), and the
    steps with at least one correct rollout (mean over seeds, of the steps logged): how much
    GRPO had to act on. A step whose rollouts all earn 0 has every advantage 0, so at a share
    near 0 the entropy curves measure the sampler, not training."""
    per: dict[str, list[tuple[float, float, float, int]]] = {}
    for run in data["runs"]:
        r = [float(s["reward"]) for s in sorted(run["steps"], key=lambda s: s["step"])
             if s.get("reward") is not None]
        if r:
            per.setdefault(run["arm"], []).append(
                (100.0 * sum(r) / len(r), 100.0 * sum(r[-window:]) / len(r[-window:]),
                 float(sum(x > 0 for x in r)), len(r)))
    rows = []
    for arm, values in per.items():
        everything, last, hit, n = zip(*values, strict=True)
        rows.append({"arm": arm_label(arm), "seeds": len(values),
                     "correct rollouts, % (all steps)": format_cell(
                         *mean_and_se(list(everything), 1), "markdown", 2),
                     f"correct rollouts, % (last {window} steps)": format_cell(
                         *mean_and_se(list(last), 1), "markdown", 2),
                     "steps with a correct rollout": f"{sum(hit) / len(hit):.1f} of "
                                                     f"{sum(n) / len(n):.0f}"})
    return pd.DataFrame(rows, columns=["arm", "seeds", "correct rollouts, % (all steps)",
                                       f"correct rollouts, % (last {window} steps)",
                                       "steps with a correct rollout"])


def _seed_runs(data: Mapping[str, Any]) -> dict[str, dict[str, dict[int, list[float]]]]:
    """arm -> benchmark -> seed -> the seed's evaluation runs, pass@1 in %."""
    out: dict[str, dict[str, dict[int, list[float]]]] = {}
    for run in data["runs"]:
        for b, r in (run.get("pass1") or {}).items():
            out.setdefault(run["arm"], {}).setdefault(b, {})[run["seed"]] = \
                [100.0 * a for a in r["accuracies"]]
    return out


def _seed_pass1(data: Mapping[str, Any], per_seed: str | None = None
                ) -> dict[str, dict[str, dict[int, float]]]:
    """arm -> benchmark -> seed -> pass@1 in %: what the seed adds to a cell under ``per_seed``
    (default the file's, :func:`pooling_rule`): its first evaluation run or their mean."""
    rule = per_seed or pooling_rule(data).per_seed
    return {arm: {b: {s: seed_value(runs, rule) for s, runs in seeds.items()}
                  for b, seeds in by.items()} for arm, by in _seed_runs(data).items()}


def single_policy_pass1_table(data: Mapping[str, Any],
                              rule: PoolingRule | None = None) -> pd.DataFrame:
    """pass@1 in % per arm and benchmark: the notebooks' cell
    (:func:`vdlib.evaluation.pool_accuracies`) under ``rule`` (default the file's,
    :func:`pooling_rule`): mean ± SE over seeds, each its first evaluation run or the mean of
    its runs; the starting checkpoint (or an arm of one seed) over its runs; ``n`` values. And
    tab:vanilla_grpo's cell beside (no SE in the paper)."""
    rule = rule or pooling_rule(data)
    paper = paper_cells("tab:vanilla_grpo", "Qwen3-4B-Base")
    groups: dict[str, dict[str, dict[int | None, list[float]]]] = {}
    if data.get("base_pass1"):
        groups["base"] = {b: {None: [100.0 * a for a in r["accuracies"]]}
                          for b, r in data["base_pass1"].items()}
    groups.update(_seed_runs(data))
    rows = []
    for arm, by in groups.items():
        for b, runs in by.items():
            cell = paper.get(arm, {}).get(b)
            pooled = pool_accuracies(runs, rule.per_seed, rule.se_ddof)
            rows.append({"arm": "Base (no training)" if arm == "base" else arm_label(arm),
                         "benchmark": b, "ours": format_cell(pooled.mean, pooled.se,
                                                             "markdown", 2),
                         "n": len(pooled.accuracies), "paper Qwen3-4B-Base": "" if cell is None
                         else f"{cell['mean']:.1f}"})
    return pd.DataFrame(rows, columns=["arm", "benchmark", "ours", "n", "paper Qwen3-4B-Base"])


def single_policy_pass1_effects(data: Mapping[str, Any],
                                baseline: str = "baseline") -> pd.DataFrame:
    """Each arm against ``baseline`` on the per-seed pass@1 (%) of each benchmark both were
    evaluated on: :func:`vdlib.report.results_contrasts.comparison_fields` (Welch and paired
    tests, SE from the sample SD, permutation p-values) and ``paper_diff``, tab:vanilla_grpo's
    arm minus baseline (Qwen3-4B-Base; the paper's claim is that accuracy stays close)."""
    paper = paper_cells("tab:vanilla_grpo", "Qwen3-4B-Base")
    per = _seed_pass1(data)
    ref = per.get(baseline, {})
    rows = []
    for arm, by in per.items():
        if arm == baseline:
            continue
        for b, values in by.items():
            if b not in ref:
                continue
            c = compare_seeds(ref[b], values)
            cell_a, cell_b = paper.get(baseline, {}).get(b), paper.get(arm, {}).get(b)
            rows.append({"arm": arm_label(arm), "benchmark": b,
                         **comparison_fields(c, ("n_baseline", "n_vd"), ("baseline", "vd")),
                         "paper_diff": (None if cell_a is None or cell_b is None
                                        else round(cell_b["mean"] - cell_a["mean"], 1))})
    return pd.DataFrame(rows)


#: the first line of each table's ``.md``
NOTES = {
    "entropy": "Policy mean per-token entropy (nats/token): mean ± SE over seeds (sample SD); "
               "the paper's Qwen3-4B-Base curves (tab:vanilla_entropy) read the same way.",
    "entropy_effects": "Arm minus baseline on the per-seed entropy (vdlib.utils.stats."
                       "compare_seeds): Welch's t on Welch–Satterthwaite df, paired t by seed, "
                       "permutation p-values; ratio = arm mean / baseline mean.",
    "reward": "The reward signal: each step's batch-mean reward is its share of correct "
              "rollouts (binary reward); mean ± SE over seeds (sample SD). A step with no "
              "correct rollout gives GRPO no advantage to follow.",
    "pass1": "pass@1 in %: mean ± SE over n values, pooled as the notebooks pool (the rule "
             "below the table); n = seeds (the base: its evaluation runs); the paper's "
             "tab:vanilla_grpo cells beside (Qwen3-4B-Base).",
    "pass1_effects": "Arm minus baseline on the per-seed pass@1 in % (each seed's value under "
                     "evaluation.per_seed, below; vdlib.utils.stats."
                     "compare_seeds; SE from the sample SD): Welch's t on Welch–Satterthwaite "
                     "df, paired t by seed, permutation p-values; paper_diff = "
                     "tab:vanilla_grpo's arm minus baseline (Qwen3-4B-Base).",
}


def single_policy_tables(data: Mapping[str, Any],
                         rule: PoolingRule | None = None) -> list[tuple[str, pd.DataFrame]]:
    """``(name, table)`` of every table the report writes, in order: ``entropy``,
    ``entropy_effects``, ``reward``, ``pass1`` (pooled under ``rule``, default the file's) and
    ``pass1_effects``."""
    rule = rule or pooling_rule(data)
    return [("entropy", entropy_table(data)), ("entropy_effects", entropy_effects(data)),
            ("reward", reward_table(data)), ("pass1", single_policy_pass1_table(data, rule)),
            ("pass1_effects", single_policy_pass1_effects(data))]


def single_policy_markdown(data: Mapping[str, Any]) -> str:
    """Every table's ``.md`` text (:func:`single_policy_tables`, each headed by its
    :data:`NOTES` line, the pooling rule under it), one after another: what docs/RESULTS.md's
    block of a single-policy file holds (without the last newline)."""
    rule = pooling_rule(data)
    return "\n".join(table_markdown(t, NOTES[name], rule)
                     for name, t in single_policy_tables(data, rule)).removesuffix("\n")


def single_policy_report(path: str | os.PathLike, out_dir: str | os.PathLike,
                         name: str | None = None, data: Any = None) -> list[Path]:
    """``<name>_entropy_trajectory.{png,pdf,csv}`` (the figure), ``<name>_entropy``,
    ``<name>_entropy_effects``, ``<name>_reward``, ``<name>_pass1`` and ``<name>_pass1_effects``
    (``.md`` headed by its rule, and ``.csv``) and ``<name>_report.json``; the written paths.
    Nothing is written until the file is checked and every table built (``data``: the file's
    value, already read)."""
    from vdlib.report import plots

    data = load_single_policy(path, data)
    name = name or Path(path).stem
    rule = pooling_rule(data)
    tables = single_policy_tables(data, rule)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fig = plots.entropy_figure(entropy_frame(data), out, name=f"{name}_entropy_trajectory")
    meta = {k: v for k, v in data.items() if k not in ("runs", "base_pass1")}
    return write_report(out, name, path, meta, list(fig.paths), tables, NOTES, rule)
