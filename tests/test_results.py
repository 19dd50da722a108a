"""The committed-results report step (vdlib.report.results): records collected from run folders, and
the figure and tables regenerated from the JSON alone."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats

from vdlib.evaluation import BenchmarkResult, EvalSummary
from vdlib.report.results import (
    collect_results,
    effects_table,
    load_results,
    merge_results,
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
    assert row["self_bleu"] == "0.325 ± 0.005" and row["seeds"] == 2  # sample SD 0.007 / sqrt 2
    p1 = pass1_table(load_results(path)).set_index("arm")
    assert p1.loc["Base (no training)", "gsm8k"] == "12.0 ± 0.9"  # its 3 evaluation runs
    # the notebooks' rule, written into the file (the config's defaults): each seed its first run
    assert {k: data["evaluation"][k] for k in ("per_seed", "se_ddof")} == {
        "per_seed": "first_run", "se_ddof": 0}
    assert p1.loc["VD75", "gsm8k"] == "30.0 ± 0.0" and p1.loc["VD75", "gsm8k seeds"] == 2
    eff = effects_table(load_results(path))
    bleu = eff[(eff.metric == "self_bleu") & (eff.iteration == 2)].iloc[0]
    assert bleu["diff"] == pytest.approx(-0.205) and bool(bleu["paper_direction"])
    welch = stats.ttest_ind([0.32, 0.33], [0.52, 0.54], equal_var=False)
    assert bleu["welch_t"] == pytest.approx(welch.statistic, abs=0.005)
    assert bleu["welch_df"] == pytest.approx(welch.df, abs=0.005)
    assert bleu["welch_p"] == pytest.approx(welch.pvalue, abs=5e-5)
    assert bool(bleu["welch_significant"]) == (welch.pvalue < 0.05)
    # paired by seed: differences -0.20 and -0.21, a t-test on 1 df
    paired = stats.ttest_rel([0.32, 0.33], [0.52, 0.54])
    assert bleu["n_pairs"] == 2 and bleu["paired_diff"] == pytest.approx(-0.205)
    assert bleu["paired_df"] == 1 and bleu["paired_p"] == pytest.approx(paired.pvalue, abs=5e-5)
    assert bool(bleu["paired_significant"]) == (paired.pvalue < 0.05)
    vendi = eff[(eff.metric == "vendi") & (eff.iteration == 2)].iloc[0]
    assert vendi["diff"] == 0 and not bool(vendi["paper_direction"])
    assert vendi["welch_p"] == 1 and not bool(vendi["welch_significant"])

    files = results_report(path, tmp_path / "report")
    names = sorted(p.name for p in files)
    assert {"gpu_small_main_dynamics.png", "gpu_small_main_summary.md",
            "gpu_small_main_pass1.csv", "gpu_small_main_effects.md",
            "gpu_small_main_report.json"} <= set(names)
    effects_md = (tmp_path / "report" / "gpu_small_main_effects.md").read_text(encoding="utf-8")
    assert effects_md.startswith("VD arm minus baseline (vdlib.utils.stats.compare_seeds)")
    assert (tmp_path / "report" / "gpu_small_main_pass1.md").read_text(
        encoding="utf-8").startswith("pass@1 in %, mean ± SE over k values, pooled as the "
                                     "notebooks pool")
    paper = (tmp_path / "report" / "gpu_small_main_paper.md").read_text(encoding="utf-8")
    assert paper.startswith("pass@1 in %: ours at each arm's last evaluated iteration")
    again = pd.read_csv(tmp_path / "report" / "gpu_small_main_effects.csv")
    assert list(again.columns)[:6] == ["arm", "metric", "iteration", "n_baseline", "n_vd",
                                      "baseline"]


def test_vdlib_results_prints_the_comparisons(tmp_path, capsys):
    """``vdlib results`` prints the effects table (compare_seeds' tests), then the files."""
    from vdlib.app.cli import main

    runs = _runs(tmp_path / "runs")
    path = tmp_path / "r.json"
    path.write_text(json.dumps(collect_results(runs, meta={"iterations": 2})))
    assert main(["results", str(path), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("VD arm minus baseline (vdlib.utils.stats.compare_seeds)")
    assert "welch_p" in out and "paired_p" in out and "paired_significant" in out
    assert str(tmp_path / "out" / "r_effects.md") in out


def test_a_file_without_records_is_refused(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"card": "x"}))
    with pytest.raises(ValueError, match="no 'records' list"):
        load_results(bad)


def test_merge_results_a_rerun_supersedes_and_cut_evaluations_count_per_benchmark():
    rec = lambda arm, seed, t, **kw: {"arm": arm, "seed": seed, "iteration": t, **kw}  # noqa: E731
    old = {"arms": ["baseline", "vd75"], "seeds": [0, 1], "card": "H100",
           "evaluation": {"runs": 3, "items": {"gsm8k": 1319}},
           "records": [rec("base", None, 0, pass1_gsm8k=1.3, pass1_gsm8k_runs=[1.3] * 3),
                       rec("baseline", 0, 1, self_bleu=0.5, pass1_gsm8k=1.1,
                           pass1_gsm8k_runs=[1.1] * 3),
                       rec("baseline", 1, 1, self_bleu=0.4), rec("vd75", 1, 1, self_bleu=0.3)]}
    new = {"seeds": [0], "card": "H200", "evaluation": {"runs": 3, "items": None},
           "records": [rec("vd75", 0, t, self_bleu=0.2) for t in (1, 2)]
           + [rec("baseline", 0, t, self_bleu=0.45) for t in (1, 2)]}
    new["records"][-1].update(pass1_gsm8k=0.9, pass1_gsm8k_runs=[0.9] * 3,
                              pass1_math500=0.5, pass1_math500_runs=[0.5] * 3)
    new["records"][1].update(pass1_gsm8k=1.0, pass1_gsm8k_runs=[1.0] * 3)
    m = merge_results([old, new])
    assert m["seeds"] == [0, 1] and m["iterations"] == 2
    assert m["evaluation"]["items"] == {"gsm8k": 1319}  # None does not erase
    keys = [(r["arm"], r["seed"], r["iteration"]) for r in m["records"]]
    assert keys == [("base", None, 0), ("baseline", 0, 1), ("baseline", 0, 2),
                    ("baseline", 1, 1), ("vd75", 0, 1), ("vd75", 0, 2), ("vd75", 1, 1)]
    assert m["records"][1]["self_bleu"] == 0.45 and "pass1_gsm8k" not in m["records"][1]
    assert m["runs"]["baseline-seed0"] == {"iterations": [1, 2], "evaluated": True, "part": 1,
                                           "card": "H200"}
    assert m["runs"]["vd75-seed1"]["part"] == 0 and m["runs"]["vd75-seed1"]["card"] == "H100"
    assert m["card"] == "H100, H200"  # every card of the merged runs, in part order
    p1 = pass1_table(m).set_index("arm")
    assert p1.loc["Baseline", "iteration"] == 2 and p1.loc["Baseline", "math500 seeds"] == 1
    assert p1.loc["VD75", "math500"] == "" and p1.loc["VD75", "gsm8k seeds"] == 1


def _gpu_small_module():
    from _script_loader import load_script

    return load_script("tools/lent-gpus/gpu_small.py")


def test_an_iteration_cut_before_its_solver_phase_still_gives_its_generation_record(tmp_path):
    """tools/lent-gpus/gpu_small.py export: a run that the machine hold stopped after iteration 2's
    curriculum stage records that iteration too, marked partial, with the metrics stage's own
    numbers; merging counts it in the tables but not among the finished iterations."""
    from vdlib.config.experiment import load_params, save_params

    gs = _gpu_small_module()
    run = tmp_path / "vd75-seed0"
    save_params(load_params({"profile": "tiny", "metrics": {"embedder": "none"}}),
                run / "config.yaml")
    q = ["How many apples are left if 3 of 7 are eaten?", "What is 12 times 4?",
         "Find x if 2x + 3 = 11.", "How many apples are left if 3 of 9 are eaten?"]
    for t in (1, 2):
        it = run / f"iter_{t}"
        it.mkdir(parents=True)
        rows = [{"question": x, "valid": True, "acc": 0.5, "proposer_agrees": True} for x in q]
        (it / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (it / "curriculum.jsonl").write_text(json.dumps(rows[0]) + "\n")
        (it / "proposer_rollouts.jsonl").write_text(json.dumps({"valid": True, "reward": 0.3})
                                                    + "\n")
        (it / "proposer_train.json").write_text(json.dumps({"masked": True, "log_history": [
            {"entropy": 1.5}], "mask_log": [{"kept_fraction": 0.75}]}))
    (run / "iter_1" / "solver_train.json").write_text(json.dumps({"mean_reward": 0.4}))
    (run / "iter_1" / "metrics.json").write_text(json.dumps({"self_bleu": 0.5}))
    recs = gs.partial_records({("vd75", 0): run})
    assert len(recs) == 1
    rec = recs[0]
    assert (rec["arm"], rec["seed"], rec["iteration"], rec["partial"]) == \
        ("vd75", 0, 2, gs.PARTIAL)
    assert rec["valid_fraction"] == 1.0 and rec["curriculum_size"] == 1
    assert 0.0 < rec["self_bleu"] < 1.0 and rec["unique_tokens"] > 0
    written = json.loads((run / "iter_2" / gs.PARTIAL_FILE).read_text())
    assert written["solver_trained"] is None and written["iteration"] == 2
    done = collect_results({("vd75", 0): run})
    merged = merge_results([{**done, "records": done["records"] + recs}])
    assert merged["runs"]["vd75-seed0"]["iterations"] == [1]
    assert merged["runs"]["vd75-seed0"]["partial_iterations"] == [2]
    assert merged["iterations"] == 1


def test_a_merge_part_can_be_limited_to_some_of_its_runs(tmp_path):
    """tools/lent-gpus/gpu_small.py merge --parts FILE::RUN,RUN takes only those runs of a part (and
    its base record); a run the part lacks is an error naming what it has."""
    gs = _gpu_small_module()
    part = tmp_path / "part.json"
    part.write_text(json.dumps({"seeds": [0, 1], "records": [
        {"arm": "base", "seed": None, "iteration": 0},
        *({"arm": a, "seed": s, "iteration": 1} for a in ("baseline", "vd75") for s in (0, 1))]}))
    data = gs._load_part(f"{part}::vd75-seed1,baseline-seed1")
    assert [(r["arm"], r["seed"]) for r in data["records"]] == \
        [("base", None), ("baseline", 1), ("vd75", 1)]
    assert data["seeds"] == [1]
    assert len(gs._load_part(str(part))["records"]) == 5
    with pytest.raises(SystemExit, match="vd85-seed0"):
        gs._load_part(f"{part}::vd85-seed0")


def test_only_runs_that_finished_their_last_iteration_have_final_solvers(tmp_path, caplog):
    """tools/lent-gpus/gpu_small.py eval-runs evaluates a run's solver only once its last planned
    iteration finished; a run cut in that iteration is named in a warning, not evaluated."""
    gs = _gpu_small_module()
    runs = {}
    for arm, finished in (("baseline", 3), ("vd75", 2)):
        runs[(arm, 0)] = tmp_path / f"{arm}-seed0"
        for t in range(1, finished + 1):
            (runs[(arm, 0)] / f"iter_{t}").mkdir(parents=True)
            (runs[(arm, 0)] / f"iter_{t}" / "metrics.json").write_text("{}")
    with caplog.at_level("WARNING"):
        assert gs.final_runs(runs, 3) == {("baseline", 0): runs[("baseline", 0)]}
    assert "vd75-seed0: iteration 3 has not finished" in caplog.text
    assert gs.final_runs(runs, 2) == runs


INVALID = ROOT / "docs" / "results" / "invalid_questions.json"


def test_invalid_counts_classify_each_generation_and_pool_the_seeds(tmp_path):
    """vdlib.report.results_invalid: each generation in the first class that fits, counted per
    arm and iteration over the runs (seeds) of each arm; the table prints the shares."""
    import gzip

    from vdlib.report.results_invalid import (
        check_invalid,
        count_invalid,
        invalid_table,
        run_question_files,
    )

    gens = [{"valid": True, "text": "x"},
            {"valid": False, "text": "<question>1+1?", "finish_reason": "length"},
            {"valid": False, "text": "no block", "finish_reason": "stop"},
            {"valid": False, "text": "<question>1+1?</question> two", "finish_reason": "stop"},
            {"valid": False, "text": "<question>1+1?</question> \\boxed{2} but",
             "finish_reason": "stop"}]
    runs = []
    for arm, seed in (("vd75", 0), ("vd75", 1), ("baseline", 0)):
        run = tmp_path / f"{arm}-seed{seed}"
        for t in (1, 2):
            (run / f"iter_{t}").mkdir(parents=True)
            with gzip.open(run / f"iter_{t}" / "questions.jsonl.gz", "wt") as f:
                mine = gens if arm == "vd75" else gens[:1]
                f.write("".join(json.dumps(g) + "\n" for g in mine))
        runs.append((run.name, arm, run_question_files(run)))
    data = count_invalid(runs, "x")
    assert data["runs"] == ["baseline-seed0", "vd75-seed0", "vd75-seed1"]
    assert [(r["arm"], r["iteration"]) for r in data["counts"]] == [
        ("vd75", 1), ("vd75", 2), ("baseline", 1), ("baseline", 2)]
    assert data["counts"][0] == {"arm": "vd75", "iteration": 1, "generations": 10, "valid": 2,
                                 "truncated": 2, "no closed question": 2, "no answer": 2,
                                 "other": 2}
    assert check_invalid("f", data) is data
    rows = invalid_table(data).splitlines()
    assert rows[2] == "| vd75 | 1 | 10 | 20.0 % | 20.0 % | 20.0 % | 20.0 % | 20.0 % |"
    assert rows[4] == "| baseline | 1 | 1 | 100.0 % | 0.0 % | 0.0 % | 0.0 % | 0.0 % |"
    data["counts"][0]["valid"] = 3
    with pytest.raises(ValueError, match=r"counts\[0\]: the class counts do not sum"):
        check_invalid("f", data)


def test_the_committed_invalid_counts_are_count_invalid_of_the_archived_question_files():
    """docs/results/invalid_questions.json is count_invalid over the question files of the runs
    merge.sh merges, read in place from docs/results/archives/gpu_small_main_*.zip."""
    from _script_loader import load_script

    from vdlib.report.results_file import read_json_file
    from vdlib.report.results_invalid import count_invalid

    cq = load_script("benchmarks/committed_questions.py")
    order = ("baseline", "vd85", "vd75")  # the main table's columns
    runs = sorted(((f"{arm}-seed{seed}", arm, cq.iterations(run))
                   for _, arm, seed, run in cq.runs([COMMITTED.stem])),
                  key=lambda r: order.index(r[1]))
    assert count_invalid(runs, COMMITTED.stem) == read_json_file(INVALID)


@pytest.mark.skipif(not COMMITTED.exists(), reason="no committed GPU results yet")
def test_the_committed_invalid_counts_cover_exactly_the_merged_runs():
    """docs/results/invalid_questions.json (count_invalid over the question files of the runs
    merge.sh merges): its generations and valid counts per arm and iteration are the results
    JSON's pooled ones."""
    from vdlib.report.results_file import read_json_file
    from vdlib.report.results_invalid import check_invalid

    rows = check_invalid(INVALID, read_json_file(INVALID))["counts"]
    data = load_results(COMMITTED)
    assert read_json_file(INVALID)["experiment"] == COMMITTED.stem
    for r in rows:
        recs = [x for x in data["records"] if x["arm"] == r["arm"]
                and x["iteration"] == r["iteration"]]
        assert len(recs) == 3
        assert r["generations"] == sum(x["generated"] for x in recs)
        assert r["valid"] == sum(x["valid_questions"] for x in recs)
    assert len(rows) == len({(r["arm"], r["iteration"]) for r in data["records"]
                             if r["arm"] != "base"})


#: a number not glued to a letter (``135M``, ``4B``, ``H100`` and ``t(2)``'s df aside)
_NUMBER = r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?![\w])"
#: subsections of the GPU section about machines, timings and plans, not results
_NOT_FROM_THE_JSON = ("### What was run", "### What testing the rest would need")


@pytest.mark.skipif(not COMMITTED.exists(), reason="no committed GPU results yet")
def test_results_md_gpu_section_is_what_the_main_table_prints():
    """docs/RESULTS.md's GPU section: every block of the main table
    (vdlib.report.results_main_table) and the invalid-question one is what the library prints
    from the committed JSON, and every number of the prose around them (headings and the
    subsections about machines and plans aside) is a number those blocks print."""
    import re

    from vdlib.report.results_blocks import blocks
    from vdlib.report.results_file import read_json_file
    from vdlib.report.results_invalid import invalid_table
    from vdlib.report.results_main_table import MAIN_TABLES, Records

    text = (ROOT / "docs" / "RESULTS.md").read_text(encoding="utf-8")
    x = Records(load_results(COMMITTED))
    new = {f"{COMMITTED.stem}:{name}": fn(x) for name, fn in MAIN_TABLES.items()}
    new["invalid_questions:invalid"] = invalid_table(read_json_file(INVALID))
    section = text[text.index("## GPU scale"):]
    section = section[:section.index("\n## ", 1)]
    assert {b.name: b.body for b in blocks(section)} == new
    prose = re.sub(r"<!-- BEGIN vdlib results:([\w:]+) -->.*?<!-- END vdlib results:\1 -->", "",
                   section, flags=re.S)
    kept, skip = [], False
    for line in prose.splitlines():
        if line.startswith("#"):
            skip = line.startswith(_NOT_FROM_THE_JSON)
            continue
        if not skip:
            kept.append(line)
    printed = {n.replace(",", "") for body in new.values() for n in re.findall(_NUMBER, body)}
    quoted = [n.replace(",", "") for n in re.findall(_NUMBER, "\n".join(kept))]
    assert len(quoted) > 50
    assert [n for n in quoted if n not in printed] == []
    for phrase in ("paper's unpaired", "paper's 2-SE", "paper's rule", "at every iteration"):
        assert phrase not in section, phrase


def test_scale_comparison_puts_the_large_runs_beside_the_small_ones():
    """The quickstart's side-by-side table: its own numbers (mean over its seeds) beside the
    results file's mean ± SE at the same arm and iteration; counts included; an arm or
    iteration the file lacks gets an empty cell."""
    from vdlib.report.frames import arm_label
    from vdlib.report.results import scale_comparison

    data = {"records": [
        {"arm": a, "seed": s, "iteration": t, "valid_questions": v + s, "vendi": 40.0 + s}
        for a, v in (("baseline", 1000), ("vd75", 700)) for s in (0, 1, 2) for t in (1, 2)]}
    small = pd.DataFrame(
        [("baseline", 0, 1, "valid_questions", 14.0), ("baseline", 0, 1, "vendi", 6.5),
         ("vd75", 0, 2, "valid_questions", 11.0), ("vd75", 0, 2, "vendi", 7.25),
         ("vd75", 1, 2, "vendi", 8.25), ("gen_only", 0, 1, "vendi", 3.0),
         ("vd75", 0, 2, "self_bleu", 0.5)],
        columns=["arm", "seed", "iteration", "metric", "value"])
    t = scale_comparison(small, data, ["valid_questions", "vendi"])
    assert list(t.columns) == ["arm", "iteration", "tiny valid_questions",
                               "GPU valid_questions", "tiny vendi", "GPU vendi"]
    rows = {(r.arm, r.iteration): r for r in t.itertuples(index=False)}
    assert set(rows) == {("Baseline", 1), ("VD75", 2), (arm_label("gen_only"), 1)}
    base = t[(t.arm == "Baseline") & (t.iteration == 1)].iloc[0]
    assert base["tiny valid_questions"] == 14.0 and base["tiny vendi"] == 6.5
    assert base["GPU valid_questions"] == summary_table(data, ["valid_questions"]).iloc[0][
        "valid_questions"]
    assert base["GPU valid_questions"].startswith("1,001.000 ±")
    vd = t[t.arm == "VD75"].iloc[0]
    assert vd["tiny vendi"] == 7.75  # the mean over the small runs' seeds
    assert vd["GPU vendi"].startswith("41.000 ±")
    assert t[t.arm == arm_label("gen_only")].iloc[0]["GPU vendi"] == ""  # not in the file


def test_paper_table_puts_the_papers_printed_cells_beside_ours():
    from vdlib.report.results import paper_table

    data = {"records": [
        {"arm": "base", "seed": None, "iteration": 0, "pass1_gsm8k": 1.0,
         "pass1_gsm8k_runs": [1.0, 1.0]},
        *({"arm": arm, "seed": s, "iteration": t, "pass1_gsm8k": 2.0 + s,
           "pass1_gsm8k_runs": [2.0 + s]}
          for arm in ("train_only", "anneal") for s in (0, 1) for t in (1, 3))]}
    table = paper_table(data)
    assert [(r.arm, r.iteration) for r in table.itertuples()] == [
        ("Base (no training)", 0), ("Train-only", 3), ("VD75 (anneal)", 3)]  # last iterations
    base, train, anneal = (table.iloc[i] for i in range(3))
    assert base["paper Qwen3-4B"] == "63.5 ± 5.2" and base["ours"] == "1.0 ± 0.0"
    assert train["ours"] == "2.5 ± 0.4"  # population SD 0.5 / sqrt(2)
    assert train["paper Qwen3-4B"] == "85.4 ± 1.1"
    assert anneal["paper Qwen3-4B"] == "" and anneal["paper Qwen3-8B"] == ""  # no paper row


def test_interim_evidence_keeps_the_trained_records_of_the_first_two_iterations():
    """vdlib.report.results_interim.interim_evidence: the partial exports' records at
    iterations 1 and 2 (not the base record, not a cut third iteration), the table's metrics
    only; the table puts them beside the reference file's baseline and VD75."""
    from vdlib.report.results_interim import interim_evidence, interim_table

    rec = lambda arm, s, t: {"arm": arm, "seed": s, "iteration": t, "vendi": 10.0 + s + t,  # noqa: E731
                             "self_bleu": 0.5, "valid_fraction": 1.0, "curriculum_size": 40,
                             "novelty_rate": 1.0}
    parts = [{"card": "H100", "records": [{"arm": "base", "seed": None, "iteration": 0}]
              + [rec(a, s, t) for a in ("train_only", "gen_only") for s in (0, 1)
                 for t in (1, 2, 3)]},
             {"card": "H100", "records": [rec(a, s, t) for a in ("kl_cov", "clip_cov")
                                          for s in (0, 1) for t in (1, 2)]}]
    ev = interim_evidence(parts, "main", "there")
    assert ev["card"] == "H100" and ev["reference"] == "main"
    assert ev["arms"] == ["train_only", "gen_only", "kl_cov", "clip_cov"]
    assert {r["iteration"] for r in ev["records"]} == {1, 2} and len(ev["records"]) == 16
    assert "novelty_rate" not in ev["records"][0]
    reference = {"records": [rec(a, s, t) for a in ("baseline", "vd75", "vd85")
                             for s in (0, 1) for t in (1, 2)]}
    vendi2 = [r for r in interim_table(reference, ev).splitlines() if r.startswith("| Vendi ↑ | 2")]
    assert vendi2 == ["| Vendi ↑ | 2 | " + " | ".join(["12.5 ± 0.5 (n=2)"] * 6) + " |"]


def test_the_committed_interim_file_is_interim_evidence_of_the_archived_exports():
    """docs/results/interim_phase_entropy.json is interim_evidence of the two partial exports
    its ``source`` names, read in place from the experiments' archives."""
    from vdlib.report.results_file import read_json_file
    from vdlib.report.results_interim import interim_evidence
    from vdlib.utils.archive import resolve

    committed = read_json_file(ROOT / "docs" / "results" / "interim_phase_entropy.json")
    sources = committed["source"].split(", ")
    assert [s.split(".zip/")[0] for s in sources] == ["docs/results/archives/gpu_small_phase",
                                                      "docs/results/archives/gpu_small_entropy"]
    parts = [load_results(s, json.loads(resolve(ROOT / s).read_text())) for s in sources]
    assert interim_evidence(parts, "gpu_small_main", committed["source"]) == committed


def test_the_committed_interim_table_counts_the_partial_runs():
    """The interim table (issue 30's first, partial hold; not in docs/RESULTS.md since both
    experiments ran whole) from docs/results alone: every arm has 3 seeds at iteration 1,
    clip_cov 2 at iteration 2 (its seed 1 reached iteration 1 only), and the shared arms are the
    main table's."""
    from vdlib.report.results_blocks import TABLES, Evidence

    out = TABLES["interim"](Evidence(ROOT / "docs" / "results"), "interim_phase_entropy")
    rows = {(r.split("|")[1].strip(), r.split("|")[2].strip()): r
            for r in out.splitlines() if r.startswith("| Vendi")}
    assert rows[("Vendi ↑", "1")].count("(n=3)") == 6
    assert rows[("Vendi ↑", "2")].count("(n=3)") == 5 and "(n=2)" in rows[("Vendi ↑", "2")]
    assert "38.1 ± 5.8 (n=3)" in rows[("Vendi ↑", "2")]  # the main table's baseline


def test_collect_results_records_the_alphas_and_the_file_checks_them(tmp_path):
    """Each record carries the alphas its iteration ran at (the adaptive schedule's trajectory is
    read from the results file); older metrics without them give records without them, and a
    non-number there is refused by name."""
    for name, extra in (("adaptive", {"alpha_train": 0.75, "alpha_gen": 0.8125}), ("old", {})):
        it = tmp_path / name / "iter_1"
        it.mkdir(parents=True)
        (it / "metrics.json").write_text(json.dumps({"valid_fraction": 0.5, **extra}))
    data = collect_results({("adaptive", 0): tmp_path / "adaptive", ("old", 0): tmp_path / "old"})
    adaptive, old = data["records"]
    assert (adaptive["alpha_train"], adaptive["alpha_gen"]) == (0.75, 0.8125)
    assert "alpha_train" not in old and "alpha_gen" not in old
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    assert load_results(path)["records"][0]["alpha_gen"] == 0.8125
    adaptive["alpha_gen"] = "high"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="'alpha_gen' is not a finite number"):
        load_results(path)
