"""``vdlib plan``'s inputs (issue 50 item 6): every numeric flag that is not a whole number in
its range, and every ``--table`` file that is not a usable cost table, end in ONE line on
stderr naming the flag or the file (exit 2), never a traceback or argparse's usage block."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from vdlib.app.cli import main as cli_main
from vdlib.app.plan_table import DEFAULT_TABLE, PlanError, load_table

PARAMS = "params/gpu-small/main_table.yaml"


def _one_line(capsys) -> str:
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1, captured.err
    assert "Traceback" not in captured.err and "usage:" not in captured.err
    return captured.err


@pytest.mark.parametrize("flag", ["--gpus", "--gpus-per-run", "--runs-per-gpu", "--steps",
                                  "--questions", "--eval-limit"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400", "2.5", "0", "-3",
                                   "99999999999999999999999", "", "3 GPUs"])
def test_a_numeric_flag_out_of_range_or_not_a_number_is_one_line_naming_it(flag, value,
                                                                             capsys):
    assert cli_main(["plan", PARAMS, f"{flag}={value}"]) == 2
    err = _one_line(capsys)
    assert err.startswith(f"vdlib plan: {flag} ") and "allowed: a whole number from" in err


def test_numeric_flags_in_range_still_plan(capsys):
    assert cli_main(["plan", PARAMS, "--gpus", "3", "--gpus-per-run", "1",
                     "--runs-per-gpu", "+3"]) == 0
    assert "9 runs, 9 at once" in capsys.readouterr().out


def _table(tmp_path: Path, edit) -> str:
    table = json.loads(DEFAULT_TABLE.read_text())
    edit(table)
    path = tmp_path / "table.json"
    path.write_text(json.dumps(table))
    return str(path)


def _set(path: list, value):
    def edit(table):
        node = table
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
    return edit


BAD_TABLES = {
    "a list": (lambda t: t.clear(), "[]", "the top level is a list"),
    "no entries": (lambda t: t.pop("entries"), None, "a cost table needs entries"),
    "entries an object": (_set(["entries"], {}), None, "entries is a dict, not a list"),
    "a negative rate": (lambda t: t["entries"][0]["stages"]["score"].update(tokens_per_s=-1),
                        None, "entries[0] (smollm2-135m@h200/vllm-run/x1).stages.score."
                              "tokens_per_s = '-1'"),
    "a string step": (lambda t: t["entries"][0]["stages"]["solver"].update(step_s="fast"),
                      None, "stages.solver.step_s = 'fast'"),
    "a huge number": (lambda t: t["entries"][0]["stages"]["solver"].update(step_s=1e400),
                      None, "not a number a cost table may hold"),
    "no lengths": (lambda t: t["entries"][1].pop("lengths"), None,
                   "entries[1] (smollm2-135m@h200/vllm-stage/x1).lengths: missing"),
    "a card of no memory": (_set(["cards", "h200", "memory_gib"], 0), None,
                            "cards.h200.memory_gib = '0'"),
    "a shape of 0 layers": (_set(["shapes", "qwen3-4b", "layers"], 0), None,
                            "shapes.qwen3-4b.layers = '0'"),
    "an entry not an object": (lambda t: t["entries"].append(7), None, "entries[7] is not"),
    "a partial without figures": (lambda t: t["partial"][0].pop("figures"), None,
                                  "partial[0]: needs id, shape, card, backend and figures"),
}


@pytest.mark.parametrize("case", sorted(BAD_TABLES))
def test_a_malformed_table_is_one_line_naming_the_file_and_the_key(case, tmp_path, capsys):
    edit, raw, message = BAD_TABLES[case]
    path = _table(tmp_path, edit)
    if raw is not None:
        Path(path).write_text(raw)
    if case == "a huge number":  # json.dumps writes Infinity for 1e400
        assert "Infinity" in Path(path).read_text()
    assert cli_main(["plan", PARAMS, "--table", path]) == 2
    err = _one_line(capsys)
    assert path in err and message in err, err


def test_a_table_that_is_not_a_json_file_is_one_line(tmp_path, capsys):
    cases = {"binary": b"\xff\xfe\x00garbage", "truncated": b'{"cards": {', "empty": b"",
             "nan": b'{"cards": NaN, "shapes": {}, "entries": []}'}
    for name, data in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_bytes(data)
        assert cli_main(["plan", PARAMS, "--table", str(path)]) == 2, name
        assert str(path) in _one_line(capsys)
    for path, why in ((tmp_path, "not a regular file"),
                      (tmp_path / "missing.json", "no cost table there")):
        assert cli_main(["plan", PARAMS, "--table", str(path)]) == 2
        assert why in _one_line(capsys)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_table_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "table.json"
    os.mkfifo(fifo)
    with pytest.raises(PlanError, match="not a regular file"):
        load_table(fifo)


def test_an_oversized_table_is_refused_before_it_is_read(tmp_path, monkeypatch):
    import vdlib.app.plan_table as pt

    path = tmp_path / "big.json"
    path.write_text(" " * 2048 + DEFAULT_TABLE.read_text())
    monkeypatch.setattr(pt, "MAX_TABLE_BYTES", 1024)
    with pytest.raises(PlanError, match=r"bytes; a cost table is at most 1,024"):
        load_table(path)


def test_the_packaged_table_is_valid():
    table = load_table()
    assert {"cards", "shapes", "entries"} <= set(table)
