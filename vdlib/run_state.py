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
           "RunLock", "RunLockedError", "file_record", "check_record", "LOCK_FILE"]

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
    "engine.gpu_memory_utilization": "GPU memory share",
    "engine.rollout_gpu_memory_utilization": "GPU memory share",
    "engine.server_url": "where a server listens",
    "engine.rollout_server_url": "where a server listens",
    "engine.server_gpus": "which GPUs serve",
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
