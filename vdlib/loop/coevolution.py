"""The co-evolution loop (paper Algorithm 1): resumable, deterministic, one folder per run.

For t = 1..T, in stages, each finished by an atomic write (so a killed run loses at most the
stage in progress and re-running the same command continues after the last finished stage):

1. ``proposer``: GRPO on the proposer prompt (G samples per prompt) with the train-phase mask of
   each rollout batch; rewards from the FROZEN previous solver
   (:class:`vdlib.loop.grpo_rewards.ProposerReward`).
   Writes ``proposer_rollouts.jsonl``, ``proposer_train.json``, then ``proposer_model/``.
2. ``generate``: the trained proposer writes K questions, a fresh gen-phase mask per batch.
   Writes ``generated.jsonl``.
3. ``score``: the frozen previous solver answers each valid question M times (majority answer,
   acc). Writes ``questions.jsonl``.
4. ``curriculum``: keep tau_min <= acc <= tau_max; target = the proposer's answer (paper) or the
   majority answer (R-Zero). Writes ``curriculum.jsonl``.
5. ``solver``: GRPO of the solver on the curriculum, binary reward against the target.
   Writes ``solver_train.json``, then ``solver_model/`` (an empty curriculum carries the previous
   solver forward unchanged, and says so).
6. ``metrics``: the iteration's numbers. Writes ``metrics.json``.

Wall-clock seconds per stage go to ``iter_<t>/timing.json`` (the one file that differs between
two runs of the same config, with ``manifest.json``), recorded in the manifest like a stage's
files (``timing["<t>"]``: :func:`write_timing`); one that does not match its record is started
afresh, never read through a link or copied forward.

Multi-process (``accelerate launch``, N processes, one GPU each): the training stages
(``proposer``, ``solver``) run on every rank through TRL, with the paper's global batch sizes
split over the ranks; the other stages and every artifact or manifest write run on the main
process while the other ranks wait at a barrier and then read the results from disk. Each rank
scores its own proposer rollouts with its own frozen solver copy; the records are gathered into
one ``proposer_rollouts.jsonl`` (each with its ``rank``). See
:func:`vdlib.loop.distributed.init_distributed`.

Code map: the stages are plain functions in :mod:`vdlib.loop.stages`, declared with their
done-markers in ``stages.STAGE_TABLE``; the checkpoints (bases, trained roles, loading, saving,
engines) are :class:`vdlib.loop.model_store.ModelStore`; this module is the runner that walks the
table (skipping finished stages: :meth:`Loop.run`) and the entry points :func:`run` /
:func:`run_arms`.

Iteration 1 starts both roles from the base checkpoint (the proposer from its format
warm-start in the tiny profile). Every stage seeds itself from ``(seed, stage, t)`` and reads its
inputs from disk, so an interrupted-and-resumed run produces the same artifacts as an
uninterrupted one. Layout: ``<output_dir>/<experiment>/<run_id>/`` with ``config.yaml``,
``manifest.json`` and ``iter_<t>/`` (DESIGN.md).
"""

from __future__ import annotations

import functools
import json
import logging
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from vdlib.config import ConfigError, ExperimentConfig, load_params
from vdlib.config.layout import iteration_dir, manifest_path, run_id
from vdlib.engines.setting import release_cuda_memory
from vdlib.loop.distributed import (
    barrier,
    broadcast_from_main,
    init_distributed,
    is_main_process,
    open_run,
    world_size,
)
from vdlib.loop.model_store import ModelStore
from vdlib.loop.progress import RunPaused, check_deadline, heartbeat
from vdlib.loop.stages import STAGE_TABLE, STAGES, TRAINING_STAGES
from vdlib.method.seeding import derive_seed
from vdlib.runs.run_start import start_run
from vdlib.runs.run_state import (
    RunLock,
    check_record,
    file_record,
    read_manifest,
    read_recorded,
    remove_outputs,
    remove_temporary,
    update_manifest,
)
from vdlib.utils.artifacts import atomic_write_json
from vdlib.utils.safe_read import read_json

__all__ = ["STAGES", "TRAINING_STAGES", "Loop", "RunResult", "run", "run_arms", "parallel_arms",
           "build_shared_bases", "iteration_dir", "check_visible_gpus"]

logger = logging.getLogger(__name__)


@dataclass
class RunResult:
    """Where the run lives and each iteration's metrics."""

    run_dir: Path
    iterations: list[dict[str, Any]] = field(default_factory=list)


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


