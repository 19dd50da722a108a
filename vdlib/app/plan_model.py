"""The data and pure arithmetic of ``vdlib plan`` (:mod:`vdlib.app.plan`, docs/SCALING.md,
"Planning a run"): what one iteration asks for (:class:`Work`), the output lengths projected
with (:class:`Lengths`), each stage's seconds from its figures (:func:`stage_seconds`), the
memory estimate per stage and GPU (:func:`memory_plan`), and a :class:`Plan` with its run,
notebook and GPU-hour totals. Nothing here reads a file or loads a model.

>>> w = Work(iterations=1, runs=1, proposer_steps=3, proposer_rollouts=64, proposer_max=512,
...          solver_steps=10, solver_rollouts=32, solver_max=512, questions=1024,
...          question_max=512, answers=10, answer_max=512, eval_items=0, base_eval_items=0,
...          eval_max=512, micro_batch=2)
>>> lengths = Lengths(question=100, proposer_rollout=100, answer=100, solver_rollout=100,
...                   eval_answer=100, valid_fraction=1.0, reward_answers=10)
>>> figs = {"generate": {"tokens_per_s": 1000.0, "startup_s": 5.0}}
>>> stage_seconds("generate", w, lengths, figs["generate"])
(107.4, 102400.0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from vdlib.app.plan_table import PlanError, Shape

__all__ = ["BENCHMARK_ITEMS", "STAGES", "Work", "Lengths", "StageCost", "MemoryRow", "Plan",
           "benchmark_items", "work_from_config", "assumed_lengths", "stage_seconds",
           "stage_work", "iteration_costs", "memory_plan", "with_measured"]

#: Items per benchmark (paper, tab:benchmarks; OlympiadBench's maths_en subset: 674, the
#: shared benchmark folder's count; gsm_symbolic: vdlib's default draw of 100).
BENCHMARK_ITEMS = {"gsm8k": 1319, "math500": 500, "amc23": 40, "olympiadbench": 910,
                   "aime24": 30, "aime25": 30, "minerva": 272, "gsm_symbolic": 100}
OLYMPIADBENCH_MATHS_EN = 674
#: Prompt tokens assumed for the activation estimate and the evaluation's answer limit.
PROMPT_TOKENS = 256
GIB = 2**30
#: vLLM's own memory beside weights and KV cache (activations, CUDA context), GiB.
ENGINE_RUNTIME_GIB = 1.0
STAGES = ("proposer", "generate", "score", "curriculum", "solver", "metrics")
@dataclass(frozen=True)
class Work:
    """What the params ask of one iteration, one run's evaluation and the notebook."""

    iterations: int
    runs: int
    proposer_steps: int
    proposer_rollouts: int  # completions per step: prompts x G
    proposer_max: int
    solver_steps: int
    solver_rollouts: int
    solver_max: int
    questions: int  # K
    question_max: int
    answers: int  # M
    answer_max: int
    eval_items: int  # items x evaluation runs of one trained solver
    base_eval_items: int  # the same for the starting checkpoint (once a notebook)
    eval_max: int
    micro_batch: int
    arms: int = 1
    seeds: int = 1
    unplanned: tuple[str, ...] = ()  # benchmarks without an item count


@dataclass(frozen=True)
class Lengths:
    """Mean output lengths in tokens, the valid share of questions and the reward's answers
    per proposer rollout (M x the share of rollouts that parse)."""

    question: float
    proposer_rollout: float
    answer: float
    solver_rollout: float
    eval_answer: float
    valid_fraction: float
    reward_answers: float
    source: str = ""


@dataclass(frozen=True)
class StageCost:
    name: str
    seconds: float
    tokens: float
    startup_s: float
    what: str
    entry: str = ""
    first_extra_s: float = 0.0  # what iteration 1 adds (its figures' first_iteration_extra_s)


@dataclass(frozen=True)
class MemoryRow:
    stage: str
    parts: tuple[tuple[str, float], ...]
    card_gib: float
    runs_per_gpu: int = 1
    measured_gib: float | None = None  # the figures' own peak of this stage and GPU (nvidia-smi)

    @property
    def total_gib(self) -> float:
        return self.runs_per_gpu * sum(v for _, v in self.parts)

    @property
    def fits(self) -> bool:
        return max(self.total_gib, self.measured_gib or 0.0) <= self.card_gib


