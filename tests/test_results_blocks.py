"""`vdlib results --write/--check MD` (vdlib.report.results_blocks): every generated block of
docs/RESULTS.md from docs/results/*.json alone, byte for byte; everything outside the blocks
untouched; a stale block named in one line; a block that cannot be regenerated refused in one
line with the file left as it was."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from vdlib.app.cli import main
from vdlib.report.results_blocks import TABLES, begin_marker, blocks, end_marker

ROOT = Path(__file__).resolve().parent.parent
RESULTS_MD = ROOT / "docs" / "RESULTS.md"
RESULTS = ROOT / "docs" / "results"


def _blank(text: str) -> str:
    """Every block's body emptied (the markers kept)."""
    return re.sub(r"(<!-- BEGIN vdlib results:([\w.:-]+) -->\n).*?(<!-- END vdlib results:\2 -->)",
                  r"\1\3", text, flags=re.S)


def test_write_regenerates_results_md_byte_for_byte_from_the_committed_json(tmp_path, capsys):
    """Every block of a copy of docs/RESULTS.md emptied, then `vdlib results --write`: the
    copy is the committed file again, byte for byte; `--check` then passes, and on the emptied
    copy fails naming the count of stale blocks."""
    committed = RESULTS_MD.read_bytes()
    md = tmp_path / "RESULTS.md"
    md.write_bytes(_blank(committed.decode("utf-8")).encode("utf-8"))
    assert md.read_bytes() != committed
    n = len(blocks(committed.decode("utf-8")))
    assert n >= 16
    assert main(["results", "--check", str(md), "--results-dir", str(RESULTS)]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"{n} of {n} generated blocks differ" in err
    assert "gpu_small_main:meta" in err and "--write" in err
    assert main(["results", "--write", str(md), "--results-dir", str(RESULTS)]) == 0
    assert f"{n} of {n} generated blocks rewritten" in capsys.readouterr().out
    assert md.read_bytes() == committed
    assert main(["results", "--check", str(RESULTS_MD)]) == 0  # results/ beside it by default
    assert f"all {n} generated blocks match" in capsys.readouterr().out


def test_only_the_blocks_change_and_a_new_block_is_a_marker_pair(tmp_path):
    """Prose around the blocks is kept as it is (CRLF included); a marker pair added for another
    file fills in from that file (how a new section gets its table)."""
    results = tmp_path / "results"
    results.mkdir()
    shutil.copy(RESULTS / "gpu_small_main.json", results / "mine.json")
    md = tmp_path / "R.md"
    md.write_bytes(("prose 1\r\n" + begin_marker("mine", "meta") + "\nstale\n"
                    + end_marker("mine", "meta") + "\r\nprose 2 ± 3\n"
                    + begin_marker("mine", "rules") + "\n" + end_marker("mine", "rules")
                    + "\n").encode("utf-8"))
    assert main(["results", "--write", str(md)]) == 0
    text = md.read_bytes().decode("utf-8")
    assert text.startswith("prose 1\r\n" + begin_marker("mine", "meta") + "\n9 runs: 3 arms")
    assert "\r\nprose 2 ± 3\n" in text
    assert [b.table for b in blocks(text)] == ["meta", "rules"]
    assert blocks(text)[1].body.startswith("- n = 3 seeds per arm.")


@pytest.mark.parametrize("body, expect", [
    (begin_marker("gpu_small_main", "nope") + "\nx\n" + end_marker("gpu_small_main", "nope"),
     "block gpu_small_main:nope: no table 'nope'; allowed: meta, rules"),
    (begin_marker("absent", "meta") + "\nx\n" + end_marker("absent", "meta"),
     "block absent:meta: "),
    (begin_marker("gpu_small_main", "meta") + "\nx\n",
     "line 5: <!-- BEGIN vdlib results:gpu_small_main:meta --> has no matching END marker"),
    (begin_marker("gpu_small_single_policy", "meta") + "\nx\n"
     + end_marker("gpu_small_single_policy", "meta"), "block gpu_small_single_policy:meta: "),
])
def test_a_block_that_cannot_be_regenerated_is_one_line_and_the_file_is_kept(
        tmp_path, capsys, body, expect):
    md = tmp_path / "R.md"
    md.write_text("top\n" + begin_marker("gpu_small_main", "meta") + "\nold\n"
                  + end_marker("gpu_small_main", "meta") + "\n" + body + "\n", encoding="utf-8")
    before = md.read_bytes()
    assert main(["results", "--write", str(md), "--results-dir", str(RESULTS)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expect in err, err
    assert md.read_bytes() == before


def test_a_markdown_file_without_blocks_is_refused(tmp_path, capsys):
    md = tmp_path / "R.md"
    md.write_text("no markers here\n", encoding="utf-8")
    assert main(["results", "--write", str(md), "--results-dir", str(RESULTS)]) == 2
    assert "has no generated block" in capsys.readouterr().err
    assert md.read_text(encoding="utf-8") == "no markers here\n"


def test_a_results_file_without_what_a_table_reads_is_named(tmp_path, capsys):
    results = tmp_path / "results"
    results.mkdir()
    (results / "x.json").write_text(json.dumps({"records": [
        {"arm": "baseline", "seed": 0, "iteration": 1, "vendi": 1.0}]}))
    md = tmp_path / "R.md"
    md.write_text(begin_marker("x", "meta") + "\n" + end_marker("x", "meta") + "\n")
    assert main(["results", "--check", str(md)]) == 2
    err = capsys.readouterr().err
    assert "block x:meta:" in err and "x.json lacks what the table reads" in err


@pytest.mark.parametrize("argv", [["results"], ["results", "f.json"],
                                  ["results", "f.json", "--write", "R.md"],
                                  ["results", "--check", "R.md", "--out", "o"]])
def test_results_takes_a_file_and_out_or_a_markdown_file(argv, capsys):
    assert main(argv) == 2
    assert "give FILE --out DIR, or --write/--check MD" in capsys.readouterr().err


def test_every_table_has_a_block_or_is_named_as_kept_out():
    """Each registered table is used by docs/RESULTS.md, except the interim table (issue 30's
    first hold, a record kept beside the results; tests/test_results.py checks it)."""
    used = {b.table for b in blocks(RESULTS_MD.read_text(encoding="utf-8"))}
    assert set(TABLES) - used == {"interim"}
