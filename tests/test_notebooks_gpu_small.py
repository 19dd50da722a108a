"""The gpu-small notebook profile (issue 52): which notebooks and params files it runs, cuts
without editing a file (--set, --arms, --seeds, --only NN_name@variant) validated before any
kernel starts, the results JSON each notebook writes in docs/results' format, and the join of
files made on different machines (``vdlib notebooks merge``). All fast: no model loads. The
notebook path itself runs end to end on CPU in tests/test_notebooks_gpu_small_cpu.py."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

import vdlib.app.cli
from vdlib.app.notebooks import PROFILE_NOTEBOOKS, parse_sets, plan_jobs
from vdlib.config.experiment import load_params, to_dict
from vdlib.experiments import experiment_results as er
from vdlib.report.results import load_results, merge_results
from vdlib.report.results_single_policy import load_single_policy

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results"
#: what tools/lent-gpus/gpu_small.py export wrote (collect_results + its settings); the
#: committed files add notes of their merges (completed, solver_eval, shared_runs)
EXPORT_KEYS = {"card", "vllm_version", "K", "M", "iterations", "params", "arms", "seeds",
               "proposer_steps", "solver_steps", "evaluation", "records"}


def _plan(only=None, **kw):
    return plan_jobs("gpu-small", only, ROOT / "notebooks", ROOT / "params",
                     Path("/tmp/unused-outputs"), **kw)


def test_gpu_small_runs_the_135m_experiments_with_their_committed_results_names():
    jobs = _plan()
    assert [j.name for j in jobs] == [
        "01_main_table", "01_main_table@entropy_baselines", "01_main_table@entropy_kl_cov",
        "01_main_table@fail_neg", "02_phase_ablation", "04_single_policy", "05_annealing",
        "05_annealing@adaptive"]
    committed = {p.stem for p in RESULTS.glob("gpu_small_*.json")}
    for j in jobs:
        assert j.record["params"] == f"params/gpu-small/{j.params_file.name}"
        # the grid recipe's experiment: the notebook's runs are those of `vdlib grid`
        assert j.config["experiment"] == load_params(j.params_file).experiment
        # a local judge: the GPU machine needs no key or network for the correctness table
        assert j.config["verification"]["backend"] == "local"
    # every experiment but KL-Cov's packed rerun (merged into gpu_small_entropy.json) has
    # its committed results file under the name the notebook writes
    assert {j.config["experiment"] for j in jobs} - committed == {"gpu_small_entropy_kl_cov"}
    assert set(PROFILE_NOTEBOOKS["gpu-small"]) == {j.notebook.stem for j in jobs}


def test_only_one_variant_and_unknown_ones_fail_with_the_list():
    assert [j.name for j in _plan(["01_main_table@fail_neg"])] == ["01_main_table@fail_neg"]
    with pytest.raises(SystemExit, match="its variants: entropy_baselines, entropy_kl_cov"):
        _plan(["01_main_table@nope"])
    with pytest.raises(SystemExit, match="no params file for 03_curriculum_transfer"):
        _plan(["03_curriculum_transfer"])
    with pytest.raises(SystemExit, match="unknown profile 'gpu-smal'.*gpu-small"):
        plan_jobs("gpu-smal", None, ROOT / "notebooks", ROOT / "params", Path("/tmp/x"))


def test_cuts_without_editing_a_file_go_into_the_config_and_the_job_record():
    [job] = _plan(["01_main_table"], seeds=[0], arms=["baseline", "vd75"],
                  sets=["curriculum.num_questions=64", "iterations=1",
                        "evaluation.benchmarks=[gsm8k]"])
    cfg = job.config
    assert (cfg["curriculum"]["num_questions"], cfg["iterations"]) == (64, 1)
    assert cfg["arms"] == ["baseline", "vd75"] and cfg["seeds"] == [0]
    assert cfg["evaluation"]["benchmarks"] == ["gsm8k"]
    assert cfg["curriculum"]["batch_size"] == 64  # the rest of the file is kept
    assert job.params["arms"] == ["baseline", "vd75"]  # what papermill injects
    assert job.record["set"]["curriculum.num_questions"] == 64
    assert job.record["arms"] == ["baseline", "vd75"] and job.record["seeds"] == [0]


def test_parse_sets_nests_dotted_keys_and_refuses_a_malformed_item():
    assert parse_sets(["a.b.c=1", "a.d=[x, y]", "e=null"]) == {"a": {"b": {"c": 1},
                                                                       "d": ["x", "y"]},
                                                                 "e": None}
    for bad in ("novalue", "=3", "a..b=1"):
        with pytest.raises(SystemExit, match="expected KEY=VALUE"):
            parse_sets([bad])
    with pytest.raises(SystemExit, match="set to a value above"):
        parse_sets(["a=1", "a.b=2"])


@pytest.mark.parametrize("argv, message", [
    (["--set", "curriculum.num_questionz=64"], "unknown key 'curriculum.num_questionz'"),
    (["--set", "iterations=0"], "iterations"),
    (["--arms", "vd99"], "--arms vd99: an arm of no params file"),
])
def test_a_bad_cut_fails_before_any_kernel_starts(argv, message, monkeypatch, tmp_path):
    import papermill

    def no_kernel(*args, **kwargs):
        raise AssertionError("a notebook started")

    monkeypatch.setattr(papermill, "execute_notebook", no_kernel)
    with pytest.raises(SystemExit, match=message):
        vdlib.app.cli.main(["notebooks", "run", "--profile", "gpu-small", "--only",
                            "01_main_table", "--output-dir", str(tmp_path), *argv])
    assert not any(tmp_path.iterdir())


def test_a_file_left_without_arms_is_not_run():
    jobs = _plan(["01_main_table"], arms=["kl_cov"])
    assert [j.name for j in jobs] == ["01_main_table@entropy_baselines",
                                      "01_main_table@entropy_kl_cov"]
    assert all(j.config["arms"] == ["kl_cov"] for j in jobs)


# ----------------------------------------------------------------------------- results JSON


def _coevolution_runs(root: Path, seeds=(0,), arms=("baseline", "vd75"), iterations=2,
                      experiment="exp"):
    """Run folders with the metrics stage's file, as collect_results reads them."""
    runs = {}
    for arm in arms:
        for seed in seeds:
            run = root / experiment / f"{arm}-seed{seed}"
            for t in range(1, iterations + 1):
                (run / f"iter_{t}").mkdir(parents=True)
                (run / f"iter_{t}" / "metrics.json").write_text(json.dumps(
                    {"valid_fraction": 0.5 + seed / 10, "self_bleu": 0.2, "vendi": 3.0 + t,
                     "generated": 64, "valid_questions": 32}))
            runs[(arm, seed)] = run
    return runs


