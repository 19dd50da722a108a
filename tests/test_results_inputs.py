"""`vdlib results` on malformed inputs (issue 29, item 9): one line naming the file (and the
record and key), exit status 2, and nothing written, not even the output folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vdlib.app.cli import main
from vdlib.report.results import ResultsFileError, load_results

ROOT = Path(__file__).resolve().parent.parent
GOOD = {"iterations": 1, "records": [
    {"arm": "base", "seed": None, "iteration": 0, "pass1_gsm8k": 10.0,
     "pass1_gsm8k_runs": [9.0, 11.0]},
    {"arm": "baseline", "seed": 0, "iteration": 1, "self_bleu": 0.5, "vendi": 3.0},
    {"arm": "vd75", "seed": 0, "iteration": 1, "self_bleu": 0.3, "vendi": 4.0}]}


def _with(**record) -> str:
    return json.dumps({**GOOD, "records": [*GOOD["records"], record]})


CASES = {
    "truncated": (json.dumps(GOOD)[:-30], "not valid JSON"),
    "garbage": ("\x00\x01 this is not json {{{", "not valid JSON"),
    "empty": ("", "empty; not a results file"),
    "blank": ("\n  \n", "empty; not a results file"),
    "a list": (json.dumps([GOOD]), "no 'records' list in a list"),
    "no records": (json.dumps({"card": "x"}), "no 'records' list in an object"),
    "records not a list": (json.dumps({"records": {"a": 1}}), "no 'records' list in an object"),
    "record not an object": (json.dumps({"records": [1]}), "records[0] is a int"),
    "missing arm": (_with(seed=0, iteration=1), "records[3] has no 'arm'"),
    "missing iteration": (_with(arm="vd75", seed=1), "records[3] has no 'iteration'"),
    "NaN": (_with(arm="vd75", seed=1, iteration=1, vendi=float("nan")),
            "NaN is not a JSON number"),
    "Infinity": (_with(arm="vd75", seed=1, iteration=1, vendi=float("inf")),
                 "Infinity is not a JSON number"),
    "text metric": (_with(arm="vd75", seed=1, iteration=1, vendi="high"),
                    "records[3]: 'vendi' is not a finite number or null"),
    "bad runs": (_with(arm="vd75", seed=1, iteration=1, pass1_gsm8k=1.0,
                       pass1_gsm8k_runs=[1, "x"]),
                 "records[3]: 'pass1_gsm8k_runs' is not a list of finite numbers"),
    "bad seed": (_with(arm="vd75", seed="one", iteration=1), "'seed' is not an integer"),
    "negative iteration": (_with(arm="vd75", seed=1, iteration=-1), "'iteration' is not an"),
    "not utf-8": (b"\xff\xfe\x00garbage", "not UTF-8 text"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_malformed_results_file_is_one_line_and_writes_nothing(tmp_path, capsys, case):
    text, expected = CASES[case]
    path = tmp_path / "r.json"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    out = tmp_path / "report"
    assert main(["results", str(path), "--out", str(out)]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(f"vdlib results: {path}") and expected in err, err
    assert not out.exists()  # nothing written, not even the folder
    with pytest.raises(ResultsFileError):
        load_results(path)


def test_a_missing_or_directory_results_path_is_one_line(tmp_path, capsys):
    for path, expected in ((tmp_path / "missing.json", "No such file"), (tmp_path, "directory")):
        assert main(["results", str(path), "--out", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err
        assert expected in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_the_good_file_and_the_committed_one_still_load(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(GOOD))
    assert len(load_results(path)["records"]) == 3
    committed = ROOT / "docs" / "results" / "gpu_small_main.json"
    if committed.exists():
        assert load_results(committed)["records"]
