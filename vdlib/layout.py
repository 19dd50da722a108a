"""Where a run's files live: run ids, run folders, iteration folders; starting a run folder
(``config.yaml`` + ``manifest.json``).

``<output_dir>/<experiment>/<run_id>/`` holds one run (``config.yaml``, ``manifest.json``,
``iter_<t>/``); ``run_id`` is the config's, or ``seed<seed>``; a notebook's arms use
``<arm>-seed<seed>``.

>>> from vdlib.config import load_params
>>> cfg = load_params({"experiment": "x", "output_dir": "/o", "seed": 2})
>>> run_id(cfg), str(run_path(cfg)), str(iteration_dir(run_path(cfg), 3))
('seed2', '/o/x/seed2', '/o/x/seed2/iter_3')
>>> arm_run_id("vd75", 1)
'vd75-seed1'
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from vdlib.artifacts import atomic_write_json

__all__ = ["run_id", "arm_run_id", "run_path", "iteration_dir", "make_run_dir", "start_run",
           "package_versions", "report_dir", "executed_notebook_path"]


def run_id(cfg: Any) -> str:
    """The run's folder name: ``cfg.run_id``, or ``seed<seed>``."""
    return cfg.run_id or f"seed{cfg.seed}"


def arm_run_id(arm: str, seed: int) -> str:
    """The folder name of one arm and seed of a notebook's grid."""
    return f"{arm}-seed{seed}"


def run_path(cfg: Any) -> Path:
    """``<output_dir>/<experiment>/<run_id>`` (not created)."""
    return Path(cfg.output_dir) / cfg.experiment / run_id(cfg)


def iteration_dir(run_dir: Path, t: int) -> Path:
    """``<run>/iter_<t>``: iteration ``t``'s artifacts."""
    return Path(run_dir) / f"iter_{t}"


def report_dir(output_dir: str | os.PathLike, experiment: str, notebook: str) -> Path:
    """``<output_dir>/<experiment>/reports/<notebook>``: a notebook's tables, figures and
    ``summary.json`` (not created)."""
    return Path(output_dir) / experiment / "reports" / notebook


def executed_notebook_path(output_dir: str | os.PathLike, profile: str, notebook: str,
                           variant: str | None = None) -> Path:
    """``<output_dir>/notebooks/<profile>/<notebook>[@<variant>].ipynb``: the executed copy of a
    notebook that ``vdlib notebooks run`` writes."""
    name = f"{notebook}@{variant}.ipynb" if variant else f"{notebook}.ipynb"
    return Path(output_dir) / "notebooks" / profile / name


def make_run_dir(output_dir: str | os.PathLike, experiment: str, name: str) -> Path:
    """``<output_dir>/<experiment>/<name>/``, created if missing."""
    path = Path(output_dir) / experiment / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def _git_commit() -> str | None:
    import subprocess

    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5, cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def package_versions(names: Iterable[str] = ("vdlib", "torch", "transformers", "trl", "peft",
                                             "accelerate", "math-verify", "vllm")) -> dict:
    """Installed versions of the packages that decide a run's numbers (None if absent)."""
    from importlib import metadata

    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def start_run(cfg: Any) -> Path:
    """Create the run folder of ``cfg`` and write ``config.yaml`` and ``manifest.json``.

    The folder is ``<output_dir>/<experiment>/<run_id>`` with ``run_id`` defaulting to
    ``seed<seed>``. The manifest records seeds, package versions, the git commit and the start
    time; an existing manifest keeps its original start time (resume).
    """
    import datetime
    import platform
    import sys

    from vdlib.config import save_params

    path = make_run_dir(cfg.output_dir, cfg.experiment, run_id(cfg))
    save_params(cfg, path / "config.yaml")
    manifest_path = path / "manifest.json"
    old = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    atomic_write_json(manifest_path, {
        "experiment": cfg.experiment,
        "seed": cfg.seed,
        "started": old.get("started", now),
        "updated": now,
        "git_commit": _git_commit(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "versions": package_versions(),
    })
    return path
