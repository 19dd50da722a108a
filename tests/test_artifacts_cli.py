"""Atomic artifacts, run manifests, the curriculum records and the command line."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from vdlib.app.cli import main, notebook_params_file
from vdlib.config.experiment import load_params
from vdlib.engines.generation import Sample
from vdlib.loop.proposals import proposal_records, valid_fraction
from vdlib.runs.run_start import start_run
from vdlib.utils import artifacts


def test_atomic_write_failure_keeps_old_file(tmp_path, monkeypatch):
    target = tmp_path / "a.json"
    artifacts.atomic_write_json(target, {"v": 1})

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        artifacts.atomic_write_json(target, {"v": 2})
    assert json.loads(target.read_text()) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]  # no temp file left behind


def test_jsonl_round_trip_unicode(tmp_path):
    rows = [{"q": "∑ π² — 数学 🙂", "a": None}, {"q": "x", "a": "\\frac{1}{2}"}]
    assert artifacts.read_jsonl(artifacts.write_jsonl(tmp_path / "r.jsonl", rows)) == rows


def test_start_run_writes_config_and_manifest(tmp_path):
    cfg = load_params({"profile": "tiny", "output_dir": str(tmp_path), "seed": 5})
    path = start_run(cfg)
    assert path == tmp_path / "quickstart" / "seed5"
    assert load_params(path / "config.yaml") == cfg
    first = json.loads((path / "manifest.json").read_text())
    assert first["seed"] == 5 and first["versions"]["torch"]
    again = json.loads((start_run(cfg) / "manifest.json").read_text())
    assert again["started"] == first["started"]  # a resumed run keeps its start time


def _sample(text: str, i: int = 0) -> Sample:
    return Sample("p", 0, i, [1, 2, 3], text, "stop", seed=11)


def test_proposal_records():
    good = "<question>\nWhat is 6 * 7?\n</question>\n\n\\boxed{42}"
    records = proposal_records([_sample(good), _sample("no format", 1)])
    assert records[0]["question"] == "What is 6 * 7?" and records[0]["answer"] == "42"
    assert records[0]["valid"] and not records[1]["valid"]
    assert records[1]["question"] is None and records[1]["num_tokens"] == 3
    assert valid_fraction(records) == 0.5 and valid_fraction([]) == 0.0
    json.dumps(records)  # JSON-ready


def test_cli_params_check(tmp_path, capsys):
    good = tmp_path / "good.yaml"
    good.write_text("profile: tiny\nvocab_dropout: {alpha: 0.85}\n")
    assert main(["params", "check", str(good)]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["vocab_dropout"]["alpha"] == 0.85
    bad = tmp_path / "bad.yaml"
    bad.write_text("vocab_dropout: {alpha: 2}\n")
    assert main(["params", "check", str(bad)]) == 2
    assert "vocab_dropout.alpha" in capsys.readouterr().err


def test_cli_unknown_notebook(tmp_path):
    with pytest.raises(SystemExit, match="unknown notebook"):
        main(["notebooks", "run", "--only", "99_nothing", "--output-dir", str(tmp_path)])


def test_cli_bad_params_fail_before_the_kernel(tmp_path):
    (tmp_path / "nb").mkdir()
    (tmp_path / "nb" / "00_x.ipynb").write_text("{}")
    (tmp_path / "params" / "tiny").mkdir(parents=True)
    (tmp_path / "params" / "tiny" / "x.yaml").write_text("seeed: 1\n")
    with pytest.raises(SystemExit, match="seeed"):
        main(["notebooks", "run", "--notebooks-dir", str(tmp_path / "nb"),
              "--params-dir", str(tmp_path / "params"), "--output-dir", str(tmp_path)])


def test_params_file_naming(tmp_path):
    assert notebook_params_file(tmp_path / "00_quickstart.ipynb", "paper", tmp_path) == \
        tmp_path / "paper" / "quickstart.yaml"


def test_generate_proposals_one_mask_per_batch(tiny_model_and_tokenizer):
    from vdlib.config.experiment import CurriculumConfig
    from vdlib.engines.generation import HFEngine
    from vdlib.loop.proposals import generate_proposals
    from vdlib.method.vocab_dropout import VocabDropout, mask_seed

    model, tok = tiny_model_and_tokenizer
    engine = HFEngine(model, tok, batch_size=8, show_progress=False)
    cfg = CurriculumConfig(num_questions=5, batch_size=2, max_new_tokens=6)
    vd = VocabDropout.for_model(model, tok, alpha=0.5)
    samples = generate_proposals(engine, tok, cfg, seed=3, iteration=2, vocab_dropout=vd)
    assert len(samples) == 5
    assert [s.mask_seed for s in samples] == [mask_seed(3, 2, "gen", b) for b in (0, 0, 1, 1, 2)]
    for s in samples:
        allowed = vd.sample(s.mask_seed)
        assert all(bool(allowed[t]) for t in s.token_ids)
    again = generate_proposals(engine, tok, cfg, seed=3, iteration=2, vocab_dropout=vd)
    assert [s.token_ids for s in again] == [s.token_ids for s in samples]
    plain = generate_proposals(engine, tok, cfg, seed=3, iteration=2)
    assert all(s.mask_seed is None for s in plain)
