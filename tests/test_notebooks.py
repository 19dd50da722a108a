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
                                      "embedding_diversity.csv", "settings.md"]),
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

WALKTHROUGH = ROOT / "notebooks" / "07_method_walkthrough.ipynb"


@pytest.fixture(scope="module")
def walked(tmp_path_factory):
    """notebooks/07_method_walkthrough.ipynb run by the batch runner with its own tiny params
    (the packaged SmolLM2 on CPU, nothing downloaded). Returns (summary, report folder,
    executed copy)."""
    from vdlib.app.notebooks import run_notebooks

    out = tmp_path_factory.mktemp("walkthrough") / "outputs"
    [job] = run_notebooks("tiny", [WALKTHROUGH.stem], ROOT / "notebooks", ROOT / "params", out,
                          cwd=ROOT)
    assert job.status == "ran", job.error
    folder = job.report.parent
    return json.loads(job.report.read_text()), folder, job.output


def _markdown(nb: Path) -> list[str]:
    cells = json.loads(nb.read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]


def test_walkthrough_follows_algorithm_1_and_cites_the_paper():
    """Sections 0-9: the loop at a glance, seven in the order of Algorithm 1, the three mask
    regimes and the schedules, each heading citing a section, equation or appendix of the
    paper; the code cells only call vdlib (no function, class or lambda defined in the
    notebook)."""
    import re

    headings = [line for text in _markdown(WALKTHROUGH) for line in text.splitlines()
                if line.startswith("## ")]
    assert [h.split("·")[0].strip("# ").strip() for h in headings] == [str(i) for i in
                                                                        range(0, 10)]
    for h in headings:
        assert re.search(r"Sec\. \d|Eq\. \d|App\. [A-F]", h), h
    order = ["loop", "mask", "Sampling", "Self-consistency", "repetition penalty", "GRPO",
             "curriculum", "diversity", "fresh mask per batch", "Schedules"]
    assert all(word.lower() in h.lower() for word, h in zip(order, headings, strict=True))
    code = "\n".join(_code_cells(WALKTHROUGH))
    for defined in ("def ", "class ", "lambda", "torch.softmax", "import numpy"):
        assert defined not in code, defined
    assert "from vdlib" in code


def test_teaching_notebooks_give_the_default_parse_failure_reward():
    """Where the quickstart and the walkthrough say what an unparseable rollout earns, they
    give the config's default (Algorithm 1's 0) under its key, never R-Zero's -1 as if it were
    the default (issue 55, item 6)."""
    import re

    from vdlib.config.experiment import load_params

    default = load_params({"profile": "tiny"}).scoring.parse_failure_reward
    for nb in (ROOT / "notebooks" / "00_quickstart.ipynb", WALKTHROUGH):
        text = "\n".join(_markdown(nb))
        assert f"parse_failure_reward: {default}" in text, nb.name
        assert not re.search(r"-1 for an unparseable", text), nb.name


def test_walkthrough_proposer_reward_is_min_acc_inside_the_window(walked):
    import numpy as np
    import pandas as pd

    summary, folder, _ = walked
    tau_min, tau_max = summary["config"]["scoring"]["tau_min"], summary["config"]["scoring"][
        "tau_max"]
    curve = pd.read_csv(folder / "proposer_reward.csv")  # the plotted numbers
    inside = (curve["acc"] >= tau_min - 1e-9) & (curve["acc"] <= tau_max + 1e-9)
    assert inside.any() and (~inside).any()
    acc = curve.loc[inside, "acc"].to_numpy()
    assert curve.loc[inside, "reward"].to_numpy() == pytest.approx(np.minimum(acc, 1 - acc))
    assert (curve.loc[~inside, "reward"] == 0).all()
    assert curve.loc[curve["reachable"], "acc"].round(6).tolist() == [k / 10 for k in range(11)]
    assert {k: v["acc"] for k, v in summary["votes"].items()} == {
        "too easy": 0.9, "at the edge": 0.5, "split": 0.4, "too hard": 0.1}
    assert summary["votes"]["at the edge"]["majority"] == "34"  # 34, 34.0 and 68/2 are one


