"""Did the entropy-control baselines act? KL-Cov's and Clip-Cov's per-step activity.

The proposer's TRL log (``iter_<t>/proposer_train.json``, ``log_history``) holds, per GRPO step,
the mean over its micro-batches of :func:`vdlib.method.grpo.kl_cov_loss`'s and
:func:`vdlib.method.grpo.clip_cov_loss`'s stats as ``kl_cov/<stat>`` / ``clip_cov/<stat>``.
:func:`cov_iteration_stats` sums them up per iteration (``iteration_metrics`` writes them into
``metrics.json``, and :func:`vdlib.report.results.collect_results` carries them into the results
records): :data:`COV_RECORD_FIELDS`. A step *acted* when KL-Cov's penalty had a gradient on at
least one selected token (``n_active > 0``; with old log-probs equal to the update's it has none,
and KL-Cov trains as the baseline does) or when Clip-Cov cut at least one token's gradient
(``n_selected > 0``). :func:`inactive_cov_warnings` is what ``vdlib results`` prints for an arm
that never acted, or whose records cannot say.

>>> rows = [{"kl_cov/n_selected": 1.0, "kl_cov/n_active": 0.0, "kl_cov/penalty": 0.0, "step": 1}]
>>> cov_iteration_stats(rows)["cov_active_steps"], cov_iteration_stats([{"loss": 1.0}])
(0, {})
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

__all__ = ["COV_VARIANTS", "COV_RECORD_FIELDS", "cov_steps", "cov_iteration_stats",
           "backfill_cov_fields", "inactive_cov_warnings"]

#: the loss variants whose activity is tracked, and the stat that says a step acted
COV_VARIANTS = {"kl_cov": "n_active", "clip_cov": "n_selected"}

#: the fields :func:`cov_iteration_stats` returns (those a log holds): the proposer steps with a
#: KL-Cov / Clip-Cov stat, how many acted, and per-step means (None where the log lacks it)
COV_RECORD_FIELDS = ("cov_steps", "cov_active_steps", "kl_cov_active_fraction",
                     "kl_cov_penalty", "kl_cov_grad_ratio", "clip_cov_selected_fraction",
                     "clip_cov_grad_ratio")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def cov_steps(log_history: Iterable[Any]) -> list[dict[str, Any]]:
    """The steps of a TRL log that carry KL-Cov or Clip-Cov stats: ``{"step", "variant",
    "acted", <stat>: value}`` each (``active_fraction`` of a KL-Cov step is ``n_active /
    n_selected`` where an older log lacks it). Anything that is not a mapping is skipped."""
    steps = []
    for row in log_history:
        if not isinstance(row, Mapping):
            continue
        for variant, acting in COV_VARIANTS.items():
            prefix = f"{variant}/"
            stats = {k[len(prefix):]: _number(v) for k, v in row.items()
                     if isinstance(k, str) and k.startswith(prefix)}
            if not stats:
                continue
            if variant == "kl_cov" and stats.get("active_fraction") is None:
                n_sel, n_act = stats.get("n_selected"), stats.get("n_active")
                if n_sel is not None and n_act is not None:
                    stats["active_fraction"] = n_act / n_sel if n_sel > 0 else 0.0
            steps.append({"step": row.get("step"), "variant": variant,
                          "acted": (stats.get(acting) or 0.0) > 0, **stats})
    return steps


def _mean(values: Sequence[float | None]) -> float | None:
    xs = [v for v in values if v is not None]
    return round(sum(xs) / len(xs), 6) if xs else None


def cov_iteration_stats(log_history: Iterable[Any]) -> dict[str, Any]:
    """:data:`COV_RECORD_FIELDS` of one proposer phase's log (``{}`` for a log without
    KL-Cov / Clip-Cov stats, e.g. the baseline's). Means are over steps."""
    steps = cov_steps(log_history)
    if not steps:
        return {}
    kl = [s for s in steps if s["variant"] == "kl_cov"]
    clip = [s for s in steps if s["variant"] == "clip_cov"]
    out: dict[str, Any] = {"cov_steps": len(steps),
                           "cov_active_steps": sum(bool(s["acted"]) for s in steps)}
    if kl:
        out.update(kl_cov_active_fraction=_mean([s.get("active_fraction") for s in kl]),
                   kl_cov_penalty=_mean([s.get("penalty") for s in kl]),
                   kl_cov_grad_ratio=_mean([s.get("grad_ratio") for s in kl]))
    if clip:
        out.update(clip_cov_selected_fraction=_mean([s.get("selected_fraction") for s in clip]),
                   clip_cov_grad_ratio=_mean([s.get("grad_ratio") for s in clip]))
    return out


