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

from vdlib.app.cli import main
from vdlib.config.experiment import ConfigError, load_params
from vdlib.runs.run_start import start_run

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
    with pytest.raises(ConfigError, match=f"{key} = .* is not allowed: .*it names a folder"):
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
    from vdlib.runs.run_state import RunLock

    params = tiny_params(tmp_path, model={"proposer": "tiny-random"})
    path = _file(tmp_path, yaml.safe_dump(params))
    run_dir = tmp_path / "t" / "seed0"
    with RunLock(run_dir):
        from vdlib.loop.progress import BUSY_EXIT

        assert main(["run", str(path)]) == BUSY_EXIT  # its own status: a grid says "busy"
        err = capsys.readouterr().err
        assert f"in use by another process (pid {os.getpid()})" in err and "Traceback" not in err
        from vdlib.runs.run_state import RunLockedError

        with pytest.raises(RunLockedError):  # -v after the subcommand: the traceback
            main(["run", str(path), "-v"])


def run_inside_first_stage(tmp_path: Path) -> subprocess.Popen:
    """A real tiny ``vdlib run`` (a long proposer phase) in a subprocess, returned once its
    first stage has made its working folder (``iter_1/.trl_proposer``), still running."""
    params = tiny_params(tmp_path, proposer={"max_response_length": 12, "max_steps": 50})
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(params))
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "vdlib", "run", str(path)], env=env,
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    work = tmp_path / "t" / "seed0" / "iter_1" / ".trl_proposer"
    deadline = time.monotonic() + 300
    while not work.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read()[-2000:]
    return proc


@pytest.mark.slow  # 29 s on 2 cores; a grid's SIGTERM: tests/test_launch.py in make test
def test_sigterm_stops_a_run_without_leaving_working_folders(tmp_path):
    proc = run_inside_first_stage(tmp_path)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 128 + signal.SIGTERM
    left = [p.name for p in (tmp_path / "t" / "seed0" / "iter_1").glob(".*")]
    assert left == [], left


def test_expected_failures_get_one_line():
    from vdlib.app.cli import expected_failure
    from vdlib.engines.models import ModelUnavailableError

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


# ----------------------------------------------------------------------------- bounded values


def _numeric_fields(cls: type, prefix: str = ""):
    """(dotted key, field) of every int or float field (lists of them too) of ``cls``."""
    import dataclasses
    import typing

    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            yield from _numeric_fields(tp, f"{prefix}{f.name}.")
            continue
        args = typing.get_args(tp) or (tp,)
        args = [a for x in args for a in (typing.get_args(x) or (x,))]  # list[int] -> int
        if any(a in (int, float) for a in args):
            yield prefix + f.name, f


def test_every_numeric_key_has_a_finite_documented_range():
    """Issue 29, item 6: no numeric key is unbounded, and its help text (``vdlib params
    describe``, docs/config.md) states the range."""
    from vdlib.config.experiment import ExperimentConfig

    fields = dict(_numeric_fields(ExperimentConfig))
    assert "iterations" in fields and "proposer.learning_rate" in fields
    for key, f in fields.items():
        meta = f.metadata
        if meta.get("choices"):
            continue
        assert meta.get("gt") is not None or meta.get("ge") is not None, f"{key}: no lower bound"
        assert meta.get("le") is not None or meta.get("lt") is not None, f"{key}: no upper bound"
        assert "Allowed: " in meta["help"], key


@pytest.mark.parametrize("params, error", [
    ({"iterations": 1000000000000}, "iterations = 1000000000000 is out of range; allowed: "
                                    "0 < iterations <= 1000"),
    ({"proposer": {"learning_rate": "1e999"}}, "proposer.learning_rate = inf is out of range; "
                                               "allowed: 0 < learning_rate <= 1"),
    ({"solver": {"learning_rate": float("inf")}}, "solver.learning_rate = inf is out of range"),
    ({"solver": {"learning_rate": float("nan")}}, "solver.learning_rate = nan is out of range"),
    ({"scoring": {"parse_failure_reward": float("-inf")}},
     "scoring.parse_failure_reward = -inf is out of range; allowed: -1000 <= "),
    ({"curriculum": {"num_questions": 10**12}}, "curriculum.num_questions = 1000000000000 is "
                                                "out of range"),
    ({"seeds": [0, 2**40]}, "seeds[1] = 1099511627776 is out of range"),
    ({"proposer": {"max_response_length": 10**10}}, "proposer.max_response_length"),
])
def test_absurd_sizes_are_refused_at_load_with_the_key_and_range(tmp_path, params, error):
    with pytest.raises(ConfigError) as e:
        load_params({"profile": "tiny", **params})
    assert error in str(e.value)
    assert len(str(e.value).splitlines()) == 1


