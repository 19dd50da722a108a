"""Config: paper defaults, validation errors that name the key, YAML round trip."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from vdlib.config.experiment import (
    PROFILE_PRESETS,
    ConfigError,
    ExperimentConfig,
    describe,
    load_params,
    notebook_params,
    save_params,
    to_dict,
)

ROOT = Path(__file__).resolve().parent.parent

# The paper's appendix table (tab:training_hypers) and setup section, transcribed independently.
# (Its "Micro-batch (experience)" row, 4, sizes the old-log-prob pass of KL-Cov / Clip-Cov.)
PAPER_TABLE = {
    "proposer": {"learning_rate": 1e-6, "weight_decay": 1e-2, "warmup_steps": 0,
                 "max_grad_norm": 1.0, "kl_beta": 1e-2, "gradient_checkpointing": True,
                 "precision": "bfloat16", "global_batch_size": 16, "micro_batch_size_update": 2,
                 "micro_batch_size_experience": 4, "rollout_batch_size": 16, "num_generations": 4,
                 "temperature": 1.0, "top_p": 0.99,
                 "max_response_length": 2048, "max_steps": 6, "epochs": 10},
    "solver": {"learning_rate": 1e-6, "weight_decay": 1e-2, "warmup_steps": 0,
               "max_grad_norm": 1.0, "kl_beta": 1e-2, "gradient_checkpointing": True,
               "precision": "bfloat16", "global_batch_size": 8, "micro_batch_size_update": 2,
               "micro_batch_size_experience": 4, "rollout_batch_size": 8, "temperature": 1.0,
               "top_p": 0.99, "max_response_length": 2048, "max_steps": 20, "epochs": 10},
    "scoring": {"num_solver_samples": 10, "tau_min": 0.3, "tau_max": 0.7, "bleu_threshold": 0.5,
                "solver_target": "proposer", "proposer_reward_variant": "paper"},
    "vocab_dropout": {"alpha": 0.75, "phases": "both", "schedule": "fixed"},
    "evaluation": {"runs": 3, "temperature": 0.7, "max_context": 4096,
                   "benchmarks": ["gsm8k", "math500", "amc23", "olympiadbench", "aime24",
                                  "aime25"]},
    "model": {"proposer": "Qwen/Qwen3-4B-Base", "dtype": "bfloat16"},
    "top": {"iterations": 5, "seeds": [0, 1, 2]},
}


def test_defaults_equal_paper_table():
    cfg = load_params(None)
    d = to_dict(cfg)
    for section, values in PAPER_TABLE.items():
        got = d if section == "top" else d[section]
        for key, want in values.items():
            assert got[key] == want, f"{section}.{key}: {got[key]!r} != paper {want!r}"
    assert cfg.solver_model == "Qwen/Qwen3-4B-Base"  # same checkpoint for both roles


def test_paper_base_yaml_is_the_paper_profile():
    from_file = load_params(ROOT / "params/paper/base.yaml")
    defaults = load_params({"experiment": "vd75_qwen3_4b"})
    assert to_dict(from_file) == to_dict(defaults)


def test_every_parameter_has_help_text_and_a_source():
    rows = describe()
    assert len(rows) > 60
    for key, _default, help_text in rows:
        assert help_text, f"{key} has no help text"


@pytest.mark.parametrize("profile", sorted(PROFILE_PRESETS))
def test_profiles_resolve(profile):
    cfg = load_params({"profile": profile})
    assert cfg.profile == profile


def test_tiny_profile_uses_packaged_model_on_cpu():
    cfg = load_params(ROOT / "params/tiny/quickstart.yaml")
    assert cfg.model.proposer == "smollm2-135m"
    assert cfg.model.device == "cpu"
    assert cfg.proposer.learning_rate == 1e-6  # paper values not overridden by the preset stay


def test_user_values_override_preset():
    cfg = load_params({"profile": "tiny", "curriculum": {"num_questions": 3}})
    assert cfg.curriculum.num_questions == 3
    assert cfg.curriculum.batch_size == PROFILE_PRESETS["tiny"]["curriculum"]["batch_size"]


BAD = [
    # (params, words the message must contain)
    ({"alpah": 0.5}, ["'alpah'", "allowed keys", "vocab_dropout"]),
    ({"vocab_dropout": {"alpah": 0.5}}, ["vocab_dropout.alpah", "did you mean 'alpha'", "phases"]),
    ({"vocab_dropout": {"alpha": 0.0}}, ["vocab_dropout.alpha", "0 < alpha <= 1"]),
    ({"vocab_dropout": {"alpha": 1.01}}, ["vocab_dropout.alpha", "0 < alpha <= 1"]),
    ({"vocab_dropout": {"alpha_final": -1}}, ["vocab_dropout.alpha_final"]),
    ({"vocab_dropout": {"phases": "often"}}, ["vocab_dropout.phases", "both, train, gen, none"]),
    ({"vocab_dropout": {"schedule": "cosine"}}, ["vocab_dropout.schedule", "fixed, linear"]),
    ({"scoring": {"tau_min": 0.8, "tau_max": 0.6}}, ["tau_min", "tau_max"]),
    ({"scoring": {"tau_max": 1.5}}, ["scoring.tau_max"]),
    ({"scoring": {"num_solver_samples": 0}}, ["scoring.num_solver_samples", "0 <"]),
    ({"proposer": {"global_batch_size": -16}}, ["proposer.global_batch_size"]),
    ({"solver": {"max_steps": 0}}, ["solver.max_steps"]),
    ({"curriculum": {"num_questions": 0}}, ["curriculum.num_questions"]),
    ({"iterations": 0}, ["iterations"]),
    ({"proposer": {"num_generations": 1}}, ["proposer.num_generations", "2 <="]),
    ({"proposer": {"rollout_batch_size": 10}}, ["proposer.rollout_batch_size", "multiple"]),
    ({"proposer": {"micro_batch_size_update": 3}}, ["micro_batch_size_update", "multiple"]),
    ({"warm_start": {"mode": "rl"}}, ["warm_start.mode", "none, sft"]),
    ({"proposer": {"max_steps": "six"}}, ["proposer.max_steps", "wrong type", "int"]),
    ({"proposer": {"max_steps": 6.5}}, ["proposer.max_steps", "int"]),
    ({"proposer": {"gradient_checkpointing": "yes"}}, ["gradient_checkpointing", "bool"]),
    ({"proposer": {"learning_rate": "fast"}}, ["proposer.learning_rate", "float"]),
    ({"proposer": {"loss_variant": "ppo"}}, ["proposer.loss_variant", "grpo, kl_cov, clip_cov"]),
    ({"seeds": "0,1,2"}, ["seeds", "list of int"]),
    ({"seeds": []}, ["seeds"]),
    ({"model": {"proposer": "smollm"}}, ["model.proposer", "smollm2-135m", "tiny-random"]),
    ({"model": {"solver": "not a model"}}, ["model.solver", "Hugging Face id"]),
    ({"model": {"dtype": "fp8"}}, ["model.dtype", "float32, bfloat16"]),
    ({"model": {"device": "tpu"}}, ["model.device", "cuda"]),
    ({"model": "smollm2-135m"}, ["model", "mapping"]),
    ({"profile": "huge"}, ["profile", "tiny", "paper"]),
    ({"evaluation": {"benchmarks": ["gsm9k"]}}, ["evaluation.benchmarks[0]", "gsm8k"]),
    ({"evaluation": {"runs": 0}}, ["evaluation.runs"]),
    # a key with one possible value that nothing read is gone
    ({"proposer": {"cov_scope": "mini_batch"}}, ["proposer.cov_scope", "unknown key"]),
    ({"solver": {"micro_batch_size_experience": 0}}, ["solver.micro_batch_size_experience"]),
    ({"proposer": {"cov_old_logprobs": "exact"}}, ["proposer.cov_old_logprobs",
                                                   "recompute, detach"]),
]


@pytest.mark.parametrize(("params", "words"), BAD, ids=[str(p) for p, _ in BAD])
def test_bad_params_fail_naming_the_key(params, words):
    with pytest.raises(ConfigError) as err:
        load_params(params)
    for word in words:
        assert word in str(err.value), f"{word!r} missing from: {err.value}"


def test_bad_yaml_file(tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text("vocab_dropout: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_params(p)
    with pytest.raises(ConfigError, match="does not exist"):
        load_params(tmp_path / "missing.yaml")
    p.write_text("- a list\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_params(p)


def test_scientific_notation_strings_from_yaml(tmp_path):
    # PyYAML reads `1e-6` (no dot) as a string; floats accept it, ints do not.
    p = tmp_path / "p.yaml"
    p.write_text("proposer:\n  learning_rate: 3e-6\n")
    assert load_params(p).proposer.learning_rate == 3e-6


def test_int_accepted_for_float():
    assert load_params({"vocab_dropout": {"alpha": 1}}).vocab_dropout.alpha == 1.0


@pytest.mark.parametrize("profile", sorted(PROFILE_PRESETS))
def test_yaml_round_trip_is_lossless(tmp_path, profile):
    cfg = load_params({"profile": profile, "vocab_dropout": {"alpha": 0.85},
                       "proposer": {"learning_rate": 1.5e-7}, "run_id": "r1",
                       "evaluation": {"data_dir": "/data", "limit": 7}})
    path = save_params(cfg, tmp_path / "config.yaml")
    again = load_params(path)
    assert again == cfg
    assert isinstance(again, ExperimentConfig)
    # the file is plain YAML with every section written out
    data = yaml.safe_load(path.read_text())
    assert set(data) == {f.name for f in dataclasses.fields(ExperimentConfig)}


def test_notebook_params_keeps_only_parameters():
    import math

    ns = {"seed": 3, "model": {"proposer": "tiny-random"}, "In": [], "Out": {},
          "get_ipython": print, "math": math, "_": 1, "_i1": "x", "load_params": load_params}
    assert notebook_params(ns) == {"seed": 3, "model": {"proposer": "tiny-random"}}
    ns["alph"] = 0.5  # a misspelt papermill parameter fails loudly
    with pytest.raises(ConfigError, match="alph"):
        load_params(notebook_params(ns))


def test_docs_config_table_is_current():
    """docs/config.md embeds `vdlib params describe`; regenerate it when the config changes."""
    import io
    from contextlib import redirect_stdout

    from vdlib.app.cli import main

    buf = io.StringIO()
    with redirect_stdout(buf):
        main(["params", "describe"])
    doc = (ROOT / "docs/config.md").read_text(encoding="utf-8")
    assert buf.getvalue() in doc, "docs/config.md is stale: run `vdlib params describe`"


def test_importing_the_config_loads_no_heavy_package():
    """`import vdlib.config.experiment` (and the sections it declares) must stay light: notebooks
    and the CLI validate params before torch, datasets or vLLM load."""
    import subprocess
    import sys

    code = ("import sys, vdlib.config; heavy = [m for m in ('torch', 'datasets', 'transformers', "
            "'vllm', 'vdlib.evaluation', 'vdlib.engines.models') if m in sys.modules]; "
            "print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_help_texts_cite_sources_by_name_not_local_paths():
    for key, _default, help_text in describe():
        assert "../" not in help_text and "shared/" not in help_text, key


def test_resolved_config_keys_are_all_read_somewhere():
    """Every leaf key of a resolved config appears as an attribute or string in vdlib/ outside
    the config modules (a key nothing reads is dead)."""
    import re

    sources = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "vdlib").rglob("*.py")
                        if not p.name.startswith("config"))
    leaves = {key.rsplit(".", 1)[-1] for key, _d, _h in describe()}
    dead = sorted(k for k in leaves if not re.search(rf"[.\"']{k}\b", sources))
    assert dead == []


@pytest.mark.parametrize("profile", [[1], {"a": 1}, 3])
def test_a_profile_that_is_not_a_name_is_a_config_error(profile):
    with pytest.raises(ConfigError, match=r"profile = .* must be one name; allowed values: "
                                          r"paper, gpu, tiny"):
        load_params({"profile": profile})


def test_model_names_beyond_any_path_are_a_short_config_error():
    with pytest.raises(ConfigError) as e:
        load_params({"profile": "tiny", "model": {"proposer": "x" * 300_000}})
    msg = str(e.value)
    assert "model.proposer" in msg and "300,000 characters long" in msg and len(msg) < 500
    # a name that no filesystem can hold but under the cap: still a clean, bounded error
    with pytest.raises(ConfigError) as e:
        load_params({"profile": "tiny", "model": {"proposer": "y" * 3000}})
    assert "is not a known model" in str(e.value) and len(str(e.value)) < 500
