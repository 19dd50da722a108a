"""vdlib.report.tables (with vdlib.report.curriculum_tables, vdlib.report.table_format and
vdlib.report.frames): every table builder on small synthetic frames (2 arms x 2 seeds x 2
iterations), the display labels of the rows, the shared frame helpers, and the module boundaries
(every table name importable from vdlib.report.tables, none from vdlib.report.plots, no private name
imported across modules)."""

import ast
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from vdlib.evaluation import BenchmarkResult, EvalSummary
from vdlib.report import curriculum_tables, frames, plots, table_format, tables
from vdlib.report.paper_values import ARM_LABELS

# ----------------------------------------------------------------------------- synthetic data

# (arm, seed) -> metric -> [iteration 1, iteration 2]
VALUES = {
    ("baseline", 0): {"valid_questions": [10, 10], "cumulative_vendi": [5, 8], "unique_tokens":
                      [100, 100], "mean_acc": [0.5, 0.8], "vendi": [4, 5]},
    ("baseline", 1): {"valid_questions": [12, 14], "cumulative_vendi": [5, 6], "unique_tokens":
                      [100, 120], "mean_acc": [0.5, 0.6], "vendi": [4, 6]},
    ("vd75", 0): {"valid_questions": [8, 6], "cumulative_vendi": [6, 10], "unique_tokens":
                  [150, 160], "mean_acc": [0.4, 0.7], "vendi": [5, 7]},
    ("vd75", 1): {"valid_questions": [8, 6], "cumulative_vendi": [6, 9], "unique_tokens":
                  [150, 170], "mean_acc": [0.4, 0.7], "vendi": [5, 8]},
}
COMMON = {"self_bleu": 0.3, "novelty_rate": 0.5, "valid_fraction": 0.6, "curriculum_size": 5,
          "proposer_entropy": 1.5, "mean_question_tokens": 20.0, "mean_distinct_numbers": 2.0,
          "mean_pairwise_cosine_distance": 0.6}


def metrics_frame() -> pd.DataFrame:
    """Loop metrics ``arm, seed, iteration, metric, value``: 2 arms x 2 seeds x 2 iterations."""
    rows = []
    for (arm, seed), ms in VALUES.items():
        for t in (1, 2):
            for m, vals in ms.items():
                rows.append((arm, seed, t, m, float(vals[t - 1])))
            for m, v in COMMON.items():
                bump = 1.5 if arm == "vd75" and m in ("mean_question_tokens",) else 1.0
                rows.append((arm, seed, t, m, v * bump))
    return pd.DataFrame(rows, columns=["arm", "seed", "iteration", "metric", "value"])


def _summary(accs):
    return EvalSummary({b: BenchmarkResult(b, 10, list(a), list(range(len(a))))
                        for b, a in accs.items()})


def eval_summaries() -> dict[str, EvalSummary]:
    return {"baseline": _summary({"math500": [0.5, 0.6, 0.7], "gsm8k": [0.8, 0.8, 0.8]}),
            "vd75": _summary({"math500": [0.6, 0.6, 0.6], "gsm8k": [0.9, 0.8, 0.7]})}


@pytest.fixture(scope="module")
def metrics():
    return metrics_frame()


@pytest.fixture(scope="module")
def summaries():
    return eval_summaries()


# ----------------------------------------------------------------------------- tables