class Loop:
    """One run: its folder (locked, checked against the config's fingerprint, then
    ``config.yaml`` and ``manifest.json`` written: :func:`vdlib.runs.run_state.claim_run`), its
    :class:`~vdlib.loop.model_store.ModelStore`, and :meth:`run`, which walks
    :data:`vdlib.loop.stages.STAGE_TABLE` for every iteration. ``force``: a folder holding another
    config is moved aside (never mixed) instead of refused."""

    def __init__(self, cfg: ExperimentConfig, *, force: bool = False) -> None:
        self.cfg = cfg
        self.lock: RunLock | None = None
        self.tracker: Any = None
        self.lock, self.run_dir = open_run(cfg, force=force)
        self.store = ModelStore(cfg, self.run_dir)

    def close(self) -> None:
        """Close the run's tracker and release the run folder's lock (the process's exit
        releases it too)."""
        if self.tracker is not None:
            self.tracker.close()
            self.tracker = None
        self.store.close()  # the run's engine (engine.lifetime: run)
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    def _verified(self, records: dict[str, Any], t: int, stage: Any, out: Path) -> bool:
        record = records.get(stage_key(t, stage.name))
        if record is None:
            return False
        why = check_record(out, record)
        if why is not None:
            logger.warning("iteration %d %s: %s; the stage and every later one run again", t,
                           stage.name, why)
        return why is None

    def _label(self, t: int, stage: str) -> str:
        index = STAGES.index(stage) + 1
        return (f"{self.cfg.experiment}/{run_id(self.cfg)} | iteration {t}/"
                f"{self.cfg.iterations} | stage {index}/{len(STAGES)} {stage}")

    def run(self, on_stage: Callable[[int, str], None] | None = None) -> RunResult:
        """All iterations. A stage whose record in the manifest matches the disk is skipped
        (resume); the first stage that is not runs again, and so does every stage after it
        (their records are dropped first, so a stale result is never reported as complete).
        With several processes, the training stages run on every rank and the others on the
        main one (the rest wait at a barrier, then read from disk)."""
        try:
            return self._run(on_stage)
        finally:
            self.close()

    def _run(self, on_stage: Callable[[int, str], None] | None) -> RunResult:
        result = RunResult(self.run_dir)
        self.store.prepare_bases()
        main = is_main_process()
        if main and self.cfg.tracking != "none":
            from vdlib.config import to_dict
            from vdlib.utils.tracking import open_tracker

            self.tracker = open_tracker(self.cfg.tracking, self.run_dir, run_id(self.cfg),
                                        to_dict(self.cfg), project=self.cfg.experiment)
        manifest = manifest_path(self.run_dir)
        records = dict(read_manifest(manifest).get("stages", {})) if main else {}
        rerun = False
        for t in range(1, self.cfg.iterations + 1):
            out = iteration_dir(self.run_dir, t)
            out.mkdir(parents=True, exist_ok=True)
            for stage in STAGE_TABLE:
                done = main and not rerun and self._verified(records, t, stage, out)
                if broadcast_from_main(done):
                    logger.info("iteration %d %s: done earlier, skipped", t, stage.name)
                    continue
                label = self._label(t, stage.name)
                expected = previous_seconds(self.run_dir, t, stage.name) if main else None
                paused = None
                if main:
                    try:
                        check_deadline(label, expected)
                    except RunPaused as e:
                        paused = str(e)
                paused = broadcast_from_main(paused)
                if paused:  # the main rank's message: every rank stops before the same stage
                    raise RunPaused(paused)
                if main and not rerun:
                    records = {k: v for k, v in records.items()
                               if stage_order(k) < stage_order(stage_key(t, stage.name))}
                    update_manifest(manifest, stages=records)
                rerun = True
                if main:
                    stale = remove_outputs(out, stage.outputs)
                    if stale:
                        logger.info("iteration %d %s: removed unrecorded %s", t, stage.name,
                                    ", ".join(stale))
                here = main or stage.every_rank
                if on_stage is not None and here:
                    on_stage(t, stage.name)
                start = time.perf_counter()
                _seed_everything(derive_seed(self.cfg.seed, stage.name, t) % 2**63)
                if here:
                    try:
                        with heartbeat(label, expected=expected, log=logger,
                                       interval=None if main else 0):
                            stage.run(self.store, t, out)
                    finally:  # also on SIGTERM / Ctrl-C: no working folder is left behind
                        if main:
                            remove_temporary(out)
                        release_cuda_memory()  # a trainer's memory is the next stage's
                seconds = time.perf_counter() - start
                if main:
                    records[stage_key(t, stage.name)] = file_record(out, stage.outputs)
                    timings = write_timing(manifest, out, t, stage.name, seconds)
                    update_manifest(manifest, stages=records, timing=timings)
                    logger.info("iteration %d %s: %.1f s", t, stage.name, seconds)
                barrier()
            metrics = read_json(out / "metrics.json", METRICS_MAX_BYTES)
            result.iterations.append(metrics)
            if self.tracker is not None:
                from vdlib.utils.tracking import iteration_scalars

                self.tracker.log(iteration_scalars(metrics), step=t)
            logger.info("iteration %d: %s", t, _summary(metrics))
        if main:
            start_run(self.cfg)  # refresh the manifest's "updated" time
        barrier()
        return result


