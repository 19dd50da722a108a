"""The paper's settings tables beside a config's values (vdlib.settings_tables)."""

from __future__ import annotations

import pandas as pd
import pytest

from vdlib.config import load_params
from vdlib.evaluation import BenchmarkResult, EvalSummary
from vdlib.settings_tables import (
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
    assert list(t.columns) == ["benchmark", "items (ours)", "items (paper)"]
    assert t.iloc[0].to_dict() == {"benchmark": "gsm8k", "items (ours)": 20,
                                   "items (paper)": 1319}
    assert t.iloc[1]["items (ours)"] == 8 and pd.isna(t.iloc[1]["items (paper)"])
    assert PAPER_BENCHMARK_ITEMS["olympiadbench"] == 910


@pytest.mark.parametrize("key", SWITCHES)
def test_every_switch_is_a_config_key(key):
    section, _, name = key.rpartition(".")
    cfg = load_params({})
    assert hasattr(getattr(cfg, section) if section else cfg, name)
