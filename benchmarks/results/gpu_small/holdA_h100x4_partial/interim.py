"""Hold A's interim table (issue 30): the phase-ablation and entropy-baseline arms at iterations
1 and 2 beside the main table's baseline and VD75 records, from the committed JSON alone. Run at
the repository root:

    python benchmarks/results/gpu_small/holdA_h100x4_partial/interim.py

docs/RESULTS.md carried this table until both experiments ran whole (its phase-ablation and
entropy-baseline sections, from docs/results/); it stays as the record of what the first hold
measured (tests/test_results.py checks what it prints). Cells are mean ± SE over the
seeds (sample SD); each arm is tested against the reference arm the paper's claim names
(:func:`vdlib.utils.stats.compare_seeds`: Welch's t with its df, the paired t by seed on n - 1
df). Interim: no run has its third iteration, and the reference arms ran earlier, under the
`stage` engine lifetime without CUDA graphs (the sampling differs, the distribution does not).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vdlib.report.results import load_results
from vdlib.utils.stats import compare_seeds, mean_and_se

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]
MAIN = ROOT / "docs" / "results" / "gpu_small_main.json"
PARTS = (HERE / "gpu_small_phase.json", HERE / "gpu_small_entropy.json")
#: arm -> the reference it is tested against (the paper's claim: the phase arms against both
#: phases (vd75) and no mask; the entropy baselines against VD75)
TESTS = (("train_only", "baseline"), ("train_only", "vd75"), ("gen_only", "baseline"),
         ("gen_only", "vd75"), ("kl_cov", "baseline"), ("kl_cov", "vd75"),
         ("clip_cov", "baseline"), ("clip_cov", "vd75"))
ARMS = ("baseline", "vd75", "train_only", "gen_only", "kl_cov", "clip_cov")
METRICS = {"valid_fraction": ("valid fraction", 3), "self_bleu": ("Self-BLEU ↓", 3),
           "vendi": ("Vendi ↑", 1), "curriculum_size": ("curriculum size", 1)}
ITERATIONS = (1, 2)


def records() -> list[dict]:
    out = [r for r in load_results(MAIN)["records"] if r["arm"] in ("baseline", "vd75")]
    for path in PARTS:
        out += load_results(path)["records"]
    return out


def by_seed(recs: list[dict], arm: str, metric: str, t: int) -> dict[int, float]:
    return {r["seed"]: r[metric] for r in recs
            if r["arm"] == arm and r["iteration"] == t and r.get(metric) is not None}


def _p(p: float | None) -> str:
    return "-" if p is None else f"{p:.3f}" if p >= 0.001 else "<0.001"


def block() -> str:
    recs = records()
    lines = ["| metric | iter | " + " | ".join(ARMS) + " |", "|---|---|" + "---|" * len(ARMS)]
    for metric, (label, d) in METRICS.items():
        for t in ITERATIONS:
            cells = []
            for arm in ARMS:
                v = by_seed(recs, arm, metric, t)
                m, se = mean_and_se(list(v.values()), ddof=1)
                cells.append(f"{m:.{d}f} ± {se:.{d}f} (n={len(v)})" if se is not None
                             else f"{m:.{d}f} (n={len(v)})")
            lines.append(f"| {label} | {t} | " + " | ".join(cells) + " |")
    lines += ["", "| test (iteration 2) | metric | diff | Welch t (df), p | paired t (df), p |",
              "|---|---|---|---|---|"]
    for arm, ref in TESTS:
        for metric in ("self_bleu", "vendi"):
            label, d = METRICS[metric]
            c = compare_seeds(by_seed(recs, ref, metric, 2), by_seed(recs, arm, metric, 2))
            welch = ("-" if c.welch_t is None
                     else f"{c.welch_t:.2f} ({c.welch_df:.1f}), {_p(c.welch_p)}")
            paired = ("-" if c.paired_t is None
                      else f"{c.paired_t:.2f} ({c.paired_df}), {_p(c.paired_p)}")
            lines.append(f"| {arm} − {ref} | {label} | {c.diff:+.{d + 1}f} | {welch} | "
                         f"{paired} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.parse_args(argv)
    sys.stdout.write(block() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
