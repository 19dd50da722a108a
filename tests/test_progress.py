"""The heartbeat that keeps long stages visible (vdlib.loop.progress) and its use in the loop."""

from __future__ import annotations

import json
import logging
import threading

import pytest

from vdlib.config.layout import iteration_dir
from vdlib.loop.coevolution import previous_seconds
from vdlib.loop.progress import default_interval, eta_text, format_seconds, heartbeat


def test_format_seconds_and_eta():
    assert format_seconds(0) == "0s"
    assert format_seconds(59.6) == "1m00s"
    assert format_seconds(3600) == "1h00m00s"
    assert eta_text(10, None) == ""
    assert eta_text(10, 70) == ", ETA ~1m00s (took 1m10s last time)"
    assert eta_text(80, 70) == ", past last time's 1m10s"


def test_heartbeat_logs_start_then_beats_until_the_block_ends(caplog):
    released = threading.Event()
    log = logging.getLogger("vdlib.test_progress")
    beats = []

    class Count(logging.Handler):
        def emit(self, record):
            beats.append(record.getMessage())
            if len(beats) >= 3:
                released.set()

    handler = Count()
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        with heartbeat("run-x | iteration 1/2 | stage 3/6 score", expected=100.0,
                       interval=0.01, log=log):
            assert released.wait(30), "the heartbeat never logged twice while the block ran"
        n = len(beats)
        released.clear()
        assert not released.wait(0.1)  # nothing after the block ended
        assert len(beats) == n
    finally:
        log.removeHandler(handler)
    assert beats[0] == "run-x | iteration 1/2 | stage 3/6 score: started (took 1m40s last time)"
    assert all(b.startswith("run-x | iteration 1/2 | stage 3/6 score: running for ") for b in
               beats[1:])
    assert "ETA ~" in beats[1]


def test_heartbeat_off_logs_only_the_start(caplog, monkeypatch):
    monkeypatch.setenv("VDLIB_HEARTBEAT_S", "0")
    assert default_interval() == 0
    with caplog.at_level(logging.INFO, logger="vdlib.loop.progress"):
        with heartbeat("quiet"):
            pass
    assert [r.getMessage() for r in caplog.records] == ["quiet: started"]
    monkeypatch.setenv("VDLIB_HEARTBEAT_S", "soon")
    assert default_interval() == 30.0


def test_previous_seconds_reads_the_last_iterations_timing(tmp_path):
    assert previous_seconds(tmp_path, 1, "score") is None
    assert previous_seconds(tmp_path, 2, "score") is None  # no timing.json yet
    d = iteration_dir(tmp_path, 1)
    d.mkdir(parents=True)
    (d / "timing.json").write_text(json.dumps({"score": 52.02, "solver": "x"}))
    assert previous_seconds(tmp_path, 2, "score") == 52.02
    assert previous_seconds(tmp_path, 2, "solver") is None
    (d / "timing.json").write_text("{broken")
    assert previous_seconds(tmp_path, 2, "score") is None


# ----------------------------------------------------------------------------- the deadline


def test_check_deadline(monkeypatch):
    from vdlib.loop.progress import STOP_AT_ENV, RunPaused, check_deadline, deadline

    monkeypatch.delenv(STOP_AT_ENV, raising=False)
    check_deadline("anything", 1e9)  # no deadline: never pauses
    monkeypatch.setenv(STOP_AT_ENV, "1000")
    assert deadline() == 1000.0
    check_deadline("stage", 50.0, now=900.0)  # ends at 950, before 1000
    check_deadline("stage", None, now=999.0)  # unknown duration: starts while time is left
    with pytest.raises(RunPaused, match="stage: paused before it started .*1m40s left"):
        check_deadline("stage", 150.0, now=900.0)
    monkeypatch.setenv(STOP_AT_ENV, "soon")
    assert deadline() is None


@pytest.mark.slow  # ~24 s on 2 cores: `make test-slow` (make test keeps within its budget)
def test_a_run_pauses_before_a_stage_that_would_not_fit_and_resumes(tmp_path, monkeypatch,
                                                                      caplog):
    import gc
    import os
    import time

    import transformers
    from test_coevolution import tiny_params

    from vdlib.loop.coevolution import run
    from vdlib.loop.progress import STOP_AT_ENV, RunPaused

    monkeypatch.setenv(STOP_AT_ENV, "")  # no deadline; unset again after the test
    params = tiny_params(tmp_path, iterations=2)

    import vdlib.loop.coevolution as coevolution

    releases = []
    monkeypatch.setattr(coevolution, "release_cuda_memory", lambda: releases.append(1))
    live_trainers = {}

    def near_deadline(t, stage):  # from iteration 1's metrics stage on, 0.5 s are left
        # a finished GRPO stage leaves no trainer alive: its model, gradients and optimizer
        # state would hold the GPU memory the next stage needs (the runner collects them)
        live_trainers[stage] = sum(isinstance(o, transformers.Trainer) for o in gc.get_objects())
        if (t, stage) == (1, "metrics"):
            os.environ[STOP_AT_ENV] = str(time.time() + 0.5)

    with pytest.raises(RunPaused, match="iteration 2/2 .* proposer: paused"):
        run(params, on_stage=near_deadline)
    assert live_trainers["generate"] == live_trainers["metrics"] == 0, live_trainers
    # and the CUDA cache goes back after every stage that ran (the 6 of iteration 1): a 4B
    # trainer's 64 GiB stayed reserved into the next stages on an H200 before it did
    assert len(releases) == 6
    run_dir = tmp_path / "t" / "seed0"
    assert (run_dir / "iter_1" / "metrics.json").exists()
    assert not (run_dir / "iter_2" / "proposer_rollouts.jsonl").exists()
    os.environ[STOP_AT_ENV] = ""
    with caplog.at_level(logging.INFO, logger="vdlib.loop.coevolution"):
        result = run(params)
    assert [m["iteration"] for m in result.iterations] == [1, 2]
    assert "iteration 1 metrics: done earlier, skipped" in caplog.text


def test_cli_stop_after_zero_pauses_with_exit_75(tmp_path, monkeypatch):
    import yaml
    from test_coevolution import tiny_params

    from vdlib.app.cli import main
    from vdlib.loop.progress import PAUSED_EXIT, STOP_AT_ENV

    monkeypatch.setenv(STOP_AT_ENV, "")  # set_stop_after writes it: unset after the test
    params = tmp_path / "p.yaml"
    params.write_text(yaml.safe_dump(tiny_params(tmp_path)))
    assert main(["run", str(params), "--stop-after", "0"]) == PAUSED_EXIT == 75
    assert not (tmp_path / "t" / "seed0" / "iter_1" / "proposer_rollouts.jsonl").exists()
