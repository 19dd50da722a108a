"""The generated blocks of a markdown report (docs/RESULTS.md), rewritten from the results files
alone (``docs/results/*.json``): ``vdlib results --write docs/RESULTS.md`` (``--check``: exit
non-zero where a block is stale).

A block sits between two marker lines that name a results file (its stem, in the results
folder) and a table of :data:`TABLES`::

    <!-- BEGIN vdlib results:gpu_small_main:per_iteration -->
    ...
    <!-- END vdlib results:gpu_small_main:per_iteration -->

:func:`regenerate` replaces every block's body by what the table prints from the file and
leaves every byte outside the blocks as it was. A new block is a marker pair and, for a new
kind of table, an entry in :data:`TABLES`. Anything that cannot be regenerated (an unknown
table, a missing or malformed file, a BEGIN without its END) is one :class:`ResultsFileError`
line naming the block.

>>> blocks("a\\n<!-- BEGIN vdlib results:x:meta -->\\nold\\n<!-- END vdlib results:x:meta -->\\n")
[Block(file='x', table='meta', body='old')]
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from vdlib.report.results_ablations import ablation_block
from vdlib.report.results_file import ResultsFileError, load_results, read_json_file
from vdlib.report.results_interim import interim_table
from vdlib.report.results_invalid import check_invalid, invalid_table
from vdlib.report.results_main_table import MAIN_TABLES, Records
from vdlib.report.results_single_policy import load_single_policy, single_policy_markdown
from vdlib.utils.artifacts import atomic_write_text

__all__ = ["TABLES", "Block", "Evidence", "begin_marker", "end_marker", "blocks", "regenerate",
           "stale_blocks", "write_blocks", "blocks_command"]

_PREFIX = "vdlib results"
_BLOCK = re.compile(rf"<!-- BEGIN {_PREFIX}:(?P<file>[A-Za-z0-9_][A-Za-z0-9_.-]*):(?P<table>\w+)"
                    rf" -->\n(?P<body>.*?)\n?<!-- END {_PREFIX}:(?P=file):(?P=table) -->", re.S)
_ANY_BEGIN = re.compile(rf"<!-- BEGIN {_PREFIX}:")


def begin_marker(file: str, table: str) -> str:
    """The line that opens the block of ``table`` from results file ``file``."""
    return f"<!-- BEGIN {_PREFIX}:{file}:{table} -->"


def end_marker(file: str, table: str) -> str:
    """The line that closes it."""
    return f"<!-- END {_PREFIX}:{file}:{table} -->"


class Block(NamedTuple):
    """One generated block: the results file's stem, the table's name, the body it holds."""

    file: str
    table: str
    body: str

    @property
    def name(self) -> str:
        return f"{self.file}:{self.table}"


class Evidence:
    """The results folder's files, each read (bounded, checked JSON) once per regeneration."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self._read: dict[str, Any] = {}

    def raw(self, stem: str) -> Any:
        """``<folder>/<stem>.json``'s JSON value (:func:`read_json_file`)."""
        if stem not in self._read:
            self._read[stem] = read_json_file(self.folder / f"{stem}.json")
        return self._read[stem]

    def results(self, stem: str) -> dict[str, Any]:
        """A co-evolution results file (records by arm, seed and iteration), checked."""
        return load_results(self.folder / f"{stem}.json", self.raw(stem))


def _main(fn: Callable[[Records], str]) -> Callable[[Evidence, str], str]:
    return lambda ev, stem: fn(Records(ev.results(stem)))


def _interim(ev: Evidence, stem: str) -> str:
    interim = ev.results(stem)
    if not isinstance(interim.get("reference"), str):
        raise ResultsFileError(f"{ev.folder / stem}.json: no 'reference' (the results file "
                               "whose baseline and VD75 records the table sets beside)")
    return interim_table(ev.results(interim["reference"]), interim)


#: table name -> its text from the results folder and the file's stem
TABLES: dict[str, Callable[[Evidence, str], str]] = {
    **{name: _main(fn) for name, fn in MAIN_TABLES.items()},
    "ablation": lambda ev, stem: ablation_block(ev.results(stem), stem),
    "invalid": lambda ev, stem: invalid_table(check_invalid(ev.folder / f"{stem}.json",
                                                            ev.raw(stem))),
    "single_policy": lambda ev, stem: single_policy_markdown(
        load_single_policy(ev.folder / f"{stem}.json", ev.raw(stem))),
    "interim": _interim,
}