def with_measured(rows: list[MemoryRow], per_stage: dict[str, dict[str, float]],
                  runs_per_gpu: int = 1) -> list[MemoryRow]:
    """The estimate's rows with the figures' measured peaks beside them (pure): a row
    ``proposer (GPU 1)`` takes GPU 1's peak of the proposer stage, a row of every GPU (``generate``)
    the largest; a stage the entry has no clean peak for stays an estimate only. The peaks were
    measured with one run a GPU, so they count once per run sharing it.

    >>> rows = [MemoryRow("proposer (GPU 0)", (("policy", 60.0),), 140.0),
    ...         MemoryRow("generate", (("server", 56.0),), 140.0)]
    >>> [m.measured_gib for m in with_measured(rows, {"proposer": {"0": 128.8, "1": 56.8}})]
    [128.8, None]
    """
    out = []
    for m in rows:
        stage, _, gpu = m.stage.partition(" (GPU ")
        peaks = per_stage.get(stage, {})
        gpu = gpu.rstrip(")")
        value = peaks.get(gpu) if gpu else max(peaks.values(), default=None)
        out.append(replace(m, measured_gib=None if value is None
                           else round(float(value) * runs_per_gpu, 1)))
    return out


def benchmark_items(ev: Any) -> tuple[int, tuple[str, ...]]:
    total, unplanned = 0, []
    for name in ev.benchmarks:
        n = (OLYMPIADBENCH_MATHS_EN if name == "olympiadbench"
             and ev.olympiadbench_subset == "maths_en" else BENCHMARK_ITEMS.get(name))
        if n is None:
            unplanned.append(name)
            continue
        total += min(n, ev.limit) if ev.limit else n
    return total, tuple(unplanned + list(ev.ood_benchmarks))


def work_from_config(cfg: Any) -> Work:
    """The iteration's work from an ExperimentConfig (no model, no files). Evaluation follows
    the notebooks: each run's final solver once per seed when seeds pool as ``first_run``
    (``vdlib.experiments.eval_grid.seed_eval_config``), else ``evaluation.runs`` times; the
    starting checkpoint ``evaluation.runs`` times; out-of-domain benchmarks are not counted."""
    p, s, ev = cfg.proposer, cfg.solver, cfg.evaluation
    items, unplanned = benchmark_items(ev)
    seeds = max(len(cfg.seeds), 1)
    trained_runs = 1 if ev.per_seed == "first_run" and seeds > 1 else ev.runs
    return Work(
        iterations=cfg.iterations, runs=max(len(cfg.arms), 1) * seeds,
        arms=max(len(cfg.arms), 1), seeds=seeds,
        proposer_steps=p.max_steps, proposer_rollouts=p.global_batch_size * p.num_generations,
        proposer_max=p.max_response_length,
        solver_steps=s.max_steps, solver_rollouts=s.global_batch_size * s.num_generations,
        solver_max=s.max_response_length,
        questions=cfg.curriculum.num_questions, question_max=cfg.curriculum.max_new_tokens,
        answers=cfg.scoring.num_solver_samples, answer_max=cfg.scoring.max_new_tokens,
        eval_items=items * trained_runs, base_eval_items=items * ev.runs,
        eval_max=ev.max_new_tokens or max(ev.max_context - PROMPT_TOKENS, 1),
        micro_batch=max(p.micro_batch_size_update, s.micro_batch_size_update),
        unplanned=unplanned)


def assumed_lengths(measured: dict[str, Any], work: Work, mode: str = "measured",
                    measured_answers: int = 10) -> Lengths:
    """The lengths to project with: an entry's measured means capped at the params' limits,
    or with ``mode="max"`` every output at its limit and every rollout valid."""
    if mode == "max":
        return Lengths(work.question_max, work.proposer_max, work.answer_max, work.solver_max,
                       work.eval_max, 1.0, float(work.answers),
                       "every output at its token limit, every question valid (the worst "
                       "case; what dummy weights do)")
    if mode != "measured":
        raise PlanError(f"lengths {mode!r}: allowed: measured, max")
    per_answer = measured["reward_answers_per_rollout"] / measured_answers
    return Lengths(
        question=min(measured["question"], work.question_max),
        proposer_rollout=min(measured["proposer_rollout"], work.proposer_max),
        answer=min(measured["answer"], work.answer_max),
        solver_rollout=min(measured["solver_rollout"], work.solver_max),
        eval_answer=min(measured["answer"], work.eval_max),
        valid_fraction=measured["valid_fraction"],
        reward_answers=per_answer * work.answers,
        source=measured.get("source", ""))


