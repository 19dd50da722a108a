"""The paper's evaluation protocol over an experiment grid: which runs each table evaluates,
how seeds pool into one row, the out-of-domain table's evaluations and the judged scores.

Thin drivers over :mod:`vdlib.experiments.evaluate` (evaluation of checkpoints, resumable),
:mod:`vdlib.report.experiments` (the finished runs, pooling) and :mod:`vdlib.evaluation` (the
protocol), for notebooks 01, 03 and 04:

- :func:`pool` turns per-run summaries (``(arm, seed)`` keys, or a plain key for one model)
  into one row per arm under ``evaluation.per_seed`` and ``evaluation.se_ddof`` (the paper:
  k single evaluations, population SD; :mod:`vdlib.utils.stats`);
- :func:`seed_eval_config` evaluates each trained model once when several seeds pool with
  ``first_run`` (only run 0 is used; run 0 is the same samples as a k-run evaluation's first);
- :func:`single_eval_config` is the protocol of the tables the paper prints as single
  evaluations (tab:curriculum_transfer, tab:vanilla_grpo): ``evaluation.single_eval_runs``;
- :func:`evaluate_ood` evaluates the base model and the baseline / VD solvers on
  ``evaluation.ood_benchmarks`` (tab:ood);
- :func:`judged` grades the same completions with the verification section's judge
  (``evaluation.judge``; :mod:`vdlib.evaluation.judged`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Hashable, Iterable, Mapping
from pathlib import Path
from typing import Any

from vdlib.config import layout
from vdlib.config.experiment import ExperimentConfig
from vdlib.evaluation import EvalSummary
from vdlib.evaluation.judged import judge_evaluation
from vdlib.experiments import evaluate
from vdlib.report import experiments as ex

__all__ = ["pool", "eval_config", "seed_eval_config", "single_eval_config", "evaluate_ood",
           "ood_config", "judged", "OOD_ARMS", "OOD_SUFFIX"]

logger = logging.getLogger(__name__)

#: The solvers tab:ood compares (paper: Base, Baseline, VD at alpha 0.75).
OOD_ARMS = ("baseline", "vd75")
#: Suffix of the out-of-domain evaluation folders (``eval/solver_ood_iter<t>``,
#: ``base_eval/<model>@ood``), apart from the maths evaluation of the same model.
OOD_SUFFIX = "ood"


def eval_config(cfg: ExperimentConfig, **evaluation: Any) -> ExperimentConfig:
    """``cfg`` with some ``evaluation`` keys replaced (a copy)."""
    return dataclasses.replace(cfg, evaluation=dataclasses.replace(cfg.evaluation, **evaluation))


def seed_eval_config(cfg: ExperimentConfig) -> ExperimentConfig:
    """The protocol for trained models: one evaluation run each when several seeds pool with
    ``per_seed: first_run`` (the only run a cell uses), else ``cfg`` unchanged."""
    if cfg.evaluation.per_seed == "first_run" and len(cfg.seeds) > 1:
        return eval_config(cfg, runs=1)
    return cfg


def single_eval_config(cfg: ExperimentConfig) -> ExperimentConfig:
    """The protocol of tab:curriculum_transfer (notebook 03) and tab:vanilla_grpo (notebook
    04), which the paper prints as single evaluations: ``runs = evaluation.single_eval_runs``."""
    return eval_config(cfg, runs=cfg.evaluation.single_eval_runs)


def pool(summaries: Mapping[Any, EvalSummary], cfg: ExperimentConfig
         ) -> dict[Hashable, EvalSummary]:
    """:func:`vdlib.report.experiments.pool_seeds`, the one pooling rule of every notebook:
    :func:`vdlib.evaluation.pool_runs` under ``cfg.evaluation``'s ``per_seed`` and ``se_ddof``
    (plain keys, e.g. the base model's row, keep their evaluation runs)."""
    return ex.pool_seeds(summaries, cfg)


def ood_config(cfg: ExperimentConfig) -> ExperimentConfig:
    """``cfg`` evaluating ``evaluation.ood_benchmarks`` from ``evaluation.ood_data_dir``."""
    ev = cfg.evaluation
    return eval_config(cfg, benchmarks=list(ev.ood_benchmarks), data_dir=ev.ood_data_dir)


def _base_path(cfg: ExperimentConfig, model: str) -> Path:
    from vdlib.loop.model_store import ModelStore

    return Path(ModelStore(cfg).base(model, "base"))


def evaluate_ood(runs: Mapping[ex.RunKey, Path], cfg: ExperimentConfig,
                 arms: Iterable[str] = OOD_ARMS) -> dict[Hashable, EvalSummary]:
    """tab:ood's evaluations: ``{"base": ..., "baseline": ..., "vd75": ...}`` (pooled over
    seeds) on ``evaluation.ood_benchmarks``; ``{}`` when that list is empty. Records under
    ``<run>/eval/solver_ood_iter<t>/`` and ``base_eval/<model>@ood/``."""
    if not cfg.evaluation.ood_benchmarks:
        return {}
    ocfg = ood_config(cfg)
    name = cfg.solver_model
    base = evaluate.evaluate_checkpoint(
        _base_path(cfg, name), ocfg,
        layout.base_evaluation_dir(cfg.output_dir, cfg.experiment, f"{name}@{OOD_SUFFIX}"))
    tcfg = seed_eval_config(ocfg)
    trained: dict[Any, EvalSummary] = {}
    for key, run_dir in runs.items():
        if key[0] not in tuple(arms):
            continue
        t = ex.last_iteration({key: run_dir})
        trained[key] = evaluate.evaluate_checkpoint(
            layout.role_model_dir(run_dir, t, "solver"), tcfg,
            layout.evaluation_dir(run_dir, f"solver_{OOD_SUFFIX}", t))
    return pool({"base": base, **trained}, cfg)


def judged(runs: Mapping[ex.RunKey, Path], cfg: ExperimentConfig, role: str = "solver",
           base_model: str | None = None) -> dict[Hashable, EvalSummary]:
    """The judge's pass@1 of the completions :func:`vdlib.experiments.evaluate.evaluate_runs`
    (and :func:`vdlib.experiments.evaluate.evaluate_base` for ``base_model``) wrote, pooled
    like :func:`pool`; the judge is ``verification.correctness_model``; ``{}`` unless
    ``evaluation.judge``. Call it after those evaluations."""
    if not cfg.evaluation.judge:
        return {}
    from vdlib.evaluation.verification import make_verifier

    verifier = make_verifier(cfg.verification, "correctness", device=cfg.model.device,
                             engine=cfg.engine)
    out: dict[Any, EvalSummary] = {}
    try:
        if base_model is not None:
            out["base"] = judge_evaluation(
                layout.base_evaluation_dir(cfg.output_dir, cfg.experiment, base_model),
                verifier, cfg.evaluation.se_ddof)
        for key, run_dir in runs.items():
            if role == "policy":
                folder = layout.evaluation_dir(run_dir, role)
            else:
                folder = layout.evaluation_dir(run_dir, role, ex.last_iteration({key: run_dir}))
            out[key] = judge_evaluation(folder, verifier, cfg.evaluation.se_ddof)
    finally:
        verifier.close()
    return pool(out, cfg)
