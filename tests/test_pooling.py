"""One pooling rule for every notebook (issue 27, item 2) and notebook 03's single evaluation
(item 3): the committed pooling cells of notebooks 01, 02, 03 and 06 run on the same fixture
evaluations and must give the same cell.

Each cell is executed as committed, with the evaluation functions replaced by stubs that hand
back fixed per-run accuracies (the first ``evaluation.runs`` of them, as a real k-run
evaluation's run 0 is the same samples as a one-run evaluation) and the table functions by
recorders of the rows they are given; the pooling itself (``ex.pool_seeds``,
``eval_grid.pool``, ``eval_grid.seed_eval_config``, ``eval_grid.single_eval_config``) is the
real code."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import pytest

from vdlib.config.experiment import load_params
from vdlib.evaluation import BenchmarkResult, EvalSummary
from vdlib.experiments import eval_grid
from vdlib.experiments import evaluate as real_evaluate
from vdlib.experiments import grids as real_grids
from vdlib.report import experiments as real_ex

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
SEEDS = (0, 1, 2)
ARMS = ("baseline", "vd85")
#: per (arm, seed): three evaluation runs per benchmark (fractions)
RUNS = {(arm, seed): {"math500": [0.30 + 0.02 * seed + 0.05 * i + 0.1 * a for i in range(3)],
                      "gsm8k": [0.60 - 0.03 * seed + 0.01 * i * i + 0.05 * a for i in range(3)]}
        for a, arm in enumerate(ARMS) for seed in SEEDS}
BASE = {"math500": [0.20, 0.24, 0.21], "gsm8k": [0.50, 0.52, 0.47]}


def _summary(accs: dict[str, list[float]], cfg) -> EvalSummary:
    k = cfg.evaluation.runs
    return EvalSummary({b: BenchmarkResult(b, 500, list(a[:k]), list(range(k)))
                        for b, a in accs.items()}, {"runs": k})


def _cell(notebook: str, marker: str) -> str:
    cells = json.loads((NOTEBOOKS / f"{notebook}.ipynb").read_text(encoding="utf-8"))["cells"]
    found = [("".join(c["source"])) for c in cells
             if c["cell_type"] == "code" and marker in "".join(c["source"])]
    assert len(found) == 1, (notebook, marker, len(found))
    return found[0]


class _Ex(SimpleNamespace):
    """The notebooks' ``ex``, ``evaluate`` and ``grids`` (vdlib.report.experiments,
    vdlib.experiments.evaluate, vdlib.experiments.grids) with the evaluation functions stubbed;
    records each evaluation's number of runs."""

    def __init__(self, runs):
        super().__init__(seen=[])
        self.runs = runs

    def __getattr__(self, name):
        for module in (real_ex, real_evaluate, real_grids):
            if hasattr(module, name):
                return getattr(module, name)
        raise AttributeError(name)

    def evaluate_runs(self, runs, cfg, role="solver", iteration=None):
        self.seen.append(("runs", cfg.evaluation.runs))
        return {k: _summary(RUNS[k], cfg) for k in runs}

    def evaluate_base(self, cfg, model=None):
        self.seen.append(("base", cfg.evaluation.runs))
        return _summary(BASE, cfg)

    def evaluate_checkpoint(self, model_dir, cfg, out_dir, seed=0):
        self.seen.append(("checkpoint", cfg.evaluation.runs))
        arm, seed = Path(model_dir).parent.name.rsplit("-seed", 1)
        return _summary(RUNS[(arm, int(seed))], cfg)

    def reference_runs(self, cfg, arms):
        return {k: p for k, p in self.runs.items() if k[0] in arms}

    def run_grid(self, cfg, *a, **kw):
        return self.runs

    def correctness_frame(self, runs, cfg):
        return None


def _execute(notebook: str, marker: str, cfg, **names) -> tuple[dict, list]:
    """Run the notebook's cell holding ``marker``; the rows every table function got, and the
    evaluations' run counts."""
    runs = {k: Path("/nowhere") / f"{k[0]}-seed{k[1]}" for k in RUNS}
    ex = _Ex(runs)
    tables = mock.MagicMock()
    ns = {"ex": ex, "evaluate": ex, "grids": ex, "eval_grid": eval_grid, "tables": tables,
          "report": mock.MagicMock(), "cfg": cfg, "runs": runs, "Path": Path,
          "benchmarks_table": mock.MagicMock(), **names}
    exec(compile(_cell(notebook, marker), notebook, "exec"), ns)  # noqa: S102
    rows = {}
    for call in tables.mock_calls:
        if call.args and isinstance(call.args[0], dict):
            rows.update({k: v for k, v in call.args[0].items() if isinstance(v, EvalSummary)})
    return rows, ex.seen