def _cov_arm(arm: str) -> str | None:
    """The loss variant an arm of :mod:`vdlib.config.arm_table` trains its proposer with, if it
    is KL-Cov or Clip-Cov (None for other or unknown arms)."""
    from vdlib.config.arm_table import ARMS

    if arm not in ARMS.names():
        return None
    variant = (ARMS.get(arm).get("proposer") or {}).get("loss_variant")
    return variant if variant in COV_VARIANTS else None


def backfill_cov_fields(records: Iterable[Any],
                        read_log: Callable[[str, int, int], Sequence[Any] | None]) -> int:
    """Add :data:`COV_RECORD_FIELDS` in place to the KL-Cov / Clip-Cov records that were
    exported before they existed, from their proposer logs: ``read_log(arm, seed, iteration)``
    returns that iteration's ``log_history`` (None where it has none). Records that already
    carry ``cov_steps``, other arms and the ``base`` record are left as they are. Returns how
    many records gained the fields.

    >>> recs = [{"arm": "clip_cov", "seed": 0, "iteration": 1}, {"arm": "baseline", "seed": 0,
    ...         "iteration": 1}]
    >>> log = [{"step": 1, "clip_cov/n_selected": 2.0, "clip_cov/selected_fraction": 0.5}]
    >>> backfill_cov_fields(recs, lambda a, s, t: log), recs[0]["cov_active_steps"]
    (1, 1)
    >>> "cov_steps" in recs[1]
    False
    """
    added = 0
    for r in records:
        if not isinstance(r, dict) or "cov_steps" in r or _cov_arm(str(r.get("arm"))) is None:
            continue
        log = read_log(r["arm"], int(r["seed"]), int(r["iteration"]))
        stats = cov_iteration_stats(log) if log else {}
        if stats:
            r.update(stats)
            added += 1
    return added


def inactive_cov_warnings(records: Iterable[Any]) -> list[str]:
    """One line per arm of a results file's records whose KL-Cov / Clip-Cov never acted: every
    record that carries ``cov_steps`` counts 0 ``cov_active_steps``; or a KL-Cov / Clip-Cov arm
    none of whose records carries them (exported before they existed: whether it acted cannot
    be told from the file). Records are untrusted: malformed ones are skipped."""
    by_arm: dict[str, list[Mapping[str, Any]]] = {}
    for r in records:
        if isinstance(r, Mapping) and isinstance(r.get("arm"), str):
            by_arm.setdefault(r["arm"], []).append(r)
    lines = []
    for arm, recs in by_arm.items():
        tracked = [r for r in recs if _number(r.get("cov_steps")) is not None]
        steps = sum(int(_number(r["cov_steps"]) or 0) for r in tracked)
        acted = sum(int(_number(r.get("cov_active_steps")) or 0) for r in tracked)
        variant = _cov_arm(arm)
        if tracked and steps and not acted:
            what = {"kl_cov": "KL-Cov's penalty had a gradient on no selected token",
                    "clip_cov": "Clip-Cov selected no token"}.get(
                        variant or "", "KL-Cov / Clip-Cov never acted")
            lines.append(f"arm {arm!r}: {what} in any of its {steps} proposer steps "
                         f"({len(tracked)} records): it trained as the baseline does")
        elif not tracked and variant is not None:
            lines.append(f"arm {arm!r} ({variant}): no record carries cov_steps / "
                         "cov_active_steps (exported before they were recorded), so whether "
                         f"{'KL-Cov' if variant == 'kl_cov' else 'Clip-Cov'} ever acted "
                         "cannot be told from this file; see the proposer_train.json "
                         "of its runs' iterations")
    return lines
