"""Atomic writes: a killed run never leaves a half-written artifact (run folders and their
manifest: vdlib.config.layout).

Every writer goes through a temporary file in the target's folder followed by ``os.replace``
(atomic on POSIX), so a reader sees either the old file or the complete new one. The file gets
the mode any new file gets (``0666`` less the process's umask, like the files of a model folder),
not ``mkstemp``'s private ``0600``: collaborators who can read the model folders can read the
configs and metrics too.

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

__all__ = ["atomic_write_text", "atomic_write_json", "write_jsonl", "read_jsonl", "file_mode"]


def file_mode() -> int:
    """The mode a new file gets in this process: ``0o666`` less the umask (read from
    ``/proc/self/status`` where it can be, which leaves the umask untouched)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # no /proc: read it by setting it (and put it back at once)
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (temp file in the same folder, fsync, rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            os.fchmod(fh.fileno(), file_mode())  # mkstemp's 0600 would hide it from others
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
