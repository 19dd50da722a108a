"""The main table's blocks of docs/RESULTS.md (the comparison of the baseline, VD85 and VD75 at
GPU scale), each printed from the results file alone (``docs/results/gpu_small_main.json``):
:data:`MAIN_TABLES` maps a block's name to its function of :class:`Records`.

Arm-vs-arm tests come from :func:`vdlib.utils.stats.compare_seeds` (Welch's t with the sample
SDs and Welch–Satterthwaite df; the paired t by seed); cells are mean ± SE with the sample SD,
except the pass@1 cells, which pool each seed's evaluation runs as the notebooks and ``vdlib
results`` do (:func:`vdlib.evaluation.pool_accuracies` under the file's ``evaluation.per_seed``
and ``evaluation.se_ddof``, :func:`vdlib.report.results_file.pooling_rule`), the rule printed
under the table. :mod:`vdlib.report.results_blocks` writes them into the markdown.

>>> num(-1234.5, 1, sign=True)
'−1,234.5'
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Mapping
from typing import Any

from scipy import stats as st

from vdlib.evaluation.stats import pool_accuracies
from vdlib.report.paper_values import paper_series
from vdlib.report.results import pass1_frame, pass1_runs, pooling_rule
from vdlib.utils.stats import ALPHA, compare_seeds, mean_and_se

__all__ = ["ARMS", "METRICS", "Records", "MAIN_TABLES", "minus", "num", "pval"]

#: the arms of the main table, in column order
ARMS = ("baseline", "vd85", "vd75")
LABEL = {"baseline": "Baseline", "vd85": "VD85", "vd75": "VD75"}
PAPER = ("Qwen3-4B", "Qwen3-8B")
#: metric -> (label, decimals, first iteration shown, paper figure or None, direction)
METRICS = {
    "self_bleu": ("Self-BLEU ↓", 3, 1, "fig:diversity_combined", -1),
    "vendi": ("Vendi ↑ (MiniLM)", 1, 1, "fig:diversity_combined", 1),
    "novelty_rate": ("novelty ↑", 2, 2, "fig:diversity_combined", 1),
    "cumulative_vendi": ("cumulative Vendi ↑", 1, 2, "fig:embedding_diversity", 1),
    "unique_tokens": ("distinct token ids ↑", 0, 1, None, 1),
    "proposer_entropy": ("proposer entropy", 2, 1, "fig:diversity_combined", 1),
    "valid_fraction": ("valid fraction", 3, 1, None, 0),
    "curriculum_size": ("curriculum size", 1, 1, None, 0),
    "mean_acc": ("solver acc on its own questions", 3, 1, None, 0),
}
SHORT = {"self_bleu": "Self-BLEU", "vendi": "Vendi", "novelty_rate": "novelty",
         "cumulative_vendi": "cumulative Vendi", "unique_tokens": "distinct token ids",
         "proposer_entropy": "proposer entropy"}
DIVERSITY = ("self_bleu", "vendi", "novelty_rate", "cumulative_vendi")


def minus(text: str) -> str:
    """A typeset minus sign (RESULTS.md uses −)."""
    return re.sub(r"(?<![\w.])-(?=\d)", "−", text)


def num(x: float, d: int, sign: bool = False) -> str:
    """``x`` with ``d`` decimals, a thousands separator and a typeset minus (``sign``: a + too)."""
    return minus(f"{x:+,.{d}f}" if sign else f"{x:,.{d}f}")


def pval(p: float | None) -> str:
    """A two-sided p as the blocks print it: a dash where there is none, ``< 0.001`` below."""
    return "–" if p is None else ("< 0.001" if p < 0.001 else f"{p:.3f}")


class Records:
    """A results file's trained records (the ``base`` record aside), their iterations and seeds,
    read per arm, metric and iteration."""

    def __init__(self, data: Mapping[str, Any]):
        self.data = data
        self.recs = [r for r in self.data["records"] if r["arm"] != "base"]
        self.iterations = sorted({r["iteration"] for r in self.recs})
        self.seeds = sorted({r["seed"] for r in self.recs})

    def by_seed(self, arm: str, metric: str, t: int) -> dict[int, float]:
        """Seed -> the arm's value of ``metric`` at iteration ``t`` (where recorded)."""
        return {r["seed"]: float(r[metric]) for r in self.recs
                if r["arm"] == arm and r["iteration"] == t and r.get(metric) is not None}

    def cell(self, arm: str, metric: str, t: int, d: int) -> str:
        """``mean ± SE`` over seeds (sample SD), ``d`` decimals."""
        m, se = mean_and_se(list(self.by_seed(arm, metric, t).values()), ddof=1)
        return num(m, d) if se is None else f"{num(m, d)} ± {num(se, d)}"


