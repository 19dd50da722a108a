"""Starting a run folder: :func:`start_run` creates ``<output_dir>/<experiment>/<run_id>`` and
writes its ``manifest.json`` (the config's fingerprint, seeds, versions, git commit, times) and
``config.yaml``. Separate from :mod:`vdlib.config.layout` (which only names paths) because it reads
and fingerprints the manifest through :mod:`vdlib.runs.run_state`, which itself uses the layout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vdlib.config.config_yaml import config_text
from vdlib.config.layout import config_path, make_run_dir, manifest_path, package_versions, run_id
from vdlib.utils.artifacts import atomic_write_json, atomic_write_text

__all__ = ["start_run"]


def _git_commit() -> str | None:
    import subprocess

    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5, cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def start_run(cfg: Any) -> Path:
    """Create the run folder of ``cfg`` and write ``config.yaml`` (:func:`config_text`) and
    ``manifest.json``.

    The folder is ``<output_dir>/<experiment>/<run_id>`` with ``run_id`` defaulting to
    ``seed<seed>``. The manifest records the config's fingerprint
    (:func:`vdlib.runs.run_state.manifest_fingerprint`: the folder's record of which config made
    it, checked by :func:`vdlib.runs.run_state.claim_run` before this is called), seeds, package
    versions, the git commit and the start time; an existing manifest keeps its original start
    time (resume) and any other entry it holds (e.g. the stage records of
    :mod:`vdlib.runs.run_state`), the fields above refreshed. The manifest is written first, so a
    folder never holds a ``config.yaml`` newer than its manifest's fingerprint.
    """
    import dataclasses
    import datetime
    import platform
    import sys

    from vdlib.runs.run_state import manifest_fingerprint, read_manifest

    path = make_run_dir(cfg.output_dir, cfg.experiment, run_id(cfg))
    manifest = manifest_path(path)
    old = read_manifest(manifest)
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    atomic_write_json(manifest, {
        **old,
        **manifest_fingerprint(dataclasses.asdict(cfg)),
        "experiment": cfg.experiment,
        "seed": cfg.seed,
        "started": old.get("started", now),
        "updated": now,
        "git_commit": _git_commit(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "versions": package_versions(),
    })
    atomic_write_text(config_path(path), config_text(cfg))
    return path

