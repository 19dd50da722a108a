"""What ``vdlib plan`` prints: a :class:`vdlib.app.plan.Plan` as Markdown tables (per stage, per
iteration, per run, per notebook; the memory estimate; warnings and notes), and the memory
estimate alone for a plan the table lacks figures for."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

from vdlib.app.plan_model import MemoryRow, Plan
from vdlib.app.plan_table import CARDS
from vdlib.loop.progress import PAUSED_EXIT

__all__ = ["format_plan", "format_memory", "duration", "add_plan_command", "plan_command"]

logger = logging.getLogger(__name__)

_LABEL = {"proposer": "proposer GRPO (rollouts, reward, update)", "generate": "curriculum "
          "generation", "score": "scoring", "curriculum": "difficulty filter",
          "solver": "solver GRPO", "metrics": "metrics",
          "policy": "single-policy GRPO", "transfer": "transfer GRPO (model.transfer)"}


def duration(seconds: float) -> str:
    """``42 s``, ``6.2 min``, ``3.4 h`` or ``2.1 d``.

    >>> duration(42), duration(372), duration(12_240), duration(200_000)
    ('42 s', '6.2 min', '3.4 h', '2.3 d')
    """
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    if seconds < 172_800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86_400:.1f} d"


def _n(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def format_memory(rows: list[MemoryRow]) -> str:
    """The memory estimate per stage: parts, total per GPU, and whether it fits the card."""
    if not rows:
        return ""
    r0 = rows[0]
    share = f" x {r0.runs_per_gpu} runs" if r0.runs_per_gpu > 1 else ""
    measured = any(m.measured_gib is not None for m in rows)
    lines = [f"Peak memory per GPU, **estimate** (GiB; card {r0.card_gib:.0f} GiB{share}; "
             "docs/SCALING.md, memory plan)"
             + (", and the figures' measured peak (nvidia-smi, every process on the card)"
                if measured else "") + ":", "",
             "| stage | what is resident | GiB per GPU | "
             + ("measured | " if measured else "") + "fits? |",
             "|---|---|---:|" + ("---:|" if measured else "") + "---|"]
    for m in rows:
        parts = ", ".join(f"{k} {v:.1f}" for k, v in m.parts)
        seen = ("-" if m.measured_gib is None else f"{m.measured_gib:.1f}") + " | " \
            if measured else ""
        lines.append(f"| {m.stage} | {parts} | {m.total_gib:.1f} | {seen}"
                     f"{'yes' if m.fits else '**no**'} |")
    return "\n".join(lines) + "\n"


def format_plan(plan: Plan) -> str:
    w, n = plan.work, plan.lengths
    params_m = plan.shape.params() / 1e6
    size = f"{params_m / 1000:.2f} B" if params_m >= 1000 else f"{params_m:.1f} M"
    mem = {m.stage: m for m in plan.memory}
    coev = plan.kind == "coevolution"
    figures = (f"- figures: `{plan.entry}` (vdlib/data/cost_table.json: measured; each figure "
               "names its source)" if not plan.estimate else
               f"- figures: `{plan.entry}`: {plan.estimate}")
    out = [
        f"# vdlib plan {plan.params}", "",
        f"- model shape **{plan.shape.name}** ({size} parameters), card **{plan.card.upper()}**, "
        f"{_n(plan.gpus, 'GPU')}: {_n(plan.gpus_per_run, 'GPU')} a run, "
        f"{_n(plan.runs_per_gpu, 'run')} a GPU, {_n(plan.parallel, 'run')} at once",
        figures,
        (f"- output lengths assumed (tokens): question {n.question:.0f}, proposer rollout "
         f"{n.proposer_rollout:.0f}, solver answer {n.answer:.0f}, solver rollout "
         f"{n.solver_rollout:.0f}, evaluation answer {n.eval_answer:.0f}; "
         f"{100 * n.valid_fraction:.1f} % of questions valid ({n.source})" if coev else
         f"- output lengths assumed (tokens): rollout {n.solver_rollout:.0f}, evaluation "
         f"answer {n.eval_answer:.0f} ({n.source})"), "",
        "## One iteration" if coev else "## One run's GRPO", "",
        "| stage | work | seconds | of which start-up | GPU-hours | peak GiB / GPU (est.) |",
        "|---|---|---:|---:|---:|---:|"]
    for s in plan.stages:
        gib = [m.total_gib for k, m in mem.items() if k.split(" (")[0] == s.name]
        out.append(f"| {_LABEL[s.name]} | {s.what} | {s.seconds:,.1f} | {s.startup_s:,.1f} | "
                   f"{plan.gpu_hours(s.seconds):.3f} | "
                   f"{f'{max(gib):.1f}' if gib else '-'} |")
    peak = max(m.total_gib for m in plan.memory)
    out.append(f"| **{'iteration' if coev else 'GRPO'}** | | **{plan.iteration_s:,.1f}** "
               f"({duration(plan.iteration_s)}) "
               f"| | {plan.gpu_hours(plan.iteration_s):.3f} | max {peak:.1f} of "
               f"{plan.memory[0].card_gib:.0f} |")
    ev, base = plan.evaluation, plan.base_evaluation
    out += ["", "## Run and notebook", "",
            "| what | work | wall | GPU-hours |", "|---|---|---:|---:|",
            f"| {'one iteration' if coev else 'GRPO'} | "
            f"{'the six stages' if coev else plan.stages[0].what} | "
            f"{duration(plan.iteration_s)} | {plan.gpu_hours(plan.iteration_s):.2f} |",
            f"| {'final solver' if coev else 'trained model'}'s evaluation | {ev.what} | "
            f"{duration(ev.seconds)} | {plan.gpu_hours(ev.seconds):.2f} |",
            *([f"| iteration 1's extra start-up (once a run) | the stages' "
               "first_iteration_extra_s (warm-start, cold caches, engine starts) | "
               f"{duration(plan.first_extra_s)} | {plan.gpu_hours(plan.first_extra_s):.2f} |"]
              if plan.first_extra_s else []),
            f"| one run | {_n(w.iterations, 'iteration') if coev else 'GRPO'} + the evaluation | "
            f"{duration(plan.run_s)} | "
            f"{plan.gpu_hours(plan.run_s):.2f} |",
            f"| starting checkpoint's evaluation (once) | {base.what} | "
            f"{duration(base.seconds)} | {base.seconds * plan.gpus_per_run / 3600:.2f} |",
            f"| **notebook** | {_n(w.arms, 'arm')} x {_n(w.seeds, 'seed')} = {_n(w.runs, 'run')}, "
            f"{plan.parallel} at once ({_n(plan.waves, 'wave')}) on {_n(plan.gpus, 'GPU')} | "
            f"**{duration(plan.notebook_wall_s)}** | **{plan.notebook_gpu_hours:.1f}** |", ""]
    out.append(format_memory(plan.memory))
    if plan.warnings:
        out += ["**Warnings**", ""] + [f"- {x}" for x in plan.warnings] + [""]
    if plan.notes:
        out += ["Notes", ""] + [f"- {x}" for x in plan.notes] + [""]
    out.append("Seconds = start-up + work at the measured rates (docs/SCALING.md, 'Planning a "
               "run'); a GRPO step scales with its generated tokens. GPU-hours count a run's "
               "GPUs divided among the runs sharing them.")
    return "\n".join(out) + "\n"


def add_plan_command(command: Callable[..., Any]) -> None:
    """Register ``vdlib plan`` through vdlib.app.cli's subcommand factory ``command``."""
    p = command("plan", help="what a params file will cost (per stage, iteration, run, "
                "notebook; GPU-hours, wall time, peak memory), before anything loads",
                description="A projection from vdlib/data/cost_table.json's measured figures "
                "(docs/SCALING.md, 'Planning a run'); fails naming what the table lacks and "
                "the --measure command that adds it.")
    p.add_argument("params", help="params YAML, e.g. params/paper/main_table.yaml")
    p.add_argument("--card", choices=list(CARDS), default="h200",
                   help="the GPU the runs will use (default h200, the paper's)")
    p.add_argument("--gpus", help="GPUs the notebook's runs spread over (default: "
                   "one run's GPUs, so runs go one after another)")
    p.add_argument("--gpus-per-run", help="GPUs a run takes (default: the params' "
                   "launcher.gpus_per_run, or its engine.server_gpus with the server backend)")
    p.add_argument("--runs-per-gpu", default="1", help="runs sharing one GPU, as "
                   "`vdlib grid --gpus 0,0,0` does (default 1)")
    p.add_argument("--lengths", choices=["measured", "max"], default="measured",
                   help="output lengths: the measured runs' means (default), or every output "
                   "at its token limit (the worst case)")
    p.add_argument("--table", help="cost table JSON (default: vdlib/data/cost_table.json)")
    m = p.add_argument_group("--measure (on a GPU; not yet run on one, docs/SCALING.md)")
    m.add_argument("--measure", action="store_true", help="run one iteration of the params' "
                   "first arm here, cut to --steps and --questions, and write its figures as a "
                   "cost-table entry to --out")
    m.add_argument("--out", default="benchmarks/results/cost_entries/measured.json",
                   help="--measure: the entry JSON to write")
    m.add_argument("--dummy-weights", action="store_true", help="--measure: a random-init "
                   "model of the params' shape instead of its weights")
    m.add_argument("--tokenizer", help="--dummy-weights: folder with the model's tokenizer.json "
                   "and tokenizer_config.json")
    m.add_argument("--bench-dir", default=".bench", help="--measure: local benchmark folder "
                   "(<dir>/<name>/test.jsonl), e.g. ../shared/benchmarks")
    m.add_argument("--work", default="/tmp/vdlib_plan_measure",
                   help="--measure: scratch folder for the run")
    m.add_argument("--eval-limit", default="64",
                   help="--measure: items per benchmark of the evaluation measured (default 64)")
    m.add_argument("--steps", default="2",
                   help="--measure: GRPO global batches of each role, at the params' batch "
                   "shapes (default 2; never more than the params'); the figures are per step")
    m.add_argument("--questions", default="128",
                   help="--measure: questions K generated and scored (default 128; never more "
                   "than the params'); the figures are per token")
    m.add_argument("--skip", default="", metavar="STAGE,...",
                   help="--measure --dummy-weights: stages replaced by stand-ins that write "
                   "their outputs without their work, to measure the others again (allowed: "
                   "proposer, generate, score, solver, metrics, evaluate)")
    p.set_defaults(func=plan_command)


