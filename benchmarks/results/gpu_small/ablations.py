"""docs/RESULTS.md's sections on issue 30's ablations at GPU scale (phase ablation, annealed
alpha, and each further experiment as its merged file lands), regenerated from the committed
docs/results/gpu_small_<name>.json alone. Run at the repository root:

    python benchmarks/results/gpu_small/ablations.py            # print every block
    python benchmarks/results/gpu_small/ablations.py --write    # replace them in docs/RESULTS.md

Each block sits between ``<!-- BEGIN ablations.py:NAME -->`` and ``<!-- END ablations.py:NAME -->``;
tests/test_results_experiments.py checks that it is what this script prints, and that the
prose after it in its section quotes only numbers the block holds.

A block: which runs the file holds (and which it shares with the main table), the per-iteration
mean ± SE over seeds (sample SD, as the main table's section) of every arm, pass@1 of the final
solvers (from each run's correct counts, pooled as the notebooks and ``vdlib results`` pool: the
file's ``evaluation.per_seed`` and ``evaluation.se_ddof``, printed under the table), and the
tests the paper's claims call for at the last
iteration, each arm against its reference (:func:`vdlib.utils.stats.compare_seeds`: Welch's t
with its df, the paired t by seed on n - 1 df), the growth of cumulative Vendi (last iteration
minus the first, per seed) included.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from vdlib.evaluation.stats import seed_value
from vdlib.report.frames import arm_label
from vdlib.report.results import pooling_rule
from vdlib.utils.stats import compare_seeds

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
RESULTS_MD = ROOT / "docs" / "RESULTS.md"
SCRIPT = "ablations.py"
BEGIN, END = f"<!-- BEGIN {SCRIPT}:{{}} -->", f"<!-- END {SCRIPT}:{{}} -->"

_spec = importlib.util.spec_from_file_location("gpu_small_compare", HERE / "compare.py")
compare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare)

#: metric -> (label, decimals); per iteration in the table, tested at the last iteration
METRICS = {"valid_fraction": ("valid fraction", 3), "self_bleu": ("Self-BLEU ↓", 3),
           "vendi": ("Vendi ↑", 1), "cumulative_vendi": ("cumulative Vendi ↑", 1),
           "curriculum_size": ("curriculum size", 1),
           "kept_fraction": ("kept fraction (proposer's training mask)", 3)}
PASS1 = {"pass1_gsm8k": ("GSM8K pass@1 (%)", 2), "pass1_math500": ("MATH500 pass@1 (%)", 2)}
GROWTH = ("cumulative Vendi growth ↑", 2)
TESTED = ("valid_fraction", "self_bleu", "vendi", "growth", "pass1_gsm8k", "pass1_math500")


@dataclass(frozen=True)
class Ablation:
    """One experiment's file, its arms in column order and its (arm, reference) tests."""

    json: str
    arms: tuple[str, ...]
    tests: tuple[tuple[str, str], ...]


ABLATIONS = {
    "phase": Ablation("gpu_small_phase.json", ("baseline", "vd75", "train_only", "gen_only"),
                      (("train_only", "baseline"), ("gen_only", "baseline"),
                       ("gen_only", "train_only"), ("vd75", "gen_only"),
                       ("vd75", "train_only"))),
    "anneal": Ablation("gpu_small_anneal.json", ("baseline", "vd75", "anneal"),
                       (("anneal", "vd75"), ("anneal", "baseline"))),
    # not run to the end yet: their blocks appear once docs/results/<json> is committed
    "entropy": Ablation("gpu_small_entropy.json", ("baseline", "vd75", "kl_cov", "clip_cov"),
                        (("kl_cov", "baseline"), ("clip_cov", "baseline"), ("vd75", "kl_cov"),
                         ("vd75", "clip_cov"))),
    "fail_neg": Ablation("gpu_small_fail_neg.json",
                         ("baseline", "vd75", "baseline_fail_neg", "vd75_fail_neg"),
                         (("baseline_fail_neg", "baseline"), ("vd75_fail_neg", "vd75"),
                          ("vd75_fail_neg", "baseline_fail_neg"))),
}


