"""vdlib.report: a notebook's report opened from its parameters, tables and figures written as
they are added, the runs overview, and the summary that ``vdlib notebooks run`` checks."""

from __future__ import annotations

import json
import logging
import math

import pandas as pd
import pytest
import yaml
from test_tables import eval_summaries, metrics_frame

from vdlib.config.experiment import ConfigError, load_params, to_dict
from vdlib.config.layout import report_dir
from vdlib.report import plots, tables
from vdlib.report.notebook import (
    SUMMARY_FILE,
    open_report,
    read_summary,
    runs_overview,
    summary_matches,
    summary_path,
    write_outputs,
)


@pytest.fixture(autouse=True)
def _low_dpi(monkeypatch):
    monkeypatch.setattr(plots, "DPI", 40)


def _namespace(tmp_path, **over):
    """What ``locals()`` holds after a parameters cell (plus what notebook_params drops)."""
    return {"experiment": "exp", "profile": "tiny", "seeds": [0, 1], "output_dir": str(tmp_path),
            "arms": ["baseline", "vd75"], "_private": 1, "json": json, "load_params": load_params,
            "In": [], **over}


def test_open_report_validates_the_parameters_and_makes_the_folder(tmp_path):
    report = open_report("01_main_table", _namespace(tmp_path), log_level=None)
    assert report.folder == report_dir(tmp_path, "exp", "01_main_table") and report.folder.is_dir()
    assert report.cfg.seeds == [0, 1] and report.config == to_dict(report.cfg)
    assert report.settings() == {"experiment": "exp", "profile": "tiny", "seeds": [0, 1],
                                 "iterations": report.cfg.iterations,
                                 "arms": ["baseline", "vd75"]}
    md = report._repr_markdown_()
    assert "**01_main_table**" in md and '| arms | `["baseline", "vd75"]` |' in md
    with pytest.raises(ConfigError, match="aplha"):
        open_report("01_main_table", _namespace(tmp_path, vocab_dropout={"aplha": 0.5}),
                    log_level=None)


def test_tables_and_figures_are_written_as_they_are_added(tmp_path):
    report = open_report("02_x", _namespace(tmp_path), log_level=None)
    metrics = metrics_frame()
    report.add_table("main", tables.main_table(eval_summaries()))
    report.add_table("plain", pd.DataFrame({"arm": ["vd75"], "acc": [0.5]}))
    report.add_table("note", "| a |\n|---|\n| 1 |\n")
    report.add_figure("profile", plots.question_profile(metrics))
    names = sorted(p.name for p in report.folder.iterdir())
    assert names == ["main.csv", "main.md", "main.tex", "note.md", "plain.csv", "profile.csv",
                     "profile.pdf", "profile.png"]
    assert "| Baseline |" in (report.folder / "main.md").read_text()
    assert pd.read_csv(report.folder / "profile.csv")["pct_change"].notna().all()
    assert not (report.folder / SUMMARY_FILE).exists()  # not complete before finish()
    # a figure saved elsewhere keeps its files; its numbers go next to them
    other = plots.cumulative_vendi_figure(metrics, tmp_path / "elsewhere")
    report.add_figure("cv", other)
    assert (tmp_path / "elsewhere" / "cumulative_vendi.csv").is_file()
    assert report.files[-1] == tmp_path / "elsewhere" / "cumulative_vendi.csv"


