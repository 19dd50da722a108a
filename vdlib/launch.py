"""Grids of runs on many GPUs and on clusters: ``vdlib grid PARAMS --launcher local|slurm``.

A grid is every arm of ``cfg.arms`` for every seed (:func:`grid_configs`, the same configs as
:func:`vdlib.experiments.run_grid`). :func:`plan_grid` gives each its run folder and state
(``done``: every stage of every iteration recorded in its manifest; ``partial``; ``new``).
Finished runs are skipped; the others run, or resume, under either launcher:

- :class:`LocalLauncher` packs runs onto the visible GPUs: one run per group of
  ``launcher.gpus_per_run`` GPUs (a child process with its own ``CUDA_VISIBLE_DEVICES``; with
  N > 1 GPUs under ``accelerate launch`` with N processes), the rest queued. A failed run does
  not stop the others. Each run's resolved params and log go to ``<experiment>/grid/``
  (:func:`vdlib.layout.grid_params_path`, :func:`vdlib.layout.grid_log_path`).
- :func:`slurm_launch` submits one job array through ``submitit`` (``launcher.slurm``:
  partition, time, CPUs, memory, account, extra ``slurm_*`` options); ``cluster="local"`` runs
  the same array with submitit's local executor (tests, a workstation).

:func:`format_plan` is ``--dry-run``: runs, their state, GPUs, and the order (waves).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from vdlib import layout
from vdlib.config import ExperimentConfig, load_params, save_params, to_dict
from vdlib.progress import PAUSED_EXIT

__all__ = ["GridRun", "grid_configs", "plan_grid", "launch_grid", "run_state_of", "visible_gpus",
           "gpu_slots", "format_plan", "LocalLauncher", "slurm_launch", "slurm_parameters",
           "run_member", "format_results", "slot_port", "GRID_PORT_BASE"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class GridRun:
    """One run of a grid: its config and folder, its state on disk before launching
    (``done``, ``partial``, ``new``) and, once launched, its status (``skipped``, ``ran``,
    ``paused`` at ``--stop-after``, ``failed``), GPUs, seconds and log."""

    arm: str
    seed: int
    config: ExperimentConfig
    run_dir: Path
    state: str = "new"
    status: str = "planned"
    gpus: list[str] | None = None
    seconds: float | None = None
    log: Path | None = None
    error: str | None = None

    @property
    def name(self) -> str:
        return self.run_dir.name


def grid_configs(cfg: ExperimentConfig, seeds: Iterable[int] | None = None
                 ) -> dict[tuple[str, int], ExperimentConfig]:
    """``{(arm, seed): config}`` for every arm of ``cfg.arms`` (or the config alone, arm
    ``run``) and every seed of ``seeds`` (default ``cfg.seeds``), each validated."""
    from vdlib.arms import arm_params

    out: dict[tuple[str, int], ExperimentConfig] = {}
    for seed in (cfg.seeds if seeds is None else seeds):
        c = dataclasses.replace(cfg, seed=int(seed))
        base = to_dict(c)
        for arm in cfg.arms or ["run"]:
            one = load_params(arm_params(base, arm)) if cfg.arms else c
            out[(arm, c.seed)] = dataclasses.replace(one, arms=[])  # one run, not a grid
    return out


def launch_grid(cfg: ExperimentConfig, seeds: Iterable[int] | None = None, *,
                kind: str | None = None, gpus: Sequence[str] | None = None,
                cluster: str | None = None, poll_s: float = 1.0) -> list[GridRun]:
    """Plan the grid of ``cfg`` and run its unfinished runs with ``kind`` (default
    ``cfg.launcher.kind``): ``local`` on ``gpus`` (default :func:`visible_gpus`) or ``slurm``
    (``cluster`` as in :func:`slurm_launch`). Returns every run with its status."""
    runs = plan_grid(cfg, seeds)
    kind = kind or cfg.launcher.kind
    if kind == "slurm":
        return slurm_launch(runs, cfg, cluster=cluster)
    if kind != "local":
        raise ValueError(f"launcher = {kind!r}; allowed values: local, slurm")
    slots = gpu_slots(visible_gpus() if gpus is None else list(gpus),
                      cfg.launcher.gpus_per_run, cfg.launcher.max_parallel)
    return LocalLauncher(slots, poll_s=poll_s).launch(runs)


def run_state_of(cfg: ExperimentConfig) -> str:
    """``done`` if the run folder's manifest records every stage of every iteration,
    ``partial`` if it records some, ``new`` otherwise (also for an unreadable manifest: the
    run itself then says what is wrong)."""
    from vdlib.run_state import read_manifest
    from vdlib.stages import STAGES

    path = layout.manifest_path(layout.run_path(cfg))
    try:
        records = read_manifest(path).get("stages", {})
    except ValueError:
        return "new"
    want = {f"{t}/{s}" for t in range(1, cfg.iterations + 1) for s in STAGES}
    if want <= set(records):
        return "done"
    return "partial" if records else "new"


def plan_grid(cfg: ExperimentConfig, seeds: Iterable[int] | None = None) -> list[GridRun]:
    """Every run of the grid with its folder and state on disk."""
    return [GridRun(arm, seed, c, layout.run_path(c), run_state_of(c))
            for (arm, seed), c in grid_configs(cfg, seeds).items()]


def visible_gpus(env: dict[str, str] | None = None) -> list[str]:
    """The GPU ids this machine offers: ``CUDA_VISIBLE_DEVICES`` if set (``""`` = none), else
    every GPU torch sees, else none."""
    env = os.environ if env is None else env
    if "CUDA_VISIBLE_DEVICES" in env:
        return [g.strip() for g in env["CUDA_VISIBLE_DEVICES"].split(",") if g.strip()]
    try:
        import torch

        return [str(i) for i in range(torch.cuda.device_count())] \
            if torch.cuda.is_available() else []
    except ImportError:  # pragma: no cover - torch is a core dependency
        return []


def gpu_slots(gpus: Sequence[str], gpus_per_run: int, max_parallel: int | None = None
              ) -> list[list[str] | None]:
    """The parallel slots: groups of ``gpus_per_run`` GPUs (leftover GPUs unused), or, for CPU
    runs (``gpus_per_run`` 0 or no GPUs), ``max_parallel`` (default 1) slots without a GPU.

    >>> gpu_slots(["0", "1", "2", "3"], 1)
    [['0'], ['1'], ['2'], ['3']]
    >>> gpu_slots(["0", "1", "2"], 2), gpu_slots([], 1, max_parallel=2)
    ([['0', '1']], [None, None])
    """
    if gpus_per_run == 0 or not gpus:
        return [None] * (max_parallel or 1)
    if len(gpus) < gpus_per_run:
        raise ValueError(f"launcher.gpus_per_run = {gpus_per_run} but only {len(gpus)} GPU(s) "
                         f"are visible ({', '.join(gpus)})")
    slots: list[list[str] | None] = [list(gpus[i:i + gpus_per_run])
                                     for i in range(0, len(gpus) - gpus_per_run + 1,
                                                    gpus_per_run)]
    return slots[:max_parallel] if max_parallel else slots


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
        slot = slots[todo % len(slots)]
        gpus = ",".join(slot) if slot else "cpu"
        lines.append(f"| {i} | {r.name} | {r.state} | {gpus} | {todo // len(slots) + 1} |")
        todo += 1
    lines.append(f"\n{len(runs)} runs: {todo} to launch ({sum(r.state == 'partial' for r in runs)}"
                 f" resumed), {len(runs) - todo} done; {len(slots)} in parallel")
    return "\n".join(lines) + "\n"


def format_results(runs: Sequence[GridRun]) -> str:
    """A table of launched runs: status, GPUs, minutes, log."""
    lines = ["| run | status | GPUs | minutes | log |", "|---|---|---|---|---|"]
    for r in runs:
        minutes = f"{r.seconds / 60:.1f}" if r.seconds is not None else "-"
        gpus = ",".join(r.gpus) if r.gpus else "-"
        status = r.status + (f" ({r.error})" if r.error else "")
        lines.append(f"| {r.name} | {status} | {gpus} | {minutes} | {r.log or '-'} |")
    lines.append(f"\n{sum(r.status == 'ran' for r in runs)} ran, "
                 f"{sum(r.status == 'skipped' for r in runs)} skipped, "
                 f"{sum(r.status == 'paused' for r in runs)} paused, "
                 f"{sum(r.status == 'failed' for r in runs)} failed")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- local


#: first of the per-slot rendezvous ports (``$VDLIB_GRID_PORT_BASE`` overrides): slot i's run gets
#: ``MASTER_PORT`` = base + i, so runs side by side on one host never pick the same port (TRL's
#: colocated vLLM chooses among a few fixed ports, and two runs starting it at once clashed)
GRID_PORT_BASE = 29600


def slot_port(index: int) -> int:
    """The ``MASTER_PORT`` of slot ``index``'s runs."""
    return int(os.environ.get("VDLIB_GRID_PORT_BASE", GRID_PORT_BASE)) + index


