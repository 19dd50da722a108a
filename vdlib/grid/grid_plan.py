"""A grid's plan: its runs, and where each stands before anything is launched.

:func:`grid_configs` gives every arm of ``cfg.arms`` for every seed its config (the same configs
as :func:`vdlib.experiments.grids.run_grid`); :func:`plan_grid` gives each its run folder and
state (:func:`run_state_and_note`):

- ``refused``: the folder holds a run of another config (finished or not), which ``vdlib run``
  refuses too; checked first, by the same code (:func:`config_refusal`, through
  :func:`vdlib.runs.run_state.folder_config_differences`), so a finished run of another config
  is never ``done``. Its note is the keys that differ (``folder -> now``);
- ``done``: every stage of every iteration recorded in its manifest and the recorded files
  still match it: sizes, and the hashes of small files, or every hash with ``verify``, as
  :func:`vdlib.grid.status.check_records`;
- ``partial``: some stages recorded (a damaged record is named in the note); ``new``: none
  (also for a manifest or ``config.yaml`` that does not parse: the run itself then says what
  is wrong).

:func:`format_plan` is ``--dry-run``'s table, :func:`format_results` the launched grid's, and
:func:`grid_exit_status` the exit status of ``vdlib grid`` (2 where a run is refused). The
launchers (:mod:`vdlib.grid.launch`, :mod:`vdlib.grid.launch_slurm`) start no refused run
(:func:`mark_refused`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Sequence

from vdlib.config import layout
from vdlib.config.experiment import ExperimentConfig, load_params, to_dict
from vdlib.grid.grid_run import GridRun
from vdlib.loop.progress import PAUSED_EXIT

__all__ = ["grid_configs", "run_id_refusal", "run_state_of", "REFUSED_HINT", "config_refusal",
           "run_state_and_note", "plan_grid", "format_plan", "format_results",
           "grid_exit_status", "mark_refused"]

logger = logging.getLogger(__name__)


def grid_configs(cfg: ExperimentConfig, seeds: Iterable[int] | None = None
                 ) -> dict[tuple[str, int], ExperimentConfig]:
    """``{(arm, seed): config}`` for every arm of ``cfg.arms`` (or the config alone, arm
    ``run``) and every seed of ``seeds`` (default ``cfg.seeds``), each validated. Each arm's
    run is named ``<arm>-seed<seed>`` (without arms, ``seed<seed>``); a ``run_id`` names one
    run's folder, so it is refused (ValueError, one line) where the grid has arms or several
    seeds instead of being ignored or shared by several runs."""
    from vdlib.loop.arms import arm_params

    seeds = list(cfg.seeds if seeds is None else seeds)
    if cfg.run_id and (cfg.arms or len(seeds) > 1):
        raise ValueError(run_id_refusal(cfg.run_id, cfg.arms, "run_id"))
    out: dict[tuple[str, int], ExperimentConfig] = {}
    for seed in seeds:
        c = dataclasses.replace(cfg, seed=int(seed))
        base = to_dict(c)
        for arm in cfg.arms or ["run"]:
            one = load_params(arm_params(base, arm)) if cfg.arms else c
            out[(arm, c.seed)] = dataclasses.replace(one, arms=[])  # one run, not a grid
    return out


def run_id_refusal(run_id: str, arms: Sequence[str], name: str = "--run-id") -> str:
    """The one-line refusal of a run id (``name``: the flag or key that gave it) for a params
    file whose ``arms`` each run in ``<arm>-seed<seed>`` (or, without arms, a grid of several
    seeds, each in ``seed<seed>``): the id cannot name several folders, and the folder names
    are what the reports read back by arm and seed."""
    runs = (f"arms ({', '.join(arms)}), each run in <arm>-seed<seed>" if arms
            else "several seeds, each run in seed<seed>")
    return (f"{name} = {run_id!r} names one run's folder, but these params have {runs}; "
            "drop it, and to keep finished runs beside new ones give another --output-dir "
            "or experiment")


def run_state_of(cfg: ExperimentConfig, *, verify: bool = False) -> str:
    """``refused`` if the run folder holds a run of another config (:func:`config_refusal`),
    ``done`` if its manifest records every stage of every iteration and the
    recorded files hold (:func:`vdlib.grid.status.check_records`: sizes, small files' hashes, every
    hash with ``verify``), ``partial`` if it records some, ``new`` otherwise (also for an
    unreadable manifest or ``config.yaml``: the run itself then says what is wrong).
    :func:`run_state_and_note` also says why a run with records is not ``done``."""
    return run_state_and_note(cfg, verify=verify)[0]


#: what to do about a refused run (printed under the plan and the results)
REFUSED_HINT = ("refused: the folder holds a run of another config (the keys that differ: "
                "folder -> now); resume it with its own config, or give this config another "
                "--output-dir or experiment, or move the folder away (vdlib run PARAMS --force "
                "moves it aside) and launch the grid again")


def config_refusal(cfg: ExperimentConfig) -> str | None:
    """Why ``vdlib run`` would refuse the run folder of ``cfg``, in one line: the keys that
    differ (``folder -> now``, as :func:`vdlib.runs.run_state.claim_run` lists them, joined
    with ``; ``), or the folder's own refusal (stage records of an unknown config, a
    fingerprint that does not match its config); None when the folder fits ``cfg`` or holds no
    run. The same check as ``vdlib run`` (:func:`vdlib.runs.run_state.folder_config_differences`),
    without the lock. A manifest or ``config.yaml`` that does not parse raises ValueError."""
    from vdlib.runs.run_state import RunConfigMismatch, folder_config_differences

    try:
        differ = folder_config_differences(layout.run_path(cfg), to_dict(cfg))
    except RunConfigMismatch as e:
        return (str(e).splitlines() or [type(e).__name__])[0]
    return "; ".join(differ) if differ else None


def run_state_and_note(cfg: ExperimentConfig, *, verify: bool = False
                       ) -> tuple[str, str | None]:
    """(:func:`run_state_of`, the keys that differ for a ``refused`` run, or why a run is not
    ``done`` where that is not plain: a damaged file, an unreadable manifest; else None).
    Never raises for what is in the folder, and its work does not grow with ``iterations``
    (only with the records present)."""
    from vdlib.grid.status import check_records, first_missing, recorded_stages
    from vdlib.loop.stages import STAGES
    from vdlib.runs.run_state import read_manifest

    run = layout.run_path(cfg)
    try:
        refused = config_refusal(cfg)
        if refused is not None:
            return "refused", refused
        records = read_manifest(layout.manifest_path(run)).get("stages", {})
        if not isinstance(records, dict):
            raise ValueError(f"{layout.manifest_path(run)}: 'stages' is not a JSON object")
        done = recorded_stages(records, cfg.iterations, STAGES)
        damage = check_records(run, records, STAGES, cfg.iterations, verify=verify)
    except (OSError, ValueError) as e:
        return "new", f"{str(e).splitlines()[0] if str(e) else type(e).__name__}"
    if damage is not None:
        return "partial", f"damaged: {damage[1]}; the run redoes that stage"
    if first_missing(done, cfg.iterations, len(STAGES))[1] is None:
        return "done", None
    return ("partial" if records else "new"), None


def plan_grid(cfg: ExperimentConfig, seeds: Iterable[int] | None = None, *,
              verify: bool = False) -> list[GridRun]:
    """Every run of the grid with its folder and state on disk (:func:`run_state_and_note`;
    a folder of another config is ``refused``, its note the keys that differ)."""
    out = []
    for (arm, seed), c in grid_configs(cfg, seeds).items():
        state, note = run_state_and_note(c, verify=verify)
        out.append(GridRun(arm, seed, c, layout.run_path(c), state, note=note))
    return out


def format_plan(runs: Sequence[GridRun], slots: Sequence[list[str] | None]) -> str:
    """The ``--dry-run`` table: each run, its state, and (for runs to launch) the slot and the
    wave it is expected in (waves of ``len(slots)``; runs finish at different times, so the
    order is an estimate)."""
    lines = ["| # | run | state | GPUs | wave |", "|---|---|---|---|---|"]
    todo = 0
    for i, r in enumerate(runs, 1):
        if r.state == "done":
            lines.append(f"| {i} | {r.name} | done (skipped) | - | - |")
            continue
        if r.state == "refused":
            lines.append(f"| {i} | {r.name} | refused ({r.note}) | - | - |")
            continue
        slot = slots[todo % len(slots)]
        gpus = ",".join(slot) if slot else "cpu"
        state = f"{r.state} ({r.note})" if r.note else r.state
        lines.append(f"| {i} | {r.name} | {state} | {gpus} | {todo // len(slots) + 1} |")
        todo += 1
    refused = sum(r.state == "refused" for r in runs)
    lines.append(f"\n{len(runs)} runs: {todo} to launch ({sum(r.state == 'partial' for r in runs)}"
                 f" resumed), {len(runs) - todo - refused} done"
                 + (f", {refused} refused" if refused else "") + f"; {len(slots)} in parallel")
    if refused:
        lines.append(REFUSED_HINT)
    return "\n".join(lines) + "\n"


def format_results(runs: Sequence[GridRun]) -> str:
    """A table of launched runs: status, GPUs, minutes, log."""
    lines = ["| run | status | GPUs | minutes | log |", "|---|---|---|---|---|"]
    for r in runs:
        minutes = f"{r.seconds / 60:.1f}" if r.seconds is not None else "-"
        gpus = ",".join(r.gpus) if r.gpus else "-"
        status = r.status + (f" ({r.error})" if r.error else "")
        lines.append(f"| {r.name} | {status} | {gpus} | {minutes} | {r.log or '-'} |")
    counts = [f"{sum(r.status == s for r in runs)} {s}" for s in ("ran", "skipped", "paused")]
    counts += [f"{n} {s}" for s in ("busy", "stopped", "submitted", "refused")
               if (n := sum(r.status == s for r in runs))]
    counts.append(f"{sum(r.status == 'failed' for r in runs)} failed")
    lines.append("\n" + ", ".join(counts))
    if any(r.status == "busy" for r in runs):
        lines.append("busy: another process runs it (or another grid launches it); launch the "
                     "grid again once it has ended")
    if any(r.status == "refused" for r in runs):
        lines.append(REFUSED_HINT)
    return "\n".join(lines) + "\n"


def grid_exit_status(runs: Sequence[GridRun]) -> int:
    """``vdlib grid``'s exit status: 2 if a run was refused (its folder holds another config;
    the status ``vdlib run`` exits with for that refusal), else 1 if one failed, else
    :data:`vdlib.loop.progress.PAUSED_EXIT` if one is paused or busy (launch the grid again
    later), else 0. A plan (``--dry-run``) is judged by its states: a ``refused`` run gives 2."""
    if any(r.status == "refused" or (r.status == "planned" and r.state == "refused")
           for r in runs):
        return 2
    if any(r.status == "failed" for r in runs):
        return 1
    return PAUSED_EXIT if any(r.status in ("paused", "busy") for r in runs) else 0


def mark_refused(run: GridRun, not_what: str = "not started") -> None:
    """``run`` was planned ``refused`` (its folder holds another config): its status becomes
    ``refused``, its error the keys that differ, and the log says so (``not_what``: what the
    launcher did not do with it)."""
    run.status, run.error = "refused", run.note
    logger.error("%s: %s holds a run of another config; the keys that differ (folder -> now): "
                 "%s; %s", run.name, run.run_dir, run.note, not_what)
