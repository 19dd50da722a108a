"""``vdlib status``: the state of every run of an output folder (vdlib.grid.status)."""

from __future__ import annotations

import datetime
import json
import os

import pytest

from vdlib.config import layout
from vdlib.config.experiment import load_params
from vdlib.grid.status import collect_status, format_number, format_status, main
from vdlib.loop.coevolution import stage_key
from vdlib.loop.stages import STAGE_TABLE, STAGES
from vdlib.runs.run_start import start_run
from vdlib.runs.run_state import LOCK_FILE, RunLock, file_record, set_aside, update_manifest

METRICS_1 = {"valid_questions": 30, "generated": 64, "self_bleu": 0.5, "vendi": 3.0,
             "curriculum_size": 9, "kept_fraction": 0.3}
METRICS_2 = {"valid_questions": 41, "generated": 64, "self_bleu": 0.123456, "vendi": 12.3456,
             "curriculum_size": 17, "kept_fraction": 0.265625}


def _start(out, experiment, name, iterations=2, seed=0):
    """A run folder as ``vdlib run`` starts it: config.yaml and manifest.json, no stage."""
    cfg = load_params({"profile": "tiny", "experiment": experiment, "output_dir": str(out),
                       "run_id": name, "seed": seed, "iterations": iterations})
    return start_run(cfg)


def _write_outputs(run, t, stage, metrics=None):
    folder = layout.iteration_dir(run, t)
    folder.mkdir(exist_ok=True)
    for name in stage.outputs:
        path = folder / name
        if name.endswith("_model"):
            path.mkdir(exist_ok=True)
            (path / "model.safetensors").write_bytes(b"weights")
        elif name == layout.METRICS_FILE:
            path.write_text(json.dumps(metrics or {}))
        else:
            path.write_text('{"x": 1}\n')


def _finish(run, upto, metrics=None):
    """Run the stages of ``run`` up to ``(t, stage)`` (included): outputs and records."""
    records = {}
    for t in range(1, upto[0] + 1):
        for stage in STAGE_TABLE:
            _write_outputs(run, t, stage, (metrics or {}).get(t))
            records[stage_key(t, stage.name)] = file_record(layout.iteration_dir(run, t),
                                                       stage.outputs)
            if (t, stage.name) == upto:
                break
    update_manifest(layout.manifest_path(run), stages=records)


def _set_times(run, text):
    """Every file under ``run`` last modified at ``text`` (UTC, ``YYYY-MM-DD HH:MM``)."""
    when = datetime.datetime.strptime(text, "%Y-%m-%d %H:%M").replace(
        tzinfo=datetime.UTC).timestamp()
    for root, _, files in os.walk(run):
        for name in files:
            os.utime(os.path.join(root, name), (when, when))


@pytest.fixture
def grid(tmp_path):
    """An output folder with one run in each state, plus things that are not runs."""
    out = tmp_path / "outputs"
    runs = {}
    runs["done"] = _start(out, "main", layout.arm_run_id("baseline", 0))
    _finish(runs["done"], (2, STAGES[-1]), {1: METRICS_1, 2: METRICS_2})
    update_manifest(layout.manifest_path(runs["done"]), updated="2030-01-02T03:04:05+00:00")

    runs["stopped"] = _start(out, "main", layout.arm_run_id("vd75", 0))
    _finish(runs["stopped"], (1, STAGES[-1]), {1: METRICS_1})
    update_manifest(layout.manifest_path(runs["stopped"]), updated="2000-01-01T00:00:00+00:00")
    _set_times(runs["stopped"], "2001-02-03 04:05")

    runs["mid_output"] = _start(out, "main", layout.arm_run_id("vd75", 1))
    _finish(runs["mid_output"], (1, STAGES[-1]), {1: METRICS_1})
    _write_outputs(runs["mid_output"], 2, STAGE_TABLE[0])  # rollouts etc. without a record

    runs["mid_trl"] = _start(out, "main", layout.arm_run_id("gen_only", 0))
    _finish(runs["mid_trl"], (1, "curriculum"))
    (layout.iteration_dir(runs["mid_trl"], 1) / ".trl_solver" / "checkpoint-1").mkdir(
        parents=True)

    runs["stale_lock"] = _start(out, "main", layout.arm_run_id("vd85", 0))
    _finish(runs["stale_lock"], (1, "score"))
    RunLock(runs["stale_lock"]).acquire().release()  # a finished process's lock file

    runs["running"] = _start(out, "other", "seed3", seed=3)
    _finish(runs["running"], (1, "generate"))
    runs["new"] = _start(out, "other", "seed6", seed=6, iterations=3)
    runs["bad_manifest"] = _start(out, "other", "seed4", seed=4)
    layout.manifest_path(runs["bad_manifest"]).write_text('{"stages": {"1/pro')
    runs["bad_config"] = _start(out, "other", "seed5", seed=5)
    layout.config_path(runs["bad_config"]).write_text("iterations: [unclosed\n")

    aside = _start(out, "main", "old")
    _finish(aside, (1, "proposer"))
    runs["replaced"] = set_aside(aside)
    report = layout.report_dir(out, "main", "01_main_table")
    report.mkdir(parents=True)
    (report / "summary.json").write_text("{}")
    (layout.experiment_dir(out, "main") / ".cache").mkdir()
    notebook = layout.executed_notebook_path(out, "tiny", "00_quickstart")
    notebook.parent.mkdir(parents=True)
    notebook.write_text("{}")
    return out, runs


