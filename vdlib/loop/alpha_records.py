"""The alpha an iteration of a run uses, read from the run folder's records.

The timetable schedules (``fixed``, ``linear``) need the config and the iteration alone; the
adaptive schedule (:mod:`vdlib.method.adaptive_alpha`) also reads the metrics of the finished
iterations, ``iter_<s>/metrics.json`` for s < t. Those files are in the manifest: a resumed run
verifies them before iteration t's stages run (a changed or missing one makes its stage and
every later one run again), so it reads the same records and gets the same alpha. Every stage
that needs alpha (the proposer's rollouts, the generation, the metrics) calls
:func:`run_phase_alphas` or passes :func:`alpha_history` on; the proposer stage writes the
decision into ``proposer_train.json`` (:func:`decision_record`) and later stages check that
they reach the same one (:func:`check_recorded_decision`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vdlib.config import layout
from vdlib.config.mask_settings import mask_schedule
from vdlib.method.mask_schedule import alpha_decision, phase_alphas
from vdlib.utils.safe_read import read_json

__all__ = ["alpha_history", "run_phase_alphas", "decision_record", "check_recorded_decision",
           "DECISION_KEY"]

#: the key of ``proposer_train.json`` that holds the adaptive schedule's decision
DECISION_KEY = "alpha_decision"
_METRICS_MAX_BYTES = 64 << 20  # as the runner's bound on metrics.json


def alpha_history(cfg: Any, run_dir: str | Path, t: int) -> list[dict[str, Any]] | None:
    """The metrics records of iterations 1 .. t-1 of ``run_dir`` when ``cfg``'s schedule reads
    them (adaptive), else None (nothing is read)."""
    if cfg.vocab_dropout.schedule != "adaptive":
        return None
    out = []
    for s in range(1, t):
        path = layout.iteration_dir(run_dir, s) / layout.METRICS_FILE
        record = read_json(path, _METRICS_MAX_BYTES)
        if not isinstance(record, dict):
            raise ValueError(f"{path} holds a {type(record).__name__}; the adaptive alpha "
                             "schedule needs a metrics record (a mapping)")
        out.append(record)
    return out


def run_phase_alphas(cfg: Any, run_dir: str | Path, t: int) -> dict[str, float]:
    """:func:`vdlib.method.mask_schedule.phase_alphas` of iteration ``t`` of the run in
    ``run_dir``, with its records where the schedule reads them."""
    return phase_alphas(mask_schedule(cfg), t, alpha_history(cfg, run_dir, t))


def decision_record(cfg: Any, history: list[dict[str, Any]] | None, t: int) -> dict[str, Any]:
    """``{"alpha_decision": {...}}`` (the controller's decision for iteration ``t``: alpha, rule,
    reason, inputs) for an adaptive schedule; {} for a timetable."""
    if cfg.vocab_dropout.schedule != "adaptive":
        return {}
    return {DECISION_KEY: alpha_decision(mask_schedule(cfg), t, history).as_record()}


def check_recorded_decision(cfg: Any, run_dir: str | Path, t: int) -> None:
    """Raise when iteration ``t``'s ``proposer_train.json`` records an alpha decision other than
    the one the run's records give now (records changed under a run: never expected, since the
    manifest verifies them)."""
    if cfg.vocab_dropout.schedule != "adaptive":
        return
    path = layout.iteration_dir(run_dir, t) / layout.PROPOSER_TRAIN_FILE
    recorded = read_json(path, _METRICS_MAX_BYTES).get(DECISION_KEY)
    now = decision_record(cfg, alpha_history(cfg, run_dir, t), t)[DECISION_KEY]
    if json.loads(json.dumps(now)) != recorded:
        raise RuntimeError(f"{path}: the recorded alpha decision {recorded!r} differs from the "
                           f"one the run's metrics records give now ({now!r}); the records "
                           "changed under the run")
