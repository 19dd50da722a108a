"""The gpu-small notebook path end to end on the CPU (issue 52): ``vdlib notebooks run --profile
gpu-small --only 01_main_table 04_single_policy`` with the cuts the GPU check uses (one seed,
--arms, --set) and the model and engine overridden to the tiny random model on transformers, so
everything the GPU command runs (the profile's params files and judge, the overrides, papermill,
the grid, the evaluations, the results JSON, the report) runs here except the GPU itself.
Several minutes on 2 shared cores (4.6 min for 01 alone, 2026-12-02): marked slow."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import vdlib.app.cli
from vdlib.report.results import load_results
from vdlib.report.results_single_policy import load_single_policy

ROOT = Path(__file__).resolve().parent.parent

#: the tiny CPU setup over the gpu-small files (its cuts are the docs' GPU check's, smaller)
TINY_CPU = [
    "profile=tiny", "iterations=1", "warm_start.mode=none",
    "model={proposer: tiny-random, solver: null, dtype: float32, device: cpu}",
    "engine={backend: hf, rollouts: hf}",
    "proposer={max_steps: 1, global_batch_size: 2, rollout_batch_size: 2, num_generations: 2,"
    " max_response_length: 8}",
    "solver={max_steps: 1, global_batch_size: 2, rollout_batch_size: 2, num_generations: 2,"
    " max_response_length: 8}",
    "scoring={num_solver_samples: 2, max_new_tokens: 4}",
    "curriculum={num_questions: 3, batch_size: 3, max_new_tokens: 10}",
    "evaluation={benchmarks: [gsm_symbolic], data_dir: null, runs: 1, limit: 2,"
    " max_context: 256, max_new_tokens: 4, batch_size: 8}",
    "verification={correctness_model: tiny-random, max_new_tokens: 4}",
    "single_policy={train_examples: 4, checkpoint_every: 0}",
]


@pytest.mark.slow
def test_gpu_small_notebooks_run_on_cpu_and_write_their_results(tmp_path, capsys):
    out = tmp_path / "outputs"
    argv = ["notebooks", "run", "--profile", "gpu-small", "--only", "01_main_table",
            "04_single_policy", "--seeds", "0", "--arms", "baseline", "vd75",
            "--output-dir", str(out)]
    for item in TINY_CPU:
        argv += ["--set", item]
    assert vdlib.app.cli.main(argv) == 0, capsys.readouterr().out
    summary = capsys.readouterr().out
    assert "2 ran, 0 skipped, 0 failed" in summary

    main = load_results(out / "results" / "gpu_small_main.json")  # what vdlib results reads
    assert main["experiment"] == "gpu_small_main" and main["arms"] == ["baseline", "vd75"]
    assert (main["K"], main["iterations"], main["seeds"]) == (3, 1, [0])
    assert {(r["arm"], r["iteration"]) for r in main["records"]} == {
        ("base", 0), ("baseline", 1), ("vd75", 1)}
    assert all("pass1_gsm_symbolic" in r for r in main["records"])  # base + final solvers
    job = main["notebook"]
    assert job["params"] == "params/gpu-small/main_table.yaml" and job["variant"] is None
    assert job["set"]["curriculum.num_questions"] == 3 and job["arms"] == ["baseline", "vd75"]
    assert job["set"]["verification.backend"] == "local"  # the profile's judge
    report = json.loads((out / "gpu_small_main" / "reports" / "01_main_table" /
                         "summary.json").read_text())
    assert report["results"] == str(out / "results" / "gpu_small_main.json")

    # the executed copy shows the cut it ran with (papermill's injected parameters)
    executed = json.loads((out / "notebooks" / "gpu-small" / "01_main_table.ipynb").read_text())
    injected = next(c for c in executed["cells"]
                    if "injected-parameters" in c["metadata"].get("tags", []))
    assert '"num_questions": 3' in "".join(injected["source"])

    single = load_single_policy(out / "results" / "gpu_small_single_policy.json")
    [run] = single["runs"]  # --arms baseline vd75 keeps the baseline of [baseline, vd95]
    assert (run["arm"], run["seed"], run["finished"]) == ("baseline", 0, True)
    assert run["steps"] and run["pass1"]["gsm_symbolic"]["n"] == 2
    assert single["notebook"]["params"] == "params/gpu-small/single_policy.yaml"