def _default_command(params_file: Path, gpus: list[str] | None, port: int | None = None
                     ) -> list[str]:
    if gpus and len(gpus) > 1:
        ports = ["--main_process_port", str(port)] if port is not None else []
        return [sys.executable, "-m", "accelerate.commands.launch", "--num_processes",
                str(len(gpus)), *ports, "-m", "vdlib", "run", str(params_file)]
    return [sys.executable, "-m", "vdlib", "run", str(params_file)]


class LocalLauncher:
    """Runs a grid's unfinished runs as child processes, one per slot
    (:func:`gpu_slots`), queueing the rest; returns when all have ended. Each slot's runs get
    their own ``MASTER_PORT`` (:func:`slot_port`).

    ``command(params_file, gpus)`` builds a child's argv (default: ``python -m vdlib run``,
    or ``accelerate launch`` for several GPUs); ``poll_s``: how often children are checked."""

    def __init__(self, slots: Sequence[list[str] | None],
                 command: Callable[[Path, list[str] | None], list[str]] | None = None,
                 poll_s: float = 1.0) -> None:
        if not slots:
            raise ValueError("no slot to run on")
        self.slots = list(slots)
        self.command = command or _default_command
        self.poll_s = poll_s

    def _start(self, run: GridRun, index: int) -> subprocess.Popen:
        slot = self.slots[index]
        cfg = run.config
        params = layout.grid_params_path(cfg.output_dir, cfg.experiment, run.name)
        params.parent.mkdir(parents=True, exist_ok=True)
        save_params(cfg, params)
        run.log = layout.grid_log_path(cfg.output_dir, cfg.experiment, run.name)
        port = slot_port(index)
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "MASTER_PORT": str(port)}
        if slot is not None:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(slot)
        run.gpus = slot
        with open(run.log, "ab") as log:
            argv = (_default_command(params, slot, port) if self.command is _default_command
                    else self.command(params, slot))
            proc = subprocess.Popen(argv, env=env, stdout=log,
                                    stderr=subprocess.STDOUT)
        logger.info("%s: started on %s (pid %d, log %s)", run.name,
                    "GPU " + ",".join(slot) if slot else "CPU", proc.pid, run.log)
        return proc

    def launch(self, runs: Sequence[GridRun]) -> list[GridRun]:
        queue = []
        for r in runs:
            if r.state == "done":
                r.status = "skipped"
                logger.info("%s: finished earlier, skipped", r.name)
            else:
                queue.append(r)
        free = list(range(len(self.slots)))
        active: dict[int, tuple[GridRun, subprocess.Popen, float]] = {}
        while queue or active:
            while queue and free:
                i = free.pop(0)
                run = queue.pop(0)
                active[i] = (run, self._start(run, i), time.monotonic())
            time.sleep(self.poll_s)
            for i, (run, proc, start) in list(active.items()):
                rc = proc.poll()
                if rc is None:
                    continue
                run.seconds = round(time.monotonic() - start, 1)
                run.status = "ran" if rc == 0 else "paused" if rc == PAUSED_EXIT else "failed"
                if run.status == "paused":
                    logger.warning("%s paused at the deadline; launch the grid again to resume",
                                   run.name)
                elif rc != 0:
                    run.error = f"exit status {rc}; see {run.log}"
                    logger.error("%s failed (exit status %d); the others go on", run.name, rc)
                else:
                    logger.info("%s: done in %.1f min", run.name, run.seconds / 60)
                del active[i]
                free.append(i)
                free.sort()
        return list(runs)


