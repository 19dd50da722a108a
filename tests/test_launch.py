"""Grid launchers (vdlib.launch): GPU slots, a local launcher that isolates failures, submitit's
local executor standing in for SLURM, and re-submitted grids that skip finished runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from test_coevolution import tiny_params

from vdlib import layout
from vdlib.cli import main
from vdlib.config import load_params
from vdlib.launch import (
    LocalLauncher,
    format_plan,
    gpu_slots,
    plan_grid,
    slurm_launch,
    visible_gpus,
)


def _grid(tmp_path: Path, arms=("baseline", "vd75", "vd85", "train_only", "gen_only"),
          seeds=(0,)) -> dict:
    return tiny_params(tmp_path, arms=list(arms), seeds=list(seeds))


def test_visible_gpus_follow_cuda_visible_devices():
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "3,5, 7"}) == ["3", "5", "7"]
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == []
    assert gpu_slots(visible_gpus({"CUDA_VISIBLE_DEVICES": "3,5,7"}), 2) == [["3", "5"]]
    with pytest.raises(ValueError, match="only 1 GPU"):
        gpu_slots(["0"], 2)


# A stand-in for `vdlib run`: records its GPUs and the time it ran, fails for the vd75 run.
_FAKE_RUN = """
import json, os, sys, time
params = sys.argv[1]
start = time.time()
time.sleep(0.6)
with open(params + ".ran", "w") as f:
    json.dump({"gpus": os.environ.get("CUDA_VISIBLE_DEVICES"), "start": start,
               "port": os.environ.get("MASTER_PORT"),
               "end": time.time()}, f)
sys.exit(3 if "vd75" in params else 75 if "gen_only" in params else 0)
"""


def test_the_local_launcher_packs_runs_on_gpus_and_isolates_a_failure(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    cfg = load_params(_grid(tmp_path))
    runs = plan_grid(cfg)
    assert [r.name for r in runs] == ["baseline-seed0", "vd75-seed0", "vd85-seed0",
                                      "train_only-seed0", "gen_only-seed0"]
    slots = gpu_slots(visible_gpus(), cfg.launcher.gpus_per_run)
    assert slots == [["4"], ["6"]]
    launcher = LocalLauncher(slots, poll_s=0.05,
                             command=lambda params, gpus: [sys.executable, "-c", _FAKE_RUN,
                                                           str(params)])
    done = launcher.launch(runs)
    status = {r.name: r.status for r in done}
    assert status == {"baseline-seed0": "ran", "vd75-seed0": "failed", "vd85-seed0": "ran",
                      "train_only-seed0": "ran", "gen_only-seed0": "paused"}  # 75: --stop-after
    assert "exit status 3" in next(r.error for r in done if r.name == "vd75-seed0")
    ran = {r.name: json.loads(Path(str(layout.grid_params_path(
        cfg.output_dir, cfg.experiment, r.name)) + ".ran").read_text()) for r in done}
    assert {v["gpus"] for v in ran.values()} == {"4", "6"}
    # one rendezvous port per slot: runs side by side never share one
    assert {(v["gpus"], v["port"]) for v in ran.values()} == {("4", "29600"), ("6", "29601")}
    # never two runs on one GPU at once, and two GPUs busy at once at some point
    spans = sorted((v["start"], v["end"], v["gpus"]) for v in ran.values())
    for i, (_, e0, g0) in enumerate(spans):
        for s1, _, g1 in spans[i + 1:]:
            if s1 < e0:
                assert g0 != g1
    assert any(s1 < e0 for (_, e0, _), (s1, _, _) in zip(spans, spans[1:], strict=False))
    # each run's resolved params went to the grid folder: one run, not the grid again
    params = load_params(layout.grid_params_path(cfg.output_dir, cfg.experiment, "vd85-seed0"))
    assert params.arms == [] and params.run_id == "vd85-seed0"
    assert params.vocab_dropout.alpha == 0.85


def test_the_dry_run_plan_shows_states_gpus_and_waves(tmp_path, capsys):
    path = tmp_path / "grid.yaml"
    path.write_text(json.dumps(_grid(tmp_path, seeds=(0, 1))))
    assert main(["grid", str(path), "--dry-run", "--gpus", "0,1,2,3"]) == 0
    out = capsys.readouterr().out
    assert "| 6 | baseline-seed1 | new | 1 | 2 |" in out
    assert "10 runs: 10 to launch (0 resumed), 0 done; 4 in parallel" in out
    assert not (tmp_path / "t").exists()  # nothing launched or written
    runs = plan_grid(load_params(_grid(tmp_path)))
    runs[0].state = "done"
    assert "| 1 | baseline-seed0 | done (skipped) | - | - |" in format_plan(runs, [["0"]])


def test_slurm_parameters_come_from_the_launcher_section():
    pytest.importorskip("submitit")
    from vdlib.launch import slurm_parameters

    cfg = load_params({"profile": "tiny", "launcher": {"gpus_per_run": 2, "slurm": {
        "partition": "gpu", "time_min": 90, "mem_gb": 64, "extra": ["qos=high", "foo=bar"]}}})
    p = slurm_parameters(cfg, 3)
    assert p["partition"] == "gpu" and p["time"] == 90 and p["gpus_per_node"] == 2
    assert p["mem"] == "64GB" and p["qos"] == "high" and p["array_parallelism"] == 3
    assert p["additional_parameters"] == {"foo": "bar"}


def test_submitit_runs_a_grid_and_a_resubmitted_grid_skips_finished_runs(tmp_path):
    pytest.importorskip("submitit")
    cfg = load_params({**_grid(tmp_path, arms=("baseline", "vd75")),
                       "launcher": {"gpus_per_run": 0}})
    runs = slurm_launch(plan_grid(cfg), cfg, cluster="local")
    assert [(r.name, r.status) for r in runs] == [("baseline-seed0", "ran"),
                                                  ("vd75-seed0", "ran")], \
        [(r.name, r.error) for r in runs]
    for r in runs:
        metrics = json.loads((r.run_dir / "iter_1" / "metrics.json").read_text())
        assert metrics["alpha_gen"] == (1.0 if r.arm == "baseline" else 0.75)
    again = plan_grid(cfg)
    assert [r.state for r in again] == ["done", "done"]
    resubmitted = slurm_launch(again, cfg, cluster="local")
    assert [r.status for r in resubmitted] == ["skipped", "skipped"]
    # the local launcher skips them too, without starting a process
    local = LocalLauncher([None], command=lambda p, g: pytest.fail("started a finished run"))
    assert [r.status for r in local.launch(plan_grid(cfg))] == ["skipped", "skipped"]


def test_slot_ports_and_the_multi_gpu_command(monkeypatch):
    from vdlib.launch import _default_command, slot_port

    monkeypatch.delenv("VDLIB_GRID_PORT_BASE", raising=False)
    assert [slot_port(i) for i in range(3)] == [29600, 29601, 29602]
    monkeypatch.setenv("VDLIB_GRID_PORT_BASE", "31000")
    assert slot_port(2) == 31002
    argv = _default_command(Path("p.yaml"), ["0", "1"], 31002)
    assert argv[argv.index("--main_process_port") + 1] == "31002"
    assert "--main_process_port" not in _default_command(Path("p.yaml"), ["0"], 31002)
