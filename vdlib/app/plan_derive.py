"""Figures for what the cost table has not measured, derived from what it has, and labelled so.

``vdlib plan`` prices a params file from measured figures (:mod:`vdlib.app.plan_table`). Where
the table has no entry of the params' model shape on the card, this module builds one from the
measured entries of neighbouring shapes on the same card (pure; nothing loads):

- **bracketed** (a measured shape smaller and one larger): every figure is interpolated in
  log-log against the parameter count (linearly in log-parameters where one side is 0, a
  start-up under ``engine.lifetime: run``),
  ``log y = log y1 + (log y2 - log y1) * (log n - log n1) / (log n2 - log n1)``. Rates are
  compared per generating GPU (a ``server`` entry's generation, scoring and evaluation ran on
  its ``gpus_per_run`` GPUs; its GRPO step and an in-process ``vllm`` entry's stages on one)
  and converted back to the setup asked for; the proposer's step with its reward's answers
  folded in where an entry prices them apart;
- **one side only**, within :data:`MAX_STEP` x the parameters: the nearest shape's figures,
  the time per token scaled in proportion to the parameters (start-ups and the metrics'
  seconds per question kept); farther than that nothing is derived (the measured error stands);
- a shape's own **partial** measurements (a vLLM throughput of that shape, not inside a loop)
  replace the derived rates of the stages they cover.

Output lengths come from the neighbour nearest in log-parameters. The entry returned has
``derived`` set to a sentence naming its sources; :mod:`vdlib.app.plan_report` prints it as an
estimate. A measured entry of the shape, when one is added (``vdlib plan --measure``, then
``benchmarks/cost_table.py --write``), takes precedence: derivation runs only without one.

>>> a = {"shape": "s", "gpus_per_run": 1, "backend": "vllm",
...      "stages": {"score": {"tokens_per_s": 1000.0, "startup_s": 10.0}}}
>>> b = {"shape": "l", "gpus_per_run": 1, "backend": "vllm",
...      "stages": {"score": {"tokens_per_s": 100.0, "startup_s": 100.0}}}
>>> fig = interpolate_stage("score", (1e8, a), (1e10, b), 1e9, gpus=1)
>>> round(fig["tokens_per_s"]), round(fig["startup_s"])
(316, 32)
"""

from __future__ import annotations

import math
from typing import Any

from vdlib.app.plan_table import (
    STAGE_FIGURES,
    MissingFigures,
    Shape,
    card_memory_gib,
    measure_command,
    resolve_shape,
    select_figures,
)

__all__ = ["figures_for", "derive_entry", "interpolate_stage", "generating_gpus", "PARTIAL_STAGES"]

#: The most a one-sided derivation scales a neighbour's figures by (parameters ratio).
MAX_STEP = 2.0
#: A partial measurement's ``what`` prefix -> (stage, figure) it stands for.
PARTIAL_STAGES = {"vLLM proposer_generation": ("generate", "tokens_per_s"),
                  "vLLM solver_scoring": ("score", "tokens_per_s"),
                  "vLLM evaluation": ("evaluate", "tokens_per_s"),
                  "vLLM engine start": (("generate", "score", "evaluate"), "startup_s")}


def generating_gpus(entry: dict[str, Any], stage: str) -> int:
    """GPUs a stage of ``entry`` generated on: a ``server`` entry's generation, scoring and
    evaluation spread over its ``gpus_per_run`` servers; everything else on one GPU.

    >>> generating_gpus({"backend": "server", "gpus_per_run": 2}, "score")
    2
    >>> generating_gpus({"backend": "server", "gpus_per_run": 2}, "solver")
    1
    """
    if entry.get("backend") == "server" and stage in ("generate", "score", "evaluate"):
        return max(int(entry.get("gpus_per_run", 1)), 1)
    return 1


def _reward_tokens(entry: dict[str, Any]) -> float:
    """Tokens of the proposer reward's answers in one measured GRPO step of ``entry``."""
    at, n = entry.get("measured_at", {}), entry.get("lengths", {})
    rollouts = at.get("proposer_prompts", 16) * at.get("proposer_generations", 4)
    return rollouts * n.get("reward_answers_per_rollout", 10.0) * n.get("answer", 0.0)


