"""``vdlib plan``: the projection's arithmetic on a fixture table, the fit warning, the clear
failures, every params file planned without a model, the committed table derived from the
committed results, and the gpu-small projection against the measured run-iterations."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from vdlib.app.cli import main as cli_main
from vdlib.app.plan import (
    MissingFigures,
    PlanError,
    assumed_lengths,
    make_plan,
    memory_plan,
    stage_seconds,
    work_from_config,
)
from vdlib.app.plan_table import DEFAULT_TABLE, load_table, resolve_shape
from vdlib.config.experiment import load_params
from vdlib.utils.archive import session_member

ROOT = Path(__file__).resolve().parent.parent
GPU_SMALL = "params/gpu-small/main_table.yaml"


# ----------------------------------------------------------------------------- fixture table


def fixture_table(card_gib: float = 80.0, stages: dict | None = None) -> dict:
    """One shape ``toy`` (model name org/toy-model) with one entry on ``h100``."""
    figures = {
        "proposer": {"step_s": 10.0, "step_tokens": 1000, "startup_s": 5.0},
        "generate": {"tokens_per_s": 100.0, "startup_s": 1.0},
        "score": {"tokens_per_s": 1000.0, "startup_s": 2.0},
        "solver": {"step_s": 4.0, "step_tokens": 400, "startup_s": 3.0},
        "metrics": {"s_per_question": 0.01},
        "evaluate": {"tokens_per_s": 500.0, "startup_s": 6.0},
    }
    return {
        "cards": {"h100": {"memory_gib": card_gib}, "h200": {"memory_gib": 140.0}},
        "shapes": {"toy": dict(names=["org/toy-model"], hidden=64, layers=2, heads=4,
                               kv_heads=2, head_dim=16, intermediate=128, vocab=1000,
                               tied=True)},
        "entries": [{
            "id": "toy@h100/vllm-run/x1", "shape": "toy", "card": "h100", "backend": "vllm",
            "lifetime": "run", "enforce_eager": True, "gpus_per_run": 1, "runs_per_gpu": 1,
            "measured_at": {"num_solver_samples": 10},
            "lengths": {"question": 20.0, "proposer_rollout": 10.0, "answer": 30.0,
                        "solver_rollout": 25.0, "valid_fraction": 0.5,
                        "reward_answers_per_rollout": 4.0},
            "stages": figures if stages is None else stages}],
        "partial": [{"id": "toy@h200/transformers", "shape": "toy", "card": "h200",
                     "backend": "hf", "partial": True,
                     "figures": [{"what": "a GRPO step", "value": 1.5, "unit": "s",
                                  "source": "x"}]}],
    }


def fixture_config(**over):
    params = {
        "experiment": "toy", "profile": "gpu", "seeds": [0, 1], "iterations": 2,
        "arms": ["baseline", "vd75"],
        "model": {"proposer": "org/toy-model", "solver": None, "device": "cuda"},
        "proposer": {"max_steps": 2, "global_batch_size": 4, "rollout_batch_size": 4,
                     "num_generations": 2, "max_response_length": 64},
        "solver": {"max_steps": 2, "global_batch_size": 4, "rollout_batch_size": 4,
                   "num_generations": 2, "max_response_length": 64},
        "scoring": {"num_solver_samples": 5, "max_new_tokens": 64},
        "curriculum": {"num_questions": 100, "batch_size": 10, "max_new_tokens": 64},
        "evaluation": {"benchmarks": ["gsm8k"], "runs": 3, "limit": 10, "max_new_tokens": 64},
        "metrics": {"embedder": "minilm", "extra": []},
        "engine": {"backend": "vllm", "lifetime": "run", "kv_cache_gb": 2.0,
                   "rollout_kv_cache_gb": 1.0},
    }
    for key, value in over.items():
        params[key] = {**params[key], **value} if isinstance(value, dict) else value
    return load_params(params)


def test_every_stage_is_start_up_plus_work_at_the_measured_rates():
    # hand-computed: lengths q 20, rollout 10, answer 30, solver rollout 25, valid 0.5,
    # reward answers 4 per rollout at M = 10, so 2 at the params' M = 5
    plan = make_plan(fixture_config(), card="h100", gpus=2, table=fixture_table())
    got = {s.name: s.seconds for s in plan.stages}
    assert got == {
        "proposer": 5 + 2 * 10 * (8 * 10 + 8 * 2 * 30) / 1000,  # 16.2: 2 steps of 560 tokens
        "generate": 1 + 100 * 20 / 100,  # 21.0
        "score": 2 + 100 * 0.5 * 5 * 30 / 1000,  # 9.5
        "curriculum": 0.0,
        "solver": 3 + 2 * 4 * (8 * 25) / 400,  # 7.0
        "metrics": 100 * 0.01,  # 1.0
    }
    assert plan.iteration_s == pytest.approx(54.7)
    # two seeds pool as first_run: each final solver evaluated once; the base model 3 times
    assert plan.evaluation.seconds == pytest.approx(6 + 10 * 30 / 500)
    assert plan.base_evaluation.seconds == pytest.approx(6 + 3 * 10 * 30 / 500)
    assert plan.run_s == pytest.approx(2 * 54.7 + 6.6)
    # 2 arms x 2 seeds = 4 runs, 2 at once on 2 GPUs: 2 waves, then the base evaluation
    assert (plan.work.runs, plan.parallel, plan.waves) == (4, 2, 2)
    assert plan.notebook_wall_s == pytest.approx(2 * plan.run_s + 7.8)
    assert plan.notebook_gpu_hours == pytest.approx((4 * plan.run_s + 7.8) / 3600)


def test_a_grpo_step_scales_with_its_generated_tokens():
    cfg = fixture_config()
    w = work_from_config(cfg)
    n = assumed_lengths(fixture_table()["entries"][0]["lengths"], w, measured_answers=10)
    fig = {"step_s": 10.0, "step_tokens": 560, "startup_s": 0.0}
    one, tokens = stage_seconds("proposer", w, n, fig)
    assert (one, tokens) == (20.0, 2 * 560.0)  # the measured step's tokens: 10 s a step
    bigger = work_from_config(fixture_config(proposer={"global_batch_size": 8,
                                                       "rollout_batch_size": 8}))
    assert stage_seconds("proposer", bigger, n, fig)[0] == pytest.approx(2 * one)
    # a measured entry without the reward's answers prices them at their own rate
    split = {"step_s": 10.0, "step_tokens": 80, "startup_s": 0.0, "reward_tokens_per_s": 480}
    assert stage_seconds("proposer", w, n, split)[0] == pytest.approx(2 * (10 + 1))


def test_lengths_are_capped_at_the_params_limits_or_all_at_the_limit():
    w = work_from_config(fixture_config(scoring={"max_new_tokens": 16}))
    measured = fixture_table()["entries"][0]["lengths"]
    n = assumed_lengths(measured, w, measured_answers=10)
    assert (n.answer, n.question, n.reward_answers) == (16, 20, 2.0)
    worst = assumed_lengths(measured, w, "max")
    assert (worst.answer, worst.question, worst.valid_fraction, worst.reward_answers) == \
        (16, 64, 1.0, 5.0)
    with pytest.raises(PlanError, match="allowed: measured, max"):
        assumed_lengths(measured, w, "typical")


def test_a_stage_that_does_not_fit_the_card_is_warned_about(capsys):
    small = make_plan(fixture_config(), card="h100", table=fixture_table(card_gib=2.0))
    assert not all(m.fits for m in small.memory)
    assert any("does not fit the H100's 2 GiB" in w for w in small.warnings)
    roomy = make_plan(fixture_config(), card="h100", table=fixture_table())
    assert all(m.fits for m in roomy.memory) and not roomy.warnings
    # three runs sharing the GPU triple its memory
    shared = make_plan(fixture_config(), card="h100", runs_per_gpu=3, table=fixture_table())
    assert shared.memory[0].total_gib == pytest.approx(3 * roomy.memory[0].total_gib)


def test_memory_estimate_of_the_paper_shapes_matches_the_scaling_notes():
    """docs/SCALING.md: 16 bytes a parameter in mixed precision, 64.4 GB (4B) / 131.1 GB (8B);
    the 8B policy alone does not fit one H200."""
    table = load_table()
    cfg = load_params("params/paper/main_table@8b.yaml")
    for name, gb in (("Qwen/Qwen3-4B-Base", 64.4), ("Qwen/Qwen3-8B-Base", 131.1)):
        shape = resolve_shape(name, table)
        rows = memory_plan(shape, work_from_config(cfg), cfg.engine, 140.4, backend="vllm",
                           lifetime="run")
        state = dict(rows[0].parts)["policy, grads, AdamW (fp32)"]
        assert state * 2**30 / 1e9 == pytest.approx(gb, abs=0.1)
    assert not rows[0].fits
    # optimizer_offload (what the 8B params set): 6 bytes a parameter on the GPU, and it fits
    assert cfg.proposer.optimizer_offload and cfg.solver.optimizer_offload
    offloaded = memory_plan(shape, work_from_config(cfg), cfg.engine, 140.4, backend="vllm",
                            lifetime="run", offload=True)
    state = dict(offloaded[0].parts)["policy (bf16), fp32 gradient sums; AdamW offloaded"]
    assert state * 2**30 / 1e9 == pytest.approx(131.1 * 6 / 16, abs=0.1)
    assert offloaded[0].fits


def test_shapes_count_their_parameters():
    table = load_table()
    assert resolve_shape("Qwen/Qwen3-4B-Base", table).params() == 4_022_468_096  # measured
    assert resolve_shape("smollm2-135m", table).params() == 134_515_008
    assert resolve_shape("Qwen/Qwen3-8B-Base", table).kv_bytes_per_token() == 144 * 1024


def test_a_local_checkpoint_resolves_by_its_config(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(
        {"hidden_size": 2560, "num_hidden_layers": 36, "num_attention_heads": 32,
         "num_key_value_heads": 8, "intermediate_size": 9728, "vocab_size": 151936}))
    assert resolve_shape(str(tmp_path), load_table()).name == "qwen3-4b"


# ----------------------------------------------------------------------------- clear failures


def test_a_shape_without_figures_names_what_exists_and_the_measure_command():
    with pytest.raises(MissingFigures) as e:
        make_plan(fixture_config(), params="p.yaml", card="h200", table=fixture_table())
    text = str(e.value)
    assert "no figures for shape toy on h200 with engine backend vllm" in text
    assert "toy@h200/transformers (partial: a GRPO step: 1.5 s)" in text
    assert "vdlib plan p.yaml --measure" in text and "--card h200" in text
    assert e.value.memory  # the estimate needs only the shape


def test_a_stage_missing_from_every_entry_is_named():
    stages = {k: v for k, v in fixture_table()["entries"][0]["stages"].items() if k != "score"}
    with pytest.raises(MissingFigures, match=r"no score figures for shape toy on h100"):
        make_plan(fixture_config(), card="h100", table=fixture_table(stages=stages))


def test_an_unknown_model_or_card_fails_clearly():
    with pytest.raises(MissingFigures, match="the cost table has no shape for it"):
        make_plan(fixture_config(model={"proposer": "org/other"}), table=fixture_table())
    with pytest.raises(MissingFigures, match="card 'a100': the cost table knows h100, h200"):
        make_plan(fixture_config(), card="a100", table=fixture_table())


def test_the_paper_shapes_say_which_two_gpu_measure_run_adds_them():
    # on H100s no entry of any shape brackets them: the measured error stands, naming the
    # 2-GPU command (the paper params take 2 GPUs a run without a flag)
    for params, shape in (("params/paper/main_table.yaml", "qwen3-4b"),
                          ("params/paper/main_table@8b.yaml", "qwen3-8b")):
        with pytest.raises(MissingFigures) as e:
            make_plan(load_params(params), params=params, card="h100")
        text = str(e.value)
        assert f"no figures for shape {shape} on h100" in text
        assert (f"CUDA_VISIBLE_DEVICES=0 vdlib plan {params} --measure --dummy-weights "
                "--tokenizer TOKENIZER_DIR --bench-dir ../shared/benchmarks --gpus-per-run 2 "
                f"--card h100 --out benchmarks/results/cost_entries/{shape}_h100_2gpu.json"
                ) in text
    with pytest.raises(MissingFigures) as e:
        make_plan(load_params("params/paper/main_table.yaml"), card="h100")
    assert "qwen3-4b@h200/transformers (partial: proposer GRPO step" in str(e.value)


def test_every_params_file_plans_or_fails_clearly_without_loading_a_model(monkeypatch):
    import vdlib.engines.models

    def no_model(*args, **kwargs):
        raise AssertionError("vdlib plan loaded a model")

    monkeypatch.setattr(vdlib.engines.models, "load_model", no_model)
    planned, failed = [], []
    for path in sorted((ROOT / "params").glob("*/*.yaml")):
        params = str(path.relative_to(ROOT))
        cfg = load_params(path)
        try:
            plan = make_plan(cfg, params=params, card="h100" if "topology" in params else "h200")
        except PlanError as e:
            failed.append(params)
            assert "model.device cpu" in str(e) or "engine.backend hf" in str(e), \
                f"{params}: {e}"
            assert getattr(e, "memory", None) is None, params  # never a GPU table for them
        else:
            planned.append(params)
            assert plan.iteration_s > 0 and plan.notebook_wall_s > plan.run_s
    assert {GPU_SMALL, "params/gpu-small/fail_neg.yaml", "params/smollm2/loop_vllm.yaml",
            "params/smollm2/topology_2gpu.yaml", "params/paper/main_table.yaml",
            "params/paper/main_table@8b.yaml", "params/gpu/main_table.yaml",
            "params/paper/single_policy.yaml", "params/gpu/curriculum_transfer.yaml"
            } <= set(planned)
    assert {"params/tiny/quickstart.yaml", "params/smollm2/grid_4gpu.yaml"} <= set(failed)


def test_the_command_imports_no_transformers_or_vllm():
    code = ("import sys; from vdlib.app.cli import main; "
            "rc = [main(['plan', p]) for p in ('params/gpu-small/main_table.yaml', "
            "'params/paper/main_table.yaml')]; "
            "assert rc == [0, 0], rc; "
            "bad = [m for m in ('transformers', 'vllm', 'trl') if m in sys.modules]; "
            "assert not bad, bad")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "## One iteration" in out.stdout
    assert "`qwen3-4b@h200/server-stage/2gpu`" in out.stdout


def test_cli_prints_the_plan_and_fails_with_status_2(capsys):
    assert cli_main(["plan", GPU_SMALL, "--card", "h100", "--gpus", "1",
                     "--runs-per-gpu", "3"]) == 0
    out = capsys.readouterr().out
    assert "| **notebook** | 3 arms x 3 seeds = 9 runs, 3 at once (3 waves) on 1 GPU |" in out
    assert "smollm2-135m@h100/vllm-stage/x3" in out
    # 8B, one H100 a run: no figures (status 2), and the estimate says it does not fit
    assert cli_main(["plan", "params/paper/main_table@8b.yaml", "--card", "h100"]) == 2
    captured = capsys.readouterr()
    assert "| proposer (GPU 0) |" in captured.out and "**no**" in captured.out  # the estimate
    assert "vdlib plan: params/paper/main_table@8b.yaml: no figures" in captured.err
    assert cli_main(["plan", "params/tiny/quickstart.yaml", "--table", "/nonexistent.json"]) == 2
    assert "no cost table there" in capsys.readouterr().err


def test_measure_needs_a_gpu(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    assert cli_main(["plan", GPU_SMALL, "--measure", "--out", str(tmp_path / "e.json")]) == 2
    assert "--measure needs a GPU (CUDA); this machine has none" in capsys.readouterr().err


def test_time_calls_counts_seconds_and_calls_also_when_the_call_raises():
    from collections import defaultdict

    from vdlib.app.plan_measure import time_calls

    seen: dict[str, float] = defaultdict(float)

    class Stage:
        def run(self, fail: bool) -> str:
            if fail:
                raise RuntimeError("out of memory")
            return "done"

    time_calls(Stage, "run", lambda k, v: seen.__setitem__(k, seen[k] + v), "run_s", "runs")
    assert Stage().run(False) == "done"
    with pytest.raises(RuntimeError, match="out of memory"):
        Stage().run(True)
    assert seen["runs"] == 2 and seen["run_s"] >= 0.0


def test_measure_goes_on_from_its_own_partial_entry_only(tmp_path):
    from vdlib.app.plan_measure import _prior_entry
    from vdlib.app.plan_meter import Meter

    meter = Meter()
    meter.stage = "proposer"
    meter.add("tokens", 1000.0)
    meter.peak["proposer"][1] = 70.5
    work = tmp_path / "work"
    out = tmp_path / "entry.json"
    entry = {"params": "p.yaml", "partial": "stopped in score", "error": None,
             "raw": {"work": str(work.resolve()), **meter.dump()}}
    out.write_text(json.dumps(entry))
    prior = _prior_entry(out, "p.yaml", work)
    assert prior is not None
    again = Meter()
    again.load(prior["raw"])
    assert again.c["proposer"]["tokens"] == 1000.0 and again.peak["proposer"] == {1: 70.5}
    # another params file, another work folder, a finished entry: a new measurement
    assert _prior_entry(out, "q.yaml", work) is None
    assert _prior_entry(out, "p.yaml", tmp_path / "other") is None
    out.write_text(json.dumps({**entry, "partial": None}))
    assert _prior_entry(out, "p.yaml", work) is None
    # a failed one goes on too (the stages before the failure finished; the loop resumes
    # them), and the stage that failed starts from clean counters
    out.write_text(json.dumps({**entry, "partial": None, "error": "proposer: OutOfMemoryError"}))
    prior = _prior_entry(out, "p.yaml", work)
    assert prior is not None
    again = Meter()
    again.load(prior["raw"])
    again.forget(prior["error"].split(":", 1)[0])
    assert "proposer" not in again.c and "proposer" not in again.peak
    out.write_text("{not json")
    assert _prior_entry(out, "p.yaml", work) is None
    assert _prior_entry(tmp_path / "missing.json", "p.yaml", work) is None


def test_dummy_weight_stages_hand_real_problems_on_before_the_records(tmp_path, monkeypatch):
    from vdlib.app.plan_measure import _real_work_table
    from vdlib.loop import stages
    from vdlib.utils.artifacts import read_jsonl, write_jsonl

    def dummy_generate(store, t, out):  # what a random-init model writes: nothing parses
        write_jsonl(out / "generated.jsonl", [{"index": i, "question": None, "answer": None,
                                               "valid": False, "text": "zq!"} for i in range(5)])

    monkeypatch.setattr(stages, "generate", dummy_generate)
    problems = [("What is 1+1?", "2"), ("What is 2+3?", "5")]
    table = _real_work_table(problems, solver_rows=3)
    assert [s.name for s in table] == [s.name for s in stages.STAGE_TABLE]
    by_name = {s.name: s for s in table}
    assert by_name["score"] == stages.STAGE_TABLE[2]  # the other stages are the loop's own
    by_name["generate"].run(None, 1, tmp_path)
    rows = read_jsonl(tmp_path / "generated.jsonl")
    assert len(rows) == 5 and all(r["valid"] for r in rows)
    assert [r["question"] for r in rows[:3]] == ["What is 1+1?", "What is 2+3?", "What is 1+1?"]
    assert rows[0]["text"] == "zq!"  # the generated text (and its tokens) stay as sampled
    by_name["curriculum"].run(None, 1, tmp_path)
    kept = read_jsonl(tmp_path / "curriculum.jsonl")
    assert [(r["question"], r["answer"]) for r in kept] == [*problems, problems[0]]


def test_skipped_stages_write_their_outputs_without_their_work(tmp_path):
    from vdlib.app.plan_measure import _real_work_table
    from vdlib.loop import stages
    from vdlib.utils.artifacts import read_jsonl

    ckpt = tmp_path / "dummy"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")
    problems = [("What is 1+1?", "2"), ("What is 2+3?", "5")]
    table = _real_work_table(problems, solver_rows=3, skip=("proposer", "generate", "score",
                                                            "solver", "metrics"),
                             checkpoint=ckpt, num_questions=3)
    by_name = {s.name: s for s in table}
    assert by_name["curriculum"].run is not stages.curriculum  # still the real problems
    out = tmp_path / "iter_1"
    out.mkdir()
    for name in ("proposer", "generate", "score", "curriculum", "solver", "metrics"):
        by_name[name].run(None, 1, out)
    for stage in stages.STAGE_TABLE:  # every output the loop records exists
        assert all((out / f).exists() for f in stage.outputs), stage.name
    assert json.loads((out / "proposer_train.json").read_text())["skipped"]
    assert (out / "solver_model" / "config.json").read_text() == "{}"
    rows = read_jsonl(out / "questions.jsonl")
    assert [r["question"] for r in rows] == ["What is 1+1?", "What is 2+3?", "What is 1+1?"]
    assert all(r["valid"] and r["acc"] == 0.5 for r in rows)


def test_skip_names_the_allowed_stages_before_anything_loads(tmp_path, capsys):
    args = ["plan", GPU_SMALL, "--measure", "--out", str(tmp_path / "e.json")]
    assert cli_main([*args, "--dummy-weights", "--skip", "proposer,warmup"]) == 2
    err = capsys.readouterr().err
    assert "--skip warmup: not a stage; allowed: proposer, generate, score, solver" in err
    assert cli_main([*args, "--skip", "proposer"]) == 2
    assert "--skip needs --dummy-weights" in capsys.readouterr().err


def test_paper_shape_file_lists_every_stage_of_each_shape_and_what_did_not_run():
    from _script_loader import load_script

    ps = load_script("benchmarks/paper_shape.py")

    def entry(shape, timing, error=None):
        return {"card": "h200", "card_name": "NVIDIA H200", "vllm_version": "0.25.1",
                "tokenizer_sha256": "ab" * 32, "dummy_weights": True, "shape": shape,
                "params": f"params/paper/{shape}.yaml", "gpus_per_run": 2, "backend": "server",
                "measured_at": {"proposer_steps": 2, "solver_steps": 2, "num_questions": 64},
                "stages": {"proposer": {"step_s": 60.0}} if "proposer" in timing else {},
                "timing_s": timing, "error": error,
                "memory": {"per_stage_gib": {"proposer": {"0": 120.5, "1": 60.1}}},
                "raw": {"counters": {"proposer": {"tokens": 262144.0, "engine_start_s": 80.0},
                                     "evaluate": {"seconds": 30.0, "tokens": 100.0}}}}

    data = ps.paper_shape([entry("qwen3-4b", {"proposer": 200.0, "generate": 40.0}),
                           entry("qwen3-8b", {}, error="proposer: OutOfMemoryError: ...")])
    assert data["card"] == "h200" and data["tokenizer"]["sha256"] == "ab" * 32
    four = data["shapes"]["qwen3-4b"]
    assert four["stages"]["proposer"] == {"seconds": 200.0, "tokens": 262144, "steps": 2,
                                          "engine_start_s": 80.0,
                                          "peak_memory_gb": {"0": 120.5, "1": 60.1}}
    assert four["stages"]["evaluate"]["seconds"] == 30.0  # the evaluation's own clock
    assert four["not_run"] == ["score", "curriculum", "solver", "metrics"]
    eight = data["shapes"]["qwen3-8b"]
    assert eight["stopped"].startswith("proposer: OutOfMemoryError")
    assert "proposer" in eight["not_run"]
    with pytest.raises(ValueError, match="one card"):
        ps.paper_shape([entry("qwen3-4b", {}), {**entry("qwen3-8b", {}), "card": "h100"}])


def test_attempts_join_into_one_entry_with_each_stage_from_the_attempt_that_ran_it():
    from _script_loader import load_script

    ps = load_script("benchmarks/paper_shape.py")
    timing = {"proposer": 300.0, "generate": 130.0, "score": 140.0, "solver": 90.0}
    first = {"id": "x@h200/server-stage/2gpu", "error": "solver: OutOfMemoryError",
             "measured_at": {"num_questions": 64}, "timing_s": timing,
             "stages": {"proposer": {"step_s": 40.0}, "score": {"tokens_per_s": 2e4},
                        "solver": {"step_s": 99.0}},
             "lengths": {"proposer_rollout": 2037.0, "answer": 2035.0},
             "memory": {"per_stage_gib": {"proposer": {"0": 128.8}, "score": {"0": 113.7},
                                          "solver": {"0": 139.0}}},
             "raw": {"counters": {"proposer": {"tokens": 1.0}, "solver": {"tokens": 5.0},
                                  "generate": {"tokens": 0.0, "engine_start_s": 100.0}},
                     "peak": {}}}
    second = {**first, "error": None,
              "stages": {"proposer": {"step_s": 0.0}, "solver": {"step_s": 26.0}},
              "lengths": {"solver_rollout": 2048.0},
              "memory": {"per_stage_gib": {"solver": {"0": 128.7}}},
              "raw": {"counters": {"solver": {"tokens": 7.0}}, "peak": {}}}
    merged = ps.merge_attempts([(["proposer", "generate", "score"], first),
                                (["solver"], second)],
                               assumed_tokens={"generate": 64 * 2048.0},
                               corrections=["the orphan"], drop_peaks=["score"])
    assert merged["stages"]["proposer"] == {"step_s": 40.0}  # not the resumed attempt's 0
    assert merged["stages"]["solver"] == {"step_s": 26.0}  # not the failed attempt's
    assert merged["stages"]["generate"]["tokens_per_s"] == round(131072 / 30.0, 1)
    assert merged["lengths"] == {"proposer_rollout": 2037.0, "answer": 2035.0,
                                 "solver_rollout": 2048.0, "question": 2048.0}
    assert merged["memory"]["per_stage_gib"] == {"proposer": {"0": 128.8},
                                                 "solver": {"0": 128.7}}
    assert merged["raw"]["peak"]["score"] == {"0": 113.7}  # kept, out of the figures
    assert merged["memory"]["peak_gib_per_gpu"] == 128.8 and merged["error"] is None
    assert merged["corrections"][0] == "the orphan" and len(merged["corrections"]) == 3
    record = ps.shape_record({**merged, "shape": "x"})
    assert record["stages"]["score"]["peak_memory_gb_with_other_memory"] == {"0": 113.7}
    assert record["corrections"] == merged["corrections"]
    # an attempt that skipped the proposer (--skip) gives its seconds only for what it ran
    third = {**second, "timing_s": {"generate": 180.0, "score": 190.0, "metrics": 2.0},
             "skipped_stages": ["proposer"], "stages": {"score": {"tokens_per_s": 1.9e4}},
             "memory": {"per_stage_gib": {"score": {"0": 57.4}}},
             "raw": {"counters": {"score": {"tokens": 9.0}}, "peak": {}}}
    merged = ps.merge_attempts([(["proposer", "generate"], first), (["solver"], second),
                                (["score", "metrics"], third)])
    assert merged["timing_s"] == {"proposer": 300.0, "generate": 130.0, "score": 190.0,
                                  "solver": 90.0, "metrics": 2.0}
    assert merged["skipped_stages"] == []
    assert merged["memory"]["per_stage_gib"]["score"] == {"0": 57.4}
    assert ps.shape_record({**merged, "shape": "x"})["stages"]["score"]["seconds"] == 190.0


def test_the_plan_shows_measured_peaks_and_warns_on_them():
    from vdlib.app.plan import MemoryRow, with_measured

    rows = with_measured([MemoryRow("solver (GPU 0)", (("policy", 114.2),), 140.0),
                          MemoryRow("score", (("server", 56.2),), 140.0)],
                         {"solver": {"0": 141.5}, "score": {"0": 56.9, "1": 57.1}})
    assert [m.measured_gib for m in rows] == [141.5, 57.1]
    assert [m.fits for m in rows] == [False, True]  # the estimate fits; the measurement not
    from vdlib.app.plan_report import format_memory

    assert "measured | fits?" in format_memory(rows)


def test_measure_cuts_the_iteration_to_a_few_steps_at_the_params_shapes(tmp_path):
    from vdlib.app.plan_measure import _measured_config

    cfg = _measured_config("params/paper/main_table.yaml", tmp_path, 2, 64, tmp_path,
                           steps=2, questions=128)
    assert (cfg.proposer.max_steps, cfg.solver.max_steps) == (2, 2)
    assert cfg.curriculum.num_questions == 128 and cfg.curriculum.batch_size <= 128
    # the batch shapes stay the paper's: only the number of steps and questions shrink
    paper = load_params("params/paper/main_table.yaml")
    for role in ("proposer", "solver"):
        ours, theirs = getattr(cfg, role), getattr(paper, role)
        assert (ours.global_batch_size, ours.num_generations, ours.max_response_length) == (
            theirs.global_batch_size, theirs.num_generations, theirs.max_response_length)
    assert cfg.scoring == paper.scoring and cfg.iterations == 1
    assert cfg.engine.backend == "server" and cfg.engine.server_gpus == ["0", "1"]
    # never more than the params have
    small = _measured_config(GPU_SMALL, tmp_path, 1, 64, tmp_path, steps=10**6, questions=10**6)
    params = load_params(GPU_SMALL)
    assert small.proposer.max_steps == params.proposer.max_steps
    assert small.curriculum.num_questions == params.curriculum.num_questions


# ----------------------------------------------------------------------------- the committed table


def test_the_committed_table_and_scaling_blocks_are_what_the_results_give():
    out = subprocess.run([sys.executable, "benchmarks/cost_table.py", "--check"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr[-2000:]


def test_the_out_of_sample_check_is_current_and_reports_each_stage_honestly():
    """benchmarks/plan_heldout.py: fitted on some runs, checked on runs it never saw; the
    committed JSON and docs/SCALING.md's block are what the results give, and a stage is
    marked within the goal exactly when |relative error| <= 25 %."""
    out = subprocess.run([sys.executable, "benchmarks/plan_heldout.py", "--check"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr[-2000:]
    result = json.loads((ROOT / "benchmarks/results/plan_heldout.json").read_text())
    assert {c["check"] for c in result["checks"]} == {"k_and_steps", "iterations"}
    for c in result["checks"]:
        assert set(c["stages"]) == {"proposer", "generate", "score", "solver", "metrics",
                                    "iteration"}
        for row in c["stages"].values():
            err = (row["predicted_s"] - row["measured_s"]) / row["measured_s"]
            assert row["relative_error"] == pytest.approx(err, abs=0.006)
            assert row["within_25pct"] == (abs(row["relative_error"]) <= 0.25)


def test_start_ups_split_into_every_iteration_and_iteration_1s_extra():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from cost_table import split_startup

    assert split_startup([(1, 30.0), (2, 10.0), (3, 12.0)]) == {
        "startup_s": 11.0, "first_iteration_extra_s": 19.0}
    assert split_startup([(1, 5.0), (2, 10.0)]) == {"startup_s": 7.5}  # no faster later
    assert split_startup([(1, 30.0)]) == {"startup_s": 30.0}
    # the plan adds the extra once a run, not once an iteration
    stages = fixture_table()["entries"][0]["stages"]
    stages["proposer"]["first_iteration_extra_s"] = 100.0
    base = make_plan(fixture_config(), card="h100", table=fixture_table())
    plan = make_plan(fixture_config(), card="h100", table=fixture_table(stages=stages))
    assert plan.iteration_s == base.iteration_s and plan.first_extra_s == 100.0
    assert plan.run_s == pytest.approx(base.run_s + 100.0)


def test_every_figure_of_the_table_names_its_source():
    table = json.loads(DEFAULT_TABLE.read_text())
    for e in table["entries"]:
        assert e["lengths"]["source"]
        for stage, fig in e["stages"].items():
            assert fig.get("source"), f"{e['id']} {stage}"
    for e in table["partial"]:
        assert all(f["source"] for f in e["figures"])


def _measured_mean(folder: str) -> float:
    """The mean seconds of a gpu-small folder's complete run-iterations, from timing.json."""
    walls = []
    for path in session_member(ROOT / "docs/results/archives", "gpu_small_main", folder).glob(
            "*/iter_*/timing.json"):
        timing = json.loads(path.read_text())
        if {"proposer", "generate", "score", "curriculum", "solver", "metrics"} <= set(timing):
            walls.append(sum(timing.values()))
    return statistics.fmean(walls)


