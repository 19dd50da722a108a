"""Run directories and atomic writes: a killed run never leaves a half-written artifact.

Every writer goes through a temporary file in the target's folder followed by ``os.replace``
(atomic on POSIX), so a reader sees either the old file or the complete new one.

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = write_jsonl(d / "q.jsonl", [{"q": "1+1?", "a": "2"}])
>>> read_jsonl(d / "q.jsonl")
[{'q': '1+1?', 'a': '2'}]
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["atomic_write_text", "atomic_write_json", "write_jsonl", "read_jsonl", "run_dir",
           "package_versions", "start_run"]


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (temp file in the same folder, fsync, rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    """Write ``obj`` as indented JSON, atomically."""
    return atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def write_jsonl(path: str | os.PathLike, records: Iterable[dict[str, Any]]) -> Path:
    """Write one JSON object per line, atomically."""
    lines = [json.dumps(r, ensure_ascii=False) for r in records]
    return atomic_write_text(path, "".join(line + "\n" for line in lines))


def read_jsonl(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Read a JSON Lines file written by :func:`write_jsonl`."""
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def run_dir(output_dir: str | os.PathLike, experiment: str, run_id: str) -> Path:
    """``<output_dir>/<experiment>/<run_id>/``, created if missing."""
    path = Path(output_dir) / experiment / run_id
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

    path = run_dir(cfg.output_dir, cfg.experiment, cfg.run_id or f"seed{cfg.seed}")
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
