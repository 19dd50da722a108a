"""A grid on a SLURM cluster: :func:`slurm_launch` submits one job array through ``submitit``
(``cluster="local"``: submitit's local executor), :func:`run_member` runs one grid member inside
a job, and a failed or vanished task is shown with its own one-line error (:func:`job_error`).
Re-exported by :mod:`vdlib.grid.launch`."""

from __future__ import annotations

import logging
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vdlib.config import layout
from vdlib.config.experiment import ExperimentConfig, to_dict
from vdlib.grid.grid_plan import mark_refused
from vdlib.grid.grid_run import GridRun, visible_gpus

__all__ = ["slurm_launch", "slurm_parameters", "run_member", "RunFailed", "job_error"]

logger = logging.getLogger(__name__)


class RunFailed(RuntimeError):
    """A grid run failed inside a submitit job; the message is the run's one-line error (the
    job's log holds the traceback)."""


def run_member(config: dict[str, Any]) -> dict[str, Any]:
    """One grid run inside a submitit job: run (or resume) ``config``. Returns ``{"status":
    "ran" | "paused" | "busy", "run_dir", "error"}``; a failure raises :class:`RunFailed` with
    the run's one-line error (that of ``vdlib run``,
    :func:`vdlib.grid.cli_errors.expected_failure`), the original traceback chained to it in the
    job's log. SIGTERM (``scancel``, a SLURM time limit) stops the run cleanly, as it stops
    ``vdlib run``."""
    from vdlib.grid.cli_errors import exit_on_sigterm, expected_failure
    from vdlib.loop.coevolution import run
    from vdlib.loop.progress import RunPaused
    from vdlib.runs.run_state import RunLockedError

    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    exit_on_sigterm()  # submitit itself ignores SIGTERM
    try:
        return {"status": "ran", "run_dir": str(run(config).run_dir), "error": None}
    except RunPaused as e:
        logger.warning("%s", e)
        return {"status": "paused", "run_dir": None, "error": str(e)}
    except RunLockedError as e:
        if type(e) is not RunLockedError:  # an unsafe lock file, not a busy folder
            raise RunFailed(str(e)) from e
        logger.warning("%s", e)
        return {"status": "busy", "run_dir": None, "error": str(e)}
    except Exception as e:
        message = expected_failure(e) or _one_line(e)
        logger.error("vdlib run: %s", message)
        raise RunFailed(message) from e


def _one_line(err: BaseException, limit: int = 300) -> str:
    text = (str(err).strip().splitlines() or [""])[-1]
    text = text if len(text) <= limit else text[:limit] + "..."
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def job_error(err: BaseException, log: Path | None = None) -> str:
    """The one-line error of a failed job: the :class:`RunFailed` message of
    :func:`run_member` when submitit's error carries it (the last line of the job's trace),
    else the trace's last line, else the error's first line; with the log's path."""
    text = str(err)
    lines = text.splitlines()
    found = None
    if "----" in text:  # submitit: the job's traceback between two lines of dashes
        blocks = [i for i, line in enumerate(lines) if set(line.strip()) == {"-"}]
        if len(blocks) >= 2:
            trace = [line for line in lines[blocks[0] + 1:blocks[1]] if line.strip()]
            found = trace[-1].strip() if trace else None
    if found is None:
        found = lines[0].strip() if lines else type(err).__name__
    for prefix in (f"{RunFailed.__module__}.{RunFailed.__name__}: ", f"{RunFailed.__name__}: "):
        found = found.removeprefix(prefix)
    found = found if len(found) <= 300 else found[:300] + "..."
    return f"{found}; see {log}" if log else found



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
                 wait: bool = True, poll_s: float = 2.0, squeue_every_s: float = 30.0,
                 gone_grace_s: float = 60.0) -> list[GridRun]:
    """Submit the unfinished runs as one job array (a run planned ``refused``, whose folder
    holds another config, is not submitted: its status is ``refused``):
    ``submitit.SlurmExecutor`` with :func:`slurm_parameters` (``cluster`` ``"slurm"``, the
    default where ``sbatch`` exists), or ``"local"`` / ``"debug"``: submitit's local executors
    on this machine. With ``wait``, each
    run's status is set from its job's result: ``ran``, ``paused``, ``busy`` (another process
    holds the run), or ``failed`` with the run's own one-line error (:func:`job_error`).

    Waiting never relies on ``sacct`` (accounting is off on many small clusters): every
    ``squeue_every_s`` seconds ``squeue`` lists the array's tasks, and a task that it no longer
    lists and that left no result within ``gone_grace_s`` seconds is ``failed`` (cancelled,
    timed out or killed; the log's last SLURM line says which). Stopping the grid while it
    waits (SIGTERM, Ctrl-C) cancels the jobs of the ``local`` executor (children of this
    process) and waits for them; SLURM jobs keep running, and the grid says how to cancel
    them."""
    try:
        import submitit  # noqa: F401
    except ImportError as e:
        raise ImportError("the slurm launcher needs submitit: pip install submitit "
                          "(the 'cluster' extra of vdlib)") from e
    todo = [r for r in runs if r.state not in ("done", "refused")]
    for r in runs:
        if r.state == "done":
            r.status = "skipped"
        elif r.state == "refused":  # its folder holds another config: never submitted
            mark_refused(r, "not submitted")
    if not todo:
        return list(runs)
    executor = _executor(layout.grid_dir(cfg.output_dir, cfg.experiment) / "submitit",
                         cluster, cfg, len(todo))
    start = time.monotonic()
    jobs = executor.map_array(run_member, [to_dict(r.config) for r in todo])
    for r, job in zip(todo, jobs, strict=True):
        r.log = Path(str(job.paths.stderr))
        r.status = "submitted"
        logger.info("%s: job %s (log %s)", r.name, job.job_id, r.log)
    if not wait:
        return list(runs)
    on_slurm = type(executor).__name__ == "SlurmExecutor"
    pending = list(zip(todo, jobs, strict=True))
    gone_since: dict[str, float] = {}
    next_squeue = time.monotonic() + squeue_every_s
    try:
        while pending:
            for r, job in list(pending):
                finished = job.paths.result_pickle.exists() if on_slurm else job.done()
                if not finished and on_slurm and job.job_id in gone_since \
                        and time.monotonic() - gone_since[job.job_id] >= gone_grace_s:
                    r.status = "failed"
                    r.error = _vanished(job, r.log)
                    logger.error("%s: %s", r.name, r.error)
                elif finished:
                    _collect(r, job)
                else:
                    continue
                r.seconds = round(time.monotonic() - start, 1)
                pending.remove((r, job))
            if not pending:
                break
            if on_slurm and time.monotonic() >= next_squeue:
                listed = _squeue_ids([job.job_id for _, job in pending])
                now = time.monotonic()
                for _, job in pending:
                    if listed is not None and job.job_id not in listed:
                        gone_since.setdefault(job.job_id, now)
                    else:
                        gone_since.pop(job.job_id, None)
                next_squeue = now + squeue_every_s
            time.sleep(poll_s)
    except BaseException:
        if pending:
            _stop_jobs([(r, job) for r, job in pending], on_slurm)
        raise
    return list(runs)


