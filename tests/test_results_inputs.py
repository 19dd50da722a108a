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
                    "records[3]: 'vendi' is not a finite number"),
    "bad runs": (_with(arm="vd75", seed=1, iteration=1, pass1_gsm8k=1.0,
                       pass1_gsm8k_runs=[1, "x"]),
                 "records[3]: 'pass1_gsm8k_runs' is not a list of finite numbers"),
    "bad seed": (_with(arm="vd75", seed="one", iteration=1), "'seed' is not an integer"),
    "negative iteration": (_with(arm="vd75", seed=1, iteration=-1), "'iteration' is not an"),
    "not utf-8": (b"\xff\xfe\x00garbage", "not UTF-8 text"),
    # issue 50, item 6: values Python reads but the tables cannot use, one line each
    "empty records": (json.dumps({"records": []}), "no record of a trained arm holds a loop"),
    "only the base": (json.dumps({"records": GOOD["records"][:1]}),
                      "no record of a trained arm holds a loop metric"),
    "1e309 (reads as inf)": (json.dumps(GOOD)[:-1] + ', "card": 1e309}',
                             "1e309 is beyond a float's range"),
    "1e308 (means overflow)": (_with(arm="vd75", seed=1, iteration=1, vendi=1e308),
                               "records[3]: 'vendi' is not a finite number (at most 1e15"),
    "integer too large for a float": (_with(arm="vd75", seed=1, iteration=1,
                                            vendi=10**400), "'vendi' is not a finite number"),
    "huge pass@1 run": (_with(arm="vd75", seed=1, iteration=1, pass1_gsm8k=1.0,
                              pass1_gsm8k_runs=[10**400]), "'pass1_gsm8k_runs' is not a list"),
    "integer of 5000 digits": (json.dumps(GOOD)[:-1] + ', "card": ' + "9" * 5000 + "}",
                               "not a results file"),
    "huge seed": (_with(arm="vd75", seed=10**400, iteration=1), "'seed' is not an integer 0 to"),
    "huge iteration": (_with(arm="vd75", seed=1, iteration=10**400),
                       "'iteration' is not an integer 0 to 1000"),
    "arm with a newline": (_with(arm="vd75\n| forged | row", seed=1, iteration=1),
                           "records[3]: 'arm' is not a name (it holds '\\n')"),
    # issue 50, item 5: two records of one arm, seed and iteration
    "duplicate record": (_with(arm="vd75", seed=0, iteration=1, vendi=9.0),
                         "records[2] and records[3] are both vd75 seed 0 iteration 1"),
}


#: files load_results takes (a merge part may hold pass@1 alone) but the report refuses
REPORT_ONLY = ("empty records", "only the base")


@pytest.mark.parametrize("case", list(CASES))
def test_a_malformed_results_file_is_one_line_and_writes_nothing(tmp_path, capsys, case):
    text, expected = CASES[case]
    path = tmp_path / "r.json"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    if case not in REPORT_ONLY:  # first: an old reader that takes it fails here, at once
        with pytest.raises(ResultsFileError):
            load_results(path)
    out = tmp_path / "report"
    assert main(["results", str(path), "--out", str(out)]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(f"vdlib results: {path}") and expected in err, err
    assert not out.exists()  # nothing written, not even the folder


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


def test_a_duplicate_record_is_refused_where_the_tables_would_disagree(tmp_path):
    """Issue 50, item 5: with two records of baseline seed 0 iteration 1, the summary table
    averaged both (as two seeds) and the effects table kept one; now the file is refused."""
    dup = {"records": [*GOOD["records"],
                       {"arm": "baseline", "seed": 0, "iteration": 1, "vendi": 5.0}]}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(dup))
    with pytest.raises(ResultsFileError, match=r"records\[1\] and records\[3\] are both "
                                               r"baseline seed 0 iteration 1; keep one"):
        load_results(path)
    base_twice = {"records": [*GOOD["records"], GOOD["records"][0]]}
    path.write_text(json.dumps(base_twice))
    with pytest.raises(ResultsFileError, match=r"are both base iteration 0"):
        load_results(path)


def test_a_report_json_never_holds_infinity_or_nan(tmp_path):
    """Issue 50, item 6: meta values that are not finite (a caller's data) become null, and
    the report JSON parses under a strict reader."""
    from vdlib.report.results import results_report

    data = {**GOOD, "card": float("inf"), "note": {"x": float("nan")}}
    written = results_report(tmp_path / "r.json", tmp_path / "out", data=data)
    report = next(p for p in written if p.name.endswith("_report.json"))
    text = report.read_text()
    assert "Infinity" not in text and "NaN" not in text
    parsed = json.loads(text, parse_constant=lambda name: pytest.fail(name))
    assert parsed["card"] is None and parsed["note"] == {"x": None}


def test_a_single_policy_file_refuses_extreme_values_too(tmp_path, capsys):
    run = {"arm": "baseline", "seed": 0, "steps": [{"step": 1, "entropy": 1e308}]}
    path = tmp_path / "sp.json"
    for bad, expected in ((run, "'entropy' is not a finite number"),
                          ({**run, "seed": 10**400}, "'seed' is not an integer 0 to"),
                          ({**run, "arm": "a\nb"}, "'arm' is not a name"),
                          ({**run, "steps": [{"step": 10**400}]}, "no integer 'step' 0 to")):
        path.write_text(json.dumps({"runs": [bad]}))
        assert main(["results", str(path), "--out", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err
        assert expected in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists()
