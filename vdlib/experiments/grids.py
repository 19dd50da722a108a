"""A notebook's grid of runs: every arm x seed of a config, run or resumed.

- :func:`run_grid` runs (or resumes) every arm of ``cfg.arms`` for every seed of ``seeds``
  (default ``cfg.seeds``), each in ``<output_dir>/<experiment>/<arm>-seed<seed>/``; a finished
  run is read back, so notebooks that share an experiment folder share runs; GPU runs spread
  over the visible GPUs through :mod:`vdlib.grid.launch` when there are several;
- :func:`seed_configs`: a config once per seed;
- :func:`instruct_config`: notebook 06's runs of the instruction-tuned model.

The runs' folders are read back by :mod:`vdlib.report.experiments`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from vdlib.config.experiment import ExperimentConfig, load_params
from vdlib.report.experiments import RunKey

__all__ = ["RunKey", "seed_configs", "run_grid", "instruct_config"]

logger = logging.getLogger(__name__)


def _cfg(config: ExperimentConfig | Mapping[str, Any] | str) -> ExperimentConfig:
    return config if isinstance(config, ExperimentConfig) else load_params(config)  # type: ignore[arg-type]


def seed_configs(cfg: ExperimentConfig, seeds: Iterable[int] | None = None
                 ) -> list[ExperimentConfig]:
    """``cfg`` once per seed (``seeds`` or ``cfg.seeds``), ``seed`` set."""
    return [dataclasses.replace(cfg, seed=int(s)) for s in (cfg.seeds if seeds is None
                                                            else seeds)]


def run_grid(config: ExperimentConfig | Mapping[str, Any] | str,
             seeds: Iterable[int] | None = None,
             runner: Callable[[ExperimentConfig], Any] | None = None,
             on_stage: Callable[[int, str], None] | None = None,
             launcher: str | None = None) -> dict[RunKey, Path]:
    """Run (or resume) every arm x seed; ``{(arm, seed): run folder}``. Every config is built
    and validated before the first run starts. ``runner(cfg)`` runs one arm's config (default:
    the co-evolution loop, in this process); it may return a folder or a :class:`RunResult`.
    ``launcher`` (``local`` or ``slurm``) spreads the runs instead, as ``vdlib grid`` does
    (:mod:`vdlib.grid.launch`: one run per GPU group, or a SLURM job array); a failed run is then an
    error naming it, after the others have finished, and a run whose folder holds another
    config (which ``vdlib run``, and this function without a launcher, refuse) is a
    :class:`vdlib.runs.run_state.RunConfigMismatch` naming it and the keys that differ: its old
    results are never returned as this config's. Co-evolution runs of several GPUs each
    (``launcher.gpus_per_run`` > 1, the paper profile's 2) go through ``launcher.kind``'s
    launcher even when ``launcher`` is not given (``accelerate launch`` per run, as ``vdlib
    grid``), unless this process is already one of several; so do GPU runs of one GPU each when
    this process sees several GPUs (``vdlib notebooks run --profile gpu-small`` on a machine
    of several GPUs spreads the arms x seeds over them; on one GPU they run here in turn)."""
    from vdlib.grid.launch import format_results, grid_configs, launch_grid
    from vdlib.loop.coevolution import run
    from vdlib.runs.run_state import RunConfigMismatch

    cfg = _cfg(config)
    grid = grid_configs(cfg, seeds)
    if launcher is None and runner is None and (_several_gpus_a_run(cfg)
                                                or _several_gpus(cfg, len(grid))):
        launcher = cfg.launcher.kind  # one process cannot train on several GPUs: vdlib grid's way
    if launcher is not None:
        runs = launch_grid(cfg, seeds, kind=launcher)
        refused = [f"{r.run_dir} ({r.error})" for r in runs if r.status == "refused"]
        failed = [r.name for r in runs if r.status == "failed"]
        if refused:
            raise RunConfigMismatch(
                "grid runs refused, their folders hold another config (the keys that differ: "
                f"folder -> now): {'; '.join(refused)}\n{format_results(runs)}")
        if failed:
            raise RuntimeError(f"grid runs failed: {', '.join(failed)}\n{format_results(runs)}")
        return {(r.arm, r.seed): r.run_dir for r in runs}
    out: dict[RunKey, Path] = {}
    for (arm, seed), c in grid.items():
        logger.info("run %s seed %d", arm, seed)
        result = runner(c) if runner is not None else run(c, on_stage)
        out[(arm, seed)] = Path(getattr(result, "run_dir", result))
    return out


def _several_gpus_a_run(cfg: ExperimentConfig) -> bool:
    """Does a run of ``cfg`` take several GPUs, started from this single process?"""
    from vdlib.loop.distributed import world_size

    return (cfg.launcher.gpus_per_run > 1 and not str(cfg.model.device).startswith("cpu")
            and world_size() == 1)


def _several_gpus(cfg: ExperimentConfig, runs: int) -> bool:
    """Are several GPUs visible to this single process for several GPU runs of ``cfg``? Then
    the runs spread over them as ``vdlib grid`` spreads them (one run per group of
    ``launcher.gpus_per_run`` GPUs, the rest queued); on one GPU they run here, one after
    another."""
    from vdlib.grid.grid_run import visible_gpus
    from vdlib.loop.distributed import world_size

    return (runs > 1 and not str(cfg.model.device).startswith("cpu") and world_size() == 1
            and len(visible_gpus()) > 1)


def instruct_config(cfg: ExperimentConfig, arms: Iterable[str] = ("baseline", "vd75")
                    ) -> ExperimentConfig:
    """The instruction-tuned-model runs of notebook 06: ``model.instruct`` as proposer and
    solver, no format warm-start, experiment ``<experiment>_instruct``."""
    return dataclasses.replace(
        cfg, experiment=f"{cfg.experiment}_instruct", arms=list(arms),
        model=dataclasses.replace(cfg.model, proposer=cfg.model.instruct, solver=None),
        warm_start=dataclasses.replace(cfg.warm_start, mode="none"))
