"""What a run folder is and what it holds: the config fingerprint, the lock, and the record of
every finished stage (docs/reliability.md).

- **Fingerprint.** :func:`config_fingerprint` hashes the resolved config canonically (sorted
  JSON, SHA-256) without the fields in :data:`NOT_FINGERPRINTED`: where things are written or
  cached, the grid a run belongs to, the GPUs and servers it uses, and the sections that the
  co-evolution loop never reads (evaluation, verification, transfer: they keep their own
  records). :func:`fingerprint_diff` lists the keys two configs differ in.
- **Lock.** :class:`RunLock` holds an OS-level exclusive lock (``fcntl.flock``) on
  ``<run>/.lock`` for as long as the process lives; a second process is refused with the
  holder's pid (:class:`RunLockedError`). The kernel drops the lock when its holder dies, even
  by SIGKILL.
- **Stage records.** :func:`file_record` gives the size and SHA-256 of each file a stage wrote
  (a checkpoint folder: each file in it); :func:`check_record` compares a record with the disk
  and names the first file that differs, is missing, or is not what its type requires (a JSONL
  line that does not parse, a JSON file that does not parse, an empty ``.safetensors``).

>>> a = {"seed": 1, "output_dir": "/a", "scoring": {"tau_min": 0.3}}
>>> b = {"seed": 1, "output_dir": "/b", "scoring": {"tau_min": 0.2}}
>>> config_fingerprint(a) == config_fingerprint({**a, "output_dir": "/elsewhere"})
True
>>> fingerprint_diff(fingerprinted(a), fingerprinted(b))
['scoring.tau_min: 0.3 -> 0.2']
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["NOT_FINGERPRINTED", "fingerprinted", "config_fingerprint", "fingerprint_diff",
           "RunLock", "RunLockedError", "file_record", "check_record", "LOCK_FILE",
           "read_manifest", "update_manifest", "RunConfigMismatch", "set_aside", "claim_run",
           "remove_outputs", "remove_temporary"]

LOCK_FILE = ".lock"

# Dotted keys left out of the fingerprint: they cannot change what the loop writes.
NOT_FINGERPRINTED: dict[str, str] = {
    "experiment": "names the folder",
    "output_dir": "where the folder is",
    "run_id": "names the folder",
    "profile": "a name for the defaults; the resolved values are fingerprinted",
    "seeds": "the grid's seed list (the run's own seed is fingerprinted)",
    "arms": "the grid's arm list (an arm's settings are merged into the fingerprinted keys)",
    "reference_experiments": "other experiments a notebook reads",
    "model.cache_dir": "where checkpoints are cached",
    "model.transfer": "read by the transfer experiment only",
    "model.instruct": "read by evaluation only",
    "evaluation": "evaluations keep their own protocol record",
    "verification": "verification keeps its own cache and records",
    "transfer": "the transfer experiment's own training",
    "launcher": "how a grid is spread over GPUs or a cluster",
    "tracking": "where numbers are logged, not what they are",
    "engine.gpu_memory_utilization": "GPU memory share",
    "engine.rollout_gpu_memory_utilization": "GPU memory share",
    "engine.server_url": "where a server listens",
    "engine.rollout_server_url": "where a server listens",
    "engine.server_gpus": "which GPUs serve",
    "engine.lifetime": "how long an engine lives; every sample is seeded per request or per "
                       "trainer hand-over, the same in both (docs/vllm.md)",
}


def _drop(data: Any, dotted: str) -> None:
    head, _, rest = dotted.partition(".")
    if not isinstance(data, dict) or head not in data:
        return
    if rest:
        _drop(data[head], rest)
    else:
        del data[head]


def fingerprinted(config: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a resolved config (``vdlib.config.to_dict``) that the fingerprint covers."""
    data = json.loads(json.dumps(config, sort_keys=True, default=str))
    for key in NOT_FINGERPRINTED:
        _drop(data, key)
    return data


