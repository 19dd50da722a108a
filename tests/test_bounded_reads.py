"""Issue 50, items 2 and 3: every file vdlib reads back from a run folder or a results file is
read bounded, never through a link and never waiting on a FIFO (vdlib.utils.safe_read); a stage
record's size and hash are compared before anything is parsed; ``timing.json`` has a record;
a run or experiment folder that is a symbolic link is refused (``output_dir`` may be one).

A read that could hang (a FIFO) or eat memory (``/dev/zero``) on a regression runs in a child
process with a memory limit and a timeout, so a regression fails instead of hanging."""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_coevolution import tiny_params

from vdlib.config import layout, load_params
from vdlib.runs.run_start import start_run
from vdlib.runs.run_state import (
    UnsafeRunFolderError,
    check_record,
    claim_run,
    file_record,
    read_manifest,
)

ROOT = Path(__file__).resolve().parent.parent
HANG_GUARD_S = 120  # a guard against a regression that blocks, not a speed bound


def _child(code: str, *args: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a child Python (2 GiB of address space, :data:`HANG_GUARD_S`): a read
    that blocks or never ends fails the test instead of hanging it or the machine."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    try:
        return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args],
                              preexec_fn=limit, capture_output=True, text=True, env=env,
                              timeout=HANG_GUARD_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the read blocked for {HANG_GUARD_S} s: {code.strip().splitlines()[-1]}")


def _started(tmp_path, **over) -> tuple[object, Path]:
    cfg = load_params(tiny_params(tmp_path, **over))
    lock, run_dir = claim_run(cfg)
    start_run(cfg)
    lock.release()
    return cfg, run_dir


# ----------------------------------------------------------------------------- the reader


def test_the_reader_refuses_links_fifos_devices_and_large_files_before_reading(tmp_path):
    from vdlib.utils import safe_read

    good = tmp_path / "good.json"
    good.write_text('{"a": 1}')
    assert safe_read.read_json(good, 100) == {"a": 1}
    link = tmp_path / "link.json"
    link.symlink_to(good)
    with pytest.raises(safe_read.UnsafeFileError, match="link.json is a symbolic link"):
        safe_read.read_bytes(link, 100)
    assert safe_read.read_json(link, 100, follow_links=True) == {"a": 1}  # a named results file
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    for follow in (False, True):  # refused from its lstat, never opened: nothing can block
        with pytest.raises(safe_read.UnsafeFileError, match="fifo.json is a FIFO"):
            safe_read.read_bytes(fifo, 100, follow_links=follow)
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")
    with pytest.raises(safe_read.UnsafeFileError, match="is a character device"):
        safe_read.read_bytes(zero, 100, follow_links=True)
    with pytest.raises(safe_read.UnsafeFileError, match="is a directory"):
        safe_read.read_bytes(tmp_path, 100)
    sparse = tmp_path / "sparse.json"
    with sparse.open("wb") as fh:
        fh.truncate(2 << 30)  # 2 GiB, no blocks
    with pytest.raises(safe_read.UnsafeFileError, match=r"larger than 100 bytes \(2147483648"):
        safe_read.read_bytes(sparse, 100)
    with pytest.raises(FileNotFoundError):
        safe_read.read_bytes(tmp_path / "missing.json", 100)


def test_a_file_swapped_for_a_fifo_after_its_lstat_never_blocks(tmp_path, monkeypatch):
    """The race the lstat alone misses: a FIFO put in place between the lstat and the open is
    opened non-blocking and refused by the fstat (in a child: a blocking open would hang)."""
    result = _child("""
        import os, sys
        from pathlib import Path
        from vdlib.utils import safe_read
        path = Path(sys.argv[1])
        path.write_text("{}")
        real_lstat = os.lstat
        def swapped(p, *a, **k):
            st = real_lstat(p, *a, **k)
            os.unlink(p); os.mkfifo(p)
            return st
        os.lstat = swapped
        try:
            safe_read.read_bytes(path, 100)
        except safe_read.UnsafeFileError as e:
            print("refused:", e)
        """, str(tmp_path / "m.json"))
    assert result.returncode == 0, result.stderr
    assert "m.json was replaced while it was opened (now a FIFO)" in result.stdout


def _fifo_or_dev_zero(path: Path, kind: str) -> None:
    """``path`` made a FIFO (a read that blocks) or a link to /dev/zero (one that never ends)."""
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")


