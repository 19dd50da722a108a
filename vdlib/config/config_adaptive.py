"""The adaptive alpha schedule's config section, ``vocab_dropout.adaptive`` (issue 54; the
controller is :mod:`vdlib.method.adaptive_alpha`, the defaults' evidence docs/schedules.md).
Declared with :func:`~vdlib.config.config_fields.param` like every section; re-exported by
:mod:`vdlib.config.config_sections`."""

from __future__ import annotations

from dataclasses import dataclass

from vdlib.config.config_fields import VDLIB, param

__all__ = ["AdaptiveScheduleConfig"]


@dataclass
class AdaptiveScheduleConfig:
    """The adaptive alpha schedule's bounds, targets and steps (``vocab_dropout.schedule:
    adaptive``; vdlib.method.adaptive_alpha; issue 54, not in the paper). Read only when the
    schedule is adaptive; the defaults and the gpu-small numbers behind them: docs/schedules.md."""

    alpha_min: float = param(0.75, f"{VDLIB}: lowest alpha the controller may set (the upper "
                             "bound is 1, no mask); 0.75, the paper's strongest mask, the "
                             "lowest alpha with gpu-small evidence.", gt=0, le=1)
    valid_target: float = param(0.95, f"{VDLIB}: alpha rises when the valid-question fraction "
                                "of the last iteration is below this (the gpu-small baseline's "
                                "0.99 at iteration 3 minus issue 54's 0.05 margin, rounded up).",
                                ge=0, le=1)
    raise_gain: float = param(0.8, f"{VDLIB}: alpha added per unit of valid-fraction "
                              "shortfall (gpu-small iteration 1: the valid fraction fell 1.24 "
                              "per unit of alpha dropped, so 1 / 1.24 closes the gap in one "
                              "step).", ge=0, le=10)
    lower_step: float = param(0.05, f"{VDLIB}: alpha removed after an iteration whose valid "
                              "fraction met the target and whose diversity stalled.", ge=0, le=1)
    diversity_signal: str = param("cumulative_vendi", f"{VDLIB}: the stall signal: growth of "
                                  "the cumulative Vendi score (needs metrics.embedder) or a "
                                  "rise of Self-BLEU.", choices=("cumulative_vendi", "self_bleu"))
    min_vendi_growth: float = param(0.03, f"{VDLIB}: relative growth of the cumulative Vendi "
                                    "score below which diversity has stalled (the gpu-small "
                                    "baseline grew at most 0.027 an iteration, VD75 0.043-0.13 "
                                    "at iteration 2).", ge=-1, le=10)
    max_self_bleu_rise: float = param(0.01, f"{VDLIB}: rise of Self-BLEU above which "
                                      "diversity has stalled (diversity_signal: self_bleu).",
                                      ge=-1, le=1)
