"""Grading, majority vote, rewards and self-consistency scoring."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vdlib.engines.generation import Sample
from vdlib.loop.scoring import score_questions
from vdlib.method.grading import is_equivalent, majority_vote, normalize_answer
from vdlib.method.rewards import proposer_reward, solver_reward, total_proposer_reward

EQUIVALENT = [
    ("\\frac{\\sqrt{3}}{2}", "\\frac{\\sqrt{3}}{2}"),  # bare LaTeX matches itself
    ("\\frac{\\sqrt{3}}{2}", "\\frac{\\sqrt3}{2}"),
    ("\\frac{1}{2}", "0.5"),
    ("3\\sqrt{2}", "\\sqrt{18}"),
    ("1,000", "1000"),
    ("(1,2)", "(1, 2)"),
    ("\\$18.90", "18.90"),
    ("\\$32,\\!348", "32348"),
    ("18 \\text{ cm}", "18"),
    ("\\left( 3, \\frac{\\pi}{2} \\right)", "(3, \\frac{\\pi}{2})"),
    ("\\text{Evelyn}", "Evelyn"),
    ("90^\\circ", "90"),
    ("2", "2.0"),
    ("-1", "-1.0"),
    ("\\dfrac{14}{3}", "\\frac{14}{3}"),
    ("x^2+2x+1", "(x+1)^2"),
]
DIFFERENT = [("5", "6"), ("\\frac{14}{3}", "4.6667"), ("34", "92"), ("12", "48"),
             ("\\sqrt{2}", "2"), ("(1,2)", "(2,1)")]


@pytest.mark.parametrize(("gold", "pred"), EQUIVALENT)
def test_equivalent(gold, pred):
    assert is_equivalent(gold, pred)


@pytest.mark.parametrize(("gold", "pred"), DIFFERENT)
def test_not_equivalent(gold, pred):
    assert not is_equivalent(gold, pred)


@pytest.mark.parametrize("bad", [None, "", "   ", 3, b"1", ["1"]])
def test_bad_inputs_are_not_equivalent(bad):
    assert not is_equivalent(bad, "1") and not is_equivalent("1", bad)


def test_works_in_worker_threads():
    """math-verify's signal timeouts fail off the main thread; the helper process takes over."""
    results = {}

    def work(i, gold, pred):
        results[i] = is_equivalent(gold, pred, timeout=5)

    cases = [("\\frac{1}{2}", "0.5"), ("3", "4"), ("3\\sqrt{2}", "\\sqrt{18}")]
    threads = [threading.Thread(target=work, args=(i, *c)) for i, c in enumerate(cases)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {0: True, 1: False, 2: True}


@pytest.mark.parametrize("pair", [("7", "007"), ("-0", "0"), ("+3", "3"), ("3", "-3"),
                                  ("1363", "1154"), ("12", "12.0"), ("10", "1e1"),
                                  ("99999999999999999999", "99999999999999999998")])
def test_integer_fast_path_agrees_with_math_verify(pair):
    """Two plain integers are compared as integers, without sympy; math-verify agrees."""
    from vdlib.method.grading import _verify_here

    a, b = pair
    assert is_equivalent(a, b) == _verify_here(a, b, 5)


def test_normalize_answer():
    assert normalize_answer(" $\\dfrac{1}{2}$. ") == "\\frac{1}{2}"
    assert normalize_answer("\\text{(A)}") == "(A)"


def test_majority_vote_cases():
    assert majority_vote(["34"] * 10) == ("34", 1.0)
    assert majority_vote(["1/2", "0.5", "\\frac{1}{2}", "3"]) == ("1/2", 0.75)
    # ties go to the group that appeared first
    assert majority_vote(["7", "8", "8", "7"]) == ("7", 0.5)
    assert majority_vote(["8", "7", "7", "8"]) == ("8", 0.5)
    # None answers count in the denominator and never form a group
    assert majority_vote([None, None, None, "5"]) == ("5", 0.25)
    assert majority_vote([None] * 4) == (None, 0.0)
    assert majority_vote([]) == (None, 0.0)
    assert majority_vote(["", "  ", "4"]) == ("4", 1 / 3)


def test_paper_ill_posed_example():
    """Appendix 'Ill-posed problems': the proposer says 92, all ten solvers say 34."""
    majority, acc = majority_vote(["34"] * 10)
    assert (majority, acc) == ("34", 1.0)
    assert proposer_reward([acc]) == [0.0]  # outside the window: too easy by self-consistency
    completions = ["126 - 34 - 58 = 34, so \\boxed{34}"] * 10
    assert solver_reward(completions, ["92"] * 10) == [0.0] * 10  # paper: proposer's answer
    assert solver_reward(completions, [majority] * 10) == [1.0] * 10  # R-Zero: majority
    # the other three pairs from the same appendix
    for proposer, solvers in (("48", "12"), ("4", "24")):
        assert not is_equivalent(proposer, solvers)


def test_proposer_reward_window_edges():
    accs = [0.0, 0.1, 0.29, 0.3, 0.4, 0.5, 0.6, 0.7, 0.71, 0.9, 1.0]
    got = proposer_reward(accs)
    want = [0.0, 0.0, 0.0, 0.3, 0.4, 0.5, 0.4, 0.3, 0.0, 0.0, 0.0]
    assert got == pytest.approx(want)
    assert proposer_reward([3 / 10, 7 / 10]) == pytest.approx([0.3, 0.3])  # k/M on the edges
    rz = proposer_reward(accs, variant="rzero")
    assert rz == pytest.approx([min(a, 1 - a) for a in accs])
    assert proposer_reward([None], failure_value=-1.0) == [-1.0]
    assert proposer_reward([0.5], tau_min=0.6, tau_max=0.8) == [0.0]


@pytest.mark.parametrize(("kwargs", "word"), [({"variant": "zero"}, "paper, rzero"),
                                               ({"tau_min": 0.8, "tau_max": 0.2}, "tau_min")])
def test_proposer_reward_bad_args(kwargs, word):
    with pytest.raises(ValueError, match=word):
        proposer_reward([0.5], **kwargs)


def test_total_proposer_reward():
    got = total_proposer_reward([0.5, 0.4, None, 1.0], [0.25, 0.5, 0.75, 0.25],
                                failure_value=-1.0, penalty_weight=1.0)
    assert got == pytest.approx([0.25, -0.1, -1.0, -0.25])
    with pytest.raises(ValueError):
        total_proposer_reward([0.5], [])


_WORDS = st.sampled_from(["two", "plus", "three", "is", "what", "sum", "of", "five"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.lists(_WORDS, min_size=1, max_size=8)),
                          st.integers(0, 10)), max_size=8),
       st.sampled_from(["batch", "valid"]), st.sampled_from(["paper", "rzero"]),
       st.sampled_from([0.0, -1.0]), st.sampled_from([0.5, 1.0]))