# ----------------------------------------------------------------------------- manifest.json


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_fifo_or_dev_zero_manifest_is_one_clear_error_not_a_hang(tmp_path, kind):
    manifest = tmp_path / "manifest.json"
    _fifo_or_dev_zero(manifest, kind)
    result = _child("""
        import sys
        from vdlib.runs.run_state import read_manifest
        try:
            read_manifest(sys.argv[1])
        except ValueError as e:
            print("refused:", e)
        """, str(manifest))
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"refused: {manifest} is " in result.stdout and "--force" in result.stdout


def test_a_manifest_is_bounded_and_never_read_through_a_link(tmp_path):
    from vdlib.runs.run_state import MANIFEST_MAX_BYTES

    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"stages": {"1/proposer": {}}}))
    manifest = tmp_path / "manifest.json"
    manifest.symlink_to(elsewhere)
    with pytest.raises(ValueError, match="manifest.json is a symbolic link"):
        read_manifest(manifest)
    manifest.unlink()
    # valid JSON (trailing blanks), but past the bound: refused before a byte is read
    manifest.write_text('{"stages": {}}' + " " * MANIFEST_MAX_BYTES)
    with pytest.raises(ValueError, match=f"manifest.json is larger than {MANIFEST_MAX_BYTES}"):
        read_manifest(manifest)
    manifest.unlink()
    assert read_manifest(manifest) == {}  # absent: a new run