def _paper(label: str | None, metric: str, group: str, t: int, d: int) -> str:
    if label is None:
        return ""
    pts = {arm: dict(paper_series(label, group, metric, arm)) for arm in ("baseline", "vd75")}
    if t not in pts["baseline"] or t not in pts["vd75"]:
        return ""
    return f"{num(pts['baseline'][t], d)} → {num(pts['vd75'][t], d)}"


def block_meta(x: Records) -> str:
    d = x.data
    n_runs = len(d["runs"])
    return (f"{n_runs} runs: {len(d['arms'])} arms ({', '.join(d['arms'])}) × "
            f"{len(x.seeds)} seeds ({', '.join(map(str, x.seeds))}), iterations "
            f"{x.iterations[0]}-{x.iterations[-1]} each; K = {d['K']:,} questions per "
            f"iteration, M = {d['M']} solver answers per question, {d['proposer_steps']} "
            f"proposer and {d['solver_steps']} solver steps per phase; vLLM "
            f"{d['vllm_version']}; cards: {d['card']}.")


def block_rules(x: Records) -> str:
    n = len(x.seeds)
    crit = {df: st.t.ppf(1 - ALPHA / 2, df) for df in (2, 3, 4)}
    dfs = [c.welch_df for v in _verdicts(x).values() for _, c in v if c.welch_df is not None]
    perm = 2 / math.comb(2 * n, n)
    flip = 2 / 2 ** n
    rule = pooling_rule(x.data)
    return "\n".join([
        f"- n = {n} seeds per arm. Every ± below, the pass@1 cells aside, is the SE with the "
        f"sample SD (ddof 1). The pass@1 cells pool as the notebooks and `vdlib results` do "
        f"(evaluation.per_seed = {rule.per_seed}, evaluation.se_ddof = {rule.se_ddof}; "
        f"from {rule.source}). The population SD (ddof 0, by which the paper prints its "
        f"pass@1 SEs) is smaller than the sample SD by "
        f"sqrt({n - 1}/{n}) = {math.sqrt((n - 1) / n):.3f}, so a ratio difference / SE built "
        f"on it is larger by sqrt({n}/{n - 1}) = sqrt({n / (n - 1):.1f}) = "
        f"{math.sqrt(n / (n - 1)):.3f}.",
        f"- Two-sided {ALPHA:.0%} critical t: {crit[2]:.2f} at 2 df (the paired test of {n} "
        f"seeds), {crit[3]:.2f} at 3 df, {crit[4]:.2f} at 4 df (Welch's df here: "
        f"{min(dfs):.1f} to {max(dfs):.1f}). \"2 SE\" is no {ALPHA:.0%} test at these df.",
        f"- No exact permutation test can reach p < {ALPHA} with {n} seeds a side: relabelling "
        f"the {2 * n} values gives at best p = {perm:.2f}, flipping the signs of {n} per-seed "
        f"differences at best p = {flip:.2f}.",
    ])


