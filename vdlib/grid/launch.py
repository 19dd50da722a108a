"""Grids of runs on many GPUs and on clusters: ``vdlib grid PARAMS --launcher local|slurm``.

A grid is every arm of ``cfg.arms`` for every seed, each run planned with its folder and state
(:mod:`vdlib.grid.grid_plan`: ``done``, ``partial``, ``new``, or ``refused`` where the folder
holds a run of another config, by the fingerprint check of ``vdlib run``). Finished runs are
skipped and refused ones are not started (status ``refused``, with the keys that differ); the
others run, or resume, under either launcher:

- :class:`LocalLauncher` packs runs onto the visible GPUs: one run per group of
  ``launcher.gpus_per_run`` GPUs (a child process with its own ``CUDA_VISIBLE_DEVICES``; with
  N > 1 GPUs under ``accelerate launch`` with N processes), the rest queued. A failed run does
  not stop the others. Each run's resolved params and log go to ``<experiment>/grid/``
  (:func:`vdlib.config.layout.grid_params_path`, :func:`vdlib.config.layout.grid_log_path`).

  Each child runs in a process group of its own. When the grid is stopped (SIGTERM, which
  ``vdlib`` turns into an exit, or Ctrl-C), it sends SIGTERM to every child's group, waits for
  them (``stop_grace_s``, then SIGKILL; a second signal kills at once), and only then exits: no
  run is left behind holding its GPU and its lock. A group member still alive after its run
  exited is killed too.

  A run that another process is running (its lock is held: :func:`vdlib.grid.status.lock_holder`),
  or that another grid is launching (the grid holds an exclusive ``flock`` on the run's log for
  as long as its child lives, so two grids never write one log), is not started: it goes to the
  end of the queue once, and if it is still busy then, its status is ``busy`` (not
  ``failed``); if it was finished meanwhile, ``skipped``. A child that finds its folder busy
  itself exits with :data:`vdlib.loop.progress.BUSY_EXIT` and is ``busy`` too.
- :func:`slurm_launch` submits one job array through ``submitit`` (``launcher.slurm``:
  partition, time, CPUs, memory, account, extra ``slurm_*`` options); ``cluster="local"`` runs
  the same array with submitit's local executor (tests, a workstation). A failed run is shown
  with its own one-line error, and a task that ``squeue`` no longer lists without a result is
  ``failed`` after a grace period (no ``sacct`` needed: accounting is often off).

:func:`format_plan` (:mod:`vdlib.grid.grid_plan`, re-exported here with the plan's other
names) is ``--dry-run``: runs, their state, GPUs, and the order (waves).
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from vdlib.config import layout
from vdlib.config.experiment import ExperimentConfig, save_params
from vdlib.grid.grid_plan import (
    REFUSED_HINT,
    config_refusal,
    format_plan,
    format_results,
    grid_configs,
    grid_exit_status,
    mark_refused,
    plan_grid,
    run_id_refusal,
    run_state_and_note,
    run_state_of,
)
from vdlib.grid.grid_run import GridRun, visible_gpus
from vdlib.grid.launch_slurm import RunFailed, job_error, run_member, slurm_launch, slurm_parameters
from vdlib.loop.progress import BUSY_EXIT, PAUSED_EXIT

__all__ = ["GridRun", "grid_configs", "plan_grid", "launch_grid", "run_state_of",
           "run_state_and_note", "visible_gpus", "gpu_slots", "format_plan", "LocalLauncher",
           "slurm_launch", "slurm_parameters", "run_member", "RunFailed", "job_error",
           "format_results", "slot_port", "GRID_PORT_BASE", "config_refusal",
           "grid_exit_status", "REFUSED_HINT", "run_id_refusal"]

logger = logging.getLogger(__name__)


def launch_grid(cfg: ExperimentConfig, seeds: Iterable[int] | None = None, *,
                kind: str | None = None, gpus: Sequence[str] | None = None,
                cluster: str | None = None, poll_s: float = 1.0,
                verify: bool = False) -> list[GridRun]:
    """Plan the grid of ``cfg`` and run its unfinished runs with ``kind`` (default
    ``cfg.launcher.kind``): ``local`` on ``gpus`` (default :func:`visible_gpus`) or ``slurm``
    (``cluster`` as in :func:`slurm_launch`). Returns every run with its status."""
    runs = plan_grid(cfg, seeds, verify=verify)
    kind = kind or cfg.launcher.kind
    if kind == "slurm":
        return slurm_launch(runs, cfg, cluster=cluster)
    if kind != "local":
        raise ValueError(f"launcher = {kind!r}; allowed values: local, slurm")
    slots = gpu_slots(visible_gpus() if gpus is None else list(gpus),
                      cfg.launcher.gpus_per_run, cfg.launcher.max_parallel)
    return LocalLauncher(slots, poll_s=poll_s).launch(runs)


def gpu_slots(gpus: Sequence[str], gpus_per_run: int, max_parallel: int | None = None
              ) -> list[list[str] | None]:
    """The parallel slots: groups of ``gpus_per_run`` GPUs (leftover GPUs unused), or, for CPU
    runs (``gpus_per_run`` 0 or no GPUs), ``max_parallel`` (default 1) slots without a GPU.

    >>> gpu_slots(["0", "1", "2", "3"], 1)
    [['0'], ['1'], ['2'], ['3']]
    >>> gpu_slots(["0", "1", "2"], 2), gpu_slots([], 1, max_parallel=2)
    ([['0', '1']], [None, None])
    """
    if gpus_per_run > 1 and not gpus:
        raise ValueError(f"launcher.gpus_per_run = {gpus_per_run} but no GPU is visible; a run "
                         "of these params takes that many (set launcher.gpus_per_run: 0 for CPU "
                         "runs, or --gpus-per-run)")
    if gpus_per_run == 0 or not gpus:
        return [None] * (max_parallel or 1)
    if len(gpus) < gpus_per_run:
        raise ValueError(f"launcher.gpus_per_run = {gpus_per_run} but only {len(gpus)} GPU(s) "
                         f"are visible ({', '.join(gpus)})")
    slots: list[list[str] | None] = [list(gpus[i:i + gpus_per_run])
                                     for i in range(0, len(gpus) - gpus_per_run + 1,
                                                    gpus_per_run)]
    return slots[:max_parallel] if max_parallel else slots


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
    or ``accelerate launch`` for several GPUs); ``poll_s``: how often children are checked;
    ``stop_grace_s``: how long a stopped grid waits for its children after SIGTERM before it
    kills them (SIGKILL to their process groups)."""

    def __init__(self, slots: Sequence[list[str] | None],
                 command: Callable[[Path, list[str] | None], list[str]] | None = None,
                 poll_s: float = 1.0, stop_grace_s: float = 60.0) -> None:
        if not slots:
            raise ValueError("no slot to run on")
        self.slots = list(slots)
        self.command = command or _default_command
        self.poll_s = poll_s
        self.stop_grace_s = stop_grace_s

    def _busy(self, run: GridRun) -> tuple[int | None, str | None]:
        """Claim ``run``'s log for this grid (an exclusive ``flock``, held while its child
        lives): (log descriptor, None); or (None, why) when another grid holds the log or
        another process the run's lock."""
        import fcntl

        from vdlib.grid.status import lock_holder

        cfg = run.config
        run.log = layout.grid_log_path(cfg.output_dir, cfg.experiment, run.name)
        run.log.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(run.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                return None, f"another grid is launching it (its log {run.log} is in use)"
            raise
        holder = lock_holder(run.run_dir)
        if holder is not None:
            os.close(fd)
            return None, f"in use by another process (pid {holder})"
        return fd, None

    def _start(self, run: GridRun, index: int, log: int) -> subprocess.Popen:
        slot = self.slots[index]
        cfg = run.config
        params = layout.grid_params_path(cfg.output_dir, cfg.experiment, run.name)
        params.parent.mkdir(parents=True, exist_ok=True)
        save_params(cfg, params)
        port = slot_port(index)
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "MASTER_PORT": str(port)}
        if slot is not None:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(slot)
        run.gpus = slot
        argv = (_default_command(params, slot, port) if self.command is _default_command
                else self.command(params, slot))
        # its own process group: the grid can stop the run and everything it started
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        logger.info("%s: started on %s (pid %d, log %s)", run.name,
                    "GPU " + ",".join(slot) if slot else "CPU", proc.pid, run.log)
        return proc

    def _next(self, queue: list[GridRun]) -> tuple[GridRun, int] | None:
        """The next run to start and its claimed log; runs found busy go to the end of the
        queue once, then get the status ``busy``."""
        while queue:
            run = queue.pop(0)
            if run.deferred:  # busy before: finished (or replaced by another config) meanwhile?
                run.state, run.note = run_state_and_note(run.config)
                if run.state == "done":
                    run.status = "skipped"
                    logger.info("%s: finished by another process, skipped", run.name)
                    continue
                if run.state == "refused":
                    mark_refused(run)
                    continue
            try:
                fd, why = self._busy(run)
            except OSError as e:
                run.status = "failed"
                run.error = f"cannot write its log {run.log} ({e.strerror or e})"
                logger.error("%s: %s", run.name, run.error)
                continue
            if fd is not None:
                return run, fd
            if not run.deferred:
                run.deferred = True
                queue.append(run)
                logger.info("%s: %s; tried again after the others", run.name, why)
                continue
            run.status, run.error = "busy", why
            logger.warning("%s: %s; not started", run.name, why)
        return None

    def launch(self, runs: Sequence[GridRun]) -> list[GridRun]:
        queue = []
        for r in runs:
            if r.state == "done":
                r.status = "skipped"
                logger.info("%s: finished earlier, skipped", r.name)
            elif r.state == "refused":
                mark_refused(r)
            else:
                queue.append(r)
        free = list(range(len(self.slots)))
        active: dict[int, tuple[GridRun, subprocess.Popen, float, int]] = {}
        try:
            while queue or active:
                while queue and free:
                    nxt = self._next(queue)
                    if nxt is None:
                        break
                    run, fd = nxt
                    i = free.pop(0)
                    try:
                        active[i] = (run, self._start(run, i, fd), time.monotonic(), fd)
                    except BaseException:
                        os.close(fd)
                        free.insert(0, i)
                        raise
                if not active:
                    continue
                time.sleep(self.poll_s)
                for i, (run, proc, start, fd) in list(active.items()):
                    rc = proc.poll()
                    if rc is None:
                        continue
                    _kill_group(proc, run.name, signal.SIGKILL, leftover=True)
                    os.close(fd)
                    del active[i]
                    free.append(i)
                    free.sort()
                    self._finished(run, rc, start)
        finally:
            if active:
                self._stop(active)
        return list(runs)

    def _finished(self, run: GridRun, rc: int, start: float) -> None:
        run.seconds = round(time.monotonic() - start, 1)
        run.status = ("ran" if rc == 0 else "paused" if rc == PAUSED_EXIT
                      else "busy" if rc == BUSY_EXIT else "failed")
        if run.status == "paused":
            logger.warning("%s paused at the deadline; launch the grid again to resume",
                           run.name)
        elif run.status == "busy":
            run.error = f"in use by another process; see {run.log}"
            logger.warning("%s: its folder is in use by another process", run.name)
        elif rc != 0:
            run.error = f"exit status {rc}; see {run.log}"
            logger.error("%s failed (exit status %d); the others go on", run.name, rc)
        else:
            logger.info("%s: done in %.1f min", run.name, run.seconds / 60)

    def _stop(self, active: dict[int, tuple[GridRun, subprocess.Popen, float, int]]) -> None:
        """The grid is stopping (SIGTERM, Ctrl-C, an error): SIGTERM to every child's process
        group, wait up to ``stop_grace_s``, then SIGKILL whatever is left; a further SIGTERM or
        Ctrl-C meanwhile kills at once. Returns once every child has been reaped."""
        kill_now = False

        def hurry(signum: int, frame: Any) -> None:
            nonlocal kill_now
            kill_now = True

        previous = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                previous[sig] = signal.signal(sig, hurry)
            except ValueError:  # not the main thread
                pass
        try:
            logger.warning("grid stopping: SIGTERM to %d running run(s): %s", len(active),
                           ", ".join(run.name for run, *_ in active.values()))
            for run, proc, _, _ in active.values():
                _kill_group(proc, run.name, signal.SIGTERM)
            end = time.monotonic() + self.stop_grace_s
            for run, proc, start, fd in active.values():
                while proc.poll() is None and not kill_now and time.monotonic() < end:
                    time.sleep(min(self.poll_s, 0.1))
                if proc.poll() is None:
                    logger.warning("%s did not stop in time: killed", run.name)
                _kill_group(proc, run.name, signal.SIGKILL)
                proc.wait()
                os.close(fd)
                run.seconds = round(time.monotonic() - start, 1)
                run.status, run.error = "stopped", f"stopped with the grid; see {run.log}"
            active.clear()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _kill_group(proc: subprocess.Popen, name: str, sig: int, *, leftover: bool = False) -> None:
    """Send ``sig`` to the process group of ``proc`` (a grid child leads its own group). With
    ``leftover`` (the child has exited), only if members remain, and say so."""
    try:
        if leftover:
            os.killpg(proc.pid, 0)
            logger.warning("%s exited but left processes in its group: killed", name)
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
