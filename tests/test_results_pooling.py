"""One pooling rule (issue 51, items 2 and 4): `vdlib results` pools a results file's pass@1
over seeds as the notebooks do (vdlib.report.experiments.pool_seeds, i.e.
vdlib.evaluation.pool_runs under evaluation.per_seed and se_ddof), the rule is written into
every results file vdlib writes, read back from it, and printed under each table; the committed
files, which record none, are pooled by the config their runs used."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from vdlib.app.cli import main as cli_main
from vdlib.config import load_params
from vdlib.evaluation import BenchmarkResult, EvalSummary
from vdlib.report import experiments as ex
from vdlib.report import tables
from vdlib.report.results import (
    ResultsFileError,
    load_results,
    pass1_table,
    pooling_rule,
)
from vdlib.report.table_format import format_cell

ROOT = Path(__file__).resolve().parent.parent
MAIN = ROOT / "docs" / "results" / "gpu_small_main.json"
PARAMS = ROOT / "params" / "gpu-small" / "main_table.yaml"


def _summaries(data: dict) -> dict:
    """The notebook's input: one EvalSummary per (arm, seed) of the final solvers (and the
    starting checkpoint's, plain key ``base``), each benchmark's evaluation runs as fractions."""
    out: dict = {}
    for r in data["records"]:
        res = {k[len("pass1_"):-len("_runs")]: BenchmarkResult(
            k[len("pass1_"):-len("_runs")], 0, [v / 100 for v in runs], list(range(len(runs))))
            for k, runs in r.items() if k.startswith("pass1_") and k.endswith("_runs")}
        if res:
            out["base" if r["arm"] == "base" else (r["arm"], r["seed"])] = EvalSummary(res)
    return out


def _notebook_cells(data: dict, cfg) -> dict[tuple[str, str], str]:
    """Notebook 01's cells: eval_grid.pool (= experiments.pool_seeds) under the config, then
    tables.main_table's frame (pass@1 in %), each cell formatted with one decimal."""
    pooled = ex.pool_seeds(_summaries(data), cfg)
    frame = tables.main_table(pooled, "frame")
    frame = frame[frame["source"] == "ours"]
    return {(row["label"], b): format_cell(row[b], row[f"{b}_se"], "markdown", 1)
            for _, row in frame.iterrows() for b in ("gsm8k", "math500")}


def _results_cells(out: Path, stem: str) -> dict[tuple[str, str], str]:
    table = pd.read_csv(out / f"{stem}_pass1.csv", keep_default_na=False)
    return {(f"ours: {row['arm']}", b): row[b] for _, row in table.iterrows()
            for b in ("gsm8k", "math500")}


def _vdlib_results(path: Path, out: Path, capsys) -> str:
    assert cli_main(["results", str(path), "--out", str(out)]) == 0
    return capsys.readouterr().out


def test_the_notebooks_and_vdlib_results_pool_a_committed_file_into_the_same_cells(
        tmp_path, capsys):
    """docs/results/gpu_small_main.json records its rule (the merge writes the runs' evaluation
    config's, which the params they used leave at the defaults: first_run, ddof 0), `vdlib
    results` pools by it, and its pass@1 cells are notebook 01's under that config, cell for cell.
    Under the old rule (each
    seed the mean of its runs) the baseline's MATH500 read 0.9 ± 0.0 and VD75 − baseline on
    MATH500 was −0.11; the notebooks' rule gives 0.5 ± 0.1 and +0.20."""
    data = load_results(MAIN)
    assert data["evaluation"]["per_seed"] == "first_run" and data["evaluation"]["se_ddof"] == 0
    cfg = load_params(str(PARAMS))
    rule = pooling_rule(data)
    assert rule.source == "the file"
    assert (rule.per_seed, rule.se_ddof) == (cfg.evaluation.per_seed, cfg.evaluation.se_ddof)
    printed = _vdlib_results(MAIN, tmp_path, capsys)
    ours = _results_cells(tmp_path, MAIN.stem)
    nb = _notebook_cells(data, cfg)
    assert set(ours) == set(nb) and len(ours) == 8  # base, 3 arms x 2 benchmarks
    assert ours == nb
    assert ours[("ours: Baseline", "math500")] == "0.5 ± 0.1"
    assert ours[("ours: VD75", "math500")] == "0.7 ± 0.1"
    # the rule is printed under each table (the CLI prints the effects table) and recorded
    assert rule.note() in printed
    pooled = ex.pool_seeds(_summaries(data), cfg)  # the notebook prints it under its table too
    assert tables.main_table(pooled, "markdown").rstrip().endswith(
        rule.note().split("; from ")[0] + ".")
    for md in tmp_path.glob("*.md"):
        assert md.read_text(encoding="utf-8").rstrip().endswith(rule.note()), md.name
    report = json.loads((tmp_path / f"{MAIN.stem}_report.json").read_text(encoding="utf-8"))
    assert report["pooling"] == rule.as_dict()