# ----------------------------------------------------------------------------- slurm


def run_member(config: dict[str, Any]) -> str:
    """One grid run inside a submitit job: run (or resume) ``config``; its run folder."""
    from vdlib.coevolution import run

    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return str(run(config).run_dir)


def slurm_parameters(cfg: ExperimentConfig, n_runs: int) -> dict[str, Any]:
    """``submitit.SlurmExecutor`` parameters from ``cfg.launcher`` (``extra`` items that
    submitit does not name go to ``additional_parameters``, i.e. ``#SBATCH --<key>=<value>``)."""
    import submitit

    s, gpus = cfg.launcher.slurm, cfg.launcher.gpus_per_run
    params: dict[str, Any] = {"time": s.time_min, "cpus_per_task": s.cpus_per_task,
                              "job_name": f"vdlib-{cfg.experiment}",
                              "array_parallelism": min(s.array_parallelism, n_runs)}
    if gpus:
        params["gpus_per_node"] = gpus
    if s.partition:
        params["partition"] = s.partition
    if s.mem_gb:
        params["mem"] = f"{s.mem_gb}GB"
    if s.account:
        params["account"] = s.account
    known = submitit.SlurmExecutor._valid_parameters()  # noqa: SLF001 - submitit's own list
    extra: dict[str, str] = {}
    for item in s.extra:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"launcher.slurm.extra: {item!r} is not key=value")
        if key in known:
            params[key] = value.strip()
        else:
            extra[key] = value.strip()
    if extra:
        params["additional_parameters"] = extra
    return params


