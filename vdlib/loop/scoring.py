"""Self-consistency scoring: the frozen solver answers each question M times.

``score_questions(questions, solver_engine, tokenizer, m)`` renders each question with the solver
prompt (:func:`vdlib.method.prompts.solver_prompt`), samples ``m`` answers per question in one
batched engine call (prompt-major, so ``questions x m`` completions), extracts each last
``\\boxed{}`` and takes the majority vote (:func:`vdlib.method.grading.majority_vote`, several at
once through :func:`vdlib.method.grading.majority_votes`): acc = the fraction of the m
answers in the largest equivalence group, failed extractions included in the denominator
(paper, App. "Verification via solver self-consistency"; R-Zero's reward server).
``failed_extraction`` (config ``scoring.failed_extraction``) says whether the failed extractions
also form a group of their own (``separate_group``, R-Zero's reward server as it runs) or never
do (``never_group``, the default; docs/experiments.md).

A ``None`` question (a proposer rollout that failed to parse) is not sent to the solver and
scores ``acc = None``, which :func:`vdlib.method.rewards.proposer_reward` maps to its failure value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from tqdm.auto import tqdm

from vdlib.engines.generation import GenerationEngine
from vdlib.method.grading import check_failed_extraction, is_equivalent, majority_votes
from vdlib.method.parsing import extract_boxed
from vdlib.method.prompts import solver_prompt
from vdlib.utils.terminal import bars_disabled

__all__ = ["QuestionScore", "score_questions"]


@dataclass
class QuestionScore:
    """The solver's verdict on one question."""

    question: str | None
    answers: list[str | None] = field(default_factory=list)  # the m extracted answers
    majority: str | None = None
    acc: float | None = None  # None: the question was not scored (failed rollout)

    def agrees_with(self, proposer_answer: str | None) -> bool:
        """Whether the majority answer is equivalent to the proposer's stated answer."""
        if proposer_answer is None or self.majority is None:
            return False
        return is_equivalent(proposer_answer, self.majority)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def score_questions(questions: Sequence[str | None], solver_engine: GenerationEngine,
                    tokenizer: Any, m: int = 10, seed: int = 0, *, temperature: float = 1.0,
                    top_p: float = 0.99, top_k: int = 0, max_new_tokens: int = 2048,
                    show_progress: bool = True,
                    failed_extraction: str = "never_group") -> list[QuestionScore]:
    """One :class:`QuestionScore` per question, in order (see the module docstring)."""
    if m < 1:
        raise ValueError(f"m = {m}; allowed: m >= 1")
    check_failed_extraction(failed_extraction)
    valid = [(i, q) for i, q in enumerate(questions) if isinstance(q, str) and q.strip()]
    scores = [QuestionScore(question=q) for q in questions]
    if not valid:
        return scores
    prompts = [solver_prompt(tokenizer, q) for _, q in valid]
    samples = solver_engine.generate(prompts, n=m, temperature=temperature, top_p=top_p,
                                     top_k=top_k, max_new_tokens=max_new_tokens, seed=seed)
    answer_lists = [[extract_boxed(s.text) for s in samples[k * m:(k + 1) * m]]
                    for k in range(len(valid))]
    with tqdm(total=len(valid), desc="majority vote", unit="question",
              disable=not show_progress or len(valid) < 2 or bars_disabled()) as bar:
        votes = majority_votes(answer_lists, progress=bar.update, failed=failed_extraction)
    for (i, _), answers, (majority, acc) in zip(valid, answer_lists, votes, strict=True):
        scores[i].answers, scores[i].majority, scores[i].acc = answers, majority, acc
    return scores
