"""Whether a run folder's files are what its stage records say (``vdlib status``'s check):
which stages are recorded, the first one missing, and the first recorded stage whose files
changed (sizes always, SHA-256 of small files always, of every file with ``verify``)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vdlib.config import layout
from vdlib.utils import safe_read

__all__ = ["HASH_ALWAYS_BYTES", "recorded_stages", "first_missing", "check_records"]

HASH_ALWAYS_BYTES = 1 << 20  # files up to this size are hashed even without --verify


def recorded_stages(records: Any, iterations: int, names: Sequence[str]
                    ) -> set[tuple[int, int]]:
    """``{(t, stage index)}`` of the stage records (manifest keys ``"<t>/<stage>"``) that belong
    to a run of ``iterations`` iterations with the stages ``names``; other keys are ignored.
    O(records), whatever ``iterations`` is."""
    out = set()
    if not isinstance(records, dict):
        return out
    index = {name: i for i, name in enumerate(names)}
    for key in records:
        t, _, name = str(key).partition("/")
        if t.isdigit() and len(t) < 12 and 1 <= int(t) <= iterations and name in index:
            out.add((int(t), index[name]))
    return out


def first_missing(done: set[tuple[int, int]], iterations: int, n_stages: int
                   ) -> tuple[int, int | None]:
    """(t, stage index) of the first stage not in ``done``; (T, None) when all are. Walks at
    most ``len(done) + 1`` stages."""
    for position in range(len(done) + 1):
        t, i = divmod(position, n_stages)
        if t + 1 > iterations:
            break
        if (t + 1, i) not in done:
            return t + 1, i
    return iterations, None


def check_records(run: str | os.PathLike, records: Any, names: Sequence[str], iterations: int,
                  *, verify: bool = False) -> tuple[tuple[int, int], str] | None:
    """((t, stage index), why) of the first recorded stage, in run order, whose files are not
    what its record in ``manifest.json`` says; None if every record holds.

    Always: each recorded file exists, is a regular file (not a link) and has its recorded size,
    and files up to :data:`HASH_ALWAYS_BYTES` have their recorded SHA-256. ``verify``: every
    file's SHA-256 and form (:func:`vdlib.runs.run_state.check_record`, what a resume checks)."""
    from vdlib.runs.run_state import check_record

    run = Path(run)
    for t, i in sorted(recorded_stages(records, iterations, names)):
        record = records[f"{t}/{names[i]}"]
        folder = layout.iteration_dir(run, t)
        if not isinstance(record, dict) or not all(isinstance(v, dict) for v in record.values()):
            return (t, i), f"{layout.manifest_path(run)}: the record of {t}/{names[i]} is malformed"
        why = _cheap_check(folder, record)
        if why is None and verify:
            why = check_record(folder, record)
        if why is not None:
            return (t, i), why
    return None


def _cheap_check(folder: Path, record: dict[str, dict[str, Any]]) -> str | None:
    for rel, want in record.items():
        path = folder / rel
        try:
            if path.is_symlink() or not path.is_file():
                return f"{path} is {'a link' if path.is_symlink() else 'missing'}"
            size = path.stat().st_size
        except OSError as e:
            return f"{path} cannot be read ({e.strerror or e})"
        if size != want.get("size"):
            return f"{path} changed since its stage finished (size {size}, recorded " \
                   f"{want.get('size')})"
        if size <= HASH_ALWAYS_BYTES:
            try:  # never through a link or from a FIFO swapped in since the check above
                digest = hashlib.sha256(safe_read.read_bytes(path, size)).hexdigest()
            except safe_read.UnsafeFileError as e:
                return str(e)
            except OSError as e:
                return f"{path} cannot be read ({e.strerror or e})"
            if digest != want.get("sha256"):
                return f"{path} changed since its stage finished (content hash differs)"
    return None