def _by_run(statuses):
    return {s.run_id: s for s in statuses}


def test_every_state_is_recognised(grid):
    out, runs = grid
    with RunLock(runs["running"]):
        statuses = collect_status(out)
    got = _by_run(statuses)
    assert [(s.experiment, s.run_id) for s in statuses] == sorted(
        (p.parent.name, p.name) for k, p in runs.items() if k != "replaced")
    state = {k: got[p.name].state for k, p in runs.items() if p.name in got}
    assert state == {"done": "done", "stopped": "stopped", "mid_output": "stopped mid-stage",
                     "mid_trl": "stopped mid-stage", "stale_lock": "stopped",
                     "running": "running", "new": "new", "bad_manifest": "unreadable",
                     "bad_config": "unreadable"}
    assert got["vd75-seed1"].label == "STOPPED MID-STAGE (proposer, iter 2)"
    assert got["vd75-seed1"].leftovers == STAGE_TABLE[0].outputs
    assert got["gen_only-seed0"].label == "STOPPED MID-STAGE (solver, iter 1)"
    assert got["gen_only-seed0"].leftovers == (".trl_solver",)
    assert got["seed4"].label == "unreadable (manifest.json)"
    assert got["seed5"].label == "unreadable (config.yaml)"
    assert got["seed4"].iterations == 2 and got["seed5"].iterations is None


def test_counts_arm_seed_and_next_stage(grid):
    out, runs = grid
    got = _by_run(collect_status(out))
    done, stopped, running, new = (got[runs[k].name] for k in ("done", "stopped", "running",
                                                                 "new"))
    assert (done.arm, done.seed, done.stages_done, done.stages_total) == ("baseline", 0, 12, 12)
    assert (done.iteration, done.next_stage) == (2, None)
    assert (stopped.stages_done, stopped.iteration, stopped.next_stage) == (6, 2, "proposer")
    assert (running.arm, running.seed) == (None, 3)  # not an arm id: the config's seed
    assert (running.stages_done, running.iteration, running.next_stage) == (2, 1, "score")
    assert (new.stages_done, new.stages_total, new.iteration, new.next_stage) == (0, 18, 1,
                                                                                  "proposer")


def test_metrics_come_from_the_last_finished_iteration(grid):
    out, runs = grid
    got = _by_run(collect_status(out))
    assert got["baseline-seed0"].metrics == METRICS_2
    assert got["baseline-seed0"].metrics_iteration == 2
    assert got["vd75-seed1"].metrics == METRICS_1  # iteration 2 never finished
    assert got["seed6"].metrics == {} and got["seed6"].metrics_iteration is None


def test_missing_metric_keys_are_none(tmp_path):
    run = _start(tmp_path, "x", "seed0", iterations=1)
    _finish(run, (1, STAGES[-1]), {1: {"vendi": 2.0}})
    (status,) = collect_status(tmp_path)
    assert status.metrics["vendi"] == 2.0 and status.metrics["self_bleu"] is None
    row = format_status([status]).splitlines()[2]
    assert [c.strip() for c in row.strip("|").split("|")][-6:] == ["-", "-", "-", "2", "-", "-"]


def test_last_update_is_the_manifest_time_or_the_newest_file(grid):
    out, _ = grid
    got = _by_run(collect_status(out))
    assert got["baseline-seed0"].last_update.strftime("%Y-%m-%d %H:%M") == "2030-01-02 03:04"
    assert got["vd75-seed0"].last_update.strftime("%Y-%m-%d %H:%M") == "2001-02-03 04:05"


def test_the_probe_leaves_no_lock_behind(grid):
    out, runs = grid
    collect_status(out)
    with_lock = {k for k, p in runs.items() if (p / LOCK_FILE).exists()}
    assert with_lock == {"stale_lock"}


