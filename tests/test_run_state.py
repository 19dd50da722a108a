"""Run-folder fingerprint, lock and stage records (vdlib.run_state)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from vdlib.config import load_params, to_dict
from vdlib.run_state import (
    NOT_FINGERPRINTED,
    RunLock,
    RunLockedError,
    check_record,
    config_fingerprint,
    file_record,
    fingerprint_diff,
    fingerprinted,
)


def _cfg(**over):
    return to_dict(load_params({"profile": "tiny", **over}))


def test_the_fingerprint_ignores_paths_and_follows_results():
    base = _cfg()
    assert config_fingerprint(base) == config_fingerprint(_cfg(output_dir="/elsewhere",
                                                               experiment="other"))
    assert config_fingerprint(base) != config_fingerprint(_cfg(vocab_dropout={"alpha": 0.3}))
    assert config_fingerprint(base) != config_fingerprint(_cfg(seed=1))
    assert len(config_fingerprint(base)) == 64


def test_every_left_out_key_exists_in_the_config():
    flat = json.dumps(sorted(_cfg()))
    for key in NOT_FINGERPRINTED:
        head, _, rest = key.partition(".")
        assert head in flat, key
        if rest:
            assert rest in _cfg()[head], key


def test_the_diff_names_each_changed_key():
    old = fingerprinted(_cfg())
    new = fingerprinted(_cfg(vocab_dropout={"alpha": 0.3}, scoring={"num_solver_samples": 7}))
    assert fingerprint_diff(old, new) == ["scoring.num_solver_samples: 5 -> 7",
                                          "vocab_dropout.alpha: 0.75 -> 0.3"]
    assert fingerprint_diff(old, old) == []
    assert fingerprint_diff({"a": 1}, {}) == ["a: 1 -> <absent>"]


def test_a_second_process_is_refused_with_the_holders_pid(tmp_path):
    with RunLock(tmp_path) as lock:
        assert lock.held
        code = textwrap.dedent(f"""
            from vdlib.run_state import RunLock, RunLockedError
            try:
                RunLock({str(tmp_path)!r}).acquire()
            except RunLockedError as e:
                print("REFUSED", e)
        """)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True).stdout
        assert "REFUSED" in out and f"pid {os.getpid()}" in out
    assert not lock.held
    RunLock(tmp_path).acquire().release()  # free again


def test_the_lock_dies_with_its_process(tmp_path):
    code = f"from vdlib.run_state import RunLock; RunLock({str(tmp_path)!r}).acquire(); " \
           "import os; os.kill(os.getpid(), 9)"
    subprocess.run([sys.executable, "-c", code], check=False)
    RunLock(tmp_path).acquire().release()


def test_the_same_process_cannot_lock_twice(tmp_path):
    with RunLock(tmp_path), pytest.raises(RunLockedError, match="pid"):
        RunLock(tmp_path).acquire()


def test_a_record_catches_changed_missing_and_malformed_files(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"x": 1}\n{"x": 2}\n')
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "model.safetensors").write_bytes(b"weights")
    (tmp_path / "m" / "config.json").write_text("{}")
    rec = file_record(tmp_path, ["a.jsonl", "m"])
    assert set(rec) == {"a.jsonl", "m/config.json", "m/model.safetensors"}
    assert check_record(tmp_path, rec) is None
    (tmp_path / "a.jsonl").write_text('{"x": 1}\n{"x": \n')
    assert "a.jsonl line 2 is not valid JSON" in check_record(tmp_path, rec)
    (tmp_path / "a.jsonl").write_text('{"x": 1}\n{"x": 3}\n')
    assert "changed since its stage finished" in check_record(tmp_path, rec)
    (tmp_path / "a.jsonl").write_text('{"x": 1}\n{"x": 2}\n')
    (tmp_path / "m" / "model.safetensors").write_bytes(b"")
    assert "model.safetensors is empty" in check_record(tmp_path, rec)
    (tmp_path / "m" / "model.safetensors").unlink()
    assert "model.safetensors is missing" in check_record(tmp_path, rec)
    with pytest.raises(FileNotFoundError, match="without writing it"):
        file_record(tmp_path, ["nothing.json"])
