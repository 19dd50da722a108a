"""vdlib.report.plots (with vdlib.report.drawing) and vdlib.report.paper_values: the transcribed
paper numbers against the .tex, every figure builder on small synthetic frames (2 arms x 2 seeds x 2
iterations; the frames are tests/test_tables.py's) and show. The table builders are tested in
test_tables.py, writing a report folder in test_report.py."""

import logging
import math
import re
from pathlib import Path

import pandas as pd
import pytest
from test_tables import metrics_frame

from vdlib.report import plots, tables
from vdlib.report.paper_values import paper_labels, paper_series, paper_values

TEX = Path(__file__).resolve().parents[2] / "shared" / "paper" / "vocab_dropout_paper.tex"
LABELS = ["tab:vanilla_eval", "tab:proposer_eval", "tab:correctness", "tab:curriculum_transfer",
          "tab:wellposed", "tab:ood", "tab:vanilla_entropy", "tab:nli_diversity",
          "tab:question_diversity", "tab:vocab_util", "tab:cross_scale", "tab:instruct",
          "tab:vanilla_grpo", "fig:question_complexity", "fig:diversity_combined",
          "fig:embedding_diversity", "fig:embedding_ablations", "fig:annealing"]
needs_tex = pytest.mark.skipif(not TEX.is_file(), reason="paper .tex not available")


# ----------------------------------------------------------------------------- paper values


