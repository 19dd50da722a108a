"""One line, never a traceback, for every input path of the CLI (issue 50, item 6): values PyYAML
builds that the checks did not expect (integers of thousands of digits, integers beyond a float,
dates that do not exist), in a params file and in a run's config.yaml; numeric flags; the VDLIB_*
environment settings; a disk that fills inside a checkpoint save; Ctrl-C inside a stage."""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path

import pytest
import yaml
from test_coevolution import tiny_params
from test_strict_inputs import run_inside_first_stage

from vdlib.app.cli import INTERRUPTED_EXIT, disk_full_failure, main
from vdlib.config.env_settings import ENV_SETTINGS, check_environment, env_number
from vdlib.config.experiment import ConfigError, load_params

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def no_run(monkeypatch):
    """A run that gets past the checks fails at once (instead of running)."""
    import vdlib.loop.coevolution as coevolution

    def started(*args, **kwargs):
        raise AssertionError("the run started: its input was not refused")

    monkeypatch.setattr(coevolution, "run_arms", started)


def _one_line(capsys, argv: list[str], rc: int = 2) -> str:
    assert main(argv) == rc
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = [x for x in err.strip().splitlines() if x != "(-v shows the traceback)"]
    assert len(lines) == 1, err
    return lines[0]


# ----------------------------------------------------------------------------- PyYAML's values


@pytest.mark.parametrize("text, expected", [
    ("seed: " + "1" * 5000, "seed = '1111"),  # CPython refuses to convert > 4300 digits
    ("seed: " + "1" * 5000, "is an integer of 5,000 digits; allowed: at most 100 digits"),
    ("seed: 2026-02-30", "seed = '2026-02-30' is not a date that exists"),
    ("scoring:\n  tau_min: 2026-13-01", "scoring.tau_min = '2026-13-01' is not a date"),
    ("seeds: [0, 2026-02-30]", "seeds[1] = '2026-02-30' is not a date that exists"),
    ("proposer:\n  learning_rate: " + "9" * 400, "proposer.learning_rate = '9999"),
    ("proposer:\n  learning_rate: 1e999999", "proposer.learning_rate = inf is out of range"),
    ("proposer:\n  learning_rate: 1.0e+999999", "proposer.learning_rate = inf is out of range"),
])
def test_yaml_values_the_checks_did_not_expect_are_one_line(tmp_path, capsys, text, expected):
    path = tmp_path / "p.yaml"
    path.write_text(f"profile: tiny\n{text}\n")
    with pytest.raises(ConfigError) as e:
        load_params(path)
    assert expected in str(e.value) and len(str(e.value).splitlines()) == 1, str(e.value)
    assert expected in _one_line(capsys, ["params", "check", str(path)])


def test_an_integer_too_large_for_a_float_reads_as_infinity_and_is_refused():
    with pytest.raises(ConfigError, match=r"solver.learning_rate = inf is out of range"):
        load_params({"profile": "tiny", "solver": {"learning_rate": 10**400}})
    with pytest.raises(ConfigError, match=r"iterations = <an integer of about 10,000 digits>"):
        load_params({"profile": "tiny", "iterations": 10**10000})  # too long for repr


def test_a_date_that_does_not_exist_in_a_runs_config_yaml_is_one_line(tmp_path, capsys):
    from vdlib.config import layout
    from vdlib.runs.run_start import start_run

    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(tiny_params(tmp_path)))
    run = start_run(load_params(path))
    config = layout.config_path(run)
    config.write_text(config.read_text().replace("\nseed: 0\n", "\nseed: 2026-02-30\n"))
    # another --iterations: the folder's config is read back to name the keys that differ
    line = _one_line(capsys, ["run", str(path), "--iterations", "2"])
    assert "config.yaml': seed = '2026-02-30' is not a date that exists" in line


# ----------------------------------------------------------------------------- numeric flags


