"""``vdlib plan`` for the notebooks that run no co-evolution: 03 (curriculum transfer) and 04
(single policy). Each run is one GRPO phase and an evaluation of what it trained; the
notebook adds the starting checkpoint's evaluation once. Priced with the same measured figures
and arithmetic as a co-evolution iteration (:mod:`vdlib.app.plan_model`): the GRPO phase with the
shape's solver GRPO step (seconds per step scaled by its generated tokens), the evaluation
with its evaluation rate.

- **single policy** (04, ``vdlib.loop.policy.run_single_policy``): ``solver.max_steps`` GRPO
  steps of ``solver.global_batch_size x num_generations`` rollouts on the training problems,
  per arm and seed; each trained policy and the starting checkpoint evaluated
  ``evaluation.single_eval_runs`` times (the paper's single evaluations, tab:vanilla_grpo).
- **curriculum transfer** (03, ``vdlib.loop.policy.train_transfer``): a fresh
  ``model.transfer`` GRPO-trained with the ``transfer`` section on a verified curriculum:
  ``min(transfer.max_steps, ceil(questions x epochs / global batch))`` steps. The curriculum
  is not known before notebook 01 has run and the verifier has kept its share, so the plan
  takes the K questions of ``curriculum.num_questions`` as its size: an upper bound (the
  paper: verification keeps roughly 20-31 % of the band's questions). The verification itself
  (OpenAI API calls) uses no GPU and is not priced.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from vdlib.app.plan_model import (
    Plan,
    StageCost,
    assumed_lengths,
    benchmark_items,
    memory_plan,
    stage_seconds,
    with_measured,
    work_from_config,
)
from vdlib.app.plan_table import card_memory_gib, resolve_shape

__all__ = ["policy_plan", "LABELS"]

#: What a policy plan's stage is called in the report.
LABELS = {"policy": "single-policy GRPO", "transfer": "transfer GRPO (model.transfer)"}


def _policy_work(cfg: Any, notebook: str) -> tuple[Any, Any, str, str]:
    """(work, the GRPO role config, the model, a sentence on the step count)."""
    base = work_from_config(cfg)
    ev = cfg.evaluation
    items, unplanned = benchmark_items(ev)
    runs = ev.single_eval_runs
    if notebook == "single_policy":
        role, model = cfg.solver, cfg.model.proposer
        steps = role.max_steps
        why = f"solver.max_steps = {steps}"
    else:
        role, model = cfg.transfer, cfg.model.transfer
        k = cfg.curriculum.num_questions
        steps = min(role.max_steps, math.ceil(k * role.epochs / role.global_batch_size))
        why = (f"at most {steps} (a curriculum of at most K = {k:,} verified questions x "
               f"{role.epochs} epochs / {role.global_batch_size} a step; the real curriculum "
               "is the share the verifier keeps)")
    work = replace(base, iterations=1, proposer_steps=0, questions=0,
                   solver_steps=steps, solver_rollouts=role.global_batch_size
                   * role.num_generations, solver_max=role.max_response_length,
                   micro_batch=role.micro_batch_size_update,
                   eval_items=items * runs, base_eval_items=items * runs,
                   unplanned=unplanned)
    return work, role, model, why


def policy_plan(cfg: Any, notebook: str, *, params: str, card: str, gpus: int,
                gpus_per_run: int, runs_per_gpu: int, lengths: str,
                table: dict[str, Any]) -> Plan:
    """The plan of notebook 03 (``notebook="curriculum_transfer"``) or 04
    (``"single_policy"``): one GRPO phase and one evaluation per run (arms x seeds)."""
    from vdlib.app.plan_derive import figures_for

    work, role, model, why = _policy_work(cfg, notebook)
    shape = resolve_shape(model, table)
    card_gib = card_memory_gib(card, table)
    backend = cfg.engine.backend
    notes = [f"GRPO steps: {why}"]
    if gpus_per_run > 1 and backend == "vllm":
        backend = "server"
        notes.append(f"{gpus_per_run} GPUs a run (launcher.gpus_per_run): the GRPO step is "
                     "priced at the figures' one training GPU (the params train under "
                     "`accelerate launch`, data-parallel; not measured yet, so an upper bound)")
    lifetime = cfg.engine.lifetime if backend == "vllm" else "stage"
    memory = memory_plan(shape, work, cfg.engine, card_gib, backend=backend, lifetime=lifetime,
                         gpus_per_run=gpus_per_run, runs_per_gpu=runs_per_gpu,
                         dtype_bytes=4 if cfg.model.dtype == "float32" else 2,
                         reference=role.kl_beta > 0, offload=role.optimizer_offload)
    figures, entry, more, estimate = figures_for(
        table, shape, card, backend=backend, lifetime=lifetime, gpus_per_run=gpus_per_run,
        runs_per_gpu=runs_per_gpu, params=params, memory=memory)
    notes += more
    if not estimate:  # measured peaks belong to the setup they were measured in
        memory = with_measured(memory, entry.get("memory", {}).get("per_stage_gib", {}),
                               runs_per_gpu)
    stage = "policy" if notebook == "single_policy" else "transfer"
    memory = [replace(m, stage=m.stage.replace("solver", stage)) for m in memory
              if m.stage.startswith(("solver", "evaluate"))]
    n = assumed_lengths(entry["lengths"], work, lengths,
                        entry.get("measured_at", {}).get("num_solver_samples", 10))
    seconds, tokens = stage_seconds("solver", work, n, figures["solver"])
    extra = float(figures["solver"].get("first_iteration_extra_s", 0.0))
    grpo = StageCost(stage, round(seconds + extra, 1), tokens,
                     figures["solver"]["startup_s"] + extra,  # one phase: an iteration 1
                     f"{work.solver_steps:,} steps x {work.solver_rollouts} rollouts of "
                     f"{n.solver_rollout:.0f} tokens", figures["solver"]["entry"])
    ev = figures["evaluate"]
    what = f"{work.eval_items:,} answers of {n.eval_answer:.0f} tokens"
    evaluation = StageCost("evaluate", *stage_seconds("evaluate", work, n, ev),
                           ev["startup_s"], what, ev["entry"])
    base = StageCost("base_evaluate", *stage_seconds("base_evaluate", work, n, ev),
                     ev["startup_s"], what, ev["entry"])
    if notebook == "curriculum_transfer":
        notes.append("the curricula's verification (OpenAI API, notebook 03's first step) "
                     "uses no GPU and is not priced")
    return Plan(params, card, gpus, gpus_per_run, runs_per_gpu, shape, work, n, entry["id"],
                [grpo], evaluation, base, memory, notes, estimate=estimate, kind=notebook)