def config_fingerprint(config: Mapping[str, Any]) -> str:
    """SHA-256 of :func:`fingerprinted` ``config`` as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(fingerprinted(config), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict) and (data or not prefix):
        out: dict[str, Any] = {}
        for k, v in data.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: data}


def fingerprint_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """``key: old -> new`` for every dotted key whose value differs (missing: ``<absent>``)."""
    a, b = _flatten(dict(old)), _flatten(dict(new))
    out = []
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key, "<absent>"), b.get(key, "<absent>")
        if x != y:
            out.append(f"{key}: {x!r} -> {y!r}".replace("'<absent>'", "<absent>"))
    return out


# ----------------------------------------------------------------------------- the lock


class RunLockedError(RuntimeError):
    """Another live process holds the run folder's lock."""


class RunLock:
    """An exclusive OS-level lock on ``<run_dir>/.lock``; use as a context manager or call
    :meth:`acquire` / :meth:`release`. The file holds the holder's pid (for the message)."""

    def __init__(self, run_dir: str | os.PathLike) -> None:
        self.path = Path(run_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = os.read(fd, 64).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            if e.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise RunLockedError(
                    f"{self.path.parent} is in use by another process (pid {holder}); wait for "
                    "it to finish or stop it, then run again") from None
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode("ascii"))
        os.fsync(fd)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            import fcntl

            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


# ----------------------------------------------------------------------------- stage records


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _files(root: Path, names: Iterable[str]) -> list[Path]:
    out = []
    for name in names:
        path = root / name
        if path.is_dir():
            out += sorted(p for p in path.rglob("*") if p.is_file())
        else:
            out.append(path)
    return out


def file_record(root: str | os.PathLike, names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``{relative path: {"size", "sha256"}}`` of the files ``names`` under ``root`` (a folder
    name stands for every file in it). A missing file is an error naming it."""
    root = Path(root)
    out = {}
    for path in _files(root, names):
        if not path.is_file():
            raise FileNotFoundError(f"{path}: the stage finished without writing it")
        out[path.relative_to(root).as_posix()] = {"size": path.stat().st_size,
                                                  "sha256": _sha256(path)}
    return out


def _well_formed(path: Path) -> str | None:
    """Why ``path``'s content is unusable for its type, or None."""
    if path.suffix == ".safetensors" and path.stat().st_size == 0:
        return "is empty"
    if path.suffix in (".json", ".jsonl"):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            return f"cannot be read ({e})"
        lines = text.splitlines() if path.suffix == ".jsonl" else [text]
        for i, line in enumerate(lines, 1):
            if path.suffix == ".jsonl" and not line.strip():
                continue
            try:
                json.loads(line)
            except ValueError:
                return f"line {i} is not valid JSON" if path.suffix == ".jsonl" \
                    else "is not valid JSON"
    return None


def check_record(root: str | os.PathLike, record: Mapping[str, Mapping[str, Any]]) -> str | None:
    """None if every file of ``record`` is on disk with its size and hash; else a sentence
    naming the first file that is missing, changed, or malformed."""
    root = Path(root)
    for rel, want in record.items():
        path = root / rel
        if not path.is_file():
            return f"{path} is missing"
        bad = _well_formed(path)
        if bad:
            return f"{path} {bad}"
        if path.stat().st_size != want.get("size") or _sha256(path) != want.get("sha256"):
            return f"{path} changed since its stage finished (size or content hash differs)"
    return None


# ----------------------------------------------------------------------------- the manifest


def read_manifest(path: str | os.PathLike) -> dict[str, Any]:
    """The run's ``manifest.json`` as a dict ({} if absent); a file that does not parse is an
    error naming it and saying what to do."""
    path = Path(path)
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"{path} is not valid JSON ({e}); the run's record is lost: move the "
                         "run folder away (--force does) and run again") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} holds {type(data).__name__}, not a JSON object")
    return data


