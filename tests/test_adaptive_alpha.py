"""The adaptive alpha schedule (issue 54): the controller's decisions on fixed records, its
bounds, replay and resume equality, its config keys and arm, its params files, and a tiny run
that records the trajectory."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml

from vdlib.config import ConfigError, load_params
from vdlib.config.mask_settings import adaptive_settings, mask_schedule, mask_spec
from vdlib.loop.arms import arm_params
from vdlib.loop.coevolution import run
from vdlib.method.adaptive_alpha import (
    DIVERSITY_SIGNALS,
    RULES,
    AdaptiveSettings,
    adaptive_alpha,
    alpha_trajectory,
    next_alpha,
)
from vdlib.method.mask_schedule import (
    MaskSchedule,
    MaskSpec,
    alpha_at,
    alpha_decision,
    iteration_alpha,
    phase_alphas,
)
from vdlib.runs.run_extension import iterations_change

ROOT = Path(__file__).resolve().parent.parent
S = AdaptiveSettings()  # the defaults: start 0.75, floor 0.75, target 0.95, gain 0.8, step 0.05


def rec(t, valid, cv=None, bleu=None):
    return {"iteration": t, "valid_fraction": valid, "cumulative_vendi": cv, "self_bleu": bleu}


# ----------------------------------------------------------------------------- decisions


def test_decisions_on_fixed_records():
    """Hand-computed: the committed VD75 seed-0 records of gpu-small's iterations 1-2
    (docs/results/gpu_small_main.json) replayed as if the controller had run them."""
    history = [rec(1, 0.694336, 44.289), rec(2, 0.583008, 46.184)]
    d = alpha_trajectory(history, S)
    assert [x.iteration for x in d] == [1, 2, 3]
    assert [x.rule for x in d] == ["start", "raise", "raise"]
    assert d[0].alpha == 0.75
    assert d[1].alpha == pytest.approx(0.75 + 0.8 * (0.95 - 0.694336), abs=1e-6)  # 0.954531
    assert d[2].alpha == 1.0  # 0.954531 + 0.8 * 0.366992 > 1: the upper bound
    assert d[1].previous_alpha == 0.75 and d[1].inputs == {"valid_fraction": 0.694336}


def test_lower_when_cumulative_vendi_stalls_and_hold_when_it_grows():
    history = [rec(1, 0.99, 40.0), rec(2, 0.97, 40.8), rec(3, 0.96, 44.0)]
    d = alpha_trajectory(history, AdaptiveSettings(alpha=0.9))
    # lowered by the headroom: 0.8 x (0.97 - 0.95) = 0.016 (below lower_step, 0.05)
    assert [(x.rule, x.alpha) for x in d] == [("start", 0.9), ("hold", 0.9), ("lower", 0.884),
                                              ("hold", 0.884)]
    assert d[2].inputs["vendi_growth"] == pytest.approx(0.02)  # 40 -> 40.8 < 3 %
    assert d[3].inputs["vendi_growth"] == pytest.approx(0.8 / 10.2, abs=1e-6)
    assert "no earlier iteration" in d[1].reason  # iteration 1 has nothing to grow from
    # lower_step caps the step where the headroom is larger
    wide = AdaptiveSettings(alpha=0.9, valid_target=0.5, lower_step=0.05)
    assert next_alpha(0.9, rec(2, 0.99, 40.0), rec(1, 0.99, 40.0), wide).alpha == 0.85
    # at the target there is no headroom: a stall holds
    at = next_alpha(0.9, rec(2, 0.95, 40.0), rec(1, 0.99, 40.0), S)
    assert (at.rule, at.alpha) == ("hold", 0.9) and "no room to lower" in at.reason


def test_self_bleu_signal():
    s = AdaptiveSettings(alpha=1.0, diversity_signal="self_bleu")
    d = alpha_trajectory([rec(1, 0.99, bleu=0.30), rec(2, 0.99, bleu=0.32),
                          rec(3, 0.99, bleu=0.325)], s)
    assert [(x.rule, x.alpha) for x in d] == [("start", 1.0), ("hold", 1.0), ("lower", 0.968),
                                              ("hold", 0.968)]
    assert d[2].inputs["self_bleu_rise"] == pytest.approx(0.02)


def test_validity_wins_over_a_stall_and_a_missing_signal_holds():
    # a stalled Vendi with too few valid questions: raise, not lower
    d = next_alpha(0.8, rec(3, 0.90, 40.0), rec(2, 0.99, 40.0), S)
    assert d.rule == "raise" and d.alpha == pytest.approx(0.84)
    assert next_alpha(0.8, rec(2, None, 40.0), rec(1, 0.99, 30.0), S).rule == "hold"
    missing = next_alpha(0.8, rec(2, 0.99, None), rec(1, 0.99, 30.0), S)
    assert (missing.rule, missing.alpha) == ("hold", 0.8)
    assert "cumulative_vendi missing" in missing.reason


def test_bounds_hold_on_random_records():
    rng = random.Random(0)
    for _ in range(300):
        s = AdaptiveSettings(alpha=rng.choice([0.8, 0.9, 1.0]), alpha_min=0.8,
                             raise_gain=rng.uniform(0, 3), lower_step=rng.uniform(0, 0.5),
                             diversity_signal=rng.choice(DIVERSITY_SIGNALS))
        history = [rec(t, rng.choice([None, rng.random()]), rng.uniform(1, 80),
                       rng.random()) for t in range(1, 8)]
        for d in alpha_trajectory(history, s):
            assert 0.8 <= d.alpha <= 1.0 and d.rule in RULES
            if d.rule == "raise":
                assert d.alpha >= d.previous_alpha
            if d.rule == "lower":  # never more than the valid fraction's headroom buys
                assert d.alpha <= d.previous_alpha
                assert d.previous_alpha - d.alpha <= s.lower_step + 1e-9
                assert d.previous_alpha - d.alpha <= \
                    s.raise_gain * (d.inputs["valid_fraction"] - s.valid_target) + 1e-6


def test_replay_is_deterministic_and_survives_json():
    """Resume equality at the controller's level: the decisions of a prefix of the records are
    a prefix of the whole run's, and records read back from JSON give the same decisions."""
    history = [rec(1, 0.62, 64.1), rec(2, 0.97, 66.0), rec(3, 0.95, 66.5), rec(4, 0.7, 67.0)]
    whole = alpha_trajectory(history, S)
    for k in range(len(history) + 1):
        assert alpha_trajectory(history[:k], S) == whole[: k + 1]
        assert adaptive_alpha(history[:k], S) == whole[k]
    back = json.loads(json.dumps(history))
    assert [d.as_record() for d in alpha_trajectory(back, S)] == \
        json.loads(json.dumps([d.as_record() for d in whole]))


