"""The heartbeat that keeps long stages visible (vdlib.progress) and its use in the loop."""

from __future__ import annotations

import json
import logging
import threading

from vdlib.coevolution import previous_seconds
from vdlib.layout import iteration_dir
from vdlib.progress import default_interval, eta_text, format_seconds, heartbeat


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
    with caplog.at_level(logging.INFO, logger="vdlib.progress"):
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
