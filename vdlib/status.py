"""``vdlib status OUTPUT_DIR``: where every run of an output folder stands, as one table.

A run folder is ``<output_dir>/<experiment>/<run_id>/`` holding both ``config.yaml`` and
``manifest.json`` (:mod:`vdlib.layout`); anything else (an experiment's reports and base
evaluations, the executed notebooks, hidden folders) is not a run and is passed over. A folder
that ``--force`` set aside (``<run_id>.replaced-<time>``, :func:`vdlib.run_state.set_aside`) is
skipped too, or listed with the state ``replaced`` when asked (``include_replaced``).

Each run's state, read from its manifest's stage records (keys ``"<t>/<stage>"``, stages in the
order of :data:`vdlib.stages.STAGES`), its lock and its iteration folders:

- ``done``: every stage of every planned iteration is recorded;
- ``running``: another process holds the run's lock (:class:`vdlib.run_state.RunLock`);
- ``stopped mid-stage``: not done, not locked, and the next stage left something behind: one of
  its outputs (``vdlib.stages.STAGE_TABLE``) without a record, or a hidden working file or
  folder (TRL's ``.trl_*``, a half-written ``.<name>.*.tmp``) in its iteration folder. A resume
  removes these and runs the stage again. This state wins over ``new`` (a run killed in its very
  first stage);
- ``new``: no stage recorded yet and nothing left behind;
- ``stopped``: not done, not locked, stopped between two stages;
- ``unreadable``: its ``config.yaml`` or ``manifest.json`` does not parse (the row names the
  file; the other runs are listed as usual).

The lock is probed only where ``<run>/.lock`` exists (a run without one was never claimed, so
nothing can be running in it) and is released at once; the probe writes this process's pid into
the lock file, as any claim does. A lock that cannot be opened (a read-only folder) is logged
and the run counted as not running.

>>> print(format_status([]), end="")
no runs found
"""

from __future__ import annotations

import datetime
import logging
import math
import os
import re
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vdlib import layout
from vdlib.run_state import LOCK_FILE, RunLock, RunLockedError, read_manifest

__all__ = ["RunStatus", "STATES", "METRIC_KEYS", "collect_status", "format_status",
           "state_label", "format_number", "main"]

logger = logging.getLogger(__name__)

#: every state a run can be in, in the order the footer counts them
STATES = ("done", "running", "stopped mid-stage", "stopped", "new", "unreadable", "replaced")

#: the keys of the last finished iteration's ``metrics.json`` shown in the table
METRIC_KEYS = ("valid_questions", "generated", "self_bleu", "vendi", "curriculum_size",
               "kept_fraction")

# the name set_aside gives a folder moved away by --force: <run_id>.replaced-<UTC time>
_REPLACED = re.compile(r"^(?P<run_id>.+)\.replaced-[0-9TZ]+$")


@dataclass
class RunStatus:
    """Where one run stands. ``iteration`` is the iteration of ``next_stage`` (the last one
    when done); ``metrics`` are :data:`METRIC_KEYS` of iteration ``metrics_iteration``'s
    ``metrics.json`` (None where absent); ``problem`` names the unreadable file, and
    ``leftovers`` what a stage stopped midway left in its iteration folder."""

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

    @property
    def label(self) -> str:
        """The state as the table shows it: :func:`state_label`."""
        return state_label(self)


def state_label(status: RunStatus) -> str:
    """``STOPPED MID-STAGE (<stage>, iter <t>)`` for a run stopped inside a stage,
    ``unreadable (<file>)`` for a run whose config or manifest does not parse, else the state.

    >>> state_label(RunStatus("x", "r", Path("r"), "stopped mid-stage", iteration=2,
    ...                       next_stage="proposer"))
    'STOPPED MID-STAGE (proposer, iter 2)'
    """
    if status.state == "stopped mid-stage":
        return f"STOPPED MID-STAGE ({status.next_stage}, iter {status.iteration})"
    if status.state == "unreadable":
        return f"unreadable ({status.problem})"
    return status.state


# ----------------------------------------------------------------------------- finding runs