def update_manifest(path: str | os.PathLike, **fields: Any) -> dict[str, Any]:
    """Merge ``fields`` into the manifest and write it atomically; returns the new manifest."""
    from vdlib.artifacts import atomic_write_json

    data = {**read_manifest(path), **fields}
    atomic_write_json(path, data)
    return data


# ----------------------------------------------------------------------------- claiming a folder


class RunConfigMismatch(ValueError):
    """The run folder holds a run of another config (the message lists the differing keys)."""


def _previous_config(run_dir: Path) -> dict[str, Any] | None:
    import yaml

    from vdlib.layout import config_path

    path = config_path(run_dir)
    if not path.exists():
        return None
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise ValueError(f"{path} cannot be read ({str(e).splitlines()[0]}); the run's config "
                         "is lost: move the run folder away (--force does) and run again") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a mapping; move the run folder away (--force does)")
    return data


def set_aside(run_dir: str | os.PathLike) -> Path:
    """Rename ``run_dir`` to ``<name>.replaced-<UTC time>`` beside it; returns the new path."""
    import datetime

    run_dir = Path(run_dir)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S%fZ")
    target = run_dir.with_name(f"{run_dir.name}.replaced-{stamp}")
    run_dir.rename(target)
    return target


def claim_run(cfg: Any, *, force: bool = False) -> tuple[RunLock, Path]:
    """Lock the run folder of ``cfg`` (created if missing) and check that it holds a run of the
    same config fingerprint (or none yet). Another config is refused with the differing keys
    (:class:`RunConfigMismatch`); with ``force`` the old folder is moved aside
    (:func:`set_aside`) and a fresh one is started, so old and new results never mix. A
    corrupt ``config.yaml`` or ``manifest.json`` is an error naming the file (moved aside
    under ``force``). Nothing in the folder is written here. Returns (held lock, folder)."""
    import logging

    from vdlib.config import to_dict
    from vdlib.layout import manifest_path, run_path

    run_dir = run_path(cfg)
    lock = RunLock(run_dir).acquire()
    try:
        try:
            old = _previous_config(run_dir)
            read_manifest(manifest_path(run_dir))
            differs = old is not None and config_fingerprint(old) != config_fingerprint(
                to_dict(cfg))
            why = "\n  ".join(fingerprint_diff(fingerprinted(old), fingerprinted(to_dict(cfg)))
                              ) if differs and old is not None else None
        except ValueError as e:
            if not force:
                raise
            differs, why = True, str(e)
        if differs and not force:
            raise RunConfigMismatch(
                f"{run_dir} holds a run of another config; the keys that differ (folder -> "
                f"now):\n  {why}\nResume it with its own config, give this one another "
                "run_id or experiment, or pass --force to move the old run aside and start "
                "afresh")
        if differs:
            aside = set_aside(run_dir)
            logging.getLogger(__name__).warning("%s held another config (%s); moved to %s",
                                                run_dir, why.replace("\n  ", "; "), aside)
            fresh = RunLock(run_dir).acquire()
            lock.release()
            lock = fresh
    except BaseException:
        lock.release()
        raise
    return lock, run_dir


def remove_outputs(root: str | os.PathLike, names: Iterable[str]) -> list[str]:
    """Delete the files and folders ``names`` under ``root`` (a stage about to run again must
    not find its stale outputs: a checkpoint folder that exists is never rebuilt). Returns the
    names that existed."""
    import shutil

    root = Path(root)
    gone = []
    for name in names:
        path = root / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
        else:
            continue
        gone.append(name)
    return gone


def remove_temporary(folder: str | os.PathLike) -> list[str]:
    """Delete the hidden folders in an iteration folder (TRL's ``.trl_*`` working folders and
    ``.<name>.tmp-*`` checkpoints being built): what a stopped stage leaves behind."""
    import shutil

    gone = []
    for path in sorted(Path(folder).glob(".*")):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
            gone.append(path.name)
    return gone
