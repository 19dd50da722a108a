"""The majority vote's failed-extraction switch (``scoring.failed_extraction``, issue 51 item 5):
checked against a small re-implementation of R-Zero's grouping, and followed from the config
to the two places that vote for acc (the scoring stage and the proposer reward).

The answer lists hold integers, equal strings and ``None`` only, so every comparison takes
vdlib's cheap paths (no math-verify helper is started): the tests take milliseconds.
"""

from __future__ import annotations

import contextlib
import random
import re
from pathlib import Path

import pytest

from vdlib.config.experiment import ConfigError, ScoringConfig, load_params, to_dict
from vdlib.engines.generation import Sample
from vdlib.method.grading import majority_vote, majority_votes
from vdlib.runs.fingerprint import config_fingerprint


def _same_number(a: str, b: str) -> bool:
    """The grader of the re-implementation, enough for these lists (integers and equal
    strings): what mathruler's ``grade_answer`` and vdlib's ``is_equivalent`` both say there."""
    return bool(re.fullmatch(r"[+-]?\d+", a) and re.fullmatch(r"[+-]?\d+", b)
                and int(a) == int(b))


def rzero_vote(answers: list[str | None], *, drop_none_group: bool = False
               ) -> tuple[str | None, float]:
    """R-Zero's reward-server grouping (``vllm_service_init/start_vllm_server.py``,
    ``process_single``), re-implemented from its description, on vdlib's extracted answers.

    mathruler's ``extract_boxed_content`` returns the string "None" where vdlib's extractor
    returns None; R-Zero skips empty answers (``if not res``) but not "None"; an answer joins
    the first group it equals (string, or the grader in either direction: here
    :func:`_same_number`); the majority is the
    first key of largest count (``max`` over an insertion-ordered dict); score = its count over
    all the answers. (R-Zero's extra cheap check, two answers that both contain "no " are the
    same, is left out: it is not about failures.) ``drop_none_group``: "None" is skipped like an
    empty answer (still in the denominator), vdlib's ``never_group``.
    """
    results = ["None" if a is None else a for a in answers]
    counts: dict[str, int] = {}
    for res in results:
        if not res or (drop_none_group and res == "None"):
            continue
        for head in counts:
            if res == head or _same_number(res, head) or _same_number(head, res):
                counts[head] += 1
                break
        else:
            counts[res] = 1
    if not counts:
        return None, 0.0
    majority = max(counts, key=counts.get)
    score = counts[majority] / len(results) if results else 0.0
    return (None if majority == "None" else majority), score


FIXED = {
    "mixed": [None, "7", "8", None, "7", None, "9", None, "7", "8"],
    "failures win": [None, None, "3", None, "3", "4", None, None, "5", "3"],
    "answers win": ["2", None, "2", "2", None, "1", "2", "2", None, "2"],
    "tie, failures first": [None, "6", None, "6", "1", "2"],
    "tie, answer first": ["6", None, "6", None, "1", "2"],
    "all failed": [None] * 10,
    "no failure": ["1", "01", "2", "1"],
    "one answer": [None, None, None, "5"],
    "empty": [],
}


@pytest.mark.parametrize("name", sorted(FIXED))
def test_separate_group_is_rzeros_reward_server(name):
    answers = FIXED[name]
    assert majority_vote(answers, failed="separate_group") == rzero_vote(answers)


@pytest.mark.parametrize("name", sorted(FIXED))
def test_never_group_is_rzero_with_the_none_group_skipped(name):
    answers = FIXED[name]
    assert majority_vote(answers) == rzero_vote(answers, drop_none_group=True)
    assert majority_vote(answers, failed="never_group") == majority_vote(answers)


def test_the_fixed_lists_by_hand():
    """The values themselves, so that the re-implementation cannot agree by sharing a fault."""
    sep = {k: majority_vote(v, failed="separate_group") for k, v in FIXED.items()}
    never = {k: majority_vote(v) for k, v in FIXED.items()}
    assert sep["mixed"] == (None, 0.4) and never["mixed"] == ("7", 0.3)
    assert sep["failures win"] == (None, 0.5) and never["failures win"] == ("3", 0.3)
    assert sep["answers win"] == ("2", 0.6) == never["answers win"]
    assert sep["tie, failures first"] == (None, 1 / 3)  # the failures appeared first
    assert never["tie, failures first"] == ("6", 1 / 3)
    assert sep["tie, answer first"] == ("6", 1 / 3) == never["tie, answer first"]
    assert sep["all failed"] == (None, 1.0) and never["all failed"] == (None, 0.0)
    assert sep["no failure"] == ("1", 0.75) == never["no failure"]
    assert sep["one answer"] == (None, 0.75) and never["one answer"] == ("5", 0.25)
    assert sep["empty"] == (None, 0.0) == never["empty"]


def test_random_lists_agree_with_the_reimplementation():
    rng = random.Random(51)
    pool = [None, None, "1", "01", "2", "3", "-3", "10"]
    lists = [[rng.choice(pool) for _ in range(rng.randint(1, 10))] for _ in range(300)]
    for answers in lists:
        assert majority_vote(answers, failed="separate_group") == rzero_vote(answers)
        assert majority_vote(answers) == rzero_vote(answers, drop_none_group=True)
    expected = [rzero_vote(a) for a in lists]
    assert majority_votes(lists, workers=1, failed="separate_group") == expected
    assert majority_votes(lists, workers=2, failed="separate_group") == expected  # threads


