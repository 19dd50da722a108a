"""fig:question_complexity's four quantities (vdlib.report.question_profile, issue 51 item 3),
and the two scripts that read the committed gpu-small questions with it and with the
failed-extraction switch."""

from __future__ import annotations

import json

import pytest
from _script_loader import ROOT, load_script

from vdlib.method.grading import majority_vote
from vdlib.report.question_profile import (
    PROFILE_METRICS,
    iteration_profile,
    largest_changes,
    profile_table,
)

SPLIT = str.split  # a tokenizer for the pure tests: whitespace words


def test_iteration_profile_counts_only_valid_questions():
    recs = [{"valid": True, "question": "Sell 1,000 pens at 2 and 2.0 each", "acc": 0.2},
            {"valid": True, "question": "x", "acc": None},  # valid, not scored
            {"valid": False, "question": "Lost 7 8 9", "acc": 0.9},
            {"valid": True, "question": None, "acc": 0.5}]  # no text: not a question
    prof = iteration_profile(recs, SPLIT)
    assert prof == {"valid_questions": 2, "mean_question_tokens": 4.5,
                    "mean_distinct_numbers": 1.0, "mean_acc": 0.2}
    assert iteration_profile([], SPLIT) == {"valid_questions": 0, "mean_question_tokens": None,
                                            "mean_distinct_numbers": None, "mean_acc": None}


def _row(arm, seed, t, q, tok, nums, acc):
    return {"arm": arm, "seed": seed, "iteration": t, "valid_questions": q,
            "mean_question_tokens": tok, "mean_distinct_numbers": nums, "mean_acc": acc}


def test_profile_table_pools_seeds_and_compares_with_the_baseline_of_the_same_iteration():
    rows = [_row("vd75", 0, 1, 50, 30.0, 3.0, 0.1),
            _row("baseline", 0, 1, 100, 20.0, 2.0, 0.2), _row("baseline", 1, 1, 80, 20.0, 2.0,
                                                               0.2),
            _row("baseline", 0, 2, 100, 10.0, 2.0, 0.0), _row("vd75", 0, 2, 100, 11.0, 2.0,
                                                              0.1)]
    table = profile_table(rows)
    cell = {(r["arm"], r["iteration"], r["metric"]): r for r in table}
    assert [r["arm"] for r in table[:4]] == ["baseline"] * 4  # the baseline first
    assert cell[("baseline", 1, "valid_questions")]["mean"] == 90.0
    assert cell[("baseline", 1, "valid_questions")]["n"] == 2
    assert cell[("vd75", 1, "valid_questions")]["pct_change"] == pytest.approx(-44.44)
    assert cell[("vd75", 1, "mean_question_tokens")]["pct_change"] == 50.0
    assert cell[("vd75", 2, "mean_question_tokens")]["pct_change"] == 10.0
    assert cell[("vd75", 2, "mean_acc")]["pct_change"] is None  # the baseline's mean is 0
    assert largest_changes(table) == {"vd75": {"pct_change": 50.0,
                                               "metric": "mean_question_tokens",
                                               "iteration": 1}}


def test_profile_table_without_the_baseline_has_no_changes():
    table = profile_table([_row("kl_cov", 0, 1, 10, 1.0, 1.0, 0.5)])
    assert {r["pct_change"] for r in table} == {None}
    assert largest_changes(table) == {}


def test_a_committed_iteration_gives_the_values_its_run_recorded(tokenizer):
    """Recomputed from a committed questions.jsonl.gz, the four quantities equal the ones the
    run's metrics.json recorded on the GPU host (the same definitions)."""
    qs = load_script("benchmarks/committed_questions.py")
    _, _, _, run_dir = next(qs.runs(["gpu_small_entropy"]))
    t, path = qs.iterations(run_dir)[0]
    prof = iteration_profile(qs.read_questions(path), tokenizer)
    recorded = json.loads((path.parent / "metrics.json").read_text())
    for metric in PROFILE_METRICS:
        assert prof[metric] == pytest.approx(recorded[metric], abs=1e-6), metric  # 6 places


def test_separate_group_acc_from_the_counts_is_the_vote():
    """failed_extraction_effect.py's shortcut (largest answer group vs the failures) equals
    majority_vote under separate_group."""
    fe = load_script("benchmarks/failed_extraction_effect.py")
    lists = [[None, "1", "1", None, None, "2"], ["3", None, "3", "4"], [None] * 4,
             ["5", "6", None, "7"], ["8", "8", "8", None]]
    for answers in lists:
        acc = majority_vote(answers)[1]
        assert fe.separate_group_acc(answers, acc)[0] == majority_vote(
            answers, failed="separate_group")[1]
    assert [fe.separate_group_acc(a, majority_vote(a)[1])[1] for a in lists] == [
        "failures", "answer", "failures", "tie", "answer"]


def test_the_committed_tables_are_the_scripts_output():
    """The Markdown tables in docs/results/gpu_small/ carry their script's name; their JSON
    holds every committed run's rows (a run added to committed_questions.py needs a rerun)."""
    qs = load_script("benchmarks/committed_questions.py")
    runs = {(arm, seed) for _, arm, seed, _ in qs.runs()}
    folder = ROOT / "docs/results/gpu_small"
    prof = json.loads((folder / "question_profile.json").read_text())
    assert {(r["arm"], r["seed"]) for r in prof["runs"]} == runs
    assert "benchmarks/question_profile.py" in (folder / "question_profile.md").read_text()
    effect = json.loads((folder / "failed_extraction_effect.json").read_text())
    assert {r["arm"] for r in effect["rows"]} == {arm for arm, _ in runs} | {"all"}
    assert effect["disagreements"] == []