def _executor(folder: Path, cluster: str | None, cfg: ExperimentConfig, n_runs: int) -> Any:
    import shutil

    import submitit

    cluster = cluster or ("slurm" if shutil.which("sbatch") else "local")
    if cluster == "slurm":
        executor = submitit.SlurmExecutor(folder=str(folder))
        executor.update_parameters(**slurm_parameters(cfg, n_runs))
    elif cluster == "local":
        executor = submitit.LocalExecutor(folder=str(folder))
        gpus = cfg.launcher.gpus_per_run if visible_gpus() else 0
        executor.update_parameters(timeout_min=cfg.launcher.slurm.time_min,
                                   gpus_per_node=gpus)
    elif cluster == "debug":
        executor = submitit.DebugExecutor(folder=str(folder))
    else:
        raise ValueError(f"cluster = {cluster!r}; allowed values: slurm, local, debug")
    return executor


def slurm_launch(runs: Sequence[GridRun], cfg: ExperimentConfig, *, cluster: str | None = None,
                 wait: bool = True) -> list[GridRun]:
    """Submit the unfinished runs as one job array: ``submitit.SlurmExecutor`` with
    :func:`slurm_parameters` (``cluster`` ``"slurm"``, the default where ``sbatch`` exists), or
    ``"local"`` / ``"debug"``: submitit's local executors on this machine. With ``wait``, each
    run's status is set from its job's result."""
    try:
        import submitit  # noqa: F401
    except ImportError as e:
        raise ImportError("the slurm launcher needs submitit: pip install submitit "
                          "(the 'cluster' extra of vdlib)") from e
    todo = [r for r in runs if r.state != "done"]
    for r in runs:
        if r.state == "done":
            r.status = "skipped"
    if not todo:
        return list(runs)
    executor = _executor(layout.grid_dir(cfg.output_dir, cfg.experiment) / "submitit",
                         cluster, cfg, len(todo))
    start = time.monotonic()
    jobs = executor.map_array(run_member, [to_dict(r.config) for r in todo])
    for r, job in zip(todo, jobs, strict=True):
        r.log = Path(str(job.paths.stdout))
        logger.info("%s: job %s", r.name, job.job_id)
    if not wait:
        return list(runs)
    for r, job in zip(todo, jobs, strict=True):
        try:
            job.result()
            r.status = "ran"
        except Exception as e:  # noqa: BLE001 - one failed run does not stop the report
            r.status, r.error = "failed", f"{type(e).__name__}: {str(e).splitlines()[-1][:200]}"
        r.seconds = round(time.monotonic() - start, 1)
    return list(runs)