def stage_seconds(stage: str, work: Work, lengths: Lengths, fig: dict[str, Any]
                  ) -> tuple[float, float]:
    """(seconds, generated tokens) of one stage of one iteration (``evaluate``: one trained
    solver's evaluation; ``base_evaluate``: the starting checkpoint's) from its figures."""
    if stage in ("proposer", "solver"):
        if stage == "proposer":
            rollout = work.proposer_rollouts * lengths.proposer_rollout
            reward = work.proposer_rollouts * lengths.reward_answers * lengths.answer
            steps = work.proposer_steps
        else:
            rollout, reward = work.solver_rollouts * lengths.solver_rollout, 0.0
            steps = work.solver_steps
        if "reward_tokens_per_s" in fig:  # step_s covers the rollouts and the update only
            step = (fig["step_s"] * rollout / fig["step_tokens"]
                    + reward / fig["reward_tokens_per_s"])
        else:  # step_s covers the step's generated tokens, the reward's answers included
            step = fig["step_s"] * (rollout + reward) / fig["step_tokens"]
        return round(fig["startup_s"] + steps * step, 1), float(steps * (rollout + reward))
    if stage == "metrics":
        return round(work.questions * fig["s_per_question"], 1), 0.0
    tokens = {"generate": work.questions * lengths.question,
              "score": work.questions * lengths.valid_fraction * work.answers * lengths.answer,
              "evaluate": work.eval_items * lengths.eval_answer,
              "base_evaluate": work.base_eval_items * lengths.eval_answer}[stage]
    return round(fig["startup_s"] + tokens / fig["tokens_per_s"], 1), float(tokens)


def stage_work(stage: str, w: Work, n: Lengths) -> str:
    if stage == "proposer":
        return (f"{w.proposer_steps} steps x {w.proposer_rollouts} rollouts of "
                f"{n.proposer_rollout:.0f} tokens, {n.reward_answers:.1f} answers of "
                f"{n.answer:.0f} each for the reward")
    if stage == "generate":
        return f"{w.questions:,} questions of {n.question:.0f} tokens"
    if stage == "score":
        return (f"{w.questions * n.valid_fraction:,.0f} valid questions x {w.answers} answers of "
                f"{n.answer:.0f} tokens")
    if stage == "solver":
        return (f"{w.solver_steps} steps x {w.solver_rollouts} rollouts of "
                f"{n.solver_rollout:.0f} tokens")
    if stage == "metrics":
        return f"{w.questions:,} questions"
    if stage == "curriculum":
        return "the difficulty filter (no GPU)"
    items = w.eval_items if stage == "evaluate" else w.base_eval_items
    return f"{items:,} answers of {n.eval_answer:.0f} tokens"


def iteration_costs(work: Work, lengths: Lengths, figures: dict[str, dict[str, Any]]
                    ) -> list[StageCost]:
    """The six stages of one iteration (curriculum: the filter, 0 s)."""
    out = []
    for stage in STAGES:
        if stage == "curriculum":
            out.append(StageCost(stage, 0.0, 0.0, 0.0, stage_work(stage, work, lengths)))
            continue
        fig = figures[stage]
        seconds, tokens = stage_seconds(stage, work, lengths, fig)
        out.append(StageCost(stage, seconds, tokens, fig.get("startup_s", 0.0),
                             stage_work(stage, work, lengths), fig.get("entry", ""),
                             float(fig.get("first_iteration_extra_s", 0.0))))
    return out


def _engine_gib(util: float, kv_gb: float | None, weights: float, card_gib: float) -> float:
    """A vLLM engine: weights + fixed KV cache + runtime, or its share of the card."""
    return weights + kv_gb + ENGINE_RUNTIME_GIB if kv_gb else max(util * card_gib, weights)


