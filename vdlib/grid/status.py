"""``vdlib status OUTPUT_DIR``: where every run of an output folder stands, as one table.

A run folder is ``<output_dir>/<experiment>/<run_id>/`` holding both ``config.yaml`` and
``manifest.json`` (:mod:`vdlib.config.layout`); anything else (an experiment's reports and base
evaluations, the executed notebooks, hidden folders) is not a run and is passed over. A folder
that ``--force`` set aside (``<run_id>.replaced-<time>``, :func:`vdlib.runs.run_state.set_aside`) is
skipped too, or listed with the state ``replaced`` when asked (``include_replaced``).

Each run's state, read from its manifest's stage records (keys ``"<t>/<stage>"``, stages in the
order of :data:`vdlib.loop.stages.STAGES`), its lock and its iteration folders:

- ``done``: every stage of every planned iteration is recorded;
- ``running``: another process holds the run's lock (:class:`vdlib.runs.run_state.RunLock`);
- ``stopped mid-stage``: not done, not locked, and the next stage left something behind: one of
  its outputs (``vdlib.loop.stages.STAGE_TABLE``) without a record, or a hidden working file or
  folder (TRL's ``.trl_*``, a half-written ``.<name>.*.tmp``) in its iteration folder. A resume
  removes these and runs the stage again. This state wins over ``new`` (a run killed in its very
  first stage);
- ``new``: no stage recorded yet and nothing left behind;
- ``stopped``: not done, not locked, stopped between two stages;
- ``damaged``: a file that a recorded stage wrote is missing or is not what its record says
  (the row names it); a resume runs that stage and every later one again. Checked for every run
  that is not running: the size of every recorded file and the SHA-256 of those up to
  :data:`HASH_ALWAYS_BYTES` (``metrics.json``, the question sets; a hand-edited value is caught
  even when the size stays), and with ``verify`` (``vdlib status --verify``) the SHA-256 and
  well-formedness of every file, as a resume checks them (:func:`check_records`);
- ``unreadable``: its ``config.yaml`` or ``manifest.json`` is missing, does not parse, or holds
  values status cannot use (the row names the file; the other runs are listed as usual). Any
  other error reading one folder also makes that row ``unreadable`` rather than stopping the
  table, and the work per run does not grow with ``iterations`` (a hand-edited
  ``iterations: 1000000000000`` is one row, not an out-of-memory).

The lock is probed only where ``<run>/.lock`` exists, without taking or writing it
(:func:`lock_holder`: a shared ``flock`` on a read-only descriptor, which fails while a run
holds the exclusive lock; links are not followed). A lock that cannot be probed (a link, an
unreadable file) is logged and the run counted as not running.

>>> print(format_status([]), end="")
no runs found
"""

from __future__ import annotations

import dataclasses
import datetime
import errno
import logging
import os
import re
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vdlib.config import layout
from vdlib.grid.status_format import format_number  # noqa: F401 - re-exported
from vdlib.grid.status_records import (  # noqa: F401 - re-exported
    HASH_ALWAYS_BYTES,
    check_records,
    first_missing,
    recorded_stages,
)
from vdlib.runs.run_state import LOCK_FILE, read_manifest
from vdlib.utils import safe_read

__all__ = ["RunStatus", "STATES", "METRIC_KEYS", "collect_status", "format_status",
           "state_label", "format_number", "main", "lock_holder", "check_records",
           "recorded_stages", "HASH_ALWAYS_BYTES"]

logger = logging.getLogger(__name__)

#: every state a run can be in, in the order the footer counts them
STATES = ("done", "running", "stopped mid-stage", "stopped", "new", "damaged", "unreadable",
          "replaced")

#: a ``config.yaml`` larger than this is not read (a run's resolved config is a few KB)
CONFIG_MAX_BYTES = 1 << 20
#: a ``metrics.json`` larger than this is not read (one iteration's numbers)
METRICS_MAX_BYTES = 64 << 20

#: the keys of the last finished iteration's ``metrics.json`` shown in the table
METRIC_KEYS = ("valid_questions", "generated", "self_bleu", "vendi", "curriculum_size",
               "kept_fraction")

