"""A results file, checked whole before any table reads it (:mod:`vdlib.report.results` and
:mod:`vdlib.report.results_single_policy` re-use it; ``vdlib results`` runs it first): read
bounded (:mod:`vdlib.utils.safe_read`), valid JSON without NaN, Infinity or a number beyond a
float's range, every record's keys and numbers in range, one record per arm, seed and
iteration; anything else is one :class:`ResultsFileError` line naming the file, record and key.
:func:`finite_or_null` keeps non-finite numbers out of what a report writes.

:func:`pooling_rule` is how every report pools a file's pass@1 over seeds: the file's
``evaluation.per_seed`` and ``evaluation.se_ddof`` (what the notebooks' config says; vdlib
writes both into every results file), or, for a file written before they were recorded (the
committed ``docs/results/*.json``), the evaluation config's defaults: the params those runs
used (``params/gpu-small/*.yaml``) leave both unset, so the runs' config pooled by them."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from vdlib.config.config_evaluation import EvaluationConfig
from vdlib.config.names import name_problem
from vdlib.evaluation.stats import PER_SEED_CHOICES, pooling_note
from vdlib.utils import safe_read
from vdlib.utils.stats import SE_DDOF_CHOICES

__all__ = ["RECORD_FIELDS", "ALPHA_RECORD_FIELDS", "PASS1_PREFIX", "ResultsFileError",
           "RESULTS_MAX_BYTES", "MAX_ABS_VALUE", "MAX_ITERATION", "MAX_SEED", "is_finite_number",
           "finite_or_null", "load_results", "read_json_file", "PoolingRule", "pooling_rule",
           "check_pooling"]

#: the loop metrics each record carries (names of ``iter_<t>/metrics.json``)
RECORD_FIELDS = ("valid_fraction", "self_bleu", "vendi", "novelty_rate", "cumulative_vendi",
                 "unique_tokens", "proposer_entropy", "curriculum_size", "proposer_mean_reward",
                 "valid_questions", "generated", "mean_acc", "kept_fraction")
#: the alphas each record's iteration ran at (``iter_<t>/metrics.json``: the proposer's GRPO
#: rollouts and the curriculum generation; 1.0 unmasked), so that a schedule's trajectory, the
#: adaptive one's above all, is read from the results file; files exported before they were
#: recorded lack them
ALPHA_RECORD_FIELDS = ("alpha_train", "alpha_gen")
#: record keys of solver pass@1: ``pass1_<benchmark>`` (mean over evaluation runs, in %) and
#: ``pass1_<benchmark>_runs`` (each run's accuracy, in %)
PASS1_PREFIX = "pass1_"

class ResultsFileError(ValueError):
    """A results file that cannot be used: the message names the file and, for a record, its
    index and key (one line from ``vdlib results``)."""


#: a results file larger than this is refused unread (the committed ones are a few tens of KB)
RESULTS_MAX_BYTES = 64 << 20


#: the largest magnitude of a number in a results file: beyond any metric, pass@1 or count, and
#: small enough that means, SEs and t statistics over seeds stay finite
MAX_ABS_VALUE = 1e15
#: the largest iteration of a record (``iterations``' bound) and the largest seed (``seed``'s)
MAX_ITERATION = 1000
MAX_SEED = 2**32 - 1


def _not_json_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    """A JSON number with a fraction or exponent; one beyond a float's range (``1e309``, which
    Python reads as infinity) is refused."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is beyond a float's range")
    return value


def is_finite_number(value: Any) -> bool:
    """A JSON number that is finite and at most :data:`MAX_ABS_VALUE` in magnitude (a bool is
    not one; an integer too large for a float is not one)."""
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and abs(value) <= MAX_ABS_VALUE)