def test_a_fifo_manifest_blanks_one_status_row_not_the_table(tmp_path):
    """`vdlib status` with one folder whose manifest is a FIFO: that row is unreadable, the
    other run is listed (in a child: the old read blocked forever)."""
    _, good = _started(tmp_path, run_id="good")
    _, bad = _started(tmp_path, run_id="bad")
    (bad / "manifest.json").unlink()
    layout.iteration_dir(bad, 1).mkdir()
    os.mkfifo(bad / "manifest.json")
    result = _child("""
        import sys
        from vdlib.grid.status import collect_status
        for s in collect_status(sys.argv[1]):
            print(s.run_id, "|", s.label)
        """, str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    rows = dict(line.split(" | ") for line in result.stdout.splitlines())
    assert rows == {"bad": "unreadable (manifest.json)", "good": "new"}


def test_a_fifo_or_linked_run_config_is_refused_before_it_is_read(tmp_path):
    cfg, run_dir = _started(tmp_path)
    config = layout.config_path(run_dir)
    saved = config.read_text()
    config.unlink()
    (tmp_path / "other.yaml").write_text(saved)
    config.symlink_to(tmp_path / "other.yaml")
    with pytest.raises(ValueError, match="config.yaml is a symbolic link"):
        claim_run(cfg)
    config.unlink()
    os.mkfifo(config)
    (tmp_path / "params.yaml").write_text(json.dumps(tiny_params(tmp_path)))
    result = _child("""
        import sys
        from vdlib.config import load_params
        from vdlib.runs.run_state import claim_run
        try:
            claim_run(load_params(sys.argv[1]))
        except ValueError as e:
            print("refused:", e)
        """, str(tmp_path / "params.yaml"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"refused: {config} is a FIFO, not a regular file" in result.stdout


# ----------------------------------------------------------------------------- stage records


def test_a_stage_file_is_compared_by_size_and_hash_before_it_is_parsed(tmp_path, monkeypatch):
    """A recorded JSONL file grown (a sparse 2 GiB questions.jsonl in issue 50) is caught by
    its size from fstat: nothing of it is parsed (json.loads is never called) or hashed."""
    import hashlib

    path = tmp_path / "questions.jsonl"
    path.write_text('{"q": 1}\n')
    rec = file_record(tmp_path, ["questions.jsonl"])
    with path.open("ab") as fh:
        fh.write(b"not json\n" * 1000)
    parsed, hashed = [], []
    real_loads = json.loads
    monkeypatch.setattr(json, "loads", lambda *a, **k: parsed.append(1) or real_loads(*a, **k))
    real_sha = hashlib.sha256
    monkeypatch.setattr(hashlib, "sha256", lambda *a: hashed.append(1) or real_sha(*a))
    why = check_record(tmp_path, rec)
    assert why == (f"{path} changed since its stage finished (size 9009 bytes, recorded 9)")
    assert parsed == [] and hashed == []
    with path.open("r+b") as fh:  # now sparse, 2 GiB: still only its size is looked at
        fh.truncate(2 << 30)
    assert "size 2147483648 bytes, recorded 9" in check_record(tmp_path, rec)
    assert parsed == [] and hashed == []


def test_a_fifo_in_place_of_a_stage_file_is_named_not_waited_on(tmp_path):
    (tmp_path / "metrics.json").write_text("{}")
    rec = file_record(tmp_path, ["metrics.json"])
    (tmp_path / "metrics.json").unlink()
    os.mkfifo(tmp_path / "metrics.json")
    assert check_record(tmp_path, rec) == f"{tmp_path / 'metrics.json'} is a FIFO, not a " \
                                          "regular file"


# ----------------------------------------------------------------------------- timing.json


def _fake_loop(tmp_path, monkeypatch, **over):
    """A Loop whose stages only write their outputs (the runner, its records and timing.json
    are the real ones)."""
    import vdlib.loop.coevolution as co
    from vdlib.loop.coevolution import Loop
    from vdlib.loop.model_store import ModelStore

    monkeypatch.setattr(ModelStore, "_build_base", lambda self, name, role: f"/base/{role}")

    def fake(stage):
        def run_stage(store, t, out):
            for name in stage.outputs:
                (out / name).write_text(json.dumps({"iteration": t}))
        return dataclasses.replace(stage, run=run_stage)

    monkeypatch.setattr(co, "STAGE_TABLE", tuple(fake(s) for s in co.STAGE_TABLE))
    return Loop(load_params(tiny_params(tmp_path, **over)))


@pytest.mark.parametrize("kind", ["link", "truncated", "unrecorded"])
def test_timing_json_is_recorded_and_never_read_through_a_link(tmp_path, monkeypatch, caplog,
                                                             kind):
    """Issue 50: a timing.json linked to another JSON file copied that file's content into the
    run folder; a truncated one was a traceback after the stage. Now it has a record in the
    manifest, and one that does not match it starts afresh (logged); a link's target is
    untouched."""
    from vdlib.loop.stages import STAGES

    loop = _fake_loop(tmp_path, monkeypatch)
    out = layout.iteration_dir(loop.run_dir, 1)
    out.mkdir(parents=True)
    timing = out / "timing.json"
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"api_key": "sk-not-for-the-run-folder"}))
    if kind == "link":
        timing.symlink_to(secret)
    elif kind == "truncated":
        timing.write_text('{"proposer": 1.')
    else:
        timing.write_text('{"proposer": 1.0, "extra": 2}')
    caplog.set_level("WARNING")
    loop.run()
    assert not timing.is_symlink() and set(json.loads(timing.read_text())) == set(STAGES)
    assert secret.read_text() == json.dumps({"api_key": "sk-not-for-the-run-folder"})
    manifest = read_manifest(loop.run_dir / "manifest.json")
    assert manifest["timing"]["1"] == file_record(out, ["timing.json"])["timing.json"]
    assert "its stage times start afresh" in caplog.text


