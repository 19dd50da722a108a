"""A comparison run in a persistent helper process, with a hard timeout, safe from any thread.

:class:`HelperProcess` runs a module-level function ``compare(a, b, timeout) -> bool`` in one
plain subprocess (``python -c``), started on first use and restarted when it dies. Each call
sends one JSON line ``[a, b, timeout]`` and reads ``1`` or ``0`` back within ``timeout`` +
:attr:`HelperProcess.GRACE` seconds (plus :attr:`HelperProcess.START_UP` on a cold start); a
call that has not answered by then (C code that holds the GIL and never sees an alarm) gets the
helper killed and restarted and answers None. The caller decides what None means
(:func:`vdlib.method.grading.is_equivalent`: not equivalent).

Why a plain subprocess, not ``multiprocessing``: a spawned child would re-run the caller's
``__main__`` script (fatal in a script without a ``__main__`` guard), and a daemonic
``multiprocessing.Pool`` worker may not have multiprocessing children. The helper ignores
SIGINT sent to its owner's process group (an interrupted notebook cell), ends when its stdin
closes (its owner exited: :meth:`HelperProcess.close`, registered with ``atexit`` by its
owner), and writes its answers on a private copy of stdout, so nothing the function prints can
shift them. A forked child never uses its parent's helper: it starts its own.

:class:`HelperPool` keeps helpers for threads that compare at the same time (one each), made as
needed and kept for the next call.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from typing import Any

__all__ = ["HelperProcess", "HelperPool", "serve"]

logger = logging.getLogger(__name__)


def serve(compare_spec: str) -> None:
    """The helper's loop (its main thread, so the function's alarms work): one JSON line
    ``[a, b, timeout]`` in, ``1`` or ``0`` out, until stdin closes. ``compare_spec``:
    ``module:function``; any exception answers ``0`` (untrusted input)."""
    import importlib
    import json
    import signal
    import sys

    # the helper ends when its stdin closes (its owner exited) or its owner kills it; a SIGINT
    # sent to the owner's process group (a notebook cell interrupted, a kernel shut down by
    # papermill) is not for it, and would print a KeyboardInterrupt traceback
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # the answers go out on a private copy of stdout; anything else printed (by sympy, a
    # library, C code) lands on stderr and cannot shift them
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    module, _, name = compare_spec.partition(":")
    compare = getattr(importlib.import_module(module), name)
    for line in sys.stdin.buffer:
        try:
            a, b, timeout = json.loads(line)
            result = bool(compare(a, b, timeout))
        except Exception:  # noqa: BLE001 - untrusted input: any failure is "no"
            result = False
        out.write(b"1\n" if result else b"0\n")


class HelperProcess:
    """One persistent process that runs ``compare`` (a module-level ``(a, b, timeout) ->
    bool``, importable with the caller's ``sys.path``), with a hard timeout."""

    GRACE = 1.0  # seconds past ``timeout`` before the helper counts as stuck and is killed
    START_UP = 30.0  # extra budget of the first comparison: the helper's start and imports

    def __init__(self, compare: Any) -> None:
        self._compare = f"{compare.__module__}:{compare.__qualname__}"
        self._lock = threading.Lock()
        self._proc: Any = None
        self._warm = False
        self._owner = os.getpid()
        self.timeouts = 0  # comparisons that ran out of time, soft or hard

    def _start(self) -> None:
        import subprocess
        import sys

        path = os.pathsep.join(p or os.getcwd() for p in sys.path)  # what this process imports
        env = {**os.environ, "PYTHONPATH": path}
        code = f"from vdlib.utils.helper_process import serve; serve({self._compare!r})"
        self._proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, env=env, bufsize=0)
        self._owner = os.getpid()
        self._warm = False

    def kill(self) -> None:
        """Kill the helper now (the next comparison starts a fresh one)."""
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait(timeout=5)
            for pipe in (self._proc.stdin, self._proc.stdout):
                pipe.close()
        self._proc = None

    def close(self) -> None:
        """End the helper (its input closed, so it leaves its loop; killed if it does not
        within a second), as the process exits: no helper outlives its owner, and no pipe is
        left for the interpreter to warn about. A forked child leaves its parent's alone."""
        with self._lock:
            if self._proc is None or self._owner != os.getpid():
                return
            proc, self._proc = self._proc, None
            try:
                proc.stdin.close()
                proc.wait(timeout=1)
            except Exception:  # noqa: BLE001 - stuck in a comparison or already gone
                proc.kill()
                proc.wait(timeout=5)
            proc.stdout.close()

    @property
    def pid(self) -> int | None:
        """The running helper's process id (None before the first comparison)."""
        return None if self._proc is None else self._proc.pid

    def _ask(self, a: str, b: str, timeout: float, budget: float) -> bool | None:
        """The helper's answer, or None when it gave none within ``budget`` seconds."""
        import json
        import select

        self._proc.stdin.write(json.dumps([a, b, max(1, math.ceil(timeout))]).encode()
                               + b"\n")
        ready, _, _ = select.select([self._proc.stdout], [], [], budget)
        if not ready:
            return None
        line = self._proc.stdout.readline()
        return None if not line else line.strip() == b"1"

    def compare(self, a: str, b: str, timeout: float) -> bool | None:
        """The verdict, or None when the comparison ran out of time (soft or hard)."""
        with self._lock:
            if self._owner != os.getpid():  # a forked child: its parent's helper is not its own
                self._proc = None
            if self._proc is None or self._proc.poll() is not None:
                self._start()
            warm = self._warm
            budget = timeout + self.GRACE + (0.0 if warm else self.START_UP)
            started = time.monotonic()
            try:
                result = self._ask(a, b, timeout, budget)
            except (OSError, ValueError):  # a helper that died meanwhile
                result = None
            if result is not None:
                self._warm = True
                # a function with its own alarm answers False at the timeout: count it as one
                if not result and warm and time.monotonic() - started >= timeout:
                    self.timeouts += 1
                    return None
                return result
            logger.warning("answer comparison exceeded %.1f s; restarting the grading helper "
                           "(gold %r, answer %r)", timeout, a[:200], b[:200])
            self.kill()
            self.timeouts += 1
            return None


class HelperPool:
    """Helpers of one ``compare`` for threads that compare at the same time: :meth:`take`
    gives the first ``n``, made as needed and kept for later calls (each starts on first use
    and exits with this process, when its stdin closes)."""

    def __init__(self, compare: Any) -> None:
        self.compare = compare
        self.helpers: list[HelperProcess] = []
        self._lock = threading.Lock()

    def take(self, n: int) -> list[HelperProcess]:
        with self._lock:
            while len(self.helpers) < n:
                self.helpers.append(HelperProcess(self.compare))
            return self.helpers[:n]