def block_per_iteration(x: Records) -> str:
    head = ("| metric | it. | " + " | ".join(LABEL[a] for a in ARMS)
            + " | paper 4B | paper 8B |\n|---|---|---|---|---|---|---|")
    rows = []
    for metric, (label, d, first, fig, _) in METRICS.items():
        for i, t in enumerate(t for t in x.iterations if t >= first):
            cells = [x.cell(a, metric, t, d) for a in ARMS]
            paper = [_paper(fig, metric, g, t, d) for g in PAPER]
            rows.append(f"| {label if i == 0 else ''} | {t} | " + " | ".join(cells + paper)
                        + " |")
    return head + "\n" + "\n".join(rows)


def _mark(c) -> str:
    marks = [name for name, ok in (("Welch", c.welch_significant),
                                   ("paired", c.paired_significant)) if ok]
    return " and ".join(marks) if marks else "neither"


def block_effects(x: Records) -> str:
    head = ("| arm − baseline | metric | it. | difference ± SE | Welch t (df) | Welch p | "
            "paired t(df) | paired p | p < 0.05 |\n|---|---|---|---|---|---|---|---|---|")
    rows = []
    for arm in ("vd75", "vd85"):
        for metric, (_, d, first, _, _) in METRICS.items():
            if metric not in (*DIVERSITY, "unique_tokens", "proposer_entropy"):
                continue
            for t in (t for t in x.iterations if t >= first):
                c = compare_seeds(x.by_seed("baseline", metric, t), x.by_seed(arm, metric, t))
                rows.append(
                    f"| {LABEL[arm]} | {SHORT[metric]} | {t} | "
                    f"{num(c.diff, d + 1, True)} ± {num(c.se, d + 1)} | "
                    f"{num(c.welch_t, 2, True)} ({c.welch_df:.1f}) | {pval(c.welch_p)} | "
                    f"{num(c.paired_t, 2, True)} ({c.paired_df}) | {pval(c.paired_p)} | "
                    f"{_mark(c)} |")
    return head + "\n" + "\n".join(rows)


def _verdicts(x: Records) -> dict[tuple[str, str], list[tuple[int, object]]]:
    out: dict[tuple[str, str], list[tuple[int, object]]] = {}
    for arm in ("vd75", "vd85"):
        for metric in (*DIVERSITY, "unique_tokens", "proposer_entropy"):
            first = METRICS[metric][2]
            out[(arm, metric)] = [
                (t, compare_seeds(x.by_seed("baseline", metric, t), x.by_seed(arm, metric, t)))
                for t in x.iterations if t >= first]
    return out


def block_verdicts(x: Records) -> str:
    """Which effects pass which test, in words."""
    lines = []
    for arm in ("vd75", "vd85"):
        for test, attr in (("Welch", "welch_significant"), ("paired", "paired_significant")):
            passed = []
            for metric in (*DIVERSITY, "unique_tokens", "proposer_entropy"):
                its = [t for t, c in _verdicts(x)[(arm, metric)] if getattr(c, attr)]
                if its:
                    passed.append(f"{SHORT[metric]} "
                                  f"(iteration{'s' if len(its) > 1 else ''} "
                                  f"{', '.join(map(str, its))})")
            lines.append(f"- {LABEL[arm]}, {test} p < {ALPHA}: "
                         + ("; ".join(passed) if passed else "nothing") + ".")
    ts = [abs(c.paired_t) for (arm, metric), v in _verdicts(x).items() if metric in DIVERSITY
          for _, c in v]
    df = len(x.seeds) - 1
    lines.append(f"- Paired t over the four diversity metrics (novelty and cumulative Vendi from "
                 f"iteration 2), both arms: |t| from {min(ts):.2f} to {max(ts):.2f} on "
                 f"{df} df (critical {st.t.ppf(1 - ALPHA / 2, df):.2f}).")
    return "\n".join(lines)


def _rel(base: float, vd: float) -> str:
    return minus(f"{100 * (vd - base) / base:+.0f} %")