#: vdlib plan's numeric flags: (attribute, allowed range). Parsed here, not by argparse, so
#: that a bad value ends in one line naming the flag (issue 50: no usage block, no traceback).
NUMERIC_FLAGS = {"gpus": (1, 4096), "gpus_per_run": (1, 1024), "runs_per_gpu": (1, 1024),
                 "eval_limit": (1, 10**6), "steps": (1, 10**6), "questions": (1, 10**7)}


def numeric_flags(args: Any) -> None:
    """Replace each of :data:`NUMERIC_FLAGS` given as text by its integer; raise ValueError in
    one line naming the flag when it is not a whole number in its range (``nan``, ``inf``,
    ``1e400``, ``2.5``, ``-1``, ``10**30`` all are refused).

    >>> from types import SimpleNamespace
    >>> a = SimpleNamespace(gpus="4", gpus_per_run=None)
    >>> numeric_flags(a); a.gpus
    4
    >>> numeric_flags(SimpleNamespace(gpus="nan"))
    Traceback (most recent call last):
    ...
    ValueError: --gpus 'nan': allowed: a whole number from 1 to 4096
    """
    for name, (lo, hi) in NUMERIC_FLAGS.items():
        raw = getattr(args, name, None)
        if raw is None or isinstance(raw, int) and not isinstance(raw, bool) and lo <= raw <= hi:
            continue
        text = str(raw).strip()
        flag = "--" + name.replace("_", "-")
        allowed = f"allowed: a whole number from {lo} to {hi}"
        if len(text) > 12 or not text.lstrip("+-").isdigit():
            raise ValueError(f"{flag} {text[:40]!r}: {allowed}")
        value = int(text)
        if not lo <= value <= hi:
            raise ValueError(f"{flag} {value}: {allowed}")
        setattr(args, name, value)


