"""Issue 30's results files beside the main table's: the paper's comparisons between trained arms
(vdlib.report.results_contrasts), a merge that shares another experiment's runs, and every
committed docs/results/gpu_small_*.json regenerating its tables (also on a trimmed copy)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats

from vdlib.report.results import load_results, loop_frame, merge_results, results_report
from vdlib.report.results_contrasts import CONTRAST_METRICS, GROWTH, Contrast, contrasts_table
from vdlib.report.results_single_policy import is_single_policy, single_policy_report

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results"
#: each committed results file and the script that merges it from the machine holds' exports
MERGE_SCRIPTS = {"gpu_small_main": "merge.sh", "gpu_small_phase": "merge_phase.sh",
                 "gpu_small_anneal": "merge_anneal.sh", "gpu_small_entropy": "merge_entropy.sh",
                 "gpu_small_fail_neg": "merge_failneg.sh",
                 "gpu_small_single_policy": "merge_single_policy.sh",
                 "gpu_small_adaptive": "merge_adaptive.sh"}
#: the co-evolution files (records by arm, seed and iteration) and the single-policy exports
#: (runs of GRPO steps, vdlib.report.results_single_policy), each checked as its kind
COMMITTED = sorted(p for p in RESULTS.glob("gpu_small_*.json")
                   if not is_single_policy(json.loads(p.read_text(encoding="utf-8"))))
SINGLE = sorted(set(RESULTS.glob("gpu_small_*.json")) - set(COMMITTED))


def _record(arm: str, seed: int, t: int, **values: float) -> dict:
    return {"arm": arm, "seed": seed, "iteration": t, **values}


def _phase_frame(keep: str | None = None) -> pd.DataFrame:
    data = _phase_data()
    data["records"] = [r for r in data["records"] if keep in (None, r["arm"])]
    return loop_frame(data, CONTRAST_METRICS)


def _phase_data() -> dict:
    vendi = {"train_only": [30.0, 32.0, 35.0], "gen_only": [40.0, 45.0, 46.0]}
    cum = {"train_only": ([30.0, 31.0], [32.0, 34.0], [35.0, 36.0]),
           "gen_only": ([40.0, 44.0], [45.0, 47.0], [46.0, 49.0])}
    return {"arms": ["train_only", "gen_only"], "records": [
        _record(arm, s, t, vendi=vendi[arm][s] + t, cumulative_vendi=cum[arm][s][t - 1],
                valid_fraction=0.9 if arm == "train_only" else 0.6, self_bleu=None)
        for arm in vendi for s in range(3) for t in (1, 2)]}


def test_a_contrast_is_the_arm_minus_its_reference_with_welch_and_paired_tests():
    table = contrasts_table(_phase_frame())
    assert set(zip(table["reference"], table["arm"], strict=True)) == {("Train-only", "Gen-only")}
    row = table[(table["metric"] == "vendi") & (table["iteration"] == 2)].iloc[0]
    ref, arm = [31.0, 33.0, 36.0], [41.0, 46.0, 47.0]
    welch = stats.ttest_ind(arm, ref, equal_var=False)
    paired = stats.ttest_rel(arm, ref)
    assert row["diff"] == pytest.approx(sum(arm) / 3 - sum(ref) / 3, abs=1e-4)
    assert row["welch_p"] == pytest.approx(welch.pvalue, abs=1e-4)
    assert row["paired_t"] == pytest.approx(paired.statistic, abs=0.01)
    assert row["paired_df"] == 2 and row["n_reference"] == row["n_arm"] == 3
    assert bool(row["paper_direction"])  # the paper: gen-only is the more diverse
    assert "app:embedding_ablations" in row["claim"]
    cost = table[table["metric"] == "valid_fraction"].iloc[0]
    assert cost["paper_direction"] is None and cost["diff"] == pytest.approx(-0.3)
    growth = table[table["metric"] == GROWTH]  # cumulative Vendi at 2 minus at 1, per seed
    assert list(growth["iteration"]) == [2]
    assert growth.iloc[0]["reference_mean"] == pytest.approx((1 + 2 + 1) / 3, abs=1e-4)
    assert growth.iloc[0]["arm_mean"] == pytest.approx((4 + 2 + 3) / 3, abs=1e-4)
    assert "self_bleu" not in set(table["metric"])  # None values: no comparison


def test_contrasts_apply_only_to_pairs_the_file_holds_and_may_state_no_direction():
    assert contrasts_table(_phase_frame("gen_only")).empty
    mine = (Contrast("gen_only", "train_only", "ours", None),)
    table = contrasts_table(_phase_frame(), mine)
    assert table["paper_direction"].isna().all() and set(table["arm"]) == {"Train-only"}


def test_a_merge_shares_runs_of_another_file_and_says_where_they_came_from(tmp_path):
    from _script_loader import load_script

    gs = load_script("tools/lent-gpus/gpu_small.py")
    main = tmp_path / "main.json"
    main.write_text(json.dumps({
        "arms": ["baseline", "vd85", "vd75"], "card": "H100, H200",
        "runs": {"baseline-seed0": {"card": "H100", "evaluated": "partial (log)"}},
        "records": [_record("base", None, 0), _record("baseline", 0, 1, pass1_gsm8k=1.0),
                    _record("vd85", 0, 1), _record("vd75", 0, 1)]}))
    phase = tmp_path / "phase.json"
    phase.write_text(json.dumps({"arms": ["train_only", "gen_only"], "card": "H200",
                                 "records": [_record("gen_only", 0, 1)]}))
    m = merge_results([gs._load_part(f"{main}::baseline-seed0"), gs._load_part(str(phase))])
    assert m["arms"] == ["baseline", "train_only", "gen_only"]  # the union, vd85 not taken
    assert m["runs"]["baseline-seed0"] == {"iterations": [1], "evaluated": "partial (log)",
                                           "part": 0, "card": "H100", "source": str(main)}
    assert m["runs"]["gen_only-seed0"]["source"] == str(phase)
    assert m["card"] == "H100, H200" and "source" not in m
    assert [r["arm"] for r in m["records"]] == ["base", "baseline", "gen_only"]


@pytest.mark.parametrize("path", [  # the main table's and phase's in make test, ~9 s each
    pytest.param(p, id=p.stem, marks=[] if p.stem in ("gpu_small_main", "gpu_small_phase")
                 else [pytest.mark.slow]) for p in COMMITTED])
def test_each_committed_results_file_regenerates_its_tables(path, tmp_path):
    """docs/results/gpu_small/ holds exactly the tables `vdlib results` draws from each file."""
    written = results_report(path, tmp_path)
    tables = [p for p in written if p.suffix == ".md"]
    assert {p.name.removeprefix(path.stem + "_") for p in tables} >= {
        "summary.md", "pass1.md", "paper.md", "effects.md"}
    for p in tables:
        committed = RESULTS / "gpu_small" / p.name
        assert p.read_text(encoding="utf-8") == committed.read_text(encoding="utf-8"), p.name


@pytest.mark.parametrize("path", [  # the main table's in make test, the others' ~9 s each slow
    pytest.param(p, id=p.stem, marks=[] if p.stem == "gpu_small_main" else [pytest.mark.slow])
    for p in COMMITTED])
def test_each_committed_results_file_reports_on_a_trimmed_copy(path, tmp_path):
    """Every arm's first two seeds and first two iterations (plus the base record): the report
    step still draws the figure and every table, contrasts where the file has a pair."""
    data = load_results(path)
    for key in ("card", "vllm_version", "K", "M", "iterations", "arms"):
        assert key in data, key
    keep = [r for r in data["records"]
            if r["arm"] == "base" or (r["seed"] in (0, 1) and r["iteration"] <= 2)]
    trimmed = tmp_path / path.name
    trimmed.write_text(json.dumps({**data, "records": keep}))
    results_report(trimmed, tmp_path / "out")
    out = tmp_path / "out"
    assert (out / f"{path.stem}_dynamics.png").stat().st_size > 10_000
    assert set(pd.read_csv(out / f"{path.stem}_summary.csv")["iteration"]) <= {1, 2}
    growth = pd.read_csv(out / f"{path.stem}_question_diversity.csv")
    ours = growth[growth["source"] == "ours"]
    assert "Growth" in ours.columns and ours["1-3"].isna().all()  # the paper's rows have 1-5
    if {"train_only", "gen_only"} <= set(data["arms"]):
        contrasts = pd.read_csv(out / f"{path.stem}_contrasts.csv")
        assert set(contrasts["iteration"]) == {1, 2}
        assert (contrasts["n_pairs"] <= 2).all()


@pytest.mark.parametrize("path", COMMITTED + SINGLE, ids=lambda p: p.stem)
def test_each_committed_results_file_is_the_merge_of_its_exports(path, tmp_path):
    """tools/lent-gpus/<script> (gpu_small.py merge over the archived exports)
    gives the committed file."""
    script = ROOT / "tools" / "lent-gpus" / MERGE_SCRIPTS[path.stem]
    out = tmp_path / "merged.json"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run(["bash", str(script), str(out)], cwd=ROOT, env=env, check=True,
                   capture_output=True, timeout=300)
    assert json.loads(out.read_text()) == json.loads(path.read_text(encoding="utf-8"))


def _prose_after(text: str, end: str, source: str) -> tuple[list[str], list[str]]:
    """The decimal numbers of the prose after the marker ``end`` up to the next ``## ``
    section, and those of them (sign aside) that ``source`` does not print."""
    import re

    number = r"[+−-]?\d[\d,]*\.\d+"
    after = text[text.index(end) + len(end):]
    after = after[:after.index("\n## ")]
    allowed = {n.lstrip("+−-") for n in re.findall(number, source)}
    quoted = re.findall(number, after)
    return quoted, [q for q in quoted if q.lstrip("+−-") not in allowed]


def test_results_md_ablation_sections_are_what_results_ablations_prints():
    """docs/RESULTS.md has a section for every committed ablation file (the main table has its
    own, vdlib.report.results_main_table); each section's block is what
    vdlib.report.results_ablations prints from the file, and the prose after the block quotes
    only numbers of the block or of the paper's rows the file's question-diversity table sets
    beside ours."""
    from vdlib.report.results_ablations import ABLATIONS, ablation_block
    from vdlib.report.results_blocks import blocks, end_marker

    ablations = {p.stem for p in COMMITTED} - {"gpu_small_main"}
    assert ablations <= set(ABLATIONS)
    text = (ROOT / "docs" / "RESULTS.md").read_text(encoding="utf-8")
    new = {stem: ablation_block(load_results(RESULTS / f"{stem}.json"), stem)
           for stem in ablations}
    assert {b.file: b.body for b in blocks(text) if b.table == "ablation"} == new
    for stem, body in new.items():
        paper = (RESULTS / "gpu_small" / f"{stem}_question_diversity.md").read_text()
        quoted, unlisted = _prose_after(text, end_marker(stem, "ablation"), body + paper)
        assert len(quoted) >= 15, stem
        assert unlisted == [], stem


#: the tables of a single-policy export that docs/RESULTS.md embeds, in its order
SINGLE_TABLES = ("entropy", "entropy_effects", "reward", "pass1", "pass1_effects")


@pytest.mark.parametrize("path", SINGLE, ids=lambda p: p.stem)
def test_results_md_single_policy_section_is_what_vdlib_results_writes(path):
    """docs/RESULTS.md's block for a single-policy file is the committed tables verbatim (the
    regenerate test below proves those are what `vdlib results` writes; `vdlib results --write`
    prints the same text, single_policy_markdown), and the prose after it, up to the next
    section, quotes only the block's numbers."""
    from vdlib.report.results_blocks import begin_marker, end_marker

    text = (ROOT / "docs" / "RESULTS.md").read_text(encoding="utf-8")
    begin = begin_marker(path.stem, "single_policy") + "\n"
    end = end_marker(path.stem, "single_policy")
    assert text.count(begin) == 1 and text.count(end) == 1, path.stem
    body = text[text.index(begin) + len(begin):text.index(end)]
    assert body == "\n".join((RESULTS / "gpu_small" / f"{path.stem}_{n}.md").read_text(
        encoding="utf-8") for n in SINGLE_TABLES)
    quoted, unlisted = _prose_after(text, end, body)
    assert len(quoted) >= 15
    assert unlisted == []


