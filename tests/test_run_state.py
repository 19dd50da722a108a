"""Run-folder fingerprint, lock, stage records and built folders (vdlib.runs.run_state), hostile
files included: a lock that is a link or not ours, a symlinked record, a damaged built folder, a
folder without its config, an alias bomb in a run's config."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import yaml
from test_bounded_yaml import BOMB

from vdlib.config.experiment import load_params, to_dict
from vdlib.runs.run_state import (
    FOLDER_RECORD,
    LOCK_FILE,
    NOT_FINGERPRINTED,
    RunConfigMismatch,
    RunLock,
    RunLockedError,
    UnsafeLockError,
    check_folder,
    check_record,
    config_fingerprint,
    file_record,
    fingerprint_diff,
    fingerprinted,
    folder_config_differences,
    remove_outputs,
    verified_build_dir,
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
            from vdlib.runs.run_state import RunLock, RunLockedError
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
    code = f"from vdlib.runs.run_state import RunLock; RunLock({str(tmp_path)!r}).acquire(); " \
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
    (tmp_path / "a.jsonl").write_text('{"x": 1}\n{"x": \n')  # size first, before any parse
    assert "a.jsonl changed since its stage finished (size" in check_record(tmp_path, rec)
    bad = file_record(tmp_path, ["a.jsonl"])  # a record that matches a malformed file
    assert "a.jsonl line 2 is not valid JSON" in check_record(tmp_path, bad)
    (tmp_path / "a.jsonl").write_text('{"x": 1}\n{"x": 3}\n')
    assert "changed since its stage finished" in check_record(tmp_path, rec)
    (tmp_path / "a.jsonl").write_text('{"x": 1}\n{"x": 2}\n')
    (tmp_path / "m" / "model.safetensors").write_bytes(b"")
    assert "model.safetensors is empty" in check_record(tmp_path, rec)
    (tmp_path / "m" / "model.safetensors").unlink()
    assert "model.safetensors is missing" in check_record(tmp_path, rec)
    with pytest.raises(FileNotFoundError, match="without writing it"):
        file_record(tmp_path, ["nothing.json"])


# ----------------------------------------------------------------------------- hostile lock files


def _victim(tmp_path, text="precious, not a lock\n"):
    victim = tmp_path / "victim.txt"
    victim.write_text(text)
    return victim


def test_a_symlinked_lock_is_never_followed_and_its_target_stays_untouched(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    victim = _victim(tmp_path, "12345\n")  # even a target that looks like a lock
    (run_dir / LOCK_FILE).symlink_to(victim)
    with pytest.raises(UnsafeLockError, match=r"\.lock is a symbolic link to .*victim\.txt; "
                                              r".*never followed"):
        RunLock(run_dir).acquire()
    assert victim.read_text() == "12345\n" and (run_dir / LOCK_FILE).is_symlink()


def test_a_dangling_lock_link_creates_nothing(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    target = tmp_path / "would-be-created"
    (run_dir / LOCK_FILE).symlink_to(target)
    with pytest.raises(UnsafeLockError, match="symbolic link"):
        RunLock(run_dir).acquire()
    assert not target.exists() and not target.is_symlink()


@pytest.mark.parametrize("kind", ["hard link", "other content", "directory", "fifo",
                                  "other owner"])
def test_a_lock_file_that_is_not_ours_is_refused_and_left_as_it_is(tmp_path, kind):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    lock = run_dir / LOCK_FILE
    victim = _victim(tmp_path)
    if kind == "hard link":
        os.link(victim, lock)
        why = "2 hard links"
    elif kind == "other content":
        lock.write_text("not a pid at all\n")
        why = "holds something other than a pid"
    elif kind == "directory":
        lock.mkdir()
        why = "not a regular file"
    elif kind == "fifo":
        os.mkfifo(lock)
        why = "not a regular file"
    else:
        lock.write_text("")
        if os.geteuid() != 0:
            pytest.skip("changing a file's owner needs root")
        os.chown(lock, 54321, 54321)
        why = "belongs to another user"
    before = None if kind in ("directory", "fifo") else lock.read_bytes()
    with pytest.raises(UnsafeLockError, match=why):
        RunLock(run_dir).acquire()
    if before is not None:
        assert lock.read_bytes() == before
    assert victim.read_text() == "precious, not a lock\n"


# ----------------------------------------------------------------------------- symlinked records


def test_a_record_refuses_a_symlink_in_place_of_a_file_or_folder(tmp_path):
    root = tmp_path / "run"
    (root / "m").mkdir(parents=True)
    (root / "a.jsonl").write_text('{"x": 1}\n')
    (root / "m" / "model.safetensors").write_bytes(b"weights")
    rec = file_record(root, ["a.jsonl", "m"])
    copy = tmp_path / "copy.jsonl"
    copy.write_text('{"x": 1}\n')  # the same bytes, elsewhere
    (root / "a.jsonl").unlink()
    (root / "a.jsonl").symlink_to(copy)
    assert "a.jsonl is a symbolic link" in check_record(root, rec)
    assert remove_outputs(root, ["a.jsonl"]) == ["a.jsonl"]
    assert copy.read_text() == '{"x": 1}\n'  # the link went, never its target
    (root / "a.jsonl").write_text('{"x": 1}\n')
    other = tmp_path / "other_m"
    (root / "m").rename(other)
    (root / "m").symlink_to(other)
    assert f"{root / 'm'} is a symbolic link" in check_record(root, rec)
    assert remove_outputs(root, ["m"]) == ["m"] and (other / "model.safetensors").exists()


# ----------------------------------------------------------------------------- built folders


def _build(calls):
    def build(tmp):
        calls.append(tmp)
        (tmp / "config.json").write_text('{"a": 1}')
        (tmp / "model.safetensors").write_bytes(b"w" * 64)
    return build


def test_a_built_folder_is_recorded_checked_and_rebuilt_when_damaged(tmp_path, caplog):
    calls = []
    target = tmp_path / "base_models" / "proposer-x"
    assert verified_build_dir(target, _build(calls), "the base") == target
    record = json.loads((target / FOLDER_RECORD).read_text())
    assert set(record) == {"config.json", "model.safetensors"} and len(calls) == 1
    assert check_folder(target) is None
    verified_build_dir(target, _build(calls), "the base")
    assert len(calls) == 1  # reused as it is
    damages = {
        "flipped byte": lambda: (target / "model.safetensors").write_bytes(b"w" * 63 + b"x"),
        "truncated": lambda: (target / "model.safetensors").write_bytes(b"w" * 10),
        "empty": lambda: (target / "model.safetensors").write_bytes(b""),
        "deleted": lambda: (target / "config.json").unlink(),
        "foreign file": lambda: (target / "extra.safetensors").write_bytes(b"?"),
        "no record": lambda: (target / FOLDER_RECORD).unlink(),
        "bad record": lambda: (target / FOLDER_RECORD).write_text("[1"),
    }
    caplog.set_level("WARNING")
    for n, (name, damage) in enumerate(damages.items(), start=2):
        damage()
        assert check_folder(target) is not None, name
        caplog.clear()
        verified_build_dir(target, _build(calls), "the base")
        assert len(calls) == n, name
        assert "the base: " in caplog.text and "building it again" in caplog.text, name
        assert check_folder(target) is None, name
        assert (target / "model.safetensors").read_bytes() == b"w" * 64
    assert not [p for p in target.parent.iterdir() if p.name.startswith(".")]  # no leftovers


def test_a_killed_build_leaves_nothing_behind_in_a_folder_the_run_holds(tmp_path):
    target = tmp_path / "base_models" / "solver-x"
    left = tmp_path / "base_models" / ".solver-x.tmp-abc123"  # a build killed by SIGKILL
    (left / "sub").mkdir(parents=True)
    (left / "sub" / "model.safetensors").write_bytes(b"half")
    verified_build_dir(target, _build([]), "the base")  # a shared cache: another build's, kept
    assert left.is_dir()
    verified_build_dir(target, _build([]), "the base", exclusive=True)
    assert not left.exists() and check_folder(target) is None


def test_a_built_folder_that_is_a_link_is_replaced_and_its_target_kept(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("mine")
    target = tmp_path / "proposer-x"
    target.symlink_to(elsewhere)
    assert "a symbolic link" in check_folder(target)
    verified_build_dir(target, _build([]), "the base")
    assert not target.is_symlink() and check_folder(target) is None
    assert (elsewhere / "keep.txt").read_text() == "mine"


# ----------------------------------------------------------------------------- the folder's config


def _folder(tmp_path, **over):
    from vdlib.runs.run_start import start_run

    cfg = load_params({"profile": "tiny", "output_dir": str(tmp_path), "experiment": "x",
                       **over})
    return cfg, start_run(cfg)


def test_the_manifest_holds_the_fingerprint_and_decides_without_config_yaml(tmp_path, caplog):
    cfg, run_dir = _folder(tmp_path)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["fingerprint"] == config_fingerprint(to_dict(cfg))
    assert manifest["fingerprinted_config"] == fingerprinted(to_dict(cfg))
    other = to_dict(load_params({"profile": "tiny", "vocab_dropout": {"alpha": 0.3}}))
    assert folder_config_differences(run_dir, to_dict(cfg)) == []
    assert folder_config_differences(run_dir, other) == ["vocab_dropout.alpha: 0.75 -> 0.3"]
    (run_dir / "config.yaml").unlink()
    assert folder_config_differences(run_dir, other) == ["vocab_dropout.alpha: 0.75 -> 0.3"]
    caplog.set_level("WARNING")
    assert folder_config_differences(run_dir, to_dict(cfg)) == []  # fits: config.yaml rewritten
    assert "config.yaml is missing" in caplog.text
    (run_dir / "config.yaml").write_text(yaml.safe_dump(other))  # edited by hand
    assert folder_config_differences(run_dir, other) == ["vocab_dropout.alpha: 0.75 -> 0.3"]
    assert folder_config_differences(run_dir, to_dict(cfg)) == []


def test_records_of_an_unknown_config_or_an_edited_fingerprint_are_refused(tmp_path):
    cfg, run_dir = _folder(tmp_path)
    path = run_dir / "manifest.json"
    manifest = json.loads(path.read_text())
    path.write_text(json.dumps({**manifest, "fingerprint": "0" * 64}))
    with pytest.raises(RunConfigMismatch, match="fingerprint does not match"):
        folder_config_differences(run_dir, to_dict(cfg))
    # a folder made before the manifest held a fingerprint: config.yaml decides
    old = {k: v for k, v in manifest.items() if not k.startswith("fingerprint")}
    path.write_text(json.dumps({**old, "stages": {"1/proposer": {}}}))
    assert folder_config_differences(run_dir, to_dict(cfg)) == []
    (run_dir / "config.yaml").unlink()
    with pytest.raises(RunConfigMismatch, match="holds stage records but neither config.yaml "
                                                "nor a fingerprint.*--force"):
        folder_config_differences(run_dir, to_dict(cfg))
    path.write_text(json.dumps(old))  # no records: nothing to protect
    assert folder_config_differences(run_dir, to_dict(cfg)) == []


def test_an_alias_bomb_in_a_run_config_is_one_clear_error(tmp_path):
    cfg, run_dir = _folder(tmp_path)
    (run_dir / "config.yaml").write_text(BOMB)
    with pytest.raises(ValueError, match=r"config\.yaml'.*more than 100000 values.*alias"):
        folder_config_differences(run_dir, to_dict(cfg))

