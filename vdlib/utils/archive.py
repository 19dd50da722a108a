"""Committed evidence archives: one deterministic zip per experiment, read in place.

The raw per-run records behind ``docs/results/*.json`` (run folders' ``timing.json``,
``metrics.json``, ``questions.jsonl.gz``, the run logs, each part's export) are committed as
zips under ``docs/results/archives/``: ``<experiment>.zip``, or ``<experiment>_<sessions>.zip``
where an experiment's sessions are split to keep each file under 5 MB (:func:`session_member`
finds the one holding a session), listed with their SHA-256 in
``docs/results/archives/SHA256SUMS``. A path may run *through* an archive:
``docs/results/archives/gpu_small_main_h100x1_h100x4.zip/h100x1/export.json`` names the member
``h100x1/export.json`` of that zip. :func:`resolve` turns such a string into a read-only
:class:`Member` (a small pathlib-like view: ``/``, ``name``, ``suffix``, ``iterdir``, ``glob``,
``open``, ``read_text``) and any other string into a :class:`pathlib.Path`, so a reader takes
either without knowing which:

>>> resolve("docs/results/gpu_small_main.json")
PosixPath('docs/results/gpu_small_main.json')

:func:`write_archive` packs a mapping of member names to files reproducibly (sorted members,
a fixed timestamp and mode, no owner), so the same files give the same bytes and the same
SHA-256; :func:`write_sums` and :func:`check_sums` keep and verify the list.
"""

from __future__ import annotations

import fnmatch
import hashlib
import io
import zipfile
from collections.abc import Iterator, Mapping
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import IO, Any

__all__ = ["SUFFIX", "SUMS", "Member", "resolve", "session_member", "write_archive", "sha256",
           "write_sums", "check_sums"]

SUFFIX = ".zip"
SUMS = "SHA256SUMS"
#: every member's timestamp (zip's earliest) and mode, so packing is reproducible
_DATE = (1980, 1, 1, 0, 0, 0)
_MODE = 0o100644 << 16


@lru_cache(maxsize=32)
def _names(archive: str, mtime_ns: int, size: int) -> tuple[frozenset[str], frozenset[str]]:
    """(files, folders) of an archive; keyed on its stat so a rewritten archive is re-read."""
    with zipfile.ZipFile(archive) as zf:
        files = frozenset(n for n in zf.namelist() if not n.endswith("/"))
    dirs = {str(p) for f in files for p in PurePosixPath(f).parents if str(p) != "."}
    return files, frozenset(dirs)


class Member:
    """A read-only member (file or folder) of a zip archive, addressed like a path."""

    def __init__(self, archive: str | Path, member: str = ""):
        self.archive = Path(archive)
        self.member = str(PurePosixPath(member)) if member.strip("/") else ""

    def _listing(self) -> tuple[frozenset[str], frozenset[str]]:
        st = self.archive.stat()
        return _names(str(self.archive), st.st_mtime_ns, st.st_size)

    def __truediv__(self, name: str) -> Member:
        return Member(self.archive, f"{self.member}/{name}" if self.member else name)

    def __str__(self) -> str:
        return f"{self.archive}/{self.member}" if self.member else str(self.archive)

    def __repr__(self) -> str:
        return f"Member({str(self.archive)!r}, {self.member!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Member) and (self.archive, self.member) == (
            other.archive, other.member)

    def __lt__(self, other: Member) -> bool:
        return str(self) < str(other)

    def __hash__(self) -> int:
        return hash((self.archive, self.member))

    @property
    def name(self) -> str:
        return PurePosixPath(self.member).name if self.member else self.archive.name

    @property
    def suffix(self) -> str:
        return PurePosixPath(self.name).suffix

    @property
    def stem(self) -> str:
        return PurePosixPath(self.name).stem

    @property
    def parent(self) -> Member:
        up = str(PurePosixPath(self.member).parent)
        return Member(self.archive, "" if up == "." else up)

    def is_file(self) -> bool:
        return self.member in self._listing()[0]

    def is_dir(self) -> bool:
        return not self.member or self.member in self._listing()[1]

    def exists(self) -> bool:
        return self.is_file() or self.is_dir()

    def _below(self) -> list[str]:
        """Every file and folder under this folder, relative to it."""
        files, dirs = self._listing()
        pre = f"{self.member}/" if self.member else ""
        return sorted(n[len(pre):] for n in files | dirs if n.startswith(pre) and n != pre)

    def iterdir(self) -> Iterator[Member]:
        if not self.is_dir():
            raise NotADirectoryError(f"{self}: not a folder of {self.archive}")
        for rel in self._below():
            if "/" not in rel:
                yield self / rel

    def walk(self) -> Iterator[Member]:
        """Every file below this folder, sorted by name (what :func:`write_archive` takes
        back: ``{m.member: m.read_bytes() for m in Member(zip).walk()}``)."""
        files = self._listing()[0]
        for rel in self._below():
            if (f"{self.member}/{rel}" if self.member else rel) in files:
                yield self / rel

    def glob(self, pattern: str) -> Iterator[Member]:
        """Members whose path relative to this folder matches ``pattern`` one segment per
        ``/`` (``*`` does not cross a ``/``, as in :meth:`pathlib.Path.glob`; no ``**``)."""
        parts = pattern.split("/")
        for rel in self._below():
            segs = rel.split("/")
            if len(segs) == len(parts) and all(
                    fnmatch.fnmatchcase(s, p) for s, p in zip(segs, parts, strict=True)):
                yield self / rel

    def open(self, mode: str = "r", encoding: str | None = "utf-8",
             errors: str | None = None) -> IO[Any]:
        """The member's bytes (``"rb"``) or text (``"r"``, universal newlines); read-only."""
        if mode not in ("r", "rt", "rb"):
            raise ValueError(f"{self}: mode {mode!r} not allowed; allowed: r, rt, rb "
                             "(an archive is read-only)")
        if not self.is_file():
            raise FileNotFoundError(f"{self}: no such member of {self.archive}")
        with zipfile.ZipFile(self.archive) as zf:  # the member's stream keeps the file open
            raw = zf.open(self.member, "r")
        return raw if mode == "rb" else io.TextIOWrapper(raw, encoding=encoding, errors=errors)

    def read_bytes(self) -> bytes:
        with self.open("rb") as fh:
            return fh.read()

    def read_text(self, encoding: str = "utf-8", errors: str | None = None) -> str:
        with self.open("r", encoding=encoding, errors=errors) as fh:
            return fh.read()


