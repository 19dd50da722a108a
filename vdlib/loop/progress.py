"""Visible progress for long work: a heartbeat that logs while a stage runs.

A co-evolution stage on 2 CPU cores can run for minutes inside one ``generate`` call or one GRPO
step, where no progress bar can move. :func:`heartbeat` logs when the work starts, then every
``interval`` seconds until it ends (elapsed time, and an ETA when the caller knows how long the
same work took before, e.g. the same stage in the previous iteration), so ``vdlib run`` and
``make demo`` (papermill streams the kernel's log lines) never go quiet for more than
``interval`` seconds. ``VDLIB_HEARTBEAT_S`` sets the default interval (30 s; 0 turns it off).

Time-limited jobs (a SLURM slot, a 10-minute command) pause cleanly instead of being killed
mid-stage: with ``$VDLIB_STOP_AT`` set (epoch seconds; ``vdlib run|grid --stop-after MINUTES``
sets it), :func:`check_deadline` raises :class:`RunPaused` before a stage that would not end in
time (its estimate: the same stage's time in the previous iteration), and the next call resumes
there.

>>> format_seconds(75), format_seconds(3725), format_seconds(4.2)
('1m15s', '1h02m05s', '4s')
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["heartbeat", "format_seconds", "eta_text", "default_interval", "STOP_AT_ENV",
           "PAUSED_EXIT", "BUSY_EXIT", "RunPaused", "deadline", "check_deadline"]

#: environment variable holding the time (epoch seconds) after which no stage starts
STOP_AT_ENV = "VDLIB_STOP_AT"
#: exit status of ``vdlib run`` when it paused at the deadline (EX_TEMPFAIL: run it again)
PAUSED_EXIT = 75
#: exit status of ``vdlib run`` when another process holds the run folder's lock (a grid
#: reports the run as ``busy``, not ``failed``)
BUSY_EXIT = 73


class RunPaused(Exception):
    """The run stopped before a stage at the deadline (``$VDLIB_STOP_AT``); run it again to
    resume there."""


def deadline() -> float | None:
    """``$VDLIB_STOP_AT`` as epoch seconds, or None when unset or not a number of epoch
    seconds (a warning; ``vdlib`` refuses such a value before any command)."""
    from vdlib.config.env_settings import env_number_or_default

    stop = env_number_or_default(STOP_AT_ENV)
    return None if stop is None else float(stop)


def check_deadline(label: str, expected: float | None = None, *,
                   now: float | None = None) -> None:
    """Raise :class:`RunPaused` when ``label`` (a stage), expected to take ``expected``
    seconds (None: unknown, counted as 0), would not end before the deadline."""
    stop = deadline()
    if stop is None:
        return
    now = time.time() if now is None else now
    if now + (expected or 0.0) > stop:
        left = max(stop - now, 0.0)
        raise RunPaused(f"{label}: paused before it started ({format_seconds(left)} left before "
                        f"the deadline, the stage took {format_seconds(expected or 0)} last "
                        "time); run the same command again to resume here")

logger = logging.getLogger(__name__)


def format_seconds(seconds: float) -> str:
    """``75`` -> ``'1m15s'``; hours only when needed."""
    s = int(round(max(seconds, 0.0)))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    if h:
        return f"{h}h{m:02d}m{s:02d}s"
    return f"{m}m{s:02d}s" if m else f"{s}s"


def eta_text(elapsed: float, expected: float | None) -> str:
    """What to say about the time left: an ETA from ``expected`` seconds (the same work's
    earlier duration), 'longer than last time' once past it, or nothing without an estimate."""
    if expected is None or expected <= 0:
        return ""
    left = expected - elapsed
    if left > 0:
        return f", ETA ~{format_seconds(left)} (took {format_seconds(expected)} last time)"
    return f", past last time's {format_seconds(expected)}"


def default_interval() -> float:
    """Seconds between heartbeat lines: ``$VDLIB_HEARTBEAT_S`` or 30 (0 = off; a value that is
    not a number from 0 to 86400: 30 and a warning, and ``vdlib`` refuses it before any
    command)."""
    from vdlib.config.env_settings import env_number_or_default

    return float(env_number_or_default("VDLIB_HEARTBEAT_S"))


@contextmanager
def heartbeat(label: str, *, expected: float | None = None, interval: float | None = None,
              log: logging.Logger | None = None) -> Iterator[None]:
    """Log ``label: started``, then ``label: running for <elapsed>[, ETA]`` every ``interval``
    seconds (default :func:`default_interval`) from a daemon thread until the block ends."""
    log = log or logger
    every = default_interval() if interval is None else interval
    log.info("%s: started%s", label,
             f" (took {format_seconds(expected)} last time)" if expected else "")
    if every <= 0:
        yield
        return
    stop = threading.Event()
    start = time.monotonic()

    def beat() -> None:
        while not stop.wait(every):
            elapsed = time.monotonic() - start
            log.info("%s: running for %s%s", label, format_seconds(elapsed),
                     eta_text(elapsed, expected))

    thread = threading.Thread(target=beat, name="vdlib-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=1.0)