@pytest.mark.parametrize("command", ["run", "grid"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-3", "1e7"])
def test_stop_after_takes_a_finite_number_of_minutes(tmp_path, capsys, no_run, command,
                                                     value):
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(tiny_params(tmp_path / "o")))
    dry = ["--dry-run"] if command == "grid" else []  # checked before the plan is made
    line = _one_line(capsys, [command, str(path), f"--stop-after={value}", *dry])
    assert "--stop-after" in line and "allowed: a finite number of minutes, 0 <= MINUTES" in line
    assert not (tmp_path / "o").exists()
    assert "VDLIB_STOP_AT" not in os.environ


@pytest.mark.parametrize("flag, value, expected", [
    ("--temperature", "nan", "evaluation.temperature = nan is out of range"),
    ("--top-p", "inf", "evaluation.top_p = inf is out of range"),
    ("--runs", "100000000", "evaluation.runs = 100000000 is out of range"),
])
def test_eval_numeric_flags_are_checked_before_a_model_loads(capsys, flag, value, expected):
    line = _one_line(capsys, ["eval", "--model", "tiny-random", "--profile", "tiny", flag, value])
    assert expected in line


# ----------------------------------------------------------------------------- environment


@pytest.mark.parametrize("name, value", [
    ("VDLIB_HEARTBEAT_S", "inf"), ("VDLIB_HEARTBEAT_S", "nan"), ("VDLIB_HEARTBEAT_S", "1e12"),
    ("VDLIB_HEARTBEAT_S", "-5"), ("VDLIB_HEARTBEAT_S", "soon"), ("VDLIB_STOP_AT", "nan"),
    ("VDLIB_WAIT_TIMEOUT_S", "1e400"), ("VDLIB_GRID_PORT_BASE", "99999"),
    ("VDLIB_GRID_PORT_BASE", "1" * 5000), ("VDLIB_VOTE_WORKERS", "1000000"),
    ("VDLIB_VOTE_WORKERS", "0"),
])
def test_a_bad_environment_setting_is_one_line_naming_it(tmp_path, capsys, monkeypatch, name,
                                                        value):
    monkeypatch.setenv(name, value)
    path = tmp_path / "p.yaml"
    path.write_text("profile: tiny\n")
    line = _one_line(capsys, ["params", "check", str(path)])
    assert line.startswith(f"vdlib params: {name} = ") and "is not allowed; allowed: " in line
    with pytest.raises(ConfigError, match=name):
        check_environment()


def test_environment_settings_in_range_and_empty_are_accepted(monkeypatch):
    for name, setting in ENV_SETTINGS.items():
        monkeypatch.setenv(name, str(int(setting.high)))
        assert env_number(name) == setting.high
        monkeypatch.setenv(name, "")  # empty: unset
        assert env_number(name) == setting.default


def test_a_heartbeat_setting_out_of_range_never_raises_in_the_heartbeat_thread(monkeypatch,
                                                                              caplog):
    """A library call (a notebook) with VDLIB_HEARTBEAT_S=inf: the thread's wait raised
    OverflowError (a traceback on stderr); now the default and a warning naming the variable."""
    import threading

    from vdlib.loop.progress import default_interval, heartbeat

    errors = []
    monkeypatch.setattr(threading, "excepthook", lambda args: errors.append(args.exc_value))
    monkeypatch.setenv("VDLIB_HEARTBEAT_S", "inf")
    with caplog.at_level(logging.WARNING):
        assert default_interval() == 30.0
        with heartbeat("x"):
            time.sleep(0.05)
    assert errors == [] and "VDLIB_HEARTBEAT_S = 'inf' is not allowed" in caplog.text


# ----------------------------------------------------------------------------- disk full, Ctrl-C


def _fail_in_the_run(monkeypatch, error: BaseException) -> None:
    import vdlib.loop.coevolution as coevolution

    def run_arms(*args, **kwargs):
        raise error

    monkeypatch.setattr(coevolution, "run_arms", run_arms)


def _safetensors_error() -> Exception:
    """What safetensors raises when a checkpoint save meets a full disk (its Rust I/O error)."""
    try:
        from safetensors import SafetensorError
    except ImportError:  # pragma: no cover - safetensors comes with transformers
        SafetensorError = RuntimeError  # noqa: N806
    return SafetensorError('Error while serializing: IoError(Os { code: 28, kind: StorageFull, '
                           'message: "No space left on device" })')


def test_a_full_disk_inside_a_checkpoint_save_is_one_line(tmp_path, capsys, monkeypatch):
    import errno

    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(tiny_params(tmp_path)))
    wrapped = RuntimeError("saving the proposer failed")
    wrapped.__cause__ = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "x"))
    for error in (_safetensors_error(), wrapped):
        _fail_in_the_run(monkeypatch, error)
        line = _one_line(capsys, ["run", str(path)])
        assert "No space left on device" in line and "the disk is full" in line, line
    assert disk_full_failure(RuntimeError("a bug")) is None


def test_ctrl_c_inside_a_stage_is_one_line_and_the_exit_status_of_sigint(tmp_path, capsys,
                                                                         monkeypatch):
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(tiny_params(tmp_path)))
    _fail_in_the_run(monkeypatch, KeyboardInterrupt())
    assert main(["run", str(path)]) == INTERRUPTED_EXIT == 128 + signal.SIGINT
    err = capsys.readouterr().err
    assert err == "vdlib run: interrupted; resume with the same command\n"
    with pytest.raises(KeyboardInterrupt):  # -v: the traceback
        main(["run", str(path), "-v"])


@pytest.mark.slow  # a real run interrupted inside its first stage (~30 s on 2 cores)
def test_sigint_inside_a_stage_of_a_real_run(tmp_path):
    proc = run_inside_first_stage(tmp_path)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=120) == INTERRUPTED_EXIT
    err = proc.stderr.read()
    assert "vdlib run: interrupted; resume with the same command" in err
    assert "Traceback" not in err, err[-3000:]
    left = [p.name for p in (tmp_path / "t" / "seed0" / "iter_1").glob(".*")]
    assert left == [], left  # no working folder left behind, as after SIGTERM
