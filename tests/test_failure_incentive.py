"""Issue 27, item 5: the proposer reward's format-failure incentive and the arms that remove it.

The paper's Algorithm 1 gives a rollout that fails to parse 0 and no penalty; a valid question
outside the difficulty window gets 0 - |cluster| / batch, below zero. ``baseline_fail_neg`` and
``vd75_fail_neg`` set R-Zero's -1 instead; everything else is their paper arm's."""

from __future__ import annotations

from pathlib import Path

import pytest

from vdlib.config.experiment import ConfigError, load_params, to_dict
from vdlib.loop.arms import ARMS, arm_names, arm_params
from vdlib.method.bleu_penalty import bleu_cluster_penalty
from vdlib.method.rewards import total_proposer_reward
from vdlib.report.settings_tables import settings_table
from vdlib.utils.registry import UnknownNameError

# one GRPO group: an in-window question, two distinct out-of-window ones, one parse failure
QUESTIONS = ["What is 17 times 23 plus 5?", "Name the capital of France please.",
             "How many sides does a regular hexagon have?", None]
ACCS = [0.5, 1.0, 0.0, None]


def _rewards(failure_value: float) -> list[float]:
    penalties = bleu_cluster_penalty(QUESTIONS, 0.5, include_failed=True)
    return total_proposer_reward(ACCS, penalties, 0.3, 0.7, "paper", failure_value, 1.0)


def test_the_paper_reward_pays_a_failure_above_a_valid_easy_question():
    in_window, easy, hard, failed = _rewards(0.0)
    assert failed == 0.0  # Algorithm 1: 0, no penalty
    assert easy == pytest.approx(-0.25) and hard == pytest.approx(-0.25)  # 0 - 1/4
    assert easy < failed and hard < failed
    assert in_window == pytest.approx(0.5 - 0.25) and in_window > failed


def test_minus_one_puts_a_failure_at_or_below_every_valid_rollout():
    rewards = _rewards(-1.0)
    assert rewards[-1] == -1.0
    assert all(r >= -1.0 for r in rewards[:-1])
    # even a valid question whose cluster is the whole batch only ties with a failure
    same = ["a b c d e"] * 4
    worst = total_proposer_reward([1.0] * 4, bleu_cluster_penalty(same), failure_value=-1.0)
    assert min(worst) == pytest.approx(-1.0)


@pytest.mark.parametrize(("arm", "paper_arm"), [("vd75_fail_neg", "vd75"),
                                                ("baseline_fail_neg", "baseline")])
@pytest.mark.parametrize("profile", ["tiny", "gpu", "paper"])
def test_a_fail_neg_arm_is_its_paper_arm_with_failures_at_minus_one(arm, paper_arm, profile):
    assert arm in arm_names()
    cfg = to_dict(load_params(arm_params({"profile": profile}, arm)))
    ref = to_dict(load_params(arm_params({"profile": profile}, paper_arm)))
    assert cfg["scoring"]["parse_failure_reward"] == -1.0
    assert ref["scoring"]["parse_failure_reward"] == 0.0  # the paper's default stays
    cfg["scoring"]["parse_failure_reward"] = 0.0
    assert {k: v for k, v in cfg.items() if k != "run_id"} == \
        {k: v for k, v in ref.items() if k != "run_id"}
    assert cfg["run_id"] == f"{arm}-seed0"


def test_an_unknown_arm_names_the_fail_neg_arms():
    with pytest.raises(UnknownNameError) as e:
        arm_params({}, "vd75_failneg")
    assert "vd75_fail_neg" in str(e.value) and "baseline_fail_neg" in str(e.value)
    with pytest.raises(ConfigError) as e:
        load_params({"profile": "tiny", "arms": ["vd75", "vd75_failneg"]})
    assert "arms[1]" in str(e.value) and "vd75_fail_neg" in str(e.value)
    assert ARMS.get("vd75_fail_neg")["scoring"] == {"parse_failure_reward": -1.0}


TEX = Path(__file__).resolve().parents[2] / "shared" / "paper" / "vocab_dropout_paper.tex"


@pytest.mark.skipif(not TEX.is_file(), reason="paper .tex not available")
def test_the_default_is_algorithm_1_and_every_report_shows_it():
    text = TEX.read_text(encoding="utf-8")
    assert r"\lIf{parse fails}{$r_i^P \gets 0$;\; \textbf{continue}}" in text
    assert load_params({}).scoring.parse_failure_reward == 0.0
    settings = settings_table(load_params(arm_params({"profile": "tiny"}, "vd75_fail_neg")))
    row = settings.set_index("key").loc["scoring.parse_failure_reward"]
    assert (row["table"], row["paper"], row["ours"], bool(row["same"])) == \
        ("protocol switch", "0.0", "-1.0", False)