def test_history_out_of_order_and_bad_settings_fail_naming_the_field():
    with pytest.raises(ValueError, match="iteration 2; allowed: the records of iterations"):
        alpha_trajectory([rec(2, 0.9)], S)
    with pytest.raises(ValueError, match="alpha = 0.5 < alpha_min = 0.75"):
        AdaptiveSettings(alpha=0.5)
    with pytest.raises(ValueError, match="diversity_signal = 'vendi' is not allowed; allowed "
                                         "values: cumulative_vendi, self_bleu"):
        AdaptiveSettings(diversity_signal="vendi")
    with pytest.raises(ValueError, match="valid_target = 1.5 is out of range"):
        AdaptiveSettings(valid_target=1.5)


# ----------------------------------------------------------------------------- config, schedules


def test_config_keys_validate_before_any_model_loads():
    cfg = load_params(arm_params({"profile": "tiny"}, "adaptive"))
    vd = cfg.vocab_dropout
    assert (vd.schedule, vd.alpha, vd.phases) == ("adaptive", 0.75, "both")
    assert adaptive_settings(vd) == S  # the config's defaults are the controller's
    assert mask_schedule(cfg) == MaskSchedule(alpha=0.75, iterations=cfg.iterations,
                                              schedule="adaptive", adaptive=S)
    cases = [({"vocab_dropout": {"schedule": "cosine"}},
              "vocab_dropout.schedule = 'cosine' is not allowed; allowed values: fixed, linear, "
              "adaptive"),
             ({"vocab_dropout": {"adaptive": {"diversity_signal": "vendi"}}},
              "vocab_dropout.adaptive.diversity_signal = 'vendi' is not allowed; allowed values: "
              "cumulative_vendi, self_bleu"),
             ({"vocab_dropout": {"adaptive": {"alpha_min": 0}}},
              "vocab_dropout.adaptive.alpha_min = 0.0 is out of range; allowed: "
              "0 < alpha_min <= 1"),
             ({"vocab_dropout": {"schedule": "adaptive", "alpha": 0.6}},
              "vocab_dropout.alpha = 0.6 < vocab_dropout.adaptive.alpha_min = 0.75"),
             ({"vocab_dropout": {"schedule": "adaptive"}, "metrics": {"embedder": "none"}},
              "needs an embedder, but metrics.embedder = 'none'; allowed values: self_bleu")]
    for params, message in cases:
        with pytest.raises(ConfigError) as e:
            load_params(params)
        assert message in str(e.value)
    # a timetable schedule never reads the adaptive keys, so their cross rules do not apply
    assert load_params({"vocab_dropout": {"alpha": 0.6}}).vocab_dropout.alpha == 0.6