def test_walkthrough_samples_under_the_mask_hold_no_dropped_id(walked):
    import pandas as pd

    from vdlib.engines.models import checkpoint_path, load_tokenizer
    from vdlib.method.vocab_dropout import VocabDropout

    summary, folder, _ = walked
    mask = summary["mask"]
    tok = load_tokenizer("smollm2-135m")
    vd = VocabDropout.for_checkpoint(str(checkpoint_path("smollm2-135m")), tok,
                                     alpha=summary["config"]["vocab_dropout"]["alpha"])
    allowed = vd.sample(mask["seed"])
    assert int(allowed.sum()) == mask["allowed"]
    assert 0.7 < mask["allowed"] / mask["vocab_width"] < 0.8  # the mask drops about 1 - alpha
    assert summary["samples"] and all(s["token_ids"] for s in summary["samples"])
    for s in summary["samples"]:
        assert s["mask_seed"] == mask["seed"]
        assert vd.dropped_ids(s["token_ids"], s["mask_seed"]) == []
    assert (pd.read_csv(folder / "masked_samples.csv")["dropped ids sampled"] == 0).all()
    # the update scores the sampled tokens over the full vocabulary: never above the sampler's
    lp = summary["logprobs"]
    full, masked = lp["log p (full vocabulary)"], lp["log p (under the mask)"]
    assert all(f <= m + 1e-5 for f, m in zip(full, masked, strict=True))
    assert any(f < m - 1e-4 for f, m in zip(full, masked, strict=True))
    assert 0 < mask["dropped_mass"] < 1
    fresh = pd.read_csv(folder / "fresh_masks.csv")
    assert fresh["mask seed"].nunique() == 4
    assert fresh["overlap with the first"].iloc[1:].to_numpy() == pytest.approx([0.6] * 3,
                                                                                 abs=0.02)


def test_walkthrough_bleu_clusters_and_penalties(walked):
    import pandas as pd

    from vdlib.method.rewards import bleu_cluster_penalty

    summary, folder, _ = walked
    bleu = summary["bleu"]
    assert bleu["labels"] == [0, 0, 0, 1, 1, 2]  # the two near-duplicate families
    assert bleu["penalties"] == pytest.approx([3 / 6] * 3 + [2 / 6] * 2 + [1 / 6])
    assert bleu["penalties"] == bleu_cluster_penalty(bleu["questions"])
    pairs = pd.read_csv(folder / "bleu_distance.csv")
    assert (pairs.loc[pairs["i"] == pairs["j"], "distance"] == 0).all()
    assert (pairs.loc[pairs["same_cluster"] & (pairs["i"] != pairs["j"]), "distance"]
            < summary["config"]["scoring"]["bleu_threshold"]).all()


def test_walkthrough_grpo_advantages_and_cov_selection(walked):
    import pandas as pd

    summary, folder, _ = walked
    g = summary["grpo"]
    adv = g["advantages"]
    assert sum(adv[:4]) == pytest.approx(0, abs=1e-6) and adv[4:] == [0.0] * 4  # a flat group
    assert adv[0] > adv[1] > 0 > adv[2] == adv[3]  # the order of the rewards
    tokens = pd.read_csv(folder / "covariance.csv")
    assert g["kl_cov_selected"] == tokens["kl_cov"].sum() == 1
    assert tokens.loc[tokens["kl_cov"], "covariance"].max() == tokens["covariance"].max()
    picked = tokens[tokens["clip_cov"]]
    assert len(picked) == g["clip_cov_selected"] == 1
    assert ((picked["covariance"] > 1) & (picked["covariance"] < 5) & ~picked["clipped"]).all()
    assert (tokens["k3_kl"] >= 0).all() and tokens["clipped"].mean() == pytest.approx(
        g["clip_fraction"])


def test_walkthrough_filter_and_targets(walked):
    import pandas as pd

    _, folder, _ = walked
    f = pd.read_csv(folder / "curriculum_filter.csv",
                    dtype={"target (paper)": str, "target (R-Zero)": str}).set_index("question")
    assert f["kept"].to_dict() == {"too easy": False, "at the edge": True, "split": True,
                                   "too hard": False, "unparsed": False}
    assert f.loc["split", "target (paper)"] == "8"  # the proposer's stated answer
    assert f.loc["split", "target (R-Zero)"] == "7"  # the solvers' majority