def _check_markers(text: str) -> None:
    starts = {m.start() for m in _BLOCK.finditer(text)}
    for m in _ANY_BEGIN.finditer(text):
        if m.start() not in starts:
            line = text.count("\n", 0, m.start()) + 1
            marker = text[m.start():text.find("\n", m.start())]
            raise ResultsFileError(f"line {line}: {marker[:100]} has no matching END marker "
                                   f"(<!-- END {_PREFIX}:FILE:TABLE -->)")


def blocks(text: str) -> list[Block]:
    """The generated blocks of a markdown text, in order (a BEGIN marker without its END is a
    :class:`ResultsFileError` naming its line)."""
    _check_markers(text)
    return [Block(m["file"], m["table"], m["body"]) for m in _BLOCK.finditer(text)]


def _body(block: Block, evidence: Evidence) -> str:
    fn = TABLES.get(block.table)
    if fn is None:
        raise ResultsFileError(f"block {block.name}: no table {block.table!r}; allowed: "
                               f"{', '.join(TABLES)}")
    try:
        return fn(evidence, block.file)
    except ResultsFileError as e:
        raise ResultsFileError(f"block {block.name}: {e}") from None
    except (KeyError, IndexError, TypeError) as e:  # a file without what the table reads
        raise ResultsFileError(f"block {block.name}: {evidence.folder / block.file}.json lacks "
                               f"what the table reads ({type(e).__name__}: {e})") from None


def regenerate(text: str, results_dir: str | Path) -> tuple[str, list[Block]]:
    """``text`` with every block's body replaced by its table printed from ``results_dir``,
    and the blocks whose body changed (their old bodies)."""
    evidence = Evidence(results_dir)
    changed: list[Block] = []
    new_bodies = {}
    for block in blocks(text):
        body = new_bodies.setdefault(block.name, _body(block, evidence))
        if body != block.body:
            changed.append(block)

    def put(m: re.Match) -> str:
        name = f"{m['file']}:{m['table']}"
        return f"{begin_marker(m['file'], m['table'])}\n{new_bodies[name]}\n" \
               f"{end_marker(m['file'], m['table'])}"

    return _BLOCK.sub(put, text), changed


def _read(path: Path) -> str:
    try:
        with open(path, encoding="utf-8", newline="") as f:  # every byte as it is
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ResultsFileError(f"{path}: cannot be read ({getattr(e, 'strerror', None) or e})"
                               ) from None


def stale_blocks(path: str | Path, results_dir: str | Path) -> tuple[list[Block], int]:
    """The blocks of the markdown file ``path`` that differ from what ``results_dir`` gives,
    and how many blocks it has."""
    text = _read(Path(path))
    return regenerate(text, results_dir)[1], len(blocks(text))


def write_blocks(path: str | Path, results_dir: str | Path) -> tuple[list[Block], int]:
    """Rewrite every block of the markdown file ``path`` from ``results_dir`` (atomically; the
    file is left as it was where any block fails); the blocks that changed and how many it
    has."""
    text = _read(Path(path))
    new, changed = regenerate(text, results_dir)
    if new != text:
        atomic_write_text(path, new)
    return changed, len(blocks(text))


def _names(changed: list[Block], most: int = 4) -> str:
    names = [b.name for b in changed]
    return ", ".join(names[:most]) + (f", and {len(names) - most} more" if len(names) > most
                                      else "")


def blocks_command(md: str | Path, results_dir: str | Path | None,
                   write: bool) -> tuple[int, str]:
    """``vdlib results --write MD`` (``write``) or ``--check MD``: the exit status and its one
    line. ``results_dir`` defaults to ``results/`` beside ``md``. 0: written, or every block
    current; 1 (check): some block is stale, named; 2: a block cannot be regenerated (the
    file is then left as it was)."""
    md = Path(md)
    folder = Path(results_dir) if results_dir else md.parent / "results"
    try:
        changed, n = (write_blocks if write else stale_blocks)(md, folder)
    except ResultsFileError as e:
        return 2, f"{md}: {e}"
    if n == 0:
        return 2, (f"{md} has no generated block (a {begin_marker('FILE', 'TABLE')} ... "
                   f"{end_marker('FILE', 'TABLE')} pair)")
    if not changed:
        return 0, f"{md}: all {n} generated blocks match {folder}"
    if write:
        return 0, f"{md}: {len(changed)} of {n} generated blocks rewritten ({_names(changed)})"
    return 1, (f"{md} is stale: {len(changed)} of {n} generated blocks differ from {folder} "
               f"({_names(changed)}); run vdlib results --write {md}")
