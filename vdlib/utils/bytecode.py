"""Python's byte-code caches written ahead of the processes that will need them.

A cold notebook run starts several Python processes that import the same heavy packages: the
notebook kernel, the arms' workers (:mod:`vdlib.utils.workers`), each worker's grading helper.
Without byte-code caches each one compiles every module it imports from source (a worker's
TRL, datasets and math-verify: ~8 s of one core, ``benchmarks/import_cache_speed.sh``). While a
kernel starts, imports and converts the model, it keeps one core busy and leaves the other
idle: :func:`warm_bytecode` imports the workers' packages meanwhile in a low-priority
background process, so that the caches exist when the workers start. Nothing changes in what
any process computes; where Python writes no caches (``PYTHONDONTWRITEBYTECODE``) it does
nothing, and ``VDLIB_WARM_BYTECODE=0`` turns it off.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import subprocess
import sys
from collections.abc import Sequence

__all__ = ["WORKER_MODULES", "warm_bytecode"]

logger = logging.getLogger(__name__)

#: what an arm's worker imports beyond a notebook kernel's imports
WORKER_MODULES = ("trl", "datasets", "math_verify", "vdlib.loop.stages", "vdlib.loop.trainer",
                  "vdlib.method.grading")

_IMPORT_ALL = ("import importlib, sys\n"
               "for name in sys.argv[1:]:\n"
               "    try:\n"
               "        importlib.import_module(name)\n"
               "    except Exception:\n"
               "        pass\n")


def _cached(name: str) -> bool:
    """Whether module ``name``'s own byte-code cache exists (then its imports were most likely
    compiled with it: nothing to warm). Finding it imports its parent packages only."""
    try:
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        return bool(origin and origin.endswith(".py")
                    and os.path.exists(importlib.util.cache_from_source(origin)))
    except (ImportError, ValueError):
        return False


def warm_bytecode(modules: Sequence[str] = WORKER_MODULES) -> subprocess.Popen | None:
    """Start a background process (niceness +10, its output discarded) that imports ``modules``
    and exits; returns it, or None where it would write nothing: ``PYTHONDONTWRITEBYTECODE`` is
    set (or this interpreter writes no caches), ``VDLIB_WARM_BYTECODE`` is ``0``, or every
    module named has its cache already. A module that fails to import is skipped."""
    if (sys.dont_write_bytecode or os.environ.get("PYTHONDONTWRITEBYTECODE")
            or os.environ.get("VDLIB_WARM_BYTECODE", "1") == "0"):
        return None
    modules = [m for m in modules if not _cached(m)]
    if not modules:
        return None

    def lower_priority() -> None:  # pragma: no cover - runs in the child
        os.nice(10)

    proc = subprocess.Popen([sys.executable, "-c", _IMPORT_ALL, *modules],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                            preexec_fn=lower_priority if hasattr(os, "nice") else None)
    logger.debug("writing the byte-code caches of %s in process %d", ", ".join(modules),
                 proc.pid)
    return proc
