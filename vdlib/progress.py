"""Visible progress for long work: a heartbeat that logs while a stage runs.

A co-evolution stage on 2 CPU cores can run for minutes inside one ``generate`` call or one GRPO
step, where no progress bar can move. :func:`heartbeat` logs when the work starts, then every
``interval`` seconds until it ends (elapsed time, and an ETA when the caller knows how long the
same work took before, e.g. the same stage in the previous iteration), so ``vdlib run`` and
``make demo`` (papermill streams the kernel's log lines) never go quiet for more than
``interval`` seconds. ``VDLIB_HEARTBEAT_S`` sets the default interval (30 s; 0 turns it off).

>>> format_seconds(75), format_seconds(3725), format_seconds(4.2)
('1m15s', '1h02m05s', '4s')
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["heartbeat", "format_seconds", "eta_text", "default_interval"]

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
    """Seconds between heartbeat lines: ``$VDLIB_HEARTBEAT_S`` or 30 (0 = off)."""
    raw = os.environ.get("VDLIB_HEARTBEAT_S", "30")
    try:
        return max(float(raw), 0.0)
    except ValueError:
        logger.warning("VDLIB_HEARTBEAT_S=%r is not a number; using 30", raw)
        return 30.0


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