def block_relative(x: Records) -> str:
    cols = [("self_bleu", 1), ("self_bleu", 3), ("vendi", 1), ("vendi", 3), ("novelty_rate", 2),
            ("novelty_rate", 3), ("cumulative_vendi", 2), ("cumulative_vendi", 3)]
    head = ("| VD − baseline, relative | " + " | ".join(f"{SHORT[m]} it. {t}" for m, t in cols)
            + " |\n|---|" + "---|" * len(cols))
    rows = []
    for arm in ("vd75", "vd85"):
        cells = []
        for m, t in cols:
            b = statistics.fmean(x.by_seed("baseline", m, t).values())
            cells.append(_rel(b, statistics.fmean(x.by_seed(arm, m, t).values())))
        rows.append(f"| ours {LABEL[arm]} (seed means) | " + " | ".join(cells) + " |")
    for g in PAPER:
        cells = []
        for m, t in cols:
            fig = METRICS[m][3]
            s = {a: dict(paper_series(fig, g, m, a)) for a in ("baseline", "vd75")}
            cells.append(_rel(s["baseline"][t], s["vd75"][t]) if t in s["baseline"] else "")
        rows.append(f"| paper {g.split('-')[1]} VD75 | " + " | ".join(cells) + " |")
    return head + "\n" + "\n".join(rows)


def block_per_seed(x: Records) -> str:
    """Seed by seed: how often each VD arm goes the paper's way, and the order of the arms."""
    head = ("| metric | VD75 vs baseline | VD85 vs baseline | VD75 beyond VD85 | exceptions "
            "(arm, seed, iteration) |\n|---|---|---|---|---|")
    rows = []
    for metric in (*DIVERSITY, "proposer_entropy", "unique_tokens"):
        label, _, first, _, sign = METRICS[metric]
        its = [t for t in x.iterations if t >= first]
        counts, exc = {}, []
        for pair in (("vd75", "baseline"), ("vd85", "baseline"), ("vd75", "vd85")):
            ok = 0
            for t in its:
                hi, lo = x.by_seed(pair[0], metric, t), x.by_seed(pair[1], metric, t)
                for s in x.seeds:
                    if sign * (hi[s] - lo[s]) > 0:
                        ok += 1
                    else:
                        exc.append(f"{LABEL[pair[0]]} ≤ {LABEL[pair[1]]} s{s} it{t}"
                                   if sign > 0 else
                                   f"{LABEL[pair[0]]} ≥ {LABEL[pair[1]]} s{s} it{t}")
            counts[pair] = f"{ok} of {len(its) * len(x.seeds)}"
        rows.append(f"| {label} | " + " | ".join(counts.values()) + " | "
                    + ("; ".join(exc) if exc else "none") + " |")
    return head + "\n" + "\n".join(rows)


def block_baseline_by_seed(x: Records) -> str:
    head = ("| baseline, seed | " + " | ".join(f"Self-BLEU it. {t}" for t in x.iterations)
            + " | " + " | ".join(f"novelty it. {t}" for t in x.iterations if t >= 2)
            + " |\n|---|" + "---|" * (2 * len(x.iterations) - 1))
    rows = []
    for s in x.seeds:
        bleu = [num(x.by_seed("baseline", "self_bleu", t)[s], 3) for t in x.iterations]
        nov = [num(x.by_seed("baseline", "novelty_rate", t)[s], 2) for t in x.iterations
               if t >= 2]
        rows.append(f"| {s} | " + " | ".join(bleu + nov) + " |")
    return head + "\n" + "\n".join(rows)