def test_main_table_has_ours_then_paper_rows(summaries):
    table = tables.main_table(summaries)
    md = table["markdown"]
    assert isinstance(table.frame, pd.DataFrame) and table["latex"].startswith(r"\begin")
    assert md.splitlines()[2].startswith("| Baseline |")  # the arm's display label
    assert "| paper Qwen3-4B: Baseline | 64.2 ± 0.8 | 85.2 ± 0.7 | 38.3 |" in md
    assert "paper Qwen3-8B: VD75" in md
    tex = tables.main_table(summaries, "latex")
    assert r"\midrule" in tex and r"paper Qwen3-8B: VD75 & 68.1 $\pm$ 2.3" in tex
    frame = tables.main_table(summaries, "frame").set_index("label")
    assert frame.loc["ours: VD75", "math500"] == pytest.approx(60.0)
    assert frame.loc["ours: Baseline", "avg"] == pytest.approx(70.0)  # (60 + 80) / 2
    assert frame.loc["paper Qwen3-4B: VD85", "gsm8k"] == 81.8
    assert tables.main_table(summaries, "frame", paper_columns=True).set_index("label").loc[
        "paper Qwen3-4B: VD85", "amc23"] == 50.0
    # tab:ood in the paper's layout (benchmarks as rows), the paper's columns beside ours;
    # benchmarks the paper lacks get rows of their own
    ood = tables.ood_table(summaries, "markdown")
    assert "| BBH | – | – | – | – | 37.5 | 44.8 | 55.0 | 10.1 |" in ood
    assert "| GSM8K | – | 80.0 ± 0.0 |" in ood and "-0.0" not in ood
    assert "paper Qwen3-4B: Baseline" in tables.main_table({}, "markdown")
    for fn in (tables.proposer_table, tables.transfer_table, tables.vanilla_grpo_table,
               tables.cross_scale_table, tables.instruct_table):
        text = fn(summaries)["markdown"]
        assert "| Baseline |" in text and "| paper " in text


def test_row_labels_map_arm_names_only(summaries):
    """Rows keyed by a vdlib arm name, or ``<prefix>: <arm>``, show the arm's display label in
    Markdown, LaTeX and the frame; any other key is printed as it is."""
    s = summaries["baseline"]
    rows = {"Base (no training)": s, "kl_cov": s, "vd85_gen": s, "symmetric: baseline": s,
            "cross-scale: vd85_gen": s, "symmetric: mine": s, "custom": s}
    md = tables.cross_scale_table(rows, "markdown")
    ours = [line.split(" | ")[0].removeprefix("| ") for line in md.splitlines()[2:9]]
    assert ours == ["Base (no training)", "KL-Cov", "VD85 (gen-only)", "symmetric: Baseline",
                    "cross-scale: VD85 (gen-only)", "symmetric: mine", "custom"]
    assert ARM_LABELS["kl_cov"] == "KL-Cov"
    tex = tables.main_table(rows, "latex")
    assert "\nsymmetric: Baseline & " in tex and "\nkl_cov & " not in tex
    frame = tables.main_table(rows, "frame")
    assert frame[frame["source"] == "ours"]["label"].tolist()[:4] == [
        "ours: Base (no training)", "ours: KL-Cov", "ours: VD85 (gen-only)",
        "ours: symmetric: Baseline"]
    assert frame[frame["source"] == "ours"]["arm"].tolist()[1] == "kl_cov"  # keys kept
    # two keys with one label (``base`` is "Base (no training)") keep their own names: no row lost
    md = tables.main_table({"base": s, "Base (no training)": s, "vd75": s}, "markdown")
    assert [line.split(" | ")[0] for line in md.splitlines()[2:5]] == [
        "| base", "| Base (no training)", "| VD75"]


def test_every_table_name_is_importable_from_tables_and_none_from_plots():
    for name in curriculum_tables.__all__:
        assert getattr(tables, name) is getattr(curriculum_tables, name), name
    for name in ("Table", "render_table"):
        assert getattr(tables, name) is getattr(table_format, name), name
    for name in ("load_eval_summary", "load_correctness", "seed_summary"):
        assert getattr(tables, name) is getattr(frames, name), name
    assert all(hasattr(tables, name) for name in tables.__all__)
    builders = [n for n in tables.__all__ if n.endswith("_table") or n.startswith("load_")]
    assert len(builders) == 17  # 14 builders (judged and annealing too), render_table, 2 loaders
    assert not [n for n in [*builders, "Table"] if hasattr(plots, n)]
    assert not set(tables.__all__) & set(plots.__all__)


def test_plots_reexports_nothing():
    """Every public name of vdlib.report.plots is defined there (figures only, no table
    builders)."""
    for name in plots.__all__:
        obj = getattr(plots, name)
        if callable(obj):
            assert obj.__module__ == "vdlib.report.plots", name
    assert "paper_values" not in plots.__all__ and "write_outputs" not in plots.__all__


VDLIB = Path(__file__).resolve().parent.parent / "vdlib"


