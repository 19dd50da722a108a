"""One member of a grid of runs (:class:`GridRun`: its config, folder, state and status) and the
GPUs this machine offers a grid (:func:`visible_gpus`); shared by :mod:`vdlib.grid.launch` and
:mod:`vdlib.grid.launch_slurm`."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from vdlib.config.experiment import ExperimentConfig

__all__ = ["GridRun", "visible_gpus"]


@dataclasses.dataclass
class GridRun:
    """One run of a grid: its config and folder, its state on disk before launching
    (``done``, ``partial``, ``new``, ``refused``: the folder holds another config; ``note``
    says why a run is not ``done``: the keys that differ, a damaged record, an unreadable
    manifest) and, once launched, its status (``skipped``, ``ran``, ``paused`` at
    ``--stop-after``, ``busy`` in another process, ``refused``, ``failed``, ``stopped`` with
    the grid), GPUs, seconds and log."""

    arm: str
    seed: int
    config: ExperimentConfig
    run_dir: Path
    state: str = "new"
    status: str = "planned"
    gpus: list[str] | None = None
    seconds: float | None = None
    log: Path | None = None
    error: str | None = None
    note: str | None = None
    deferred: bool = False

    @property
    def name(self) -> str:
        return self.run_dir.name


def visible_gpus(env: dict[str, str] | None = None) -> list[str]:
    """The GPU ids this machine offers: ``CUDA_VISIBLE_DEVICES`` if set (``""`` = none), else
    every GPU torch sees, else none."""
    env = os.environ if env is None else env
    if "CUDA_VISIBLE_DEVICES" in env:
        return [g.strip() for g in env["CUDA_VISIBLE_DEVICES"].split(",") if g.strip()]
    try:
        import torch

        return [str(i) for i in range(torch.cuda.device_count())] \
            if torch.cuda.is_available() else []
    except ImportError:  # pragma: no cover - torch is a core dependency
        return []
