"""Typed experiment configuration: every paper hyperparameter, validated before any model loads.

The sections (one dataclass per concern, each field with its default, help text and rules) are
declared in :mod:`vdlib.config_sections` and re-exported here; this module holds the profiles,
loading, merging, validation and the parameter table. Import every name from ``vdlib.config``.

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
vdlib.config.ConfigError: vocab_dropout.alpha = 1.5 is out of range; allowed: 0 < alpha <= 1
>>> merge_params({"evaluation": {"runs": 3, "limit": None}}, {"evaluation": {"runs": 1}})
{'evaluation': {'runs': 1, 'limit': None}}
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import os
import re
import types
import typing
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml

from vdlib.config_fields import param
from vdlib.config_runtime import (
    ENGINE_BACKENDS,
    TRACKER_NAMES,
    EngineConfig,
    LauncherConfig,
    SlurmConfig,
)
from vdlib.config_sections import (
    KNOWN_BENCHMARKS,
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

__all__ = [
    "ConfigError",
    "read_params_file",
    "read_yaml_file",
    "ExperimentConfig",
    "ModelConfig",
    "GRPOConfig",
    "VocabDropoutConfig",
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


class ConfigError(ValueError):
    """Invalid parameters. The message names the dotted key and what is allowed."""


# ----------------------------------------------------------------------------- profiles

_TINY_GRPO = {"precision": "float32", "gradient_checkpointing": False, "global_batch_size": 1,
              "micro_batch_size_update": 4, "rollout_batch_size": 1, "max_response_length": 128,
              "max_steps": 2, "epochs": 1}

PROFILE_PRESETS: dict[str, dict[str, Any]] = {
    "paper": {},
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
        "warm_start": {"mode": "sft"},
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


_FLOAT_RE = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def _shown(value: Any) -> str:
    """``value`` as an error message shows it: its ``repr``, cut short (a long string, a long
    or deep list or mapping: ``...``), so that no message formats an unbounded value.

    >>> _shown([[1, 2]] * 1000)
    '[[1, 2], [1, 2], [1, 2], [1, 2], [1, 2], [1, 2], ...]'
    >>> len(_shown("x" * 10**6)) < 100
    True
    """
    import reprlib

    short = reprlib.Repr()
    short.maxlevel, short.maxstring, short.maxother, short.maxlong = 2, 80, 80, 40
    short.maxlist = short.maxtuple = short.maxdict = short.maxset = 6
    text = short.repr(value)
    return text if len(text) <= 120 else text[:57] + "..." + text[-60:]


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
        raise ConfigError(f"{key} = {_shown(value)} has the wrong type; expected {_type_name(tp)}")
    if origin is list:
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{key} = {_shown(value)} has the wrong type; expected "
                              f"{_type_name(tp)}")
        return [_coerce(f"{key}[{i}]", v, get_args(tp)[0]) for i, v in enumerate(value)]
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        # PyYAML (YAML 1.1) reads "1e-6" as a string: accept numeric strings for floats.
        if isinstance(value, str) and _FLOAT_RE.match(value.strip()):
            return float(value)
    elif tp is str:
        if isinstance(value, str):
            return value
    raise ConfigError(f"{key} = {_shown(value)} has the wrong type; expected {_type_name(tp)}")


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
        shown = value[:200] if isinstance(value, str) else _shown(value)
        hint = difflib.get_close_matches(shown, [str(c) for c in choices], n=1)
        extra = f" (did you mean {hint[0]!r}?)" if hint else ""
        raise ConfigError(f"{key} = {_shown(value)} is not allowed{extra}; allowed values: "
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
        raise ConfigError(f"{key} = {_shown(value)} is out of range; allowed: {lo}{name}{hi}")


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
        raise ConfigError(f"unknown key {_shown(prefix + str(k))}{extra}; allowed keys"
                          f"{' in ' + prefix.rstrip('.') if prefix else ''}: "
                          f"{', '.join(fields)}")
    kwargs = {}
    for name, f in fields.items():
        key = f"{prefix}{name}"
        tp = hints[name]
        if dataclasses.is_dataclass(tp):
            sub = data.get(name) or {}
            if not isinstance(sub, dict):
                raise ConfigError(f"{key} = {_shown(sub)} must be a mapping of keys to values; "
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
    for i, b in enumerate(cfg.evaluation.benchmarks):
        if b not in KNOWN_BENCHMARKS:
            raise ConfigError(f"evaluation.benchmarks[{i}] = {b!r} is not a known benchmark; "
                              f"allowed values: {', '.join(KNOWN_BENCHMARKS)}")
    if cfg.arms:
        from vdlib.arms import ARMS

        for i, arm in enumerate(cfg.arms):
            if arm not in ARMS:
                raise ConfigError(f"arms[{i}] = {arm!r} is not a known arm; allowed values: "
                                  f"{', '.join(ARMS.names())}")
    if not cfg.seeds:
        raise ConfigError("seeds = [] is empty; allowed: a non-empty list of integers >= 0")
    for i, seed in enumerate(cfg.seeds):  # the same rule as seed
        _check_rules(f"seeds[{i}]", seed, {"ge": 0})
    for key in ("experiment", "run_id"):
        _check_path_component(key, getattr(cfg, key))
    if cfg.tracking != "none":
        from vdlib.tracking import check_tracker

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


def _check_path_component(key: str, value: str | None) -> None:
    """``experiment`` and ``run_id`` name one folder: a single path component."""
    if value is None:
        return
    if not value or value in (".", "..") or "/" in value or "\\" in value or "\0" in value:
        raise ConfigError(f"{key} = {value!r} must be a single folder name (no '/', not '.' "
                          "or '..', not empty): it names a folder under output_dir")


def _check_model_name(key: str, name: str) -> None:
    """A model is a registered name, an existing local path, or a Hub id 'org/name'."""
    from vdlib.models import model_names  # deferred: keeps `import vdlib.config` light

    names = model_names()
    if name in names or Path(name).expanduser().exists():
        return
    if re.match(r"^[\w.-]+/[\w.-]+$", name) and not name.startswith((".", "/")):
        return
    hint = difflib.get_close_matches(name, names, n=1)
    extra = f" (did you mean {hint[0]!r}?)" if hint else ""
    raise ConfigError(f"{key} = {name!r} is not a known model{extra}; allowed values: "
                      f"{', '.join(names)}, a Hugging Face id 'org/name', or an existing "
                      "local path")


class _StrictLoader(yaml.SafeLoader):
    """A YAML loader that refuses a key given twice in one mapping."""


#: Bounds on a YAML file vdlib reads (a params file, a run's ``config.yaml``): its size, and how
#: many values it holds and how deeply they nest once every alias is expanded. An alias bomb (a
#: few hundred bytes that expand to billions of values) is refused before it is built.
MAX_YAML_BYTES = 1 << 20
MAX_YAML_VALUES = 100_000
MAX_YAML_DEPTH = 64


def _check_expansion(root: yaml.Node) -> None:
    """Refuse a composed YAML document whose values, every alias expanded, number more than
    :data:`MAX_YAML_VALUES` or nest deeper than :data:`MAX_YAML_DEPTH`, or that holds an alias
    inside the value it names. Each node is visited once (aliases share nodes)."""
    done: dict[int, tuple[int, int]] = {}  # id(node) -> (values, depth) once expanded
    active: set[int] = set()

    def walk(node: yaml.Node, depth: int) -> tuple[int, int]:
        key = id(node)
        if key in done:
            return done[key]
        if key in active:
            raise ConfigError(f"line {node.start_mark.line + 1}: an alias names a value that "
                              "contains it; write the values out")
        if depth > MAX_YAML_DEPTH:
            raise ConfigError(f"values nest more than {MAX_YAML_DEPTH} levels deep")
        if isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = node.value
        else:
            children = []
        active.add(key)
        values, height = 1, 1
        for child in children:
            n, h = walk(child, depth + 1)
            values, height = values + n, max(height, h + 1)
            if values > MAX_YAML_VALUES:
                raise ConfigError(f"more than {MAX_YAML_VALUES} values once its aliases are "
                                  "expanded (an alias bomb?); write the values out")
        if depth + height > MAX_YAML_DEPTH + 1:
            raise ConfigError(f"values nest more than {MAX_YAML_DEPTH} levels deep")
        active.discard(key)
        done[key] = (values, height)
        return done[key]

    walk(root, 1)


def read_yaml_file(path: str | os.PathLike, what: str = "params file") -> Any:
    """The data of YAML file ``path`` (None if empty), read within bounds: at most
    :data:`MAX_YAML_BYTES`, at most :data:`MAX_YAML_VALUES` values nested at most
    :data:`MAX_YAML_DEPTH` deep with every alias expanded (checked on the composed document,
    before anything is built), no key given twice in one mapping, safe tags only. Anything
    else is a one-line :class:`ConfigError` naming ``what`` and ``path``."""
    path = Path(path)
    label = f"{what} {str(path)!r}"
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_YAML_BYTES + 1)
    except OSError as e:
        raise ConfigError(f"{label} cannot be read ({e.strerror or e})") from None
    if len(raw) > MAX_YAML_BYTES:
        raise ConfigError(f"{label} is larger than {MAX_YAML_BYTES >> 10} KiB; a {what} "
                          "holds a few settings")
    try:
        loader = _StrictLoader(raw.decode("utf-8"))
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _check_expansion(node)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except ConfigError as e:
        raise ConfigError(f"{label}: {e}") from None
    except RecursionError:
        raise ConfigError(f"{label}: values nest more than {MAX_YAML_DEPTH} levels deep"
                          ) from None
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise ConfigError(f"{label} is not valid YAML: {_yaml_problem(e)}") from None


def _yaml_problem(error: Exception) -> str:
    """A YAML or decoding error in one short line: what and where (line, column)."""
    if isinstance(error, yaml.MarkedYAMLError):
        mark = error.problem_mark or error.context_mark
        what = " ".join(x for x in (error.context, error.problem) if x) or type(error).__name__
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
    else:
        what, where = (str(error) or type(error).__name__), ""
    what = " ".join(what.split())
    return (what if len(what) <= 160 else what[:157] + "...") + where


def _strict_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *defaults`: later keys override it
            continue
        key = loader.construct_object(key_node, deep=deep)
        line = key_node.start_mark.line + 1
        if isinstance(key, list | dict | set):
            raise ConfigError(f"line {line}: a key must be a single value, not "
                              f"{type(key).__name__} {_shown(key)}")
        if key in seen:
            raise ConfigError(f"key {_shown(key)} is given twice in one mapping (lines {seen[key]} "
                              f"and {line}); keep one")
        seen[key] = line
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _strict_mapping)


def read_params_file(path: str | os.PathLike) -> dict[str, Any]:
    """The mapping in params file ``path``: a missing path, a directory, invalid YAML, a key
    given twice, a file beyond the bounds of :func:`read_yaml_file` (size, aliases), an empty
    file and a non-mapping are each a :class:`ConfigError` that says so."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"params file {str(path)!r} is a directory; give a .yaml file in it")
    if not path.is_file():
        raise ConfigError(f"params file {str(path)!r} does not exist")
    data = read_yaml_file(path)
    if data is None:
        raise ConfigError(f"params file {str(path)!r} is empty; write at least the keys you "
                          "change (e.g. profile: tiny), or {} for the paper defaults")
    if not isinstance(data, dict):
        raise ConfigError(f"params file {str(path)!r} must hold a mapping of keys to values, "
                          f"got {type(data).__name__}")
    return data


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
    from vdlib.artifacts import atomic_write_text
    from vdlib.layout import config_text

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