def resolve(path: str | Path) -> Path | Member:
    """``path`` as a :class:`Member` where one of its folders is an existing ``*.zip`` file
    (the rest of the path is the member), else as a :class:`pathlib.Path`."""
    p = Path(path)
    for i, part in enumerate(p.parts):
        if part.endswith(SUFFIX) and Path(*p.parts[:i + 1]).is_file():
            return Member(Path(*p.parts[:i + 1]), "/".join(p.parts[i + 1:]))
    return p


def session_member(folder: str | Path, experiment: str, path: str) -> Member:
    """Member ``path`` (``<session>/...``) of the archive of ``experiment`` in ``folder`` that
    holds its session folder: ``<experiment>.zip`` or one of ``<experiment>_*.zip``; a
    FileNotFoundError naming the archives looked in where none does."""
    session = path.split("/", 1)[0]
    candidates = sorted(Path(folder).glob(f"{experiment}_*{SUFFIX}"))
    candidates.insert(0, Path(folder) / f"{experiment}{SUFFIX}")
    for archive in candidates:
        if archive.is_file() and Member(archive, session).is_dir():
            return Member(archive, path)
    raise FileNotFoundError(f"no archive of {experiment} in {folder} holds {session}/ (looked "
                            f"in {', '.join(a.name for a in candidates if a.is_file()) or 'none'})")


def write_archive(files: Mapping[str, Path | bytes], dest: Path) -> str:
    """Pack ``{member name: file or its bytes}`` into the zip ``dest`` reproducibly (sorted
    members, one timestamp and mode, deflate level 9) and return its SHA-256: the same
    contents give the same bytes, however they were gathered. Written to a temporary file
    beside ``dest`` and renamed, so a reader never sees half an archive."""
    bad = sorted(n for n in files if n.startswith("/") or ".." in n.split("/") or not n)
    if bad:
        raise ValueError(f"member names must be relative paths without '..': {bad[:3]}")
    tmp = dest.with_name(dest.name + ".tmp")
    with zipfile.ZipFile(tmp, "w") as zf:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=_DATE)
            info.external_attr, info.create_system = _MODE, 3
            info.compress_type = zipfile.ZIP_DEFLATED
            data = files[name]
            zf.writestr(info, data if isinstance(data, bytes) else Path(data).read_bytes(),
                        compresslevel=9)
    tmp.replace(dest)
    return sha256(dest)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_sums(folder: Path) -> Path:
    """``folder/SHA256SUMS``: ``<sha256>  <name>`` for every archive in ``folder``, sorted
    (the format ``sha256sum -c`` reads)."""
    out = folder / SUMS
    lines = [f"{sha256(p)}  {p.name}\n" for p in sorted(folder.glob(f"*{SUFFIX}"))]
    out.write_text("".join(lines), encoding="utf-8")
    return out


def check_sums(folder: Path) -> list[str]:
    """What is wrong with ``folder``'s archives against its SHA256SUMS: a digest that
    differs, an archive the list does not name, a name without its archive. Empty when
    every archive is listed with its digest and the list names only those."""
    listed: dict[str, str] = {}
    for i, line in enumerate((folder / SUMS).read_text(encoding="utf-8").splitlines(), 1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64:
            return [f"{folder / SUMS}:{i}: not '<sha256>  <name>': {line!r}"]
        listed[name] = digest
    present = {p.name for p in folder.glob(f"*{SUFFIX}")}
    problems = [f"{n}: present but not in {SUMS}" for n in sorted(present - set(listed))]
    problems += [f"{n}: in {SUMS} but absent" for n in sorted(set(listed) - present)]
    problems += [f"{n}: SHA-256 {sha256(folder / n)} differs from {SUMS}'s {listed[n]}"
                 for n in sorted(present & set(listed)) if sha256(folder / n) != listed[n]]
    return problems