def _per_token(stage: str, entry: dict[str, Any]) -> dict[str, float]:
    """A stage's figures as quantities that scale with the model: seconds per generated token
    per GPU (rates), seconds per generated token of a GRPO step (the proposer's with its
    reward's answers folded in where the entry prices them apart), and the start-up and
    per-question seconds."""
    fig, gpus = entry["stages"][stage], generating_gpus(entry, stage)
    out: dict[str, float] = {}
    if "tokens_per_s" in fig:
        out["tokens_per_s"] = gpus / float(fig["tokens_per_s"])
    if "step_s" in fig:
        step, tokens = float(fig["step_s"]), float(fig["step_tokens"])
        if "reward_tokens_per_s" in fig:  # the reward's answers priced apart: fold them in
            reward = _reward_tokens(entry)
            step, tokens = step + reward / float(fig["reward_tokens_per_s"]), tokens + reward
        out["step_s"] = step / tokens
    for k in ("startup_s", "s_per_question"):
        if k in fig:
            out[k] = float(fig[k])
    return out


def _back(per: dict[str, float], gpus: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in per.items():
        if k == "tokens_per_s":
            out[k] = round(gpus / v, 1)
        elif k == "step_s":
            out["step_s"], out["step_tokens"] = round(v * 100_000, 2), 100_000
        else:
            out[k] = round(v, 5 if k == "s_per_question" else 2)
    return out


def interpolate_stage(stage: str, low: tuple[float, dict[str, Any]],
                      high: tuple[float, dict[str, Any]], n: float, *, gpus: int
                      ) -> dict[str, Any]:
    """One stage's figures at ``n`` parameters, log-log between ``low`` and ``high``
    ((parameters, entry) each), for a setup that generates on ``gpus`` GPUs."""
    (n1, e1), (n2, e2) = low, high
    a, b = _per_token(stage, e1), _per_token(stage, e2)
    t = (math.log(n) - math.log(n1)) / (math.log(n2) - math.log(n1))
    per = {k: math.exp(math.log(a[k]) + (math.log(b[k]) - math.log(a[k])) * t)
           if a[k] > 0 and b[k] > 0 else a[k] + (b[k] - a[k]) * t  # a 0 s start-up: linear
           for k in a if k in b}
    return _back(per, gpus)


def _scaled(stage: str, entry: dict[str, Any], ratio: float, gpus: int) -> dict[str, Any]:
    per = _per_token(stage, entry)
    return _back({k: v * ratio if k in ("tokens_per_s", "step_s") else v
                  for k, v in per.items()}, gpus)


def _has(entry: dict[str, Any], stage: str) -> bool:
    return stage in entry["stages"] and all(k in entry["stages"][stage]
                                            for k in STAGE_FIGURES[stage])


def derive_entry(table: dict[str, Any], shape: Shape, card: str, *, backend: str,
                 lifetime: str, gpus_per_run: int, memory: Any = None) -> dict[str, Any]:
    """A cost-table entry for ``shape`` on ``card`` derived from neighbouring shapes' measured
    entries on that card (see the module docstring); raises :class:`MissingFigures` when the
    card has no measured entry of any other shape."""
    n = shape.params()
    pool = []
    for e in table["entries"]:
        if e.get("partial") or e["card"] != card or e["shape"] == shape.name:
            continue
        try:
            pool.append((resolve_shape(e["shape"], table).params(), e))
        except MissingFigures:
            continue
    if not pool:
        raise MissingFigures(f"no figures for shape {shape.name} on {card}, and none of another "
                             f"shape on {card} to derive them from", memory)

    def rank(item: tuple[float, dict[str, Any]]) -> tuple[int, int, int, float]:
        e = item[1]
        return (e["backend"] != backend, e["gpus_per_run"] != gpus_per_run,
                e["lifetime"] != lifetime, abs(math.log(item[0] / n)))

    target = {"backend": "server" if backend == "server" else "vllm", "gpus_per_run": gpus_per_run}
    stages: dict[str, Any] = {}
    sources: dict[str, list[str]] = {}
    for stage in STAGE_FIGURES:
        have = sorted((p for p in pool if _has(p[1], stage)), key=rank)
        low = next((p for p in have if p[0] < n), None)
        high = next((p for p in have if p[0] > n), None)
        gpus = generating_gpus(target, stage)
        if low and high:
            fig = interpolate_stage(stage, low, high, n, gpus=gpus)
            how = f"log-log between {low[1]['id']} and {high[1]['id']}"
        elif (near := low or high) and 1 / MAX_STEP <= n / near[0] <= MAX_STEP:
            fig = _scaled(stage, near[1], n / near[0], gpus)
            how = f"{near[1]['id']} x {n / near[0]:.2f} (parameters)"
        else:  # beyond the measured shapes: no extrapolation over more than MAX_STEP
            continue
        fig["source"] = f"derived, not measured: {how}"
        stages[stage] = fig
        sources.setdefault(how, []).append(stage)
    for part in table.get("partial", []):
        if part["shape"] != shape.name or part["card"] != card or part["backend"] != backend \
                or gpus_per_run != 1:
            continue
        for f in part["figures"]:
            for prefix, (names, key) in PARTIAL_STAGES.items():
                if not f["what"].startswith(prefix):
                    continue
                for stage in (names if isinstance(names, tuple) else (names,)):
                    if stage in stages:
                        stages[stage][key] = float(f["value"])
                        stages[stage]["source"] += (f"; {key} measured at this shape outside "
                                                    f"the loop: {f['what']} ({f['source']})")
                        sources.setdefault(f"{part['id']} (measured at this shape, outside "
                                           "the loop)", []).append(f"{stage} {key}")
    nearest = min(pool, key=lambda p: abs(math.log(p[0] / n)))[1]
    return {
        "id": f"{shape.name}@{card}/derived",
        "shape": shape.name, "card": card, "backend": backend, "lifetime": lifetime,
        "gpus_per_run": gpus_per_run, "runs_per_gpu": 1,
        "enforce_eager": nearest.get("enforce_eager", False),
        "lengths": {**nearest["lengths"],
                    "source": f"{nearest['id']}'s output lengths (the nearest measured shape)"},
        "measured_at": nearest.get("measured_at", {}),
        "stages": stages,
        "derived": (f"**estimate**: no measured figures for {shape.name} on {card.upper()}; "
                    "derived from the measured entries of neighbouring shapes ("
                    + "; ".join(f"{', '.join(v)}: {k}" for k, v in sources.items())
                    + "); output lengths of "
                    f"{nearest['id']}. Measure it to replace this: vdlib plan PARAMS --measure"),
    }


def figures_for(table: dict[str, Any], shape: Shape, card: str, *, backend: str,
                lifetime: str, gpus_per_run: int, runs_per_gpu: int, params: str,
                memory: Any, hint: str = ""
                ) -> tuple[dict[str, dict[str, Any]], dict[str, Any], list[str], str]:
    """(per-stage figures, the entry, notes, estimate) for ``shape``: measured figures of the
    setup asked for (:func:`select_figures`); else the same shape's measured figures of another
    engine backend, labelled; else figures derived from neighbouring shapes
    (:func:`vdlib.app.plan_derive.derive_entry`), labelled. ``estimate`` is empty for
    measured figures, else a sentence saying what was assumed."""
    try:
        figures, entry, notes = select_figures(
            table, shape, card, backend=backend, lifetime=lifetime, gpus_per_run=gpus_per_run,
            runs_per_gpu=runs_per_gpu, params=params, memory=memory, hint=hint)
        return figures, entry, notes, ""
    except MissingFigures as e:
        missing = e
    card_memory_gib(card, table)
    mine = {x["backend"] for x in table["entries"] if x["shape"] == shape.name
            and x["card"] == card and not x.get("partial")}
    if backend in mine:  # measured, but a stage is missing: that error stands
        raise missing
    others = sorted(mine)
    for other in others:
        try:
            figures, entry, notes = select_figures(
                table, shape, card, backend=other, lifetime=lifetime,
                gpus_per_run=gpus_per_run, runs_per_gpu=runs_per_gpu, params=params,
                memory=memory, hint=hint)
        except MissingFigures:
            continue
        by_id = {x["id"]: x for x in table["entries"]}
        target = {"backend": backend, "gpus_per_run": gpus_per_run}
        for stage, fig in figures.items():
            ratio = generating_gpus(target, stage) / generating_gpus(by_id[fig["entry"]], stage)
            if "tokens_per_s" in fig and ratio != 1:
                figures[stage] = {**fig, "tokens_per_s": round(fig["tokens_per_s"] * ratio, 1)}
        return figures, entry, notes, (
            f"**estimate**: no engine.backend {backend} figures for {shape.name} on "
            f"{card.upper()} with {gpus_per_run} GPU(s) a run; priced with its measured "
            f"{other} figures ({entry['id']}; generation, scoring and evaluation rates per "
            "generating GPU), as if the engine made no other difference (measure it: "
            f"{measure_command(params, card=card, gpus_per_run=gpus_per_run, shape=shape.name)})")
    try:
        entry = derive_entry(table, shape, card, backend=backend, lifetime=lifetime,
                             gpus_per_run=gpus_per_run, memory=memory)
    except MissingFigures:
        raise missing from None
    figures = {}
    for stage, needed in STAGE_FIGURES.items():
        fig = entry["stages"].get(stage)
        if fig is None or not all(k in fig for k in needed):
            raise missing
        figures[stage] = {**fig, "entry": entry["id"]}
    return figures, entry, [], entry["derived"]
