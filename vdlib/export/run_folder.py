"""A run folder read for export: its config (and fingerprint), its finished iterations' scored
questions and metrics, its checkpoints, each file checked against the run's records.

Two kinds of folder are accepted, wherever they lie (no ``<output_dir>/<experiment>/`` layout
is needed; only the folder itself), on disk or inside a committed evidence zip
(``docs/results/archives/gpu_small_main_h200x1_h200x4.zip/h200x4/vd75-seed0``, read in place through
:func:`vdlib.utils.archive.resolve`):

- **a run folder** as the loop writes it (:mod:`vdlib.config.layout`): ``config.yaml``,
  ``manifest.json`` (the config fingerprint, the versions, every stage's file record),
  ``iter_<t>/questions.jsonl``, ``curriculum.jsonl``, ``metrics.json`` and the checkpoints
  ``iter_<t>/<role>_model/``. Every file read is first checked against its record in the
  manifest (size, then SHA-256: :func:`vdlib.runs.run_state.read_recorded`), and the manifest's
  fingerprint against its own config (:func:`vdlib.runs.run_state.config_fingerprint`).
- **an extract** as the GPU holds commit it (``tools/lent-gpus/gpu_small.py export``): only
  ``iter_<t>/metrics.json`` and ``iter_<t>/questions.jsonl.gz`` (plus the trainers' logs), no
  config, no manifest, no checkpoint. What such a folder does not record (the config, its
  fingerprint, the versions) is left out of the export, and :attr:`RunFolder.not_recorded` says
  why; the arm and seed then come from the folder's name (``<arm>-seed<seed>``).

An iteration is finished when its ``metrics.json`` exists (the loop writes it last); an
iteration folder without it is refused (:class:`ExportError`), as is a folder that is no run.
"""

from __future__ import annotations

import gzip
import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vdlib.config import layout
from vdlib.runs.run_state import (
    config_fingerprint,
    read_manifest,
    read_recorded,
)
from vdlib.utils.archive import Member, resolve
from vdlib.utils.safe_read import UnsafeFileError, read_bytes

__all__ = ["ExportError", "RunFolder", "Iteration", "read_run_folder", "iteration_path",
           "ROLES", "QUESTIONS_MAX_BYTES", "GZ_QUESTIONS_FILE"]

#: the checkpoints an iteration may hold (``iter_<t>/<role>_model/``)
ROLES = ("proposer", "solver")
#: a questions file (or its decompressed extract) larger than this is refused unread
QUESTIONS_MAX_BYTES = 1 << 30
_SMALL_MAX_BYTES = 16 << 20  # metrics.json, curriculum.jsonl
#: the compressed questions of an extract (``tools/lent-gpus/gpu_small.py export``)
GZ_QUESTIONS_FILE = layout.QUESTIONS_FILE + ".gz"


class ExportError(ValueError):
    """A folder that cannot be exported (not a run, an unfinished or damaged iteration, a
    destination in the way): the message is one line naming the path and what to do."""


@dataclass
class Iteration:
    """One finished iteration: its scored questions (the loop's records, in index order), its
    ``metrics.json``, its curriculum (None in an extract) and its checkpoints' folders."""

    t: int
    questions: list[dict[str, Any]]
    metrics: dict[str, Any]
    curriculum: list[dict[str, Any]] | None
    checkpoints: dict[str, Path] = field(default_factory=dict)
    records: dict[str, dict[str, Any]] = field(default_factory=dict)  # file -> {size, sha256}


@dataclass
class RunFolder:
    """What :func:`read_run_folder` read: ``config`` is the fingerprinted config (None in an
    extract); ``fingerprint_source`` says where the fingerprint came from; ``not_recorded``
    maps each left-out field to the reason."""

    path: Path | Member
    name: str
    arm: str | None
    seed: int | None
    config: dict[str, Any] | None
    fingerprint: str | None
    fingerprint_source: str | None
    manifest: dict[str, Any]
    iterations: list[Iteration]
    not_recorded: dict[str, str]


def _records_of(manifest: dict[str, Any], t: int) -> dict[str, dict[str, Any]]:
    """Every file record of iteration ``t``'s stages (file name -> {size, sha256})."""
    out: dict[str, dict[str, Any]] = {}
    for key, record in (manifest.get("stages") or {}).items():
        head, _, _ = str(key).partition("/")
        if head == str(t) and isinstance(record, dict):
            out.update(record)
    return out


def iteration_path(run: Path | Member, t: int) -> Path | Member:
    """``<run>/iter_<t>`` of a folder or of an archive's member."""
    return run / layout.iteration_dir("", t).name


