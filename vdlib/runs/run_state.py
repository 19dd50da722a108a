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
- **Stage records and built folders** (:mod:`vdlib.runs.file_records`, re-exported here):
  :func:`file_record` / :func:`check_record` (size, then hash, then form: nothing is parsed
  before it is known to be the recorded file), :func:`read_recorded`, and the record a built
  folder carries (:data:`FOLDER_RECORD`, :func:`verified_build_dir`).
- **Reading it back.** ``manifest.json`` (:func:`read_manifest`, at most
  :data:`MANIFEST_MAX_BYTES`) and ``config.yaml`` are read through
  :mod:`vdlib.utils.safe_read`: regular files only, never through a link, never waiting on a
  FIFO.
- **No links above it.** The run folder and the experiment folder above it must not be
  symbolic links (:func:`check_run_folder_links`, in :func:`claim_run` before the lock is
  taken); ``output_dir`` itself may be one.

>>> a = {"seed": 1, "output_dir": "/a", "scoring": {"tau_min": 0.3}}
>>> b = {"seed": 1, "output_dir": "/b", "scoring": {"tau_min": 0.2}}
>>> config_fingerprint(a) == config_fingerprint({**a, "output_dir": "/elsewhere"})
True
>>> fingerprint_diff(fingerprinted(a), fingerprinted(b))
['scoring.tau_min: 0.3 -> 0.2']
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from vdlib.utils.safe_read import UnsafeFileError, open_regular, read_json

__all__ = ["NOT_FINGERPRINTED", "fingerprinted", "config_fingerprint", "fingerprint_diff",
           "RunLock", "RunLockedError", "file_record", "check_record", "LOCK_FILE",
           "read_manifest", "update_manifest", "RunConfigMismatch", "set_aside", "claim_run",
           "remove_outputs", "remove_temporary", "UnsafeLockError", "UnsafeRunFolderError",
           "FOLDER_RECORD", "record_folder", "check_folder", "verified_build_dir",
           "manifest_fingerprint", "folder_config_differences", "read_recorded",
           "MANIFEST_MAX_BYTES", "check_run_folder_links"]


logger = logging.getLogger(__name__)

# re-exported here: stage records and built folders (vdlib.runs.file_records), the
# fingerprint (vdlib.runs.fingerprint) and the lock (vdlib.runs.run_lock)
from vdlib.runs.file_records import (  # noqa: E402, F401
    FOLDER_RECORD,
    check_folder,
    check_record,
    file_record,
    read_recorded,
    record_folder,
    verified_build_dir,
)
from vdlib.runs.fingerprint import (  # noqa: E402, F401 - re-exported
    NOT_FINGERPRINTED,
    config_fingerprint,
    fingerprint_diff,
    fingerprinted,
)
from vdlib.runs.run_lock import (  # noqa: E402, F401
    LOCK_FILE,
    RunLock,
    RunLockedError,
    UnsafeLockError,
    UnsafeRunFolderError,
)

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
    records for do not depend on it (:func:`vdlib.runs.run_extension.allow_iterations_change`: the
    run is extended). A folder made before the manifest held a fingerprint is compared with
    its ``config.yaml``;
    one with stage records but neither is refused (the config that made them is unknown). A
    ``manifest.json`` or ``config.yaml`` that does not parse is a ValueError naming it; a
    manifest whose fingerprint does not match its own config, or stage records of an unknown
    config, a :class:`RunConfigMismatch`."""
    from vdlib.config.layout import config_path, manifest_path
    from vdlib.runs.run_extension import allow_iterations_change  # a changed T that is safe

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
