"""The committed exports of the gpu-small main table (docs/results/curricula/gpu_small_main/, made
by docs/results/curricula/export_gpu_small_main.sh): exactly the 9 runs, every file under 5 MB,
each card's YAML front matter parses and names its run; read back with ``datasets``
(``load_curricula``) every field of every row of every iteration equals the archive's
``questions.jsonl.gz`` and ``metrics.json`` (the checks of test_export_committed.py); a fresh
export of the archive run writes the same rows and the same card; the summary
notebook 01 shows matches each run's ``metrics.json``."""

from __future__ import annotations

import re

import pytest
import yaml
from test_export_committed import ALPHA, ROOT, RUNS, check_against_archive

from vdlib.config.experiment import ConfigError, load_params, to_dict
from vdlib.export.export_run import export_run
from vdlib.export.read_back import (
    COMMITTED_CURRICULA,
    committed_curricula,
    curricula_folder,
    curricula_runs,
    curricula_runs_frame,
    curricula_summary,
    example_questions,
    load_curricula,
    read_card,
)
from vdlib.export.run_folder import ExportError
from vdlib.runs.fingerprint import config_fingerprint

FOLDER = ROOT / COMMITTED_CURRICULA
NAMES = sorted(f"{a}-seed{s}" for a in ALPHA for s in (0, 1, 2))
FAST = "vd75-seed0"  # the run exported afresh
MAX_BYTES = 5 * 1000 * 1000


def test_the_folder_holds_exactly_the_nine_runs_in_files_under_5_mb():
    assert committed_curricula() == FOLDER
    assert sorted(RUNS) == NAMES == sorted(curricula_runs(FOLDER))
    assert sorted(p.name for p in FOLDER.iterdir()) == NAMES  # nothing else beside them
    for name in NAMES:
        files = sorted(str(p.relative_to(FOLDER / name)) for p in (FOLDER / name).rglob("*")
                       if p.is_file())
        assert files == ["README.md", *(f"data/iter_{t}.parquet" for t in (1, 2, 3))], name
    sizes = [p.stat().st_size for p in FOLDER.rglob("*") if p.is_file()]
    assert len(sizes) == 36 and max(sizes) < MAX_BYTES


@pytest.mark.parametrize("name", NAMES)
def test_every_card_parses_and_names_its_run(name):
    text = (FOLDER / name / "README.md").read_text(encoding="utf-8")
    match = re.match(r"---\n(.*?)\n---\n", text, re.S)
    assert match, f"{name}: no YAML front matter"
    card = yaml.safe_load(match.group(1))
    assert card == read_card(FOLDER / name)
    meta = card["vdlib"]
    arm, _, seed = name.rpartition("-seed")
    assert (meta["run"], meta["arm"], meta["seed"]) == (name, arm, int(seed))
    assert meta["alpha_per_iteration"] == {
        f"iter_{t}": {"alpha_gen": ALPHA[arm], "alpha_train": ALPHA[arm]} for t in (1, 2, 3)}
    assert [c["path"] for c in card["configs"][0]["data_files"]] == [
        f"data/iter_{t}.parquet" for t in (1, 2, 3)]


@pytest.mark.parametrize("name", NAMES)
def test_every_committed_export_equals_its_archive_run_field_by_field(name, tmp_path):
    """About 1 s a run: the committed parquet is read, not exported."""
    ds = load_curricula(FOLDER / name, cache_dir=str(tmp_path / "cache"))
    check_against_archive(name, ds, read_card(FOLDER / name)["vdlib"])


def test_a_fresh_export_writes_the_committed_rows_and_card(tmp_path):
    """Up to the exporting vdlib's version, the card is what the code writes now: a card change
    means remaking the exports (export_gpu_small_main.sh)."""
    fresh = export_run(ROOT / RUNS[FAST], tmp_path / FAST, arrow=False).folder
    cache = str(tmp_path / "cache")
    ours, theirs = load_curricula(FOLDER / FAST, cache_dir=cache), load_curricula(fresh,
                                                                                  cache_dir=cache)
    assert list(ours) == list(theirs)
    for split in ours:
        assert ours[split].to_list() == theirs[split].to_list()
        assert ours[split].features == theirs[split].features
    version = re.compile(r"^  export_vdlib_version: .*$", re.M)
    assert version.sub("", (FOLDER / FAST / "README.md").read_text(encoding="utf-8")) == \
        version.sub("", (fresh / "README.md").read_text(encoding="utf-8"))


def test_the_summary_matches_each_runs_metrics(tmp_path):
    frame = curricula_runs_frame(FOLDER, cache_dir=str(tmp_path / "cache"))
    assert len(frame) == 9 * 3 * 1024
    summary = curricula_summary(frame)
    assert [(r.arm, r.iteration) for r in summary.itertuples()] == [
        (a, t) for a in ("baseline", "vd85", "vd75") for t in (1, 2, 3)]
    metrics = {name: read_card(FOLDER / name)["vdlib"]["iteration_metrics"] for name in NAMES}
    for r in summary.itertuples():
        runs = [metrics[f"{r.arm}-seed{s}"][f"iter_{r.iteration}"] for s in (0, 1, 2)]
        assert (r.runs, r.questions, r.alpha) == (3, 3 * 1024, ALPHA[r.arm])
        assert r.valid_fraction == pytest.approx(
            sum(m["valid_questions"] for m in runs) / (3 * 1024), abs=1e-6)
        assert r.mean_acc == pytest.approx(sum(m["mean_acc"] for m in runs) / 3, abs=1e-6)
    examples = example_questions(frame, seed=0, n=2)
    assert list(examples["arm"]) == ["baseline", "baseline", "vd85", "vd85", "vd75", "vd75"]
    assert set(examples["iteration"]) == {3} and examples["question"].notna().all()


def test_curricula_dir_picks_the_folder_notebook_01_shows(tmp_path):
    """The config key ``curricula_dir`` (a papermill parameter of notebook 01): ``committed``
    is this folder, ``''`` skips, a folder of exports is itself; a folder that does not exist
    fails in load_params naming the key and the allowed values, one without exports where it
    is read; the key is not fingerprinted (it cannot change what a run writes)."""
    assert curricula_folder("committed") == FOLDER
    assert curricula_folder("committed", root=tmp_path) is None  # vdlib without the repository
    assert curricula_folder("") is None
    assert curricula_folder(FOLDER) == FOLDER
    (tmp_path / "empty").mkdir()
    with pytest.raises(ExportError, match=r"curricula_dir = '.*empty': .* holds no export"):
        curricula_folder(tmp_path / "empty")
    with pytest.raises(ConfigError, match=r"curricula_dir = '.*missing' is not a folder; "
                                          r"allowed values: committed .*, '' .* or a folder"):
        load_params({"profile": "tiny", "curricula_dir": str(tmp_path / "missing")})
    cfgs = [load_params({"profile": "tiny", "curricula_dir": v})
            for v in ("committed", "", str(FOLDER))]
    assert [c.curricula_dir for c in cfgs] == ["committed", "", str(FOLDER)]
    assert len({config_fingerprint(to_dict(c)) for c in cfgs}) == 1
