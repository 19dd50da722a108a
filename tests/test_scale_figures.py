"""Figures of one model scale against the paper's (issue 27, item 6): fig:embedding_diversity
draws the 4B and 8B runs together as the paper does, and fig:diversity_combined overlays the
paper's curves of the run's own scale (an 8B run never gets the 4B curves)."""

from __future__ import annotations

import matplotlib.colors as mcolors
import pytest
from test_tables import metrics_frame

from vdlib.report import plots
from vdlib.report.paper_values import PAPER_SCALES, paper_scale, paper_series


def _lines(ax):
    """{label: (colour, xs, ys)} of an axes' lines and error bars."""
    out = {}
    handles, labels = ax.get_legend_handles_labels()
    for h, lab in zip(handles, labels, strict=True):
        line = h.lines[0] if hasattr(h, "lines") else h
        out[lab] = (mcolors.to_hex(line.get_color()), list(line.get_xdata()),
                    list(line.get_ydata()))
    return out


@pytest.mark.parametrize(("model", "scale"), [
    ("Qwen/Qwen3-4B-Base", "Qwen3-4B"), ("Qwen/Qwen3-8B-Base", "Qwen3-8B"),
    ("Qwen3-8B", "Qwen3-8B"), ("Qwen/Qwen3-0.6B-Base", "Qwen3-4B"), ("smollm2-135m", "Qwen3-4B")])
def test_paper_scale_matches_the_run_model(model, scale):
    assert paper_scale(model) == scale
    assert paper_scale(model, default=None) == (scale if model.endswith(("4B-Base", "8B-Base",
                                                                          "8B")) else None)
    assert set(PAPER_SCALES) == {"Qwen3-4B", "Qwen3-8B"}


def test_embedding_diversity_draws_both_scales_together(tmp_path):
    four = metrics_frame()
    eight = four.assign(value=four["value"] * 2)
    r = plots.embedding_diversity_figure({"Qwen3-4B": four, "Qwen3-8B": eight}, tmp_path)
    assert [p.name for p in r.paths] == ["embedding_diversity.png", "embedding_diversity.pdf"]
    d = r.data
    assert list(d.columns) == ["source", "scale", "arm", "iteration", "mean", "se", "n"]
    ours = d[d["source"] == "ours"].set_index(["scale", "arm", "iteration"])["mean"]
    # cumulative Vendi at iteration 2: baseline seeds 8 and 6, vd75 10 and 9 (test_tables)
    assert ours[("Qwen3-4B", "baseline", 2)] == 7.0 and ours[("Qwen3-8B", "vd75", 2)] == 19.0
    assert len(ours) == 2 * 2 * 2  # two scales x two arms x two iterations, one panel
    paper = d[d["source"] == "paper"]
    assert set(zip(paper["scale"], paper["arm"], strict=True)) == {
        (m, a) for m in ("Qwen3-4B", "Qwen3-8B") for a in ("baseline", "vd75")}
    assert paper.set_index(["scale", "arm", "iteration"]).loc[("Qwen3-8B", "vd75", 5),
                                                              "mean"] == 57.2
    ax, pax = r.figure.axes[:2]
    mine = _lines(ax)
    assert set(mine) == {"Qwen3-4B Baseline", "Qwen3-4B VD75", "Qwen3-8B Baseline",
                         "Qwen3-8B VD75"}
    assert mine["Qwen3-4B VD75"][0] == plots.SCALE_COLOURS["Qwen3-4B"].lower()
    assert mine["Qwen3-8B Baseline"][0] == plots.SCALE_COLOURS["Qwen3-8B"].lower()
    theirs = _lines(pax)
    assert theirs["Qwen3-8B VD75"][2] == [y for _, y in paper_series(
        "fig:embedding_diversity", "Qwen3-8B", "cumulative_vendi", "vd75")]


def test_embedding_diversity_with_one_scale_or_none():
    r = plots.embedding_diversity_figure({"smollm2-135m": metrics_frame()})
    assert set(r.data.loc[r.data["source"] == "ours", "scale"]) == {"smollm2-135m"}
    assert set(r.data.loc[r.data["source"] == "paper", "scale"]) == {"Qwen3-4B", "Qwen3-8B"}
    empty = plots.embedding_diversity_figure({"tiny-random": metrics_frame().iloc[:0]})
    assert set(empty.data["source"]) == {"paper"} and empty.figure is not None


@pytest.mark.parametrize("scale", ["Qwen3-4B", "Qwen3-8B"])
def test_diversity_dynamics_overlays_the_runs_own_scale(scale):
    r = plots.diversity_dynamics(metrics_frame(), paper_model=scale, panels=["self_bleu"])
    labels = _lines(r.figure.axes[0])
    other = next(s for s in PAPER_SCALES if s != scale)
    assert f"paper {scale}: VD75" in labels
    assert not any(other in lab for lab in labels)
    want = [y for _, y in paper_series("fig:diversity_combined", scale, "self_bleu", "vd75")]
    assert labels[f"paper {scale}: VD75"][2] == want
