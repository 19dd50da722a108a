"""``vdlib plan PARAMS``: what a params file will cost, before anything loads.

A projection from the measured figures of the cost table (:mod:`vdlib.app.plan_table`), by stage,
iteration, run and notebook (arms x seeds runs), in seconds, GPU-hours and wall hours, with
each stage's peak memory per GPU (an estimate from the model's shape) against the card's.

The arithmetic, all pure (docs/SCALING.md, "Planning a run: vdlib plan"):

- **work** (:func:`work_from_config`): what one iteration asks for, from the params alone:
  GRPO steps x rollouts per step, K questions, M answers each, evaluation items x runs;
- **lengths** (:func:`assumed_lengths`): mean output lengths in tokens, those the measured runs
  of the figures' entry produced, capped at the params' limits (``max``: every output at its
  limit, every question valid, which is what dummy weights do);
- **stage seconds** (:func:`iteration_costs`): ``start-up + work``, where the work is
  generated tokens / the measured tokens per second (generation, scoring, evaluation), GRPO
  steps x the measured seconds per step scaled by the step's generated tokens against the
  measured step's (rollouts, and for the proposer the reward's M answers per valid rollout), or
  questions x seconds per question (metrics); a run adds once what its figures measured
  iteration 1 to spend beyond a later one (``first_iteration_extra_s``: the warm-start, cold
  caches, engine starts under ``engine.lifetime: run``);
- **memory** (:func:`memory_plan`): an estimate per stage and GPU: the policy in mixed
  precision (fp32 weights, gradients and AdamW's two moments: 16 bytes a parameter; with
  ``optimizer_offload`` bf16 weights and fp32 gradient sums, 6 bytes, the rest in CPU
  memory), the bf16 reference model, checkpointed activations and the logits of one
  micro-batch, and the vLLM engines resident in that stage under the params' lifetime and
  memory settings.

The pure arithmetic and the plan's data are :mod:`vdlib.app.plan_model` (re-exported here).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vdlib.app.plan_model import (
    BENCHMARK_ITEMS,
    STAGES,
    Lengths,
    MemoryRow,
    Plan,
    StageCost,
    Work,
    assumed_lengths,
    iteration_costs,
    memory_plan,
    stage_seconds,
    stage_work,
    with_measured,
    work_from_config,
)
from vdlib.app.plan_table import (
    MissingFigures,
    PlanError,
    card_memory_gib,
    load_table,
    measure_command,
    resolve_shape,
)

__all__ = ["BENCHMARK_ITEMS", "STAGES", "Work", "Lengths", "StageCost", "MemoryRow", "Plan",
           "work_from_config", "assumed_lengths", "stage_seconds", "iteration_costs",
           "memory_plan", "with_measured", "make_plan", "PlanError", "MissingFigures",
           "NOT_COEVOLUTION"]

#: Notebooks whose params run no co-evolution (vdlib.app.notebooks: params/<profile>/<name>.yaml):
#: their GRPO and evaluation are planned by vdlib.app.plan_policy.
NOT_COEVOLUTION = {
    "curriculum_transfer": "notebook 03 runs no co-evolution: it verifies notebook 01's "
                           "curricula through the OpenAI API and GRPO-trains model.transfer on "
                           "them (the transfer section)",
    "single_policy": "notebook 04 runs no co-evolution: it GRPO-trains one policy on GSM8K "
                     "(the single_policy and solver sections)",
}


def _gpus_per_run(cfg: Any, gpus_per_run: int | None) -> int:
    """GPUs a run takes: the flag, else the params' ``launcher.gpus_per_run`` (the paper
    params say 2), or the GPUs of ``engine.server_gpus`` with the server backend."""
    if gpus_per_run is not None:
        return gpus_per_run
    servers = len(set(cfg.engine.server_gpus)) if cfg.engine.backend == "server" else 0
    return max(cfg.launcher.gpus_per_run, servers, 1)


def _check_gpu_params(cfg: Any) -> None:
    """One line for a CPU run or the transformers engine: the table prices vLLM runs on GPUs
    only, so such params get no GPU table (a CPU run takes minutes: time it by running it)."""
    if str(cfg.model.device).startswith("cpu"):
        raise PlanError(
            f"model.device {cfg.model.device} (the {cfg.profile} profile runs on the CPU): "
            "vdlib plan prices GPU runs from measured GPU figures; a CPU run takes minutes: "
            "time it by running it (`vdlib run PARAMS --iterations 1`)")
    if cfg.engine.backend == "hf":
        raise PlanError(
            "engine.backend hf (transformers generate): the cost table holds figures of vLLM "
            "engines only; plan these params with engine.backend vllm or server")


def make_plan(cfg: Any, *, params: str = "PARAMS", card: str = "h200", gpus: int | None = None,
              gpus_per_run: int | None = None, runs_per_gpu: int = 1, lengths: str = "measured",
              table: dict[str, Any] | None = None) -> Plan:
    """The plan of an ExperimentConfig: a co-evolution notebook's iterations, or the GRPO and
    evaluation of notebooks 03 and 04 (:mod:`vdlib.app.plan_policy`). Raises
    :class:`PlanError` in one line for what it cannot price (a CPU profile, a model the table
    has no shape for), :class:`MissingFigures` (carrying the memory estimate where the shape
    is known) when no figure can be measured or derived for it."""
    table = table if table is not None else load_table()
    _check_gpu_params(cfg)
    gpus_per_run = _gpus_per_run(cfg, gpus_per_run)
    if gpus_per_run < 1:
        raise PlanError(f"--gpus-per-run {gpus_per_run} (launcher.gpus_per_run): allowed: >= 1 "
                        "(0 is a CPU run, which vdlib plan does not price)")
    gpus = gpus_per_run if gpus is None else gpus
    if gpus < gpus_per_run:
        raise PlanError(f"--gpus {gpus}: a run of these params takes {gpus_per_run} GPU(s) "
                        "(launcher.gpus_per_run, or --gpus-per-run)")
    if runs_per_gpu < 1:
        raise PlanError(f"--runs-per-gpu {runs_per_gpu}: allowed: >= 1")
    notebook = Path(params).stem.split("@")[0]
    if notebook in NOT_COEVOLUTION:
        from vdlib.app.plan_policy import policy_plan

        return policy_plan(cfg, notebook, params=params, card=card, gpus=gpus,
                           gpus_per_run=gpus_per_run, runs_per_gpu=runs_per_gpu,
                           lengths=lengths, table=table)
    backend = cfg.engine.backend
    names = {"proposer": cfg.model.proposer, "solver": cfg.solver_model}
    roles = {role: resolve_shape(n, table) for role, n in names.items()}
    shape = max(roles.values(), key=lambda s: s.params())
    work = work_from_config(cfg)
    card_gib = card_memory_gib(card, table)
    notes = []
    if gpus_per_run > 1 and backend == "vllm":  # plan the paper's topology, as --measure does
        backend = "server"
        notes.append(f"{gpus_per_run} GPUs a run (launcher.gpus_per_run): priced with the "
                     "figures of the paper's topology in one process (a vLLM server per GPU "
                     "for the reward, generation and scoring; the trainer on GPU 0), which "
                     "`vdlib plan --measure --gpus-per-run` measures; the params launch the "
                     "run under `accelerate launch` (one process and engine per GPU), whose "
                     "figures are not measured yet: there the GRPO phases train on both GPUs "
                     "but generation and scoring run on the main process's GPU alone, so "
                     "they may take up to twice the time priced")
    lifetime = cfg.engine.lifetime if backend == "vllm" else "stage"
    memory = memory_plan(shape, work, cfg.engine, card_gib, backend=backend, lifetime=lifetime,
                         gpus_per_run=gpus_per_run, runs_per_gpu=runs_per_gpu,
                         dtype_bytes=4 if cfg.model.dtype == "float32" else 2,
                         reference=cfg.proposer.kl_beta > 0 or cfg.solver.kl_beta > 0,
                         offload=cfg.proposer.optimizer_offload or cfg.solver.optimizer_offload)
    hint = ""
    if cfg.profile == "paper" and gpus_per_run == 1:
        two = measure_command(params, card=card, gpus_per_run=2, dummy=True, shape=shape.name)
        hint = (" The paper runs each on 2 x H200 (paper, App. 'Compute requirements'; the "
                "paper params' launcher.gpus_per_run: 2): "
                f"`vdlib plan {params} --gpus-per-run 2` plans that topology once {two} "
                "(on H100s: --card h100).")
    from vdlib.app.plan_derive import figures_for

    chosen = {}
    for s in dict.fromkeys(roles.values()):
        chosen[s.name] = figures_for(table, s, card, backend=backend, lifetime=lifetime,
                                     gpus_per_run=gpus_per_run, runs_per_gpu=runs_per_gpu,
                                     params=params, memory=memory, hint=hint)
    figures, entry, more, estimate = chosen[roles["solver"].name]
    notes += more
    if len(chosen) > 1:  # cross-scale: each stage priced with the shape of the role it runs
        prop = chosen[roles["proposer"].name]
        figures = {**figures, "proposer": prop[0]["proposer"], "generate": prop[0]["generate"]}
        notes += prop[2]
        estimate = " ".join(x for x in (
            f"**estimate** (cross-scale): proposer GRPO and generation priced at the proposer's "
            f"shape ({roles['proposer'].name}: {prop[1]['id']}), scoring, solver GRPO, metrics "
            f"and evaluation at the solver's ({roles['solver'].name}: {entry['id']}); the "
            "proposer reward's answers (the solver's) at the proposer's step rate; lengths of "
            "the solver's figures; memory of the larger shape.", prop[3], estimate) if x)
    if not estimate:  # measured peaks belong to the setup they were measured in
        memory = with_measured(memory, entry.get("memory", {}).get("per_stage_gib", {}),
                               runs_per_gpu)
    if not cfg.engine.enforce_eager and entry.get("enforce_eager"):
        notes.append("the figures ran eager (no CUDA graphs); these params capture graphs, "
                     "which decodes faster and starts slower")
    n = assumed_lengths(entry["lengths"], work, lengths,
                        entry.get("measured_at", {}).get("num_solver_samples", 10))
    ev = {**figures["evaluate"]}
    evaluation = StageCost("evaluate", *stage_seconds("evaluate", work, n, ev),
                           ev["startup_s"], stage_work("evaluate", work, n), ev["entry"])
    base = StageCost("base_evaluate", *stage_seconds("base_evaluate", work, n, ev),
                     ev["startup_s"], stage_work("base_evaluate", work, n), ev["entry"])
    entry_id = entry["id"] if len(chosen) == 1 else " + ".join(c[1]["id"] for c in
                                                               chosen.values())
    return Plan(params, card, gpus, gpus_per_run, runs_per_gpu, shape, work, n, entry_id,
                iteration_costs(work, n, figures), evaluation, base, memory, notes,
                estimate=estimate)
