"""vdlib export of a committed extract (metrics.json and questions.jsonl.gz only, as the GPU holds
commit them), on disk and inside an evidence zip, and ``--push-to-hub``: guarded by HF_TOKEN and
HF_HUB_OFFLINE, the upload itself mocked (it cannot run here), the token in no file."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from vdlib.app.cli import main
from vdlib.export.hub import PUSHED_PATTERNS, hub_token
from vdlib.export.read_back import curricula_frame, read_card
from vdlib.export.run_folder import ExportError
from vdlib.method.vocab_dropout import mask_seed
from vdlib.utils.archive import write_archive

BATCH = 3


def _rows(t: int, seed: int, alpha: float) -> list[dict]:
    """Six scored questions in two generation batches, as the loop records them."""
    rows = []
    for i in range(6):
        b = i // BATCH
        valid = i % 2 == 0
        rows.append({"index": i, "question": f"q{t}.{i}?" if valid else None,
                     "answer": str(i) if valid else None, "valid": valid, "text": f"out {i}",
                     "finish_reason": "stop", "num_tokens": 10 + i, "seed": 1000 * t + b,
                     "mask_seed": mask_seed(seed, t, "gen", b) if alpha < 1 else None,
                     "alpha_gen": alpha,
                     "solver_answers": [str(i), "7"] if valid else [],
                     "majority": str(i) if valid else None, "acc": 0.5 if valid else None,
                     "proposer_agrees": True if valid else None})
    return rows


def _extract(root: Path, name: str = "vd75-seed1", alpha: float = 0.75) -> Path:
    seed = int(name.rpartition("seed")[2])
    run = root / name
    for t in (1, 2):
        it = run / f"iter_{t}"
        it.mkdir(parents=True)
        (it / "metrics.json").write_text(json.dumps({"iteration": t, "alpha_gen": alpha,
                                                     "alpha_train": alpha, "generated": 6,
                                                     "valid_questions": 3}))
        with gzip.open(it / "questions.jsonl.gz", "wt") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in _rows(t, seed, alpha))
    return run


def _check(to: Path, tmp_path: Path) -> None:
    frame = curricula_frame(to, cache_dir=str(tmp_path / "cache"))
    want = [(t, r) for t in (1, 2) for r in _rows(t, 1, 0.75)]
    assert len(frame) == len(want)
    for (_, row), (t, r) in zip(frame.iterrows(), want, strict=True):
        assert (row["iteration"], row["index"], row["arm"], row["run_seed"]) == (
            t, r["index"], "vd75", 1)
        assert row["batch"] == r["index"] // BATCH  # one sampling seed per batch
        assert (row["question"] if row["valid"] else None) == r["question"]
        assert row["mask_seed"] == r["mask_seed"] and row["alpha"] == 0.75
        assert list(row["solver_answers"]) == r["solver_answers"]
        assert row["in_curriculum"] is None  # the extract records no scoring window
    v = read_card(to)["vdlib"]
    assert (v["run"], v["arm"], v["seed"]) == ("vd75-seed1", "vd75", 1)
    for absent in ("config_fingerprint", "models", "vocab_dropout", "versions"):
        assert absent not in v and absent in v["not_recorded"]
    assert v["alpha_per_iteration"]["iter_2"] == {"alpha_gen": 0.75, "alpha_train": 0.75}


def test_an_extract_exports_what_it_records_and_says_what_it_does_not(tmp_path):
    run = _extract(tmp_path / "hold")
    assert main(["export", str(run), "--to", str(tmp_path / "out")]) == 0
    _check(tmp_path / "out", tmp_path)
    assert (tmp_path / "out" / "arrow" / "dataset_dict.json").is_file()
    assert main(["export", str(run), "--to", str(tmp_path / "lean"), "--no-arrow"]) == 0
    assert sorted(p.name for p in (tmp_path / "lean").iterdir()) == ["README.md", "data"]
    assert "load_from_disk" not in (tmp_path / "lean" / "README.md").read_text()
    _check(tmp_path / "lean", tmp_path)


def test_an_extract_inside_an_evidence_zip_is_read_in_place(tmp_path):
    run = _extract(tmp_path / "hold")
    members = {f"h200x4/{p.relative_to(run.parent).as_posix()}": p
               for p in run.rglob("*") if p.is_file()}
    archive = tmp_path / "gpu_small_main_h200x1_h200x4.zip"
    write_archive(members, archive)
    assert main(["export", f"{archive}/h200x4/vd75-seed1", "--to", str(tmp_path / "out")]) == 0
    _check(tmp_path / "out", tmp_path)


def test_a_mask_seed_that_is_not_its_batchs_is_refused(tmp_path, capsys):
    run = _extract(tmp_path / "hold", name="vd75-seed2")  # rows made for seed 2 ...
    (run.parent / "vd75-seed2").rename(run.parent / "vd75-seed3")  # ... named seed 3
    assert main(["export", str(run.parent / "vd75-seed3"), "--to", str(tmp_path / "o")]) == 2
    assert "mask_seed is not the seed of run seed 3, batch 0" in capsys.readouterr().err


def test_hub_token_refuses_offline_a_missing_token_and_a_bad_repo():
    with pytest.raises(ExportError, match="HF_HUB_OFFLINE is set"):
        hub_token("me/curricula", {"HF_HUB_OFFLINE": "1", "HF_TOKEN": "hf_x"})
    with pytest.raises(ExportError, match="needs a Hugging Face token .* in HF_TOKEN"):
        hub_token("me/curricula", {"HF_HUB_OFFLINE": "0"})
    with pytest.raises(ExportError, match="owner/name"):
        hub_token("curricula", {"HF_TOKEN": "hf_x"})
    assert hub_token("me/curricula", {"HF_TOKEN": "hf_x", "HF_HUB_OFFLINE": "0"}) == "hf_x"


class _RecordingApi:
    """Stands in for huggingface_hub.HfApi: records the calls, sends nothing."""

    calls: list = []

    def __init__(self, token=None):
        self.calls.append(("HfApi", token))

    def create_repo(self, **kw):
        self.calls.append(("create_repo", kw))

    def upload_folder(self, **kw):
        self.calls.append(("upload_folder", kw))
        return "commit-url"


def test_push_to_hub_is_guarded_and_sends_the_card_and_parquet_only(tmp_path, monkeypatch,
                                                                    capsys):
    import huggingface_hub

    run = _extract(tmp_path / "hold")
    monkeypatch.setattr(huggingface_hub, "HfApi", _RecordingApi)
    _RecordingApi.calls = []
    to = tmp_path / "out"
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    capsys.readouterr()
    assert main(["export", str(run), "--to", str(to), "--push-to-hub", "me/cur"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs a Hugging Face token" in err
    secret = "hf_secretTOKEN_do_not_write_1234"
    monkeypatch.setenv("HF_TOKEN", secret)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["export", str(run), "--to", str(to), "--push-to-hub", "me/cur"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "HF_HUB_OFFLINE is set" in err
    assert not to.exists() and _RecordingApi.calls == []  # refused before anything
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert main(["export", str(run), "--to", str(to), "--push-to-hub", "me/cur"]) == 0
    assert _RecordingApi.calls == [
        ("HfApi", secret),
        ("create_repo", {"repo_id": "me/cur", "repo_type": "dataset", "private": True,
                         "exist_ok": True}),
        ("upload_folder", {"folder_path": str(to), "repo_id": "me/cur", "repo_type": "dataset",
                           "allow_patterns": PUSHED_PATTERNS,
                           "commit_message": "vdlib export: curricula and dataset card"})]
    assert PUSHED_PATTERNS == ["README.md", "data/*.parquet"]
    assert "huggingface.co/datasets/me/cur" in capsys.readouterr().out
    for path in to.rglob("*"):  # the token is in no file of the export
        assert not path.is_file() or secret.encode() not in path.read_bytes(), path
