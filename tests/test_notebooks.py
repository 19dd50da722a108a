"""Notebooks: committed without outputs, parameters match the params files, and they execute."""

from __future__ import annotations

import json
from pathlib import Path

import papermill
import pytest
import yaml

from vdlib.app.cli import notebook_params_file
from vdlib.app.notebooks import is_complete, plan_jobs
from vdlib.config.experiment import load_params, to_dict
from vdlib.config.layout import executed_notebook_path
from vdlib.report.notebook import open_report, summary_matches, summary_path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
#: notebooks that teach rather than reproduce the paper: tiny defaults, no paper-profile file,
#: not in the experiment batch below (each has its own execution test)
TEACHING = {"00_quickstart", "07_method_walkthrough"}


def test_there_are_notebooks():
    assert any(nb.name == "00_quickstart.ipynb" for nb in NOTEBOOKS)


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_without_outputs(nb):
    cells = json.loads(nb.read_text())["cells"]
    assert not any(c.get("outputs") or c.get("execution_count") for c in cells
                   if c["cell_type"] == "code")


#: Keys a profile's params files set that the notebooks' parameters cells do not declare yet
#: (papermill injects undeclared parameters with a warning, and load_params honours them).
#: A key stops being tolerated as soon as a notebook declares it; drop it here once every
#: notebook does, and the gpu files are held to the same exact match as tiny and paper.
PENDING_CELL_KEYS: dict[str, set[str]] = {}


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_params_files_match_the_parameters_cell(nb):
    declared = set(papermill.inspect_notebook(str(nb)))
    assert declared, f"{nb.name} has no cell tagged 'parameters'"
    for profile in ("tiny", "gpu", "paper"):
        path = notebook_params_file(nb, profile, ROOT / "params")
        if profile == "paper" and nb.stem in TEACHING:
            continue  # no paper profile (params/paper/base.yaml is the paper recipe)
        pending = PENDING_CELL_KEYS.get(profile, set()) - declared
        for f in [path, *sorted(path.parent.glob(f"{path.stem}@*.yaml"))]:
            keys = set(yaml.safe_load(f.read_text()))
            assert keys - pending == declared, \
                f"{profile}/{f.name}: {sorted((keys - pending) ^ declared)}"


@pytest.mark.parametrize("nb", [n for n in NOTEBOOKS if n.stem not in TEACHING],
                         ids=lambda p: p.stem)
def test_parameters_cell_defaults_are_the_paper_params(nb):
    """A notebook opened without params is the paper's run: its experiment folder and models are
    those of params/paper/<name>.yaml, and an experiment named for a scale holds that scale's
    model (05 once shared the 4B folder with an 8B model)."""
    import ast
    import re

    defaults = {k: v["default"] for k, v in papermill.inspect_notebook(str(nb)).items()}
    paper = yaml.safe_load(notebook_params_file(nb, "paper", ROOT / "params").read_text())
    for key in ("experiment", "model"):
        assert ast.literal_eval(defaults[key]) == paper[key], (nb.stem, key)
    scale = re.search(r"qwen3_(\d+)b", paper["experiment"])
    if scale:
        assert f"Qwen3-{scale.group(1)}B" in paper["model"]["proposer"], nb.stem