@pytest.mark.parametrize("card,folder", [("h200", "h200x1"), ("h100", "h100x1"),
                                         ("h100", "h100x1_rerun")])
@pytest.mark.parametrize("runs_per_gpu", [1, 3])
def test_gpu_small_projection_is_within_25_percent_of_the_measured_iterations(
        card, folder, runs_per_gpu):
    """The params as committed (engine.lifetime run) against the mean run-iteration that the
    committed runs took on the same card type (three runs sharing the card, lifetime stage)."""
    plan = make_plan(load_params(GPU_SMALL), params=GPU_SMALL, card=card,
                     runs_per_gpu=runs_per_gpu)
    measured = _measured_mean(folder)
    assert measured == pytest.approx(load_table()["measured"][folder]["wall_s"], abs=0.1)
    assert abs(plan.iteration_s / measured - 1) <= 0.25, (plan.iteration_s, measured)
    assert not math.isnan(plan.notebook_wall_s)


def test_the_h200_check_is_not_fitted_on_the_runs_it_is_checked_against():
    """The H200 projection of the committed params uses the profile run (alone on the card,
    another hold), not the grid runs it is compared with."""
    plan = make_plan(load_params(GPU_SMALL), params=GPU_SMALL, card="h200")
    assert plan.entry == "smollm2-135m@h200/vllm-run/x1"
    assert "iteration_profile_h200.json" in json.dumps(
        next(e for e in load_table()["entries"] if e["id"] == plan.entry)["stages"]["proposer"])