def _summary(accs):
    from vdlib.evaluation import EvalSummary

    return EvalSummary.from_dict({"benchmarks": {"gsm8k": {
        "benchmark": "gsm8k", "n": 1319, "accuracies": accs, "seeds": list(range(len(accs))),
        "ddof": 0, "mean": sum(accs) / len(accs), "se": 0.0}}})


def _report(tmp_path, params):
    cfg = load_params({**params, "output_dir": str(tmp_path)})
    folder = tmp_path / cfg.experiment / "reports" / "01_main_table"
    folder.mkdir(parents=True, exist_ok=True)
    return SimpleNamespace(cfg=cfg, folder=folder, config=to_dict(cfg), notebook="01_main_table")


def test_coevolution_results_have_the_committed_files_keys(tmp_path):
    params = {"profile": "tiny", "experiment": "exp", "arms": ["baseline", "vd75"],
              "seeds": [0], "iterations": 2, "evaluation": {"benchmarks": ["gsm8k"], "runs": 1}}
    report = _report(tmp_path, params)
    runs = _coevolution_runs(tmp_path)
    evals = {k: _summary([0.02]) for k in runs}
    (report.folder / er.JOB_FILE).write_text(json.dumps(
        {"params": "params/x.yaml", "set": {"iterations": 2}, "config": report.config}))
    path = er.write_results(report, runs, evals, _summary([0.01]))
    assert path == tmp_path / "results" / "exp.json"
    data = load_results(path)  # what vdlib results reads
    committed = json.loads((RESULTS / "gpu_small_main.json").read_text())
    assert EXPORT_KEYS <= set(committed) and EXPORT_KEYS <= set(data)
    assert set(committed["evaluation"]) <= set(data["evaluation"])
    assert set(committed["runs"]["baseline-seed0"]) - {"source"} <= set(data["runs"]["vd75-seed0"])
    record_keys = set().union(*(r.keys() for r in committed["records"]))
    assert set().union(*(r.keys() for r in data["records"])) <= record_keys
    assert data["notebook"] == {"params": "params/x.yaml", "set": {"iterations": 2}}
    assert data["params"] == "params/x.yaml" and data["K"] == report.cfg.curriculum.num_questions
    assert [(r["arm"], r["iteration"]) for r in data["records"]] == [
        ("base", 0), ("baseline", 1), ("baseline", 2), ("vd75", 1), ("vd75", 2)]
    assert data["records"][2]["pass1_gsm8k_runs"] == [2.0]
    assert "pass1_gsm8k" not in data["records"][1]  # only the final solver is evaluated
    assert data["runs"]["vd75-seed0"]["evaluated"] is True
    assert list(data)[-1] == "records"


