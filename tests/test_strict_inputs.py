"""Strict inputs (docs/reliability.md): params files, CLI overrides, paths, seeds, one-line
errors, and clean stops."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from test_coevolution import tiny_params

from vdlib.cli import main
from vdlib.config import ConfigError, load_params

ROOT = Path(__file__).resolve().parent.parent


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return path


def test_a_key_given_twice_is_an_error_naming_it_and_its_lines(tmp_path):
    path = _file(tmp_path, "profile: tiny\nvocab_dropout:\n  alpha: 0.5\nvocab_dropout:\n"
                           "  phases: gen\n")
    with pytest.raises(ConfigError, match=r"'vocab_dropout' is given twice .*lines 2 and 4"):
        load_params(path)
    nested = _file(tmp_path, "scoring:\n  tau_min: 0.2\n  tau_min: 0.3\n")
    with pytest.raises(ConfigError, match=r"'tau_min' is given twice"):
        load_params(nested)


def test_an_empty_params_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="is empty"):
        load_params(_file(tmp_path, "\n# nothing\n"))
    assert load_params(_file(tmp_path, "{}\n")).profile == "paper"  # explicit defaults


def test_a_directory_and_a_missing_file_get_different_messages(tmp_path):
    with pytest.raises(ConfigError, match="is a directory"):
        load_params(tmp_path)
    with pytest.raises(ConfigError, match="does not exist"):
        load_params(tmp_path / "missing.yaml")


@pytest.mark.parametrize("key, value", [("experiment", "../../x"), ("experiment", "a/b"),
                                        ("run_id", ".."), ("run_id", "."), ("experiment", "")])
def test_experiment_and_run_id_are_single_folder_names(key, value):
    with pytest.raises(ConfigError, match=f"{key} = .* single folder name"):
        load_params({"profile": "tiny", key: value})


def test_every_seed_field_follows_one_rule():
    for params in ({"seed": -1}, {"seeds": [0, -1]}):
        with pytest.raises(ConfigError, match=r"out of range; allowed: 0 <="):
            load_params({"profile": "tiny", **params})


@pytest.mark.parametrize("flags, error", [(["--iterations", "0"], "iterations = 0"),
                                          (["--iterations", "-2"], "iterations = -2"),
                                          (["--seed", "-5"], "seed = -5"),
                                          (["--run-id", "../x"], "run_id = '../x'")])
def test_cli_overrides_are_validated_like_the_file(tmp_path, capsys, flags, error):
    path = _file(tmp_path, yaml.safe_dump(tiny_params(tmp_path)))
    assert main(["run", str(path), *flags]) == 2
    assert error in capsys.readouterr().err
    assert not (tmp_path / "t").exists()  # nothing was written


def test_verbose_after_the_subcommand_and_one_line_errors(tmp_path, capsys):
    from vdlib.run_state import RunLock

    params = tiny_params(tmp_path, model={"proposer": "tiny-random"})
    path = _file(tmp_path, yaml.safe_dump(params))
    run_dir = tmp_path / "t" / "seed0"
    with RunLock(run_dir):
        assert main(["run", str(path)]) == 2
        err = capsys.readouterr().err
        assert f"in use by another process (pid {os.getpid()})" in err and "Traceback" not in err
        from vdlib.run_state import RunLockedError

        with pytest.raises(RunLockedError):  # -v after the subcommand: the traceback
            main(["run", str(path), "-v"])


def test_sigterm_stops_a_run_without_leaving_working_folders(tmp_path):
    params = tiny_params(tmp_path, proposer={"max_response_length": 12, "max_steps": 50})
    path = _file(tmp_path, yaml.safe_dump(params))
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "vdlib", "run", str(path)], env=env,
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    work = tmp_path / "t" / "seed0" / "iter_1" / ".trl_proposer"
    deadline = time.monotonic() + 300
    while not work.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read()[-2000:]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 128 + signal.SIGTERM
    left = [p.name for p in (tmp_path / "t" / "seed0" / "iter_1").glob(".*")]
    assert left == [], left


def test_expected_failures_get_one_line():
    from vdlib.cli import expected_failure
    from vdlib.models import ModelUnavailableError

    offline = ModelUnavailableError("'org/x' is not in the local Hugging Face cache and the Hub "
                                    "is offline (HF_HUB_OFFLINE=1)")
    assert "HF_HUB_OFFLINE" in expected_failure(offline)
    assert "pip" in expected_failure(ModuleNotFoundError("No module named 'vllm'")) or \
        "install" in expected_failure(ModuleNotFoundError("No module named 'vllm'"))
    denied = PermissionError(13, "Permission denied", "/ro/out")
    assert expected_failure(denied).startswith("/ro/out: permission denied")
    assert expected_failure(RuntimeError("a bug")) is None  # a traceback for the unexpected


def test_an_offline_hub_id_is_one_line_from_the_cli(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    params = tiny_params(tmp_path, model={"proposer": "someorg/not-cached"})
    assert main(["run", str(_file(tmp_path, yaml.safe_dump(params)))]) == 2
    err = capsys.readouterr().err
    assert "not in the local Hugging Face cache" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 2  # the message and the -v hint