def test_a_rule_written_in_the_file_is_the_one_used():
    """The same runs with evaluation.per_seed: mean and se_ddof: 1 in the file: the pass@1 table
    `vdlib results` writes reads them, and the notebook under that config gives the same (other)
    cells."""
    data = load_results(MAIN)
    data["evaluation"] = {**data["evaluation"], "per_seed": "mean", "se_ddof": 1}
    cfg = load_params({**_params_dict(), "evaluation": {**_params_dict()["evaluation"],
                                                        "per_seed": "mean", "se_ddof": 1}})
    ours = {(f"ours: {row['arm']}", b): row[b] for _, row in pass1_table(data).iterrows()
            for b in ("gsm8k", "math500")}
    assert ours == _notebook_cells(data, cfg)
    assert ours[("ours: Baseline", "math500")] == "0.9 ± 0.1"  # (0.6+1+1.4)/3, ... sample SD
    assert pooling_rule(data).source == "the file"


def test_every_committed_results_file_records_its_rule():
    """Every results JSON under docs/results that holds pass@1 names the rule its cells pool
    by (issue 51: "the rule is in every results JSON")."""
    files = [p for p in sorted(MAIN.parent.glob("gpu_small_*.json"))]
    assert len(files) >= 6
    for path in files:
        ev = json.loads(path.read_text(encoding="utf-8"))["evaluation"]
        assert ev.get("per_seed") in ("first_run", "mean") and ev.get("se_ddof") in (0, 1), path


def _params_dict() -> dict:
    import yaml

    return yaml.safe_load(PARAMS.read_text(encoding="utf-8"))


