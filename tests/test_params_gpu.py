"""params/gpu/: one params file per notebook, each valid and sampling through vLLM; a bad
``engine.backend`` fails in validation, naming the key and the allowed values, before any
model loads. No model is loaded here (config and CLI only)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import vdlib.app.cli
import vdlib.config.experiment
from vdlib.config.experiment import ENGINE_BACKENDS, PROFILE_PRESETS, ConfigError, load_params

ROOT = Path(__file__).resolve().parent.parent
GPU_FILES = sorted((ROOT / "params" / "gpu").glob("*.yaml"))
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
BAD_ENGINE = {"engine": {"backend": "tgi"}}
# Notebooks that sample with transformers' generate in their own cells, never through an engine
# backend: the walkthrough shows one sampling step at a time (HFEngine over the loaded model).
HF_ONLY = {"method_walkthrough.yaml"}


def test_one_gpu_params_file_per_notebook():
    expected = {nb.stem.split("_", 1)[1] for nb in NOTEBOOKS}
    assert expected, "no notebooks found"
    assert {f.stem.split("@", 1)[0] for f in GPU_FILES} == expected


@pytest.mark.parametrize("path", [p for p in GPU_FILES if p.name not in HF_ONLY],
                         ids=lambda p: p.name)
def test_params_check_passes_and_resolves_to_vllm(path, capsys):
    rc = vdlib.app.cli.main(["params", "check", str(path)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    resolved = yaml.safe_load(out)
    assert resolved["profile"] == "gpu"
    assert resolved["engine"]["backend"] == "vllm"
    assert resolved["model"]["device"] == "cuda"
    assert resolved["model"]["dtype"] == "bfloat16"
    # stated in the file itself, not only inherited from the gpu preset
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert raw["profile"] == "gpu" and raw["engine"]["backend"] == "vllm"
    assert load_params(path).engine.backend == "vllm"


@pytest.mark.parametrize("name", sorted(HF_ONLY))
def test_hf_only_gpu_files_run_on_the_gpu_in_bfloat16(name, capsys):
    rc = vdlib.app.cli.main(["params", "check", str(ROOT / "params" / "gpu" / name)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    resolved = yaml.safe_load(out)
    assert resolved["profile"] == "gpu"
    assert resolved["model"]["device"] == "cuda" and resolved["model"]["dtype"] == "bfloat16"


def _assert_names_engine_backend(err: ConfigError) -> None:
    msg = str(err)
    assert "engine.backend" in msg and "'tgi'" in msg, msg
    allowed = msg.split("allowed values:", 1)[1]
    for name in ("hf", "vllm", "server"):
        assert name in allowed, msg


@pytest.mark.parametrize("profile", [None, "tiny", "gpu", "paper"])
def test_unknown_engine_backend_is_a_config_error(profile):
    params = dict(BAD_ENGINE) if profile is None else {"profile": profile, **BAD_ENGINE}
    with pytest.raises(ConfigError) as e:
        load_params(params)
    _assert_names_engine_backend(e.value)
    assert set(ENGINE_BACKENDS) == {"hf", "vllm", "server"}


def test_params_check_rejects_an_unknown_engine(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"profile": "gpu", **BAD_ENGINE}))
    assert vdlib.app.cli.main(["params", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "engine.backend" in err and "hf, vllm, server" in err


def test_unknown_engine_fails_before_any_model_loads(monkeypatch, tmp_path):
    import vdlib.engines.models
    import vdlib.engines.setting
    import vdlib.loop.coevolution
    import vdlib.loop.model_store
    import vdlib.loop.stages

    def no_load(*args, **kwargs):
        raise AssertionError("a model or engine was loaded before validation")

    for module in (vdlib.engines.models, vdlib.loop.model_store, vdlib.loop.stages, vdlib.engines):
        for name in ("load_model", "open_engine"):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, no_load)
    out = tmp_path / "outputs"
    with pytest.raises(ConfigError) as e:
        vdlib.loop.coevolution.run({"profile": "tiny", "output_dir": str(out), **BAD_ENGINE})
    _assert_names_engine_backend(e.value)
    with pytest.raises(ConfigError):
        vdlib.loop.coevolution.run_arms({"profile": "gpu", "arms": ["baseline", "vd75"],
                                    "output_dir": str(out), **BAD_ENGINE})
    assert not out.exists(), "a run folder was written before validation"


def test_profile_engine_defaults():
    assert load_params({"profile": "tiny"}).engine.backend == "hf"
    assert load_params({"profile": "gpu"}).engine.backend == "vllm"
    assert load_params({"profile": "paper"}).engine.backend == "vllm"
    assert load_params(None).engine.backend == "vllm"  # the paper defaults
    assert vdlib.config.experiment.EngineConfig().backend == "vllm"
    assert PROFILE_PRESETS["tiny"]["engine"]["backend"] == "hf"


# ----------------------------------------------------------------------------- params/gpu-small

GPU_SMALL = ROOT / "params" / "gpu-small"


@pytest.mark.parametrize("path", sorted(GPU_SMALL.glob("*.yaml")), ids=lambda p: p.name)
def test_gpu_small_params_check_passes_and_resolves_to_vllm(path, capsys):
    rc = vdlib.app.cli.main(["params", "check", str(path)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    resolved = yaml.safe_load(out)
    assert resolved["profile"] == "gpu" and resolved["engine"]["backend"] == "vllm"
    assert resolved["model"]["proposer"] == "smollm2-135m"


@pytest.mark.parametrize("name", ["fail_neg", "phase_ablation", "entropy_baselines",
                                  "annealing"])
def test_gpu_small_ablations_are_main_table_with_other_arms(name):
    """Each co-evolution file of params/gpu-small/ besides the main table (issue 30) keeps every
    cut of main_table.yaml key for key; only its experiment folder and its arms differ, none of
    them a main-table arm (those runs are shared, not run again)."""
    from vdlib.loop.arms import ARMS

    main = yaml.safe_load((GPU_SMALL / "main_table.yaml").read_text(encoding="utf-8"))
    other = yaml.safe_load((GPU_SMALL / f"{name}.yaml").read_text(encoding="utf-8"))
    assert {k for k in set(main) | set(other) if main.get(k) != other.get(k)} == {
        "experiment", "arms"}
    assert other["experiment"] != main["experiment"]
    assert other["arms"] and not set(other["arms"]) & set(main["arms"])
    assert set(other["arms"]) <= set(ARMS.names())


def test_gpu_small_single_policy_is_the_papers_setup_at_135m():
    cfg = load_params(GPU_SMALL / "single_policy.yaml")
    assert cfg.arms == ["baseline", "vd95"] and cfg.seeds == [0, 1, 2]
    assert cfg.solver.max_steps == 100  # the paper's first 100 GRPO steps
    assert (cfg.solver.global_batch_size, cfg.solver.num_generations) == (8, 4)
    assert cfg.single_policy.dataset == "gsm_symbolic"  # offline; GSM8K train is on the Hub
    assert cfg.single_policy.train_examples >= cfg.solver.max_steps * 8
    assert 0 < cfg.single_policy.checkpoint_every < cfg.solver.max_steps  # resumable


def test_fail_neg_is_main_table_with_the_failure_incentive_removed():
    """params/gpu-small/fail_neg.yaml (issue 27, item 5): main_table.yaml's cuts, key for key;
    only its experiment folder and arms differ, and each of its arms is a main-table arm with
    scoring.parse_failure_reward -1 (the paper's default, 0, stays in the file's config)."""
    from vdlib.loop.arms import arm_params

    main = yaml.safe_load((GPU_SMALL / "main_table.yaml").read_text(encoding="utf-8"))
    neg = yaml.safe_load((GPU_SMALL / "fail_neg.yaml").read_text(encoding="utf-8"))
    differ = {k for k in set(main) | set(neg) if main.get(k) != neg.get(k)}
    assert differ == {"experiment", "arms"}
    assert neg["experiment"] != main["experiment"]  # its own run folders
    assert neg["arms"] == ["baseline_fail_neg", "vd75_fail_neg"]
    assert load_params(neg).scoring.parse_failure_reward == 0.0
    for arm in neg["arms"]:
        paper_arm = arm.removesuffix("_fail_neg")
        assert paper_arm in main["arms"]
        mine = load_params(arm_params(neg, arm))
        ref = load_params(arm_params(main, paper_arm))
        assert mine.scoring.parse_failure_reward == -1.0
        assert ref.scoring.parse_failure_reward == 0.0
        assert mine.vocab_dropout == ref.vocab_dropout
        assert mine.proposer == ref.proposer and mine.curriculum == ref.curriculum
