"""Typed experiment configuration: every paper hyperparameter, validated before any model loads.

The sections (one dataclass per concern, each field with its default, help text and rules) are
declared in :mod:`vdlib.config.config_sections` and re-exported here; this module holds the
profiles, loading, merging, validation and the parameter table. Import every name from
``vdlib.config``.

The defaults are the paper's values (its appendix table "GRPO training hyperparameters",
``tab:training_hypers``, and the setup section), i.e. the ``paper`` profile. The ``tiny`` and
``gpu`` profiles are presets merged over those defaults (:data:`PROFILE_PRESETS`); a params YAML
(or a notebook's parameters) is merged over the preset. Every field carries help text citing where
its value comes from (``describe()`` prints them; ``docs/config.md`` is generated from it).

Merging order: dataclass defaults (paper) -> profile preset -> user values. Validation then checks
unknown keys, types, allowed values, ranges and cross-field constraints; every error names the
dotted key and the allowed values.

>>> cfg = load_params({"profile": "tiny", "vocab_dropout": {"alpha": 0.75}})
>>> cfg.model.proposer, cfg.vocab_dropout.alpha
('smollm2-135m', 0.75)
>>> load_params({"vocab_dropout": {"alpha": 1.5}})
Traceback (most recent call last):
...
vdlib.config.config_yaml.ConfigError: vocab_dropout.alpha = 1.5 is out of range; allowed: ...
>>> merge_params({"evaluation": {"runs": 3, "limit": None}}, {"evaluation": {"runs": 1}})
{'evaluation': {'runs': 1, 'limit': None}}
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import math
import os
import re
import types
import typing
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml

from vdlib.config.config_fields import param
from vdlib.config.config_runtime import (
    ENGINE_BACKENDS,
    TRACKER_NAMES,
    EngineConfig,
    LauncherConfig,
    SlurmConfig,
)
from vdlib.config.config_sections import (
    KNOWN_BENCHMARKS,
    AdaptiveScheduleConfig,
    CurriculumConfig,
    EvaluationConfig,
    ExperimentConfig,
    GRPOConfig,
    MetricsConfig,
    ModelConfig,
    ScoringConfig,
    SinglePolicyConfig,
    VerificationConfig,
    VocabDropoutConfig,
    WarmStartConfig,
)
from vdlib.config.config_yaml import (
    MAX_YAML_BYTES,
    MAX_YAML_DEPTH,
    MAX_YAML_VALUES,
    ConfigError,
    config_text,
    read_params_file,
    read_yaml_file,
    shown,
)
from vdlib.config.folder_keys import check_curricula_dir, check_output_dir
from vdlib.config.model_names import model_names
from vdlib.config.names import check_name

__all__ = [
    "ConfigError",
    "check_name",
    "MAX_SEEDS",
    "MAX_LIST_ITEMS",
    "MAX_YAML_BYTES",
    "MAX_YAML_VALUES",
    "MAX_YAML_DEPTH",
    "read_params_file",
    "read_yaml_file",
    "ExperimentConfig",
    "ModelConfig",
    "GRPOConfig",
    "VocabDropoutConfig",
    "AdaptiveScheduleConfig",
    "ScoringConfig",
    "CurriculumConfig",
    "EvaluationConfig",
    "WarmStartConfig",
    "MetricsConfig",
    "VerificationConfig",
    "SinglePolicyConfig",
    "EngineConfig",
    "LauncherConfig",
    "SlurmConfig",
    "TRACKER_NAMES",
    "ENGINE_BACKENDS",
    "KNOWN_BENCHMARKS",
    "PROFILE_PRESETS",
    "load_params",
    "merge_params",
    "save_params",
    "to_dict",
    "notebook_params",
    "describe",
    "param",
]



# ----------------------------------------------------------------------------- profiles

_TINY_GRPO = {"precision": "float32", "gradient_checkpointing": False, "global_batch_size": 1,
              "micro_batch_size_update": 4, "rollout_batch_size": 1, "max_response_length": 128,
              "max_steps": 2, "epochs": 1}

PROFILE_PRESETS: dict[str, dict[str, Any]] = {
    # paper, App. 'Compute requirements': "Each run takes 2 NVIDIA H200 GPUs"
    "paper": {"launcher": {"gpus_per_run": 2}},
    "gpu": {
        "model": {"proposer": "Qwen/Qwen3-0.6B-Base", "dtype": "bfloat16", "device": "cuda",
                  "transfer": "Qwen/Qwen3-0.6B-Base"},
        "seeds": [0],
        "iterations": 2,
        "curriculum": {"num_questions": 256},
        "metrics": {"embedder": "minilm"},
        "evaluation": {"runs": 1, "limit": 100},
        "engine": {"backend": "vllm"},
    },
    "tiny": {
        "model": {"proposer": "smollm2-135m", "dtype": "float32", "device": "cpu",
                  "transfer": "smollm2-135m", "instruct": "smollm2-135m"},
        "seeds": [0],
        "iterations": 2,
        "proposer": _TINY_GRPO,
        "solver": _TINY_GRPO,
        "scoring": {"num_solver_samples": 5, "max_new_tokens": 96},
        # the top 6 of SmolLM2's 30 layers at a higher rate: the format in 45 s, not 105 s, on
        # 2 cores, with the quickstart's valid questions kept (README, "How long it takes")
        "warm_start": {"mode": "sft", "train_layers": 6, "learning_rate": 5e-4},
        "metrics": {"embedder": "minilm"},
        "curriculum": {"num_questions": 12, "batch_size": 12, "max_new_tokens": 128},
        "evaluation": {"benchmarks": ["gsm_symbolic"], "runs": 1, "limit": 20,
                       "max_context": 512},
        "verification": {"backend": "local", "correctness_model": "smollm2-135m",
                         "transfer_model": "smollm2-135m", "max_new_tokens": 256},
        "transfer": {**_TINY_GRPO, "num_generations": 4},
        "single_policy": {"dataset": "gsm_symbolic", "train_examples": 64},
        "engine": {"backend": "hf"},
    },
}


# ----------------------------------------------------------------------------- merge + validate


def merge_params(base: dict, over: dict) -> dict:
    """``over`` merged into a copy of ``base``: nested mappings key by key, anything else
    replaced (how a profile preset, a params file and command-line overrides combine)."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge_params(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