class _Data(compare.Data):
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
        m, se = compare.mean_and_se(list(v.values()), ddof=pooling_rule(self.data).se_ddof)
        return f"{compare.num(m, d)} ± {compare.num(se, d)} (n={len(v)})"


def _label(metric: str) -> tuple[str, int]:
    return GROWTH if metric == "growth" else {**METRICS, **PASS1}[metric]


def block(name: str) -> str:
    ab = ABLATIONS[name]
    x = _Data(ROOT / "docs" / "results" / ab.json)
    last = x.iterations[-1]
    runs = x.data["runs"]
    shared = [k for k, r in runs.items() if "gpu_small_main" in str(r.get("source", ""))]
    seeds = {a: ",".join(str(s) for s in x.seeds if f"{a}-seed{s}" in runs) for a in ab.arms}
    lines = [f"{len(runs)} runs of {x.data.get('experiment', name)} ("
             + "; ".join(f"{a}: seeds {seeds[a]}" for a in ab.arms)
             + f"); shared with the main table, not rerun: {', '.join(shared) or 'none'}.", "",
             "| metric | it. | " + " | ".join(arm_label(a) for a in ab.arms) + " |",
             "|---|---|" + "---|" * len(ab.arms)]
    for metric, (label, d) in METRICS.items():
        for i, t in enumerate(x.iterations):
            lines.append(f"| {label if i == 0 else ''} | {t} | "
                         + " | ".join(x.cell(a, metric, t, d) for a in ab.arms) + " |")
    for metric, (label, d) in PASS1.items():
        lines.append(f"| {label} | {last} | "
                     + " | ".join(x.cell(a, metric, last, d) for a in ab.arms) + " |")
    g_label, g_d = GROWTH
    pass1_rule = pooling_rule(x.data)
    cells = []
    for a in ab.arms:
        v = list(x.values(a, "growth").values())
        m, se = compare.mean_and_se(v, ddof=1) if v else (None, None)
        cells.append("–" if m is None else f"{compare.num(m, g_d)}"
                     + ("" if se is None else f" ± {compare.num(se, g_d)}") + f" (n={len(v)})")
    lines.append(f"| {g_label} | 1→{last} | " + " | ".join(cells) + " |")
    lines += ["", f"pass@1 rows: {pass1_rule.note()}"]
    lines += ["", f"| test (iteration {last}) | metric | diff | Welch t (df), p | "
              "paired t (df), p |", "|---|---|---|---|---|"]
    for arm, ref in ab.tests:
        for metric in TESTED:
            a, b = x.values(ref, metric), x.values(arm, metric)
            if not a or not b:
                continue
            label, d = _label(metric)
            c = compare_seeds(a, b)
            welch = ("–" if c.welch_t is None else
                     f"{compare.num(c.welch_t, 2)} ({c.welch_df:.1f}), {compare.pval(c.welch_p)}")
            paired = ("–" if c.paired_t is None else
                      f"{compare.num(c.paired_t, 2)} ({c.paired_df}), "
                      f"{compare.pval(c.paired_p)}")
            lines.append(f"| {arm_label(arm)} − {arm_label(ref)} | {label} | "
                         f"{compare.num(c.diff, d + 1, sign=True)} | {welch} | {paired} |")
    return "\n".join(lines)


def blocks() -> dict[str, str]:
    return {name: block(name) for name, ab in ABLATIONS.items()
            if (ROOT / "docs" / "results" / ab.json).exists()}


def embedded(text: str) -> dict[str, str]:
    """This script's blocks in a markdown text."""
    return compare.embedded(text, SCRIPT)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="replace the blocks in docs/RESULTS.md")
    args = ap.parse_args(argv)
    new = blocks()
    if not args.write:
        for name, body in new.items():
            sys.stdout.write(f"{BEGIN.format(name)}\n{body}\n{END.format(name)}\n\n")
        return 0
    text = RESULTS_MD.read_text(encoding="utf-8")
    missing = [n for n in new if n not in embedded(text)]
    if missing:
        sys.stderr.write(f"no block for {', '.join(missing)} in {RESULTS_MD}: add "
                         f"{BEGIN.format(missing[0])} / {END.format(missing[0])} first\n")
        return 1
    RESULTS_MD.write_text(compare.write(text, new, SCRIPT), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