def test_a_job_record_of_another_config_is_not_copied(tmp_path):
    report = _report(tmp_path, {"profile": "tiny", "experiment": "exp"})
    (report.folder / er.JOB_FILE).write_text(json.dumps(
        {"params": "p.yaml", "config": {**report.config, "iterations": 99}}))
    assert er.read_job(report) is None
    (report.folder / er.JOB_FILE).write_text(json.dumps({"params": "p.yaml",
                                                         "config": report.config}))
    assert er.read_job(report) == {"params": "p.yaml"}


def test_single_policy_results_have_the_committed_files_keys(tmp_path):
    report = _report(tmp_path, {"profile": "tiny", "experiment": "sp", "arms": ["baseline"],
                                "seeds": [0], "evaluation": {"benchmarks": ["gsm8k"]}})
    run = tmp_path / "sp" / "baseline-seed0"
    run.mkdir(parents=True)
    (run / "policy_train.json").write_text(json.dumps(
        {"alpha_train": 1.0, "mean_reward": 0.25, "log_history": [
            {"step": 1, "entropy": 1.1, "reward": 0.0}, {"loss": 0.3},
            {"step": 2, "entropy": 0.9, "reward": 0.5}]}))
    path = er.write_results(report, {("baseline", 0): run}, {("baseline", 0): _summary([0.1])},
                            _summary([0.05]), kind="single_policy")
    data = load_single_policy(path)
    committed = json.loads((RESULTS / "gpu_small_single_policy.json").read_text())
    assert set(committed) - {"parts", "base_source"} <= set(data)
    assert set(committed["runs"][0]) - {"source"} == set(data["runs"][0])
    assert data["runs"][0]["steps"] == [{"step": 1, "entropy": 1.1, "reward": 0.0},
                                        {"step": 2, "entropy": 0.9, "reward": 0.5}]
    assert data["runs"][0]["finished"] and data["base_pass1"]["gsm8k"]["n"] == 1319
    with pytest.raises(ValueError, match="kind = 'x'; allowed values: coevolution"):
        er.write_results(report, {}, kind="x")


# ----------------------------------------------------------------------------- joining files


def _split(data: dict, key: str, out: Path) -> list[str]:
    """The committed file cut into one part per seed, as separate machines would write them."""
    items = data[key]
    seeds = sorted({r["seed"] for r in items if r.get("seed") is not None})
    paths = []
    for seed in seeds:
        part = {k: v for k, v in data.items() if k not in (key, "runs", "parts", "base_source")}
        part[key] = [r for r in items if r.get("seed") in (seed, None)]
        if key == "runs":
            part["base_pass1"] = data["base_pass1"]
        path = out / f"seed{seed}.json"
        path.write_text(json.dumps(part))
        paths.append(str(path))
    return paths