def test_a_fifo_timing_json_does_not_hang_the_run(tmp_path):
    result = _child("""
        import dataclasses, json, os, sys
        sys.path.insert(0, sys.argv[2])
        from test_bounded_reads import _fake_loop
        from vdlib.config import layout

        class Patch:  # monkeypatch's setattr, for a child without pytest's fixture
            def setattr(self, obj, name, value):
                setattr(obj, name, value)

        loop = _fake_loop(__import__("pathlib").Path(sys.argv[1]), Patch())
        out = layout.iteration_dir(loop.run_dir, 1)
        out.mkdir(parents=True)
        os.mkfifo(out / "timing.json")
        loop.run()
        print(sorted(json.loads((out / "timing.json").read_text())))
        """, str(tmp_path), str(ROOT / "tests"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "'metrics'" in result.stdout and "'proposer'" in result.stdout


# ----------------------------------------------------------------------------- results files


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_fifo_or_dev_zero_results_file_is_one_line(tmp_path, kind):
    path = tmp_path / "results.json"
    _fifo_or_dev_zero(path, kind)
    result = _child("""
        import sys
        from vdlib.report.results import ResultsFileError, read_json_file
        try:
            read_json_file(sys.argv[1])
        except ResultsFileError as e:
            print("refused:", e)
        """, str(path))
    assert result.returncode == 0, result.stderr[-2000:]
    kind_words = "a FIFO" if kind == "fifo" else "a character device"
    assert f"refused: {path} is {kind_words}, not a regular file; not a results file" \
        in result.stdout


# ----------------------------------------------------------------------------- linked folders


@pytest.mark.parametrize("linked", ["experiment", "run"])
def test_a_linked_run_or_experiment_folder_is_refused_and_its_target_untouched(tmp_path,
                                                                               linked):
    """Issue 50 item 3: the lock, manifest, config and iterations were written into the
    link's target."""
    target = tmp_path / "target"
    target.mkdir()
    cfg = load_params(tiny_params(tmp_path / "out", experiment="x", run_id="r"))
    if linked == "experiment":
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "x").symlink_to(target)
        where = tmp_path / "out" / "x"
    else:
        (tmp_path / "out" / "x").mkdir(parents=True)
        (tmp_path / "out" / "x" / "r").symlink_to(target)
        where = tmp_path / "out" / "x" / "r"
    for force in (False, True):
        with pytest.raises(UnsafeRunFolderError, match=f"{where} is a symbolic link to "
                                                       f"{target}; a run never writes"):
            claim_run(cfg, force=force)
    with pytest.raises(OSError, match="a symbolic link where vdlib needs a folder"):
        start_run(cfg)
    assert list(target.iterdir()) == []


def test_a_linked_experiment_folder_is_one_line_from_the_cli(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    (tmp_path / "x").symlink_to(target)
    params = tmp_path / "params.yaml"
    params.write_text(json.dumps(tiny_params(tmp_path, experiment="x")))
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-m", "vdlib", "run", str(params)], env=env,
                            capture_output=True, text=True, timeout=600)
    err = result.stderr.strip()
    assert result.returncode == 2 and "Traceback" not in err
    assert err.startswith(f"vdlib run: {tmp_path / 'x'} is a symbolic link to {target}; ")
    assert err.splitlines()[1:] == ["(-v shows the traceback)"]
    assert list(target.iterdir()) == []


def test_an_output_dir_that_is_a_link_is_used(tmp_path):
    """Users point output_dir at scratch space with a link: that is allowed (only the folders
    vdlib names inside output_dir may not be links)."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (tmp_path / "outputs").symlink_to(scratch)
    cfg, run_dir = _started(tmp_path / "outputs")
    assert (scratch / cfg.experiment / layout.run_id(cfg) / "manifest.json").is_file()
    assert not run_dir.is_symlink()


def test_a_fifo_manifest_is_refused_and_moved_aside_under_force(tmp_path):
    cfg, run_dir = _started(tmp_path)
    (run_dir / "manifest.json").unlink()
    os.mkfifo(run_dir / "manifest.json")
    (tmp_path / "params.yaml").write_text(json.dumps(tiny_params(tmp_path)))
    result = _child("""
        import sys
        from vdlib.config import load_params
        from vdlib.runs.run_state import claim_run
        cfg = load_params(sys.argv[1])
        try:
            claim_run(cfg)
        except ValueError as e:
            print("refused:", e)
        lock, fresh = claim_run(cfg, force=True)
        print("fresh:", sorted(p.name for p in fresh.iterdir()))
        """, str(tmp_path / "params.yaml"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"refused: {run_dir / 'manifest.json'} is a FIFO" in result.stdout
    assert "fresh: ['.lock']" in result.stdout
    assert [p.name for p in run_dir.parent.iterdir() if ".replaced-" in p.name]


def test_report_readers_never_wait_on_a_fifo(tmp_path):
    """An evaluation's summary.json and a report's summary.json that are FIFOs: the first is
    one error naming it, the second reads as no summary (in a child: the old reads blocked)."""
    (tmp_path / "eval").mkdir()
    os.mkfifo(tmp_path / "eval" / "summary.json")
    (tmp_path / "report").mkdir()
    os.mkfifo(tmp_path / "report" / "summary.json")
    result = _child("""
        import sys
        from vdlib.report.frames import load_eval_summary
        from vdlib.report.summary import read_summary
        try:
            load_eval_summary(sys.argv[1] + "/eval")
        except ValueError as e:
            print("refused:", e)
        print("summary:", read_summary(sys.argv[1] + "/report"))
        """, str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"refused: {tmp_path}/eval/summary.json is a FIFO" in result.stdout
    assert "summary: None" in result.stdout
