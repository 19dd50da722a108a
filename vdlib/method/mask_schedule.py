"""A run's masks as plain values: how strongly the mask acts at each iteration and in each phase
(:class:`MaskSchedule` and the schedule functions), and over which ids (:class:`MaskSpec`).

Torch-free: the config (:mod:`vdlib.config.mask_settings`, which builds both from a run's
``vocab_dropout`` section and ``iterations``), the run-folder tools and the reports read it
without loading torch; :func:`vdlib.method.vocab_dropout.phase_mask` turns these values and a
tokenizer into the mask itself.

Schedules (:data:`SCHEDULES`): ``fixed`` and ``linear`` are timetables (:func:`alpha_at`, a
function of the iteration alone); ``adaptive`` reads the run's records: alpha of iteration t
comes from the metrics of iterations 1 .. t-1 through the controller of
:mod:`vdlib.method.adaptive_alpha` (:func:`alpha_decision`). Phases (:data:`PHASES`): ``train``
(the proposer's GRPO rollouts) and ``gen`` (curriculum generation); ``phases``
(:data:`PHASE_SETTINGS`) turns the mask on in both, one or none of them.

>>> anneal = MaskSchedule(alpha=0.75, iterations=5, schedule="linear")
>>> [iteration_alpha(anneal, t) for t in range(1, 6)]
[0.75, 0.8125, 0.875, 0.9375, 1.0]
>>> phase_alphas(MaskSchedule(alpha=0.75, iterations=5, phases="gen"), 2)
{'train': 1.0, 'gen': 0.75}
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vdlib.method.adaptive_alpha import AdaptiveSettings, AlphaDecision, adaptive_alpha

__all__ = [
    "PHASES",
    "PHASE_SETTINGS",
    "TIMETABLES",
    "SCHEDULES",
    "WIDTHS",
    "DEFAULT_FORMAT_STRINGS",
    "check_alpha",
    "alpha_at",
    "mask_active",
    "MaskSchedule",
    "MaskSpec",
    "alpha_decision",
    "iteration_alpha",
    "phase_alphas",
]

PHASES = ("train", "gen")  # the mask phases: GRPO rollouts, curriculum generation
PHASE_SETTINGS = ("both", "train", "gen", "none")  # vocab_dropout.phases: where the mask acts
TIMETABLES = ("fixed", "linear")  # schedules that depend on the iteration alone (alpha_at)
SCHEDULES = (*TIMETABLES, "adaptive")  # adaptive: from the run's records (adaptive_alpha)
WIDTHS = ("vocab_size", "len_tokenizer")  # vocab_dropout.width: the ids the draw covers
DEFAULT_FORMAT_STRINGS = ("<question>", "</question>", "\\boxed{", "}")


def check_alpha(alpha: float, name: str = "alpha") -> float:
    """``alpha`` as a float if ``0 < alpha <= 1``, else a ValueError naming it.

    >>> check_alpha(1)
    1.0
    >>> check_alpha(0, "alpha_final")
    Traceback (most recent call last):
    ...
    ValueError: alpha_final = 0 is out of range; allowed: 0 < alpha_final <= 1
    """
    if isinstance(alpha, bool) or not isinstance(alpha, int | float):
        raise ValueError(f"{name} = {alpha!r} must be a number; allowed: 0 < {name} <= 1")
    if not 0.0 < float(alpha) <= 1.0:
        raise ValueError(f"{name} = {alpha!r} is out of range; allowed: 0 < {name} <= 1")
    return float(alpha)


def alpha_at(iteration: int, iterations: int, *, alpha: float, alpha_final: float = 1.0,
             schedule: str = "fixed") -> float:
    """Alpha at 1-based ``iteration`` of ``iterations``: fixed, or linear from ``alpha`` at the
    first iteration to ``alpha_final`` at the last (paper: 0.75 -> 1.0 over 5 iterations).

    >>> [round(alpha_at(t, 5, alpha=0.75, alpha_final=1.0, schedule="linear"), 4)
    ...  for t in range(1, 6)]
    [0.75, 0.8125, 0.875, 0.9375, 1.0]
    >>> alpha_at(3, 5, alpha=0.85)
    0.85
    """
    check_alpha(alpha)
    check_alpha(alpha_final, "alpha_final")
    if schedule == "adaptive":
        raise ValueError("schedule = 'adaptive' depends on the run's records, not the iteration "
                         "alone; use iteration_alpha(schedule, t, history) or "
                         "vdlib.method.adaptive_alpha.adaptive_alpha")
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule = {schedule!r} is not allowed; allowed values: "
                         f"{', '.join(SCHEDULES)}")
    if not 1 <= iteration <= iterations:
        raise ValueError(f"iteration = {iteration}; allowed: 1 <= iteration <= {iterations}")
    if schedule == "fixed" or iterations == 1:
        return float(alpha)
    return alpha + (alpha_final - alpha) * (iteration - 1) / (iterations - 1)


def mask_active(phases: str, phase: str) -> bool:
    """Whether the mask applies in ``phase`` ("train": proposer GRPO rollouts; "gen": curriculum
    generation) under the ``phases`` setting (both / train / gen / none).

    >>> [mask_active(setting, "gen") for setting in PHASE_SETTINGS]
    [True, False, True, False]
    """
    if phases not in PHASE_SETTINGS:
        raise ValueError(f"phases = {phases!r} is not allowed; allowed values: "
                         f"{', '.join(PHASE_SETTINGS)}")
    if phase not in PHASES:
        raise ValueError(f"phase = {phase!r} is not allowed; allowed values: {', '.join(PHASES)}")
    return phases == "both" or phases == phase


@dataclass(frozen=True, kw_only=True)
class MaskSchedule:
    """The values that decide each iteration's alpha and where the mask acts.

    ``schedule`` (:data:`SCHEDULES`), the start ``alpha`` and the linear schedule's
    ``alpha_final``, the mask ``phases`` (:data:`PHASE_SETTINGS`), the run's ``iterations`` T,
    and the adaptive controller's settings (``adaptive``: required by, and only by, the adaptive
    schedule, with the same start alpha). Invalid values raise a ValueError naming the field.

    >>> MaskSchedule(alpha=0.75, iterations=3, schedule="adaptive")
    Traceback (most recent call last):
    ...
    ValueError: schedule = 'adaptive' needs adaptive settings (AdaptiveSettings); got None
    >>> MaskSchedule(alpha=0.75, iterations=0)
    Traceback (most recent call last):
    ...
    ValueError: iterations = 0 is out of range; allowed: iterations >= 1
    """

    alpha: float
    iterations: int
    schedule: str = "fixed"
    alpha_final: float = 1.0
    phases: str = "both"
    adaptive: AdaptiveSettings | None = None

    def __post_init__(self) -> None:
        check_alpha(self.alpha)
        check_alpha(self.alpha_final, "alpha_final")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule = {self.schedule!r} is not allowed; allowed values: "
                             f"{', '.join(SCHEDULES)}")
        if self.phases not in PHASE_SETTINGS:
            raise ValueError(f"phases = {self.phases!r} is not allowed; allowed values: "
                             f"{', '.join(PHASE_SETTINGS)}")
        if isinstance(self.iterations, bool) or not isinstance(self.iterations, int):
            raise ValueError(f"iterations = {self.iterations!r} must be an integer")
        if self.iterations < 1:
            raise ValueError(f"iterations = {self.iterations} is out of range; allowed: "
                             "iterations >= 1")
        if self.schedule != "adaptive":
            if self.adaptive is not None:
                raise ValueError(f"schedule = {self.schedule!r} reads no adaptive settings; "
                                 "allowed: adaptive = None")
            return
        if not isinstance(self.adaptive, AdaptiveSettings):
            raise ValueError("schedule = 'adaptive' needs adaptive settings (AdaptiveSettings); "
                             f"got {self.adaptive!r}")
        if self.adaptive.alpha != self.alpha:
            raise ValueError(f"adaptive.alpha = {self.adaptive.alpha} != alpha = {self.alpha}; "
                             "the adaptive schedule starts at alpha")


@dataclass(frozen=True)
class MaskSpec:
    """The ids a mask covers and keeps, whatever its alpha: the ``format_strings`` whose tokens
    are protected, ``extra_protected_ids`` always kept, and the draw's ``width``
    (:data:`WIDTHS`; :func:`vdlib.method.vocab_dropout.draw_width`). Sequences are stored as
    tuples.

    >>> MaskSpec(extra_protected_ids=[7]).extra_protected_ids
    (7,)
    >>> MaskSpec(width="all")
    Traceback (most recent call last):
    ...
    ValueError: width = 'all' is not allowed; allowed values: vocab_size, len_tokenizer
    """

    format_strings: tuple[str, ...] = DEFAULT_FORMAT_STRINGS
    extra_protected_ids: tuple[int, ...] = ()
    width: str = "vocab_size"

    def __post_init__(self) -> None:
        strings, ids = tuple(self.format_strings), tuple(self.extra_protected_ids)
        if not all(isinstance(s, str) for s in strings):
            raise ValueError(f"format_strings = {strings!r}; allowed: strings")
        if not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids):
            raise ValueError(f"extra_protected_ids = {ids!r}; allowed: integers >= 0")
        if self.width not in WIDTHS:
            raise ValueError(f"width = {self.width!r} is not allowed; allowed values: "
                             f"{', '.join(WIDTHS)}")
        object.__setattr__(self, "format_strings", strings)
        object.__setattr__(self, "extra_protected_ids", ids)


def alpha_decision(schedule: MaskSchedule, t: int,
                   history: Sequence[Any] | None) -> AlphaDecision:
    """The adaptive schedule's decision for iteration ``t`` from ``history``, the metrics
    records (``metrics.json`` dicts) of iterations 1 .. t-1 (more are ignored); a ValueError
    when fewer are given (the loop reads them from the run folder).

    >>> s = MaskSchedule(alpha=0.75, iterations=3, schedule="adaptive",
    ...                  adaptive=AdaptiveSettings(alpha=0.75))
    >>> d = alpha_decision(s, 2, [{"iteration": 1, "valid_fraction": 0.7}])
    >>> d.alpha, d.rule
    (0.95, 'raise')
    """
    if schedule.schedule != "adaptive" or schedule.adaptive is None:
        raise ValueError(f"schedule = {schedule.schedule!r} makes no decision; allowed "
                         "values: adaptive")
    history = list(history or ())
    if len(history) < t - 1:
        raise ValueError(f"the adaptive schedule needs the metrics of iterations 1 .. {t - 1} "
                         f"for iteration {t}; got {len(history)}")
    return adaptive_alpha(history[: t - 1], schedule.adaptive)


def iteration_alpha(schedule: MaskSchedule, t: int, history: Sequence[Any] | None = None
                    ) -> float:
    """The schedule's alpha at iteration ``t`` (before the phase switch: see
    :func:`phase_alphas`). ``history``: the metrics records of iterations 1 .. t-1, read by the
    adaptive schedule only (:func:`alpha_decision`).

    >>> iteration_alpha(MaskSchedule(alpha=0.85, iterations=3), 2)
    0.85
    """
    if schedule.schedule == "adaptive":
        return alpha_decision(schedule, t, history).alpha
    return alpha_at(t, schedule.iterations, alpha=schedule.alpha,
                    alpha_final=schedule.alpha_final, schedule=schedule.schedule)


def phase_alphas(schedule: MaskSchedule, t: int, history: Sequence[Any] | None = None
                 ) -> dict[str, float]:
    """The retention each mask phase uses at iteration ``t``: the schedule's alpha where
    ``phases`` turns the phase on, 1.0 (no mask) where it does not. This is what the artifacts
    record as ``alpha_train`` and ``alpha_gen``. ``history``: as :func:`iteration_alpha`.

    >>> phase_alphas(MaskSchedule(alpha=0.75, iterations=3, phases="train"), 1)
    {'train': 0.75, 'gen': 1.0}
    """
    alpha = iteration_alpha(schedule, t, history)
    return {p: alpha if mask_active(schedule.phases, p) else 1.0 for p in PHASES}