def test_proposer_batch_rewards_is_the_penalty_then_the_total(rows, scope, variant, failure,
                                                              weight):
    """The composition the proposer phase pays (vdlib.loop.grpo_rewards.ProposerReward): the
    BLEU-cluster penalty over the batch (failed rollouts in it under scope 'batch'), then
    proposer_reward - weight * penalty, failures at the failure value."""
    from vdlib.method.bleu_penalty import bleu_cluster_penalty
    from vdlib.method.rewards import proposer_batch_rewards

    questions = [" ".join(w) if w is not None else None for w, _ in rows]
    accs = [None if q is None else k / 10 for q, (_, k) in zip(questions, rows, strict=True)]
    rewards, penalties = proposer_batch_rewards(
        questions, accs, variant=variant, failure_value=failure, penalty_weight=weight,
        penalty_scope=scope)
    want_pen = bleu_cluster_penalty(questions, 0.5, include_failed=scope == "batch")
    assert penalties == want_pen
    base = proposer_reward(accs, variant=variant, failure_value=failure)
    assert rewards == [b if a is None else b - weight * p
                       for b, a, p in zip(base, accs, want_pen, strict=True)]


def test_proposer_batch_rewards_names_a_bad_scope():
    from vdlib.method.rewards import proposer_batch_rewards

    with pytest.raises(ValueError, match="penalty_scope = 'all'; allowed: batch, valid"):
        proposer_batch_rewards(["q"], [0.5], penalty_scope="all")


def test_solver_reward_takes_the_last_box():
    assert solver_reward(["\\boxed{1} then \\boxed{2}"], ["2"]) == [1.0]
    assert solver_reward(["\\boxed{\\frac{1}{2}}"], ["0.5"]) == [1.0]
    assert solver_reward(["\\boxed{1}"], [None]) == [0.0]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(max_size=30)), max_size=6))
def test_voting_never_raises(answers):
    majority, acc = majority_vote(answers)
    assert 0.0 <= acc <= 1.0
    assert majority is None or majority in answers


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=40), st.text(max_size=40))
def test_grading_never_raises(a, b):
    assert isinstance(is_equivalent(a, b, timeout=2), bool)