def test_measure_refuses_gpus_that_other_processes_fill(monkeypatch):
    import subprocess

    from vdlib.app import plan_meter
    from vdlib.app.plan_meter import check_idle_gpus

    used = {"0": 58180, "1": 300}

    def fake_run(cmd, **kw):
        if "--query-gpu=index,memory.used" in cmd:
            out = "".join(f"{g}, {m}\n" for g, m in used.items())
        else:
            out = "3902, 58180 MiB\n"
        return subprocess.CompletedProcess(cmd, 0, stdout=out, stderr="")

    monkeypatch.setattr(plan_meter.subprocess, "run", fake_run)
    with pytest.raises(PlanError) as e:
        check_idle_gpus(2)
    assert "GPU 0: 56.8 GiB in use" in str(e.value) and "3902" in str(e.value)
    assert "GPU 1" not in str(e.value) and "pkill -f vllm.entrypoints" in str(e.value)
    check_idle_gpus(0)  # a GPU the measurement does not use may be busy
    used["0"] = 900
    check_idle_gpus(2)  # under 2 GiB: idle


def test_measure_counts_the_tokens_of_batched_server_generation(monkeypatch):
    """Curriculum generation calls ServerEngine.generate_batches directly (one call, every
    batch); scoring calls generate, which calls it too: each token counted once."""
    from types import SimpleNamespace

    import transformers

    import vdlib.engines.serving as serving
    import vdlib.engines.vllm_backend as vb
    from vdlib.app.plan_meter import Meter, instrument

    for owner, name in ((transformers.Trainer, "train"), (vb, "build_llm"),
                        (serving.VLLMServer, "wait_ready"),
                        (serving.ServerEngine, "generate_batches")):
        monkeypatch.setattr(owner, name, getattr(owner, name))  # restored after the test

    def fake_batches(self, batches, **kw):
        return [[SimpleNamespace(token_ids=[1] * 7) for _ in range(b.n)] for b in batches]

    monkeypatch.setattr(serving.ServerEngine, "generate_batches", fake_batches)
    meter = Meter()
    instrument(meter)
    engine = object.__new__(serving.ServerEngine)
    from vdlib.engines.generation import GenerationBatch

    meter.stage = "generate"
    serving.ServerEngine.generate_batches(engine, [GenerationBatch(["p"], n=3, seed=0),
                                                   GenerationBatch(["p"], n=2, seed=1)])
    meter.stage = "score"
    serving.ServerEngine.generate(engine, ["q"], n=4)
    assert meter.c["generate"]["tokens"] == 35 and meter.c["score"]["tokens"] == 28