def test_quickstart_executes_under_papermill(tmp_path):
    """Smoke run: the tiny params with the tiny random model, one short iteration of both arms,
    artifacts in tmp."""
    out = tmp_path / "executed.ipynb"
    params = {**yaml.safe_load(notebook_params_file(Path("00_quickstart.ipynb"), "tiny",
                                                    ROOT / "params").read_text()),
              "model": {"proposer": "tiny-random", "dtype": "float32", "device": "cpu"},
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
    path = summary_path(tmp_path / "outputs", "quickstart", "00_quickstart")
    summary = json.loads(path.read_text())
    assert summary["notebook"] == "00_quickstart"
    assert set(summary["arms"]) == {"baseline", "vd75"}
    assert set(summary["runs"]) == {"baseline-seed0", "vd75-seed0"}
    for arm in ("baseline", "vd75"):
        it = root / f"{arm}-seed0" / "iter_1"
        assert (it / "metrics.json").exists() and (it / "questions.jsonl").exists()
    assert summary["arms"]["vd75"]["iterations"][0]["proposer_masked"] is True
    assert summary["arms"]["baseline"]["iterations"][0]["kept_fraction"] == 1.0
    assert summary["arms"]["baseline"]["iterations"][0]["proposer_masked"] is False
    assert (path.parent / "iterations.csv").is_file()
    assert (path.parent / "baseline_vs_vd.png").is_file()  # the at-a-glance figure
    assert not (root / "summary.json").exists()  # the report folder holds the summary
    # the batch runner's skip check: the executed notebook's config is the one plan_jobs makes
    # of the same params file
    assert summary_matches(path, to_dict(load_params(params)))
    executed = json.loads(out.read_text())
    assert any(c.get("outputs") for c in executed["cells"] if c["cell_type"] == "code")


# ----------------------------------------------------------------------------- cells, skips


def _code_cells(nb: Path) -> list[str]:
    """The notebook's code cells after the parameters cell, stripped."""
    cells = json.loads(nb.read_text())["cells"]
    return ["".join(c["source"]).strip() for c in cells if c["cell_type"] == "code"
            and "parameters" not in c.get("metadata", {}).get("tags", [])]


def test_no_code_cell_appears_in_two_notebooks():
    where: dict[str, list[str]] = {}
    for nb in NOTEBOOKS:
        for cell in set(_code_cells(nb)):
            where.setdefault(cell, []).append(nb.stem)
    repeated = {cell[:80]: names for cell, names in where.items() if len(names) > 1}
    assert not repeated, repeated


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_opens_its_report_and_finishes_it_last(nb):
    cells = _code_cells(nb)
    assert f'report = open_report("{nb.stem}", locals()' in cells[0]
    assert "report.finish(" in cells[-1]
    assert not any("report.finish(" in c for c in cells[:-1])
    text = "\n".join(cells)
    for gone in ("atomic_write_json", "logging.basicConfig", "load_params(", "summary.json",
                 "plots.main_table", "plots.write_outputs"):
        assert gone not in text, gone


def test_every_job_reads_the_report_its_notebook_writes(tmp_path):
    """plan_jobs points every notebook, the quickstart included, at its report's summary, and
    a job is complete once a report of the same config is finished and its copy exists."""
    jobs = plan_jobs("tiny", None, ROOT / "notebooks", ROOT / "params", tmp_path)
    assert [j.notebook.stem for j in jobs] == [nb.stem for nb in NOTEBOOKS]
    for job in jobs:
        cfg = load_params(job.params)
        assert job.report == summary_path(cfg.output_dir, cfg.experiment, job.notebook.stem)
        assert job.output == executed_notebook_path(tmp_path, "tiny", job.notebook.stem)
        assert job.config == to_dict(cfg)
    params = {**yaml.safe_load((ROOT / "params/tiny/quickstart.yaml").read_text()),
              "output_dir": str(tmp_path / "outputs")}
    params_dir = tmp_path / "params"
    (params_dir / "tiny").mkdir(parents=True)
    (params_dir / "tiny" / "quickstart.yaml").write_text(yaml.safe_dump(params))
    [job] = plan_jobs("tiny", ["00_quickstart"], ROOT / "notebooks", params_dir, tmp_path)
    assert not is_complete(job)
    assert job.params["output_dir"] == str(tmp_path.resolve())  # the one output root
    open_report("00_quickstart", job.params, log_level=None).finish()
    assert not is_complete(job)  # no executed copy yet
    job.output.parent.mkdir(parents=True)
    job.output.write_text("{}")
    assert is_complete(job)
    [seeded] = plan_jobs("tiny", ["00_quickstart"], ROOT / "notebooks", params_dir, tmp_path,
                         seeds=[1])
    assert seeded.name == "00_quickstart@seed1" and not is_complete(seeded)  # another config


def test_the_output_root_is_the_same_from_any_working_directory(tmp_path, monkeypatch):
    """Relative --output-dir resolves against the caller's directory, and every job's runs,
    report and executed copy go under it, whatever the kernel's own working directory."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    [job] = plan_jobs("tiny", ["00_quickstart"], ROOT / "notebooks", ROOT / "params",
                      Path("outputs"))
    root = elsewhere / "outputs"
    assert job.params["output_dir"] == str(root)
    assert job.output == executed_notebook_path(root, "tiny", "00_quickstart")
    assert job.report == summary_path(root, "quickstart", "00_quickstart")


# ----------------------------------------------------------------------------- every notebook

#: Config keys beyond the notebooks' parameters that shrink every run to seconds: the tiny
#: random model everywhere, no warm-start, a handful of tokens, questions and items.
SMOKE = {"warm_start": {"mode": "none"},
         "scoring": {"num_solver_samples": 2, "max_new_tokens": 4},
         "curriculum": {"num_questions": 3, "batch_size": 3, "max_new_tokens": 10},
         "single_policy": {"dataset": "gsm_symbolic", "train_examples": 4}}
_SMALL_GRPO = {"max_response_length": 8, "max_steps": 1}
#: co-evolution iterations of a notebook's smoke run (default 1; unit tests cover the loop's
#: later iterations): annealing's alpha moves between iterations, so it runs two
SMOKE_ITERATIONS = {"05_annealing": 2}
_TINY_MODELS = {"proposer": "tiny-random", "transfer": "tiny-random", "instruct": "tiny-random"}


def smoke_params(nb: Path, out: Path) -> dict:
    """The notebook's tiny params with the tiny random model and seconds-scale settings."""
    params = yaml.safe_load(notebook_params_file(nb, "tiny", ROOT / "params").read_text())
    params.update(SMOKE, output_dir=str(out))
    params["model"] = {**params.get("model", {}), **_TINY_MODELS}
    if params["model"].get("solver"):
        params["model"]["solver"] = "tiny-random"
    for role in ("proposer", "solver", "transfer"):
        params[role] = {**params.get(role, {}), **_SMALL_GRPO}
    if "iterations" in params:  # two where the notebook's subject is the schedule over them
        params["iterations"] = min(params["iterations"], SMOKE_ITERATIONS.get(nb.stem, 1))
    params["evaluation"] = {**params.get("evaluation", {}), "runs": 2, "limit": 2,
                            "max_context": 256, "max_new_tokens": 4}
    params["verification"] = {"backend": "local", "correctness_model": "tiny-random",
                              "transfer_model": "tiny-random", "max_new_tokens": 4}
    return params


#: what `make test` executes of the experiment batch (the main table, ~100 s on 2 cores); the
#: whole batch 01-06 (~360 s) runs in `make test-slow`, which the tests on 02-06 are marked
MAKE_TEST_BATCH = ["01_main_table"]


def _batch(tmp_path_factory, names: list[str] | None):
    """The experiment notebooks ``names`` (None: 01-06) executed in order with smoke params into
    one output folder (03 and 06 read the runs 01 made, as in a real batch). Returns (outputs,
    copies)."""
    from vdlib.app.notebooks import run_notebooks

    tmp = tmp_path_factory.mktemp("notebooks")
    params_dir = tmp / "params"
    (params_dir / "tiny").mkdir(parents=True)
    names = names or [nb.stem for nb in NOTEBOOKS if nb.stem not in TEACHING]
    for nb in NOTEBOOKS:
        if nb.stem in names:
            f = notebook_params_file(nb, "tiny", params_dir)
            f.write_text(yaml.safe_dump(smoke_params(nb, tmp / "outputs")))
    jobs = run_notebooks("tiny", names, ROOT / "notebooks", params_dir, tmp / "outputs",
                         cwd=ROOT)  # the one output root: runs, reports, executed copies
    failed = {j.name: j.error for j in jobs if j.status != "ran"}
    assert not failed, failed
    return tmp / "outputs", {j.notebook.stem: j.output for j in jobs}


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """The whole experiment batch, 01-06 (the slow tests)."""
    return _batch(tmp_path_factory, None)


@pytest.fixture(scope="module")
def executed_main(tmp_path_factory):
    """The batch `make test` runs: :data:`MAKE_TEST_BATCH`."""
    return _batch(tmp_path_factory, MAKE_TEST_BATCH)


def _outputs_of(request, notebook: str):
    """The executed batch that holds ``notebook``: 01's own in `make test`, else the whole."""
    return request.getfixturevalue("executed_main" if notebook in MAKE_TEST_BATCH
                                   else "executed")


def _slow_unless_main(notebook: str) -> list:
    return [] if notebook in MAKE_TEST_BATCH else [pytest.mark.slow]


def _report(outputs: Path, experiment: str, name: str) -> dict:
    return json.loads((outputs / experiment / "reports" / name / "summary.json").read_text())


EXPECTED = {  # notebook -> (experiment folder of the tiny params, files its report must hold)
    "01_main_table": ("coevolution", ["main_table.md", "main_table.tex", "proposer_table.md",
                                      "diversity_dynamics.png", "diversity_dynamics.pdf",
                                      "vocab_util.md", "question_profile.png",
                                      "correctness.md", "ood_table.md", "benchmarks.csv",
                                      "embedding_diversity.png", "embedding_diversity.pdf",
                                      "embedding_diversity.csv", "settings.md",
                                      "curricula.csv"]),  # curricula_dir: committed
    "02_phase_ablation": ("coevolution", ["phase_ablation.png", "cumulative_vendi.png",
                                          "question_diversity.md", "phase_table.md",
                                          "correctness.md"]),
    "03_curriculum_transfer": ("transfer", ["transfer.md", "wellposed.md",
                                            "nli_diversity.md"]),
    "04_single_policy": ("single_policy", ["entropy_trajectory.png", "vanilla_grpo.md"]),
    "05_annealing": ("coevolution", ["annealing.png", "annealing.pdf",
                                     "annealing_math_avg.md"]),
    "06_cross_scale": ("cross_scale", ["cross_scale.md", "instruct.md"]),
}


#: (experiment, notebook, table) -> (columns it must have, row labels it must have, one of the
#: paper's printed cells: (row label, column, value)); ours from the smoke runs, the paper's from
#: vdlib/data/paper_values.yaml. correctness and question_diversity hold only the paper's rows
#: under the smoke params (no judged verdicts, fewer than 2 iterations per window).
CONTENT = {
    ("coevolution", "01_main_table", "main_table"): (
        ["label", "gsm_symbolic", "gsm_symbolic_se", "avg"],
        ["ours: Base (no training)", "ours: Baseline", "ours: VD85", "ours: VD75",
         "ours: KL-Cov", "ours: Clip-Cov", "paper Qwen3-4B: VD75"],
        ("paper Qwen3-4B: VD75", "avg", 36.5)),
    ("coevolution", "01_main_table", "proposer_table"): (
        ["label", "gsm_symbolic", "avg"], ["ours: Baseline", "ours: VD75", "paper Qwen3-8B: VD75"],
        ("paper Qwen3-8B: VD75", "avg", 38.4)),
    ("coevolution", "01_main_table", "ood_table"): (
        ["Base", "Baseline", "VD", "Δ", "paper Base", "paper Baseline", "paper VD", "paper Δ"],
        ["BBH", "MedQA-USMLE", "SuperGPQA", "WinoGrande"], ("BBH", "paper VD", 55.0)),
    ("coevolution", "01_main_table", "vocab_util"): (
        ["unique_tokens", "num_questions", "delta_unique_pct"],
        ["ours: Baseline", "ours: VD75", "paper Qwen3-4B: VD75"],
        ("paper Qwen3-4B: VD75", "unique_tokens", 3697)),
    ("coevolution", "01_main_table", "correctness"): (
        ["It. 1", "It. 5"], ["paper Qwen3-4B: VD75", "paper Qwen3-8B: Baseline"],
        ("paper Qwen3-4B: VD75", "It. 1", 61.2)),
    ("coevolution", "02_phase_ablation", "phase_table"): (
        ["gsm_symbolic", "avg"], ["ours: Train-only", "ours: Gen-only", "paper Qwen3-4B: Gen-only"],
        ("paper Qwen3-4B: Gen-only", "avg", 37.8)),
    ("coevolution", "02_phase_ablation", "question_diversity"): (
        ["It. 1", "1-5", "Growth"], ["paper Qwen3-4B: VD75"],
        ("paper Qwen3-4B: VD75", "1-5", 70.2)),
    ("transfer", "03_curriculum_transfer", "transfer"): (
        ["gsm_symbolic", "avg"], ["ours: Baseline", "ours: VD75", "paper Qwen3-4B-Base: VD75"],
        ("paper Qwen3-4B-Base: VD75", "avg", 41.3)),
    ("transfer", "03_curriculum_transfer", "wellposed"): (
        ["filter_pass", "pass_rate", "well_posed", "correct", "delta_vendi_wp", "delta_nli_wp"],
        ["ours tiny-random: Baseline", "ours tiny-random: VD75", "paper Qwen3-4B: VD75",
         "paper Qwen3-8B: VD75"], ("paper Qwen3-8B: VD75", "filter_pass", 1408)),
    ("transfer", "03_curriculum_transfer", "nli_diversity"): (
        ["semantic", "semantic_se", "logical", "logical_se", "semantic_swap",
         "logical_unidirectional"],
        ["ours tiny-random: Baseline", "ours tiny-random: VD75", "paper Qwen3-4B: VD75",
         "paper Qwen3-8B: VD75"], ("paper Qwen3-8B: VD75", "logical", 0.376)),
    ("single_policy", "04_single_policy", "vanilla_grpo"): (
        ["gsm_symbolic", "avg"], ["ours: Baseline", "ours: VD95", "paper Qwen3-4B-Base: VD95"],
        None),
    ("coevolution", "05_annealing", "annealing_math_avg"): (
        ["It. 0", "It. 1", "It. 2", "It. 5"],
        ["ours: Baseline", "ours: VD75", "ours: VD75 (anneal)", "paper Qwen3-8B: Baseline"],
        ("paper Qwen3-8B: Baseline", "It. 5", 54.2)),
    ("cross_scale", "06_cross_scale", "cross_scale"): (
        ["gsm_symbolic", "avg"], ["ours: cross-scale: Baseline",
                                  "ours: cross-scale: VD85 (gen-only)", "ours: symmetric: VD85",
                                  "paper proposer Qwen3-8B: VD85 (gen-only)"],
        ("paper proposer Qwen3-8B: VD85 (gen-only)", "avg", 37.4)),
    ("cross_scale", "06_cross_scale", "instruct"): (
        ["gsm_symbolic", "avg"], ["ours: Baseline", "ours: VD75",
                                  "paper Qwen2.5-1.5B-Instruct: VD75"], None),
}


@pytest.mark.parametrize("key", [pytest.param(k, marks=_slow_unless_main(k[1]),
                                              id=f"{k[1]}-{k[2]}") for k in sorted(CONTENT)])
def test_report_tables_hold_ours_beside_the_papers(request, key):
    import pandas as pd

    outputs, _ = _outputs_of(request, key[1])
    experiment, name, table = key
    columns, labels, cell = CONTENT[key]
    frame = pd.read_csv(outputs / experiment / "reports" / name / f"{table}.csv")
    assert set(columns) <= set(frame.columns), sorted(set(columns) - set(frame.columns))
    assert set(labels) <= set(frame["label"]), sorted(set(labels) - set(frame["label"]))
    assert (outputs / experiment / "reports" / name / f"{table}.md").stat().st_size > 0
    if cell is not None:
        label, column, value = cell
        assert frame.set_index("label").loc[label, column] == pytest.approx(value)


@pytest.mark.parametrize("whole", [False, pytest.param(True, marks=pytest.mark.slow)],
                         ids=["01", "01-06"])
def test_every_report_shows_its_settings_and_01_the_benchmark_sizes(request, whole):
    import pandas as pd

    outputs, _ = request.getfixturevalue("executed" if whole else "executed_main")
    for experiment, name in {(k[0], k[1]) for k in CONTENT
                             if whole or k[1] in MAKE_TEST_BATCH}:
        settings = pd.read_csv(outputs / experiment / "reports" / name / "settings.csv")
        assert {"tab:training_hypers", "tab:klcov_hypers", "protocol switch"} <= set(
            settings["table"]), name
        switch = settings.set_index("key").loc["vocab_dropout.width"]
        assert (switch["paper"], switch["ours"]) == ("vocab_size", "vocab_size")
    sizes = pd.read_csv(outputs / "coevolution" / "reports" / "01_main_table" / "benchmarks.csv")
    assert list(sizes.columns) == ["benchmark", "items (ours)", "items (paper)", "evaluated"]
    sizes = sizes.set_index("benchmark")
    assert sizes.loc["gsm_symbolic", "items (ours)"] == 2  # limit 2
    assert bool(sizes.loc["gsm_symbolic", "evaluated"])
    # tab:benchmarks' seven rows, Minerva included: the paper's count beside ours, which the
    # offline smoke run cannot read (no Hub, no data_dir) and 01 counts, never evaluates
    assert {"gsm8k", "math500", "amc23", "olympiadbench", "aime24", "aime25",
            "minerva"} <= set(sizes.index)
    assert sizes.loc["minerva", "items (paper)"] == 272
    assert not sizes.loc["minerva", "evaluated"] and pd.isna(sizes.loc["minerva", "items (ours)"])


def test_01_draws_the_combined_embedding_figure(executed_main):
    """fig:embedding_diversity as the paper draws it: one figure with every model scale's
    baseline and VD75 (ours: this run's scale and those of reference_experiments; the paper's
    4B and 8B together); the diversity figure overlays the paper's curves of the run's scale."""
    import pandas as pd

    outputs, copies = executed_main
    folder = outputs / "coevolution" / "reports" / "01_main_table"
    data = pd.read_csv(folder / "embedding_diversity.csv")
    assert list(data.columns) == ["source", "scale", "arm", "iteration", "mean", "se", "n"]
    paper = data[data["source"] == "paper"]
    assert set(zip(paper["scale"], paper["arm"], strict=True)) == {
        (m, a) for m in ("Qwen3-4B", "Qwen3-8B") for a in ("baseline", "vd75")}
    assert set(data.loc[data["source"] == "ours", "scale"]) <= {"tiny-random"}
    source = "\n".join(_code_cells(ROOT / "notebooks" / "01_main_table.ipynb"))
    assert "paper_model=paper_model" in source and "paper_scale(cfg.model.proposer)" in source
    assert "embedding_diversity_figure(by_scale)" in source
    eight = yaml.safe_load((ROOT / "params" / "paper" / "main_table@8b.yaml").read_text())
    four = yaml.safe_load((ROOT / "params" / "paper" / "main_table.yaml").read_text())
    assert eight["reference_experiments"] == [four["experiment"]]


def test_every_experiment_notebook_has_an_expectation():
    assert {nb.stem for nb in NOTEBOOKS} - TEACHING == set(EXPECTED)


@pytest.mark.parametrize("name", [pytest.param(n, marks=_slow_unless_main(n))
                                  for n in sorted(EXPECTED)])
def test_notebook_executes_and_writes_its_report(request, name):
    outputs, copies = _outputs_of(request, name)
    experiment, files = EXPECTED[name]
    report = _report(outputs, experiment, name)
    folder = outputs / experiment / "reports" / name
    for f in files:
        assert (folder / f).is_file() and (folder / f).stat().st_size > 0, f
    assert report["notebook"] == name and report["config"]["profile"] == "tiny"
    cells = json.loads(copies[name].read_text())["cells"]
    assert any(c.get("outputs") for c in cells if c["cell_type"] == "code")
    text = json.dumps(cells)
    assert "sk-" not in text and "OPENAI_API_KEY=" not in text


def test_second_batch_skips_complete_notebooks(executed_main, tmp_path):
    from vdlib.app.notebooks import run_notebooks

    outputs, copies = executed_main
    params_dir = outputs.parent / "params"
    jobs = run_notebooks("tiny", MAKE_TEST_BATCH, ROOT / "notebooks", params_dir, outputs,
                         cwd=ROOT)
    assert [j.status for j in jobs] == ["skipped"]


# ----------------------------------------------------------------------------- the walkthrough
