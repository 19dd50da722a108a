"""Notebooks: committed without outputs, parameters match the params files, and they execute."""

from __future__ import annotations

import json
from pathlib import Path

import papermill
import pytest
import yaml

from vdlib.cli import notebook_params_file

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def test_there_are_notebooks():
    assert any(nb.name == "00_quickstart.ipynb" for nb in NOTEBOOKS)


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_without_outputs(nb):
    cells = json.loads(nb.read_text())["cells"]
    assert not any(c.get("outputs") or c.get("execution_count") for c in cells
                   if c["cell_type"] == "code")


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_params_files_match_the_parameters_cell(nb):
    declared = set(papermill.inspect_notebook(str(nb)))
    assert declared, f"{nb.name} has no cell tagged 'parameters'"
    for profile in ("tiny", "paper"):
        path = notebook_params_file(nb, profile, ROOT / "params")
        if profile == "paper" and not path.exists():
            continue  # paper params arrive with the experiment notebooks
        keys = set(yaml.safe_load(path.read_text()))
        assert keys == declared, f"{path.name}: {sorted(keys ^ declared)}"


def test_quickstart_executes_under_papermill(tmp_path):
    """Smoke run: the tiny random model, one short iteration of both arms, artifacts in tmp."""
    out = tmp_path / "executed.ipynb"
    params = {"model": {"proposer": "tiny-random", "dtype": "float32", "device": "cpu"},
              "iterations": 1, "output_dir": str(tmp_path / "outputs"),
              # config keys beyond the notebook's parameters shrink the run further
              "warm_start": {"mode": "none"},
              "proposer": {"max_response_length": 8}, "solver": {"max_response_length": 8},
              "scoring": {"num_solver_samples": 2, "max_new_tokens": 4},
              "curriculum": {"num_questions": 2, "batch_size": 2, "max_new_tokens": 8}}
    papermill.execute_notebook(str(ROOT / "notebooks/00_quickstart.ipynb"), str(out),
                               parameters=params, cwd=str(ROOT), kernel_name="python3",
                               progress_bar=False)
    root = tmp_path / "outputs" / "quickstart"
    summary = json.loads((root / "summary.json").read_text())
    assert set(summary["arms"]) == {"baseline", "vd75"}
    for arm in ("baseline", "vd75"):
        it = root / f"{arm}-seed0" / "iter_1"
        assert (it / "metrics.json").exists() and (it / "questions.jsonl").exists()
    assert summary["arms"]["vd75"]["iterations"][0]["proposer_masked"] is True
    assert summary["arms"]["baseline"]["iterations"][0]["kept_fraction"] == 1.0
    executed = json.loads(out.read_text())
    assert any(c.get("outputs") for c in executed["cells"] if c["cell_type"] == "code")
