"""What ``vdlib`` checks of its own inputs beyond the params (:mod:`vdlib.app.cli` uses it): a
flag that takes minutes (:func:`check_minutes_flag`), the exit status of Ctrl-C
(:data:`INTERRUPTED_EXIT`), and a full disk that a library's error only describes
(:func:`disk_full_failure`). The ``VDLIB_*`` environment settings are
:mod:`vdlib.config.env_settings`'s; the failures a user fixes without a traceback,
:func:`vdlib.grid.cli_errors.expected_failure`'s."""

from __future__ import annotations

import math

from vdlib.grid.cli_errors import expected_failure

__all__ = ["MAX_STOP_AFTER_MIN", "check_minutes_flag", "INTERRUPTED_EXIT", "disk_full_failure"]


#: the largest ``--stop-after`` (minutes; about two years)
MAX_STOP_AFTER_MIN = 1e6


def check_minutes_flag(flag: str, minutes: float | None) -> None:
    """Raise a one-line :class:`ConfigError` unless ``minutes`` (a flag's value, None: not given)
    is a finite number of minutes, 0 <= minutes <= :data:`MAX_STOP_AFTER_MIN` (0: pause before
    the next stage)."""
    from vdlib.config.experiment import ConfigError

    if minutes is not None and not (math.isfinite(minutes)
                                    and 0 <= minutes <= MAX_STOP_AFTER_MIN):
        raise ConfigError(f"{flag} {minutes:g} is not allowed; allowed: a finite number of "
                          f"minutes, 0 <= MINUTES <= {MAX_STOP_AFTER_MIN:.0f}")


#: exit status after Ctrl-C: that of a process SIGINT ended (128 + 2)
INTERRUPTED_EXIT = 130
#: what a library says when a write failed for want of space (safetensors' Rust I/O error, an
#: OSError's text): disk full or over quota
_DISK_FULL_TEXTS = ("no space left on device", "os error 28", "storagefull",
                    "disk quota exceeded", "os error 122", "filesystemquotaexceeded")


def disk_full_failure(err: BaseException) -> str | None:
    """The one-line message of a disk that filled (or a quota that ran out) inside a library
    call, e.g. a checkpoint save, whose error wraps or only describes the ``OSError``
    (``ENOSPC``, ``EDQUOT``); None if ``err`` and its causes say nothing of it."""
    import errno

    seen: set[int] = set()
    todo: list[BaseException | None] = [err]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen or len(seen) > 20:
            continue
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return expected_failure(e)
        text = str(e)
        if any(t in text.lower() for t in _DISK_FULL_TEXTS):
            first = " ".join(text.split())[:200]
            return expected_failure(OSError(errno.ENOSPC, f"No space left on device ({first})"))
        todo += [e.__cause__, e.__context__]
    return None
