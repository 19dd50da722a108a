"""vdlib export on the committed gpu-small main-table runs (9 runs: baseline, VD85, VD75 x seeds
0-2, 3 iterations of 1,024 questions each), read in place from the evidence archives
``docs/results/archives/gpu_small_main_*.zip``: the dataset read back with ``datasets`` equals
every field of the archive's ``questions.jsonl.gz``, and the card holds the run's metrics.
The committed exports of these runs (docs/results/curricula/): test_curricula_committed.py."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import yaml

from vdlib.config.experiment import load_params
from vdlib.export.export_run import export_run
from vdlib.export.read_back import load_curricula, read_card
from vdlib.method.curriculum import filter_curriculum
from vdlib.method.vocab_dropout import mask_seed
from vdlib.utils.archive import resolve

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results" / "gpu_small_main.json"
PARAMS = ROOT / "params" / "gpu-small" / "main_table.yaml"
ALPHA = {"baseline": 1.0, "vd85": 0.85, "vd75": 0.75}


def main_table_runs() -> dict[str, str]:
    """Each merged run of the main table -> its folder inside the archive: beside the export
    the results file names as its source, in ``runs/`` where the session kept one."""
    runs = json.loads(RESULTS.read_text())["runs"]
    out = {}
    for name, run in runs.items():
        folder = run["source"].rsplit("/", 1)[0]
        inner = f"{folder}/runs/{name}"
        out[name] = inner if resolve(str(ROOT / inner)).is_dir() else f"{folder}/{name}"
    return out


RUNS = main_table_runs()


def test_the_main_table_has_its_nine_runs_in_the_archive():
    assert sorted(RUNS) == sorted(f"{a}-seed{s}" for a in ALPHA for s in (0, 1, 2))
    assert all(resolve(str(ROOT / p)).is_dir() for p in RUNS.values())


def check_against_archive(name: str, ds, meta: dict) -> None:
    """``ds`` (the DatasetDict read back) and ``meta`` (its card's ``vdlib`` block), an export of
    the main-table run ``name``, hold every field of the archive's ``questions.jsonl.gz`` and
    each iteration's ``metrics.json``, for every iteration (tests/test_curricula_committed.py
    checks the committed exports with it too)."""
    arm, _, seed = name.rpartition("-seed")
    cfg = load_params(yaml.safe_load(PARAMS.read_text()))
    size = cfg.curriculum.batch_size
    folder = resolve(str(ROOT / RUNS[name]))
    assert list(ds) == ["iter_1", "iter_2", "iter_3"]
    assert (meta["run"], meta["arm"], meta["seed"]) == (name, arm, int(seed))
    for t in (1, 2, 3):
        it = folder / f"iter_{t}"
        with (it / "questions.jsonl.gz").open("rb") as raw, gzip.open(raw, "rt") as fh:
            records = [json.loads(line) for line in fh]
        metrics = json.loads((it / "metrics.json").read_text())
        rows = ds[f"iter_{t}"].to_list()
        assert len(rows) == len(records) == metrics["generated"] == cfg.curriculum.num_questions
        for row, q in zip(rows, records, strict=True):
            assert row == {
                "iteration": t, "arm": arm, "run_seed": int(seed), "index": q["index"],
                "batch": q["index"] // size,  # derived from the sampling seeds: as generated
                "question": q["question"], "answer": q["answer"], "valid": q["valid"],
                "text": q["text"], "finish_reason": q["finish_reason"],
                "num_tokens": q["num_tokens"], "sample_seed": q["seed"],
                "mask_seed": q["mask_seed"], "alpha": ALPHA[arm],
                "solver_answers": q["solver_answers"], "majority": q["majority"],
                "acc": q["acc"], "proposer_agrees": q["proposer_agrees"],
                "in_curriculum": None}  # an extract records no scoring window
            if q["mask_seed"] is not None:
                assert q["mask_seed"] == mask_seed(int(seed), t, "gen", row["batch"])
        assert (sum(r["valid"] for r in rows), ALPHA[arm]) == (metrics["valid_questions"],
                                                               metrics["alpha_gen"])
        # the window of the params file keeps as many as the run's curriculum held
        s = cfg.scoring
        assert len(filter_curriculum(records, s.tau_min, s.tau_max, s.solver_target)) == \
            metrics["curriculum_size"]
        assert meta["iteration_metrics"][f"iter_{t}"] == metrics


@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_committed_run_exports_field_by_field(name, tmp_path):
    done = export_run(ROOT / RUNS[name], tmp_path / name, arrow=False)
    ds = load_curricula(done.folder, cache_dir=str(tmp_path / "cache"))
    check_against_archive(name, ds, read_card(done.folder)["vdlib"])