def test_finish_writes_the_summary_the_batch_runner_checks(tmp_path):
    report = open_report("03_x", _namespace(tmp_path), log_level=None)
    report.add_runs({("vd75", 0): tmp_path / "exp" / "vd75-seed0"})
    report.add_runs({("baseline", 1): tmp_path / "i"}, prefix="instruct_")
    report.add_table("main", tables.main_table(eval_summaries()))
    report.add_table("main", tables.main_table(eval_summaries()))  # a cell run twice
    path = report.finish(iteration=3)
    assert path == summary_path(tmp_path, "exp", "03_x")
    summary = read_summary(path)
    assert summary["notebook"] == "03_x" and summary["iteration"] == 3
    assert summary["config"] == json.loads(json.dumps(to_dict(report.cfg)))
    assert summary["runs"] == {"vd75-seed0": str(tmp_path / "exp" / "vd75-seed0"),
                               "instruct_baseline-seed1": str(tmp_path / "i")}
    # finish() adds the settings table (the paper's settings and the switches, this config's)
    assert summary["tables"] == ["main", "settings"] and summary["figures"] == []
    assert sorted(summary["files"]) == sorted(
        [str(report.folder / f"main.{e}") for e in ("md", "tex", "csv")]
        + [str(report.folder / f"settings.{e}") for e in ("md", "csv")])
    # the batch runner's check: the same resolved config, not another one
    planned = to_dict(load_params({k: v for k, v in _namespace(tmp_path).items()
                                   if k in ("experiment", "profile", "seeds", "output_dir",
                                            "arms")}))
    assert summary_matches(path, planned) and summary_matches(report.folder, planned)
    assert not summary_matches(path, {**planned, "seeds": [0]})
    with pytest.raises(ValueError, match="config"):
        report.finish(config={})
    # re-opening the report (a new execution) makes it incomplete until finish() runs again
    open_report("03_x", _namespace(tmp_path), log_level=None)
    assert not path.exists() and not summary_matches(path, planned)


def test_read_summary_of_a_missing_or_broken_file(tmp_path):
    assert read_summary(tmp_path / "nope.json") is None
    (tmp_path / SUMMARY_FILE).write_text("{not json")
    assert read_summary(tmp_path) is None and not summary_matches(tmp_path, {})


def test_runs_overview_pivots_the_loop_metrics():
    wide = runs_overview(metrics_frame(), ["vendi", "not_measured", "valid_questions"])
    assert list(wide.columns) == ["vendi", "valid_questions"]  # in the order asked for
    assert wide.loc[("vd75", 2), "vendi"] == 7.5  # mean over the two seeds
    assert wide.loc[("baseline", 2), "valid_questions"] == 12.0
    assert runs_overview(metrics_frame(), ["not_measured"]).empty


def _fake_run(folder, run_id, values):
    """A run folder that summary_metrics reads: config.yaml and iter_<t>/metrics.json."""
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(yaml.safe_dump({"run_id": run_id, "seed": 0}))
    for t, v in enumerate(values, start=1):
        (folder / f"iter_{t}").mkdir()
        (folder / f"iter_{t}" / "metrics.json").write_text(json.dumps({"vendi": v}))
    return folder


def test_report_overview_of_its_runs(tmp_path):
    report = open_report("05_x", _namespace(tmp_path), log_level=None)
    assert report.runs_overview().empty  # no runs yet
    report.add_runs({("vd75", 0): _fake_run(tmp_path / "a", "vd75-seed0", [2.0, 3.0]),
                     ("baseline", 0): _fake_run(tmp_path / "b", "baseline-seed0", [1.0, 1.5])})
    wide = report.runs_overview(["vendi"])
    assert wide.loc[("vd75", 2), "vendi"] == 3.0 and wide.loc[("baseline", 1), "vendi"] == 1.0
    assert set(report.loop_metrics()["arm"]) == {"vd75", "baseline"}


def test_write_outputs(tmp_path, caplog):
    metrics = metrics_frame()
    fig = plots.question_profile(metrics, None)
    with caplog.at_level(logging.INFO, logger="vdlib.report"):
        written = write_outputs(tmp_path, tables={"main": tables.main_table(eval_summaries()),
                                                  "qd": tables.question_diversity_table(metrics),
                                                  "frame": tables.vocab_util_table(metrics,
                                                                                   "frame")},
                                figures={"profile": fig})
    names = sorted(p.name for p in written)
    assert names == ["frame.csv", "frame.md", "main.csv", "main.md", "main.tex", "profile.csv",
                     "profile.pdf", "profile.png", "qd.csv", "qd.md", "qd.tex"]
    assert all(p.stat().st_size > 0 for p in written)
    assert fig.paths == [tmp_path / "profile.png", tmp_path / "profile.pdf"]  # recorded
    assert "paper Qwen3-4B: Baseline" in (tmp_path / "main.md").read_text()
    assert "ours: VD75" in (tmp_path / "frame.md").read_text()  # a builder's frame: Markdown too
    assert "wrote 11 files" in caplog.text
    assert not math.isnan(pd.read_csv(tmp_path / "qd.csv").iloc[0]["It. 1"])