def _iteration_dirs(run: Path | Member) -> list[tuple[int, Path | Member]]:
    if isinstance(run, Path):
        return list(layout.iteration_dirs(run))
    found = [(t, m) for m in run.iterdir() if (t := layout.iteration_of(m.name)) is not None
             and m.is_dir()]
    return sorted(found, key=lambda x: x[0])


def _read_member(path: Member, want: dict[str, Any] | None, limit: int) -> bytes:
    """A member's bytes (at most ``limit``), checked against ``want`` if given."""
    import hashlib

    if not path.is_file():
        raise FileNotFoundError(str(path))
    with path.open("rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{path} is larger than {limit} bytes")
    if want is not None and (len(data) != want.get("size")
                             or hashlib.sha256(data).hexdigest() != want.get("sha256")):
        raise ValueError(f"{path} changed since it was recorded")
    return data


def _exists(path: Path | Member) -> bool:
    return os.path.lexists(path) if isinstance(path, Path) else path.exists()


def _read(path: Path | Member, want: dict[str, Any] | None, limit: int) -> bytes:
    """The bytes of ``path``, checked against its record when the run has one."""
    try:
        if isinstance(path, Member):
            return _read_member(path, want, limit)
        if want is not None:
            return read_recorded(path, want, limit)
        return read_bytes(path, limit)
    except FileNotFoundError:
        raise ExportError(f"{path} is missing; the iteration cannot be exported") from None
    except (UnsafeFileError, ValueError, OSError) as e:
        raise ExportError(f"{str(e).splitlines()[0]}; the run folder is damaged: run the run "
                          "again to repair it (vdlib run resumes), then export") from None