def test_absurd_values_in_a_file_are_one_line_from_run_and_grid(tmp_path, capsys):
    params = tiny_params(tmp_path, iterations=1000000000000)
    assert main(["run", str(_file(tmp_path, yaml.safe_dump(params)))]) == 2
    err = capsys.readouterr().err
    assert "iterations = 1000000000000 is out of range; allowed: 0 < iterations <= 1000" in err
    params = tiny_params(tmp_path, arms=["baseline", "vd75"])
    params["proposer"]["learning_rate"] = "LR"
    path = _file(tmp_path, yaml.safe_dump(params).replace("LR", "1e999"))  # YAML: a string
    assert main(["grid", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "learning_rate = inf is out of range; allowed: 0 < learning_rate <= 1" in err
    assert not (tmp_path / "t").exists()  # nothing was written


# ----------------------------------------------------------------------------- one line, not a
# traceback (issue 29, item 9)


def _one_line_failure(capsys, argv: list[str], rc: int = 2) -> str:
    assert main(argv) == rc
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert lines[-1] == "(-v shows the traceback)" and len(lines) == 2, err
    return lines[0]


@pytest.mark.parametrize("where, expected", [
    ("a_file", "Not a directory; a part of the path is a file"),
    ("under_a_file", "Not a directory; a part of the path is a file"),
    ("/proc/vdlib-test-output", "a special file system such as /proc cannot hold runs"),
])
def test_an_output_dir_that_cannot_hold_runs_is_one_line(tmp_path, capsys, where, expected):
    (tmp_path / "a_file").write_text("not a folder\n")
    out = {"a_file": tmp_path / "a_file", "under_a_file": tmp_path / "a_file" / "sub"}.get(
        where, Path(where))
    path = _file(tmp_path, yaml.safe_dump(tiny_params(out)))
    assert expected in _one_line_failure(capsys, ["run", str(path)])


def test_a_name_too_long_for_the_file_system_is_one_line(tmp_path, capsys):
    # a run_id that long is refused by the name rule (vdlib.config.names); a folder of
    # output_dir is a path the file system judges
    path = _file(tmp_path, yaml.safe_dump(tiny_params(tmp_path / ("r" * 300))))
    line = _one_line_failure(capsys, ["run", str(path)])
    assert "File name too long; a file or folder name is too long" in line


def test_a_full_disk_is_one_line(tmp_path, capsys, monkeypatch):
    import errno
    import tempfile

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "t"))

    monkeypatch.setattr(tempfile, "mkstemp", full)
    path = _file(tmp_path, yaml.safe_dump(tiny_params(tmp_path)))
    line = _one_line_failure(capsys, ["run", str(path)])
    assert "No space left on device; the disk is full" in line


def test_a_corrupt_manifest_is_one_line_from_the_cli(tmp_path, capsys):
    from vdlib.config import layout

    params = tiny_params(tmp_path)
    path = _file(tmp_path, yaml.safe_dump(params))
    run = start_run(load_params(path))
    layout.manifest_path(run).write_text('{"stages": {"1/pro')
    line = _one_line_failure(capsys, ["run", str(path)])
    assert "manifest.json" in line
    assert layout.manifest_path(run).read_text() == '{"stages": {"1/pro'  # left as it was


# ----------------------------------------------------------------------------- file modes (item 10)


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
def test_written_files_follow_the_umask_like_the_model_folders(tmp_path, umask, mode):
    from vdlib.utils.artifacts import atomic_write_json, write_jsonl

    old = os.umask(umask)
    try:
        for path in (atomic_write_json(tmp_path / "a.json", {"x": 1}),
                     write_jsonl(tmp_path / "b.jsonl", [{"x": 1}])):
            assert path.stat().st_mode & 0o777 == mode, path
    finally:
        os.umask(old)
