"""vdlib.report.schedules (notebook 05's adaptive arm beside fixed VD75 and the anneal): the
alpha frame read from run folders, the figures, the tests against each reference and issue 54's
goal, on hand-made runs and frames."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from vdlib.report import schedules
from vdlib.utils.stats import compare_seeds

#: arm -> per-seed (valid_fraction, self_bleu, vendi, cumulative_vendi) at iterations 1 and 2
VALUES = {
    "baseline": [[(0.99, 0.40, 40.0, 40.0), (0.99, 0.41, 39.0, 41.0)],
                 [(0.98, 0.36, 45.0, 45.0), (0.99, 0.37, 44.0, 46.0)],
                 [(0.99, 0.30, 50.0, 50.0), (0.98, 0.31, 49.0, 50.5)]],
    "vd75": [[(0.70, 0.27, 44.0, 44.0), (0.60, 0.28, 42.0, 46.0)],
             [(0.78, 0.22, 51.0, 51.0), (0.62, 0.19, 58.0, 58.0)],
             [(0.57, 0.18, 64.0, 64.0), (0.68, 0.18, 67.0, 71.0)]],
    "adaptive": [[(0.70, 0.27, 44.0, 44.0), (0.96, 0.33, 43.0, 46.5)],
                 [(0.78, 0.22, 51.0, 51.0), (0.95, 0.25, 52.0, 54.0)],
                 [(0.57, 0.18, 64.0, 64.0), (0.97, 0.25, 58.0, 66.0)]],
}
NAMES = ("valid_fraction", "self_bleu", "vendi", "cumulative_vendi")


def _metrics() -> pd.DataFrame:
    rows = [(arm, seed, t, name, v)
            for arm, seeds in VALUES.items() for seed, its in enumerate(seeds)
            for t, vals in enumerate(its, start=1) for name, v in zip(NAMES, vals, strict=True)]
    return pd.DataFrame(rows, columns=["arm", "seed", "iteration", "metric", "value"])


def _run(tmp_path, arm, alphas, decisions=None):
    run = tmp_path / f"{arm}-seed0"
    for t, a in enumerate(alphas, start=1):
        it = run / f"iter_{t}"
        it.mkdir(parents=True)
        (it / "metrics.json").write_text(json.dumps({"alpha_train": a, "alpha_gen": a}))
        ptrain = {"alpha_train": a}
        if decisions:
            ptrain["alpha_decision"] = {"rule": decisions[t - 1], "reason": f"why {t}"}
        (it / "proposer_train.json").write_text(json.dumps(ptrain))
    return run


def test_alpha_frame_reads_alphas_and_decisions(tmp_path):
    runs = {("anneal", 0): _run(tmp_path, "anneal", [0.75, 1.0]),
            ("adaptive", 0): _run(tmp_path, "adaptive", [0.75, 0.954531], ["start", "raise"])}
    f = schedules.alpha_frame(runs)
    assert f[["arm", "iteration", "alpha_gen", "rule"]].values.tolist() == [
        ["adaptive", 1, 0.75, "start"], ["adaptive", 2, 0.954531, "raise"],
        ["anneal", 1, 0.75, ""], ["anneal", 2, 1.0, ""]]
    r = schedules.alpha_trajectory_figure(f, tmp_path / "out")
    assert [p.name for p in r.paths] == ["alpha_trajectory.png", "alpha_trajectory.pdf"]
    lines = r.figure.axes[0].get_lines()
    assert [list(line.get_ydata()) for line in lines] == [[0.75, 1.0], [0.75, 0.954531]]
    assert [line.get_label() for line in lines] == ["VD75 (anneal)", "VD (adaptive)"]


def test_schedule_metrics_figure_draws_every_metric():
    r = schedules.schedule_metrics_figure(_metrics())
    assert [ax.get_title() for ax in r.figure.axes] == list(schedules.SCHEDULE_METRICS.values())
    row = r.data[(r.data["arm"] == "adaptive") & (r.data["metric"] == "valid_fraction")
                 & (r.data["iteration"] == 2)]
    assert row["mean"].item() == pytest.approx(0.96) and row["n"].item() == 3


def test_schedule_tests_are_compare_seeds_per_metric_and_benchmark():
    acc = pd.DataFrame([(arm, s, 2, "gsm8k", a) for arm, xs in
                        {"vd75": (0.010, 0.012, 0.008), "adaptive": (0.013, 0.012, 0.011)}.items()
                        for s, a in enumerate(xs)],
                       columns=["arm", "seed", "iteration", "benchmark", "accuracy"])
    t = schedules.schedule_tests(_metrics(), acc, references=("vd75", "baseline", "anneal"))
    assert set(t["contrast"]) == {"VD (adaptive) − VD75", "VD (adaptive) − Baseline"}
    assert (t["iteration"] == 2).all()
    row = t[(t["contrast"] == "VD (adaptive) − VD75") & (t["metric"] == "valid_fraction")]
    c = compare_seeds({0: 0.60, 1: 0.62, 2: 0.68}, {0: 0.96, 1: 0.95, 2: 0.97})
    assert row["diff"].item() == pytest.approx(c.diff)
    assert row["welch_t"].item() == pytest.approx(c.welch_t)
    assert row["paired_t"].item() == pytest.approx(c.paired_t) and row["paired_df"].item() == 2
    gsm = t[t["metric"] == "pass1_gsm8k"]
    assert len(gsm) == 1 and gsm["diff"].item() == pytest.approx(0.2)  # percent points


def test_adaptive_goal_met_and_missed():
    g = schedules.adaptive_goal(_metrics()).set_index("quantity")
    vf = g.iloc[0]
    assert vf["value"] == pytest.approx(0.96) and vf["threshold"] == pytest.approx(0.9367, 1e-3)
    assert bool(vf["met"])
    vendi = g.iloc[1]  # (51 - 44) / (55.667 - 44) = 0.6
    assert vendi["value"] == pytest.approx(7.0 / (167 / 3 - 44)) and bool(vendi["met"])
    missed = schedules.adaptive_goal(_metrics(), share=0.9)
    assert not bool(missed["met"].iloc[1])
    lone = _metrics()[lambda d: d["arm"] != "vd75"]
    assert schedules.adaptive_goal(lone)["met"].iloc[1] is None
