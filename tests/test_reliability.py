"""Fault injection (docs/reliability.md): a tiny-random run is killed, corrupted, re-configured
and raced, and each time it either says clearly what is wrong or recomputes exactly what it
must, and never reports a stale result as complete."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from test_coevolution import _artifacts, tiny_params

from vdlib.loop.coevolution import STAGES, run
from vdlib.loop.stages import STAGE_TABLE
from vdlib.runs.run_state import (
    LOCK_FILE,
    RunConfigMismatch,
    RunLock,
    RunLockedError,
    UnsafeLockError,
    UnsafeRunFolderError,
)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """An uninterrupted 1-iteration run: what every faulty run must end up equal to."""
    out = tmp_path_factory.mktemp("ref")
    return run(tiny_params(out)).run_dir


def _copy(reference: Path, tmp_path: Path) -> tuple[dict, Path]:
    """A finished run folder at the same place the params point to."""
    params = tiny_params(tmp_path)
    target = tmp_path / "t" / "seed0"
    shutil.copytree(reference, target)
    return params, target


def _stage_of(name: str) -> str:
    for stage in STAGE_TABLE:
        if any(name == o or name.startswith(o + "/") for o in stage.outputs):
            return stage.name
    raise KeyError(name)


# ----------------------------------------------------------------------------- corruption

STAGE_FILES = [o for s in STAGE_TABLE for o in s.outputs if not o.endswith("_model")]


#: every stage file corrupted; truncated: the last one in make test, the others under
#: `make test-slow` (the same record check catches both; make test keeps its 15 minutes).
#: Corrupted: the questions and the later files in make test; the proposer's rollouts (the
#: iteration's first file: every stage reruns, 27 s on 2 cores, as after a deleted manifest,
#: which make test keeps), the proposer's train log and the generated questions (20 s and
#: 9 s, the same rerun-from-here path) under make test-slow
_SLOW_CORRUPT = {"proposer_rollouts.jsonl", "proposer_train.json", "generated.jsonl"}
DAMAGED = ([pytest.param("corrupt", n, marks=pytest.mark.slow) if n in _SLOW_CORRUPT
            else ("corrupt", n) for n in STAGE_FILES]
           + [pytest.param("truncate", n, marks=pytest.mark.slow) for n in STAGE_FILES[:-1]]
           + [("truncate", STAGE_FILES[-1])])


@pytest.mark.parametrize(("damage", "name"), DAMAGED)
def test_a_damaged_stage_file_reruns_its_stage_and_the_later_ones(reference, tmp_path, caplog,
                                                                  name, damage):
    params, run_dir = _copy(reference, tmp_path)
    path = run_dir / "iter_1" / name
    text = path.read_text()
    if damage == "corrupt":  # one line of a JSONL (or the JSON object) no longer parses
        lines = text.splitlines(keepends=True) or [""]
        lines[len(lines) // 2] = '{"broken": \n'
        path.write_text("".join(lines))
    else:  # a write cut short (an empty curriculum: a first record cut short)
        path.write_text(text[: len(text) // 2] if text else '{"quest')
    caplog.set_level("INFO")
    result = run(params)
    stage = _stage_of(name)
    assert f"{path}" in caplog.text and "run again" in caplog.text
    later = STAGES[STAGES.index(stage):]
    for s in STAGES:
        skipped = f"iteration 1 {s}: done earlier, skipped" in caplog.text
        assert skipped == (s not in later), s
    assert _artifacts(run_dir) == _artifacts(reference)
    assert result.iterations[0] == json.loads((reference / "iter_1" / "metrics.json").read_text())


@pytest.mark.parametrize("role", [pytest.param("proposer", marks=pytest.mark.slow), "solver"])
def test_a_zero_byte_model_file_reruns_its_stage(reference, tmp_path, caplog, role):
    params, run_dir = _copy(reference, tmp_path)
    weights = run_dir / "iter_1" / f"{role}_model" / "model.safetensors"
    weights.write_bytes(b"")
    caplog.set_level("INFO")
    run(params)
    assert f"{weights} is empty" in caplog.text
    assert f"iteration 1 {role}: done earlier, skipped" not in caplog.text
    assert _artifacts(run_dir) == _artifacts(reference)


def test_a_truncated_manifest_is_a_clear_error_and_nothing_is_rewritten(reference, tmp_path):
    params, run_dir = _copy(reference, tmp_path)
    manifest = run_dir / "manifest.json"
    manifest.write_text(manifest.read_text()[:40])
    config_before = (run_dir / "config.yaml").read_bytes()
    with pytest.raises(ValueError, match=r"manifest\.json is not valid JSON"):
        run({**params, "vocab_dropout": {"alpha": 0.3}})
    with pytest.raises(ValueError, match=r"manifest\.json is not valid JSON"):
        run(params)
    assert (run_dir / "config.yaml").read_bytes() == config_before


# ----------------------------------------------------------------------------- config changes


def test_a_changed_config_is_refused_with_the_keys_and_nothing_is_rewritten(reference,
                                                                             tmp_path):
    params, run_dir = _copy(reference, tmp_path)
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()
              and p.name != ".lock"}
    changed = {**params, "vocab_dropout": {"alpha": 0.3},
               "scoring": {**params["scoring"], "num_solver_samples": 7}}
    with pytest.raises(RunConfigMismatch) as err:
        run(changed)
    assert "scoring.num_solver_samples: 2 -> 7" in str(err.value)
    assert "vocab_dropout.alpha: 0.75 -> 0.3" in str(err.value)
    after = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file() and p.name != ".lock"}
    assert after == before


def test_force_moves_the_old_run_aside_and_never_mixes(reference, tmp_path):
    params, run_dir = _copy(reference, tmp_path)
    changed = {**params, "vocab_dropout": {"alpha": 0.5}}
    result = run(changed, force=True)
    aside = [p for p in run_dir.parent.iterdir() if p.name.startswith("seed0.replaced-")]
    assert len(aside) == 1 and _artifacts(aside[0]) == _artifacts(reference)
    assert result.iterations[0]["alpha_train"] == 0.5
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["vocab_dropout"]["alpha"] == 0.5


def test_output_paths_are_not_part_of_the_fingerprint(reference, tmp_path, caplog):
    params, run_dir = _copy(reference, tmp_path)
    caplog.set_level("INFO")
    run({**params, "seeds": [0, 1, 2], "evaluation": {"limit": 3}})
    assert all(f"iteration 1 {s}: done earlier, skipped" in caplog.text for s in STAGES)


# ----------------------------------------------------------------------------- processes


def test_a_second_process_on_the_same_folder_is_refused(reference, tmp_path):
    params, run_dir = _copy(reference, tmp_path)
    with RunLock(run_dir):
        with pytest.raises(RunLockedError, match=f"pid {os.getpid()}"):
            run(params)


_KILLER = textwrap.dedent("""
    import os, signal, sys, yaml
    import vdlib.loop.coevolution as co
    import dataclasses
    stage_name, when = sys.argv[2], sys.argv[3]

    def wrap(stage):
        real = stage.run
        def run_stage(store, t, out):
            if stage.name == stage_name and when == "before":
                os.kill(os.getpid(), signal.SIGKILL)
            if stage.name == stage_name and when == "during":
                real_replace = os.replace
                def replace_then_die(*a, **k):  # the stage's first atomic write lands
                    real_replace(*a, **k)
                    os.kill(os.getpid(), signal.SIGKILL)
                os.replace = replace_then_die
            real(store, t, out)
            if stage.name == stage_name and when == "after":
                os.kill(os.getpid(), signal.SIGKILL)
        return dataclasses.replace(stage, run=run_stage)

    co.STAGE_TABLE = tuple(wrap(s) for s in co.STAGE_TABLE)
    co.run(yaml.safe_load(open(sys.argv[1])))