def test_schedule_functions_read_the_records_only_for_adaptive():
    schedule = mask_schedule(load_params(arm_params({"profile": "tiny", "iterations": 3},
                                                    "adaptive")))
    assert iteration_alpha(schedule, 1) == 0.75  # iteration 1 needs no records
    with pytest.raises(ValueError, match="needs the metrics of iterations 1 .. 1"):
        iteration_alpha(schedule, 2)
    history = [rec(1, 0.7, 44.0), rec(2, 0.99, 44.1)]
    assert iteration_alpha(schedule, 2, history) == pytest.approx(0.95)
    assert phase_alphas(schedule, 3, history) == {"train": 0.918, "gen": 0.918}
    gen_only = mask_schedule(load_params({**arm_params({"profile": "tiny"}, "adaptive"),
                                          "vocab_dropout": {"schedule": "adaptive",
                                                            "phases": "gen"}}))
    assert phase_alphas(gen_only, 2, history) == {"train": 1.0, "gen": 0.95}
    with pytest.raises(ValueError, match="use iteration_alpha"):
        alpha_at(2, 3, alpha=0.75, schedule="adaptive")
    anneal = mask_schedule(load_params(arm_params({"profile": "tiny", "iterations": 3},
                                                  "anneal")))
    assert iteration_alpha(anneal, 2) == pytest.approx(0.875)  # timetables unchanged
    with pytest.raises(ValueError, match="schedule = 'linear' makes no decision"):
        alpha_decision(anneal, 2, [])


def test_mask_values_come_from_the_config_and_are_checked():
    fixed = load_params({"profile": "tiny", "iterations": 4,
                         "vocab_dropout": {"alpha": 0.6, "phases": "train", "width":
                                           "len_tokenizer", "extra_protected_ids": [5, 9]}})
    # a timetable never reads the adaptive keys: alpha 0.6 < alpha_min 0.75 is fine
    assert mask_schedule(fixed) == MaskSchedule(alpha=0.6, iterations=4, phases="train")
    assert mask_spec(fixed) == MaskSpec(extra_protected_ids=(5, 9), width="len_tokenizer")
    assert mask_spec(fixed).format_strings == ("<question>", "</question>", "\\boxed{", "}")
    bad = [({"alpha": 0.75, "iterations": 3, "schedule": "cosine"}, "schedule = 'cosine'"),
           ({"alpha": 0.75, "iterations": 3, "phases": "all"}, "phases = 'all'"),
           ({"alpha": 1.5, "iterations": 3}, "alpha = 1.5 is out of range"),
           ({"alpha": 0.75, "iterations": 0}, "iterations = 0 is out of range"),
           ({"alpha": 0.75, "iterations": 3, "schedule": "adaptive"}, "needs adaptive settings"),
           ({"alpha": 0.75, "iterations": 3, "adaptive": S}, "reads no adaptive settings"),
           ({"alpha": 0.8, "iterations": 3, "schedule": "adaptive", "adaptive": S},
            "adaptive.alpha = 0.75 != alpha = 0.8")]
    for kwargs, message in bad:
        with pytest.raises(ValueError, match=message):
            MaskSchedule(**kwargs)
    with pytest.raises(ValueError, match="extra_protected_ids"):
        MaskSpec(extra_protected_ids=(-1,))


def test_an_adaptive_run_may_be_extended():
    cfg = {"iterations": 2, "vocab_dropout": {"alpha": 0.75, "schedule": "adaptive"}}
    assert iterations_change(cfg, {**cfg, "iterations": 5}, {"1/metrics": {}, "2/proposer": {}}) \
        is None
    assert "beyond the new 1" in iterations_change(cfg, {**cfg, "iterations": 1},
                                                   {"2/proposer": {}})


# ----------------------------------------------------------------------------- params files


def _yaml(path: str) -> dict:
    return yaml.safe_load((ROOT / path).read_text(encoding="utf-8"))


def test_gpu_small_adaptive_is_the_main_table_key_for_key():
    main, mine = _yaml("params/gpu-small/main_table.yaml"), _yaml("params/gpu-small/adaptive.yaml")
    assert {k for k in set(main) | set(mine) if main.get(k) != mine.get(k)} == {
        "experiment", "arms"}
    assert mine["arms"] == ["adaptive"] and mine["experiment"] == "gpu_small_adaptive"
    cfg = load_params(arm_params(mine, "adaptive"))
    assert cfg.vocab_dropout.schedule == "adaptive" and cfg.metrics.embedder == "minilm"
    assert (cfg.iterations, cfg.seeds) == (3, [0, 1, 2])