def _collect(r: GridRun, job: Any) -> None:
    """Set ``r``'s status from its finished job's result (:func:`run_member`)."""
    try:
        result = job.result()
    except Exception as e:  # noqa: BLE001 - one failed run does not stop the report
        r.status, r.error = "failed", job_error(e, r.log)
        logger.error("%s failed: %s", r.name, r.error)
        return
    if isinstance(result, dict):
        r.status = result.get("status") or "ran"
        if r.status != "ran":
            r.error = result.get("error")
    else:  # a job of an older vdlib: its run folder
        r.status = "ran"


def _squeue_ids(job_ids: Sequence[str]) -> set[str] | None:
    """The ids among ``job_ids`` (``<array>_<task>``) that ``squeue`` still lists (pending,
    running, completing), one per array task; None when ``squeue`` cannot be asked."""
    import shutil

    squeue = shutil.which("squeue")
    if squeue is None:
        return None
    arrays = sorted({str(j).split("_")[0] for j in job_ids})
    try:
        out = subprocess.run([squeue, "-h", "-r", "-o", "%i", "-j", ",".join(arrays)],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        logger.warning("squeue failed (%s); checked again later", e)
        return None
    if out.returncode != 0:
        # squeue refuses ids it has forgotten ("Invalid job id specified"): none is listed
        if "invalid job id" in out.stderr.lower():
            return set()
        logger.warning("squeue failed (%s); checked again later", out.stderr.strip()[:200])
        return None
    return {line.strip() for line in out.stdout.splitlines() if line.strip()}


def _vanished(job: Any, log: Path | None) -> str:
    """The error of a job that left the queue without a result, from its log's SLURM line."""
    why = "left the queue without a result (cancelled, timed out, or killed)"
    try:
        text = Path(str(job.paths.stderr)).read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    slurm = [line.strip() for line in text.splitlines() if "***" in line and "JOB" in line]
    if slurm:
        why = f"left the queue without a result: {slurm[-1][:200]}"
    return f"job {job.job_id} {why}; see {log}" if log else f"job {job.job_id} {why}"


def _stop_jobs(pending: Sequence[tuple[GridRun, Any]], on_slurm: bool) -> None:
    """The grid stops while it waits: local jobs (children) are cancelled and waited for;
    SLURM jobs keep running (the log says how to cancel them)."""
    if on_slurm:
        ids = " ".join(str(job.job_id) for _, job in pending)
        logger.warning("grid stopped while waiting; its SLURM jobs keep running (scancel %s "
                       "stops them; launching the grid again skips the finished runs)", ids)
        for r, _ in pending:
            r.status = "submitted"
        return
    for r, job in pending:
        job.cancel(check=False)  # the local executor: SIGINT to the job's process
        r.status, r.error = "stopped", "stopped with the grid"
    for _, job in pending:
        proc = getattr(job, "_process", None)
        if proc is not None:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