""")


@pytest.mark.slow
@pytest.mark.parametrize("when", ["before", "during", "after"])
@pytest.mark.parametrize("stage", STAGES)
def test_sigkill_at_a_stage_boundary_or_inside_a_stage_resumes_exactly(reference, tmp_path,
                                                                       stage, when):
    params = tiny_params(tmp_path)
    params_file = tmp_path / "params.yaml"
    params_file.write_text(yaml.safe_dump(params))
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    killed = subprocess.run([sys.executable, "-c", _KILLER, str(params_file), stage, when],
                            env=env, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    run_dir = tmp_path / "t" / "seed0"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    recorded = set(manifest.get("stages", {}))
    # the records hold exactly the stages that finished before the kill, never the killed one
    assert recorded == {f"1/{s}" for s in STAGES[:STAGES.index(stage)]}
    result = run(params)
    assert _artifacts(run_dir) == _artifacts(reference)
    assert result.iterations[0] == json.loads((reference / "iter_1" / "metrics.json").read_text())


# ----------------------------------------------------------------------------- hostile files


def _files(run_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*"))
            if p.is_file() and not p.is_symlink()}


def test_a_symlinked_lock_is_refused_and_its_target_left_untouched(reference, tmp_path,
                                                                    capsys):
    from vdlib.app.cli import main
    from vdlib.grid.status import collect_status

    params, run_dir = _copy(reference, tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("someone's file\n")
    (run_dir / LOCK_FILE).unlink(missing_ok=True)
    (run_dir / LOCK_FILE).symlink_to(victim)
    before = _files(run_dir)
    with pytest.raises(UnsafeLockError, match=r"\.lock is a symbolic link to .*victim\.txt"):
        run(params)
    params_file = tmp_path / "params.yaml"
    params_file.write_text(yaml.safe_dump(params))
    assert main(["run", str(params_file)]) == 2
    err = capsys.readouterr().err
    assert "is a symbolic link" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) <= 2  # the message (and the -v hint)
    collect_status(tmp_path)  # vdlib status reads the folder: it writes nothing either
    assert victim.read_text() == "someone's file\n"
    assert _files(run_dir) == before and (run_dir / LOCK_FILE).is_symlink()


@pytest.mark.parametrize("name", ["iter_1", "base_models"])
def test_a_symlinked_run_subfolder_is_refused_and_its_target_left_untouched(reference, tmp_path,
                                                                           name):
    params, run_dir = _copy(reference, tmp_path)
    elsewhere = tmp_path / "elsewhere"
    (run_dir / name).rename(elsewhere)  # what a stage would remove and rewrite lies elsewhere
    (run_dir / name).symlink_to(elsewhere)
    before = _files(elsewhere)
    for force in (False, True):
        with pytest.raises(UnsafeRunFolderError, match=f"{name} is a symbolic link"):
            run({**params, "vocab_dropout": {"alpha": 0.3}}, force=force)
    assert _files(elsewhere) == before


@pytest.mark.parametrize("name", ["curriculum.jsonl", "solver_model"])
def test_a_symlinked_stage_file_reruns_its_stage_and_its_target_is_untouched(
        reference, tmp_path, caplog, name):
    params, run_dir = _copy(reference, tmp_path)
    path = run_dir / "iter_1" / name
    elsewhere = tmp_path / f"elsewhere-{name}"
    path.rename(elsewhere)  # the same bytes, reached through a link
    path.symlink_to(elsewhere)
    kept = _files(elsewhere) if elsewhere.is_dir() else elsewhere.read_bytes()
    caplog.set_level("INFO")
    run(params)
    assert f"{path} is a symbolic link" in caplog.text
    stage = _stage_of(name)
    for s in STAGES:
        skipped = f"iteration 1 {s}: done earlier, skipped" in caplog.text
        assert skipped == (STAGES.index(s) < STAGES.index(stage)), s
    assert not path.is_symlink()
    assert (_files(elsewhere) if elsewhere.is_dir() else elsewhere.read_bytes()) == kept
    assert _artifacts(run_dir) == _artifacts(reference)


def test_a_deleted_config_yaml_refuses_another_config_and_resumes_its_own(reference, tmp_path,
                                                                          caplog):
    from vdlib.config.experiment import load_params
    from vdlib.config.layout import config_text

    params, run_dir = _copy(reference, tmp_path)
    (run_dir / "config.yaml").unlink()
    before = _files(run_dir)
    with pytest.raises(RunConfigMismatch) as err:
        run({**params, "vocab_dropout": {"alpha": 0.3}})
    assert "vocab_dropout.alpha: 0.75 -> 0.3" in str(err.value)
    assert _files(run_dir) == before  # nothing written, config.yaml still absent
    caplog.set_level("INFO")
    run(params)
    assert all(f"iteration 1 {s}: done earlier, skipped" in caplog.text for s in STAGES)
    assert "config.yaml is missing" in caplog.text
    assert (run_dir / "config.yaml").read_text() == config_text(load_params(params))
    # a folder from before the manifest held a fingerprint: its records alone prove nothing
    manifest = run_dir / "manifest.json"
    data = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({k: v for k, v in data.items()
                                    if not k.startswith("fingerprint")}))
    (run_dir / "config.yaml").unlink()
    with pytest.raises(RunConfigMismatch, match="the config that made them is unknown"):
        run(params)


def test_a_deleted_manifest_reruns_every_stage(reference, tmp_path, caplog):
    params, run_dir = _copy(reference, tmp_path)
    (run_dir / "manifest.json").unlink()
    with pytest.raises(RunConfigMismatch, match="vocab_dropout.alpha"):  # config.yaml guards
        run({**params, "vocab_dropout": {"alpha": 0.3}})
    caplog.set_level("INFO")
    run(params)
    assert "done earlier, skipped" not in caplog.text
    assert _artifacts(run_dir) == _artifacts(reference)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert set(manifest["stages"]) == {f"1/{s}" for s in STAGES} and manifest["fingerprint"]


@pytest.mark.parametrize("damage", ["flipped byte",
                                    pytest.param("truncated", marks=pytest.mark.slow)])
def test_damage_in_base_models_is_detected_and_the_base_rebuilt(reference, tmp_path, caplog,
                                                                damage):
    params, run_dir = _copy(reference, tmp_path)
    weights = run_dir / "base_models" / "proposer-tiny-random" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    if damage == "flipped byte":  # loads fine: before records, carried on silently
        data[len(data) // 2] ^= 0x01
    else:  # before records: a SafetensorError traceback on every resume
        data = data[: len(data) // 2]
    weights.write_bytes(bytes(data))
    rollouts = run_dir / "iter_1" / "proposer_rollouts.jsonl"  # the stage that reads the base
    rollouts.write_text(rollouts.read_text()[:20])
    caplog.set_level("INFO")
    run(params)
    assert f"the proposer's converted base tiny-random: {weights} changed" in caplog.text
    assert "building it again" in caplog.text
    assert _artifacts(run_dir) == _artifacts(reference)


def test_a_damaged_warm_start_cache_is_rebuilt(tmp_path, caplog):
    from vdlib.config.experiment import load_params
    from vdlib.loop.warm_start import warm_start_dir
    from vdlib.runs.run_state import FOLDER_RECORD, check_folder

    ws = load_params({"profile": "tiny", "warm_start": {"mode": "sft", "steps": 1,
                                                         "batch_size": 1}}).warm_start
    target = warm_start_dir("tiny-random", ws, cache_dir=tmp_path)
    assert (target / FOLDER_RECORD).is_file() and check_folder(target) is None
    first = _files(target)
    weights = target / "model.safetensors"
    caplog.set_level("WARNING")
    for damage in ("truncate", "no record"):
        if damage == "truncate":
            weights.write_bytes(weights.read_bytes()[:100])
        else:  # a cache built before records existed
            (target / FOLDER_RECORD).unlink()
        caplog.clear()
        assert warm_start_dir("tiny-random", ws, cache_dir=tmp_path) == target
        assert "format warm-start of tiny-random" in caplog.text, damage
        assert _files(target) == first, damage  # rebuilt, the same bytes (seeded, CPU)