def _visible_dirs(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError as e:
        logger.warning("cannot list %s (%s)", folder, e)
        return []


def _is_run_folder(path: Path) -> bool:
    return layout.config_path(path).is_file() and layout.manifest_path(path).is_file()


def collect_status(output_dir: str | os.PathLike, *, include_replaced: bool = False
                   ) -> list[RunStatus]:
    """The :class:`RunStatus` of every run folder ``<output_dir>/<experiment>/<run_id>/``, by
    experiment and run id. Folders set aside by ``--force`` are skipped, or listed with the
    state ``replaced`` with ``include_replaced``. A missing ``output_dir`` has no runs."""
    from vdlib.stages import STAGE_TABLE  # imports torch: only when a table is asked for

    out = []
    for experiment in _visible_dirs(Path(output_dir)):
        for run in _visible_dirs(experiment):
            if not _is_run_folder(run):
                continue
            replaced = _REPLACED.match(run.name)
            if replaced and not include_replaced:
                logger.debug("%s was set aside by --force: skipped", run)
                continue
            out.append(_run_status(experiment.name, run, STAGE_TABLE, replaced is not None))
    return out


# ----------------------------------------------------------------------------- one run


def _read_config(run: Path) -> dict[str, Any]:
    import yaml

    path = layout.config_path(run)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise ValueError(f"{path} cannot be read ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a mapping")
    iterations = data.get("iterations")
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise ValueError(f"{path}: iterations is {iterations!r}, not a positive integer")
    return data


def _read_stages(run: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    manifest = read_manifest(layout.manifest_path(run))
    stages = manifest.get("stages", {})
    if not isinstance(stages, dict):
        raise ValueError(f"{layout.manifest_path(run)}: 'stages' is not a JSON object")
    return manifest, stages


def _run_status(experiment: str, run: Path, stage_table: Sequence[Any], replaced: bool
                ) -> RunStatus:
    """The status of one run folder (``stage_table``: :data:`vdlib.stages.STAGE_TABLE`)."""
    original = _REPLACED.match(run.name)
    arm_seed = layout.parse_arm_run_id(original["run_id"] if original else run.name)
    status = RunStatus(experiment, run.name, run, "new", arm=arm_seed[0] if arm_seed else None,
                       seed=arm_seed[1] if arm_seed else None)
    status.last_update = _newest_mtime(run)
    try:
        config = _read_config(run)
    except ValueError as e:
        return _unreadable(status, layout.CONFIG_FILE, e)
    status.iterations = T = config["iterations"]
    if status.seed is None and isinstance(config.get("seed"), int):
        status.seed = config["seed"]
    try:
        manifest, records = _read_stages(run)
    except ValueError as e:
        return _unreadable(status, layout.MANIFEST_FILE, e)
    status.last_update = _latest(status.last_update, _parse_time(manifest.get("updated")))
    from vdlib.coevolution import stage_key  # lazy, as vdlib.stages (torch)

    names = [stage.name for stage in stage_table]
    status.stages_total = T * len(names)
    keys = [(t, i) for t in range(1, T + 1) for i in range(len(names))]
    done = [stage_key(t, names[i]) in records for t, i in keys]
    status.stages_done = sum(done)
    missing = [key for key, ok in zip(keys, done, strict=True) if not ok]
    status.iteration, index = missing[0] if missing else (T, None)
    status.next_stage = names[index] if index is not None else None
    status.metrics_iteration, status.metrics = _last_metrics(
        run, [t for t in range(1, T + 1) if stage_key(t, names[-1]) in records])
    if replaced:
        status.state = "replaced"
    elif not missing:
        status.state = "done"
    elif _locked(run):
        status.state = "running"
    else:
        status.leftovers = _leftovers(run, status.iteration, stage_table[index].outputs)
        status.state = ("stopped mid-stage" if status.leftovers
                        else "new" if not status.stages_done else "stopped")
    return status


def _unreadable(status: RunStatus, name: str, error: Exception) -> RunStatus:
    logger.warning("%s", error)
    status.state, status.problem = "unreadable", name
    return status


def _locked(run: Path) -> bool:
    """Whether another process holds ``run``'s lock; never creates the lock file."""
    if not (run / LOCK_FILE).exists():
        return False
    lock = RunLock(run)
    try:
        lock.acquire()
    except RunLockedError:
        return True
    except OSError as e:
        logger.warning("cannot check the lock of %s (%s): counted as not running", run, e)
        return False
    lock.release()
    return False


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
        data = json.loads(path.read_text(encoding="utf-8"))
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


def format_number(value: Any) -> str:
    """A metric cell: ``-`` for None, an integer as it is, a float to 3 significant digits
    (without an exponent from 1000 up).

    >>> [format_number(v) for v in (None, 120, 0.123456, 12.345, 4567.8, float("nan"))]
    ['-', '120', '0.123', '12.3', '4570', 'nan']
    """
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        return str(value)
    rounded = float(f"{value:.3g}")
    return f"{rounded:.0f}" if abs(rounded) >= 1000 else f"{value:.3g}"


def _row(s: RunStatus) -> list[str]:
    iteration = "-" if s.iterations is None else f"{s.iteration or '-'}/{s.iterations}"
    stages = "-" if s.stages_total is None else f"{s.stages_done}/{s.stages_total}"
    updated = "-" if s.last_update is None else \
        s.last_update.astimezone(datetime.UTC).strftime("%Y-%m-%d %H:%M")
    next_stage = "-" if s.state in ("done", "unreadable") or s.next_stage is None \
        else s.next_stage
    return [s.experiment, s.run_id, s.label, iteration, stages, next_stage, updated,
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
    return "\n".join(lines) + "\n"


def main(output_dir: str | os.PathLike, *, include_replaced: bool = False) -> int:
    """``vdlib status OUTPUT_DIR``: print the table; 2 (and a message on stderr) if the folder
    does not exist, else 0."""
    path = Path(output_dir)
    if not path.is_dir():
        sys.stderr.write(f"vdlib status: {path} is not a folder (give the output_dir of your "
                         "runs, e.g. outputs)\n")
        return 2
    sys.stdout.write(format_status(collect_status(path, include_replaced=include_replaced)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1] if len(sys.argv) > 1 else "outputs"))
