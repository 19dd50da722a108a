"""vdlib export on a real tiny run: the dataset read back with ``datasets`` matches the run
folder field by field, the card's YAML metadata holds the run's values, every exported
checkpoint has a model card, and bad input fails with one line and exit status 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from test_coevolution import tiny_params

from vdlib.app.cli import main
from vdlib.export.cards import front_matter
from vdlib.loop.arms import arm_params
from vdlib.loop.coevolution import run
from vdlib.method.curriculum import filter_curriculum
from vdlib.method.vocab_dropout import mask_seed
from vdlib.runs.run_state import file_record
from vdlib.utils.artifacts import read_jsonl

SPLITS = ["iter_1", "iter_2"]
ROLES = ("proposer", "solver")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    """A finished 2-iteration run of the vd75 arm on the random tiny model (a minute or two on
    2 cores), with its checkpoints."""
    out = tmp_path_factory.mktemp("runs")
    return run(arm_params(tiny_params(out, iterations=2), "vd75")).run_dir


@pytest.fixture(scope="module")
def exported(tiny_run, tmp_path_factory) -> Path:
    to = tmp_path_factory.mktemp("exports") / "vd75-seed0"
    assert main(["export", str(tiny_run), "--to", str(to), "--checkpoints"]) == 0
    return to


def _light_copy(run_dir: Path, dest: Path) -> Path:
    """The run folder without its checkpoints and base models (records, questions, metrics)."""
    shutil.copytree(run_dir, dest, ignore=shutil.ignore_patterns("*_model", "base_models",
                                                                 ".lock"))
    return dest


def _expected(run_dir: Path, t: int, cfg: dict) -> list[dict]:
    """Every row of split iter_<t> as the run folder says it should be."""
    it = run_dir / f"iter_{t}"
    questions = read_jsonl(it / "questions.jsonl")
    kept = [c["question"] for c in read_jsonl(it / "curriculum.jsonl")]
    s, size = cfg["scoring"], cfg["curriculum"]["batch_size"]
    rows = []
    for q in questions:
        in_cur = bool(filter_curriculum([q], s["tau_min"], s["tau_max"], s["solver_target"]))
        assert in_cur == (q["valid"] and q["question"] in kept)
        rows.append({"iteration": t, "arm": "vd75", "run_seed": cfg["seed"],
                     "index": q["index"], "batch": q["index"] // size,
                     "question": q["question"], "answer": q["answer"], "valid": q["valid"],
                     "text": q["text"], "finish_reason": q["finish_reason"],
                     "num_tokens": q["num_tokens"], "sample_seed": q["seed"],
                     "mask_seed": q["mask_seed"], "alpha": q["alpha_gen"],
                     "solver_answers": q["solver_answers"], "majority": q["majority"],
                     "acc": q["acc"], "proposer_agrees": q["proposer_agrees"],
                     "in_curriculum": in_cur})
    return rows


def test_the_dataset_matches_the_run_folder_field_by_field(tiny_run, exported, tmp_path):
    from datasets import load_dataset, load_from_disk

    from vdlib.export import curricula_frame, load_curricula

    cfg = yaml.safe_load((tiny_run / "config.yaml").read_text())
    files = {s: str(exported / "data" / f"{s}.parquet") for s in SPLITS}
    cache = str(tmp_path / "hf_cache")
    readers = {"parquet": load_dataset("parquet", data_files=files, cache_dir=cache),
               "folder": load_dataset(str(exported), cache_dir=cache),  # the card's configs
               "load_from_disk": load_from_disk(str(exported / "arrow")),
               "load_curricula": load_curricula(exported, cache_dir=cache)}
    for name, ds in readers.items():
        assert list(ds) == SPLITS, name
        for t, split in enumerate(SPLITS, start=1):
            want = _expected(tiny_run, t, cfg)
            assert len(want) == cfg["curriculum"]["num_questions"]
            assert ds[split].to_list() == want, (name, split)
    # what the run recorded about its masks agrees with the derived seeds
    for row in readers["parquet"]["iter_1"]:
        assert row["mask_seed"] == mask_seed(0, 1, "gen", row["batch"])
        assert row["alpha"] == 0.75
    frame = curricula_frame(exported, cache_dir=cache)
    assert list(frame["iteration"]) == [1] * 4 + [2] * 4


def test_the_card_metadata_parses_with_the_runs_values(tiny_run, exported):
    manifest = json.loads((tiny_run / "manifest.json").read_text())
    text = (exported / "README.md").read_text()
    assert text.startswith("---\n")
    meta = yaml.safe_load(text.split("---\n")[1])  # the front matter, as the Hub reads it
    assert meta == front_matter(text)
    v = meta["vdlib"]
    assert v["paper"]["title"] == ("Vocabulary Dropout for Curriculum Diversity in LLM "
                                   "Co-Evolution")
    assert (v["run"], v["arm"], v["seed"], v["experiment"]) == ("vd75-seed0", "vd75", 0, "t")
    assert v["vocab_dropout"] == {"alpha": 0.75, "schedule": "fixed", "alpha_final": 1.0,
                                  "phases": "both"}
    assert v["models"] == {"proposer": "tiny-random", "solver": "tiny-random"}
    assert v["config_fingerprint"] == manifest["fingerprint"]
    assert v["run_vdlib_version"] == manifest["versions"]["vdlib"]
    assert v["versions"] == manifest["versions"] and v["git_commit"] == manifest["git_commit"]
    for t, split in enumerate(SPLITS, start=1):
        metrics = json.loads((tiny_run / f"iter_{t}" / "metrics.json").read_text())
        assert v["iteration_metrics"][split] == metrics
        assert v["alpha_per_iteration"][split] == {"alpha_gen": metrics["alpha_gen"],
                                                   "alpha_train": metrics["alpha_train"]}
    assert "not_recorded" not in v  # a whole run folder records every field
    assert meta["configs"] == [{"config_name": "default", "data_files": [
        {"split": s, "path": f"data/{s}.parquet"} for s in SPLITS]}]


def test_each_exported_checkpoint_has_a_model_card(tiny_run, exported):
    manifest = json.loads((tiny_run / "manifest.json").read_text())
    cards = sorted(p.relative_to(exported).as_posix()
                   for p in (exported / "checkpoints").rglob("README.md"))
    assert cards == [f"checkpoints/iter_{t}/{r}_model/README.md"
                     for t in (1, 2) for r in ROLES]
    for t in (1, 2):
        for role in ROLES:
            src, dest = tiny_run / f"iter_{t}" / f"{role}_model", \
                exported / "checkpoints" / f"iter_{t}" / f"{role}_model"
            assert (dest / "model.safetensors").read_bytes() == \
                (src / "model.safetensors").read_bytes()
            meta = front_matter((dest / "README.md").read_text())
            v = meta["vdlib"]
            assert (v["role"], v["iteration"], v["arm"], v["seed"]) == (role, t, "vd75", 0)
            assert v["config_fingerprint"] == manifest["fingerprint"]
            assert v["iteration_metrics"] == {f"iter_{t}": json.loads(
                (tiny_run / f"iter_{t}" / "metrics.json").read_text())}
            assert meta["library_name"] == "transformers"
            assert "base_model" not in meta  # tiny-random is a registered name, no Hub id
            assert v["trained_from"].startswith(
                f"iter_{t - 1}/{role}_model" if t > 1 else "the run's starting")


def _fails(args: list[str], capsys) -> str:
    capsys.readouterr()  # what earlier commands printed (a successful export's progress bars)
    assert main(["export", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("vdlib export: "), err
    return err


def test_bad_input_fails_with_one_line_and_exit_2(tiny_run, tmp_path, capsys):
    to = tmp_path / "out"
    assert "not a run folder" in _fails([str(tmp_path), "--to", str(to)], capsys)
    (tmp_path / "f.txt").write_text("x")
    assert "is not a folder" in _fails([str(tmp_path / "f.txt"), "--to", str(to)], capsys)
    unfinished = _light_copy(tiny_run, tmp_path / "unfinished")
    (unfinished / "iter_2" / "metrics.json").unlink()
    err = _fails([str(unfinished), "--to", str(to)], capsys)
    assert "iter_2 is unfinished" in err and "--iterations 1" in err
    assert not to.exists()
    assert main(["export", str(unfinished), "--to", str(to), "--iterations", "1"]) == 0
    assert sorted(p.name for p in (to / "data").iterdir()) == ["iter_1.parquet"]
    err = _fails([str(unfinished), "--to", str(to), "--iterations", "1"], capsys)
    assert "exists and is not empty" in err
    assert _fails([str(unfinished), "--to", str(tmp_path / "o2"), "--iterations", "3"],
                  capsys).endswith("has no iteration 3; it has 1, 2\n")
    assert "holds no checkpoint" in _fails([str(unfinished), "--to", str(tmp_path / "o3"),
                                            "--iterations", "1", "--checkpoints"], capsys)
    assert not (tmp_path / "o2").exists() and not (tmp_path / "o3").exists()


def test_a_file_that_differs_from_its_record_is_refused(tiny_run, tmp_path, capsys):
    damaged = _light_copy(tiny_run, tmp_path / "damaged")
    q = damaged / "iter_1" / "questions.jsonl"
    q.write_text(q.read_text().replace('"index": 0', '"index": 9', 1))
    err = _fails([str(damaged), "--to", str(tmp_path / "out")], capsys)
    assert "questions.jsonl changed since it was recorded" in err
    assert not (tmp_path / "out").exists()


def _rerecord(run_dir: Path, t: int, *names: str) -> None:
    """Rewrite the manifest's records of ``names`` in iter_<t> (as if the run wrote them)."""
    path = run_dir / "manifest.json"
    manifest = json.loads(path.read_text())
    for key, record in manifest["stages"].items():
        for name in names:
            if name in record and key.partition("/")[0] == str(t):
                record.update(file_record(run_dir / f"iter_{t}", [name]))
    path.write_text(json.dumps(manifest))


