"""What a run folder is and what it holds: the config fingerprint, the lock, and the record of
every finished stage (docs/reliability.md).

- **Fingerprint.** :func:`config_fingerprint` hashes the resolved config canonically (sorted
  JSON, SHA-256) without the fields in :data:`NOT_FINGERPRINTED`: where things are written or
  cached, the grid a run belongs to, the GPUs and servers it uses, and the sections that the
  co-evolution loop never reads (evaluation, verification, transfer: they keep their own
  records). :func:`fingerprint_diff` lists the keys two configs differ in.
- **Where the fingerprint lives.** ``manifest.json`` holds it with the fingerprinted config
  (:func:`manifest_fingerprint`); ``config.yaml`` is its readable copy.
  :func:`folder_config_differences` decides whether a folder fits a config, from the manifest
  (or, for a folder made before, from ``config.yaml``); stage records whose config is unknown
  are refused.
- **Lock.** :class:`RunLock` holds an OS-level exclusive lock (``fcntl.flock``) on
  ``<run>/.lock`` for as long as the process lives; a second process is refused with the
  holder's pid (:class:`RunLockedError`). The kernel drops the lock when its holder dies, even
  by SIGKILL. The file is opened with ``O_NOFOLLOW`` and must be a regular file of this user
  with one link holding a pid, else it is refused untouched (:class:`UnsafeLockError`).
  (``vdlib status`` probes it without taking or writing it: :func:`vdlib.grid.status.lock_holder`.)
- **Stage records.** :func:`file_record` gives the size and SHA-256 of each file a stage wrote
  (a checkpoint folder: each file in it); :func:`check_record` compares a record with the disk
  and names the first file that differs, is missing, is a symbolic link, or is not what its
  type requires (a JSONL line that does not parse, a JSON file that does not parse, an empty
  ``.safetensors``).
- **Built folders.** A folder built once and read back by later runs (a converted base in
  ``<run>/base_models/``, the format warm-start in the cache) carries its own record
  (:data:`FOLDER_RECORD`); :func:`verified_build_dir` checks it on reuse and builds the folder
  again when it does not match.

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
import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from vdlib.utils.safe_read import UnsafeFileError, open_regular, read_json

__all__ = ["NOT_FINGERPRINTED", "fingerprinted", "config_fingerprint", "fingerprint_diff",
           "RunLock", "RunLockedError", "file_record", "check_record", "LOCK_FILE",
           "read_manifest", "update_manifest", "RunConfigMismatch", "set_aside", "claim_run",
           "remove_outputs", "remove_temporary", "UnsafeLockError", "UnsafeRunFolderError",
           "FOLDER_RECORD", "record_folder", "check_folder", "verified_build_dir",
           "manifest_fingerprint", "folder_config_differences", "read_recorded",
           "MANIFEST_MAX_BYTES", "check_run_folder_links"]


logger = logging.getLogger(__name__)

from vdlib.loop.fingerprint import (  # noqa: E402, F401 - re-exported
    NOT_FINGERPRINTED,
    config_fingerprint,
    fingerprint_diff,
    fingerprinted,
)

# ----------------------------------------------------------------------------- the lock
# (vdlib.loop.run_lock; re-exported here)
from vdlib.loop.run_lock import (  # noqa: E402, F401
    LOCK_FILE,
    RunLock,
    RunLockedError,
    UnsafeLockError,
    UnsafeRunFolderError,
)

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
        record = read_json(path, MANIFEST_MAX_BYTES)
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


# ----------------------------------------------------------------------------- the manifest


#: a ``manifest.json`` larger than this is refused unread (a run's records take about 5 KB per
#: iteration: 1,000 iterations, the config's most, stay well below it)
MANIFEST_MAX_BYTES = 16 << 20


def read_manifest(path: str | os.PathLike) -> dict[str, Any]:
    """The run's ``manifest.json`` as a dict ({} if absent), read bounded
    (:data:`MANIFEST_MAX_BYTES`), never through a link and never waiting on a FIFO
    (:func:`vdlib.utils.safe_read.read_json`). A file that is not a regular file, too large or
    does not parse is an error naming it and saying what to do."""
    path = Path(path)
    try:
        data = read_json(path, MANIFEST_MAX_BYTES)
    except FileNotFoundError:
        return {}
    except UnsafeFileError as e:
        raise ValueError(f"{e}; the run's record is unusable: move the run folder away "
                         "(--force does) and run again") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"{path} is not valid JSON ({e}); the run's record is lost: move the "
                         "run folder away (--force does) and run again") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} holds {type(data).__name__}, not a JSON object")
    return data


def update_manifest(path: str | os.PathLike, **fields: Any) -> dict[str, Any]:
    """Merge ``fields`` into the manifest and write it atomically; returns the new manifest."""
    from vdlib.utils.artifacts import atomic_write_json

    data = {**read_manifest(path), **fields}
    atomic_write_json(path, data)
    return data


# ----------------------------------------------------------------------------- claiming a folder


class RunConfigMismatch(ValueError):
    """The run folder holds a run of another config (the message lists the differing keys), or
    records whose config is unknown."""


# a params file with arms names each run <arm>-seed<seed> (--run-id is refused there)
_WAYS_OUT = ("give this config another --output-dir or experiment (or, for a run without arms, "
             "another --run-id), or pass --force to move the old run aside and start afresh")


def _previous_config(run_dir: Path) -> dict[str, Any] | None:
    from vdlib.config.config_yaml import MAX_YAML_BYTES
    from vdlib.config.experiment import ConfigError, read_yaml_file
    from vdlib.config.layout import config_path

    path = config_path(run_dir)
    if not os.path.lexists(path):
        return None
    try:  # what it is first (no link, no FIFO), then read within the params file's bounds
        with open_regular(path, MAX_YAML_BYTES):
            pass
    except (OSError, UnsafeFileError) as e:
        why = str(e) if isinstance(e, UnsafeFileError) else f"{path} cannot be read ({e})"
        raise ValueError(f"{why}; the run's config is unusable: move the run folder away "
                         "(--force does) and run again") from None
    try:
        data = read_yaml_file(path, "run config")
    except ConfigError as e:
        raise ValueError(f"{e}; the run's config is lost: move the run folder away (--force "
                         "does) and run again") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a mapping; move the run folder away (--force does)")
    return data


def manifest_fingerprint(config: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest's entries that say which config made the folder: ``fingerprint``
    (:func:`config_fingerprint`) and ``fingerprinted_config`` (:func:`fingerprinted`, so that a
    refusal can name the keys that differ even when ``config.yaml`` is gone)."""
    return {"fingerprint": config_fingerprint(config),
            "fingerprinted_config": fingerprinted(config)}


