"""The paper's prompts and their application through a tokenizer's chat template.

Texts (paper, appendix "Prompt templates"; R-Zero's code):

- proposer: R-Zero's questioner system message and user message (every proposer prompt is
  identical; GRPO groups are G samples of it);
- solver (training and self-consistency scoring): system "Please reason step by step, and put
  your final answer within \\boxed{}.", user = the question;
- evaluation: no system message; user = "{question}\\nLet's think step by step and provide your
  final answer inside \\boxed{} notation.".

The paper typesets the word "exactly" in bold; R-Zero's prompt string marks it with Markdown
``**exactly**``, which is what we send.

Fallback: a tokenizer without a chat template gets a plain transcript
("System: ...\\n\\nUser: ...\\n\\nAssistant:"), documented in :func:`apply_chat_template`.

>>> msgs = solver_messages("What is 1+1?")
>>> [m["role"] for m in msgs]
['system', 'user']
>>> evaluation_messages("What is 1+1?")[0]["content"].splitlines()[1].startswith("Let's think")
True
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = [
    "PROPOSER_SYSTEM",
    "PROPOSER_USER",
    "SOLVER_SYSTEM",
    "EVALUATION_SUFFIX",
    "proposer_messages",
    "solver_messages",
    "evaluation_messages",
    "apply_chat_template",
    "proposer_prompt",
    "solver_prompt",
    "evaluation_prompt",
]

logger = logging.getLogger(__name__)

PROPOSER_SYSTEM = (
    "You are an expert competition-math problem setter.\n"
    "FIRST, in your private scratch-pad, think step-by-step to design a brand-new, non-trivial "
    "problem. The problem could come from any field of mathematics, including but not limited to "
    "algebra, geometry, number theory, combinatorics, prealgebra, probability, statistics, and "
    "calculus. Aim for a difficulty such that fewer than 30% of advanced high-school students "
    "could solve it. Avoid re-using textbook clichés or famous contest problems.\n"
    "THEN, without revealing any of your private thoughts, output **exactly** the following two "
    "blocks:\n\n"
    "<question>\n"
    "{The full problem statement on one or more lines}\n"
    "</question>\n\n"
    "\\boxed{final_answer}\n\n"
    "Do NOT output anything else: no explanations, no extra markup."
)
PROPOSER_USER = (
    "Generate one new, challenging reasoning question now. Remember to format the output exactly "
    "as instructed."
)
SOLVER_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."
EVALUATION_SUFFIX = (
    "Let's think step by step and provide your final answer inside \\boxed{} notation."
)

Messages = list[dict[str, str]]


def proposer_messages() -> Messages:
    """The proposer (R-Zero questioner) conversation: system + user."""
    return [{"role": "system", "content": PROPOSER_SYSTEM},
            {"role": "user", "content": PROPOSER_USER}]


def solver_messages(question: str) -> Messages:
    """The solver conversation used in GRPO training and self-consistency scoring."""
    return [{"role": "system", "content": SOLVER_SYSTEM}, {"role": "user", "content": question}]


def evaluation_messages(question: str) -> Messages:
    """The evaluation conversation: no system message, the question then the CoT instruction."""
    return [{"role": "user", "content": f"{question}\n{EVALUATION_SUFFIX}"}]


def _fallback_transcript(messages: Messages) -> str:
    parts = [f"{m['role'].capitalize()}: {m['content']}" for m in messages]
    return "\n\n".join(parts) + "\n\nAssistant:"


def apply_chat_template(tokenizer: Any, messages: Messages, **template_kwargs: Any) -> str:
    """Render ``messages`` as the prompt text the model sees, ending with the assistant turn.

    Uses ``tokenizer.apply_chat_template(..., tokenize=False, add_generation_prompt=True)``.
    When the tokenizer has no chat template (some base models), falls back to a plain
    transcript ``"System: ...\\n\\nUser: ...\\n\\nAssistant:"`` and logs it once per call.
    Extra keyword arguments go to the template (e.g. ``enable_thinking=False`` for Qwen3).
    """
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                             **template_kwargs)
    logger.info("tokenizer has no chat template; using the plain-transcript fallback")
    return _fallback_transcript(messages)


def proposer_prompt(tokenizer: Any, **template_kwargs: Any) -> str:
    """The proposer prompt text in ``tokenizer``'s chat template."""
    return apply_chat_template(tokenizer, proposer_messages(), **template_kwargs)


def solver_prompt(tokenizer: Any, question: str, **template_kwargs: Any) -> str:
    """The solver prompt text for ``question`` in ``tokenizer``'s chat template."""
    return apply_chat_template(tokenizer, solver_messages(question), **template_kwargs)


def evaluation_prompt(tokenizer: Any, question: str, **template_kwargs: Any) -> str:
    """The evaluation prompt text for ``question`` in ``tokenizer``'s chat template."""
    return apply_chat_template(tokenizer, evaluation_messages(question), **template_kwargs)