class FakeSolver:
    """An engine that answers from a script: question -> list of completions."""

    def __init__(self, script):
        self.script = script
        self.calls = []

    def generate(self, prompts, *, n=1, seed=0, **kwargs):
        self.calls.append((len(prompts), n))
        out = []
        for pi, p in enumerate(prompts):
            q = next(q for q in self.script if q in p)
            for si in range(n):
                out.append(Sample(p, pi, si, [1], self.script[q][si], "stop", seed))
        return out


def test_score_questions(tokenizer):
    script = {"Q-easy": ["\\boxed{4}"] * 4,
              "Q-split": ["\\boxed{1}", "\\boxed{2}", "\\boxed{0.5}", "\\boxed{1/2}"],
              "Q-junk": ["no answer"] * 3 + ["\\boxed{7}"]}
    solver = FakeSolver(script)
    scores = score_questions(["Q-easy", None, "Q-split", "Q-junk"], solver, tokenizer, m=4,
                             show_progress=False)
    assert solver.calls == [(3, 4)]  # one batched call, failed rollouts not sent
    assert (scores[0].majority, scores[0].acc) == ("4", 1.0)
    assert scores[1].acc is None and scores[1].answers == []
    assert (scores[2].majority, scores[2].acc) == ("0.5", 0.5)
    assert (scores[3].majority, scores[3].acc) == ("7", 0.25)
    assert scores[3].answers == [None, None, None, "7"]
    assert scores[2].agrees_with("\\frac{1}{2}") and not scores[0].agrees_with("5")
    assert set(scores[0].to_dict()) == {"question", "answers", "majority", "acc"}


def test_score_questions_with_the_tiny_model(tiny_model_and_tokenizer):
    from vdlib.engines.generation import HFEngine

    model, tok = tiny_model_and_tokenizer
    engine = HFEngine(model, tok, show_progress=False)
    scores = score_questions(["What is 2+2?", "What is 3+3?"], engine, tok, m=3,
                             max_new_tokens=4, show_progress=False)
    for s in scores:  # random model: no boxed answers, acc 0 with None answers counted
        assert len(s.answers) == 3 and s.acc == 0.0 and s.majority is None


def test_pathological_answers_are_bounded_in_main_and_worker_threads():
    """sympy would evaluate this power tower for ever: the timeout ends it (main thread via
    math-verify's alarm; worker threads via the helper process). If the bound failed, this test
    would hang rather than fail: no wall-clock assertion (project rule)."""
    tower = "9^{9^{9^{9}}}"
    assert is_equivalent(tower, "1", timeout=1) is False
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", is_equivalent(tower, "2", timeout=1)))
    t.start()
    t.join()
    assert out == {"r": False}


def _stuck_compare(gold, pred, timeout):
    """Stands for sympy stuck in C code that holds the GIL: the alarm never fires for it."""
    import signal
    import time

    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    if "stuck" in (gold, pred):
        time.sleep(3600)
    return gold == pred


@pytest.mark.slow  # 13 s on 2 cores (make test's 15 minutes; make test-slow runs it)
def test_a_comparison_stuck_beyond_the_alarm_is_killed_and_the_helper_restarts():
    from vdlib.utils.helper_process import HelperProcess

    helper = HelperProcess(_stuck_compare)
    try:
        assert helper.compare("x", "x", 1) is True
        assert helper.compare("x", "stuck", 1) is None  # killed after timeout + 1 s
        assert helper.timeouts == 1
        assert helper.compare("y", "y", 1) is True  # a fresh helper answers again
    finally:
        helper.kill()


def test_majority_vote_compares_a_timed_out_answer_as_a_string_only(monkeypatch):
    """One stuck comparison, not one per later answer: 'stuck' and the head it met are then
    matched by string equality only."""
    from vdlib.method import grading
    from vdlib.utils.helper_process import HelperProcess

    helper = HelperProcess(_stuck_compare)
    monkeypatch.setattr(grading, "_HELPER", helper)
    try:
        assert helper.compare("w", "w", 1)  # started (a cold start has a longer budget)
        majority, acc = grading.majority_vote(["x", "stuck", "y", "stuck", "x", "y", "y"],
                                              timeout=1)
        assert (majority, acc) == ("y", 3 / 7)
        assert helper.timeouts == 1
    finally:
        helper.kill()


def _pool_compare(pair):
    return is_equivalent(*pair)


def test_is_equivalent_works_in_a_daemonic_pool_worker():
    """A Pool worker is daemonic and may not have multiprocessing children; the helper is a
    plain subprocess, so the worker gets one like any other process."""
    import multiprocessing as mp

    with mp.get_context("spawn").Pool(1) as pool:
        assert pool.map(_pool_compare, [("\\frac{1}{2}", "0.5"), ("3", "4")]) == [True, False]