# the name set_aside gives a folder moved away by --force: <run_id>.replaced-<UTC time>
_REPLACED = re.compile(r"^(?P<run_id>.+)\.replaced-[0-9TZ]+$")


@dataclass
class RunStatus:
    """Where one run stands. ``iteration`` is the iteration of ``next_stage`` (the last one
    when done); ``metrics`` are :data:`METRIC_KEYS` of iteration ``metrics_iteration``'s
    ``metrics.json`` (None where absent); ``problem`` names the unreadable or damaged file
    (``detail``: what is wrong with it), and ``leftovers`` what a stage stopped midway left in
    its iteration folder."""

    experiment: str
    run_id: str
    path: Path
    state: str
    arm: str | None = None
    seed: int | None = None
    iterations: int | None = None
    stages_done: int = 0
    stages_total: int | None = None
    iteration: int | None = None
    next_stage: str | None = None
    last_update: datetime.datetime | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    metrics_iteration: int | None = None
    problem: str | None = None
    leftovers: tuple[str, ...] = ()
    detail: str | None = None

    @property
    def label(self) -> str:
        """The state as the table shows it: :func:`state_label`."""
        return state_label(self)


def state_label(status: RunStatus) -> str:
    """``STOPPED MID-STAGE (<stage>, iter <t>)`` for a run stopped inside a stage,
    ``unreadable (<file>)`` for a run whose config or manifest does not parse, ``damaged
    (<file>)`` for a run whose recorded file changed, else the state.

    >>> state_label(RunStatus("x", "r", Path("r"), "stopped mid-stage", iteration=2,
    ...                       next_stage="proposer"))
    'STOPPED MID-STAGE (proposer, iter 2)'
    """
    if status.state == "stopped mid-stage":
        return f"STOPPED MID-STAGE ({status.next_stage}, iter {status.iteration})"
    if status.state in ("unreadable", "damaged"):
        return f"{status.state} ({status.problem})"
    return status.state


# ----------------------------------------------------------------------------- finding runs


def _visible_dirs(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError as e:
        logger.warning("cannot list %s (%s)", folder, e)
        return []


def _is_run_folder(path: Path) -> bool:
    """A run folder holds ``config.yaml`` or ``manifest.json`` (a run with only one of them is
    listed as ``unreadable``, naming the missing one)."""
    return (os.path.lexists(layout.config_path(path))
            or os.path.lexists(layout.manifest_path(path)))


def collect_status(output_dir: str | os.PathLike, *, include_replaced: bool = False,
                   verify: bool = False) -> list[RunStatus]:
    """The :class:`RunStatus` of every run folder ``<output_dir>/<experiment>/<run_id>/``, by
    experiment and run id. Folders set aside by ``--force`` are skipped, or listed with the
    state ``replaced`` with ``include_replaced``. A missing ``output_dir`` has no runs.
    ``verify``: hash every recorded file (:func:`check_records`), not only the small ones."""
    from vdlib.loop.stages import STAGE_TABLE  # imports torch: only when a table is asked for

    out = []
    for experiment in _visible_dirs(Path(output_dir)):
        for run in _visible_dirs(experiment):
            if not _is_run_folder(run):
                continue
            replaced = _REPLACED.match(run.name)
            if replaced and not include_replaced:
                logger.debug("%s was set aside by --force: skipped", run)
                continue
            try:
                status = _run_status(experiment.name, run, STAGE_TABLE, replaced is not None,
                                     verify=verify)
            except Exception as e:  # noqa: BLE001 - one bad folder never blanks the table
                status = _unreadable(RunStatus(experiment.name, run.name, run, "new"),
                                     "run folder", ValueError(f"{run}: {_brief(e)}"))
            out.append(status)
    return out


def _brief(err: BaseException, limit: int = 200) -> str:
    """An error as one bounded line: its type and the first line of its message."""
    text = (str(err).splitlines() or [""])[0]
    text = text if len(text) <= limit else text[:limit] + "..."
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


# ----------------------------------------------------------------------------- one run


class _MissingConfig(ValueError):
    """The run folder has no ``config.yaml``."""


def _manifest_config(run: Path) -> dict[str, Any] | None:
    """The fingerprinted config the manifest holds (``fingerprinted_config``, written beside
    its fingerprint), if it has one with a usable ``iterations``; else None."""
    try:
        data = read_manifest(layout.manifest_path(run)).get("fingerprinted_config")
        return _checked_config(data, layout.manifest_path(run)) if data is not None else None
    except (OSError, ValueError):
        return None


def _checked_config(data: Any, path: Path) -> dict[str, Any]:
    """``data`` if it is a mapping whose ``iterations`` is within the config's bounds; else a
    ValueError naming ``path`` (never formatting an unbounded value)."""
    import reprlib

    from vdlib.config.experiment import ExperimentConfig

    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a mapping")
    iterations = data.get("iterations")
    meta = {f.name: f.metadata for f in dataclasses.fields(ExperimentConfig)}["iterations"]
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1 \
            or iterations > meta["le"]:
        raise ValueError(f"{path}: iterations is {reprlib.repr(iterations)}, not an integer in "
                         f"[1, {meta['le']}]")
    return data


def _read_config(run: Path) -> dict[str, Any]:
    """The folder's ``config.yaml`` as a mapping whose ``iterations`` is within the config's
    bounds; ValueError (naming the file, never formatting an unbounded value) otherwise, and
    :class:`_MissingConfig` when there is none."""
    import yaml

    path = layout.config_path(run)
    if not os.path.lexists(path):
        raise _MissingConfig(f"{path} is missing")
    try:  # bounded, never through a link, never waiting on a FIFO
        data = yaml.safe_load(safe_read.read_text(path, CONFIG_MAX_BYTES))
    except safe_read.UnsafeFileError as e:  # names the file already
        raise ValueError(str(e)) from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError) as e:
        raise ValueError(f"{path} cannot be read ({(str(e).splitlines() or [''])[0]})") from None
    return _checked_config(data, path)