def test_an_unknown_rule_is_a_one_line_error():
    with pytest.raises(ValueError, match=r"^failed_extraction = 'separate'; allowed: "
                                         r"never_group, separate_group$"):
        majority_vote(["1"], failed="separate")
    with pytest.raises(ValueError, match="failed_extraction"):
        majority_votes([["1"], ["2"]], workers=1, failed="none")


def test_the_config_key_validates_and_is_fingerprinted():
    assert ScoringConfig().failed_extraction == "never_group"
    with pytest.raises(ConfigError) as err:
        load_params({"scoring": {"failed_extraction": "rzero"}})
    message = str(err.value)
    assert "scoring.failed_extraction" in message and "separate_group" in message
    assert "\n" not in message
    default = to_dict(load_params({}))
    rzero = to_dict(load_params({"scoring": {"failed_extraction": "separate_group"}}))
    assert config_fingerprint(default) != config_fingerprint(rzero)


class _FakeSolver:
    """A solver engine that answers each question from a script (prompt-major samples)."""

    def __init__(self, script):
        self.script = script

    def generate(self, prompts, *, n=1, seed=0, **kwargs):
        out = []
        for pi, p in enumerate(prompts):
            q = next(q for q in self.script if q in p)
            out.extend(Sample(p, pi, si, [1], self.script[q][si], "stop", seed)
                       for si in range(n))
        return out


_SCRIPT = {"Q-junk": ["no answer"] * 3 + ["\\boxed{7}"],
           "Q-half": ["\\boxed{2}", "none", "\\boxed{2}", "\\boxed{3}"],
           "Q-two": ["none", "\\boxed{1}", "none", "\\boxed{2}"]}


@pytest.mark.parametrize("rule, junk, half", [("never_group", ("7", 0.25), ("2", 0.5)),
                                              ("separate_group", (None, 0.75), ("2", 0.5))])
def test_score_questions_follows_the_switch(tokenizer, rule, junk, half):
    from vdlib.loop.scoring import score_questions

    scores = score_questions(["Q-junk", "Q-half"], _FakeSolver(_SCRIPT), tokenizer, m=4,
                             show_progress=False, failed_extraction=rule)
    assert (scores[0].majority, scores[0].acc) == junk
    assert (scores[1].majority, scores[1].acc) == half


@pytest.mark.parametrize("rule, acc, reward", [("never_group", 0.25, 0.0),
                                               ("separate_group", 0.5, 0.5)])
def test_the_proposer_reward_votes_with_the_configured_rule(tokenizer, rule, acc, reward):
    """The paper's reward, window [0.3, 0.7]: the same rollout is outside it under one rule
    and at its centre under the other."""
    from vdlib.loop.grpo_rewards import ProposerReward

    cfg = ScoringConfig(num_solver_samples=4, failed_extraction=rule, penalty_weight=0.0)
    reward_fn = ProposerReward(_FakeSolver(_SCRIPT), tokenizer, cfg)
    rewards = reward_fn(["p"], ["<question>Q-two</question> so \\boxed{1}"])
    assert reward_fn.records[0]["acc"] == acc
    assert rewards == [pytest.approx(reward)]


def test_the_scoring_stage_passes_the_configured_rule(monkeypatch, tmp_path):
    from vdlib.loop import stages
    from vdlib.utils.artifacts import read_jsonl, write_jsonl

    seen = {}

    def fake_score(questions, engine, tok, m, **kwargs):
        seen.update(kwargs)
        return []

    class Store:
        cfg = load_params({"scoring": {"failed_extraction": "separate_group"}})

        def solver(self, t):
            return "solver"

        @contextlib.contextmanager
        def engine(self, *a, **kw):
            yield None

    write_jsonl(tmp_path / "generated.jsonl", [])
    monkeypatch.setattr(stages, "score_questions", fake_score)
    monkeypatch.setattr(stages, "load_tokenizer", lambda path: None)
    stages.score(Store(), 1, tmp_path)
    assert seen["failed_extraction"] == "separate_group"
    assert read_jsonl(tmp_path / "questions.jsonl") == []


TEX = Path(__file__).resolve().parents[2] / "shared" / "paper" / "vocab_dropout_paper.tex"


@pytest.mark.skipif(not TEX.is_file(), reason="paper .tex not available")
def test_the_default_reads_algorithm_1_and_every_report_shows_the_switch():
    """Algorithm 1's acc is the 'fraction matching majority vote' of the solver responses: a
    vote among answers, which a response without one does not cast (docs/experiments.md,
    "Failed extractions in the majority vote"); the settings table lists the switch."""
    from vdlib.report.settings_tables import settings_table

    text = TEX.read_text(encoding="utf-8")
    assert r"$\text{acc}_i \gets$ fraction matching majority vote" in text
    assert load_params({}).scoring.failed_extraction == "never_group"
    settings = settings_table(load_params({"profile": "tiny",
                                           "scoring": {"failed_extraction": "separate_group"}}))
    row = settings.set_index("key").loc["scoring.failed_extraction"]
    assert (row["table"], row["paper"], row["ours"], bool(row["same"])) == \
        ("protocol switch", "never_group", "separate_group", False)
