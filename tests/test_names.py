"""One rule for the names that become folders (issue 50, item 7): experiment, arm and run names
(vdlib.config.names.check_name), checked by load_params, so by `vdlib params check` and every
command; output_dir without undecodable bytes or control characters; seeds bounded."""

from __future__ import annotations

import pytest
import yaml

from vdlib.app.cli import main
from vdlib.config.arm_table import ARMS
from vdlib.config.experiment import MAX_SEEDS, ConfigError, load_params
from vdlib.config.names import check_name, name_problem


@pytest.mark.parametrize("key, value, expected", [
    ("experiment", "a\nb", "it holds '\\n'"),
    ("experiment", ".hidden", "starts with a dot"),
    ("run_id", ".lock", "starts with a dot"),
    ("run_id", "..", "starts with a dot"),
    ("run_id", "-rf", "starts with a dash"),
    ("run_id", "a\rb", "it holds '\\r'"),
    ("run_id", "tab\there", "it holds '\\t'"),
    ("run_id", "bell\x07", "it holds '\\x07'"),
    ("run_id", "zero\u200bwidth", "it holds '\\u200b'"),
    ("run_id", "sur\udcffrogate", "it holds '\\udcff'"),  # a non-UTF-8 byte of argv
    ("run_id", "a b", "it holds ' '"),
    ("run_id", "a/b", "it holds '/'"),
    ("experiment", "e\u0301", "NFC"),  # e + combining accent: two folders on two systems
    ("run_id", "r" * 129, "bytes long"),
    ("run_id", "iter_1", "vdlib uses for its own folders"),
    ("run_id", "ITER_12", "vdlib uses for its own folders"),
    ("run_id", "base_models", "vdlib uses for its own folders"),
    ("run_id", "manifest.json", "vdlib uses for its own folders"),
    ("run_id", "seed0.replaced-20260101T000000Z", "vdlib uses for its own folders"),
    ("experiment", "notebooks", "vdlib uses for its own folders"),
    ("experiment", "grid", "vdlib uses for its own folders"),
])
def test_a_bad_name_is_refused_in_one_line_naming_the_key(key, value, expected):
    with pytest.raises(ConfigError) as e:
        load_params({"profile": "tiny", key: value})
    text = str(e.value)
    assert text.startswith(f"{key} = ") and expected in text, text
    assert len(text.splitlines()) == 1


@pytest.mark.parametrize("value", ["quickstart", "vd75-seed0", "gpu_small_main", "ünï",
                                   "qwen3_0.6b+vd", "r" * 128, "iteration_1", "transfer"])
def test_good_names_pass(value):
    assert name_problem(value) is None
    assert load_params({"profile": "tiny", "experiment": value, "run_id": value}).run_id == value


def test_every_arm_name_follows_the_rule_and_reference_experiments_too():
    for arm in ARMS.names():
        check_name("arms[0]", arm)
    with pytest.raises(ConfigError, match=r"reference_experiments\[1\] = '\.\.' is not allowed"):
        load_params({"profile": "tiny", "reference_experiments": ["ok", ".."]})


@pytest.fixture
def no_run(monkeypatch):
    """A run that gets past the checks fails at once (instead of running)."""
    import vdlib.loop.coevolution as coevolution

    def started(*args, **kwargs):
        raise AssertionError("the run started: its input was not refused")

    monkeypatch.setattr(coevolution, "run_arms", started)


def test_params_check_refuses_a_newline_in_the_experiment_name(tmp_path, capsys):
    path = tmp_path / "p.yaml"
    path.write_text('profile: tiny\nexperiment: "a\\nb"\n')
    assert main(["params", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "experiment = 'a\\nb' is not allowed" in err and len(err.strip().splitlines()) == 1


def test_a_run_id_flag_with_a_newline_or_undecodable_bytes_is_refused(tmp_path, capsys, no_run):
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({"profile": "tiny", "output_dir": str(tmp_path / "o")}))
    # argv bytes that are not UTF-8 arrive as lone surrogates (surrogateescape)
    for run_id in ("x\nseed0 | done", b"r\xff".decode("utf-8", "surrogateescape")):
        assert main(["run", str(path), "--run-id", run_id]) == 2
        err = capsys.readouterr().err
        assert "run_id = " in err and "is not allowed" in err, err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("output_dir, expected", [
    (b"/tmp/o\xff".decode("utf-8", "surrogateescape"), "a byte that is not UTF-8"),
    ("/tmp/o\nx", "the control character '\\n'"),
    ("", "is empty"),
])
def test_an_output_dir_with_undecodable_bytes_or_control_characters(tmp_path, capsys, no_run,
                                                                   output_dir, expected):
    path = tmp_path / "p.yaml"
    path.write_text("profile: tiny\n")
    assert main(["run", str(path), "--output-dir", output_dir]) == 2
    err = capsys.readouterr().err
    assert "output_dir = " in err and expected in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1


def test_seeds_are_bounded_in_number_and_range_from_the_grid_flag(tmp_path, capsys):
    path = tmp_path / "p.yaml"  # no arms: the grid is this config for every seed
    path.write_text(yaml.safe_dump({"profile": "tiny", "output_dir": str(tmp_path / "o")}))
    for seeds, expected in ((["-5"], "seeds[0] = -5 is out of range"),
                            (["0", str(2**40)], "seeds[1] = 1099511627776 is out of range"),
                            ([str(i) for i in range(MAX_SEEDS + 1)],
                             f"allowed: 1 to {MAX_SEEDS}")):
        assert main(["grid", str(path), "--dry-run", "--seeds", *seeds]) == 2
        err = capsys.readouterr().err
        assert expected in err and len(err.strip().splitlines()) == 1, err
    with pytest.raises(ConfigError, match="allowed: 1 to 100"):
        load_params({"profile": "tiny", "seeds": list(range(101))})
    with pytest.raises(ConfigError, match="holds 1,001 entries; allowed: at most 1000"):
        load_params({"profile": "tiny", "vocab_dropout": {"extra_protected_ids": [1] * 1001}})
    assert not (tmp_path / "o").exists()


def test_a_fifo_or_process_substitution_params_file_is_named_as_such(tmp_path, capsys):
    import os

    fifo = tmp_path / "p.yaml"
    os.mkfifo(fifo)
    assert main(["params", "check", str(fifo)]) == 2  # refused before any open: no hang
    err = capsys.readouterr().err
    assert "is a FIFO or pipe" in err and "does not exist" not in err, err
    r, w = os.pipe()  # what bash's <(...) gives: /dev/fd/N, a pipe
    try:
        os.write(w, b"profile: tiny\n")
        assert main(["params", "check", f"/dev/fd/{r}"]) == 2
        assert "is a FIFO or pipe" in capsys.readouterr().err
    finally:
        os.close(r)
        os.close(w)
    assert main(["params", "check", "/dev/null"]) == 2
    assert "is a device" in capsys.readouterr().err


def test_a_folder_made_by_hand_with_a_newline_cannot_forge_a_status_row(tmp_path, capsys):
    """vdlib never makes such a folder now; one renamed by hand is shown escaped, one line."""
    from vdlib.runs.run_start import start_run

    params = {"profile": "tiny", "experiment": "exp", "output_dir": str(tmp_path),
              "model": {"proposer": "tiny-random"}}
    run = start_run(load_params(params))
    run.rename(run.parent / "x\n| spoof | done |")
    assert main(["status", str(tmp_path)]) == 0
    rows = [r for r in capsys.readouterr().out.splitlines() if r.startswith("| exp ")]
    assert len(rows) == 1 and "'x\\n\\| spoof \\| done \\|'" in rows[0], rows