def plan_command(args: Any) -> int:
    """``vdlib plan``: print the plan (exit 0), or what the table lacks (exit 2)."""
    from vdlib.app.plan import make_plan
    from vdlib.app.plan_table import MissingFigures, PlanError, load_table
    from vdlib.config import ConfigError, load_params

    try:
        numeric_flags(args)
    except ValueError as e:
        sys.stderr.write(f"vdlib plan: {e}\n")
        return 2
    try:
        if args.measure:
            from vdlib.app.plan_measure import measure

            entry = measure(args.params, card=args.card, out=args.out, work=args.work,
                            dummy_weights=args.dummy_weights, tokenizer=args.tokenizer,
                            gpus_per_run=args.gpus_per_run or max(
                                load_params(args.params).launcher.gpus_per_run, 1),
                            bench_dir=args.bench_dir,
                            eval_limit=args.eval_limit, steps=args.steps,
                            questions=args.questions,
                            skip=tuple(x for x in args.skip.split(",") if x))
            sys.stdout.write(f"{args.out}: {entry['id']}, stages {', '.join(entry['stages'])}"
                             f"{'; stopped: ' + entry['error'] if entry['error'] else ''}"
                             f"{'; ' + entry['partial'] if entry.get('partial') else ''}\n")
            if entry["error"]:
                return 1
            return PAUSED_EXIT if entry.get("partial") else 0  # partial: run it again
        cfg = load_params(args.params)
        plan = make_plan(cfg, params=args.params, card=args.card, gpus=args.gpus,
                         gpus_per_run=args.gpus_per_run, runs_per_gpu=args.runs_per_gpu,
                         lengths=args.lengths, table=load_table(args.table))
    except ConfigError as e:
        sys.stderr.write(f"vdlib plan: {args.params}: {e}\n")
        return 2
    except MissingFigures as e:
        if e.memory:
            sys.stdout.write(f"# vdlib plan {args.params}\n\n{format_memory(e.memory)}\n")
            for m in e.memory:
                if not m.fits:
                    logger.warning("%s: ~%.0f GiB per GPU (estimate) does not fit the %s",
                                   m.stage, m.total_gib, args.card.upper())
        sys.stderr.write(f"vdlib plan: {args.params}: {e}\n")
        return 2
    except PlanError as e:
        sys.stderr.write(f"vdlib plan: {args.params}: {e}\n")
        return 2
    for warning in plan.warnings:
        logger.warning("%s", warning)
    sys.stdout.write(format_plan(plan))
    return 0
