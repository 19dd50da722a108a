"""``vdlib plan`` for every notebook a GPU user runs (issue 49): the paper params take 2 GPUs a
run without a flag, every params file of a real shape gets a time and GPU-hours, notebooks 03
and 04 get their GRPO and evaluation priced, a shape the table lacks is derived from its
neighbours and labelled an estimate, a CPU profile gets one line and no GPU table; and
``vdlib run`` / ``vdlib grid`` refuse a machine with fewer GPUs than ``launcher.gpus_per_run``
in one line, before any model loads (fake GPU counts)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from vdlib.app.cli import main as cli_main
from vdlib.app.plan import PlanError, make_plan
from vdlib.app.plan_derive import derive_entry, interpolate_stage
from vdlib.app.plan_table import load_table, resolve_shape
from vdlib.config import ConfigError
from vdlib.config.experiment import load_params
from vdlib.loop.gpu_count import check_gpus_per_run, gpu_shortfall

ROOT = Path(__file__).resolve().parent.parent
#: The folders whose every file of a real model shape must plan (issue 49, Done when).
GPU_FOLDERS = ("paper", "gpu", "gpu-small", "smollm2")


def _real_shape(cfg) -> bool:
    table = load_table()
    try:
        for name in (cfg.model.proposer, cfg.solver_model, cfg.model.transfer):
            resolve_shape(name, table)
    except PlanError:
        return False
    return cfg.engine.backend != "hf"


@pytest.mark.parametrize("path", sorted(p for f in GPU_FOLDERS
                                        for p in (ROOT / "params" / f).glob("*.yaml")),
                         ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_gpu_params_file_of_a_real_shape_plans_with_a_time_and_gpu_hours(path, capsys):
    params = str(path.relative_to(ROOT))
    cfg = load_params(path)
    if not _real_shape(cfg):  # params/smollm2/grid_4gpu.yaml: tiny-random on hf
        assert cli_main(["plan", params]) == 2
        assert capsys.readouterr().err.count("\n") == 1  # one line
        return
    assert cli_main(["plan", params]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    notebook = [line for line in out.splitlines() if line.startswith("| **notebook** |")]
    assert len(notebook) == 1, out
    wall, gpu_hours = notebook[0].split("|")[3:5]
    assert wall.strip("* ").split()[0].replace(".", "").isdigit()
    assert float(gpu_hours.strip("* ").replace(",", "")) > 0


def test_the_paper_params_take_two_gpus_a_run_without_a_flag():
    for params, shape in (("params/paper/main_table.yaml", "qwen3-4b"),
                          ("params/paper/main_table@8b.yaml", "qwen3-8b")):
        cfg = load_params(params)
        assert cfg.launcher.gpus_per_run == 2
        plan = make_plan(cfg, params=params)  # no gpus_per_run: the params'
        assert plan.gpus_per_run == 2 and plan.gpus == 2
        assert plan.entry == f"{shape}@h200/server-stage/2gpu" and not plan.estimate
        # GPU-hours count both GPUs of the run
        assert plan.gpu_hours(plan.iteration_s) == pytest.approx(2 * plan.iteration_s / 3600)
    assert load_params("params/paper/base.yaml").launcher.gpus_per_run == 2
    # the other profiles keep one GPU a run
    assert load_params("params/gpu/main_table.yaml").launcher.gpus_per_run == 1


def test_a_cpu_profile_gets_one_line_and_no_gpu_table(capsys):
    assert cli_main(["plan", "params/tiny/main_table.yaml"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # no memory table of a "reward engine" on a 140 GiB card
    assert captured.err.count("\n") == 1 and "model.device cpu" in captured.err
    with pytest.raises(PlanError, match="engine.backend hf") as e:
        make_plan(load_params({"profile": "gpu", "engine": {"backend": "hf"}}))
    assert getattr(e.value, "memory", None) is None


def test_single_policy_is_its_grpo_steps_and_evaluations():
    params = "params/gpu-small/single_policy.yaml"
    cfg = load_params(params)
    table = load_table()
    plan = make_plan(cfg, params=params, table=table)
    assert plan.kind == "single_policy" and [s.name for s in plan.stages] == ["policy"]
    fig = next(e for e in table["entries"] if e["id"] == plan.entry)["stages"]["solver"]
    rollouts = cfg.solver.global_batch_size * cfg.solver.num_generations
    tokens = rollouts * min(plan.lengths.solver_rollout, cfg.solver.max_response_length)
    want = fig["startup_s"] + cfg.solver.max_steps * fig["step_s"] * tokens / fig["step_tokens"]
    assert plan.stages[0].seconds == pytest.approx(want, abs=0.1)
    # each trained policy evaluated single_eval_runs times on gsm8k + math500
    assert plan.work.eval_items == (1319 + 500) * cfg.evaluation.single_eval_runs
    assert plan.work.runs == 6 and plan.run_s == pytest.approx(
        plan.stages[0].seconds + plan.evaluation.seconds, abs=0.2)


def test_transfer_steps_are_bounded_by_k_epochs_and_max_steps():
    cfg = load_params("params/paper/curriculum_transfer.yaml")
    plan = make_plan(cfg, params="params/paper/curriculum_transfer.yaml")
    g = cfg.transfer
    assert plan.kind == "curriculum_transfer" and plan.shape.name == "qwen3-4b"  # model.transfer
    assert plan.work.solver_steps == min(g.max_steps, math.ceil(
        cfg.curriculum.num_questions * g.epochs / g.global_batch_size))
    assert plan.work.solver_rollouts == g.global_batch_size * g.num_generations
    assert any("at most" in n for n in plan.notes)
    assert any("verification" in n and "not priced" in n for n in plan.notes)


def test_a_shape_the_table_lacks_is_derived_between_its_neighbours_and_labelled(capsys):
    table = load_table()
    shape = resolve_shape("Qwen/Qwen3-0.6B-Base", table)
    assert not [e for e in table["entries"] if e["shape"] == shape.name]
    entry = derive_entry(table, shape, "h200", backend="vllm", lifetime="run", gpus_per_run=1)
    assert "derived, not measured" in entry["stages"]["solver"]["source"]
    # the solver's seconds per token lies between its measured neighbours'
    per = {e["shape"]: e["stages"]["solver"]["step_s"] / e["stages"]["solver"]["step_tokens"]
           for e in table["entries"] if e["card"] == "h200" and e["id"] in
           ("smollm2-135m@h200/vllm-run/x1", "qwen3-4b@h200/server-stage/2gpu")}
    mine = entry["stages"]["solver"]["step_s"] / entry["stages"]["solver"]["step_tokens"]
    assert min(per.values()) < mine < max(per.values())
    # the shape's own vLLM throughput (measured outside the loop) replaces derived rates
    assert entry["stages"]["score"]["tokens_per_s"] == 23417.8
    assert cli_main(["plan", "params/gpu/main_table.yaml"]) == 0
    out = capsys.readouterr().out
    assert "`qwen3-0.6b@h200/derived`: **estimate**" in out


def test_interpolation_is_log_log_in_parameters_and_per_generating_gpu():
    small = {"shape": "a", "backend": "vllm", "gpus_per_run": 1,
             "stages": {"score": {"tokens_per_s": 4000.0, "startup_s": 0.0}}}
    big = {"shape": "b", "backend": "server", "gpus_per_run": 2,  # 2 servers: 1,000 a GPU
           "stages": {"score": {"tokens_per_s": 2000.0, "startup_s": 100.0}}}
    fig = interpolate_stage("score", (1e8, small), (1e10, big), 1e9, gpus=1)
    assert fig["tokens_per_s"] == pytest.approx(2000.0)  # sqrt(4000 x 1000)
    assert fig["startup_s"] == pytest.approx(50.0)  # a 0 s start-up: linear in log-params
    assert interpolate_stage("score", (1e8, small), (1e10, big), 1e9, gpus=2)[
        "tokens_per_s"] == pytest.approx(4000.0)


def test_a_shape_beyond_every_measured_one_is_not_extrapolated():
    # on H100s only SmolLM2 is measured: Qwen3-4B is 30x larger, so nothing is derived
    with pytest.raises(PlanError, match="no figures for shape qwen3-4b on h100"):
        make_plan(load_params("params/paper/main_table.yaml"), card="h100")


def test_cross_scale_prices_each_stage_at_its_roles_shape():
    cfg = load_params("params/paper/cross_scale.yaml")
    plan = make_plan(cfg, params="params/paper/cross_scale.yaml")
    by = {s.name: s.entry for s in plan.stages}
    proposer = resolve_shape(cfg.model.proposer, load_table()).name
    solver = resolve_shape(cfg.solver_model, load_table()).name
    assert proposer != solver
    assert by["proposer"].startswith(proposer) and by["generate"].startswith(proposer)
    assert by["score"].startswith(solver) and by["solver"].startswith(solver)
    assert "cross-scale" in plan.estimate


# ----------------------------------------------------------------------------- GPUs a run


def test_gpu_shortfall_names_the_key_for_every_way_a_run_lacks_its_gpus():
    one = gpu_shortfall(2, visible=1, world=1, servers=0, machine=1)
    assert one.startswith("launcher.gpus_per_run = 2: a run of these params takes 2 GPUs, "
                          "but this machine shows 1") and "\n" not in one
    # two GPUs in one process: say how to launch it (accelerate, vdlib grid)
    assert "accelerate launch --num_processes 2" in gpu_shortfall(2, visible=2, world=1,
                                                                   servers=0, machine=2)
    assert gpu_shortfall(2, visible=2, world=2, servers=0, machine=2) is None  # accelerate
    assert "its 2 processes see 1" in gpu_shortfall(2, visible=1, world=2, servers=0,
                                                    machine=1)
    # the one-process topology: the trainer sees GPU 0, servers on GPUs 0 and 1
    assert gpu_shortfall(2, visible=1, world=1, servers=2, machine=2) is None
    assert "engine.server_gpus" in gpu_shortfall(2, visible=1, world=1, servers=2, machine=1)
    assert gpu_shortfall(1, visible=0, world=1, servers=0, machine=0) is None


def test_vdlib_run_refuses_a_machine_with_fewer_gpus_before_any_model_loads(monkeypatch):
    import vdlib.engines.models
    from vdlib.loop import coevolution

    def no_model(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(vdlib.engines.models, "load_model", no_model)
    monkeypatch.setattr(coevolution, "Loop", no_model)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # a fake count: one GPU visible
    monkeypatch.setattr("vdlib.loop.gpu_count.machine_gpu_count", lambda: 1)
    cfg = load_params("params/paper/main_table.yaml")
    with pytest.raises(ConfigError, match=r"^launcher\.gpus_per_run = 2: .* shows 1"):
        coevolution.run(cfg)
    with pytest.raises(ConfigError, match="launcher.gpus_per_run = 2"):
        check_gpus_per_run(cfg, visible=0, world=1, machine=0)
    check_gpus_per_run(cfg, visible=2, world=2)  # under accelerate on two: fine
    # a CPU run takes no GPU, whatever the launcher says
    check_gpus_per_run(load_params({"model": {"device": "cpu"}}), visible=0, world=1)


def test_vdlib_grid_refuses_a_machine_without_the_gpus_in_one_line(tmp_path, capsys):
    from vdlib.grid.launch import gpu_slots

    with pytest.raises(ValueError, match="launcher.gpus_per_run = 2 but no GPU is visible"):
        gpu_slots([], 2)
    with pytest.raises(ValueError, match=r"launcher.gpus_per_run = 2 but only 1 GPU"):
        gpu_slots(["0"], 2)
    assert gpu_slots([], 1) == [None]  # one GPU a run on a CPU machine: CPU runs, as before
    rc = cli_main(["grid", "params/paper/main_table.yaml", "--gpus", "0", "--dry-run",
                   "--output-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and "launcher.gpus_per_run = 2" in err and err.count("\n") == 1


def test_the_notebooks_run_grid_launches_runs_of_several_gpus_as_vdlib_grid_does(
        tmp_path, monkeypatch):
    import vdlib.grid.launch
    from vdlib.experiments.grids import run_grid

    calls = []

    def fake_launch(cfg, seeds, *, kind):
        calls.append((cfg.launcher.gpus_per_run, kind))
        return []

    def no_run(*args, **kwargs):
        raise AssertionError("ran in this process")

    monkeypatch.setattr(vdlib.grid.launch, "launch_grid", fake_launch)
    monkeypatch.setattr("vdlib.loop.coevolution.run", no_run)
    cfg = load_params("params/paper/main_table.yaml", {"output_dir": str(tmp_path)})
    assert run_grid(cfg) == {} and calls == [(2, "local")]
    # one GPU a run (or a runner of its own, notebooks 03 and 04) stays in this process
    one = load_params("params/paper/main_table.yaml",
                      {"output_dir": str(tmp_path), "launcher": {"gpus_per_run": 1}})
    with pytest.raises(AssertionError, match="ran in this process"):
        run_grid(one)
    assert run_grid(cfg, runner=lambda c: tmp_path) and calls == [(2, "local")]