def test_no_private_name_is_imported_across_modules():
    offenders = []
    for path in sorted(VDLIB.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("vdlib"):
                offenders += [f"{path.name}: {node.module}.{a.name}" for a in node.names
                              if a.name.startswith("_") and not a.name.startswith("__")]
    ours = ("tables.py", "curriculum_tables.py", "table_format.py", "frames.py", "plots.py",
            "drawing.py", "notebook.py", "notebooks.py")
    assert not [o for o in offenders if o.split(":")[0] in ours], offenders


def test_frame_helpers(caplog):
    assert frames.select_arms(["vd75", "x", "baseline"], None, "t") == ["baseline", "vd75", "x"]
    with caplog.at_level("WARNING", logger="vdlib"):
        assert frames.select_arms(["vd75"], ["baseline", "vd75"], "my table") == ["vd75"]
    assert "my table" in caplog.text and "baseline" in caplog.text
    assert frames.arm_label("clip_cov") == "Clip-Cov" and frames.arm_label("mine") == "mine"
    assert frames.row_label("symmetric: vd85") == "symmetric: VD85"
    assert frames.pct_change(150.0, 100.0) == pytest.approx(50.0)
    assert math.isnan(frames.pct_change(float("nan"), 1.0))
    with pytest.raises(ValueError, match="lacks columns.*'metric'"):
        frames.metric_summary(pd.DataFrame({"arm": [], "value": []}), ["vendi"])
    agg = frames.metric_summary(metrics_frame(), ["vendi"]).set_index(["arm", "iteration"])
    assert agg.loc[("vd75", 2), "mean"] == 7.5 and agg.loc[("vd75", 2), "n"] == 2


def test_render_table_forms():
    frame = pd.DataFrame([table_format.ours_row("vd75", acc=61.25, acc_se=1.5, n=1234.0)])
    md = table_format.render_table(frame)
    assert md.splitlines()[2] == "| ours: VD75 | 61.2 ± 1.5 | 1,234.0 |"
    assert r"61.2 $\pm$ 1.5" in table_format.render_table(frame, "latex")
    with pytest.raises(ValueError, match="allowed"):
        table_format.table_output(frame, "html")
    t = table_format.table_output(frame, None)
    assert t.frame is frame and t._repr_markdown_() == md


def test_load_eval_summary_round_trip(summaries, tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps(summaries["baseline"].to_dict()))
    s = tables.load_eval_summary(tmp_path)
    assert s.results["math500"].mean == pytest.approx(0.6)
    assert s.results["math500"].se == pytest.approx(summaries["baseline"].results["math500"].se)
    assert s.average() == pytest.approx(summaries["baseline"].average())


def test_question_diversity_growth(metrics):
    t = tables.question_diversity_table(metrics).frame.set_index("label")
    # baseline growth per seed: 8 - 5 = 3 and 6 - 5 = 1 -> 2 +- 1
    assert t.loc["ours: Baseline", "Growth"] == pytest.approx(2.0)
    # sample SD / sqrt(n) (the paper prints this table without SE): sqrt(2) / sqrt(2)
    assert t.loc["ours: Baseline", "Growth_se"] == pytest.approx(1.0)
    assert t.loc["ours: VD75", "Growth"] == pytest.approx(3.5)
    assert t.loc["ours: VD75", "1-2"] == pytest.approx(9.5)
    assert t.loc["paper Qwen3-8B: Gen-only", "Growth"] == 2.6
    assert list(t.columns[:6]) == ["source", "group", "arm", "It. 1", "It. 1_se", "1-2"]
    md = tables.question_diversity_table(metrics, "markdown")
    assert "| ours: Baseline | 5.0 ± 0.0 | 7.0 ± 1.0 |" in md  # 8, 6: sample SD


def test_vocab_util_and_nli_tables(metrics):
    t = tables.vocab_util_table(metrics, "frame").set_index("label")
    # unique tokens at iteration 2: baseline 110, vd75 165 -> +50 %
    assert t.loc["ours: VD75", "unique_tokens"] == pytest.approx(165.0)
    assert t.loc["ours: VD75", "delta_unique_pct"] == pytest.approx(50.0)
    assert t.loc["paper Qwen3-4B: VD75", "delta_unique_pct"] == pytest.approx(36.07, abs=0.01)
    n = tables.nli_diversity_table(metrics, "frame").set_index("label")
    assert n.loc["ours: VD75", "semantic_delta_pct"] == pytest.approx(0.0)
    assert math.isnan(n.loc["ours: VD75", "logical"])  # not computed: NaN, no crash
    assert n.loc["paper Qwen3-4B: VD75", "logical"] == 0.405


def test_correctness_table_from_questions_and_from_files(tmp_path):
    q = pd.DataFrame([("vd75", s, t, c) for s in (0, 1) for t in (1, 2)
                      for c in ([True, False] if s == 0 else [True, True])],
                     columns=["arm", "seed", "iteration", "correct"])
    t = tables.correctness_table(q, "frame").set_index("label")
    assert t.loc["ours: VD75", "It. 1"] == pytest.approx(75.0)  # (50 + 100) / 2
    assert t.loc["ours: VD75", "It. 1_se"] == pytest.approx(25.0)  # sample SD 35.4 / sqrt 2
    assert t.loc["paper Qwen3-8B: Baseline", "It. 5"] == 38.0
    run = tmp_path / "exp" / "vd75-seed3"
    (run / "verification").mkdir(parents=True)
    (run / "config.yaml").write_text("run_id: vd75-seed3\n")
    (run / "verification" / "proposer_correctness.json").write_text(
        json.dumps({"correctness": {"1": 0.5, "2": None}}))
    loaded = tables.load_correctness(tmp_path / "exp")
    assert loaded.iloc[0].tolist() == ["vd75", 3, 1, 0.5] and math.isnan(loaded.iloc[1, 3])
    assert "ours: VD75 | 50.0" in tables.correctness_table(loaded, "markdown")
    # vdlib.report.experiments.correctness_frame: `correct` holds the fraction per run and iteration
    frac = pd.DataFrame([("vd75", 0, 1, 0.5), ("vd75", 1, 1, 1.0)],
                        columns=["arm", "seed", "iteration", "correct"])
    assert tables.correctness_table(frac).frame.set_index("label").loc[
        "ours: VD75", "It. 1"] == pytest.approx(75.0)


def test_wellposed_table_counts():
    rows = []
    for arm in ("baseline", "vd75"):
        for seed in (0, 1):
            rows.append((arm, seed, 1, 0.5, True, True))  # earlier iteration: ignored
            for acc, wp, ok in [(0.5, True, True), (0.4, False, False), (0.9, True, True),
                                (0.3, True, False), (0.1, None, False)]:
                rows.append((arm, seed, 2, acc, wp, ok))
    q = pd.DataFrame(rows, columns=["arm", "seed", "iteration", "acc", "well_posed", "correct"])
    vendi = pd.DataFrame([("baseline", 0, "well_posed", 3.0), ("vd75", 0, "well_posed", 5.5),
                          ("baseline", 0, "correct", 2.0), ("vd75", 0, "correct", 2.5)],
                         columns=["arm", "seed", "subset", "vendi"])
    t = tables.wellposed_table(q, "frame", vendi=vendi).set_index("label")
    r = t.loc["ours: VD75"]
    assert (r["filter_pass"], r["pass_rate"], r["well_posed"], r["correct"]) == (3, 60.0, 2, 1)
    assert (r["delta_vendi_wp"], r["delta_vendi_c"]) == (2.5, 0.5)
    assert t.loc["paper Qwen3-4B: VD75", "delta_vendi_wp"] == 11.4
    assert "ours: Baseline" in tables.wellposed_table(q, "latex")
    # one row per run (vdlib.report.experiments.composition_frame): pass_rate is a fraction
    runs = pd.DataFrame([("baseline", 0, 5, 8, 0.4, 6, 2, 3.0, 2.0),
                         ("vd75", 0, 5, 10, 0.5, 9, 3, 5.0, 2.5),
                         ("vd75", 1, 5, 12, 0.6, 7, 5, 6.0, None)],
                        columns=["arm", "seed", "iteration", "filter_pass", "pass_rate",
                                 "well_posed", "correct", "vendi_wp", "vendi_c"])
    r = tables.wellposed_table(runs, "frame").set_index("label").loc["ours: VD75"]
    assert (r["filter_pass"], r["pass_rate"], r["well_posed"]) == (11, 55.0, 8)
    assert r["filter_pass_se"] == pytest.approx(1.0)  # sample SD sqrt(2) / sqrt(2)
    assert (r["delta_vendi_wp"], r["delta_vendi_c"]) == (2.5, 0.5)