def test_tiny_adaptive_is_the_quickstart_key_for_key():
    quick, mine = _yaml("params/tiny/quickstart.yaml"), _yaml("params/tiny/adaptive.yaml")
    assert {k for k in set(quick) | set(mine) if quick.get(k) != mine.get(k)} == {
        "experiment", "arms", "iterations"}
    assert mine["arms"] == ["adaptive"] and mine["iterations"] == 3
    assert load_params(arm_params(mine, "adaptive")).vocab_dropout.schedule == "adaptive"


# ----------------------------------------------------------------------------- a tiny run


def tiny_adaptive(out: Path, iterations: int = 2) -> dict:
    """The loop on the random tiny model (seconds an iteration), the adaptive arm."""
    return arm_params({
        "profile": "tiny", "experiment": "t", "output_dir": str(out), "iterations": iterations,
        "model": {"proposer": "tiny-random"}, "warm_start": {"mode": "none"},
        "proposer": {"max_response_length": 12}, "solver": {"max_response_length": 12},
        "scoring": {"num_solver_samples": 2, "max_new_tokens": 6},
        "curriculum": {"num_questions": 4, "batch_size": 2, "max_new_tokens": 12}}, "adaptive")


def _trajectory(run_dir: Path, iterations: int) -> list[tuple]:
    out = []
    for t in range(1, iterations + 1):
        m = json.loads((run_dir / f"iter_{t}" / "metrics.json").read_text())
        p = json.loads((run_dir / f"iter_{t}" / "proposer_train.json").read_text())
        out.append((m["alpha_train"], m["alpha_gen"], p["alpha_train"], p["alpha_decision"]))
    return out


class Stop(Exception):
    pass


@pytest.mark.slow  # 354 s and 463 s measured on 2 shared cores: two 2-iteration runs
def test_tiny_run_records_the_trajectory_and_resumes_to_the_same_alphas(tmp_path):
    whole = run(tiny_adaptive(tmp_path / "a")).run_dir
    got = _trajectory(whole, 2)
    records = [json.loads((whole / f"iter_{t}" / "metrics.json").read_text()) for t in (1, 2)]
    expected = alpha_trajectory(records[:1], S)
    assert [g[0] for g in got] == [g[1] for g in got] == [g[2] for g in got] == \
        [d.alpha for d in expected]
    assert [g[3] for g in got] == [d.as_record() for d in expected]
    assert got[0][3]["rule"] == "start" and got[1][3]["rule"] in {"raise", "hold"}
    # the random model writes few valid questions, so the controller raises alpha
    if records[0]["valid_fraction"] < S.valid_target:
        assert got[1][0] > 0.75

    def stop(t, stage):
        if (t, stage) == (2, "generate"):
            raise Stop

    with pytest.raises(Stop):  # stopped after iteration 2's proposer stage, then resumed
        run(tiny_adaptive(tmp_path / "b"), on_stage=stop)
    resumed = run(tiny_adaptive(tmp_path / "b")).run_dir
    assert _trajectory(resumed, 2) == got
    for t in (1, 2):
        assert (resumed / f"iter_{t}" / "generated.jsonl").read_bytes() == \
            (whole / f"iter_{t}" / "generated.jsonl").read_bytes()


def _fake_run(tmp_path: Path, valid: list[float]) -> tuple:
    cfg = load_params(arm_params({"profile": "tiny", "iterations": len(valid) + 1}, "adaptive"))
    for t, v in enumerate(valid, start=1):
        (tmp_path / f"iter_{t}").mkdir()
        (tmp_path / f"iter_{t}" / "metrics.json").write_text(json.dumps(rec(t, v, 40.0 + t)))
    return cfg, tmp_path


def test_the_loop_reads_alpha_from_the_run_folders_records(tmp_path):
    from vdlib.loop.alpha_records import (
        alpha_history,
        check_recorded_decision,
        decision_record,
        run_phase_alphas,
    )

    cfg, run_dir = _fake_run(tmp_path, [0.7, 0.99])
    assert run_phase_alphas(cfg, run_dir, 2) == {"train": 0.95, "gen": 0.95}
    assert run_phase_alphas(cfg, run_dir, 3) == {"train": 0.918, "gen": 0.918}  # 41 -> 42
    record = decision_record(cfg, alpha_history(cfg, run_dir, 3), 3)
    assert record["alpha_decision"]["rule"] == "lower"
    (run_dir / "iter_3").mkdir()
    (run_dir / "iter_3" / "proposer_train.json").write_text(json.dumps(record))
    check_recorded_decision(cfg, run_dir, 3)  # the records agree: nothing raised
    (run_dir / "iter_2" / "metrics.json").write_text(json.dumps(rec(2, 0.5, 42.0)))
    with pytest.raises(RuntimeError, match="records changed under the run"):
        check_recorded_decision(cfg, run_dir, 3)
    fixed = load_params({"profile": "tiny", "iterations": 3})
    assert alpha_history(fixed, run_dir, 3) is None and decision_record(fixed, None, 3) == {}