def test_the_committed_files_are_sorted_by_kind():
    assert [p.stem for p in COMMITTED] and all(p.stem in MERGE_SCRIPTS for p in COMMITTED + SINGLE)
    assert not {p.stem for p in SINGLE} & {p.stem for p in COMMITTED}


@pytest.mark.parametrize("path", SINGLE, ids=lambda p: p.stem)
def test_each_single_policy_file_regenerates_its_tables(path, tmp_path):
    """docs/results/gpu_small/ holds exactly the tables `vdlib results` draws from the
    single-policy export; a trimmed copy (two seeds, the first 20 steps) still reports."""
    written = single_policy_report(path, tmp_path)
    tables = [p for p in written if p.suffix == ".md"]
    assert {p.name.removeprefix(path.stem + "_") for p in tables} == {
        "entropy.md", "entropy_effects.md", "reward.md", "pass1.md", "pass1_effects.md"}
    for p in tables:
        committed = RESULTS / "gpu_small" / p.name
        assert p.read_text(encoding="utf-8") == committed.read_text(encoding="utf-8"), p.name
    data = json.loads(path.read_text(encoding="utf-8"))
    assert {r["arm"] for r in data["runs"]} == {"baseline", "vd95"}
    assert all(r["finished"] and len(r["steps"]) == data["steps_planned"] for r in data["runs"])
    keep = [{**r, "steps": r["steps"][:20]} for r in data["runs"] if r["seed"] in (0, 1)]
    trimmed = tmp_path / "trim" / path.name
    trimmed.parent.mkdir()
    trimmed.write_text(json.dumps({**data, "runs": keep}))
    out = tmp_path / "trim_out"
    single_policy_report(trimmed, out)
    entropy = pd.read_csv(out / f"{path.stem}_entropy.csv")
    assert set(entropy["seeds"]) == {2} and set(entropy["last step"]) == {20}