def _cells_by_notebook(cfg) -> dict[str, dict[str, EvalSummary]]:
    """``{notebook: {arm or "base": pooled summary}}`` from each notebook's committed cells."""
    out = {}
    rows, _ = _execute("01_main_table", "tables.main_table(", cfg)
    out["01"] = rows
    rows, _ = _execute("02_phase_ablation", "tables.main_table(", cfg)
    out["02"] = rows
    transfer = {k: {"model": str(Path("/nowhere") / f"{k[0]}-seed{k[1]}" / "model")}
                for k in RUNS}
    rows, _ = _execute("03_curriculum_transfer", "tables.transfer_table(", cfg,
                       transfer=transfer)
    out["03"] = {k: v for k, v in rows.items() if k != "base"}  # another model's base row
    rows, _ = _execute("06_cross_scale", "tables.cross_scale_table(", cfg)
    out["06 symmetric"] = {k.split(": ")[1]: v for k, v in rows.items()
                           if k.startswith("symmetric: ")}
    out["06 cross-scale"] = {k.split(": ")[1]: v for k, v in rows.items()
                             if k.startswith("cross-scale: ")}
    rows, _ = _execute("06_cross_scale", "tables.instruct_table(", cfg)
    out["06 instruct"] = {k: v for k, v in rows.items() if k != "base"}
    return out


def _config(tmp_path, per_seed: str, se_ddof: int, single: int):
    return load_params({"profile": "tiny", "output_dir": str(tmp_path), "seeds": list(SEEDS),
                        "reference_experiments": ["main"],
                        "evaluation": {"runs": 3, "per_seed": per_seed, "se_ddof": se_ddof,
                                       "single_eval_runs": single}})


@pytest.mark.parametrize(("per_seed", "se_ddof", "single"),
                         [("first_run", 0, 1), ("mean", 1, 3), ("first_run", 1, 1)])
def test_notebooks_01_02_03_06_pool_the_same_runs_into_the_same_cell(tmp_path, per_seed,
                                                                      se_ddof, single):
    """The same evaluations give the same cell (values, mean, SE) in every notebook, under the
    config's per_seed and se_ddof. (Notebook 03 evaluates single_eval_runs times, so under
    per_seed: mean its cells match the others' when single_eval_runs equals evaluation.runs.)"""
    cfg = _config(tmp_path, per_seed, se_ddof, single)
    by_nb = _cells_by_notebook(cfg)
    reference = by_nb.pop("01")
    assert set(reference) == {"base", *ARMS}
    expected = real_ex.pool_seeds({"base": _summary(BASE, cfg),
                                   **{k: _summary(RUNS[k], eval_grid.seed_eval_config(cfg))
                                      for k in RUNS}}, cfg)
    for notebook, rows in by_nb.items():
        assert set(ARMS) <= set(rows), notebook
        for arm in rows:
            for b in ("math500", "gsm8k"):
                ours, ref = rows[arm].results[b], reference[arm].results[b]
                assert ours.accuracies == ref.accuracies, (notebook, arm, b)
                assert (ours.mean, ours.se, ours.ddof) == (ref.mean, ref.se, se_ddof), \
                    (notebook, arm, b)
    for arm in ("base", *ARMS):
        for b in ("math500", "gsm8k"):
            assert reference[arm].results[b].accuracies == expected[arm].results[b].accuracies
    first = [RUNS[("vd85", s)]["math500"][0] for s in SEEDS]
    means = [sum(RUNS[("vd85", s)]["math500"]) / 3 for s in SEEDS]
    assert reference["vd85"].results["math500"].accuracies == \
        pytest.approx(first if per_seed == "first_run" else means)
    assert by_nb["02"]["base"].results["gsm8k"].se == reference["base"].results["gsm8k"].se


@pytest.mark.parametrize("single", [1, 2])
def test_notebook_03_evaluates_with_the_single_evaluation_config(tmp_path, single):
    """tab:curriculum_transfer is printed as single evaluations: notebook 03 evaluates the
    transferred models and the starting checkpoint evaluation.single_eval_runs times each,
    whatever evaluation.runs is (3 here), and its cells hold one value per seed."""
    cfg = _config(tmp_path, "first_run", 0, single)
    transfer = {k: {"model": str(Path("/nowhere") / f"{k[0]}-seed{k[1]}" / "model")}
                for k in RUNS}
    rows, seen = _execute("03_curriculum_transfer", "tables.transfer_table(", cfg,
                          transfer=transfer)
    assert seen and set(seen) == {("base", single), ("checkpoint", single)}
    assert len(rows["base"].results["math500"].accuracies) == single
    assert rows["vd85"].results["math500"].accuracies == \
        [RUNS[("vd85", s)]["math500"][0] for s in SEEDS]


def test_pool_seeds_is_eval_grid_pool(tmp_path):
    cfg = _config(tmp_path, "mean", 1, 1)
    evals = {k: _summary(v, cfg) for k, v in RUNS.items()}
    a, b = real_ex.pool_seeds(evals, cfg), eval_grid.pool(evals, cfg)
    assert a.keys() == b.keys()
    assert all(a[k].to_dict() == b[k].to_dict() for k in a)
