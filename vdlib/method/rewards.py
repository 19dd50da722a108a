"""Rewards: proposer uncertainty reward, total proposer reward, solver reward.

One signature everywhere: lists in, list of floats out.

- :func:`proposer_reward` (paper, Sec. "Preliminaries", Algorithm 1): r = min(acc, 1 - acc) if
  tau_min <= acc <= tau_max else 0 (``variant="paper"``); R-Zero's code pays min(acc, 1 - acc)
  for every acc (``variant="rzero"``). ``acc = None`` marks a rollout that failed to parse
  (no ``<question>`` block or no ``\\boxed{}`` answer): it gets ``failure_value`` (paper
  Algorithm 1: 0; R-Zero code: -1), whatever the variant.
- :func:`total_proposer_reward`: proposer_reward - lambda * BLEU-cluster penalty
  (:func:`bleu_cluster_penalty`, R-Zero's repetition penalty, re-exported from
  ``vdlib.method.bleu_penalty``); failed rollouts keep ``failure_value`` (no penalty on top).
- :func:`proposer_batch_rewards`: the composition for one GRPO rollout batch (paper Algorithm 1,
  phase 1): the BLEU-cluster penalty over the batch's questions (``penalty_scope``: ``"batch"``,
  every rollout, failed ones as the empty question, R-Zero; ``"valid"``, the parsed questions
  only), then :func:`total_proposer_reward`; returns the rewards and the penalties.
- :func:`solver_reward`: 1.0 when the completion's last ``\\boxed{}`` is equivalent to the target
  (the proposer's stated answer in the paper; the solvers' majority answer in R-Zero, chosen by
  ``scoring.solver_target``), else 0.0. A missing target or answer gives 0.0.

>>> [round(r, 6) for r in proposer_reward([0.5, 0.3, 0.7, 0.8, 1.0, None])]
[0.5, 0.3, 0.3, 0.0, 0.0, 0.0]
>>> [round(r, 6) for r in proposer_reward([0.8, 1.0, None], variant="rzero", failure_value=-1)]
[0.2, 0.0, -1.0]
>>> [round(r, 6) for r in total_proposer_reward([0.5, 0.4, None], [0.25, 0.5, 0.0])]
[0.25, -0.1, 0.0]
>>> solver_reward(["so \\\\boxed{34}", "\\\\boxed{92}", "no box"], ["34", "34", "34"])
[1.0, 0.0, 0.0]
"""

from __future__ import annotations

from collections.abc import Sequence

from vdlib.method.bleu_penalty import bleu_cluster_penalty
from vdlib.method.curriculum import in_window
from vdlib.method.grading import is_equivalent
from vdlib.method.parsing import extract_boxed

__all__ = ["proposer_reward", "total_proposer_reward", "proposer_batch_rewards", "solver_reward",
           "bleu_cluster_penalty", "VARIANTS", "PENALTY_SCOPES"]

VARIANTS = ("paper", "rzero")
#: which rollouts the repetition penalty clusters and divides by (config ``scoring.penalty_scope``)
PENALTY_SCOPES = ("batch", "valid")


def proposer_reward(accs: Sequence[float | None], tau_min: float = 0.3, tau_max: float = 0.7,
                    variant: str = "paper", failure_value: float = 0.0) -> list[float]:
    """Uncertainty reward per rollout (see the module docstring)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant = {variant!r} is not allowed; allowed values: "
                         f"{', '.join(VARIANTS)}")
    if not 0.0 <= tau_min <= tau_max <= 1.0:
        raise ValueError(f"tau_min = {tau_min}, tau_max = {tau_max}; allowed: "
                         "0 <= tau_min <= tau_max <= 1")
    out = []
    for acc in accs:
        if acc is None:
            out.append(float(failure_value))
            continue
        if not 0.0 <= acc <= 1.0:
            raise ValueError(f"acc = {acc} is outside [0, 1]")
        inside = in_window(acc, tau_min, tau_max)
        out.append(float(min(acc, 1.0 - acc)) if variant == "rzero" or inside else 0.0)
    return out


def total_proposer_reward(accs: Sequence[float | None], penalties: Sequence[float],
                          tau_min: float = 0.3, tau_max: float = 0.7, variant: str = "paper",
                          failure_value: float = 0.0, penalty_weight: float = 1.0) -> list[float]:
    """``proposer_reward(acc) - penalty_weight * penalty`` per rollout; a failed rollout
    (``acc is None``) gets ``failure_value`` with no penalty on top."""
    if len(accs) != len(penalties):
        raise ValueError(f"{len(accs)} accs but {len(penalties)} penalties")
    base = proposer_reward(accs, tau_min, tau_max, variant, failure_value)
    return [b if acc is None else b - penalty_weight * float(pen)
            for b, acc, pen in zip(base, accs, penalties, strict=True)]


def proposer_batch_rewards(questions: Sequence[str | None], accs: Sequence[float | None], *,
                           tau_min: float = 0.3, tau_max: float = 0.7, variant: str = "paper",
                           failure_value: float = 0.0, penalty_weight: float = 1.0,
                           bleu_threshold: float = 0.5,
                           penalty_scope: str = "batch") -> tuple[list[float], list[float]]:
    """``(rewards, penalties)`` of one rollout batch: ``questions`` (None for a rollout that
    failed to parse) and the frozen solver's ``accs`` of them (None for the same rollouts).
    penalties = :func:`bleu_cluster_penalty` over the batch (``penalty_scope`` in
    :data:`PENALTY_SCOPES`); rewards = :func:`total_proposer_reward` of accs and penalties.

    >>> rewards, penalties = proposer_batch_rewards(["a b c d", "a b c d", None], [0.5, 0.5, None])
    >>> [round(r, 3) for r in rewards], [round(p, 3) for p in penalties]
    ([-0.167, -0.167, 0.0], [0.667, 0.667, 0.333])
    >>> proposer_batch_rewards(["a b c d", "a b c d", None], [0.5, 0.5, None],
    ...                        penalty_scope="valid")
    ([-0.5, -0.5, 0.0], [1.0, 1.0, 0.0])
    """
    if penalty_scope not in PENALTY_SCOPES:
        raise ValueError(f"penalty_scope = {penalty_scope!r}; allowed: {', '.join(PENALTY_SCOPES)}")
    penalties = bleu_cluster_penalty(questions, bleu_threshold,
                                     include_failed=penalty_scope == "batch")
    rewards = total_proposer_reward(accs, penalties, tau_min, tau_max, variant, failure_value,
                                    penalty_weight)
    return rewards, penalties


def solver_reward(completions: Sequence[str], targets: Sequence[str | None]) -> list[float]:
    """1.0 when the last ``\\boxed{}`` of each completion is equivalent to its target."""
    if len(completions) != len(targets):
        raise ValueError(f"{len(completions)} completions but {len(targets)} targets")
    out = []
    for text, target in zip(completions, targets, strict=True):
        answer = extract_boxed(text)
        ok = answer is not None and target is not None and is_equivalent(target, answer)
        out.append(1.0 if ok else 0.0)
    return out
