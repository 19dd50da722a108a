"""The co-evolution loop: artifact tree, curriculum filter, determinism, resume after a kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from vdlib.arms import arm_names, arm_params
from vdlib.artifacts import read_jsonl
from vdlib.coevolution import STAGES, filter_curriculum, run
from vdlib.config import ConfigError, load_params

ROOT = Path(__file__).resolve().parent.parent


def tiny_params(out: Path, iterations: int = 1, **over) -> dict:
    """The loop on the random tiny model: seconds per iteration."""
    p = {"profile": "tiny", "experiment": "t", "output_dir": str(out), "iterations": iterations,
         "model": {"proposer": "tiny-random"}, "warm_start": {"mode": "none"},
         "proposer": {"max_response_length": 12}, "solver": {"max_response_length": 12},
         "scoring": {"num_solver_samples": 2, "max_new_tokens": 6},
         "curriculum": {"num_questions": 4, "batch_size": 2, "max_new_tokens": 12}}
    p.update(over)
    return p


def test_full_artifact_tree(tmp_path):
    result = run(tiny_params(tmp_path))
    it = result.run_dir / "iter_1"
    for name in ("proposer_rollouts.jsonl", "proposer_train.json", "generated.jsonl",
                 "questions.jsonl", "curriculum.jsonl", "solver_train.json", "metrics.json",
                 "timing.json", "proposer_model/config.json", "solver_model/config.json"):
        assert (it / name).exists(), name
    assert (result.run_dir / "config.yaml").exists() and (result.run_dir / "manifest.json").exists()
    assert set(json.loads((it / "timing.json").read_text())) == set(STAGES)
    m = result.iterations[0]
    assert m["generated"] == 4 and m["proposer_rollouts"] == 8 and m["proposer_masked"]
    assert 0.70 < m["kept_fraction"] < 0.80
    questions = read_jsonl(it / "questions.jsonl")
    seeds = {q["mask_seed"] for q in questions}
    assert len(seeds) == 2 and None not in seeds  # one gen-phase mask per batch of 2
    assert not list(it.glob(".*")), "temporary folders left behind"


def test_same_config_and_seed_give_the_same_artifacts(tmp_path):
    a = run(tiny_params(tmp_path / "a")).run_dir
    b = run(tiny_params(tmp_path / "b")).run_dir
    assert _artifacts(a) == _artifacts(b)
    c = run(tiny_params(tmp_path / "c", seed=1)).run_dir
    assert _artifacts(c)["iter_1/generated.jsonl"] != _artifacts(a)["iter_1/generated.jsonl"]


def test_baseline_arm_runs_without_a_mask(tmp_path):
    result = run(arm_params(tiny_params(tmp_path), "baseline"))
    assert result.run_dir.name == "baseline-seed0"
    m = result.iterations[0]
    assert not m["proposer_masked"] and m["kept_fraction"] == 1.0
    assert all(q["mask_seed"] is None
               for q in read_jsonl(result.run_dir / "iter_1" / "generated.jsonl"))


def test_filter_curriculum_window_and_target():
    qs = [{"valid": True, "question": "a", "answer": "1", "acc": 0.5, "majority": "2"},
          {"valid": True, "question": "b", "answer": "1", "acc": 0.3, "majority": "1"},
          {"valid": True, "question": "c", "answer": "1", "acc": 0.8, "majority": "1"},
          {"valid": True, "question": "d", "answer": "1", "acc": None, "majority": None},
          {"valid": False, "question": None, "answer": None, "acc": None}]
    kept = filter_curriculum(qs, 0.3, 0.7, "proposer")
    assert [k["question"] for k in kept] == ["a", "b"]
    assert [k["answer"] for k in kept] == ["1", "1"]
    assert [k["answer"] for k in filter_curriculum(qs, 0.3, 0.7, "majority")] == ["2", "1"]


@pytest.mark.parametrize("arm", arm_names())
@pytest.mark.parametrize("profile", ["tiny", "paper"])
def test_every_arm_validates(arm, profile):
    cfg = load_params(arm_params({"profile": profile}, arm))
    assert cfg.run_id == f"{arm}-seed0"


def test_unsupported_cov_scope_fails_before_loading(tmp_path):
    with pytest.raises(ConfigError, match="cov_scope"):
        run(tiny_params(tmp_path, proposer={"cov_scope": "mini_batch"}))


def _artifacts(run_dir: Path) -> dict[str, bytes]:
    """Every artifact except the files that hold paths or wall-clock times."""
    skip = {"manifest.json", "config.yaml", "timing.json"}
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*"))
            if p.is_file() and p.name not in skip}


def _launch(params_file: Path) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "vdlib", "run", str(params_file)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_resume_after_a_real_kill_equals_an_uninterrupted_run(tmp_path):
    ref_file, cut_file = tmp_path / "ref.yaml", tmp_path / "cut.yaml"
    ref_file.write_text(yaml.safe_dump(tiny_params(tmp_path / "ref", iterations=2)))
    cut_file.write_text(yaml.safe_dump(tiny_params(tmp_path / "cut", iterations=2)))
    ref = _launch(ref_file)
    assert ref.wait(timeout=600) == 0, ref.stdout.read()

    cut = _launch(cut_file)
    run_dir = tmp_path / "cut" / "t" / "seed0"
    marker = run_dir / "iter_2" / ".trl_proposer"  # iteration 2's proposer training started
    deadline = time.monotonic() + 600
    while not marker.exists() and cut.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert cut.poll() is None, "the run ended before it could be killed"
    cut.send_signal(signal.SIGKILL)
    cut.wait(timeout=60)
    assert cut.returncode == -signal.SIGKILL
    assert (run_dir / "iter_1" / "metrics.json").exists()
    assert not (run_dir / "iter_2" / "proposer_model").exists()  # the stage in progress was lost

    resumed = _launch(cut_file)
    out = resumed.communicate(timeout=600)[0]
    assert resumed.returncode == 0, out
    assert "iteration 1 proposer: done earlier, skipped" in out
    assert _artifacts(run_dir) == _artifacts(tmp_path / "ref" / "t" / "seed0")