def test_a_forked_child_starts_its_own_helper():
    """After fork, the parent's helper belongs to the parent; the child starts its own."""
    import multiprocessing as mp

    assert is_equivalent("\\frac{1}{2}", "0.5")  # the parent's helper is running
    ctx = mp.get_context("fork")
    q = ctx.Queue()

    def child():
        q.put(is_equivalent("\\frac{2}{4}", "0.5"))

    p = ctx.Process(target=child)
    p.start()
    p.join(60)
    assert q.get(timeout=5) is True


def test_a_script_without_a_main_guard_can_compare(tmp_path):
    """The helper does not re-run the caller's __main__ (as a multiprocessing spawn would)."""
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "top_level.py"
    script.write_text("from vdlib.method.grading import is_equivalent\n"
                      "print(is_equivalent('\\\\frac{1}{2}', '0.5'), "
                      "is_equivalent('\\\\sqrt{4}', '3'))\n")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120, cwd=Path(__file__).resolve().parent.parent)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["True", "False"]
    assert "bootstrapping" not in run.stderr


def test_the_helper_ends_with_its_process_and_leaves_no_pipe_behind(tmp_path):
    """A process that compared and exits closes its helper (atexit): no ResourceWarning for
    the helper's pipes at shutdown, and the helper process is gone."""
    import subprocess
    import sys
    import time
    from pathlib import Path

    script = tmp_path / "compare_and_exit.py"
    script.write_text("from vdlib.method import grading\n"
                      "print(grading.is_equivalent('\\\\frac{1}{2}', '0.5'), "
                      "grading._HELPER.pid)\n")
    run = subprocess.run([sys.executable, "-W", "always::ResourceWarning", str(script)],
                         capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parent.parent)
    assert run.returncode == 0, run.stderr[-2000:]
    verdict, pid = run.stdout.split()
    assert verdict == "True" and "ResourceWarning" not in run.stderr
    for _ in range(50):  # reaped by the exiting parent's wait; at most a moment as a zombie
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split()[2]
        except FileNotFoundError:
            break
        if state == "Z":
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"helper {pid} still running after its owner exited")


def _noisy_compare(gold, pred, timeout):
    """Prints on stdout, as a chatty library might, before answering."""
    import os

    print("noise", flush=True)
    os.write(1, b"more noise\n")
    return gold == pred


def test_output_printed_by_the_comparison_cannot_shift_the_answers():
    from vdlib.utils.helper_process import HelperProcess

    helper = HelperProcess(_noisy_compare)
    try:
        assert [helper.compare(a, b, 5) for a, b in (("x", "x"), ("x", "y"), ("y", "y"))] \
            == [True, False, True]
    finally:
        helper.kill()


def test_majority_votes_over_threads_equal_one_vote_at_a_time(monkeypatch):
    """majority_votes gives each list's majority_vote, in order, whatever the workers, and
    keeps its helper processes for the next call."""
    import random

    from vdlib.method import grading
    from vdlib.method.grading import majority_votes
    from vdlib.utils.helper_process import HelperPool

    pool_of_helpers = HelperPool(grading._verify_here)
    monkeypatch.setattr(grading, "_VOTE_POOL", pool_of_helpers)

    rng = random.Random(0)
    pool = ["\\frac{1}{2}", "0.5", "1/2", "2\\sqrt{3}", "\\sqrt{12}", "7", "7.0", None, "x+1"]
    lists = [[rng.choice(pool) for _ in range(6)] for _ in range(12)]
    expected = [majority_vote(a) for a in lists]
    ticks = []
    assert majority_votes(lists, workers=1) == expected
    try:
        assert majority_votes(lists, workers=3, progress=lambda: ticks.append(1)) == expected
        assert len(ticks) == len(lists)
        assert majority_votes(lists[::-1], workers=2) == expected[::-1]
        assert len(pool_of_helpers.helpers) == 3  # the second call reuses the first's helpers
    finally:
        for h in pool_of_helpers.helpers:
            h.kill()


def test_vote_workers_reads_its_variable_and_rejects_bad_values(monkeypatch):
    from vdlib.method.grading import vote_workers

    monkeypatch.setenv("VDLIB_VOTE_WORKERS", "3")
    assert vote_workers() == 3
    monkeypatch.setenv("VDLIB_VOTE_WORKERS", "many")
    with pytest.raises(ValueError, match="VDLIB_VOTE_WORKERS"):
        vote_workers()
    monkeypatch.delenv("VDLIB_VOTE_WORKERS")
    assert 1 <= vote_workers() <= 8