def test_walkthrough_phase_switch_losses_and_schedules(walked):
    import pandas as pd

    summary, folder, _ = walked
    switch = pd.read_csv(folder / "phase_switch.csv").set_index("vocab_dropout.phases")
    alpha = summary["config"]["vocab_dropout"]["alpha"]
    assert switch["proposer GRPO rollouts (train)"].to_dict() == {
        "both": alpha, "train": alpha, "gen": 1.0, "none": 1.0}
    assert switch["curriculum generation (gen)"].to_dict() == {
        "both": alpha, "train": 1.0, "gen": alpha, "none": 1.0}
    assert (switch["solver GRPO"] == 1.0).all()  # the solver is never masked
    losses = pd.read_csv(folder / "grpo_losses.csv").set_index("variant")
    assert (losses["beta x k3 to pi_ref"] > 0).all()  # every variant carries the KL term
    assert losses.loc["KL-Cov", "total"] == pytest.approx(summary["grpo"]["kl_cov_loss"],
                                                          abs=1e-4)
    assert summary["schedules"]["linear"] == [0.75, 0.8125, 0.875, 0.9375, 1.0]
    assert summary["schedules"]["fixed"] == [alpha] * 5
    assert summary["schedules"]["adaptive"][0] == alpha


def test_walkthrough_three_mask_regimes(walked):
    """Section 8: the three regimes' metrics exist, no sample holds an id its mask drops, the
    masks' measured coverage is the formulas', and on the notebook's seed the fresh masks'
    distinct-token count is at least the fixed mask's."""
    from vdlib.engines.models import checkpoint_path, load_tokenizer
    from vdlib.method.mask_arithmetic import allowed_at_least_once, allowed_every_batch
    from vdlib.method.vocab_dropout import VocabDropout

    summary, folder, _ = walked
    r = summary["regimes"]
    assert list(r) == ["no mask", "fixed mask", "fresh mask per batch"]
    for m in r.values():
        assert m["samples"] == 6 and m["batches"] == 3 and m["distinct tokens"] > 0
        assert 0 <= m["self_bleu"] <= 1 and 1 <= m["vendi"] <= 6 + 1e-6
        assert m["dropped ids sampled"] == 0
    assert [m["masks"] for m in r.values()] == [0, 1, 3]
    alpha = summary["config"]["vocab_dropout"]["alpha"]
    fixed, fresh = r["fixed mask"], r["fresh mask per batch"]
    assert fixed["allowed at least once"] == fixed["allowed every batch"] == pytest.approx(
        alpha, abs=0.01)
    assert fresh["allowed at least once"] == pytest.approx(allowed_at_least_once(alpha, 3),
                                                           abs=0.01)
    assert fresh["allowed every batch"] == pytest.approx(allowed_every_batch(alpha, 3),
                                                         abs=0.01)
    assert fresh["distinct tokens"] >= fixed["distinct tokens"]
    tok = load_tokenizer("smollm2-135m")
    vd = VocabDropout.for_checkpoint(str(checkpoint_path("smollm2-135m")), tok, alpha=alpha)
    samples = summary["regime_samples"]
    assert len({s["mask_seed"] for s in samples["fresh mask per batch"]}) == 3
    # batch 0: the same mask and random numbers in both masked regimes, so the same completions
    assert [s["token_ids"] for s in samples["fixed mask"][:2]] == [
        s["token_ids"] for s in samples["fresh mask per batch"][:2]]
    for regime in ("fixed mask", "fresh mask per batch"):
        for s in samples[regime]:
            assert vd.dropped_ids(s["token_ids"], s["mask_seed"]) == []
    assert sum(len(vd.dropped_ids(s["token_ids"], samples["fixed mask"][0]["mask_seed"]))
               for s in samples["no mask"]) > 0  # unmasked samples do use dropped ids
    template = summary["template"]
    assert template["L"] > 5 and template["alpha ** L"] == pytest.approx(alpha ** template["L"])
    assert template["measured"] == pytest.approx(template["alpha ** L"], abs=0.05)
    for figure in ("mask_regimes", "alpha_arithmetic"):
        assert (folder / f"{figure}.png").stat().st_size > 10_000, figure


def test_walkthrough_templated_set_is_less_diverse(walked):
    summary, folder, copy = walked
    d = summary["diversity"]
    assert d["templated"]["self_bleu"] > d["varied"]["self_bleu"]
    assert d["templated"]["vendi"] < d["varied"]["vendi"]
    assert 1 <= d["templated"]["vendi"] < d["varied"]["vendi"] <= 8
    for figure in ("mask_effect", "proposer_reward", "bleu_distance", "covariance",
                   "cosine_kernels"):
        assert (folder / f"{figure}.png").stat().st_size > 10_000, figure
    cells = json.loads(copy.read_text())["cells"]
    assert not any(o.get("output_type") == "error" for c in cells for o in c.get("outputs", []))
