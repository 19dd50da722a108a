"""The run folder's lock: an OS-level exclusive lock (``fcntl.flock``) on ``<run>/.lock``,
held for as long as the process lives, opened without following links and refused when the
path is not a plain file of the expected content (a symlinked ``.lock`` never overwrites what
it points to). Re-exported by :mod:`vdlib.runs.run_state`."""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

__all__ = ["LOCK_FILE", "RunLock", "RunLockedError", "UnsafeRunFolderError", "UnsafeLockError"]

LOCK_FILE = ".lock"


class RunLockedError(RuntimeError):
    """The run folder's lock cannot be taken: another live process holds it, or (the subclass
    :class:`UnsafeLockError`) the lock file is not a lock of ours."""


class UnsafeRunFolderError(RunLockedError):
    """The run folder holds a link where vdlib writes (a folder in shared scratch space may have
    been prepared by someone else): nothing is followed or written."""


class UnsafeLockError(UnsafeRunFolderError):
    """``<run>/.lock`` is a symbolic link, not a regular file, another user's file, a file with
    other hard links, or holds something other than a pid: it is neither followed nor
    written."""


_LOCK_CONTENT = re.compile(rb"^\d{0,20}\n?$")  # what a holder writes: its pid, or nothing yet


def _lock_problem(fd: int, writing: bool = True) -> str | None:
    """Why the open lock file ``fd`` is not a lock of ours, or None. Only reading it (a probe):
    any regular file will do."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if not writing:
        return None
    if st.st_uid != os.geteuid():
        return f"belongs to another user (uid {st.st_uid})"
    if st.st_nlink != 1:
        return f"has {st.st_nlink} hard links (a lock has one)"
    if not _LOCK_CONTENT.match(os.pread(fd, 64, 0)):
        return "holds something other than a pid"
    return None


def _open_lock(path: Path, flags: int) -> int:
    """Open the lock file without following a link (``O_NOFOLLOW``) and check that it is a lock
    of ours (:func:`_lock_problem`; opened read-only: a regular file); anything else is an
    :class:`UnsafeLockError`."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as e:
        if e.errno == errno.ELOOP or path.is_symlink():
            try:
                target = f" to {os.readlink(path)}"
            except OSError:
                target = ""
            why = f"is a symbolic link{target}"
        elif e.errno in (errno.EISDIR, errno.ENXIO, errno.ENODEV):
            why = "is not a regular file"
        else:
            raise
        fd = None
    else:
        why = _lock_problem(fd, writing=(flags & os.O_ACCMODE) != os.O_RDONLY)
    if why is None:
        return fd
    if fd is not None:
        os.close(fd)
    raise UnsafeLockError(
        f"{path} {why}; a run's lock is never followed or overwritten. If this folder is "
        f"yours, remove it (rm {path}) and run again; otherwise choose another output_dir")


class RunLock:
    """An exclusive OS-level lock on ``<run_dir>/.lock``; use as a context manager or call
    :meth:`acquire` / :meth:`release`. The file holds the holder's pid (for the message). A
    lock file that is a link, or not a plain file of this user holding a pid, is refused
    (:class:`UnsafeLockError`) and left as it is: nothing is followed, truncated or written."""

    def __init__(self, run_dir: str | os.PathLike) -> None:
        self.path = Path(run_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = _open_lock(self.path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            if e.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise RunLockedError(
                    f"{self.path.parent} is in use by another process (pid {holder}); wait for "
                    "it to finish or stop it, then run again") from None
            raise
        try:
            why = _lock_problem(fd)  # checked again now that it is ours
            if why is not None:
                raise UnsafeLockError(f"{self.path} {why}; a run's lock is never overwritten")
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            import fcntl

            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
