"""What a stage or a built folder wrote, recorded and checked (re-exported by
:mod:`vdlib.runs.run_state`; docs/reliability.md).

- **Stage records.** :func:`file_record` gives the size and SHA-256 of each file a stage wrote
  (a checkpoint folder: each file in it); :func:`check_record` compares a record with the disk
  and names the first file that differs, is missing, is a symbolic link (or below one), or is
  not a regular file, or is not what its type requires (a JSONL line that does not parse, a
  JSON file that does not parse, an empty ``.safetensors``). It reads the least it can: what
  the file is (:func:`vdlib.utils.safe_read.open_regular`: no link, no FIFO waited on), its
  size (``fstat``), its hash (streamed), and only then its form, so a grown file costs one
  ``fstat``. :func:`read_recorded` reads a small recorded file (``timing.json``) the same way,
  for the caller to parse once it is known to be the recorded one.
- **Built folders.** A folder built once and read back by later runs (a converted base in
  ``<run>/base_models/``, the format warm-start in the cache) carries its own record
  (:data:`FOLDER_RECORD`); :func:`verified_build_dir` checks it on reuse and builds the folder
  again when it does not match.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from vdlib.utils.safe_read import UnsafeFileError, open_regular, read_json

__all__ = ["file_record", "check_record", "read_recorded", "FOLDER_RECORD", "record_folder",
           "check_folder", "verified_build_dir", "RECORD_MAX_BYTES"]

logger = logging.getLogger(__name__)

#: a folder's :data:`FOLDER_RECORD` larger than this is not read (a few hundred bytes a file)
RECORD_MAX_BYTES = 16 << 20


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


def _well_formed(fh: IO[bytes], path: Path) -> str | None:
    """Why the content of ``path`` (open as ``fh``, at its start) is unusable for its type, or
    None. Called only once its size and hash match its record, so what it reads is bounded by
    what the stage wrote; a JSONL file is read line by line."""
    if path.suffix == ".jsonl":
        for i, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                return f"cannot be read ({e})"
            if not line.strip():
                continue
            try:
                json.loads(line)
            except ValueError:
                return f"line {i} is not valid JSON"
    elif path.suffix == ".json":
        try:
            json.loads(fh.read().decode("utf-8"))
        except UnicodeDecodeError as e:
            return f"cannot be read ({e})"
        except ValueError:
            return "is not valid JSON"
    return None


def _link_in(root: Path, rel: str) -> Path | None:
    """The first part of ``root / rel`` below ``root`` that is a symbolic link, or None."""
    path = root
    for part in Path(rel).parts:
        path = path / part
        if path.is_symlink():
            return path
    return None


def _check_file(path: Path, want: Mapping[str, Any]) -> str | None:
    """Why the file ``path`` is not the one its record ``want`` (``size``, ``sha256``)
    describes, or None. In this order, so that nothing large is read or parsed before it is
    known to be the recorded file: what it is (a regular file, opened without following a link
    or waiting on a FIFO: :func:`vdlib.utils.safe_read.open_regular`), its size (``fstat``),
    its SHA-256 (streamed), and only then its form (:func:`_well_formed`)."""
    try:
        with open_regular(path) as (fh, st):
            if path.suffix == ".safetensors" and st.st_size == 0:
                return f"{path} is empty"
            if st.st_size != want.get("size"):
                return (f"{path} changed since its stage finished (size {st.st_size} bytes, "
                        f"recorded {want.get('size')})")
            h = hashlib.sha256()
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
            if h.hexdigest() != want.get("sha256"):
                return f"{path} changed since its stage finished (content hash differs)"
            fh.seek(0)
            bad = _well_formed(fh, path)
    except FileNotFoundError:
        return f"{path} is missing"
    except UnsafeFileError as e:
        return str(e)
    except OSError as e:
        return f"{path} cannot be read ({e.strerror or e})"
    return f"{path} {bad}" if bad else None


def check_record(root: str | os.PathLike, record: Mapping[str, Mapping[str, Any]]) -> str | None:
    """None if every file of ``record`` is on disk with its size and hash; else a sentence
    naming the first file that is missing, a link (or below one), not a regular file, changed
    (size, then hash: compared before anything is parsed), or malformed for its type."""
    root = Path(root)
    for rel, want in record.items():
        link = _link_in(root, rel)
        if link is not None:  # a stage writes files; a link is never read in their place
            return f"{link} is a symbolic link, not what its stage wrote"
        why = _check_file(root / rel, want)
        if why is not None:
            return why
    return None


def read_recorded(path: str | os.PathLike, want: Mapping[str, Any] | None, limit: int) -> bytes:
    """The bytes of ``path`` if it is the file its record ``want`` (:func:`file_record`'s
    ``{"size", "sha256"}``) describes: a regular file (no link, no FIFO), at most ``limit``
    bytes, its size compared before it is read and its hash before the caller parses it.
    ``FileNotFoundError`` when it is missing; a ValueError naming it otherwise (no record
    included)."""
    path = Path(path)
    if not isinstance(want, Mapping):
        if not os.path.lexists(path):
            raise FileNotFoundError(errno.ENOENT, "no such file", str(path))
        raise ValueError(f"{path} has no record in the run's manifest")
    with open_regular(path, limit) as (fh, st):
        if st.st_size != want.get("size"):
            raise ValueError(f"{path} changed since it was recorded (size {st.st_size} bytes, "
                             f"recorded {want.get('size')})")
        data = fh.read(limit + 1)
    if hashlib.sha256(data).hexdigest() != want.get("sha256"):
        raise ValueError(f"{path} changed since it was recorded (content hash differs)")
    return data


# ----------------------------------------------------------------------------- built folders

#: The record inside a folder built once and read back by later runs (a converted base in
#: ``<run>/base_models/``, the format warm-start in the cache): every other file's size and hash.
FOLDER_RECORD = "vdlib_record.json"


def record_folder(folder: str | os.PathLike) -> Path:
    """Write :data:`FOLDER_RECORD` into ``folder``: the :func:`file_record` of every other file
    in it (call it before the folder is renamed into place)."""
    folder = Path(folder)
    names = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                   if p.is_file() and p.name != FOLDER_RECORD)
    path = folder / FOLDER_RECORD  # a plain write: the folder appears whole, by its rename
    path.write_text(json.dumps(file_record(folder, names), indent=2) + "\n", encoding="utf-8")
    return path


def check_folder(folder: str | os.PathLike) -> str | None:
    """None if ``folder`` holds exactly the files of its :data:`FOLDER_RECORD`, with their sizes
    and hashes (:func:`check_record`); else a sentence naming what is wrong: no record (a
    folder built before records existed, or by hand), an unreadable record, a file changed,
    missing, malformed, or not in the record."""
    folder = Path(folder)
    if folder.is_symlink() or not folder.is_dir():
        return f"{folder} is not a folder" + (" (a symbolic link)" if folder.is_symlink() else "")
    path = folder / FOLDER_RECORD
    if path.is_symlink() or not path.is_file():
        return f"{folder} has no record of its files ({FOLDER_RECORD})"
    try:
        record = read_json(path, RECORD_MAX_BYTES)
    except (OSError, ValueError):  # UnsafeFileError and UnicodeDecodeError included
        record = None
    if not isinstance(record, dict) or not all(isinstance(v, dict) for v in record.values()):
        return f"{path} is not a valid record"
    why = check_record(folder, record)
    if why is not None:
        return why
    extra = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                   if (p.is_file() or p.is_symlink()) and p.name != FOLDER_RECORD
                   and p.relative_to(folder).as_posix() not in record)
    return f"{folder / extra[0]} is not in the folder's record" if extra else None


def verified_build_dir(target: str | os.PathLike, build: Any, what: str, *,
                       exclusive: bool = False) -> Path:
    """``target``, a folder built once by ``build(tmp_dir)`` and read back later (a converted
    base, a warm-start): built with its :data:`FOLDER_RECORD` and renamed into place
    (:func:`vdlib.engines.models.atomic_build_dir`); on reuse checked against that record
    (:func:`check_folder`), and built again when it does not match (the log names the file
    and ``what``). A folder that still does not match after its rebuild is a
    :class:`vdlib.engines.models.ModelUnavailableError` naming the file (one line from the CLI).
    ``exclusive``: no other process builds in ``target``'s folder (a run folder whose lock the
    caller holds), so what a killed build left there (``.<name>.tmp-*``, ``.<name>.damaged-*``)
    is removed; a shared cache keeps it (it may be another process's build in progress)."""
    import shutil

    from vdlib.engines.models import ModelUnavailableError, atomic_build_dir

    target = Path(target)
    if exclusive and target.parent.is_dir():
        for pattern in (".*.tmp-*", ".*.damaged-*"):
            for left in target.parent.glob(pattern):
                if left.is_dir() and not left.is_symlink():
                    shutil.rmtree(left, ignore_errors=True)
    if target.exists() or target.is_symlink():
        why = check_folder(target)
        if why is None:
            return target
        logger.warning("%s: %s; building it again", what, why)
        stale = target.with_name(f".{target.name}.damaged-{os.getpid()}")
        shutil.rmtree(stale, ignore_errors=True)  # left by an earlier crash
        try:  # moved away first: a process reading it meanwhile never sees it half-removed
            os.rename(target, stale)
        except FileNotFoundError:  # another process moved it first
            pass
        if stale.is_symlink() or stale.is_file():
            stale.unlink()
        else:
            shutil.rmtree(stale, ignore_errors=True)

    def build_recorded(tmp: Path) -> None:
        build(tmp)
        record_folder(tmp)

    atomic_build_dir(target, build_recorded)
    why = check_folder(target)
    if why is not None:  # another process built it at the same time, and differently
        raise ModelUnavailableError(f"{what}: {why} right after it was built; remove "
                                    f"{target} and run again")
    return target