def _read_stages(run: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    path = layout.manifest_path(run)
    if not os.path.lexists(path):
        if layout.iteration_dirs(run):  # work was done, and its record is gone
            raise ValueError(f"{path} is missing, but the run has iteration folders")
        return {}, {}  # claimed, stopped before its manifest was first written: new
    manifest = read_manifest(path)
    stages = manifest.get("stages", {})
    if not isinstance(stages, dict):
        raise ValueError(f"{layout.manifest_path(run)}: 'stages' is not a JSON object")
    return manifest, stages


def _run_status(experiment: str, run: Path, stage_table: Sequence[Any], replaced: bool, *,
                verify: bool = False) -> RunStatus:
    """The status of one run folder (``stage_table``: :data:`vdlib.loop.stages.STAGE_TABLE`). The
    work does not grow with the config's ``iterations``, only with the records present."""
    original = _REPLACED.match(run.name)
    arm_seed = layout.parse_arm_run_id(original["run_id"] if original else run.name)
    status = RunStatus(experiment, run.name, run, "new", arm=arm_seed[0] if arm_seed else None,
                       seed=arm_seed[1] if arm_seed else None)
    status.last_update = _newest_mtime(run)
    try:
        config = _read_config(run)
    except _MissingConfig as e:  # the manifest's copy, when it has one (a resume rewrites it)
        config = _manifest_config(run)
        if config is None:
            return _unreadable(status, layout.CONFIG_FILE, e)
    except ValueError as e:
        return _unreadable(status, layout.CONFIG_FILE, e)
    status.iterations = T = config["iterations"]
    seed = config.get("seed")
    if status.seed is None and isinstance(seed, int) and not isinstance(seed, bool):
        status.seed = seed
    try:
        manifest, records = _read_stages(run)
    except ValueError as e:
        return _unreadable(status, layout.MANIFEST_FILE, e)
    status.last_update = _latest(status.last_update, _parse_time(manifest.get("updated")))
    names = [stage.name for stage in stage_table]
    done = recorded_stages(records, T, names)
    status.stages_total = T * len(names)
    status.stages_done = len(done)
    status.iteration, index = first_missing(done, T, len(names))
    status.next_stage = names[index] if index is not None else None
    holder = None if replaced else lock_holder(run)
    damage = None
    if not replaced and holder is None:  # a running run rewrites its files: not checked
        damage = check_records(run, records, names, T, verify=verify)
    if damage is not None:
        (t, index), why = damage
        status.iteration, status.next_stage = t, names[index]
        # what was recorded before the damaged stage still counts
        done = {k for k in done if k < (t, index)}
        status.stages_done = len(done)
    status.metrics_iteration, status.metrics = _last_metrics(
        run, sorted(t for t, i in done if i == len(names) - 1))
    if replaced:
        status.state = "replaced"
    elif holder is not None:
        status.state = "running"
    elif damage is not None:
        status.state, status.problem, status.detail = "damaged", _damaged_file(run, why), why
        logger.warning("%s: %s; a resume runs %s of iteration %d again, and every later stage",
                       run, why, status.next_stage, status.iteration)
    elif index is None:
        status.state = "done"
    else:
        status.leftovers = _leftovers(run, status.iteration, stage_table[index].outputs)
        status.state = ("stopped mid-stage" if status.leftovers
                        else "new" if not status.stages_done else "stopped")
    return status


def _damaged_file(run: Path, why: str) -> str:
    """The damaged file of a :func:`check_records` sentence, relative to the run folder."""
    head = why.split(" ", 1)[0].rstrip(":")
    try:
        return Path(head).relative_to(run).as_posix()
    except ValueError:
        return head


def _unreadable(status: RunStatus, name: str, error: Exception) -> RunStatus:
    logger.warning("%s", error)
    status.state, status.problem, status.detail = "unreadable", name, str(error)
    return status


def lock_holder(run: str | os.PathLike) -> str | None:
    """The pid (as the lock file says, or ``"unknown"``) of the process that holds ``run``'s
    lock, or None when none does. Never creates, takes or writes the lock: a shared ``flock``
    on a read-only descriptor (refused while a run holds the exclusive one), released at once;
    links are not followed (a link or an unreadable file: logged, counted as not held)."""
    import fcntl

    path = Path(run) / LOCK_FILE
    if not os.path.lexists(path):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        why = "it is a link" if e.errno == errno.ELOOP else e.strerror or str(e)
        logger.warning("cannot check the lock of %s (%s): counted as not running", run, why)
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                logger.warning("cannot check the lock of %s (%s): counted as not running", run,
                               e.strerror or e)
                return None
            text = os.read(fd, 32).decode("ascii", "replace").strip()
            return text if text.isdigit() else "unknown"
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _leftovers(run: Path, t: int, outputs: Sequence[str]) -> tuple[str, ...]:
    """What the stage of iteration ``t`` with ``outputs`` left behind: its outputs (it has no
    record) and any hidden file or folder in the iteration folder."""
    folder = layout.iteration_dir(run, t)
    if not folder.is_dir():
        return ()
    found = [name for name in outputs if (folder / name).exists()]
    found += sorted(p.name for p in folder.iterdir() if p.name.startswith("."))
    return tuple(found)


def _last_metrics(run: Path, recorded: Sequence[int]) -> tuple[int | None, dict[str, Any]]:
    """(t, :data:`METRIC_KEYS` of ``metrics.json``) of the last iteration whose metrics stage is
    recorded (``recorded``: those iterations); (None, {}) if none, or if that file does not
    parse (logged)."""
    import json

    finished = [t for t, _ in layout.iteration_dirs(run, layout.METRICS_FILE) if t in recorded]
    if not finished:
        return None, {}
    path = layout.iteration_dir(run, finished[-1]) / layout.METRICS_FILE
    try:
        data = json.loads(safe_read.read_text(path, METRICS_MAX_BYTES))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        logger.warning("%s cannot be read (%s)", path, e)
        return None, {}
    if not isinstance(data, dict):
        logger.warning("%s is not a JSON object", path)
        return None, {}
    return finished[-1], {key: data.get(key) for key in METRIC_KEYS}


def _newest_mtime(run: Path) -> datetime.datetime | None:
    """The newest modification time of a file under ``run`` (the lock file aside: probing it
    touches it), UTC."""
    newest = None
    for root, _, files in os.walk(run):
        for name in files:
            if name == LOCK_FILE and Path(root) == run:
                continue
            try:
                mtime = os.stat(os.path.join(root, name)).st_mtime
            except OSError:  # removed while we walk: a running run
                continue
            newest = mtime if newest is None else max(newest, mtime)
    return None if newest is None else datetime.datetime.fromtimestamp(newest, datetime.UTC)


def _parse_time(value: Any) -> datetime.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed.replace(tzinfo=datetime.UTC) if parsed.tzinfo is None else parsed


def _latest(*times: datetime.datetime | None) -> datetime.datetime | None:
    known = [t for t in times if t is not None]
    return max(known) if known else None


# ----------------------------------------------------------------------------- the table


def _shown_name(name: str) -> str:
    """A folder name as a cell: as it is if it follows :mod:`vdlib.config.names`' rule, else
    escaped (a hand-made folder's newline cannot forge a row, nor a ``|`` a column)."""
    from vdlib.config.names import name_problem

    if name_problem(name) in (None, "reserved"):
        return name
    return ascii(name).replace("|", "\\|")


def _row(s: RunStatus) -> list[str]:
    iteration = "-" if s.iterations is None else f"{s.iteration or '-'}/{s.iterations}"
    stages = "-" if s.stages_total is None else f"{s.stages_done}/{s.stages_total}"
    updated = "-" if s.last_update is None else \
        s.last_update.astimezone(datetime.UTC).strftime("%Y-%m-%d %H:%M")
    next_stage = "-" if s.state in ("done", "unreadable") or s.next_stage is None \
        else s.next_stage
    return [_shown_name(s.experiment), _shown_name(s.run_id), s.label, iteration, stages,
            next_stage, updated,
            *(format_number(s.metrics.get(k)) for k in METRIC_KEYS)]


def format_status(statuses: Sequence[RunStatus]) -> str:
    """A Markdown table, one row per run: experiment, run, state (:func:`state_label`),
    iteration ``t/T``, stages done/total, next stage, last update (UTC), and the
    :data:`METRIC_KEYS` of the last finished iteration; then a line counting the runs by state
    (and naming what each run stopped mid-stage left behind)."""
    if not statuses:
        return "no runs found\n"
    header = ["experiment", "run", "state", "iter", "stages", "next", "updated (UTC)",
              *METRIC_KEYS]
    rows = [header, *(_row(s) for s in statuses)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    lines = [line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|",
             *(line(r) for r in rows[1:]), ""]
    counts = Counter(s.state for s in statuses)
    parts = [f"{counts[state]} {state}" for state in STATES if counts[state]]
    lines.append(f"{len(statuses)} run{'s' if len(statuses) != 1 else ''}: " + ", ".join(parts))
    for s in statuses:
        if s.state == "stopped mid-stage":
            lines.append(f"{s.experiment}/{s.run_id}: stopped inside {s.next_stage} of iteration "
                         f"{s.iteration} (left {', '.join(s.leftovers)}); a resume runs that "
                         "stage again")
        elif s.state == "damaged":
            lines.append(f"{s.experiment}/{s.run_id}: {s.detail}; a resume runs {s.next_stage} "
                         f"of iteration {s.iteration} again, and every later stage")
    return "\n".join(lines) + "\n"


def main(output_dir: str | os.PathLike, *, include_replaced: bool = False,
         verify: bool = False) -> int:
    """``vdlib status OUTPUT_DIR [--verify]``: print the table; 2 (and a message on stderr) if
    the folder does not exist, else 0."""
    path = Path(output_dir)
    if not path.is_dir():
        sys.stderr.write(f"vdlib status: {path} is not a folder (give the output_dir of your "
                         "runs, e.g. outputs)\n")
        return 2
    sys.stdout.write(format_status(collect_status(path, include_replaced=include_replaced,
                                                  verify=verify)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1] if len(sys.argv) > 1 else "outputs"))