def test_merge_joins_per_machine_parts_back_into_the_committed_records(tmp_path, capsys):
    committed = json.loads((RESULTS / "gpu_small_phase.json").read_text())
    parts = _split(committed, "records", tmp_path)
    assert len(parts) == 3
    out = tmp_path / "joined.json"
    assert vdlib.app.cli.main(["notebooks", "merge", *parts, "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    joined = load_results(out)
    key = lambda r: (r["arm"], str(r["seed"]), r["iteration"])  # noqa: E731
    assert sorted(joined["records"], key=key) == sorted(committed["records"], key=key)
    assert joined["seeds"] == [0, 1, 2]
    assert joined["runs"]["gen_only-seed2"]["source"] == Path(parts[2]).as_posix()
    assert joined == {**merge_results([{**load_results(p), "source": Path(p).as_posix()}
                                       for p in parts])}


def test_merge_of_single_policy_parts_takes_each_run_from_its_part(tmp_path):
    committed = json.loads((RESULTS / "gpu_small_single_policy.json").read_text())
    parts = _split(committed, "runs", tmp_path)
    joined = er.merge_files(parts)
    assert [{k: v for k, v in r.items() if k != "source"} for r in joined["runs"]] == \
        [{k: v for k, v in r.items() if k != "source"} for r in committed["runs"]]
    assert joined["parts"] == [Path(p).as_posix() for p in parts]
    assert joined["base_pass1"] == committed["base_pass1"]


def test_merge_refuses_mixed_formats_and_bad_input_in_one_line(tmp_path, capsys):
    args = [str(RESULTS / "gpu_small_phase.json"), str(RESULTS / "gpu_small_single_policy.json")]
    assert vdlib.app.cli.main(["notebooks", "merge", *args, "--out", str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "single-policy" in err
    assert vdlib.app.cli.main(["notebooks", "merge", args[0]]) == 2
    assert "--out" in capsys.readouterr().err
    missing = str(tmp_path / "nope.json")
    assert vdlib.app.cli.main(["notebooks", "merge", missing, "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert not (tmp_path / "o.json").exists() and not (tmp_path / "o").exists()


# ----------------------------------------------------------------------------- one or more GPUs


@pytest.mark.parametrize("gpus, launched", [(["0"], False), (["0", "1"], True)])
def test_gpu_runs_spread_over_several_visible_gpus_and_run_here_on_one(gpus, launched,
                                                                        monkeypatch, tmp_path):
    """run_grid, as the notebooks call it: the GPU runs of a grid go through vdlib grid's local
    launcher when this process sees several GPUs, and run in this process on one."""
    import vdlib.grid.grid_run
    import vdlib.grid.launch
    import vdlib.loop.coevolution
    from vdlib.experiments import grids
    from vdlib.grid.grid_run import GridRun

    cfg = load_params(ROOT / "params/gpu-small/main_table.yaml",
                      {"output_dir": str(tmp_path), "seeds": [0], "arms": ["baseline", "vd75"]})
    calls = []
    monkeypatch.setattr(vdlib.grid.grid_run, "visible_gpus", lambda env=None: list(gpus))

    def launch(c, seeds=None, *, kind=None, **kw):
        calls.append(("launch", kind))
        return [GridRun(a, 0, c, tmp_path / f"{a}-seed0", status="ran") for a in c.arms]

    def run_here(c, on_stage=None):
        calls.append(("here", None))
        return tmp_path / "here"

    monkeypatch.setattr(vdlib.grid.launch, "launch_grid", launch)
    monkeypatch.setattr(vdlib.loop.coevolution, "run", run_here)
    runs = grids.run_grid(cfg)
    assert set(runs) == {("baseline", 0), ("vd75", 0)}
    assert calls == ([("launch", "local")] if launched else [("here", None)] * 2)
