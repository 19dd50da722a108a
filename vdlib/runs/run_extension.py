"""Extending a run: resuming a folder whose config differs from the new one in ``iterations``
only, where the finished work does not depend on it (docs/reliability.md).

The loop reads ``iterations`` (T) only through the alpha schedule
(:func:`vdlib.method.mask_schedule.alpha_at`); every stage seeds itself from ``(seed, stage, t)``.
With a fixed alpha (or a linear schedule whose ``alpha_final`` equals ``alpha``), no iteration
depends on T; with an annealed schedule iteration 1 does not and every later one does (its
alpha is ``alpha + (alpha_final - alpha) (t - 1) / (T - 1)``). So a changed T is allowed when
every iteration the folder holds stage records for is within the new T and has the same alpha
under both (the adaptive schedule never reads T: alpha of iteration t comes from the records of
iterations 1 .. t-1, :mod:`vdlib.method.adaptive_alpha`, so any T keeps them); the resumed run
then continues after its last finished stage, and the folder's
``config.yaml`` and fingerprint are written again for the new T. Anything else is refused,
naming the iterations whose alpha would change (or that lie beyond the new T).

>>> cfg = {"iterations": 1, "vocab_dropout": {"alpha": 0.75, "alpha_final": 1.0,
...                                           "schedule": "fixed"}}
>>> iterations_change(cfg, {**cfg, "iterations": 3}, {"1/proposer": {}}) is None
True
>>> anneal = {**cfg, "iterations": 2, "vocab_dropout": {**cfg["vocab_dropout"],
...                                                      "schedule": "linear"}}
>>> iterations_change(anneal, {**anneal, "iterations": 3}, {"1/metrics": {}, "2/proposer": {}})
'the linear alpha schedule changes the alpha of finished iteration 2 (1 -> 0.875)'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vdlib.method.mask_schedule import alpha_at

__all__ = ["iterations_change", "allow_iterations_change"]


def _recorded_iterations(stages: Mapping[str, Any]) -> list[int]:
    out = set()
    for key in stages if isinstance(stages, Mapping) else ():
        t = str(key).partition("/")[0]
        if t.isdigit() and len(t) < 12:
            out.add(int(t))
    return sorted(out)


def _alpha(config: Mapping[str, Any], t: int) -> float:
    vd = config.get("vocab_dropout") or {}
    return alpha_at(t, int(config["iterations"]), alpha=vd.get("alpha", 1.0),
                    alpha_final=vd.get("alpha_final", 1.0), schedule=vd.get("schedule", "fixed"))


def iterations_change(recorded: Mapping[str, Any], new: Mapping[str, Any],
                      stages: Mapping[str, Any]) -> str | None:
    """None when the folder's config ``recorded`` and ``new`` (resolved or fingerprinted
    configs that differ in ``iterations`` only) give every iteration recorded in ``stages``
    (the manifest's stage records) the same work; else why not, in one line."""
    done = _recorded_iterations(stages)
    beyond = [t for t in done if t > int(new["iterations"])]
    if beyond:
        return (f"the folder holds iteration{'s' if len(beyond) > 1 else ''} "
                f"{', '.join(map(str, beyond))} beyond the new {new['iterations']}: a run is "
                "not shortened below what it has done")
    if all((c.get("vocab_dropout") or {}).get("schedule") == "adaptive" for c in (recorded, new)):
        return None  # alpha from the run's records, never from T
    changed = [(t, _alpha(recorded, t), _alpha(new, t)) for t in done]
    changed = [(t, a, b) for t, a, b in changed if abs(a - b) > 1e-12]
    if changed:
        schedule = (new.get("vocab_dropout") or {}).get("schedule", "fixed")
        shown = ", ".join(f"{t} ({a:g} -> {b:g})" for t, a, b in changed[:4])
        more = f" and {len(changed) - 4} more" if len(changed) > 4 else ""
        return (f"the {schedule} alpha schedule changes the alpha of finished iteration"
                f"{'s' if len(changed) > 1 else ''} {shown}{more}")
    return None


def allow_iterations_change(differ: list[str], recorded: Mapping[str, Any],
                            new: Mapping[str, Any], stages: Mapping[str, Any]) -> list[str]:
    """``differ`` (the ``key: old -> new`` lines of :func:`vdlib.runs.run_state.fingerprint_diff`)
    without its ``iterations`` line when that is the only difference and the change is safe
    (:func:`iterations_change`): [] then, and the folder is resumed; with the reason added to
    that line when it is not safe; unchanged otherwise."""
    if [line.split(":", 1)[0] for line in differ] != ["iterations"]:
        return differ
    why = iterations_change(recorded, new, stages)
    if why is None:
        import logging

        logging.getLogger(__name__).info(
            "%s: the finished iterations do not depend on it (same alpha); the run is extended",
            differ[0])
        return []
    return [f"{differ[0]} ({why}; extending is allowed where the finished iterations keep "
            "their alpha: a fixed schedule, or alpha_final = alpha)"]
