"""The paper's settings tables beside a config's values (vdlib.report.settings_tables)."""

from __future__ import annotations

import pandas as pd
import pytest

from vdlib.config.experiment import load_params
from vdlib.evaluation import BenchmarkResult, EvalSummary
from vdlib.report.settings_tables import (
    PAPER_BENCHMARK_ITEMS,
    SWITCHES,
    benchmarks_table,
    settings_table,
)


def test_the_paper_profile_matches_every_printed_setting():
    """tab:training_hypers, tab:klcov_hypers, tab:vendi_hypers and tab:epiplexity_hypers, as the
    paper prints them, equal the paper profile's values (config keys or metric defaults)."""
    t = settings_table(load_params({}))
    printed = t[t.table != "protocol switch"]
    assert set(printed.table) == {"tab:training_hypers", "tab:klcov_hypers", "tab:vendi_hypers",
                                  "tab:epiplexity_hypers"}
    assert printed.same.all(), printed[~printed.same].to_string()
    assert len(printed[printed.table == "tab:training_hypers"]) == 37
    row = t[t.key == "proposer.max_steps"].iloc[0]
    assert (row.paper, row.ours) == ("6", "6")
    assert t[t.key == "solver.max_steps"].iloc[0].paper == "20"


def test_a_profile_shows_where_it_departs_and_every_switch():
    t = settings_table(load_params("params/tiny/quickstart.yaml"))
    off = set(t[~t.same].key)
    assert {"proposer.global_batch_size", "iterations", "metrics.embedder"} <= off
    assert "scoring.tau_min" not in off
    switches = t[t.table == "protocol switch"]
    assert list(switches.key) == list(SWITCHES) and switches.same.all()
    changed = settings_table(load_params({"vocab_dropout": {"width": "len_tokenizer"}}))
    row = changed[changed.key == "vocab_dropout.width"].iloc[0]
    assert (row.paper, row.ours, bool(row.same)) == ("vocab_size", "len_tokenizer", False)


def test_benchmarks_table_counts_items_beside_the_paper():
    summary = EvalSummary({"gsm8k": BenchmarkResult("gsm8k", 20, [0.5], [0]),
                           "gsm_symbolic": BenchmarkResult("gsm_symbolic", 8, [0.1], [0])})
    t = benchmarks_table(summary)
    assert list(t.columns) == ["benchmark", "items (ours)", "items (paper)", "evaluated"]
    assert t.iloc[0].to_dict() == {"benchmark": "gsm8k", "items (ours)": 20,
                                   "items (paper)": 1319, "evaluated": True}
    assert t.iloc[1]["items (ours)"] == 8 and pd.isna(t.iloc[1]["items (paper)"])
    assert PAPER_BENCHMARK_ITEMS["olympiadbench"] == 910
    assert len(t) == 2  # without an evaluation section: the evaluated benchmarks only


def test_benchmarks_table_counts_the_papers_other_benchmarks_minerva_included(tmp_path):
    """tab:benchmarks has seven rows; notebook 01 evaluates the six of tab:vanilla_eval and
    counts Minerva (the paper's "additional benchmark" of the annealing runs) from its data."""
    (tmp_path / "minerva").mkdir()
    rows = [f'{{"problem": "p{i}", "solution": "\\boxed{{{i}}}", "answer": "{i}"}}'
            for i in range(5)]
    (tmp_path / "minerva" / "test.jsonl").write_text("\n".join(rows) + "\n")
    summary = EvalSummary({"gsm8k": BenchmarkResult("gsm8k", 20, [0.5], [0])})
    ev = load_params({"evaluation": {"data_dir": str(tmp_path), "limit": 3}}).evaluation
    t = benchmarks_table(summary, ev).set_index("benchmark")
    assert set(t.index) == set(PAPER_BENCHMARK_ITEMS)
    assert t.loc["minerva"].to_dict() == {"items (ours)": 3, "items (paper)": 272,
                                          "evaluated": False}  # counted under the limit
    assert pd.isna(t.loc["amc23", "items (ours)"])  # no file: blank, not an error
    assert t.loc["gsm8k", "evaluated"] and t.loc["gsm8k", "items (ours)"] == 20


@pytest.mark.parametrize("key", SWITCHES)
def test_every_switch_is_a_config_key(key):
    section, _, name = key.rpartition(".")
    cfg = load_params({})
    assert hasattr(getattr(cfg, section) if section else cfg, name)