def memory_plan(shape: Shape, work: Work, engine: Any, card_gib: float, *,
                backend: str, lifetime: str, gpus_per_run: int = 1, runs_per_gpu: int = 1,
                dtype_bytes: int = 2, reference: bool = True,
                offload: bool = False) -> list[MemoryRow]:
    """Estimated peak memory per GPU of each stage (GiB; docs/SCALING.md's memory plan).
    ``engine`` is the params' EngineConfig. Under ``stage`` the proposer phase holds the
    reward's engine and TRL's rollout engine; under ``run`` one engine serves both; with the
    server backend (the paper's topology) the trainer and TRL's engine share GPU 0 and the
    reward's server has GPU 1 (one row per GPU). Several GPUs a run with the vllm backend is
    ``accelerate launch`` (DDP): the training state is replicated and DDP adds its fp32
    gradient buckets; ZeRO and FSDP, which shard it, are not modelled."""
    n = shape.params()
    weights = n * dtype_bytes / GIB
    seq = PROMPT_TOKENS + max(work.proposer_max, work.solver_max)
    act = work.micro_batch * seq * (shape.layers * shape.hidden * 2 + shape.vocab * 6) / GIB
    train = [("policy (bf16), fp32 gradient sums; AdamW offloaded", 6 * n / GIB)] if offload \
        else [("policy, grads, AdamW (fp32)", 16 * n / GIB)]
    if reference:
        train.append(("reference (bf16)", weights))
    train.append(("activations + logits", act))
    if gpus_per_run > 1 and backend != "server":
        train.append(("DDP gradient buckets", 4 * n / GIB))
    run_engine = _engine_gib(engine.gpu_memory_utilization, engine.kv_cache_gb, weights, card_gib)
    trl_engine = _engine_gib(engine.rollout_gpu_memory_utilization, engine.rollout_kv_cache_gb,
                             weights, card_gib)
    if backend == "server":  # the paper's topology: trainer on GPU 0, a server per GPU
        server = ("vLLM server (one per GPU)", engine.gpu_memory_utilization * card_gib)
        trl = ("TRL's rollout engine", trl_engine)
        rows = {"proposer (GPU 0)": train + [trl],
                "proposer (GPU 1)": [("vLLM server (the reward's answers)", server[1])],
                "solver (GPU 0)": train + [trl], "generate": [server], "score": [server],
                "evaluate": [server]}
    elif lifetime == "run":
        rows = {"proposer": train + [("the run's engine (rollouts and reward)", run_engine)],
                "solver": train + [("the run's engine (rollouts)", run_engine)],
                "generate": [("the run's engine", run_engine)],
                "score": [("the run's engine", run_engine)],
                "evaluate": [("vLLM engine", run_engine)]}
    else:
        rows = {"proposer": train + [("reward engine", run_engine),
                                     ("TRL's rollout engine", trl_engine)],
                "solver": train + [("TRL's rollout engine", trl_engine)],
                "generate": [("vLLM engine", run_engine)], "score": [("vLLM engine", run_engine)],
                "evaluate": [("vLLM engine", run_engine)]}
    return [MemoryRow(s, tuple((k, round(v, 1)) for k, v in parts), card_gib, runs_per_gpu)
            for s, parts in rows.items()]


@dataclass
class Plan:
    """A projection of one params file on one card and machine."""

    params: str
    card: str
    gpus: int
    gpus_per_run: int
    runs_per_gpu: int
    shape: Shape
    work: Work
    lengths: Lengths
    entry: str
    stages: list[StageCost]
    evaluation: StageCost
    base_evaluation: StageCost
    memory: list[MemoryRow]
    notes: list[str] = field(default_factory=list)
    estimate: str = ""  # empty: measured figures; else what was derived or assumed, and how
    kind: str = "coevolution"  # or single_policy, transfer (vdlib.app.plan_policy)

    @property
    def iteration_s(self) -> float:
        return round(sum(s.seconds for s in self.stages), 1)

    @property
    def first_extra_s(self) -> float:
        """What iteration 1 spends beyond a later one (start-ups its figures measured apart:
        the warm-start, cold caches, engine starts under ``engine.lifetime: run``); once a
        run."""
        return round(sum(s.first_extra_s for s in self.stages), 1)

    @property
    def run_s(self) -> float:
        return round(self.work.iterations * self.iteration_s + self.first_extra_s
                     + self.evaluation.seconds, 1)

    @property
    def parallel(self) -> int:
        return max(self.gpus // self.gpus_per_run, 1) * self.runs_per_gpu

    @property
    def waves(self) -> int:
        return math.ceil(self.work.runs / self.parallel)

    @property
    def notebook_wall_s(self) -> float:
        return round(self.waves * self.run_s + self.base_evaluation.seconds, 1)

    def gpu_hours(self, seconds: float) -> float:
        """GPU-hours of ``seconds`` of one run (its GPUs, shared by runs_per_gpu runs)."""
        return seconds * self.gpus_per_run / self.runs_per_gpu / 3600

    @property
    def notebook_gpu_hours(self) -> float:
        return (self.work.runs * self.gpu_hours(self.run_s)
                + self.base_evaluation.seconds * self.gpus_per_run / 3600)

    @property
    def warnings(self) -> list[str]:
        out = [f"{m.stage}: ~{max(m.total_gib, m.measured_gib or 0.0):.0f} GiB per GPU ("
               f"{'measured' if (m.measured_gib or 0.0) > m.total_gib else 'estimate'}"
               f"{f', {m.runs_per_gpu} runs' if m.runs_per_gpu > 1 else ''}) does not fit the "
               f"{self.card.upper()}'s {m.card_gib:.0f} GiB" for m in self.memory if not m.fits]
        if self.work.unplanned:
            out.append(f"not counted (no item counts): {', '.join(self.work.unplanned)}")
        return out
