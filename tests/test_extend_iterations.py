"""Extending a finished run (issue 29, item 11): raising ``iterations`` resumes the folder where
the finished iterations do not depend on it (a fixed alpha), and is refused, saying why, where
they do (an annealed alpha) or where the folder holds iterations beyond the new count."""

from __future__ import annotations

import json

import pytest
from test_coevolution import tiny_params

from vdlib.config import layout
from vdlib.config.experiment import load_params
from vdlib.loop.coevolution import run, stage_key
from vdlib.loop.stages import STAGES
from vdlib.runs.run_start import start_run
from vdlib.runs.run_state import RunConfigMismatch, claim_run, update_manifest

ANNEAL = {"vocab_dropout": {"schedule": "linear", "alpha": 0.75, "alpha_final": 1.0}}


def _folder(tmp_path, iterations: int, recorded: int, **over):
    """A run folder of ``iterations`` whose manifest records every stage of iterations
    1..``recorded`` (no files: claim_run reads only the records)."""
    cfg = load_params(tiny_params(tmp_path, iterations=iterations, **over))
    run_dir = start_run(cfg)
    update_manifest(layout.manifest_path(run_dir), stages={
        stage_key(t, s): {} for t in range(1, recorded + 1) for s in STAGES})
    return cfg


def _claim(tmp_path, iterations: int, **over):
    lock, run_dir = claim_run(load_params(tiny_params(tmp_path, iterations=iterations, **over)))
    lock.release()
    return run_dir


@pytest.mark.slow  # ~22 s on 2 cores: `make test-slow` (make test keeps within its budget)
def test_a_finished_run_with_a_fixed_alpha_is_extended_and_keeps_its_iterations(tmp_path):
    first = run(tiny_params(tmp_path, iterations=1))
    it1 = layout.iteration_dir(first.run_dir, 1)
    before = {p.relative_to(it1).as_posix(): p.read_bytes() for p in it1.rglob("*")
              if p.is_file() and p.name != "timing.json"}
    second = run(tiny_params(tmp_path, iterations=2))  # was refused: "iterations: 1 -> 2"
    assert second.run_dir == first.run_dir
    assert [m["iteration"] for m in second.iterations] == [1, 2]
    after = {p.relative_to(it1).as_posix(): p.read_bytes() for p in it1.rglob("*")
             if p.is_file() and p.name != "timing.json"}
    assert after == before  # iteration 1 was not run again
    assert load_params(layout.config_path(first.run_dir)).iterations == 2
    records = json.loads(layout.manifest_path(first.run_dir).read_text())["stages"]
    assert {stage_key(t, s) for t in (1, 2) for s in STAGES} <= set(records)
    from vdlib.grid.status import collect_status

    (status,) = collect_status(tmp_path)
    assert (status.state, status.stages_done, status.iterations) == ("done", 2 * len(STAGES), 2)


def test_an_annealed_alpha_refuses_an_extension_that_changes_finished_iterations(tmp_path):
    _folder(tmp_path, iterations=2, recorded=2, **ANNEAL)
    with pytest.raises(RunConfigMismatch) as e:
        _claim(tmp_path, 3, **ANNEAL)
    text = str(e.value)
    assert "iterations: 2 -> 3 (the linear alpha schedule changes the alpha of finished " \
           "iteration 2 (1 -> 0.875)" in text
    assert "alpha_final = alpha" in text and "--force" in text


def test_an_annealed_alpha_extends_a_run_that_finished_only_iteration_1(tmp_path):
    _folder(tmp_path, iterations=2, recorded=1, **ANNEAL)  # alpha of iteration 1: 0.75 in both
    assert _claim(tmp_path, 4, **ANNEAL).name == "seed0"


def test_alpha_final_equal_to_alpha_is_a_fixed_schedule(tmp_path):
    flat = {"vocab_dropout": {"schedule": "linear", "alpha": 0.75, "alpha_final": 0.75}}
    _folder(tmp_path, iterations=2, recorded=2, **flat)
    assert _claim(tmp_path, 5, **flat).name == "seed0"


def test_a_run_is_not_shortened_below_what_it_has_done(tmp_path):
    _folder(tmp_path, iterations=3, recorded=3)
    with pytest.raises(RunConfigMismatch, match="holds iteration 3 beyond the new 2"):
        _claim(tmp_path, 2)
    assert _claim(tmp_path, 4).name == "seed0"  # extending it is fine


def test_iterations_and_another_key_together_are_refused_as_before(tmp_path):
    _folder(tmp_path, iterations=1, recorded=1)
    with pytest.raises(RunConfigMismatch, match="iterations: 1 -> 2"):
        _claim(tmp_path, 2, seed=0, scoring={"num_solver_samples": 3, "max_new_tokens": 6})