def test_curriculum_membership_is_the_runs_window_and_checked(tiny_run, tmp_path, capsys):
    """The random tiny model writes no valid question; here iteration 1's records are given
    three scored questions (two in the window), re-recorded as the run would have."""
    copy = _light_copy(tiny_run, tmp_path / "scored")
    it = copy / "iter_1"
    rows = read_jsonl(it / "questions.jsonl")
    for q, acc in zip(rows[:3], (0.5, 1.0, 0.5), strict=True):
        q.update(question=f"What is {q['index']} + 1?", answer=str(q["index"] + 1), valid=True,
                 solver_answers=[str(q["index"] + 1), "0"], majority=str(q["index"] + 1),
                 acc=acc, proposer_agrees=True)
    (it / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    kept = filter_curriculum(rows, 0.3, 0.7, "proposer")
    (it / "curriculum.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    _rerecord(copy, 1, "questions.jsonl", "curriculum.jsonl")
    to = tmp_path / "out"
    assert main(["export", str(copy), "--to", str(to), "--iterations", "1"]) == 0
    from vdlib.export import load_curricula

    ds = load_curricula(to, cache_dir=str(tmp_path / "cache"))["iter_1"]
    assert ds["in_curriculum"] == [True, False, True, False]
    assert ds["question"][:3] == [r["question"] for r in rows[:3]]
    # a curriculum that is not the window's is refused
    (it / "curriculum.jsonl").write_text(json.dumps(kept[0]) + "\n")
    _rerecord(copy, 1, "curriculum.jsonl")
    err = _fails([str(copy), "--to", str(tmp_path / "o2"), "--iterations", "1"], capsys)
    assert "are not curriculum.jsonl's" in err


def test_a_run_whose_manifest_holds_no_fingerprint_gets_it_from_config_yaml(tiny_run, tmp_path):
    """A run made before the manifest held the fingerprint: computed from config.yaml the same
    way, it is the fingerprint the run would have recorded, and the card says where it came
    from."""
    old = _light_copy(tiny_run, tmp_path / "old")
    manifest = json.loads((old / "manifest.json").read_text())
    recorded = manifest.pop("fingerprint")
    del manifest["fingerprinted_config"]
    (old / "manifest.json").write_text(json.dumps(manifest))
    to = tmp_path / "out"
    assert main(["export", str(old), "--to", str(to), "--no-arrow"]) == 0
    v = front_matter((to / "README.md").read_text())["vdlib"]
    assert v["config_fingerprint"] == recorded
    assert v["fingerprint_source"].startswith("computed from config.yaml")
    assert v["vocab_dropout"]["alpha"] == 0.75 and v["models"]["proposer"] == "tiny-random"