#: the most seeds a config lists (a grid runs every arm for every seed)
MAX_SEEDS = 100
#: the most entries of any list-valued key
MAX_LIST_ITEMS = 1000

_FLOAT_RE = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def _type_name(tp: Any) -> str:
    if get_origin(tp) in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in get_args(tp))
    if get_origin(tp) is list:
        return f"list of {_type_name(get_args(tp)[0])}"
    if get_origin(tp) is Literal:
        return "one of " + ", ".join(map(repr, get_args(tp)))
    return "null" if tp is type(None) else getattr(tp, "__name__", str(tp))


def _coerce(key: str, value: Any, tp: Any) -> Any:
    """Check ``value`` against annotation ``tp``; return it (ints widened to float)."""
    origin = get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = get_args(tp)
        if value is None and type(None) in args:
            return None
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(key, value, a)
            except ConfigError:
                pass
        raise ConfigError(f"{key} = {shown(value)} has the wrong type; expected {_type_name(tp)}")
    if origin is list:
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{key} = {shown(value)} has the wrong type; expected "
                              f"{_type_name(tp)}")
        if len(value) > MAX_LIST_ITEMS:
            raise ConfigError(f"{key} holds {len(value):,} entries; allowed: at most "
                              f"{MAX_LIST_ITEMS}")
        return [_coerce(f"{key}[{i}]", v, get_args(tp)[0]) for i, v in enumerate(value)]
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            try:
                return float(value)
            except OverflowError:  # an integer beyond a float's range: as 1e999 reads
                return math.inf if value > 0 else -math.inf
        # PyYAML (YAML 1.1) reads "1e-6" as a string: accept numeric strings for floats.
        if isinstance(value, str) and len(value) <= 400 and _FLOAT_RE.match(value.strip()):
            return float(value)
    elif tp is str:
        if isinstance(value, str):
            return value
    raise ConfigError(f"{key} = {shown(value)} has the wrong type; expected {_type_name(tp)}")


