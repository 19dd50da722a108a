"""Reading back a file vdlib wrote (or was given), bounded and without surprises: a run
folder's ``manifest.json``, stage records, ``timing.json`` and ``metrics.json``, a results file.

:func:`open_regular` is the one way in; :func:`read_bytes`, :func:`read_text` and
:func:`read_json` read through it:

1. ``lstat`` first: the path must be a regular file. A symbolic link is refused (unless
   ``follow_links``: a results file the user names may be a link, but what it points to must
   still be a regular file); a FIFO, socket, device or folder is refused before it is opened,
   so nothing blocks and nothing reads ``/dev/zero``.
2. The size limit is checked on that ``lstat`` before a byte is read.
3. The open is ``O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC`` (a FIFO swapped in after the
   ``lstat`` returns at once instead of waiting for a writer; a link swapped in is refused).
4. ``fstat`` of the open descriptor: still a regular file, the same file (device and inode) as
   the ``lstat``, still within the limit. At most ``limit + 1`` bytes are read, so a file that
   grows meanwhile is refused, never read whole.

Anything refused is an :class:`UnsafeFileError` (a ``ValueError``) whose one-line message names
the file and why; a missing file is ``FileNotFoundError``, as from ``open``.

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "m.json").write_text('{"a": 1}')
>>> read_json(d / "m.json", limit=1024)
{'a': 1}
>>> read_json(d / "m.json", limit=4)
Traceback (most recent call last):
...
vdlib.utils.safe_read.UnsafeFileError: .../m.json is larger than 4 bytes (8 bytes)
>>> (d / "link.json").symlink_to(d / "m.json")
>>> read_bytes(d / "link.json", limit=1024)
Traceback (most recent call last):
...
vdlib.utils.safe_read.UnsafeFileError: .../link.json is a symbolic link; vdlib never reads a ...
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

__all__ = ["UnsafeFileError", "open_regular", "read_bytes", "read_text", "read_json",
           "file_kind"]


class UnsafeFileError(ValueError):
    """A file that is not read: a link, not a regular file, too large, or replaced while it was
    opened. The message is one line naming the file."""


def file_kind(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, in words (for messages).

    >>> file_kind(stat.S_IFIFO), file_kind(stat.S_IFDIR)
    ('a FIFO', 'a directory')
    """
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISREG, "a regular file")):
        if test(mode):
            return name
    return "not a regular file"


def _refuse(path: Path, why: str) -> UnsafeFileError:
    return UnsafeFileError(f"{path} {why}")


def _too_large(path: Path, size: int, limit: int) -> UnsafeFileError:
    return _refuse(path, f"is larger than {limit} bytes ({size} bytes)")


@contextlib.contextmanager
def open_regular(path: str | os.PathLike, limit: int | None = None, *,
                 follow_links: bool = False) -> Iterator[tuple[IO[bytes], os.stat_result]]:
    """``(binary file, its fstat)`` of the regular file ``path``, opened as the module says
    (``lstat``, size at most ``limit`` when given, non-blocking open without following a link,
    ``fstat`` of the same file). ``follow_links``: ``path`` may be a link (the user named it),
    whose target must be a regular file within ``limit``."""
    path = Path(path)
    before = os.stat(path) if follow_links else os.lstat(path)
    if stat.S_ISLNK(before.st_mode):
        raise _refuse(path, "is a symbolic link; vdlib never reads a file of its own through "
                            "a link")
    if not stat.S_ISREG(before.st_mode):
        raise _refuse(path, f"is {file_kind(before.st_mode)}, not a regular file")
    if limit is not None and before.st_size > limit:
        raise _too_large(path, before.st_size, limit)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_links else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise _refuse(path, "became a symbolic link while it was opened") from None
        raise
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (before.st_dev,
                                                                          before.st_ino):
            raise _refuse(path, f"was replaced while it was opened (now {file_kind(now.st_mode)})")
        if limit is not None and now.st_size > limit:
            raise _too_large(path, now.st_size, limit)
        os.set_blocking(fd, True)  # a regular file: reads never wait on a writer anyway
        fh = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with fh:
        yield fh, now


def read_bytes(path: str | os.PathLike, limit: int, *, follow_links: bool = False) -> bytes:
    """The bytes of the regular file ``path`` (:func:`open_regular`), at most ``limit`` of them:
    a file that grew past ``limit`` while it was read is refused, not cut."""
    with open_regular(path, limit, follow_links=follow_links) as (fh, _):
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise _too_large(Path(path), len(data), limit)
    return data


def read_text(path: str | os.PathLike, limit: int, *, follow_links: bool = False) -> str:
    """:func:`read_bytes` decoded as UTF-8 (``UnicodeDecodeError`` if it is not)."""
    return read_bytes(path, limit, follow_links=follow_links).decode("utf-8")


def read_json(path: str | os.PathLike, limit: int, *, follow_links: bool = False,
              **loads: Any) -> Any:
    """The JSON value of ``path`` (:func:`read_text`; ``loads``: passed to ``json.loads``).
    A file that does not parse raises ``ValueError`` (``json.JSONDecodeError``)."""
    return json.loads(read_text(path, limit, follow_links=follow_links), **loads)
