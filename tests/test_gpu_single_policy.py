"""tools/lent-gpus/gpu_single_policy.py (issue 30's single-policy runs, one process per run) on the
tiny random model (CPU): run, evaluate, export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _driver():
    from _script_loader import load_script

    return load_script("tools/lent-gpus/gpu_single_policy.py")


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
    assert data["warm_start"]["mode"] == "none"  # the starting checkpoint, compared by merge
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


def _lane_export(finished_seed: int, *, base: bool = False, card: str = "NVIDIA H200") -> dict:
    """What one lane's export holds: every run of the params, its own seed's finished."""
    runs = []
    for arm in ("baseline", "vd95"):
        for seed in (0, 1, 2):
            done = seed == finished_seed
            runs.append({"arm": arm, "seed": seed, "finished": done, "alpha_train": None,
                         "mean_reward": 0.5 if done else None,
                         "steps": [{"step": s, "entropy": 0.6 - 0.005 * s, "reward": 0.1}
                                   for s in range(1, 101 if done else 1)],
                         "pass1": {"gsm8k": {"accuracies": [0.01 * (seed + 1)] * 3}}
                         if done else None})
    return {"experiment": "gpu_small_single_policy", "params": "p.yaml", "card": card,
            "vllm_version": "0.25.1", "steps_planned": 100,
            "batch": {"prompts": 8, "generations": 4, "max_response_length": 512},
            "dataset": "gsm_symbolic", "warm_start": {"mode": "sft", "examples": 64},
            "evaluation": {"benchmarks": ["gsm8k"], "runs": 3,
                                                      "temperature": 0.7},
            "base_pass1": {"gsm8k": {"accuracies": [0.02] * 3}} if base else None,
            "runs": runs}


def test_merge_takes_each_run_from_the_lane_that_finished_it():
    d = _driver()
    merged = d.merge({"sp0.json": _lane_export(0, base=True), "sp1.json": _lane_export(1),
                      "sp2.json": _lane_export(2, card="NVIDIA H100")},
                     "gpu_small_single_policy")
    assert [(r["arm"], r["seed"], r["source"]) for r in merged["runs"]] == [
        ("baseline", 0, "sp0.json"), ("baseline", 1, "sp1.json"), ("baseline", 2, "sp2.json"),
        ("vd95", 0, "sp0.json"), ("vd95", 1, "sp1.json"), ("vd95", 2, "sp2.json")]
    assert all(r["finished"] and len(r["steps"]) == 100 for r in merged["runs"])
    assert merged["runs"][2]["pass1"]["gsm8k"]["accuracies"] == [0.03] * 3
    assert merged["base_source"] == "sp0.json" and merged["base_pass1"] is not None
    assert merged["card"] == "NVIDIA H100 / NVIDIA H200"
    assert merged["parts"] == ["sp0.json", "sp1.json", "sp2.json"]
    from vdlib.report.results_single_policy import load_single_policy

    load_single_policy("merged", merged)  # what `vdlib results` reads


def test_merge_refuses_parts_that_disagree_or_overlap():
    d = _driver()
    other = _lane_export(1)
    other["steps_planned"] = 50
    with pytest.raises(ValueError, match="differ in 'steps_planned'"):
        d.merge({"a": _lane_export(0), "b": other})
    raw = _lane_export(1)  # a lane from the raw model (as stop 46's sp0): not the same question
    raw["warm_start"] = {"mode": "none", "examples": 64}
    with pytest.raises(ValueError, match="differ in 'warm_start'"):
        d.merge({"a": _lane_export(0), "b": raw})
    with pytest.raises(ValueError, match="baseline seed 0 finished in both a and b"):
        d.merge({"a": _lane_export(0), "b": _lane_export(0)})
    with pytest.raises(ValueError, match="different base evaluations in a, b"):
        b = _lane_export(1, base=True)
        b["base_pass1"]["gsm8k"]["accuracies"] = [0.5] * 3
        d.merge({"a": _lane_export(0, base=True), "b": b})
    with pytest.raises(ValueError, match="the params 'other'"):
        d.merge({"a": _lane_export(0)}, "other")
    # a run no lane finished: the part with the most logged steps
    partial = _lane_export(2)
    partial["runs"][0]["steps"] = [{"step": 1, "entropy": 0.6, "reward": 0.0}]
    merged = d.merge({"a": _lane_export(1), "b": partial})
    assert merged["runs"][0]["source"] == "b" and not merged["runs"][0]["finished"]


def test_merge_cli_names_the_problem(tmp_path, capsys):
    d = _driver()
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(_lane_export(0, base=True)))
    b.write_text(json.dumps(_lane_export(1)))
    params = str(ROOT / "params" / "gpu-small" / "single_policy.yaml")
    out = tmp_path / "m.json"
    assert d.main(["merge", params, "--parts", str(a), str(b), "--out", str(out)]) == 0
    assert sum(r["finished"] for r in json.loads(out.read_text())["runs"]) == 4
    with pytest.raises(SystemExit):
        d.main(["merge", params, "--parts", str(a), str(tmp_path / "none.json"), "--out",
                str(out)])
    assert "none.json" in capsys.readouterr().err
