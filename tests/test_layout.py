"""Run paths: every name :mod:`vdlib.config.layout` formats parses back, and the modules that read
runs find what the loop writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vdlib.config import layout
from vdlib.config.experiment import load_params, save_params, to_dict
from vdlib.loop.arms import arm_params
from vdlib.runs.run_start import start_run
from vdlib.runs.run_state import config_fingerprint


@pytest.mark.parametrize("arm", ["baseline", "vd75", "train_only", "x-seed2", "a b"])
@pytest.mark.parametrize("seed", [0, 7, 123456])
def test_arm_run_id_round_trip(arm, seed):
    name = layout.arm_run_id(arm, seed)
    assert layout.parse_arm_run_id(name) == (arm, seed)
    path = layout.arm_run_path("/out", "exp", arm, seed)
    assert path == layout.experiment_dir("/out", "exp") / name
    assert layout.parse_arm_run_id(path.name) == (arm, seed)


@pytest.mark.parametrize("name", ["seed0", "vd75", "vd75-seed", "vd75-seedx", "-seed1",
                                  "vd75-seed1.replaced-20250101T000000Z", ""])
def test_other_names_are_not_arm_runs(name):
    assert layout.parse_arm_run_id(name) is None


@pytest.mark.parametrize("t", [0, 1, 9, 10, 250])
def test_iteration_round_trip(t, tmp_path):
    assert layout.iteration_of(layout.iteration_dir(tmp_path, t)) == t
    assert layout.iteration_of(str(layout.iteration_dir("run", t))) == t


@pytest.mark.parametrize("name", ["iter_", "iter_1a", "xiter_1", "iter_-1", "iter_1_old",
                                  "solver_iter3"])
def test_other_folders_are_not_iterations(name, tmp_path):
    assert layout.iteration_of(tmp_path / name) is None


def test_iteration_dirs_sorted_numerically_and_filtered(tmp_path):
    run = tmp_path / "run"
    for t in (10, 2, 1):
        layout.iteration_dir(run, t).mkdir(parents=True)
    (layout.iteration_dir(run, 10) / layout.METRICS_FILE).write_text("{}")
    (layout.iteration_dir(run, 1) / layout.METRICS_FILE).write_text("{}")
    (run / "iter_x").mkdir()
    (run / "iter_3").write_text("a file, not a folder")
    assert layout.iteration_dirs(run) == [(t, layout.iteration_dir(run, t)) for t in (1, 2, 10)]
    assert [t for t, _ in layout.iteration_dirs(run, layout.METRICS_FILE)] == [1, 10]
    assert layout.iteration_dirs(tmp_path / "missing") == []


def test_paths_inside_a_run(tmp_path):
    run = tmp_path / "r"
    assert layout.config_path(run) == run / "config.yaml"
    assert layout.manifest_path(run) == run / "manifest.json"
    assert layout.role_model_dir(run, 3, "solver") == run / "iter_3" / "solver_model"
    assert layout.policy_model_dir(run) == run / "policy_model"
    assert layout.evaluation_dir(run, "proposer", 2) == run / "eval" / "proposer_iter2"
    assert layout.evaluation_dir(run, "policy") == run / "eval" / "policy"
    assert layout.verification_path(run, 4) == run / "verification" / "iter_4_correctness.jsonl"
    assert layout.correctness_summary_path(run) == (run / "verification"
                                                    / "proposer_correctness.json")
    data = layout.transfer_dataset_path(run, 5)
    assert data == run / "transfer" / "iter_5" / "curriculum.jsonl"
    assert layout.dataset_summary_path(data) == data.parent / "curriculum.summary.json"
    assert layout.verified_curriculum_path(run) == run / "verified" / "curriculum.jsonl"
    assert layout.transfer_training_dir(run) == run / "transfer"
    assert layout.base_evaluation_dir(tmp_path, "x", "/models/Qwen/Q") == (
        tmp_path / "x" / "base_eval" / "models__Qwen__Q")
    assert layout.report_dir(tmp_path, "x", "01_main") == tmp_path / "x" / "reports" / "01_main"
    assert not (tmp_path / "x").exists()  # formatting creates nothing
    assert layout.seed_variant("v", 3) == "v-seed3" and layout.seed_variant(None, 3) == "seed3"


def test_arm_params_run_id_is_the_layout_name():
    params = arm_params({"seed": 4}, "vd85")
    assert params["run_id"] == layout.arm_run_id("vd85", 4)
    assert layout.run_path(load_params(params)).name == "vd85-seed4"


def test_config_text_is_what_save_params_writes(tmp_path):
    cfg = load_params({"experiment": "ünï", "output_dir": str(tmp_path), "seed": 3,
                       "arms": ["baseline"]})
    saved = save_params(cfg, tmp_path / "saved.yaml").read_text(encoding="utf-8")
    assert layout.config_text(cfg) == saved
    run = start_run(cfg)
    assert layout.config_path(run).read_text(encoding="utf-8") == saved
    assert load_params(str(layout.config_path(run))) == cfg


def test_start_run_keeps_the_start_time_and_other_manifest_entries(tmp_path):
    cfg = load_params({"output_dir": str(tmp_path), "seed": 1})
    run = start_run(cfg)
    first = json.loads(layout.manifest_path(run).read_text())
    assert list(first) == ["fingerprint", "fingerprinted_config", "experiment", "seed",
                           "started", "updated", "git_commit", "python", "platform", "versions"]
    assert first["fingerprint"] == config_fingerprint(to_dict(cfg))
    layout.manifest_path(run).write_text(json.dumps({**first, "started": "then",
                                                     "stages": {"1/propose": {}}}))
    again = json.loads(layout.manifest_path(start_run(cfg)).read_text())
    assert again["started"] == "then" and again["stages"] == {"1/propose": {}}
    assert list(again)[:len(first)] == list(first)


def test_readers_use_the_layout(tmp_path):
    from vdlib.metrics.run_metrics import arm_and_seed, previous_iteration_dirs, summary_metrics
    from vdlib.report.experiments import last_iteration, report_dir

    cfg = load_params({"output_dir": str(tmp_path), "experiment": "e"})
    made = report_dir(cfg, "nb")
    assert made == layout.report_dir(tmp_path, "e", "nb") and made.is_dir()
    run = layout.arm_run_path(tmp_path, "e", "vd75", 2)
    for t in (1, 2, 11):
        d = layout.iteration_dir(run, t)
        d.mkdir(parents=True)
        (d / layout.QUESTIONS_FILE).write_text("")
        (d / layout.METRICS_FILE).write_text(json.dumps({"vendi": float(t)}))
    layout.config_path(run).write_text("seed: 2\n")
    assert arm_and_seed(Path(run)) == ("vd75", 2)
    assert previous_iteration_dirs(layout.iteration_dir(run, 3), 3) == [
        layout.iteration_dir(run, 1), layout.iteration_dir(run, 2)]
    assert last_iteration({("vd75", 2): run}) == 11
    frame = summary_metrics(run)
    assert frame["iteration"].tolist() == [1, 2, 11] and set(frame["arm"]) == {"vd75"}