def _differences(recorded: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The keys a folder's recorded config and ``new`` differ in ([] when they agree)."""
    if config_fingerprint(recorded) == config_fingerprint(new):
        return []
    return fingerprint_diff(fingerprinted(recorded), fingerprinted(new)) or [
        "(the fingerprints differ)"]


def folder_config_differences(run_dir: str | os.PathLike, new: Mapping[str, Any]) -> list[str]:
    """Why the run folder ``run_dir`` does not fit the resolved config ``new``: the keys that
    differ (folder -> now); [] when it fits or holds no run yet. When it fits but its
    ``config.yaml`` is missing or disagrees with the manifest, the log says so (``start_run``
    writes it again from ``new``, which the manifest's fingerprint matches).

    The manifest's fingerprint is the folder's record; ``config.yaml`` is its readable copy.
    A config that differs in ``iterations`` only fits where the iterations the folder holds
    records for do not depend on it (:func:`vdlib.loop.run_extension.allow_iterations_change`: the
    run is extended). A folder made before the manifest held a fingerprint is compared with
    its ``config.yaml``;
    one with stage records but neither is refused (the config that made them is unknown). A
    ``manifest.json`` or ``config.yaml`` that does not parse is a ValueError naming it; a
    manifest whose fingerprint does not match its own config, or stage records of an unknown
    config, a :class:`RunConfigMismatch`."""
    from vdlib.config.layout import config_path, manifest_path
    from vdlib.loop.run_extension import allow_iterations_change  # a changed T that is safe

    run_dir = Path(run_dir)
    manifest = read_manifest(manifest_path(run_dir))
    old = _previous_config(run_dir)
    path = manifest_path(run_dir)
    stages = manifest.get("stages") or {}
    if "fingerprint" in manifest or "fingerprinted_config" in manifest:
        fingerprint, recorded = manifest.get("fingerprint"), manifest.get("fingerprinted_config")
        if not isinstance(recorded, dict) or config_fingerprint(recorded) != fingerprint:
            raise RunConfigMismatch(f"{path}: its fingerprint does not match its "
                                    f"fingerprinted_config (edited or damaged); {_WAYS_OUT}")
        differ = allow_iterations_change(_differences(recorded, new), recorded, new, stages)
        if differ:
            return differ
        if old is None or config_fingerprint(old) != fingerprint:
            logger.warning("%s %s; written again from this config, which the manifest's "
                           "fingerprint matches", config_path(run_dir),
                           "is missing" if old is None else "differs from the manifest's "
                           "fingerprint")
        return []
    if old is not None:
        return allow_iterations_change(_differences(old, new), old, new, stages)
    if manifest.get("stages"):
        raise RunConfigMismatch(
            f"{run_dir} holds stage records but neither {config_path(run_dir).name} nor a "
            f"fingerprint in {path.name}: the config that made them is unknown; {_WAYS_OUT}")
    return []


def set_aside(run_dir: str | os.PathLike) -> Path:
    """Rename ``run_dir`` to ``<name>.replaced-<UTC time>`` beside it; returns the new path."""
    import datetime

    run_dir = Path(run_dir)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S%fZ")
    target = run_dir.with_name(f"{run_dir.name}.replaced-{stamp}")
    run_dir.rename(target)
    return target


def _linked_folders(run_dir: Path) -> list[Path]:
    """The entries of ``run_dir`` that the loop writes into (``iter_<t>``, ``base_models``)
    and that are symbolic links."""
    from vdlib.config.layout import iteration_of

    return sorted(p for p in run_dir.iterdir() if p.is_symlink()
                  and (iteration_of(p) is not None or p.name == "base_models"))


def check_run_folder_links(cfg: Any) -> None:
    """Refuse (:class:`UnsafeRunFolderError`) a run folder of ``cfg``, or an experiment folder
    above it inside ``output_dir``, that is a symbolic link
    (:func:`vdlib.config.layout.linked_run_folder`): the lock, manifest, config and iterations
    would be written into the link's target. ``output_dir`` itself may be a link."""
    from vdlib.config.layout import linked_run_folder, run_id

    linked = linked_run_folder(cfg.output_dir, cfg.experiment, run_id(cfg))
    if linked is None:
        return
    try:
        target = f" to {os.readlink(linked)}"
    except OSError:
        target = ""
    raise UnsafeRunFolderError(
        f"{linked} is a symbolic link{target}; a run never writes its lock, manifest, config or "
        "iterations through a link. Remove the link (its target is untouched) and run again, "
        "or point output_dir itself at the other place (output_dir may be a link)")


def claim_run(cfg: Any, *, force: bool = False) -> tuple[RunLock, Path]:
    """Lock the run folder of ``cfg`` (created if missing) and check that it holds a run of the
    same config fingerprint (or none yet: :func:`folder_config_differences`). A run or
    experiment folder that is a symbolic link (:func:`check_run_folder_links`), a lock that is
    not ours (:class:`UnsafeLockError`) or an ``iter_<t>`` or ``base_models`` entry that is a
    symbolic link (:class:`UnsafeRunFolderError`) is refused first, ``force`` or not. Another
    config, or stage records whose config is unknown, is refused with the differing keys
    (:class:`RunConfigMismatch`); with ``force`` the old folder is moved aside
    (:func:`set_aside`) and a fresh one is started, so old and new results never mix. A
    corrupt ``config.yaml`` or ``manifest.json`` is an error naming the file (moved aside
    under ``force``). Nothing in the folder is written here. Returns (held lock, folder)."""
    from vdlib.config.experiment import to_dict
    from vdlib.config.layout import run_path

    run_dir = run_path(cfg)
    check_run_folder_links(cfg)  # before the lock: its mkdir would follow a link
    lock = RunLock(run_dir).acquire()
    try:
        linked = _linked_folders(run_dir)
        if linked:
            raise UnsafeRunFolderError(
                f"{linked[0]} is a symbolic link to {os.readlink(linked[0])}; a run writes and "
                "removes files in its own folders and never follows a link there. If the folder "
                f"is yours, remove the link (rm {linked[0]}) and run again; otherwise choose "
                "another output_dir")
        try:
            differ = folder_config_differences(run_dir, to_dict(cfg))
            why = "\n  ".join(differ)
        except ValueError as e:
            if not force:
                raise
            differ, why = [str(e)], str(e)
        if differ and not force:
            raise RunConfigMismatch(
                f"{run_dir} holds a run of another config; the keys that differ (folder -> "
                f"now):\n  {why}\nResume it with its own config, or {_WAYS_OUT}")
        if differ:
            aside = set_aside(run_dir)
            logger.warning("%s held another config (%s); moved to %s", run_dir,
                           why.replace("\n  ", "; "), aside)
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
        if path.is_symlink():  # the link goes, never what it points to
            path.unlink()
        elif path.is_dir():
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