def _jsonl(data: bytes, path: Path | Member) -> list[dict[str, Any]]:
    try:
        rows = [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
    except (UnicodeDecodeError, ValueError) as e:
        raise ExportError(f"{path} is not JSON Lines ({e})") from None
    if not all(isinstance(r, dict) for r in rows):
        raise ExportError(f"{path} holds a line that is not a JSON object")
    return rows


def _gunzip(data: bytes, path: Path | Member) -> bytes:
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as fh:
            out = fh.read(QUESTIONS_MAX_BYTES + 1)
    except (OSError, EOFError) as e:
        raise ExportError(f"{path} is not a whole gzip file ({e})") from None
    if len(out) > QUESTIONS_MAX_BYTES:
        raise ExportError(f"{path} holds more than {QUESTIONS_MAX_BYTES} bytes; refused")
    return out


def _questions(folder: Path | Member, records: dict[str, Any], manifested: bool
               ) -> list[dict[str, Any]]:
    plain, packed = folder / layout.QUESTIONS_FILE, folder / GZ_QUESTIONS_FILE
    if _exists(plain) or manifested:
        want = records.get(layout.QUESTIONS_FILE) if manifested else None
        if manifested and want is None:
            raise ExportError(f"{plain} has no record in the run's manifest: its scoring stage "
                              "did not finish; resume the run (vdlib run), then export")
        return _jsonl(_read(plain, want, QUESTIONS_MAX_BYTES), plain)
    if _exists(packed):
        return _jsonl(_gunzip(_read(packed, None, QUESTIONS_MAX_BYTES), packed), packed)
    raise ExportError(f"{folder} has neither {layout.QUESTIONS_FILE} nor {GZ_QUESTIONS_FILE}")


def _iteration(run: Path | Member, t: int, folder: Path | Member, manifest: dict[str, Any]
               ) -> Iteration:
    manifested = bool(manifest.get("stages"))
    records = _records_of(manifest, t) if manifested else {}
    metrics_path = folder / layout.METRICS_FILE
    want = records.get(layout.METRICS_FILE) if manifested else None
    if manifested and want is None:
        raise ExportError(f"{metrics_path} has no record in the run's manifest: iteration {t} "
                          "did not finish; resume the run (vdlib run), then export")
    try:
        metrics = json.loads(_read(metrics_path, want, _SMALL_MAX_BYTES))
    except ValueError as e:
        raise ExportError(f"{metrics_path} is not JSON ({e})") from None
    if not isinstance(metrics, dict):
        raise ExportError(f"{metrics_path} is not a JSON object")
    questions = _questions(folder, records, manifested)
    curriculum = None
    cur_path = folder / layout.CURRICULUM_FILE
    if manifested or _exists(cur_path):
        cur_want = records.get(layout.CURRICULUM_FILE) if manifested else None
        curriculum = _jsonl(_read(cur_path, cur_want, _SMALL_MAX_BYTES), cur_path)
    checkpoints = {} if not isinstance(run, Path) else {  # an archive holds none
        role: layout.role_model_dir(run, t, role) for role in ROLES
        if layout.role_model_dir(run, t, role).is_dir()}
    return Iteration(t, questions, metrics, curriculum, checkpoints, records)


def _config(run: Path | Member, manifest: dict[str, Any]
            ) -> tuple[dict | None, str | None, str | None]:
    """(fingerprinted config, fingerprint, where the fingerprint comes from)."""
    recorded = manifest.get("fingerprinted_config")
    if "fingerprint" in manifest:
        if not isinstance(recorded, dict) \
                or config_fingerprint(recorded) != manifest["fingerprint"]:
            raise ExportError(f"{run / layout.MANIFEST_FILE}: its fingerprint does not match its "
                              "fingerprinted_config (edited or damaged); refused")
        return recorded, manifest["fingerprint"], "manifest.json (checked against its config)"
    path = run / layout.CONFIG_FILE
    if not _exists(path):
        return None, None, None
    if isinstance(path, Member):
        raise ExportError(f"{path}: a run with a config inside an archive is not read in place; "
                          "unpack the archive and export the folder")
    from vdlib.config.experiment import ConfigError, read_yaml_file

    try:
        data = read_yaml_file(path, "run config")
    except ConfigError as e:
        raise ExportError(str(e)) from None
    if not isinstance(data, dict):
        raise ExportError(f"{path} is not a mapping")
    from vdlib.runs.run_state import fingerprinted

    return (fingerprinted(data), config_fingerprint(data),
            "computed from config.yaml (the manifest records none: a run made before it did)")


def _parse_iterations(found: list[tuple[int, Any]], wanted: list[int] | None,
                      run: Path | Member) -> list[tuple[int, Any]]:
    by_t = dict(found)
    if wanted is None:
        return found
    missing = [t for t in wanted if t not in by_t]
    if missing:
        raise ExportError(f"{run} has no iteration {missing[0]}; it has "
                          f"{', '.join(map(str, by_t)) or 'none'}")
    return [(t, by_t[t]) for t in sorted(set(wanted))]


def read_run_folder(path: str | os.PathLike, iterations: list[int] | None = None) -> RunFolder:
    """The run folder ``path`` read for export (see the module docstring): every iteration,
    or those of ``iterations``. Raises :class:`ExportError` (one line) for a path that is no
    run folder, an unfinished iteration, or a file that differs from its record."""
    run = resolve(str(path))  # a folder, or a folder inside a committed zip
    if not run.is_dir():
        raise ExportError(f"{run} is not a folder; give a run folder (one holding iter_<t>/ "
                          "folders, e.g. outputs/<experiment>/<run_id>)")
    found = _iteration_dirs(run)
    if not found:
        raise ExportError(f"{run} is not a run folder: it holds no iteration folder "
                          "(iter_<t>/); give a run folder, e.g. outputs/<experiment>/<run_id>")
    try:
        manifest = (read_manifest(run / layout.MANIFEST_FILE) if isinstance(run, Path)
                    else json.loads(_read(run / layout.MANIFEST_FILE, None, 16 << 20))
                    if _exists(run / layout.MANIFEST_FILE) else {})
    except ValueError as e:
        raise ExportError(str(e).splitlines()[0]) from None
    chosen = _parse_iterations(found, iterations, run)
    unfinished = [t for t, folder in chosen if not _exists(folder / layout.METRICS_FILE)]
    if unfinished:
        done = [str(t) for t, f in chosen if _exists(f / layout.METRICS_FILE)]
        hint = (f"or export the finished ones: --iterations {','.join(done)}" if done
                else "no iteration has finished yet")
        raise ExportError(f"{iteration_path(run, unfinished[0])} is unfinished (no "
                          f"{layout.METRICS_FILE}); let the run finish (vdlib run resumes it), "
                          f"{hint}")
    config, fingerprint, source = _config(run, manifest)
    not_recorded: dict[str, str] = {}
    if config is None:
        why = f"no {layout.CONFIG_FILE} or {layout.MANIFEST_FILE} in the folder (an extract)"
        for key in ("config_fingerprint", "models", "vocab_dropout", "experiment",
                    "versions", "git_commit"):
            not_recorded[key] = why
    parsed = layout.parse_arm_run_id(run.name)
    arm = parsed[0] if parsed else None
    seed = config.get("seed") if config else (parsed[1] if parsed else None)
    if arm is None:
        not_recorded["arm"] = (f"the run id {run.name!r} names no arm (a run of one config, "
                               "not <arm>-seed<seed> of a grid)")
    if seed is None:
        not_recorded["seed"] = f"{run.name} records no config and its name holds no seed"
    if manifest.get("stages") is None:
        not_recorded["file_records"] = (f"{run.name} holds no stage records; its files could "
                                        "not be checked against them")
    its = [_iteration(run, t, folder, manifest) for t, folder in chosen]
    return RunFolder(run, run.name, arm, seed, config, fingerprint, source, manifest, its,
                     not_recorded)
