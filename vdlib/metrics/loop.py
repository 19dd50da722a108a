"""Per-iteration numbers of the co-evolution loop, computed from the iteration's artifacts.

``iteration_metrics(iter_dir, t, alphas)`` reads ``proposer_rollouts.jsonl``,
``proposer_train.json``, ``questions.jsonl``, ``curriculum.jsonl`` and ``solver_train.json`` and
returns a flat dict (written to ``metrics.json``): the mask's retention in each phase
(``alpha_train`` for the proposer's GRPO rollouts, ``alpha_gen`` for curriculum generation; 1.0
where the phase is unmasked), counts (generated, valid questions, curriculum
size), mean self-consistency acc of the valid questions, agreement of the solvers' majority with
the proposer's answer, the proposer's valid-rollout fraction and mean reward, the mask's mean kept
fraction, the solver's mean training reward, and simple question statistics (mean whitespace
length, distinct whitespace tokens); for KL-Cov / Clip-Cov arms, how many proposer steps the
method acted in and its per-step means (:mod:`vdlib.metrics.cov_activity`). Diversity
metrics (Self-BLEU, Vendi, ...) are added by ``vdlib.metrics`` when present. Before the solver
phase (no ``solver_train.json`` yet: an iteration cut short, read by an export), the two solver
fields are None.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vdlib.metrics.cov_activity import cov_iteration_stats
from vdlib.utils.artifacts import read_jsonl

__all__ = ["iteration_metrics"]


def _mean(xs: list[float]) -> float | None:
    return round(sum(xs) / len(xs), 6) if xs else None


def iteration_metrics(iter_dir: Path, t: int, alphas: Mapping[str, float]) -> dict[str, Any]:
    """The iteration's metrics (see the module docstring); ``alphas``: mask phase -> retention
    (:func:`vdlib.method.mask_schedule.phase_alphas`)."""
    iter_dir = Path(iter_dir)
    rollouts = read_jsonl(iter_dir / "proposer_rollouts.jsonl")
    questions = read_jsonl(iter_dir / "questions.jsonl")
    curriculum = read_jsonl(iter_dir / "curriculum.jsonl")
    ptrain = json.loads((iter_dir / "proposer_train.json").read_text())
    solver_file = iter_dir / "solver_train.json"
    strain = json.loads(solver_file.read_text()) if solver_file.is_file() else None
    valid = [q for q in questions if q.get("valid")]
    scored = [q for q in valid if q.get("acc") is not None]
    texts = [q["question"] for q in valid]
    kept = [m["kept_fraction"] for m in ptrain.get("mask_log", [])]
    return {
        "iteration": t,
        **{f"alpha_{phase}": a for phase, a in alphas.items()},
        "proposer_masked": bool(ptrain.get("masked")),
        "kept_fraction": _mean(kept) if kept else 1.0,
        "proposer_rollouts": len(rollouts),
        "proposer_valid_fraction": _mean([float(r["valid"]) for r in rollouts]),
        "proposer_mean_reward": _mean([r["reward"] for r in rollouts]),
        "generated": len(questions),
        "valid_questions": len(valid),
        "valid_fraction": round(len(valid) / len(questions), 6) if questions else None,
        "mean_acc": _mean([q["acc"] for q in scored]),
        "proposer_agreement": _mean([float(bool(q.get("proposer_agrees"))) for q in scored]),
        "curriculum_size": len(curriculum),
        "solver_trained": None if strain is None else "skipped" not in strain,
        "solver_mean_reward": None if strain is None else strain.get("mean_reward"),
        "mean_question_words": _mean([float(len(x.split())) for x in texts]),
        "distinct_words": len({w for x in texts for w in x.split()}),
        # KL-Cov / Clip-Cov arms: how many proposer steps acted (vdlib.metrics.cov_activity)
        **cov_iteration_stats(ptrain.get("log_history", [])),
    }