#: ``iter_<t>/timing.json``: the wall-clock seconds of each stage of iteration ``t``
TIMING_FILE = "timing.json"
#: a ``timing.json`` larger than this is not read (it holds six numbers)
TIMING_MAX_BYTES = 64 << 10
#: a ``metrics.json`` larger than this is not read (it holds one iteration's numbers)
METRICS_MAX_BYTES = 64 << 20


def recorded_timing(out: Path, t: int, record: Any) -> dict[str, Any]:
    """Iteration ``t``'s ``timing.json`` (in ``out``) if it is the file its ``record`` (from
    the manifest's ``timing["<t>"]``: size and SHA-256) describes, else {} (logged when a file
    was there): a link, a FIFO, a file edited, truncated or from elsewhere is never read or
    copied forward (:func:`vdlib.runs.run_state.read_recorded`)."""
    try:
        data = json.loads(read_recorded(out / TIMING_FILE, record, TIMING_MAX_BYTES))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:  # UnsafeFileError and UnicodeDecodeError included
        logger.warning("iteration %d: %s; its stage times start afresh", t, e)
        return {}
    return data if isinstance(data, dict) else {}


def write_timing(manifest: Path, out: Path, t: int, stage: str, seconds: float
                 ) -> dict[str, Any]:
    """Write ``stage``'s ``seconds`` into iteration ``t``'s ``timing.json`` (atomically, beside
    the other stages' times when its record holds: :func:`recorded_timing`); returns the
    manifest's ``timing`` records with this file's new one, for the caller to write with the
    stage's record."""
    timings = read_manifest(manifest).get("timing")
    timings = dict(timings) if isinstance(timings, dict) else {}
    timing = {**recorded_timing(out, t, timings.get(str(t))), stage: round(seconds, 2)}
    atomic_write_json(out / TIMING_FILE, timing)
    timings[str(t)] = file_record(out, [TIMING_FILE])[TIMING_FILE]
    return timings


def previous_seconds(run_dir: Path, t: int, stage: str) -> float | None:
    """How long ``stage`` took in iteration ``t - 1`` of this run (its ``timing.json``, read
    bounded, never through a link or from a FIFO: only an estimate, so its record is not
    required), the heartbeat's ETA; None in the first iteration or when unrecorded."""
    if t <= 1:
        return None
    path = iteration_dir(run_dir, t - 1) / TIMING_FILE
    try:
        value = read_json(path, TIMING_MAX_BYTES).get(stage)
    except (OSError, ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, int | float) else None


def stage_key(t: int, stage: str) -> str:
    """The manifest's key for stage ``stage`` of iteration ``t``: ``"<t>/<stage>"``."""
    return f"{t}/{stage}"


def stage_order(key: str) -> tuple[int, int]:
    """(iteration, position in the stage table) of a :func:`stage_key`."""
    t, _, name = key.partition("/")
    return int(t), STAGES.index(name) if name in STAGES else len(STAGES)


def _summary(m: dict[str, Any]) -> str:
    keys = ("valid_questions", "generated", "mean_acc", "curriculum_size", "kept_fraction")
    return ", ".join(f"{k}={m.get(k)}" for k in keys)


