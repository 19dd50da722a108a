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

from vdlib.coevolution import STAGES, run
from vdlib.run_state import RunConfigMismatch, RunLock, RunLockedError
from vdlib.stages import STAGE_TABLE

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


@pytest.mark.parametrize("name", STAGE_FILES)
@pytest.mark.parametrize("damage", ["corrupt", "truncate"])
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


@pytest.mark.parametrize("role", ["proposer", "solver"])
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
    import vdlib.coevolution as co
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