def _check_rules(key: str, value: Any, meta: typing.Mapping[str, Any]) -> None:
    if value is None:
        return
    if isinstance(value, list):  # each entry of a list follows the field's rules
        for i, item in enumerate(value):
            _check_rules(f"{key}[{i}]", item, meta)
        return
    name = key.rsplit(".", 1)[-1]
    choices = meta.get("choices")
    if choices and value not in choices:
        text = value[:200] if isinstance(value, str) else shown(value)
        hint = difflib.get_close_matches(text, [str(c) for c in choices], n=1)
        extra = f" (did you mean {hint[0]!r}?)" if hint else ""
        raise ConfigError(f"{key} = {shown(value)} is not allowed{extra}; allowed values: "
                          f"{', '.join(map(str, choices))}")
    lo, hi = "", ""
    if meta.get("gt") is not None:
        lo = f"{meta['gt']:g} < "
    elif meta.get("ge") is not None:
        lo = f"{meta['ge']:g} <= "
    if meta.get("lt") is not None:
        hi = f" < {meta['lt']:g}"
    elif meta.get("le") is not None:
        hi = f" <= {meta['le']:g}"
    ok = ((meta.get("gt") is None or value > meta["gt"])
          and (meta.get("ge") is None or value >= meta["ge"])
          and (meta.get("lt") is None or value < meta["lt"])
          and (meta.get("le") is None or value <= meta["le"]))
    if not ok:
        raise ConfigError(f"{key} = {shown(value)} is out of range; allowed: {lo}{name}{hi}")


def _build(cls: type, data: Any, prefix: str) -> Any:
    """Build dataclass ``cls`` from ``data`` (a mapping), validating every key."""
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix or 'params'} must be a mapping of keys to values, "
                          f"got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = [k for k in data if k not in fields]
    if unknown:
        k = unknown[0]
        hint = difflib.get_close_matches(str(k), list(fields), n=1)
        extra = f" (did you mean {hint[0]!r}?)" if hint else ""
        raise ConfigError(f"unknown key {shown(prefix + str(k))}{extra}; allowed keys"
                          f"{' in ' + prefix.rstrip('.') if prefix else ''}: "
                          f"{', '.join(fields)}")
    kwargs = {}
    for name, f in fields.items():
        key = f"{prefix}{name}"
        tp = hints[name]
        if dataclasses.is_dataclass(tp):
            sub = data.get(name) or {}
            if not isinstance(sub, dict):
                raise ConfigError(f"{key} = {shown(sub)} must be a mapping of keys to values; "
                                  f"allowed keys in {key}: "
                                  f"{', '.join(x.name for x in dataclasses.fields(tp))}")
            base = dataclasses.asdict(f.default_factory())  # type: ignore[misc]
            kwargs[name] = _build(tp, merge_params(base, sub), key + ".")
            continue
        if name not in data:
            continue
        value = _coerce(key, data[name], tp)
        _check_rules(key, value, f.metadata)
        kwargs[name] = value
    return cls(**kwargs)


