"""Evaluating a notebook's models: pass@1 of a checkpoint, of every run's trained roles, of the
starting checkpoint, and the proposers' answers checked by a verifier.

- :func:`evaluate_checkpoint` evaluates one model folder under ``cfg.evaluation`` into
  ``<folder>/summary.json`` (resumable, read back without loading the model when complete,
  :func:`read_evaluation`);
- :func:`evaluate_runs` does it for a role (solver, proposer or policy) of every run at an
  iteration, :func:`evaluate_base` for the untrained starting checkpoint (the tables' "Base"
  row);
- :func:`correctness_frame`: the fraction of valid questions whose proposer answer the
  ``verification.correctness_model`` confirms (paper ``tab:correctness``).

The summaries pool into a table's rows with :func:`vdlib.report.experiments.pool_seeds`
(:func:`vdlib.experiments.eval_grid.pool`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path

from vdlib.config import layout
from vdlib.config.experiment import ExperimentConfig
from vdlib.evaluation import EvalSummary, protocol_kwargs
from vdlib.report.experiments import RunKey, last_iteration

__all__ = ["read_evaluation", "evaluate_checkpoint", "evaluate_runs", "evaluate_base",
           "correctness_frame"]

logger = logging.getLogger(__name__)


def read_evaluation(out_dir: str | Path, cfg: ExperimentConfig) -> EvalSummary | None:
    """The finished evaluation in ``out_dir`` (its ``summary.json``) restricted to
    ``cfg.evaluation.benchmarks``, or None unless every benchmark has all
    ``cfg.evaluation.runs`` runs."""
    path = Path(out_dir) / "summary.json"
    if not path.is_file():
        return None
    summary = EvalSummary.from_dict(json.loads(path.read_text(encoding="utf-8")))
    want = set(cfg.evaluation.benchmarks)
    runs = {len(r.accuracies) for r in summary.results.values()}
    if want <= set(summary.results) and runs == {cfg.evaluation.runs}:
        return EvalSummary({b: summary.results[b] for b in cfg.evaluation.benchmarks},
                           summary.protocol)
    return None


def evaluate_checkpoint(model_dir: str | Path, cfg: ExperimentConfig, out_dir: str | Path,
                        seed: int = 0) -> EvalSummary:
    """pass@1 of the model in ``model_dir`` under ``cfg.evaluation`` (records and
    ``summary.json`` in ``out_dir``; a complete folder is read back without loading the
    model)."""
    from vdlib.engines.models import resolve_device
    from vdlib.engines.setting import open_engine
    from vdlib.evaluation import ROUND_TOKENS, evaluate

    out_dir = Path(out_dir)
    done = read_evaluation(out_dir, cfg)
    if done is not None:
        logger.info("evaluation %s: complete, read back", out_dir)
        return done
    device = str(resolve_device(cfg.model.device))
    dtype = cfg.model.dtype if device != "cpu" else "float32"
    ev = cfg.evaluation
    with open_engine(cfg.engine, str(model_dir), device=device, dtype=dtype,
                     cache_dir=cfg.model.cache_dir, max_new_tokens=ev.max_context,
                     max_prompt_tokens=0, batch_size=ev.batch_size, round_tokens=ROUND_TOKENS,
                     show_progress=False, seed=seed) as engine:
        summary = evaluate(engine, engine.tokenizer, ev.benchmarks, seed=seed, out_dir=out_dir,
                           **protocol_kwargs(cfg.evaluation))
    return summary


def evaluate_runs(runs: Mapping[RunKey, Path], cfg: ExperimentConfig, role: str = "solver",
                  iteration: int | None = None) -> dict[RunKey, EvalSummary]:
    """Evaluate ``iter_<iteration>/<role>_model`` (default: each run's last iteration) of every
    run; records under ``<run>/eval/<role>_iter<t>/``. ``role``: solver, proposer or policy
    (single-policy runs: ``<run>/policy_model``)."""
    if role not in ("solver", "proposer", "policy"):
        raise ValueError(f"role = {role!r}; allowed: solver, proposer, policy")
    out: dict[RunKey, EvalSummary] = {}
    for key, run_dir in runs.items():
        run_dir = Path(run_dir)
        if role == "policy":
            model_dir = layout.policy_model_dir(run_dir)
            out_dir = layout.evaluation_dir(run_dir, role)
        else:
            t = iteration if iteration is not None else last_iteration({key: run_dir})
            model_dir = layout.role_model_dir(run_dir, t, role)
            out_dir = layout.evaluation_dir(run_dir, role, t)
        out[key] = evaluate_checkpoint(model_dir, cfg, out_dir)
    return out


def evaluate_base(cfg: ExperimentConfig, model: str | None = None) -> EvalSummary:
    """The starting checkpoint of ``model`` (default ``cfg.solver_model``; format-warm-started
    when ``warm_start.mode`` is sft), under ``<output_dir>/<experiment>/base_eval/<name>/``."""
    from vdlib.loop.model_store import ModelStore

    name = model or cfg.solver_model
    path = ModelStore(cfg).base(name, "base")
    return evaluate_checkpoint(path, cfg,
                               layout.base_evaluation_dir(cfg.output_dir, cfg.experiment, name))


def correctness_frame(runs: Mapping[RunKey, Path], cfg: ExperimentConfig):
    """Tidy ``arm, seed, iteration, correct`` (fraction of valid questions whose proposer answer
    the ``verification.correctness_model`` confirms; paper ``tab:correctness``)."""
    import pandas as pd

    from vdlib.evaluation.verification import make_verifier, proposer_correctness

    verifier = make_verifier(cfg.verification, "correctness", device=cfg.model.device,
                             engine=cfg.engine)
    rows = []
    for (arm, seed), run_dir in runs.items():
        for t, frac in proposer_correctness(run_dir, verifier).items():
            rows.append({"arm": arm, "seed": seed, "iteration": int(t), "correct": frac})
    verifier.close()
    return pd.DataFrame(rows, columns=["arm", "seed", "iteration", "correct"])
