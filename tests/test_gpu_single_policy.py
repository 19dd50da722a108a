"""benchmarks/gpu_single_policy.py (issue 30's single-policy runs, one process per run) on the
tiny random model (CPU): run, evaluate, export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _driver():
    from _script_loader import load_script

    return load_script("benchmarks/gpu_single_policy.py")


@pytest.mark.slow  # ~20 s on 2 cores: `make test-slow` (make test keeps within its budget)
def test_one_run_is_trained_evaluated_and_exported(tmp_path):
    params = tmp_path / "sp.yaml"
    params.write_text(yaml.safe_dump({
        "profile": "tiny", "experiment": "sp", "seeds": [0, 1], "arms": ["baseline", "vd95"],
        "model": {"proposer": "tiny-random"}, "warm_start": {"mode": "none"},
        "solver": {"max_response_length": 8, "max_steps": 2},
        "single_policy": {"dataset": "gsm_symbolic", "train_examples": 8,
                          "checkpoint_every": 1},
        "evaluation": {"benchmarks": ["gsm_symbolic"], "runs": 2, "limit": 3,
                       "max_context": 256, "max_new_tokens": 6},
        "metrics": {"embedder": "none"}}))
    d = _driver()
    out = str(tmp_path / "out")
    common = [str(params), "--output-dir", out]
    assert d.main(["run", *common, "--arm", "vd95", "--seed", "1"]) == 0
    assert d.main(["eval", *common, "--arm", "vd95", "--seed", "1"]) == 0
    assert d.main(["eval", *common, "--arm", "baseline", "--seed", "0"]) == 0  # not trained
    assert d.main(["eval", *common, "--base"]) == 0
    assert d.main(["export", *common, "--out", str(tmp_path / "sp.json")]) == 0
    data = json.loads((tmp_path / "sp.json").read_text())
    assert data["experiment"] == "sp" and data["steps_planned"] == 2
    assert set(data["base_pass1"]) == {"gsm_symbolic"}
    runs = {(r["arm"], r["seed"]): r for r in data["runs"]}
    assert set(runs) == {("baseline", 0), ("baseline", 1), ("vd95", 0), ("vd95", 1)}
    done = runs[("vd95", 1)]
    assert done["finished"] and done["alpha_train"] == 0.95
    assert [s["step"] for s in done["steps"]] == [1, 2]
    assert all(s["entropy"] is not None for s in done["steps"])
    assert len(done["pass1"]["gsm_symbolic"]["accuracies"]) == 2
    assert not runs[("baseline", 0)]["finished"] and runs[("baseline", 0)]["pass1"] is None
    # the export is what `vdlib results` reads (vdlib.report.results_single_policy)
    from vdlib.app.cli import main as vdlib_main

    assert vdlib_main(["results", str(tmp_path / "sp.json"), "--out", str(tmp_path / "r")]) == 0
    assert (tmp_path / "r" / "sp_entropy_trajectory.png").is_file()
    with pytest.raises(SystemExit):  # a run the params do not have: the runs it has
        d.main(["run", *common, "--arm", "vd75", "--seed", "0"])