def _validate_cross(cfg: ExperimentConfig) -> None:
    s = cfg.scoring
    if s.tau_min > s.tau_max:
        raise ConfigError(f"scoring.tau_min = {s.tau_min} > scoring.tau_max = {s.tau_max}; "
                          "allowed: 0 <= tau_min <= tau_max <= 1")
    for role in ("proposer", "solver", "transfer"):
        g: GRPOConfig = getattr(cfg, role)
        if g.rollout_batch_size % g.global_batch_size:
            raise ConfigError(f"{role}.rollout_batch_size = {g.rollout_batch_size} must be a "
                              f"multiple of {role}.global_batch_size = {g.global_batch_size}")
        completions = g.global_batch_size * g.num_generations
        if completions % g.ppo_mini_batches:
            raise ConfigError(f"{role}.global_batch_size x num_generations = {completions} must "
                              f"be a multiple of {role}.ppo_mini_batches = {g.ppo_mini_batches}")
        per_step = completions // g.ppo_mini_batches  # completions per optimizer step
        if per_step % min(g.micro_batch_size_update, per_step):
            raise ConfigError(f"{role}.global_batch_size x num_generations / ppo_mini_batches = "
                              f"{per_step} must be a multiple of "
                              f"{role}.micro_batch_size_update = {g.micro_batch_size_update}")
    _validate_adaptive(cfg)
    for i, b in enumerate(cfg.evaluation.benchmarks):
        if b not in KNOWN_BENCHMARKS:
            raise ConfigError(f"evaluation.benchmarks[{i}] = {b!r} is not a known benchmark; "
                              f"allowed values: {', '.join(KNOWN_BENCHMARKS)}")
    if cfg.arms:
        from vdlib.config.arm_table import ARMS

        for i, arm in enumerate(cfg.arms):
            if arm not in ARMS:
                raise ConfigError(f"arms[{i}] = {shown(arm)} is not a known arm; allowed "
                                  f"values: {', '.join(ARMS.names())}")
            check_name(f"arms[{i}]", arm)
    if not cfg.seeds:
        raise ConfigError("seeds = [] is empty; allowed: a non-empty list of integers >= 0")
    for i, seed in enumerate(cfg.seeds):  # the same rule as seed
        _check_rules(f"seeds[{i}]", seed, {"ge": 0})
    if len(cfg.seeds) > MAX_SEEDS:
        raise ConfigError(f"seeds holds {len(cfg.seeds):,} seeds; allowed: 1 to {MAX_SEEDS} "
                          "(a grid runs every arm for every seed)")
    # one rule for every name that becomes a folder (vdlib.config.names)
    check_name("experiment", cfg.experiment)
    if cfg.run_id is not None:
        check_name("run_id", cfg.run_id)
    for i, name in enumerate(cfg.reference_experiments):
        check_name(f"reference_experiments[{i}]", name)
    check_output_dir(cfg.output_dir)
    check_curricula_dir(cfg.curricula_dir)
    if cfg.tracking != "none":
        from vdlib.utils.tracking import check_tracker

        try:
            check_tracker(cfg.tracking)
        except ImportError as e:
            raise ConfigError(f"tracking = {cfg.tracking!r}: {e}") from None
    for key, name in (("model.proposer", cfg.model.proposer), ("model.solver", cfg.model.solver),
                      ("model.transfer", cfg.model.transfer),
                      ("model.instruct", cfg.model.instruct)):
        if name is not None:
            _check_model_name(key, name)
    if not re.match(r"^(auto|cpu|mps|cuda(:\d+)?)$", cfg.model.device):
        raise ConfigError(f"model.device = {cfg.model.device!r} is not allowed; allowed values: "
                          "auto, cpu, cuda, cuda:N, mps")


def _validate_adaptive(cfg: ExperimentConfig) -> None:
    """The adaptive alpha schedule's cross-key rules (vdlib.method.adaptive_alpha)."""
    vd = cfg.vocab_dropout
    if vd.schedule != "adaptive":
        return
    if vd.alpha < vd.adaptive.alpha_min:
        raise ConfigError(f"vocab_dropout.alpha = {vd.alpha} < vocab_dropout.adaptive.alpha_min "
                          f"= {vd.adaptive.alpha_min}; allowed: alpha_min <= alpha <= 1 (the "
                          "adaptive schedule starts at alpha)")
    if vd.adaptive.diversity_signal == "cumulative_vendi" and cfg.metrics.embedder == "none":
        raise ConfigError("vocab_dropout.adaptive.diversity_signal = 'cumulative_vendi' needs "
                          "an embedder, but metrics.embedder = 'none'; allowed values: "
                          "self_bleu, or set metrics.embedder")


#: the longest model reference accepted (PATH_MAX on Linux)
MAX_MODEL_REF = 4096