def finite_or_null(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None: what a report JSON may hold."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_null(v) for v in value]
    return value


def _check_record(path: Any, i: int, r: Any) -> None:
    """Raise :class:`ResultsFileError` unless record ``i`` is what the report reads: an object
    with ``arm`` (text), ``seed`` (an integer, or null for ``base``), ``iteration`` (an integer
    >= 0), finite numbers or null in :data:`RECORD_FIELDS`, :data:`ALPHA_RECORD_FIELDS` and
    ``pass1_<benchmark>``, and a list
    of finite numbers in ``pass1_<benchmark>_runs``."""
    where = f"{path}: records[{i}]"
    if not isinstance(r, dict):
        raise ResultsFileError(f"{where} is a {type(r).__name__}, not an object")
    for key in ("arm", "seed", "iteration"):
        if key not in r:
            raise ResultsFileError(f"{where} has no {key!r}")
    problem = name_problem(r["arm"]) if r["arm"] != "base" else None
    if problem:  # the rule of experiment, arm and run names (vdlib.config.names)
        raise ResultsFileError(f"{where}: 'arm' is not a name ({problem})")
    seed = r["seed"]
    if not (seed is None or isinstance(seed, int) and not isinstance(seed, bool)
            and 0 <= seed <= MAX_SEED):
        raise ResultsFileError(f"{where}: 'seed' is not an integer 0 to {MAX_SEED} or null")
    t = r["iteration"]
    if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t <= MAX_ITERATION:
        raise ResultsFileError(f"{where}: 'iteration' is not an integer 0 to {MAX_ITERATION}")
    for key, value in r.items():
        if not isinstance(key, str):
            continue
        numeric = key in RECORD_FIELDS or key in ALPHA_RECORD_FIELDS
        if numeric or (key.startswith(PASS1_PREFIX) and key != "pass1_unfinished"
                       and not key.endswith("_runs")):
            if value is not None and not is_finite_number(value):
                raise ResultsFileError(f"{where}: {key!r} is not a finite number (at most "
                                       "1e15 in magnitude) or null")
        elif key.startswith(PASS1_PREFIX) and key.endswith("_runs"):
            if not isinstance(value, list) or not all(is_finite_number(v) for v in value):
                raise ResultsFileError(f"{where}: {key!r} is not a list of finite numbers (at "
                                       "most 1e15 in magnitude)")


class PoolingRule(NamedTuple):
    """How a file's pass@1 is pooled over seeds (:func:`vdlib.evaluation.pool_runs`):
    ``evaluation.per_seed``, ``evaluation.se_ddof`` and where they came from."""

    per_seed: str
    se_ddof: int
    source: str

    def note(self) -> str:
        """The line printed under each table (:func:`vdlib.evaluation.pooling_note`)."""
        return pooling_note(self.per_seed, self.se_ddof, self.source)

    def as_dict(self) -> dict[str, Any]:
        return {"per_seed": self.per_seed, "se_ddof": self.se_ddof, "source": self.source}


#: where the rule of a file that records none comes from
DEFAULT_SOURCE = ("the evaluation config's defaults, as the file records no rule and the "
                  "params of its runs leave both unset")


def check_pooling(path: Any, data: Mapping[str, Any]) -> None:
    """A :class:`ResultsFileError` unless the file's ``evaluation`` is absent or an object whose
    ``per_seed`` and ``se_ddof`` (each optional) are allowed values."""
    ev = data.get("evaluation")
    if ev is None:
        return
    if not isinstance(ev, dict):
        raise ResultsFileError(f"{path}: 'evaluation' is not an object")
    if "per_seed" in ev and ev["per_seed"] not in PER_SEED_CHOICES:
        raise ResultsFileError(f"{path}: evaluation.per_seed = {str(ev['per_seed'])[:40]!r}; "
                               f"allowed: {', '.join(PER_SEED_CHOICES)}")
    if "se_ddof" in ev and (isinstance(ev["se_ddof"], bool)
                            or ev["se_ddof"] not in SE_DDOF_CHOICES):
        raise ResultsFileError(f"{path}: evaluation.se_ddof = {str(ev['se_ddof'])[:40]!r}; "
                               "allowed: 0 (population SD), 1 (sample SD)")


def pooling_rule(data: Mapping[str, Any]) -> PoolingRule:
    """The file's pooling rule: ``evaluation.per_seed`` and ``evaluation.se_ddof`` where it
    records them (a file :func:`load_results` accepted), else :class:`EvaluationConfig`'s
    defaults (:data:`DEFAULT_SOURCE`).

    >>> pooling_rule({"evaluation": {"per_seed": "mean", "se_ddof": 1}})
    PoolingRule(per_seed='mean', se_ddof=1, source='the file')
    >>> pooling_rule({"records": []})[:2]
    ('first_run', 0)
    """
    ev = data.get("evaluation") if isinstance(data.get("evaluation"), dict) else {}
    default = EvaluationConfig()
    if "per_seed" in ev and "se_ddof" in ev:
        return PoolingRule(ev["per_seed"], int(ev["se_ddof"]), "the file")
    if "per_seed" in ev or "se_ddof" in ev:
        return PoolingRule(ev.get("per_seed", default.per_seed),
                           int(ev.get("se_ddof", default.se_ddof)),
                           "the file, the rest from the evaluation config's defaults")
    return PoolingRule(default.per_seed, default.se_ddof, DEFAULT_SOURCE)


def load_results(path: str | os.PathLike, data: Any = None) -> dict[str, Any]:
    """A results JSON (:func:`collect_results`), checked whole before anything reads it: at most
    :data:`RESULTS_MAX_BYTES`, valid JSON without NaN or Infinity, an object holding a
    ``records`` list, each record as :func:`_check_record` wants it, one record per arm, seed
    and iteration. Anything else is a
    :class:`ResultsFileError` naming the file (and the record and key). ``data``: the file's
    value where the caller has read it already (:func:`read_json_file`); checked the same."""
    data = read_json_file(path) if data is None else data
    if not isinstance(data, dict) or not isinstance(data.get("records"), list):
        what = f"a {type(data).__name__}" if not isinstance(data, dict) else "an object"
        raise ResultsFileError(f"{path}: not a results file (no 'records' list in {what})")
    check_pooling(path, data)
    seen: dict[tuple[Any, Any, Any], int] = {}
    for i, r in enumerate(data["records"]):
        _check_record(path, i, r)
        first = seen.setdefault((r["arm"], r["seed"], r["iteration"]), i)
        if first != i:  # the summary and effects tables need one record per arm, seed, iteration
            seed = "" if r["seed"] is None else f" seed {r['seed']}"
            raise ResultsFileError(f"{path}: records[{first}] and records[{i}] are both "
                                   f"{r['arm']}{seed} iteration {r['iteration']}; keep one "
                                   "(merge_results keeps a rerun's records)")
    return data


def read_json_file(path: str | os.PathLike) -> Any:
    """A results file's JSON value: at most :data:`RESULTS_MAX_BYTES`, UTF-8, valid JSON
    without NaN or Infinity, else a :class:`ResultsFileError` naming the file."""
    path = Path(path)
    try:  # bounded, non-blocking; a link the user names is followed to a regular file only
        text = safe_read.read_text(path, RESULTS_MAX_BYTES, follow_links=True)
    except safe_read.UnsafeFileError as e:
        raise ResultsFileError(f"{e}; not a results file") from None
    except OSError as e:
        raise ResultsFileError(f"{path}: cannot be read ({e.strerror or e})") from None
    except UnicodeDecodeError:
        raise ResultsFileError(f"{path}: not UTF-8 text; not a results file") from None
    if not text.strip():
        raise ResultsFileError(f"{path}: empty; not a results file")
    try:
        data = json.loads(text, parse_constant=_not_json_constant, parse_float=_finite_float)
    except json.JSONDecodeError as e:
        raise ResultsFileError(f"{path}: not valid JSON ({e.msg} at line {e.lineno}, column "
                               f"{e.colno}); truncated or not a results file") from None
    except (ValueError, RecursionError) as e:
        raise ResultsFileError(f"{path}: not a results file ({str(e)[:200]})") from None
    return data