def test_every_committed_file_is_pooled_by_the_config_its_runs_used():
    """The committed files record no rule; each names its params, and where that file is in the
    repository its evaluation.per_seed and se_ddof are the defaults pooling_rule falls back to."""
    for path in sorted((ROOT / "docs" / "results").glob("gpu_small_*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        rule = pooling_rule(data)
        params = ROOT / str(data.get("params", ""))
        if params.is_file():
            ev = load_params(str(params)).evaluation
            assert (rule.per_seed, rule.se_ddof) == (ev.per_seed, ev.se_ddof), path.name


def test_a_bad_rule_in_a_file_is_one_line_naming_the_key(tmp_path):
    for bad, key in (({"per_seed": "median"}, "evaluation.per_seed"),
                     ({"se_ddof": 2}, "evaluation.se_ddof"), ({"se_ddof": True}, "se_ddof")):
        with pytest.raises(ResultsFileError, match=key) as e:
            load_results(tmp_path / "x.json", {"evaluation": bad, "records": []})
        assert "\n" not in str(e.value) and "allowed" in str(e.value)


def test_pass1_table_follows_the_rule_it_is_given():
    """One seed's cell is its runs (the notebooks' rule with one seed); several seeds add one
    value each, the first run or the mean."""
    recs = [{"arm": "vd75", "seed": s, "iteration": 2, "pass1_gsm8k": 0.0,
             "pass1_gsm8k_runs": runs} for s, runs in ((0, [10.0, 20.0]), (1, [30.0, 50.0]))]
    data = {"records": recs}
    assert pass1_table(data).iloc[0]["gsm8k"] == "20.0 ± 7.1"  # 10, 30: ddof 0, 10 / sqrt 2
    data["evaluation"] = {"per_seed": "mean", "se_ddof": 1}
    assert pass1_table(data).iloc[0]["gsm8k"] == "27.5 ± 12.5"  # 15, 40: sample SD 17.7
    one = {"records": recs[:1]}
    assert pass1_table(one).iloc[0]["gsm8k"] == "15.0 ± 3.5"  # its two runs, 5 / sqrt 2


def test_compare_arms_pools_pass1_by_seed_as_the_notebooks_do(tmp_path):
    """compare_arms' pass@1 row: each seed's value is what it adds to a notebook cell
    (evaluation.per_seed; a config is read for it), no longer always the mean of its runs."""
    runs, evals = {}, {}
    firsts = {("baseline", 0): 0.1, ("baseline", 1): 0.2, ("vd75", 0): 0.4, ("vd75", 1): 0.6}
    for (arm, seed), first in firsts.items():
        run = tmp_path / f"{arm}-seed{seed}"
        (run / "iter_1").mkdir(parents=True)
        (run / "iter_1" / "metrics.json").write_text(json.dumps({"valid_questions": 4}))
        (run / "config.yaml").write_text(f"run_id: {arm}-seed{seed}\nseed: {seed}\n")
        runs[(arm, seed)] = run
        evals[(arm, seed)] = EvalSummary({"a": BenchmarkResult("a", 10, [first, 0.9, 0.9],
                                                               [0, 1, 2])})
    row = ex.compare_arms(runs, evals).set_index("quantity").loc["solver pass@1 (stand-in)"]
    assert (row["baseline"], row["vd75"]) == pytest.approx((0.15, 0.5))  # first runs
    mean = ex.compare_arms(runs, evals, per_seed="mean").set_index("quantity")
    assert mean.loc["solver pass@1 (stand-in)", "vd75"] == pytest.approx((2.2 + 2.4) / 3 / 2)
    cfg = load_params({**_params_dict(), "evaluation": {**_params_dict()["evaluation"],
                                                        "per_seed": "mean"}})
    by_cfg = ex.compare_arms(runs, evals, per_seed=cfg).set_index("quantity")
    assert by_cfg.loc["solver pass@1 (stand-in)", "vd75"] == pytest.approx(
        mean.loc["solver pass@1 (stand-in)", "vd75"])


def test_a_merge_keeps_the_parts_rule_and_refuses_two():
    from vdlib.report.results import merge_results

    part = {"seeds": [0], "evaluation": {"runs": 3, "per_seed": "mean", "se_ddof": 1},
            "records": [{"arm": "x", "seed": 0, "iteration": 1}]}
    other = {**part, "seeds": [1], "records": [{"arm": "x", "seed": 1, "iteration": 1}]}
    assert pooling_rule(merge_results([part, other]))[:2] == ("mean", 1)
    with pytest.raises(ResultsFileError, match="different rules"):
        merge_results([part, {**other, "evaluation": {"per_seed": "first_run", "se_ddof": 0}}])


def test_the_single_policy_report_pools_by_the_files_rule():
    from vdlib.report.results_single_policy import (
        single_policy_pass1_effects,
        single_policy_pass1_table,
    )

    def run(arm, seed, accs):
        return {"arm": arm, "seed": seed, "steps": [{"step": 1, "entropy": 1.0}],
                "pass1": {"gsm8k": {"accuracies": accs}}}
    data = {"runs": [run("baseline", 0, [0.01, 0.03]), run("baseline", 1, [0.02, 0.04]),
                     run("vd95", 0, [0.02, 0.02]), run("vd95", 1, [0.03, 0.03])]}
    table = single_policy_pass1_table(data).set_index("arm")
    assert table.loc["Baseline", "ours"] == "1.50 ± 0.35"  # first runs 1, 2 %: ddof 0
    assert single_policy_pass1_effects(data).iloc[0]["diff"] == pytest.approx(1.0)
    data["evaluation"] = {"per_seed": "mean", "se_ddof": 1}
    table = single_policy_pass1_table(data).set_index("arm")
    assert table.loc["Baseline", "ours"] == "2.50 ± 0.50"  # means 2, 3 %: sample SD
    assert single_policy_pass1_effects(data).iloc[0]["diff"] == pytest.approx(0.0)