def block_costs(x: Records) -> str:
    head = ("| arm | it. | valid % (per seed) | curriculum size (per seed) | in the window, % of "
            "valid (per seed) |\n|---|---|---|---|---|")
    rows = []
    for arm in ARMS:
        for t in x.iterations:
            valid = x.by_seed(arm, "valid_fraction", t)
            size = x.by_seed(arm, "curriculum_size", t)
            nvalid = x.by_seed(arm, "valid_questions", t)
            rows.append(
                f"| {LABEL[arm]} | {t} | "
                f"{100 * statistics.fmean(valid.values()):.1f} "
                f"({', '.join(f'{100 * valid[s]:.1f}' for s in x.seeds)}) | "
                f"{statistics.fmean(size.values()):.1f} "
                f"({', '.join(f'{size[s]:.0f}' for s in x.seeds)}) | "
                f"{', '.join(f'{100 * size[s] / nvalid[s]:.1f}' for s in x.seeds)} |")
    sizes = [r["curriculum_size"] for r in x.recs]
    share = [100 * r["curriculum_size"] / r["valid_questions"] for r in x.recs]
    acc = [r["mean_acc"] for r in x.recs]
    return (head + "\n" + "\n".join(rows) + "\n\n"
            f"Over all {len(x.recs)} run-iterations: {min(sizes)}-{max(sizes)} curriculum "
            f"questions, {min(share):.1f}-{max(share):.1f} % of the valid questions; the "
            f"solver answers {100 * min(acc):.1f}-{100 * max(acc):.1f} % of its own questions "
            f"(mean of its {x.data['M']} answers).")


def block_pass1(x: Records) -> str:
    """pass@1 cells pooled as the notebooks pool (the file's evaluation.per_seed and se_ddof),
    and each arm against the baseline under compare_seeds on the same per-seed values."""
    rule = pooling_rule(x.data)
    p1 = pass1_frame(x.data, rule.per_seed)
    benches = sorted(set(p1["benchmark"]))
    base = [r for r in x.data["records"] if r["arm"] == "base"]
    head = ("| solver pass@1, % | " + " | ".join(benches) + " | "
            + " | ".join(f"{b}: − baseline, Welch p / paired p" for b in benches)
            + " |\n|---|" + "---|" * (2 * len(benches)))
    rows = []
    if base:
        cells = []
        for b in benches:
            cell = pool_accuracies({None: pass1_runs(base[0], b)}, rule.per_seed, rule.se_ddof)
            cells.append(f"{cell.mean:.1f} ± {cell.se:.1f} (runs)")
        rows.append("| starting checkpoint | " + " | ".join(cells + [""] * len(benches)) + " |")
    t = max(p1["iteration"])
    for arm in ARMS:
        cells, tests = [], []
        for b in benches:
            g = p1[(p1.arm == arm) & (p1.benchmark == b) & (p1.iteration == t)]
            cell = pool_accuracies({r["seed"]: pass1_runs(r, b) for r in x.recs
                                    if r["arm"] == arm and r["iteration"] == t
                                    and pass1_runs(r, b) is not None},
                                   rule.per_seed, rule.se_ddof)
            cells.append(f"{cell.mean:.1f} ± {cell.se:.1f} ({len(g)} seeds)")
            if arm != "baseline":
                bb = p1[(p1.arm == "baseline") & (p1.benchmark == b) & (p1.iteration == t)]
                c = compare_seeds(dict(zip(bb.seed, bb.accuracy, strict=True)),
                                  dict(zip(g.seed, g.accuracy, strict=True)))
                tests.append(f"{num(c.diff, 2, True)}: {pval(c.welch_p)} / {pval(c.paired_p)}")
            else:
                tests.append("")
        rows.append(f"| {LABEL[arm]}, iteration {t} | " + " | ".join(cells + tests) + " |")
    return head + "\n" + "\n".join(rows) + "\n\n" + rule.note()


#: block name -> its text from the main table's :class:`Records`
MAIN_TABLES: dict[str, Callable[[Records], str]] = {
    "meta": block_meta, "rules": block_rules, "per_iteration": block_per_iteration,
    "effects": block_effects, "verdicts": block_verdicts, "relative": block_relative,
    "per_seed": block_per_seed, "baseline_by_seed": block_baseline_by_seed,
    "costs": block_costs, "pass1": block_pass1,
}
