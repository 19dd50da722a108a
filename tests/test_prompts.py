"""Prompts: the paper's texts and their chat-template rendering."""

from __future__ import annotations

import copy

from vdlib.method import prompts as P


def test_proposer_prompt_is_the_paper_text(tokenizer):
    system = P.PROPOSER_SYSTEM
    for piece in ("You are an expert competition-math problem setter.",
                  "fewer than 30% of advanced high-school students",
                  "<question>\n{The full problem statement on one or more lines}\n</question>",
                  "\\boxed{final_answer}", "Do NOT output anything else"):
        assert piece in system
    assert P.PROPOSER_USER.startswith("Generate one new, challenging reasoning question now.")
    text = P.proposer_prompt(tokenizer)
    assert text.startswith("<|im_start|>system\nYou are an expert competition-math")
    assert text.endswith("<|im_start|>assistant\n")
    assert text.count(P.PROPOSER_USER) == 1


def test_solver_and_evaluation_prompts(tokenizer):
    q = "What is $\\frac{1}{2} + \\frac{1}{3}$?"
    solver = P.solver_prompt(tokenizer, q)
    assert P.SOLVER_SYSTEM in solver and q in solver
    assert P.SOLVER_SYSTEM == ("Please reason step by step, and put your final answer within "
                               "\\boxed{}.")
    msgs = P.evaluation_messages(q)
    assert msgs == [{"role": "user", "content": q + "\nLet's think step by step and provide your "
                     "final answer inside \\boxed{} notation."}]  # no system message
    assert P.evaluation_prompt(tokenizer, q).endswith("<|im_start|>assistant\n")


def test_fallback_without_chat_template(tokenizer):
    tok = copy.copy(tokenizer)
    tok.chat_template = None
    text = P.apply_chat_template(tok, P.solver_messages("2+2?"))
    assert text == f"System: {P.SOLVER_SYSTEM}\n\nUser: 2+2?\n\nAssistant:"
