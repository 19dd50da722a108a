"""The GRPO reward functions of the co-evolution loop, in TRL's reward-function signature
(``(prompts, completions, **columns) -> list[float]``), each recording every rollout for the
run's artifacts: :class:`ProposerReward` (paper Algorithm 1, phase 1: the frozen solver's
answers, R-Zero's uncertainty reward, the BLEU-cluster penalty) and :class:`SolverReward`
(phase 2: the curriculum's target answer). :class:`vdlib.loop.trainer.MaskedGRPOTrainer` calls
them. They only gather the inputs (the rollouts parsed, the frozen solver's answers) and record
what happened; the reward and its composition are :mod:`vdlib.method.rewards`
(:func:`~vdlib.method.rewards.proposer_batch_rewards`, :func:`~vdlib.method.rewards.solver_reward`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vdlib.config.experiment import ScoringConfig
from vdlib.engines.generation import GenerationEngine
from vdlib.loop.scoring import score_questions
from vdlib.method.parsing import extract_proposal
from vdlib.method.rewards import proposer_batch_rewards, solver_reward

__all__ = ["ProposerReward", "SolverReward", "completion_text"]


def completion_text(completion: Any) -> str:
    """A TRL completion as text (plain string, or conversational ``[{"content": ...}]``)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    return str(completion)


class ProposerReward:
    """TRL reward function of the proposer phase (paper Algorithm 1, phase 1).

    Each rollout is parsed (``<question>`` block then ``\\boxed{}`` answer); the FROZEN solver
    answers each valid question ``M`` times; reward = proposer_reward(acc) - lambda *
    BLEU-cluster penalty over the rollout batch; parse failures get the configured failure value.
    Every call appends one record per rollout to ``self.records`` (question, answer, acc,
    majority, reward, penalty, mask seed, step).
    """

    __name__ = "proposer_reward"

    def __init__(self, solver_engine: GenerationEngine, tokenizer: Any, cfg: ScoringConfig,
                 seed: int = 0, trainer_ref: Callable[[], Any] | None = None) -> None:
        self.engine, self.tokenizer, self.cfg, self.seed = solver_engine, tokenizer, cfg, seed
        self.trainer_ref = trainer_ref
        self.records: list[dict[str, Any]] = []
        self.calls = 0

    def __call__(self, prompts: list, completions: list, completion_ids: list | None = None,
                 **kwargs: Any) -> list[float]:
        cfg = self.cfg
        texts = [completion_text(c) for c in completions]
        proposals = [extract_proposal(t) for t in texts]
        questions = [p.question if p else None for p in proposals]
        scores = score_questions(questions, self.engine, self.tokenizer, cfg.num_solver_samples,
                                 seed=self.seed + 7919 * self.calls, temperature=cfg.temperature,
                                 top_p=cfg.top_p, top_k=cfg.top_k,
                                 max_new_tokens=cfg.max_new_tokens, show_progress=False,
                                 failed_extraction=cfg.failed_extraction)
        rewards, penalties = proposer_batch_rewards(
            questions, [s.acc for s in scores], tau_min=cfg.tau_min, tau_max=cfg.tau_max,
            variant=cfg.proposer_reward_variant, failure_value=cfg.parse_failure_reward,
            penalty_weight=cfg.penalty_weight, bleu_threshold=cfg.bleu_threshold,
            penalty_scope=cfg.penalty_scope)
        trainer = self.trainer_ref() if self.trainer_ref else None
        step = int(trainer.state.global_step) if trainer is not None else None
        mask = getattr(trainer, "current_mask_seed", None) if trainer is not None else None
        for i, (p, s, r, pen) in enumerate(zip(proposals, scores, rewards, penalties,
                                               strict=True)):
            self.records.append({
                "call": self.calls, "index": i, "step": step, "mask_seed": mask,
                "valid": p is not None, "question": s.question,
                "answer": p.answer if p else None, "acc": s.acc, "majority": s.majority,
                "solver_answers": s.answers, "penalty": pen, "reward": r,
                "num_tokens": len(completion_ids[i]) if completion_ids is not None else None,
                "text": texts[i],
            })
        self.calls += 1
        return rewards


class SolverReward:
    """TRL reward function of the solver phase: 1.0 when the completion's last ``\\boxed{}`` is
    equivalent to the example's ``answer`` column (the target chosen by the curriculum)."""

    __name__ = "solver_reward"

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def __call__(self, prompts: list, completions: list, answer: list | None = None,
                 **kwargs: Any) -> list[float]:
        texts = [completion_text(c) for c in completions]
        targets = answer if answer is not None else [None] * len(texts)
        rewards = solver_reward(texts, targets)
        self.records.extend({"target": t, "reward": r} for t, r in zip(targets, rewards,
                                                                         strict=True))
        return rewards
