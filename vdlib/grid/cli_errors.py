"""How a vdlib command ends: the one-line message of a failure a user can fix without a
traceback (:func:`expected_failure`) and SIGTERM turned into an exit so that cleanup runs
(:func:`exit_on_sigterm`). Used by :mod:`vdlib.app.cli` (which re-exports both) and by a grid's
SLURM jobs (:mod:`vdlib.grid.launch_slurm`)."""

from __future__ import annotations

import errno
from typing import Any

__all__ = ["expected_failure", "exit_on_sigterm"]


def expected_failure(err: BaseException) -> str | None:
    """A one-line message for the failures a user can fix without a traceback (a config that
    does not fit a run folder, a busy folder, bad params, an offline model hub, a missing
    package, an unwritable output folder); None for anything else."""
    from vdlib.config.experiment import ConfigError
    from vdlib.engines.models import ModelUnavailableError
    from vdlib.runs.run_state import RunConfigMismatch, RunLockedError

    if isinstance(err, RunConfigMismatch | RunLockedError | ConfigError | ModelUnavailableError):
        return str(err)
    if isinstance(err, ImportError):  # a missing package (MissingDependencyError included)
        return (f"{err}; install the package (make install, or the extra that provides it: "
                "see README)")
    if isinstance(err, PermissionError):
        return f"{err.filename or err}: permission denied; choose a writable --output-dir"
    text = str(err)
    if isinstance(err, OSError) and ("offline" in text.lower() or "HF_HUB_OFFLINE" in text
                                     or "couldn't connect" in text.lower()):
        return (f"{text.splitlines()[0]} (the model hub is offline here: use a registered "
                "name such as smollm2-135m, a local folder, or a cached id)")
    if isinstance(err, OSError) and err.errno in _FILE_ERRORS:
        where = err.filename if err.filename is not None else "a file"
        return f"{where}: {err.strerror or text}; {_FILE_ERRORS[err.errno]}"
    if isinstance(err, ValueError) and not isinstance(err, UnicodeError) and any(
            name in text for name in ("manifest.json", "config.yaml")):
        return text.splitlines()[0] if text else None  # a run folder's record that is unusable
    return None


#: file-system errors a user fixes without a traceback: errno -> what to do
_FILE_ERRORS = {
    errno.ENOSPC: "the disk is full: free space, or choose another --output-dir (every file "
                  "is written whole or not at all: a resume continues from the last stage)",
    errno.EDQUOT: "the disk quota is exceeded: free space, or choose another --output-dir",
    errno.ENAMETOOLONG: "a file or folder name is too long (at most 255 bytes each): shorten "
                        "experiment, run_id or output_dir",
    errno.ENOTDIR: "a part of the path is a file, not a folder: choose another --output-dir",
    errno.EEXIST: "a file stands where a folder is needed: choose another --output-dir",
    errno.EROFS: "read-only file system: choose a writable --output-dir",
    errno.EACCES: "permission denied: choose a writable --output-dir",
    errno.EPERM: "operation not permitted: choose a writable --output-dir",
    errno.ENOENT: "no such file or folder (a special file system such as /proc cannot hold "
                  "runs): choose another --output-dir",
    errno.EISDIR: "a folder stands where a file is needed",
    errno.ELOOP: "a link where vdlib never follows one: remove it, or choose another "
                 "--output-dir",
}


def exit_on_sigterm() -> None:
    """SIGTERM raises SystemExit (exit status 143) so that cleanup (``finally``) runs, as for
    Ctrl-C; temporary folders are not left behind."""
    import signal

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    try:
        signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread (e.g. called from a notebook's worker)
        pass
