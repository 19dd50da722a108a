"""Independent CPU jobs (a grid's arms, :func:`vdlib.loop.coevolution.run_arms`) in worker
processes, their log lines relayed to this process.

On a small CPU machine one run does not use its cores well: sampling from a 135M model at small
batch sizes is bound by memory traffic, so two torch threads sample barely faster than one.
Running two arms at once, each with one thread, finishes both in about the time of one
(``launcher.max_parallel``; the quickstart sets 2). :func:`run_jobs` starts up to ``workers``
processes (``spawn``: a notebook kernel's threads and torch's thread pool are not forked), each
with :func:`threads_per_worker` torch threads, the warning filters of this process
(:func:`vdlib.utils.terminal.quiet_kernel` installs some in a batch-run kernel) and a log handler
that sends every record back here, where :class:`Relay` hands it to the logger of the same name: the
heartbeat lines of every arm reach this process's handlers (a notebook's output, a terminal)
and its filters, as if the job ran here. A job's exception is raised here, after the other jobs
finished.

Floating-point sums depend on the number of threads, so a run made with one thread per worker
may differ in its last digits from the same config run with more threads; a run's own resume
keeps its thread count when resumed the same way.

>>> threads_per_worker(jobs=2, workers=2, cpus=2)
1
>>> threads_per_worker(jobs=3, workers=2, cpus=8)
4
>>> threads_per_worker(jobs=1, workers=4, cpus=8)
8
"""

from __future__ import annotations

import logging
import logging.handlers
import multiprocessing
import os
import pickle
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

__all__ = ["available_cpus", "threads_per_worker", "worker_count", "Relay", "portable_filters",
           "run_jobs"]

logger = logging.getLogger(__name__)


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def worker_count(jobs: int, workers: int | None) -> int:
    """Processes to start for ``jobs`` jobs with at most ``workers`` at once (None or < 2: 1,
    the jobs then run in this process)."""
    return max(1, min(jobs, workers or 1))


def threads_per_worker(jobs: int, workers: int | None, cpus: int) -> int:
    """Torch threads of each worker: the CPUs shared evenly among the workers that run at once
    (at least 1)."""
    return max(1, cpus // worker_count(jobs, workers))


class Relay(logging.Handler):
    """Hands a record that came from a worker to the logger of its name here (its level,
    filters and handlers, and its ancestors' handlers, apply as to a record made here)."""

    def emit(self, record: logging.LogRecord) -> None:
        target = logging.getLogger(record.name)
        if target.isEnabledFor(record.levelno):
            target.handle(record)


def portable_filters() -> list[Any]:
    """This process's warning filters that can be sent to a worker (a filter naming a class
    that cannot be pickled is left out)."""
    out = []
    for f in warnings.filters:
        try:
            pickle.dumps(f)
        except Exception:  # a class defined where a worker cannot import it
            continue
        out.append(f)
    return out


def _start_worker(queue: Any, threads: int, level: int, filters: list[Any]) -> None:
    import torch

    torch.set_num_threads(threads)
    warnings.filters[:] = filters
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.addHandler(logging.handlers.QueueHandler(queue))
    root.setLevel(level)


def run_jobs(fn: Callable[..., Any], jobs: Sequence[tuple[Any, ...]], workers: int | None, *,
             cpus: int | None = None) -> list[Any]:
    """``[fn(*args) for args in jobs]``, in up to ``workers`` processes at once, results in the
    order of ``jobs``. ``fn`` must be importable by name (a module-level function). With one
    worker (or one job) the jobs run here, one after another, with this process's threads."""
    n = worker_count(len(jobs), workers)
    if n == 1:
        return [fn(*args) for args in jobs]
    threads = threads_per_worker(len(jobs), workers, cpus or available_cpus())
    logger.info("%d jobs in %d worker processes, %d torch thread(s) each", len(jobs), n, threads)
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    listener = logging.handlers.QueueListener(queue, Relay())
    listener.start()
    try:
        with ProcessPoolExecutor(n, mp_context=ctx, initializer=_start_worker,
                                 initargs=(queue, threads, logging.getLogger().getEffectiveLevel(),
                                           portable_filters())) as pool:
            futures = [pool.submit(fn, *args) for args in jobs]
            return [f.result() for f in futures]
    finally:
        listener.stop()
