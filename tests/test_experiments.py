"""Experiment grids, evaluation pooling, single-policy and transfer training, local verifier."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
from scipy import stats

from vdlib.config.experiment import load_params
from vdlib.evaluation import BenchmarkResult, EvalSummary
from vdlib.experiments import evaluate, grids, transfer
from vdlib.report import experiments as ex
from vdlib.utils.artifacts import write_jsonl

ROOT = Path(__file__).resolve().parent.parent


def tiny(out: Path, **over) -> dict:
    """Seconds-scale settings on the random tiny model."""
    p = {"profile": "tiny", "experiment": "t", "output_dir": str(out), "iterations": 1,
         "seeds": [0], "model": {"proposer": "tiny-random", "transfer": "tiny-random"},
         "warm_start": {"mode": "none"},
         "proposer": {"max_response_length": 8, "max_steps": 1},
         "solver": {"max_response_length": 8, "max_steps": 1},
         "transfer": {"max_response_length": 8, "max_steps": 1},
         "scoring": {"num_solver_samples": 2, "max_new_tokens": 4},
         "curriculum": {"num_questions": 2, "batch_size": 2, "max_new_tokens": 8},
         "evaluation": {"benchmarks": ["gsm_symbolic"], "runs": 2, "limit": 3,
                        "max_context": 256, "max_new_tokens": 6},
         "verification": {"backend": "local", "correctness_model": "tiny-random",
                          "transfer_model": "tiny-random", "max_new_tokens": 6},
         "metrics": {"embedder": "none"},
         "single_policy": {"dataset": "gsm_symbolic", "train_examples": 4}}
    p.update(over)
    return p


def summary(accs: dict[str, list[float]]) -> EvalSummary:
    return EvalSummary({b: BenchmarkResult(b, 10, a, list(range(len(a)))) for b, a in
                        accs.items()})


# ----------------------------------------------------------------------------- pure helpers


def _eval_cfg(tmp_path, **evaluation):
    return load_params(tiny(tmp_path, seeds=[0, 1], evaluation=evaluation))


def test_pool_seeds_follows_per_seed_and_se_ddof(tmp_path):
    grid = {("vd75", 0): summary({"a": [0.2, 0.4]}), ("vd75", 1): summary({"a": [0.6, 0.6]}),
            ("baseline", 0): summary({"a": [0.1, 0.3]})}
    pooled = ex.pool_seeds(grid, _eval_cfg(tmp_path, per_seed="mean"))
    assert list(pooled) == ["vd75", "baseline"]
    r = pooled["vd75"].results["a"]
    assert r.accuracies == pytest.approx([0.3, 0.6]) and r.seeds == [0, 1]
    sd = math.sqrt(((0.3 - 0.45) ** 2 + (0.6 - 0.45) ** 2) / 2)  # ddof = 0 (the paper's rule)
    assert r.se == pytest.approx(sd / math.sqrt(2))
    # one seed: the evaluation runs are kept
    assert pooled["baseline"].results["a"].accuracies == [0.1, 0.3]
    # the defaults: each seed's first evaluation run (the paper's cells)
    first = ex.pool_seeds(grid, _eval_cfg(tmp_path))["vd75"].results["a"]
    assert first.accuracies == [0.2, 0.6] and first.se == pytest.approx(0.2 / math.sqrt(2))
    sample = ex.pool_seeds(grid, _eval_cfg(tmp_path, se_ddof=1))["vd75"].results["a"]
    assert sample.se == pytest.approx(0.4 / math.sqrt(2) / math.sqrt(2))


def test_pool_seeds_keeps_only_benchmarks_every_seed_has(tmp_path):
    pooled = ex.pool_seeds({("a", 0): summary({"x": [1.0], "y": [0.0]}),
                            ("a", 1): summary({"x": [0.0]})}, _eval_cfg(tmp_path))
    assert set(pooled["a"].results) == {"x"}


def test_eval_summary_round_trips_through_json():
    s = summary({"gsm8k": [0.5, 0.25], "math500": [0.1, 0.2]})
    back = EvalSummary.from_dict(json.loads(json.dumps(s.to_dict())))
    assert back.results["gsm8k"].accuracies == [0.5, 0.25]
    assert back.average() == pytest.approx(s.average())


def test_accuracy_and_entropy_frames(tmp_path):
    frame = ex.accuracy_frame({("vd75", 1): summary({"a": [0.2, 0.4]})}, iteration=3)
    assert frame.to_dict("records") == [{"arm": "vd75", "seed": 1, "iteration": 3,
                                         "benchmark": "a", "accuracy": pytest.approx(0.3)}]
    run = tmp_path / "r"
    run.mkdir()
    (run / "policy_train.json").write_text(json.dumps({"log_history": [
        {"step": 1, "entropy": 0.5}, {"step": 2, "entropy": 0.25}, {"train_loss": 1.0}]}))
    e = ex.entropy_frame({("vd95", 0): run, ("baseline", 0): tmp_path / "missing"})
    assert e.to_dict("records") == [{"arm": "vd95", "seed": 0, "step": 1, "entropy": 0.5},
                                    {"arm": "vd95", "seed": 0, "step": 2, "entropy": 0.25}]


def test_reference_runs_and_instruct_config(tmp_path):
    cfg = load_params(tiny(tmp_path, reference_experiments=["main"]))
    done = tmp_path / "main" / "baseline-seed0" / "iter_2"
    done.mkdir(parents=True)
    (done / "metrics.json").write_text("{}")
    (tmp_path / "main" / "vd85-seed0" / "iter_1").mkdir(parents=True)  # unfinished
    runs = ex.reference_runs(cfg, ["baseline", "vd85"])
    assert list(runs) == [("baseline", 0)] and ex.last_iteration(runs) == 2
    inst = grids.instruct_config(cfg)
    assert inst.experiment == "t_instruct" and inst.warm_start.mode == "none"
    assert inst.model.proposer == cfg.model.instruct and inst.model.solver is None


def test_run_grid_validates_every_arm_before_running(tmp_path):
    cfg = load_params(tiny(tmp_path, arms=["baseline", "vd75"]))
    bad = dataclasses.replace(cfg, proposer=dataclasses.replace(cfg.proposer, kl_beta=-1.0))
    calls = []
    with pytest.raises(Exception, match="proposer.kl_beta"):
        grids.run_grid(bad, runner=calls.append)
    assert calls == []


# ----------------------------------------------------------------------------- tiny runs


@pytest.mark.slow  # ~34 s on 2 cores: `make test-slow` (make test keeps within its budget)
def test_grid_evaluation_and_resume(tmp_path):
    cfg = load_params(tiny(tmp_path, arms=["baseline", "vd75"], seeds=[0, 1]))
    runs = grids.run_grid(cfg)
    assert set(runs) == {("baseline", 0), ("vd75", 0), ("baseline", 1), ("vd75", 1)}
    assert all((p / "iter_1" / "metrics.json").exists() for p in runs.values())
    evals = evaluate.evaluate_runs(runs, cfg, "solver")
    folder = runs[("vd75", 1)] / "eval" / "solver_iter1"
    assert (folder / "summary.json").exists()
    assert len(evals[("vd75", 1)].results["gsm_symbolic"].accuracies) == 2
    # complete: read back without loading the model (a missing model would fail otherwise)
    (folder.parent.parent / "iter_1" / "solver_model" / "config.json").unlink()
    again = evaluate.evaluate_runs({("vd75", 1): runs[("vd75", 1)]}, cfg, "solver")
    assert again[("vd75", 1)].results["gsm_symbolic"].accuracies == \
        evals[("vd75", 1)].results["gsm_symbolic"].accuracies
    pooled = ex.pool_seeds(evals, cfg)
    assert pooled["vd75"].protocol["pooled_over_seeds"] == [0, 1]
    base = evaluate.evaluate_base(cfg)
    assert (tmp_path / "t" / "base_eval" / "tiny-random" / "summary.json").exists()
    assert set(base.results) == {"gsm_symbolic"}


def test_single_policy_run_with_mask(tmp_path):
    from vdlib.loop.policy import run_single_policy

    cfg = load_params(tiny(tmp_path, arms=["baseline", "vd95"], experiment="sp"))
    runs = grids.run_grid(cfg, runner=run_single_policy)
    vd = json.loads((runs[("vd95", 0)] / "policy_train.json").read_text())
    base = json.loads((runs[("baseline", 0)] / "policy_train.json").read_text())
    assert vd["masked"] and vd["alpha_train"] == 0.95 and vd["mask_log"]
    assert not base["masked"] and base["alpha_train"] == 1.0
    assert (runs[("vd95", 0)] / "policy_model" / "config.json").exists()
    assert not ex.entropy_frame(runs).empty
    mtime = (runs[("vd95", 0)] / "policy_train.json").stat().st_mtime_ns
    grids.run_grid(cfg, runner=run_single_policy)  # resume: nothing retrained
    assert (runs[("vd95", 0)] / "policy_train.json").stat().st_mtime_ns == mtime
    # the same folder under another starting checkpoint is refused, naming the key
    from vdlib.runs.run_state import RunConfigMismatch

    other = load_params(tiny(tmp_path, arms=["baseline", "vd95"], experiment="sp",
                             warm_start={"mode": "sft"}))
    with pytest.raises(RunConfigMismatch, match="warm_start.mode"):
        grids.run_grid(other, runner=run_single_policy)
    assert (runs[("vd95", 0)] / "policy_train.json").stat().st_mtime_ns == mtime


def test_transfer_trains_a_fresh_model_on_the_verified_set(tmp_path):
    from vdlib.loop.policy import train_transfer

    cfg = load_params(tiny(tmp_path))
    data = tmp_path / "curriculum.jsonl"
    write_jsonl(data, [{"question": "What is 2 + 3?", "answer": "5"},
                       {"question": "What is 4 * 2?", "answer": "8"}])
    model = train_transfer(cfg, data, tmp_path / "tr")
    log = json.loads((tmp_path / "tr" / "train.json").read_text())
    assert (model / "config.json").exists() and log["problems"] == 2 and log["steps"] == 1
    write_jsonl(tmp_path / "empty.jsonl", [])
    empty = train_transfer(cfg, tmp_path / "empty.jsonl", tmp_path / "tr0")
    assert (empty / "config.json").exists()
    assert json.loads((tmp_path / "tr0" / "train.json").read_text())["skipped"]


@pytest.mark.slow  # 13 s on 2 cores (make test's 15 minutes; make test-slow runs it)
def test_transfer_grid_and_composition_from_a_finished_run(tmp_path):
    cfg = load_params(tiny(tmp_path, arms=["vd75"]))
    runs = grids.run_grid(cfg)
    run = runs[("vd75", 0)]
    write_jsonl(run / "iter_1" / "questions.jsonl", [
        {"question": "What is 2 + 3?", "answer": "5", "valid": True, "acc": 0.5},
        {"question": "What is 7 - 1?", "answer": "6", "valid": True, "acc": 0.9},
        {"question": None, "answer": None, "valid": False, "acc": None}])
    out = transfer.transfer_grid(runs, dataclasses.replace(cfg, experiment="tr"), iteration=1)
    r = out[("vd75", 0)]
    assert r["valid"] == 2 and 0 <= r["verified"] <= 2 and Path(r["model"]).exists()
    comp = ex.composition_frame(runs, cfg, iteration=1)
    row = comp.iloc[0]
    assert (row.generated, row.filter_pass) == (3, 1)
    assert row.pass_rate == pytest.approx(1 / 3) and row.vendi_wp is None
    corr = evaluate.correctness_frame(runs, cfg)
    assert list(corr.columns) == ["arm", "seed", "iteration", "correct"] and len(corr) == 1


# ----------------------------------------------------------------------------- local verifier


def test_local_verifier_caches_and_counts(tmp_path):
    from vdlib.evaluation.verification import LocalVerifier, make_verifier

    cfg = load_params(tiny(tmp_path))
    v = make_verifier(cfg.verification, "transfer", cache_dir=str(tmp_path / "cache"))
    assert isinstance(v, LocalVerifier) and v.model == "local:tiny-random"
    records = [{"question": "What is 1 + 1?", "answer": "2"}]
    first = v.check_answers(records)
    assert v.usage.requests == 1 and v.usage.completion_tokens > 0
    again = LocalVerifier("tiny-random", max_new_tokens=6, cache_dir=tmp_path / "cache")
    assert again.check_answers(records) == first
    assert again.usage.requests == 0 and again.usage.cache_hits == 1 and again._engine is None


def test_make_verifier_openai_settings(tmp_path):
    from vdlib.evaluation.verification import LocalVerifier, make_verifier

    cfg = load_params({"verification": {"max_calls": 3}})
    v = make_verifier(cfg.verification, "transfer", cache_dir=str(tmp_path))
    assert not isinstance(v, LocalVerifier) and v.model == "gpt-5-mini"
    assert v.temperature is None and v.max_calls == 3  # reasoning model: default temperature
    c = make_verifier(cfg.verification, "correctness", cache_dir=str(tmp_path))
    assert c.model == "gpt-4.1-mini" and c.temperature == 0.0
    with pytest.raises(ValueError, match="allowed: correctness, transfer"):
        make_verifier(cfg.verification, "judge")


def test_compare_arms_over_seeds(tmp_path):
    runs = {}
    values = {("baseline", 0): 0.5, ("baseline", 1): 0.7, ("vd75", 0): 0.2, ("vd75", 1): 0.3}
    for (arm, seed), bleu in values.items():
        run = tmp_path / f"{arm}-seed{seed}"
        for t in (1, 2):
            (run / f"iter_{t}").mkdir(parents=True)
            (run / f"iter_{t}" / "metrics.json").write_text(json.dumps(
                {"self_bleu": bleu if t == 2 else 9.0, "vendi": None, "valid_questions": 4}))
        (run / "config.yaml").write_text(f"run_id: {arm}-seed{seed}\nseed: {seed}\n")
        runs[(arm, seed)] = run
    evals = {k: summary({"a": [v, v]}) for k, v in values.items()}
    table = ex.compare_arms(runs, evals).set_index("quantity")
    row = table.loc["Self-BLEU (lower = diverse)"]
    assert row["baseline"] == pytest.approx(0.6) and row["vd75"] == pytest.approx(0.25)
    # sample SD over the seeds / sqrt(k): a comparison, not a cell of the paper's tables
    assert row["baseline_se"] == pytest.approx(0.1)
    assert row["vd75_se"] == pytest.approx(0.05)
    assert row["difference"] == pytest.approx(-0.35)
    assert row["difference_se"] == pytest.approx(math.sqrt(0.1 ** 2 + 0.05 ** 2))
    welch = stats.ttest_ind([0.2, 0.3], [0.5, 0.7], equal_var=False)
    assert (row["welch_t"], row["welch_df"], row["welch_p"]) == \
        pytest.approx((welch.statistic, welch.df, welch.pvalue))
    paired = stats.ttest_rel([0.2, 0.3], [0.5, 0.7])
    assert row["n_pairs"] == 2 and row["paired_df"] == 1
    assert (row["paired_t"], row["paired_p"]) == pytest.approx((paired.statistic, paired.pvalue))
    assert not row["significant"] and not row["paired_significant"]  # p = 0.13 and 0.09
    assert table.loc["Vendi", "baseline_n"] == 0  # undefined everywhere: no values
    assert table.loc["valid questions", "difference"] == 0
    assert not table.loc["valid questions", "significant"]  # no spread: no test
    assert table.loc["solver pass@1 (stand-in)", "vd75"] == pytest.approx(0.25)