def _check_model_name(key: str, name: str) -> None:
    """A model is a registered name, an existing local path, or a Hub id 'org/name'."""
    names = model_names()  # config's own data: no engine (nor torch) is imported
    if len(name) > MAX_MODEL_REF:  # no registered name, Hub id or path is that long
        raise ConfigError(f"{key} = {shown(name)} is {len(name):,} characters long; a model is "
                          f"a registered name ({', '.join(names)}), a Hugging Face id "
                          f"'org/name' or a local path of at most {MAX_MODEL_REF} characters")
    try:
        local = Path(name).expanduser().exists()
    except (OSError, ValueError):  # a name no filesystem can hold
        local = False
    if name in names or local:
        return
    if re.match(r"^[\w.-]+/[\w.-]+$", name) and not name.startswith((".", "/")):
        return
    hint = difflib.get_close_matches(name, names, n=1)
    extra = f" (did you mean {hint[0]!r}?)" if hint else ""
    raise ConfigError(f"{key} = {shown(name)} is not a known model{extra}; allowed values: "
                      f"{', '.join(names)}, a Hugging Face id 'org/name', or an existing "
                      "local path")


def load_params(source: str | os.PathLike | dict | None = None,
                overrides: dict[str, Any] | None = None) -> ExperimentConfig:
    """Resolve parameters into a validated :class:`ExperimentConfig`.

    ``source`` is a path to a params YAML (:func:`read_params_file`), a dict (e.g. a notebook's
    parameters), or None (the paper defaults). The profile preset named by ``profile`` is
    merged first, then ``source``, then ``overrides`` (e.g. command-line flags, validated
    like everything else). Raises :class:`ConfigError` naming the key and the allowed values;
    nothing is loaded.
    """
    if source is None:
        data: Any = {}
    elif isinstance(source, dict):
        data = source
    else:
        data = read_params_file(source)
    if not isinstance(data, dict):
        raise ConfigError(f"params must be a mapping of keys to values, got {type(data).__name__}")
    if overrides:
        data = merge_params(data, overrides)
    profile = data.get("profile", ExperimentConfig.profile)
    if not isinstance(profile, str):
        raise ConfigError(f"profile = {shown(profile)} must be one name; allowed values: "
                          f"{', '.join(PROFILE_PRESETS)}")
    if profile not in PROFILE_PRESETS:
        _check_rules("profile", profile, {"choices": tuple(PROFILE_PRESETS)})
    merged = merge_params(PROFILE_PRESETS[profile], data)
    cfg = _build(ExperimentConfig, merged, "")
    _validate_cross(cfg)
    return cfg


def to_dict(cfg: ExperimentConfig) -> dict[str, Any]:
    """The resolved config as plain data (what ``save_params`` writes)."""
    return dataclasses.asdict(cfg)


def save_params(cfg: ExperimentConfig, path: str | os.PathLike) -> Path:
    """Write the resolved config as YAML, atomically; ``load_params(path)`` gives it back."""
    from vdlib.utils.artifacts import atomic_write_text

    return atomic_write_text(path, config_text(cfg))


_IPYTHON_NAMES = {"In", "Out", "get_ipython", "exit", "quit", "open"}


def notebook_params(namespace: dict[str, Any]) -> dict[str, Any]:
    """The parameter values of a notebook namespace (``locals()`` after the parameters cell).

    Drops IPython's own names, private names, modules, functions and classes; everything else
    must be a config key, so a misspelt papermill parameter fails loudly in ``load_params``.
    """
    return {k: v for k, v in namespace.items()
            if not k.startswith("_") and k not in _IPYTHON_NAMES
            and not isinstance(v, types.ModuleType) and not callable(v)}


def describe(obj: Any = None, prefix: str = "") -> list[tuple[str, str, str]]:
    """(dotted key, paper-profile default, help) for every parameter, in declaration order."""
    obj = ExperimentConfig() if obj is None else obj
    rows: list[tuple[str, str, str]] = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            rows += describe(value, f"{prefix}{f.name}.")
        else:
            text = yaml.safe_dump(value, default_flow_style=True).strip()
            rows.append((prefix + f.name, text.removesuffix("...").strip(),
                         f.metadata.get("help", "")))
    return rows
