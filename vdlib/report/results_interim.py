"""Issue 30's interim table: the phase-ablation and entropy-baseline arms of the first, partial
GPU hold (4 x H100; every run stopped after iteration 2, no solver evaluated) beside the main
table's baseline and VD75 records, at iterations 1 and 2.

The partial exports are in the experiments' archives (``docs/results/archives/``, members
``h100x4_interim/``); :func:`interim_evidence` keeps, once, the numbers the table reads (each
record's :data:`METRICS` at :data:`ITERATIONS`) in
``docs/results/interim_phase_entropy.json``, and :func:`interim_table` prints the table from
that file and the main table's (its ``reference``). Cells are mean ± SE over the seeds (sample
SD); each arm is tested against the reference arm the paper's claim names
(:func:`vdlib.utils.stats.compare_seeds`: Welch's t with its df, the paired t by seed on n - 1
df). Interim: no run has its third iteration, and the reference arms ran earlier, under the
``stage`` engine lifetime without CUDA graphs (the sampling differs, the distribution does not).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vdlib.utils.stats import compare_seeds, mean_and_se

__all__ = ["KIND", "METRICS", "ITERATIONS", "ARMS", "TESTS", "interim_evidence",
           "interim_table"]

#: the ``kind`` of the evidence file
KIND = "interim"
#: arm -> the reference it is tested against (the paper's claim: the phase arms against both
#: phases (vd75) and no mask; the entropy baselines against VD75)
TESTS = (("train_only", "baseline"), ("train_only", "vd75"), ("gen_only", "baseline"),
         ("gen_only", "vd75"), ("kl_cov", "baseline"), ("kl_cov", "vd75"),
         ("clip_cov", "baseline"), ("clip_cov", "vd75"))
#: the table's columns; the first two come from the reference file
ARMS = ("baseline", "vd75", "train_only", "gen_only", "kl_cov", "clip_cov")
#: metric -> (label, decimals)
METRICS = {"valid_fraction": ("valid fraction", 3), "self_bleu": ("Self-BLEU ↓", 3),
           "vendi": ("Vendi ↑", 1), "curriculum_size": ("curriculum size", 1)}
ITERATIONS = (1, 2)


def interim_evidence(parts: Sequence[Mapping[str, Any]], reference: str,
                     source: str) -> dict[str, Any]:
    """The evidence file's value from the partial exports ``parts`` (results dicts): every
    trained record at :data:`ITERATIONS` with its :data:`METRICS` (None where absent), the
    cards, ``reference`` (the results file whose baseline and VD75 records the table sets
    beside them) and ``source`` (where the exports were)."""
    records = [{"arm": r["arm"], "seed": r["seed"], "iteration": r["iteration"],
                **{m: r.get(m) for m in METRICS}}
               for part in parts for r in part["records"]
               if r["arm"] != "base" and r["iteration"] in ITERATIONS]
    cards = dict.fromkeys(p["card"] for p in parts if p.get("card"))
    return {"kind": KIND, "reference": reference, "source": source, "card": ", ".join(cards),
            "arms": list(dict.fromkeys(r["arm"] for r in records)), "records": records}


def _by_seed(recs: Sequence[Mapping[str, Any]], arm: str, metric: str,
             t: int) -> dict[int, float]:
    return {r["seed"]: r[metric] for r in recs
            if r["arm"] == arm and r["iteration"] == t and r.get(metric) is not None}


def _p(p: float | None) -> str:
    return "-" if p is None else f"{p:.3f}" if p >= 0.001 else "<0.001"


def interim_table(reference: Mapping[str, Any], interim: Mapping[str, Any]) -> str:
    """Markdown: the per-iteration cells of :data:`ARMS`, then the :data:`TESTS` on Self-BLEU
    and Vendi at iteration 2 (``reference``: the main table's results dict, for its baseline
    and VD75 records; ``interim``: :func:`interim_evidence`'s value)."""
    recs = [r for r in reference["records"] if r["arm"] in ("baseline", "vd75")]
    recs += list(interim["records"])
    lines = ["| metric | iter | " + " | ".join(ARMS) + " |", "|---|---|" + "---|" * len(ARMS)]
    for metric, (label, d) in METRICS.items():
        for t in ITERATIONS:
            cells = []
            for arm in ARMS:
                v = _by_seed(recs, arm, metric, t)
                m, se = mean_and_se(list(v.values()), ddof=1)
                cells.append(f"{m:.{d}f} ± {se:.{d}f} (n={len(v)})" if se is not None
                             else f"{m:.{d}f} (n={len(v)})")
            lines.append(f"| {label} | {t} | " + " | ".join(cells) + " |")
    last = ITERATIONS[-1]
    lines += ["", f"| test (iteration {last}) | metric | diff | Welch t (df), p | "
              "paired t (df), p |", "|---|---|---|---|---|"]
    for arm, ref in TESTS:
        for metric in ("self_bleu", "vendi"):
            label, d = METRICS[metric]
            c = compare_seeds(_by_seed(recs, ref, metric, last), _by_seed(recs, arm, metric, last))
            welch = ("-" if c.welch_t is None
                     else f"{c.welch_t:.2f} ({c.welch_df:.1f}), {_p(c.welch_p)}")
            paired = ("-" if c.paired_t is None
                      else f"{c.paired_t:.2f} ({c.paired_df}), {_p(c.paired_p)}")
            lines.append(f"| {arm} − {ref} | {label} | {c.diff:+.{d + 1}f} | {welch} | "
                         f"{paired} |")
    return "\n".join(lines)
