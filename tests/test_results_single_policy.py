"""`vdlib results` on a single-policy export (vdlib.report.results_single_policy): the entropy
figure and tables, the tests against the baseline, pass@1 beside the paper's, bad files refused."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from scipy import stats

from vdlib.app.cli import main
from vdlib.report.results import ResultsFileError
from vdlib.report.results_single_policy import (
    entropy_effects,
    entropy_table,
    load_single_policy,
    reward_table,
    single_policy_pass1_effects,
    single_policy_pass1_table,
)


def _export(steps: int = 20) -> dict:
    """gpu_single_policy.py export's shape: the baseline's entropy decays, vd95's less (by
    0.1 + 0.01 x seed: the paired differences spread, so the paired t is defined)."""
    def run(arm, seed, floor):
        k = 0.01 if arm == "baseline" else 0.02
        return {"arm": arm, "seed": seed, "finished": True, "alpha_train": None,
                "steps": [{"step": t, "entropy": floor + 0.5 / t + k * seed, "reward": 0.1}
                          for t in range(1, steps + 1)],
                "pass1": {"gsm8k": {"n": 100, "accuracies": [0.01 * (seed + 1)] * 3,
                                    "mean": 0.01 * (seed + 1), "se": 0.0}}}
    return {"experiment": "sp", "card": "NVIDIA H200", "steps_planned": steps,
            "base_pass1": {"gsm8k": {"n": 100, "accuracies": [0.01, 0.02, 0.03]}},
            "runs": [run(a, s, f) for a, f in (("baseline", 0.1), ("vd95", 0.2))
                     for s in range(3)]}


def test_entropy_table_and_effects_follow_the_per_seed_values():
    data = _export()
    table = entropy_table(data, window=10).set_index("arm")
    assert table.loc["Baseline", "seeds"] == 3 and table.loc["Baseline", "last step"] == 20
    last = {a: [f + sum(0.5 / t for t in range(11, 21)) / 10 + k * s for s in range(3)]
            for a, f, k in (("baseline", 0.1, 0.01), ("vd95", 0.2, 0.02))}
    ratio = (sum(last["vd95"]) / 3) / (sum(last["baseline"]) / 3)
    assert table.loc["VD95", "last vs baseline"] == f"{ratio:.2f}x"
    # the paper's baseline: 0.586 at step 0; its VD95 ends about twice as high
    assert table.loc["Baseline", "paper: first step"] == "0.586"
    assert float(table.loc["VD95", "paper: last vs baseline"].rstrip("x")) > 1.5
    eff = entropy_effects(data, window=10).set_index("entropy")
    row = eff.loc["last 10 steps"]
    assert row["diff"] == pytest.approx(0.11, abs=1e-4) and row["ratio"] == round(ratio, 3)
    welch = stats.ttest_ind(last["vd95"], last["baseline"], equal_var=False)
    assert row["welch_p"] == pytest.approx(welch.pvalue, abs=1e-4)
    assert row["n_pairs"] == 3 and row["paired_df"] == 2 and bool(row["paper_direction"])
    paired = stats.ttest_rel(last["vd95"], last["baseline"])
    assert row["paired_p"] == pytest.approx(paired.pvalue, abs=1e-4)


def test_the_reward_table_says_how_much_grpo_had_to_act_on():
    """Binary reward: the batch-mean reward is the share of correct rollouts; steps with none
    give GRPO no advantage, and the table counts the steps that had one."""
    data = _export()
    for run in data["runs"]:  # seed s: steps 1..20, correct only at step <= 4 + s
        for st in run["steps"]:
            st["reward"] = 0.25 if st["step"] <= 4 + run["seed"] else 0.0
    data["runs"][0]["steps"][0]["reward"] = None  # an unlogged reward is left out
    table = reward_table(data, window=10).set_index("arm")
    assert list(table.index) == ["Baseline", "VD95"] and table.loc["VD95", "seeds"] == 3
    shares = [100 * 0.25 * (4 + s) / 20 for s in range(3)]  # 5, 6.25, 7.5 %
    m = sum(shares) / 3
    se = (sum((x - m) ** 2 for x in shares) / 2) ** 0.5 / 3 ** 0.5
    assert table.loc["VD95", "correct rollouts, % (all steps)"] == f"{m:.2f} ± {se:.2f}"
    assert table.loc["VD95", "correct rollouts, % (last 10 steps)"].startswith("0.00")
    assert table.loc["VD95", "steps with a correct rollout"] == "5.0 of 20"
    # baseline seed 0 logs 19 rewards: 3, 5 and 6 steps with a correct rollout
    assert table.loc["Baseline", "steps with a correct rollout"] == "4.7 of 20"
    assert reward_table({"runs": [{**data["runs"][0], "steps": []}]}).empty


def test_pass1_puts_the_papers_cells_beside_ours():
    table = single_policy_pass1_table(_export()).set_index(["arm", "benchmark"])
    # seeds 1, 2, 3 % (each its first run), the file's rule (none: first_run, ddof 0)
    assert table.loc[("VD95", "gsm8k"), "ours"] == "2.00 ± 0.47"
    assert table.loc[("VD95", "gsm8k"), "n"] == 3
    assert table.loc[("Base (no training)", "gsm8k"), "n"] == 3  # its evaluation runs
    assert table.loc[("Baseline", "gsm8k"), "paper Qwen3-4B-Base"] == "86.3"


def test_pass1_effects_test_each_arm_against_the_baseline_by_seed():
    data = _export()
    for run in data["runs"]:  # vd95: seed s at 2 + s + 0.5 s^2 %, the baseline at 1 + s %
        if run["arm"] == "vd95":
            s = run["seed"]
            run["pass1"]["gsm8k"]["accuracies"] = [0.01 * (2 + s + 0.5 * s ** 2)] * 3
    row = single_policy_pass1_effects(data).set_index("benchmark").loc["gsm8k"]
    base, vd = [1.0, 2.0, 3.0], [2.0, 3.5, 6.0]
    assert row["arm"] == "VD95" and row["diff"] == pytest.approx(11.5 / 3 - 2, abs=1e-4)
    welch = stats.ttest_ind(vd, base, equal_var=False)
    paired = stats.ttest_rel(vd, base)
    assert row["welch_p"] == pytest.approx(welch.pvalue, abs=1e-4)
    assert row["paired_p"] == pytest.approx(paired.pvalue, abs=1e-4) and row["paired_df"] == 2
    assert row["paper_diff"] == pytest.approx(87.9 - 86.3)  # tab:vanilla_grpo, Qwen3-4B-Base
    # a benchmark the baseline was not evaluated on has no row; no baseline, no table
    data["runs"][3]["pass1"]["math500"] = {"n": 500, "accuracies": [0.01] * 3}
    assert list(single_policy_pass1_effects(data)["benchmark"]) == ["gsm8k"]
    assert single_policy_pass1_effects({"runs": [r for r in data["runs"]
                                                 if r["arm"] == "vd95"]}).empty


def test_vdlib_results_draws_the_single_policy_report(tmp_path, capsys):
    path = tmp_path / "gpu_small_single_policy.json"
    path.write_text(json.dumps(_export()))
    assert main(["results", str(path), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    for name in ("entropy_trajectory.png", "entropy.md", "entropy_effects.md", "reward.md",
                 "pass1.md", "pass1_effects.md", "report.json"):
        assert (tmp_path / "out" / f"gpu_small_single_policy_{name}").is_file(), name
    assert "last 10 steps" in out and "paper_diff" in out  # both effects tables are printed
    effects = pd.read_csv(tmp_path / "out" / "gpu_small_single_policy_entropy_effects.csv")
    assert set(effects["arm"]) == {"VD95"}


@pytest.mark.parametrize("damage, message", [
    (lambda d: d["runs"][1].update(seed="one"), r"runs\[1\]: 'seed'"),
    (lambda d: d["runs"][0]["steps"][2].update(entropy="high"), r"steps\[2\]: 'entropy'"),
    (lambda d: d["runs"][0]["steps"][0].pop("step"), r"steps\[0\]: no integer 'step'"),
    (lambda d: d["runs"][2]["pass1"]["gsm8k"].update(accuracies=[]), "'accuracies'"),
    (lambda d: d.update(base_pass1=[1]), "base_pass1 is not an object"),
    (lambda d: d["runs"][4].update(seed=0), r"runs\[3\] and runs\[4\] are both vd95 seed 0"),
])
def test_a_damaged_single_policy_file_is_one_line_and_writes_nothing(tmp_path, capsys, damage,
                                                                      message):
    data = _export()
    damage(data)
    path = tmp_path / "sp.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ResultsFileError, match=message):
        load_single_policy(path)
    assert main(["results", str(path), "--out", str(tmp_path / "out")]) == 2
    assert "vdlib results:" in capsys.readouterr().err and not (tmp_path / "out").exists()
