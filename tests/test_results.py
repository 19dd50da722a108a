"""The committed-results report step (vdlib.results): records collected from run folders, and
the figure and tables regenerated from the JSON alone."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from vdlib.evaluation import BenchmarkResult, EvalSummary
from vdlib.results import (
    collect_results,
    effects_table,
    load_results,
    pass1_table,
    results_report,
    summary_table,
)

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "docs" / "results" / "gpu_small_main.json"


def _runs(tmp_path: Path) -> dict:
    runs = {}
    bleu = {"baseline": [0.50, 0.52], "vd75": [0.30, 0.31]}
    for arm in ("baseline", "vd75"):
        for seed in (0, 1):
            run = tmp_path / f"{arm}-seed{seed}"
            for t in (1, 2):
                (run / f"iter_{t}").mkdir(parents=True)
                (run / f"iter_{t}" / "metrics.json").write_text(json.dumps({
                    "self_bleu": bleu[arm][seed] + 0.01 * t, "vendi": 10.0 + seed + t,
                    "valid_fraction": 0.8, "curriculum_size": 40 + t, "unknown": 1}))
            runs[(arm, seed)] = run
    return runs


def _summary(*accs: float) -> EvalSummary:
    return EvalSummary({"gsm8k": BenchmarkResult("gsm8k", 100, list(accs), list(range(len(accs))))})


def test_collect_then_report(tmp_path):
    runs = _runs(tmp_path / "runs")
    evals = {k: _summary(0.30, 0.32, 0.34) if k[0] == "vd75" else _summary(0.20, 0.22, 0.24)
             for k in runs}
    data = collect_results(runs, evals, base=_summary(0.10, 0.12, 0.14),
                           meta={"card": "NVIDIA H100", "K": 1024, "M": 10, "iterations": 2})
    assert data["card"] == "NVIDIA H100" and data["K"] == 1024
    recs = data["records"]
    assert len(recs) == 1 + 2 * 2 * 2
    assert recs[0] == {"arm": "base", "seed": None, "iteration": 0, "pass1_gsm8k": 12.0,
                       "pass1_gsm8k_runs": [10.0, 12.0, 14.0]}
    last = [r for r in recs if r["arm"] == "vd75" and r["seed"] == 1 and r["iteration"] == 2][0]
    assert last["pass1_gsm8k"] == pytest.approx(32.0) and last["self_bleu"] == 0.33
    first = [r for r in recs if r["arm"] == "vd75" and r["iteration"] == 1][0]
    assert "pass1_gsm8k" not in first and first["novelty_rate"] is None
    path = tmp_path / "gpu_small_main.json"
    path.write_text(json.dumps(data))

    summary = summary_table(load_results(path))
    row = summary[(summary.arm == "VD75") & (summary.iteration == 2)].iloc[0]
    assert row["self_bleu"] == "0.325 ± 0.004" and row["seeds"] == 2  # pstdev 0.005 / sqrt 2
    p1 = pass1_table(load_results(path)).set_index("arm")
    assert p1.loc["Base (no training)", "gsm8k"] == "12.0 ± 0.9"  # its 3 evaluation runs
    assert p1.loc["VD75", "gsm8k"] == "32.0 ± 0.0" and p1.loc["VD75", "seeds"] == 2
    eff = effects_table(load_results(path))
    bleu = eff[(eff.metric == "self_bleu") & (eff.iteration == 2)].iloc[0]
    assert bleu["diff"] == pytest.approx(-0.205) and bool(bleu["paper_direction_beyond_2se"])
    vendi = eff[(eff.metric == "vendi") & (eff.iteration == 2)].iloc[0]
    assert vendi["diff"] == 0 and not bool(vendi["paper_direction_beyond_2se"])

    files = results_report(path, tmp_path / "report")
    names = sorted(p.name for p in files)
    assert {"gpu_small_main_dynamics.png", "gpu_small_main_summary.md",
            "gpu_small_main_pass1.csv", "gpu_small_main_effects.md",
            "gpu_small_main_report.json"} <= set(names)
    again = pd.read_csv(tmp_path / "report" / "gpu_small_main_effects.csv")
    assert list(again.columns)[:6] == ["arm", "metric", "iteration", "n_baseline", "n_vd",
                                      "baseline"]


def test_a_file_without_records_is_refused(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"card": "x"}))
    with pytest.raises(ValueError, match="no 'records' list"):
        load_results(bad)


@pytest.mark.skipif(not COMMITTED.exists(), reason="no committed GPU results yet")
def test_the_committed_results_regenerate_on_a_trimmed_copy(tmp_path):
    """The report step reruns on a trimmed copy of docs/results/gpu_small_main.json (every
    arm's first two seeds and first two iterations, plus the base record)."""
    data = load_results(COMMITTED)
    for key in ("card", "vllm_version", "K", "M", "iterations"):
        assert key in data, key
    keep = [r for r in data["records"]
            if r["arm"] == "base" or (r["seed"] in (0, 1) and r["iteration"] <= 2)]
    trimmed = tmp_path / "gpu_small_main.json"
    trimmed.write_text(json.dumps({**data, "records": keep}))
    files = results_report(trimmed, tmp_path / "out")
    assert (tmp_path / "out" / "gpu_small_main_dynamics.png").stat().st_size > 10_000
    summary = pd.read_csv(tmp_path / "out" / "gpu_small_main_summary.csv")
    assert set(summary["iteration"]) <= {1, 2} and len(files) >= 8