def _numbers(obj):
    """Every number under ``obj`` (bools and None excluded)."""
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _numbers(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _numbers(v)
    elif isinstance(obj, int | float) and not isinstance(obj, bool):
        yield obj


def test_paper_values_structure():
    assert set(LABELS) <= set(paper_labels())
    for label in LABELS:
        entry = paper_values(label)
        assert entry["caption"] and entry["source"]["label"] == label
        a, b = entry["source"]["lines"]
        assert 0 < a < b
        assert entry["kind"] in ("table", "figure")
        assert entry["data"], label
        assert all(math.isfinite(x) for x in _numbers(entry["data"]))
        if entry["kind"] == "figure" and label != "fig:question_complexity":  # bars: numbers
            for group in entry["data"].values():
                for series in group.values():
                    for pts in series.values():
                        assert pts and all(len(p) == 2 for p in pts)
    with pytest.raises(KeyError, match="known"):
        paper_values("tab:nope")
    # a copy: editing it leaves the loaded values alone
    paper_values("tab:vanilla_eval")["data"].clear()
    assert paper_values("tab:vanilla_eval")["data"]


def test_paper_values_cross_checks():
    """Relations the paper's own numbers satisfy (catches a mistyped cell)."""
    qd = paper_values("tab:question_diversity")["data"]
    for model in qd.values():
        for row in model.values():
            cv = dict(row["cumulative_vendi"])
            assert row["growth"] == pytest.approx(cv[5] - cv[1], abs=0.051)
    vu = paper_values("tab:vocab_util")
    qp = paper_values("fig:question_complexity")["data"]
    for model in ("Qwen3-4B", "Qwen3-8B"):
        d = vu["data"][model]
        pct = 100 * (d["vd75"]["num_questions"] / d["baseline"]["num_questions"] - 1)
        assert pct == pytest.approx(qp[model]["vd75"]["num_questions"], abs=0.051)
        # the table's baseline and VD75 curves are the figure's
        fig = paper_values("fig:embedding_diversity")["data"][model]["cumulative_vendi"]
        assert fig["vd75"] == qd[model]["vd75"]["cumulative_vendi"]
    main = paper_values("tab:vanilla_eval")["data"]["Qwen3-4B"]
    assert paper_values("tab:cross_scale")["data"]["proposer Qwen3-4B"]["vd85"] == main["vd85"]


@needs_tex
def test_every_paper_number_is_in_its_source_lines():
    lines = TEX.read_text().split("\n")
    for label in LABELS:
        entry = paper_values(label)
        a, b = entry["source"]["lines"]
        chunk = "\n".join(lines[a - 1:b]).replace("{,}", "")
        assert f"\\label{{{label}}}" in chunk or label == "tab:vanilla_entropy", label
        found = {abs(float(x)) for x in re.findall(r"\d+(?:\.\d+)?", chunk)}
        missing = {x for x in _numbers(entry["data"]) if abs(float(x)) not in found}
        assert not missing, (label, sorted(missing)[:10])


@needs_tex
def test_spot_checks_against_tex():
    tex = TEX.read_text()
    main = paper_values("tab:vanilla_eval")["data"]
    m = re.search(r"\$\\alpha\{=\}0\.75\$ & ([\d.]+)\\tss\{([\d.]+)\} & ([\d.]+)\\tss", tex[
        tex.index(r"\textbf{Qwen3-8B}", tex.index("tab:vanilla_eval")):])
    assert (main["Qwen3-8B"]["vd75"]["math500"]["mean"], main["Qwen3-8B"]["vd75"]["math500"]["se"],
            main["Qwen3-8B"]["vd75"]["gsm8k"]["mean"]) == tuple(float(x) for x in m.groups())
    assert main["Qwen3-4B"]["clip_cov"]["aime24"] == {"mean": 12.7, "se": 1.7}
    assert "VD75 & \\cellcolor{oursrow}1{,}408" in tex.replace(
        "\\cellcolor{oursrow} VD75", "VD75")
    assert paper_values("tab:wellposed")["data"]["Qwen3-8B"]["vd75"]["filter_pass"] == 1408
    assert "(-50.1,0) (44.4,1) (21.6,2) (-18.9,3)" in tex
    assert paper_values("fig:question_complexity")["data"]["Qwen3-4B"]["vd75"] == {
        "num_questions": -50.1, "tokens_per_question": 44.4, "distinct_numbers": 21.6,
        "score": -18.9}
    assert "(1, 61.52) (2, 66.43) (3, 68.92) (4, 73.82) (5, 70.37)" in tex
    assert paper_series("fig:diversity_combined", "Qwen3-4B", "vendi", "vd75") == [
        (1, 61.52), (2, 66.43), (3, 68.92), (4, 73.82), (5, 70.37)]
    ent = paper_series("tab:vanilla_entropy", "Qwen3-4B-Base", "entropy", "vd95")
    assert len(ent) == 100 and ent[0] == (0, 1.98) and "(0,1.9800)(1,1.3812)" in tex
    assert paper_series("fig:annealing", "Qwen3-8B", "olympiadbench", "vd75")[2] == (3, 22.2)
    assert paper_values("tab:correctness")["data"]["Qwen3-4B"]["gen_only"][3] == [4, 29.5]


# ----------------------------------------------------------------------------- synthetic data


@pytest.fixture(scope="module")
def metrics():
    return metrics_frame()


@pytest.fixture(autouse=True)
def _low_dpi(monkeypatch):
    monkeypatch.setattr(plots, "DPI", 40)  # speed; legibility is checked by eye at 150


def _saved(result, name):
    assert [p.name for p in result.paths] == [f"{name}.png", f"{name}.pdf"]
    for p in result.paths:
        assert p.stat().st_size > 1000
    assert not list(result.paths[0].parent.glob(".*.tmp"))


# ----------------------------------------------------------------------------- figures


def test_diversity_dynamics_and_cumulative_vendi(metrics, tmp_path):
    r = plots.diversity_dynamics(metrics, tmp_path)
    _saved(r, "diversity_dynamics")
    v = r.data.set_index(["arm", "metric", "iteration"]).loc[("vd75", "vendi", 2)]
    # two seeds, 7 and 8: sample SD 0.707 / sqrt 2 (no paper cell: seed_summary's ddof 1)
    assert v["mean"] == 7.5 and v["se"] == pytest.approx(0.5) and v["n"] == 2
    r = plots.cumulative_vendi_figure(metrics, tmp_path)
    _saved(r, "cumulative_vendi")


@pytest.mark.slow  # 4 s on 2 cores (make test's 15 minutes; make test-slow runs it)
def test_missing_arm_is_skipped_not_fatal(metrics, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="vdlib"):  # vdlib.report.tables selects the arms
        r = plots.phase_ablation_figure(metrics, tmp_path)
    _saved(r, "phase_ablation")
    assert "train_only" in caplog.text and "gen_only" in caplog.text
    # no data at all: the paper's panels alone
    empty = metrics.iloc[:0]
    r = plots.diversity_dynamics(empty, None, arms=["kl_cov"])
    assert r.paths == [] and r.figure is not None


def test_question_profile_percent_change(metrics, tmp_path):
    r = plots.question_profile(metrics, tmp_path)
    _saved(r, "question_profile")
    d = r.data.set_index(["arm", "quantity"])
    # valid questions at iteration 2: baseline (10 + 14) / 2 = 12, vd75 6 -> -50 %
    assert d.loc[("vd75", "num_questions"), "pct_change"] == pytest.approx(-50.0)
    assert d.loc[("vd75", "tokens_per_question"), "pct_change"] == pytest.approx(50.0)
    # mean acc: baseline (0.8 + 0.6) / 2 = 0.7, vd75 0.7 -> 0 %
    assert d.loc[("vd75", "score"), "pct_change"] == pytest.approx(0.0)
    assert set(d.reset_index()["iteration"]) == {2}


def test_annealing_and_entropy_figures(tmp_path):
    acc = pd.DataFrame(
        [(a, s, t, b, 0.1 * t + (0.2 if a == "anneal" else 0.0) + 0.05 * (b == "champ"))
         for a in ("baseline", "anneal") for s in (0, 1) for t in (1, 2)
         for b in ("gsm_symbolic", "champ")],
        columns=["arm", "seed", "iteration", "benchmark", "accuracy"])
    r = plots.annealing_figure(acc, tmp_path, alpha_schedule={1: 0.75, 2: 1.0})
    _saved(r, "annealing")
    avg = r.data.set_index(["arm", "benchmark", "iteration"]).loc[("anneal", "average", 2),
                                                                   "mean"]
    assert avg == pytest.approx(0.425)  # (0.4 + 0.45) / 2; 'vd75' missing is only a warning
    ent = pd.DataFrame([(a, s, st, 1.0 / (st + 1) + s) for a in ("baseline", "vd95")
                        for s in (0, 1) for st in range(5)],
                       columns=["arm", "seed", "step", "entropy"])
    r = plots.entropy_figure(ent, tmp_path)
    _saved(r, "entropy_trajectory")
    assert r.data.set_index(["arm", "step"]).loc[("vd95", 0), "mean"] == pytest.approx(1.5)


# ----------------------------------------------------------------------------- tables


# ----------------------------------------------------------------------------- tiny runs, output


@pytest.mark.slow  # 4 s on 2 cores (make test's 15 minutes; make test-slow runs it)
def test_one_seed_one_iteration_and_unknown_arm(tmp_path):
    """A tiny run: one seed, one iteration, an arm vdlib does not know, metrics missing."""
    m = pd.DataFrame([("custom", 0, 1, "vendi", 3.0), ("custom", 0, 1, "self_bleu", 0.2),
                      ("baseline", 0, 1, "valid_questions", 4.0),
                      ("custom", 0, 1, "valid_questions", 2.0)],
                     columns=["arm", "seed", "iteration", "metric", "value"])
    for fn in (plots.diversity_dynamics, plots.cumulative_vendi_figure,
               plots.phase_ablation_figure, plots.question_profile):
        r = fn(m, None)
        if fn is plots.diversity_dynamics:  # drawing catches layout errors; the rest: data
            r.figure.savefig(tmp_path / f"{fn.__name__}.png", dpi=30)
    prof = plots.question_profile(m, None).data.set_index("quantity")
    assert prof.loc["num_questions", "pct_change"] == pytest.approx(-50.0)
    assert math.isnan(prof.loc["score", "pct_change"])
    assert tables.question_diversity_table(m, "frame").query("source == 'ours'").empty
    acc = pd.DataFrame([("custom", 0, 1, "gsm_symbolic", 0.5)],
                       columns=["arm", "seed", "iteration", "benchmark", "accuracy"])
    assert len(plots.annealing_figure(acc, None, arms=None).data) == 2  # average + benchmark


def test_show_and_png_without_saving(metrics, tmp_path):
    fig = plots.question_profile(metrics, None)
    assert fig.paths == [] and fig.png()[:4] == b"\x89PNG"  # rendered in memory
    pytest.importorskip("IPython")
    assert plots.show(fig).data[:4] == b"\x89PNG"
    saved = plots.question_profile(metrics, tmp_path)
    assert plots.show(saved).data == saved.paths[0].read_bytes()


def test_saving_a_figure_twice_gives_the_same_bytes(tmp_path):
    import matplotlib.pyplot as plt

    from vdlib.report.plots import save_figure

    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], [3, 1, 2])
    first = [p.read_bytes() for p in save_figure(fig, tmp_path / "a", "f")]
    second = [p.read_bytes() for p in save_figure(fig, tmp_path / "b", "f")]
    plt.close(fig)
    assert first == second and len(first) == 2
