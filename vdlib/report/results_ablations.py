"""docs/RESULTS.md's block for each of issue 30's ablations at GPU scale (phase ablation,
annealed alpha, entropy baselines, the reward-ordering question), each printed from its
committed results file alone (``docs/results/gpu_small_<name>.json``).

A block (:func:`ablation_block`): which runs the file holds (and which it shares with the main
table), the per-iteration mean ± SE over seeds (sample SD, as the main table's section) of
every arm, pass@1 of the final solvers (from each run's correct counts, pooled as the notebooks
and ``vdlib results`` pool: the file's ``evaluation.per_seed`` and ``evaluation.se_ddof``,
printed under the table), and the tests the paper's claims call for at the last iteration, each
arm against its reference (:func:`vdlib.utils.stats.compare_seeds`: Welch's t with its df, the
paired t by seed on n - 1 df), the growth of cumulative Vendi (last iteration minus the first,
per seed) included. :data:`ABLATIONS` names each file's arms and tests; a new experiment's file
gets a block by an entry there and a marker in the markdown
(:mod:`vdlib.report.results_blocks`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from vdlib.config import layout
from vdlib.evaluation.stats import seed_value
from vdlib.report.frames import arm_label
from vdlib.report.results import pooling_rule
from vdlib.report.results_file import ResultsFileError
from vdlib.report.results_main_table import Records, num, pval
from vdlib.utils.stats import compare_seeds, mean_and_se

__all__ = ["Ablation", "ABLATIONS", "METRICS", "PASS1", "TESTED", "ablation_block", "goal_rows",
           "GOAL_MARGIN", "GOAL_SHARE"]

#: metric -> (label, decimals); per iteration in the table, tested at the last iteration
METRICS = {"valid_fraction": ("valid fraction", 3), "self_bleu": ("Self-BLEU ↓", 3),
           "vendi": ("Vendi ↑", 1), "cumulative_vendi": ("cumulative Vendi ↑", 1),
           "curriculum_size": ("curriculum size", 1),
           "kept_fraction": ("kept fraction (proposer's training mask)", 3)}
PASS1 = {"pass1_gsm8k": ("GSM8K pass@1 (%)", 2), "pass1_math500": ("MATH500 pass@1 (%)", 2)}
GROWTH = ("cumulative Vendi growth ↑", 2)
#: KL-Cov's and Clip-Cov's activity (:mod:`vdlib.metrics.cov_activity`), per iteration the
#: seeds' mean of each iteration's per-step mean; rows only where a record carries them
ACTIVITY = {"kl_cov_active_fraction": ("KL-Cov: selected tokens with log π ≠ log π_old", 3),
            "kl_cov_penalty": ("KL-Cov: penalty (loss term)", 6),
            "kl_cov_grad_ratio": ("KL-Cov: penalty's / policy term's gradient", 3),
            "clip_cov_selected_fraction": ("Clip-Cov: share of tokens cut", 4)}
#: the alpha each iteration generated at (``alpha_gen``; the proposer's training used the same
#: in every committed arm), rows only where a record carries it (files exported before it was
#: recorded do not)
ALPHA = {"alpha_gen": ("alpha (generation)", 4)}
#: issue 54's goal for an adaptive arm at the last iteration: a mean valid fraction within
#: GOAL_MARGIN of the baseline's while keeping at least GOAL_SHARE of VD75's Vendi gain
GOAL_MARGIN, GOAL_SHARE = 0.05, 0.5
TESTED = ("valid_fraction", "self_bleu", "vendi", "growth", "pass1_gsm8k", "pass1_math500")
#: the results file a shared run came from, as the runs map's ``source`` names it
MAIN = "gpu_small_main"


@dataclass(frozen=True)
class Ablation:
    """One experiment's arms in column order, its (arm, reference) tests and, for an arm with
    issue 54's goal (the adaptive schedule), that arm's name."""

    arms: tuple[str, ...]
    tests: tuple[tuple[str, str], ...]
    goal: str | None = None


#: results file stem -> its ablation
ABLATIONS = {
    "gpu_small_phase": Ablation(("baseline", "vd75", "train_only", "gen_only"),
                                (("train_only", "baseline"), ("gen_only", "baseline"),
                                 ("gen_only", "train_only"), ("vd75", "gen_only"),
                                 ("vd75", "train_only"))),
    "gpu_small_anneal": Ablation(("baseline", "vd75", "anneal"),
                                 (("anneal", "vd75"), ("anneal", "baseline"))),
    "gpu_small_entropy": Ablation(("baseline", "vd75", "kl_cov", "kl_cov_inert", "clip_cov"),
                                  (("kl_cov", "baseline"), ("kl_cov", "kl_cov_inert"),
                                   ("clip_cov", "baseline"), ("vd75", "kl_cov"),
                                   ("vd75", "clip_cov"))),
    "gpu_small_fail_neg": Ablation(("baseline", "vd75", "baseline_fail_neg", "vd75_fail_neg"),
                                   (("baseline_fail_neg", "baseline"), ("vd75_fail_neg", "vd75"),
                                    ("vd75_fail_neg", "baseline_fail_neg"))),
    "gpu_small_adaptive": Ablation(("baseline", "vd85", "vd75", "anneal", "adaptive"),
                                   (("adaptive", "vd75"), ("adaptive", "baseline"),
                                    ("adaptive", "anneal")), goal="adaptive"),
}


def goal_rows(mean: Callable[[str, str], float | None], arm: str, t: int,
              margin: float = GOAL_MARGIN, share: float = GOAL_SHARE) -> list[dict[str, Any]]:
    """Issue 54's goal at iteration ``t`` from ``mean(arm, metric)`` (the seeds' mean, None
    where missing): ``arm``'s valid fraction at least the baseline's minus ``margin``, and its
    gain over the baseline in Vendi (the goal's words; cumulative Vendi beside it) at least
    ``share`` of VD75's. One row per quantity: ``quantity``, ``value``, ``threshold``, ``met``
    (None where an arm is missing).

    >>> m = {("baseline", "valid_fraction"): 0.99, ("adaptive", "valid_fraction"): 0.95,
    ...      ("baseline", "vendi"): 40.0, ("vd75", "vendi"): 52.0, ("adaptive", "vendi"): 47.0}
    >>> [(r["value"], r["met"]) for r in goal_rows(lambda a, k: m.get((a, k)), "adaptive", 3)]
    [(0.95, True), (0.5833333333333334, True), (None, None)]
    """
    rows = []
    base, mine = mean("baseline", "valid_fraction"), mean(arm, "valid_fraction")
    rows.append({"quantity": f"valid fraction ({arm_label(arm)}), iteration {t}", "value": mine,
                 "threshold": None if base is None else base - margin,
                 "met": None if base is None or mine is None else mine >= base - margin})
    for metric in ("vendi", "cumulative_vendi"):
        b, v, m = mean("baseline", metric), mean("vd75", metric), mean(arm, metric)
        kept = None if None in (b, v, m) or v == b else (m - b) / (v - b)
        rows.append({"quantity": f"share of VD75's {metric} gain kept, iteration {t}",
                     "value": kept, "threshold": share,
                     "met": None if kept is None else kept >= share})
    return rows


class AblationRecords(Records):
    """:class:`Records` with pass@1 per seed from its runs' correct counts and the cumulative
    Vendi growth."""

    def by_seed(self, arm: str, metric: str, t: int) -> dict[int, float]:
        """pass@1: what each seed adds to a pooled cell under the file's evaluation.per_seed
        (:func:`vdlib.evaluation.seed_value`), from its runs' correct counts (the records round
        each value to 4 decimals, which would give two seeds' equal differences a spread of
        1e-4 and the paired t of that rounding); every other metric as recorded."""
        items = (self.data.get("evaluation") or {}).get("items") or {}  # the file's own count
        n = items.get(metric.removeprefix("pass1_")) if metric in PASS1 else None
        if n is None:
            return super().by_seed(arm, metric, t)
        rule = pooling_rule(self.data).per_seed
        return {r["seed"]: seed_value([round(v * n / 100) * 100 / n for v in runs], rule)
                for r in self.recs if r["arm"] == arm and r["iteration"] == t
                and (runs := r.get(f"{metric}_runs"))}

    def values(self, arm: str, metric: str) -> dict[int, float]:
        """Per seed at the last iteration; ``growth``: cumulative Vendi's last minus first."""
        last = self.iterations[-1]
        if metric != "growth":
            return self.by_seed(arm, metric, last)
        first = self.by_seed(arm, "cumulative_vendi", self.iterations[0])
        end = self.by_seed(arm, "cumulative_vendi", last)
        return {s: end[s] - first[s] for s in end if s in first}

    def cell(self, arm: str, metric: str, t: int, d: int) -> str:
        """mean ± SE (n): the sample SD, but pass@1 under the file's evaluation.se_ddof (the
        notebooks' cell: one value a seed with several seeds)."""
        v = self.by_seed(arm, metric, t)
        if not v:
            return "–"
        if metric not in PASS1 or len(v) < 2:
            return f"{super().cell(arm, metric, t, d)} (n={len(v)})"
        m, se = mean_and_se(list(v.values()), ddof=pooling_rule(self.data).se_ddof)
        return f"{num(m, d)} ± {num(se, d)} (n={len(v)})"