def test_replaced_folders_are_listed_only_when_asked(grid):
    out, runs = grid
    assert runs["replaced"].name not in _by_run(collect_status(out))
    got = _by_run(collect_status(out, include_replaced=True))[runs["replaced"].name]
    assert (got.state, got.stages_done) == ("replaced", 1)


def test_the_table_flags_and_counts(grid):
    out, runs = grid
    with RunLock(runs["running"]):
        text = format_status(collect_status(out))
    lines = text.splitlines()
    row = next(line for line in lines if "| baseline-seed0 " in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:7] == ["main", "baseline-seed0", "done", "2/2", "12/12", "-",
                         "2030-01-02 03:04"]
    assert cells[7:] == ["41", "64", "0.123", "12.3", "17", "0.266"]
    assert "STOPPED MID-STAGE (proposer, iter 2)" in text
    assert "STOPPED MID-STAGE (solver, iter 1)" in text
    assert "unreadable (manifest.json)" in text and "unreadable (config.yaml)" in text
    assert "2001-02-03 04:05" in text
    bad = next(line for line in lines if "| seed4 " in line)
    assert [c.strip() for c in bad.strip("|").split("|")][3:6] == ["-/2", "-", "-"]
    assert lines[-3] == ("9 runs: 1 done, 1 running, 2 stopped mid-stage, 2 stopped, 1 new, "
                         "2 unreadable")
    assert lines[-1].startswith("main/vd75-seed1: stopped inside proposer of iteration 2 (left "
                                "proposer_rollouts.jsonl")
    assert len({len(line) for line in lines[:11]}) == 1  # the columns line up


def test_format_number_rounds_to_three_significant_digits():
    assert [format_number(v) for v in (None, 7, 0.0123456, 98765.4, 2.0)] == [
        "-", "7", "0.0123", "98800", "2"]
    assert format_status([]) == "no runs found\n"


def test_main_prints_the_table_or_refuses_a_missing_folder(grid, tmp_path, capsys):
    out, _ = grid
    assert main(out) == 0
    assert "STOPPED MID-STAGE (proposer, iter 2)" in capsys.readouterr().out
    assert main(tmp_path / "nowhere") == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "nowhere is not a folder" in captured.err


def test_an_empty_output_folder_has_no_runs(tmp_path, capsys):
    assert collect_status(tmp_path / "missing") == []
    assert main(tmp_path) == 0
    assert capsys.readouterr().out == "no runs found\n"


# ----------------------------------------------------------------------------- hostile folders
# (issue 29, items 6 and 8)


def test_one_broken_folder_never_blanks_the_table(grid, monkeypatch, capsys):
    """Item 6: an absurd `iterations` in one run's config.yaml (1e12: the table's work must not
    grow with it), stage keys far beyond it, a folder that makes reading fail, a deleted
    config.yaml and a deleted manifest.json: each is one row; every other run is listed as
    before."""
    import vdlib.grid.status as status_module

    out, runs = grid
    huge = _start(out, "other", "seed7", seed=7)
    layout.config_path(huge).write_text(
        layout.config_path(huge).read_text().replace("iterations: 2", "iterations: "
                                                      "1000000000000"))
    wide = _start(out, "other", "seed8", seed=8, iterations=1)
    _finish(wide, (1, STAGES[-1]))
    records = json.loads(layout.manifest_path(wide).read_text())["stages"]
    update_manifest(layout.manifest_path(wide), stages={
        **records, "99999999999999999999/proposer": {}, "x/y": {}, "3/nope": {}})
    no_config = _start(out, "other", "seed9", seed=9)
    layout.config_path(no_config).unlink()
    manifest = json.loads(layout.manifest_path(no_config).read_text())
    manifest.pop("fingerprinted_config", None)  # no copy of the config anywhere
    layout.manifest_path(no_config).write_text(json.dumps(manifest))
    copy = _start(out, "other", "seed13", seed=13, iterations=3)
    layout.config_path(copy).unlink()  # the manifest's copy stands in (a resume rewrites it)
    update_manifest(layout.manifest_path(copy), fingerprinted_config={"iterations": 3, "seed": 13})
    no_manifest = _start(out, "other", "seed10", seed=10)
    _finish(no_manifest, (1, "proposer"))
    layout.manifest_path(no_manifest).unlink()
    unwritten = _start(out, "other", "seed12", seed=12)  # stopped before its first manifest
    layout.manifest_path(unwritten).unlink()
    boom = _start(out, "other", "seed11", seed=11)
    real = status_module._run_status

    def explode(experiment, run, *args, **kwargs):
        if run == boom:
            raise MemoryError("a folder that breaks the reader")
        return real(experiment, run, *args, **kwargs)

    monkeypatch.setattr(status_module, "_run_status", explode)
    got = _by_run(collect_status(out))
    assert got["seed7"].label == "unreadable (config.yaml)"
    assert "1000000000000" in got["seed7"].detail and "[1, 1000]" in got["seed7"].detail
    assert (got["seed8"].state, got["seed8"].stages_done) == ("done", len(STAGES))
    assert got["seed9"].label == "unreadable (config.yaml)"
    assert got["seed10"].label == "unreadable (manifest.json)"
    assert "is missing, but the run has iteration folders" in got["seed10"].detail
    assert got["seed12"].state == "new"
    assert (got["seed13"].state, got["seed13"].iterations) == ("new", 3)
    assert got["seed11"].label == "unreadable (run folder)"
    assert "MemoryError: a folder that breaks the reader" in got["seed11"].detail
    assert got["baseline-seed0"].state == "done" and got["vd75-seed1"].state == \
        "stopped mid-stage"
    assert main(out) == 0
    table = capsys.readouterr().out
    assert "| baseline-seed0 " in table and "| seed11 " in table