def check_visible_gpus(cfg: ExperimentConfig, device_count: int | None = None) -> None:
    """One process trains on one GPU: TRL refuses a single process that sees several (it would
    wrap the model in ``nn.DataParallel``). Fail before any model loads, saying what to do.

    >>> from vdlib.config import load_params
    >>> check_visible_gpus(load_params({"model": {"device": "cuda:0"}}), device_count=1)
    >>> check_visible_gpus(load_params({"model": {"device": "cuda:0"}}), device_count=2)
    Traceback (most recent call last):
    ...
    vdlib.config.config_yaml.ConfigError: model.device = 'cuda:0', but this single process ...
    """
    if world_size() > 1 or not cfg.model.device.startswith(("cuda", "auto")):
        return
    if device_count is None:
        device_count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if device_count > 1:
        raise ConfigError(
            f"model.device = {cfg.model.device!r}, but this single process sees {device_count} "
            "GPUs and TRL trains one process on one GPU; make one GPU visible "
            "(CUDA_VISIBLE_DEVICES=0 vdlib run ...; engine.server_gpus name physical GPUs for "
            "vdlib's vLLM servers, e.g. the paper's 2-GPU topology), or launch one process per "
            "GPU with accelerate launch")


def run(config: ExperimentConfig | str | dict, on_stage: Callable[[int, str], None] | None = None,
        *, force: bool = False) -> RunResult:
    """Run (or resume) the co-evolution of ``config`` (an ExperimentConfig, params path or
    dict); returns the run folder and each iteration's metrics. ``config.arms`` is ignored
    here: see :func:`run_arms`. A folder that holds a run of another config is refused
    (:class:`vdlib.runs.run_state.RunConfigMismatch`), or with ``force`` moved aside first."""
    cfg = config if isinstance(config, ExperimentConfig) else load_params(config)
    init_distributed()
    from vdlib.loop.gpu_count import check_gpus_per_run

    check_gpus_per_run(cfg)  # launcher.gpus_per_run: the GPUs a run takes, before any model
    check_visible_gpus(cfg)
    return Loop(cfg, force=force).run(on_stage)


def run_arms(config: ExperimentConfig | str | dict,
             on_stage: Callable[[int, str], None] | None = None, *, force: bool = False
             ) -> dict[str, RunResult]:
    """Run (or resume) every arm in ``config.arms`` (vdlib.loop.arms), each in its own folder
    ``<experiment>/<arm>-seed<seed>``; with no arms, the config itself under its own name.
    ``force``: as in :func:`run`.

    On the CPU, with ``launcher.max_parallel`` above 1 (and no ``on_stage``), up to that many
    arms run at once in worker processes that share the cores
    (:func:`vdlib.utils.workers.run_jobs`); a format warm-start they share is built here first, with
    every core. Otherwise the arms run one after another in this process."""
    from vdlib.config import to_dict
    from vdlib.loop.arms import arm_params
    from vdlib.utils.workers import run_jobs, worker_count

    cfg = config if isinstance(config, ExperimentConfig) else load_params(config)
    if not cfg.arms:
        return {cfg.run_id or "run": run(cfg, on_stage, force=force)}
    base = to_dict(cfg)
    configs = {arm: load_params(arm_params(base, arm)) for arm in cfg.arms}  # validate all first
    workers = parallel_arms(cfg, len(configs)) if on_stage is None else 1
    if worker_count(len(configs), workers) > 1:
        build_shared_bases(configs.values())
        logger.info("arms %s: %d at once", ", ".join(f"{a} ({run_id(c)})" for a, c in
                                                      configs.items()), workers)
        runs = run_jobs(functools.partial(run, force=force),
                        [(c,) for c in configs.values()], workers)
        return dict(zip(configs, runs, strict=True))
    results = {}
    for k, (arm, c) in enumerate(configs.items(), start=1):
        logger.info("arm %d/%d: %s (%s)", k, len(configs), arm, run_id(c))
        results[arm] = run(c, on_stage, force=force)
    return results


def parallel_arms(cfg: ExperimentConfig, arms: int) -> int:
    """How many of ``arms`` arms :func:`run_arms` runs at once: ``launcher.max_parallel`` on the
    CPU in one process (no ``accelerate launch``), else 1."""
    from vdlib.engines.models import resolve_device

    if world_size() > 1 or str(resolve_device(cfg.model.device)) != "cpu":
        return 1
    return max(1, min(arms, cfg.launcher.max_parallel or 1))


def build_shared_bases(configs: Iterable[ExperimentConfig]) -> None:
    """Build the format warm-starts of ``configs`` (cached outside the runs and shared by
    them) in this process, before the runs start, with a heartbeat (a cached one is only
    checked against its record)."""
    for c in configs:
        if c.warm_start.mode == "sft":
            store = ModelStore(c)
            with heartbeat(f"format warm-start of {c.model.proposer} (shared by the arms)"):
                store.base(c.model.proposer, "proposer")
                store.base(c.solver_model, "solver")