def _label(metric: str) -> tuple[str, int]:
    return GROWTH if metric == "growth" else {**METRICS, **PASS1}[metric]


def _growth_cell(x: AblationRecords, arm: str) -> str:
    _, d = GROWTH
    v = list(x.values(arm, "growth").values())
    m, se = mean_and_se(v, ddof=1) if v else (None, None)
    return ("–" if m is None else f"{num(m, d)}" + ("" if se is None else f" ± {num(se, d)}")
            + f" (n={len(v)})")


def _test_row(x: AblationRecords, arm: str, ref: str, metric: str) -> str | None:
    a, b = x.values(ref, metric), x.values(arm, metric)
    if not a or not b:
        return None
    label, d = _label(metric)
    c = compare_seeds(a, b)
    welch = ("–" if c.welch_t is None
             else f"{num(c.welch_t, 2)} ({c.welch_df:.1f}), {pval(c.welch_p)}")
    paired = ("–" if c.paired_t is None
              else f"{num(c.paired_t, 2)} ({c.paired_df}), {pval(c.paired_p)}")
    return (f"| {arm_label(arm)} − {arm_label(ref)} | {label} | "
            f"{num(c.diff, d + 1, sign=True)} | {welch} | {paired} |")


def ablation_block(data: Mapping[str, Any], stem: str) -> str:
    """The block of the results file ``stem`` (one of :data:`ABLATIONS`), from its value
    ``data`` (a checked results dict)."""
    if stem not in ABLATIONS:
        raise ResultsFileError(f"{stem}: no ablation of that name; allowed: "
                               f"{', '.join(ABLATIONS)}")
    ab = ABLATIONS[stem]
    x = AblationRecords(data)
    last = x.iterations[-1]
    runs = x.data["runs"]
    shared = [k for k, r in runs.items() if MAIN in str(r.get("source", ""))]
    seeds = {a: ",".join(str(s) for s in x.seeds if layout.arm_run_id(a, s) in runs)
             for a in ab.arms}
    lines = [f"{len(runs)} runs of {x.data.get('experiment', stem.removeprefix('gpu_small_'))} ("
             + "; ".join(f"{a}: seeds {seeds[a]}" for a in ab.arms)
             + f"); shared with the main table, not rerun: {', '.join(shared) or 'none'}.", "",
             "| metric | it. | " + " | ".join(arm_label(a) for a in ab.arms) + " |",
             "|---|---|" + "---|" * len(ab.arms)]
    for metric, (label, d) in METRICS.items():
        for i, t in enumerate(x.iterations):
            lines.append(f"| {label if i == 0 else ''} | {t} | "
                         + " | ".join(x.cell(a, metric, t, d) for a in ab.arms) + " |")
    for metric, (label, d) in {**ALPHA, **ACTIVITY}.items():
        if any(x.by_seed(a, metric, t) for a in ab.arms for t in x.iterations):
            for i, t in enumerate(x.iterations):
                lines.append(f"| {label if i == 0 else ''} | {t} | "
                             + " | ".join(x.cell(a, metric, t, d) for a in ab.arms) + " |")
    for metric, (label, d) in PASS1.items():
        lines.append(f"| {label} | {last} | "
                     + " | ".join(x.cell(a, metric, last, d) for a in ab.arms) + " |")
    lines.append(f"| {GROWTH[0]} | 1→{last} | "
                 + " | ".join(_growth_cell(x, a) for a in ab.arms) + " |")
    lines += ["", f"pass@1 rows: {pooling_rule(x.data).note()}"]
    lines += ["", f"| test (iteration {last}) | metric | diff | Welch t (df), p | "
              "paired t (df), p |", "|---|---|---|---|---|"]
    lines += [row for arm, ref in ab.tests for metric in TESTED
              if (row := _test_row(x, arm, ref, metric)) is not None]
    if ab.goal:
        others = [a for a in ab.arms if a not in ("baseline", "vd75", ab.goal)]
        lines += ["", _goal_table(x, (ab.goal, *others), last)]
    return "\n".join(lines)


def _goal_table(x: AblationRecords, arms: tuple[str, ...], t: int) -> str:
    """Issue 54's goal for ``arms[0]`` and, beside it, the same quantities of the file's other
    masked arms (where a fixed alpha or a timetable stands on the same trade-off)."""
    def mean(a: str, metric: str) -> float | None:
        v = list(x.by_seed(a, metric, t).values())
        return sum(v) / len(v) if v else None

    lines = [f"| goal (issue 54: a valid fraction within {GOAL_MARGIN} of the baseline's and at "
             f"least {GOAL_SHARE:.0%} of VD75's Vendi gain, iteration {t}) | value | threshold "
             "| met |", "|---|---|---|---|"]
    for a in arms:
        for r in goal_rows(mean, a, t):
            met = "–" if r["met"] is None else ("yes" if r["met"] else "no")
            value, threshold = ("–" if v is None else num(v, 3)
                                for v in (r["value"], r["threshold"]))
            quantity = r["quantity"].replace(f", iteration {t}", "")
            if not quantity.startswith("valid"):
                quantity = f"{quantity} ({arm_label(a)})"
            lines.append(f"| {quantity} | {value} | {threshold} | {met} |")
    return "\n".join(lines)