def test_a_hand_edited_metrics_file_is_damaged_not_done(tmp_path):
    """Item 8: a finished run's records are checked before it counts as done: a metrics.json
    edited in place (same size) is `damaged`, its edited value is not shown, and the grid
    resumes it (state `partial`, the damage named)."""
    run = _start(tmp_path, "x", layout.arm_run_id("baseline", 0), iterations=1)
    _finish(run, (1, STAGES[-1]), {1: METRICS_1})
    (status,) = collect_status(tmp_path)
    assert status.state == "done" and status.metrics["valid_questions"] == 30
    metrics = layout.iteration_dir(run, 1) / layout.METRICS_FILE
    metrics.write_text(metrics.read_text().replace('"valid_questions": 30',
                                                   '"valid_questions": 99'))
    (status,) = collect_status(tmp_path)
    assert status.label == "damaged (iter_1/metrics.json)"
    assert (status.iteration, status.next_stage) == (1, STAGES[-1])
    assert status.metrics.get("valid_questions") != 99
    text = format_status([status])
    assert "(content hash differs); a resume runs metrics of iteration 1 again" in text
    from vdlib.grid.launch import plan_grid

    cfg = load_params({"profile": "tiny", "experiment": "x", "output_dir": str(tmp_path),
                       "iterations": 1, "run_id": run.name, "seeds": [0]})  # the run's config
    (planned,) = plan_grid(cfg)
    assert planned.state == "partial" and "metrics.json changed" in planned.note


def test_verify_hashes_the_large_files_too(tmp_path, capsys):
    """Without --verify only sizes (and small files' hashes) are checked; --verify checks the
    hash of every recorded file, as a resume does."""
    from vdlib.grid.status import HASH_ALWAYS_BYTES

    run = _start(tmp_path, "x", "seed0", iterations=1)
    _finish(run, (1, STAGES[-1]), {1: METRICS_1})
    model = next(p for p in layout.iteration_dir(run, 1).rglob("model.safetensors"))
    model.write_bytes(b"w" * (HASH_ALWAYS_BYTES + 10))
    stage = next(s for s in STAGE_TABLE if model.parent.name in s.outputs)
    records = json.loads(layout.manifest_path(run).read_text())["stages"]
    records[stage_key(1, stage.name)] = file_record(layout.iteration_dir(run, 1), stage.outputs)
    update_manifest(layout.manifest_path(run), stages=records)
    model.write_bytes(b"x" * (HASH_ALWAYS_BYTES + 10))  # same size, other content
    assert collect_status(tmp_path)[0].state == "done"
    (checked,) = collect_status(tmp_path, verify=True)
    assert checked.state == "damaged" and checked.next_stage == stage.name
    assert main(tmp_path, verify=True) == 0
    assert "damaged (iter_1/" in capsys.readouterr().out
    from vdlib.app.cli import main as cli_main

    assert cli_main(["status", str(tmp_path), "--verify"]) == 0
    assert "damaged" in capsys.readouterr().out


def test_a_symlinked_lock_is_not_followed_by_status(tmp_path):
    """The probe opens the lock read-only without following links: a link to a file elsewhere
    is neither written nor counted as a running run."""
    run = _start(tmp_path, "x", "seed0", iterations=1)
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    (run / LOCK_FILE).symlink_to(target)
    (status,) = collect_status(tmp_path)
    assert status.state == "new" and target.read_text() == "keep me\n"
