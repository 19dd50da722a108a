"""The adaptive alpha schedule (``vocab_dropout.schedule: adaptive``; issue 54, beyond the paper):
a small, bounded controller that sets the mask's retention alpha of the next iteration from what
the run measured on its last questions.

The paper leaves "adaptive masks" to future work (Sec. 7) and tests one fixed timetable, the
linear anneal 0.75 -> 1.0 (App. "Annealed masking schedule"). At 135M (docs/RESULTS.md) fixed
VD75 raises diversity at every iteration but its valid-question fraction falls to 0.55-0.66 at
iteration 3 against the baseline's 0.99; the anneal gives the questions back by the clock.
This controller steers by the records instead. After iteration t it reads that iteration's
``metrics.json`` (what :mod:`vdlib.metrics.run_metrics` writes; every key it uses is already
there) and sets alpha for t + 1:

1. **validity first.** If ``valid_fraction`` (valid questions / generated, of the K questions
   of iteration t) is below ``valid_target``, alpha rises in proportion to the shortfall:
   ``alpha + raise_gain * (valid_target - valid_fraction)``.
2. **else diversity, within the headroom.** If the diversity signal stalled, alpha falls by
   ``min(lower_step, raise_gain * (valid_fraction - valid_target))``: at most ``lower_step``,
   and no more than the valid fraction's margin above the target buys at the raise's own rate
   (``raise_gain`` is the inverse of how fast the valid fraction falls with 1 - alpha), so a
   lowering is not expected to take the next iteration below the target. With
   ``diversity_signal = "cumulative_vendi"`` a stall is a relative growth of the cumulative
   Vendi score (all valid questions so far) below ``min_vendi_growth``; with ``"self_bleu"`` it
   is a rise of Self-BLEU (lower = more diverse) above ``max_self_bleu_rise``. Both need an
   earlier iteration, so the decision after iteration 1 never lowers alpha.
3. **else hold.** A signal that is missing (None: too few valid questions, no embedder) never
   moves alpha; the decision says which signal was missing.

Alpha always stays in ``[alpha_min, 1]`` and starts at the configured ``vocab_dropout.alpha``;
values are rounded to 6 decimals so that a record read back from JSON replays exactly.

The controller keeps no hidden state: alpha of iteration t is a pure function of the settings
and the metrics records of iterations 1 .. t-1 (:func:`alpha_trajectory` replays them from the
start). The loop passes those records from the run folder, where the manifest verifies them
(docs/reliability.md), so a resumed run reads the same records and gets the same alphas; each
decision is also written beside the iteration's proposer record (``proposer_train.json``,
``alpha_decision``) so a run can be audited without replaying it.

Defaults and the committed gpu-small numbers that justify them: docs/schedules.md.

>>> s = AdaptiveSettings(alpha=0.75)
>>> history = [{"iteration": 1, "valid_fraction": 0.70, "cumulative_vendi": 44.0},
...            {"iteration": 2, "valid_fraction": 0.99, "cumulative_vendi": 44.5}]
>>> [(d.iteration, d.alpha, d.rule) for d in alpha_trajectory(history, s)]
[(1, 0.75, 'start'), (2, 0.95, 'raise'), (3, 0.918, 'lower')]
>>> adaptive_alpha(history[:1], s).reason
'valid_fraction 0.7 < valid_target 0.95: alpha 0.75 + 0.8 x 0.25 = 0.95'
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["DIVERSITY_SIGNALS", "RULES", "AdaptiveSettings", "AlphaDecision", "adaptive_alpha",
           "alpha_trajectory", "next_alpha"]

DIVERSITY_SIGNALS = ("cumulative_vendi", "self_bleu")  # adaptive.diversity_signal
RULES = ("start", "raise", "lower", "hold")  # AlphaDecision.rule
_DIGITS = 6


def _number(name: str, value: Any, lo: float, hi: float, *, lo_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} = {value!r} must be a finite number")
    ok = (lo < value if lo_open else lo <= value) and value <= hi
    if not ok:
        left = "<" if lo_open else "<="
        raise ValueError(f"{name} = {value!r} is out of range; allowed: {lo} {left} {name} <= {hi}")
    return float(value)


@dataclass(frozen=True)
class AdaptiveSettings:
    """The controller's start, bounds, targets and step sizes (config:
    ``vocab_dropout.alpha`` and ``vocab_dropout.adaptive.*``, read by
    :func:`vdlib.config.mask_settings.adaptive_settings`; docs/schedules.md for the defaults).
    Invalid values raise a ValueError naming the field and the allowed range."""

    alpha: float = 0.75  # alpha of iteration 1
    alpha_min: float = 0.75  # lower bound (the upper bound is 1: no mask)
    valid_target: float = 0.95  # raise alpha when the valid fraction is below this
    raise_gain: float = 0.8  # alpha added per unit of valid-fraction shortfall
    lower_step: float = 0.05  # most alpha removed when diversity stalls (within the headroom)
    diversity_signal: str = "cumulative_vendi"  # or "self_bleu"
    min_vendi_growth: float = 0.03  # cumulative Vendi growth below this (relative) = stall
    max_self_bleu_rise: float = 0.01  # Self-BLEU rise above this (absolute) = stall

    def __post_init__(self) -> None:
        _number("alpha", self.alpha, 0.0, 1.0, lo_open=True)
        _number("alpha_min", self.alpha_min, 0.0, 1.0, lo_open=True)
        if self.alpha < self.alpha_min:
            raise ValueError(f"alpha = {self.alpha} < alpha_min = {self.alpha_min}; allowed: "
                             "alpha_min <= alpha <= 1")
        _number("valid_target", self.valid_target, 0.0, 1.0)
        _number("raise_gain", self.raise_gain, 0.0, 10.0)
        _number("lower_step", self.lower_step, 0.0, 1.0)
        _number("min_vendi_growth", self.min_vendi_growth, -1.0, 10.0)
        _number("max_self_bleu_rise", self.max_self_bleu_rise, -1.0, 1.0)
        if self.diversity_signal not in DIVERSITY_SIGNALS:
            raise ValueError(f"diversity_signal = {self.diversity_signal!r} is not allowed; "
                             f"allowed values: {', '.join(DIVERSITY_SIGNALS)}")


@dataclass(frozen=True)
class AlphaDecision:
    """Alpha of ``iteration``, the rule that set it (:data:`RULES`), why in one line, and the
    signals it read (``inputs``, from the records of iteration - 1 and iteration - 2)."""

    iteration: int
    alpha: float
    rule: str
    reason: str
    previous_alpha: float | None = None
    inputs: dict[str, Any] = field(default_factory=dict)

    def as_record(self) -> dict[str, Any]:
        """A JSON-ready dict (what the loop writes as ``alpha_decision``)."""
        return asdict(self)


def _signal(record: Mapping[str, Any] | None, key: str) -> float | None:
    value = None if record is None else record.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _clip(settings: AdaptiveSettings, alpha: float) -> float:
    return round(min(1.0, max(settings.alpha_min, alpha)), _DIGITS)


def _stall(last: Mapping[str, Any], before: Mapping[str, Any] | None,
           s: AdaptiveSettings) -> tuple[bool | None, str, dict[str, Any]]:
    """(stalled, why, inputs); stalled is None when the signal is missing."""
    key = s.diversity_signal
    now, then = _signal(last, key), _signal(before, key)
    inputs = {key: now, f"previous_{key}": then}
    if before is None:
        return None, f"no earlier iteration to compare {key} with", inputs
    if now is None or then is None:
        return None, f"{key} missing (None)", inputs
    if key == "cumulative_vendi":
        if then <= 0:
            return None, "previous cumulative_vendi <= 0", inputs
        growth = (now - then) / then
        inputs["vendi_growth"] = round(growth, _DIGITS)
        if growth < s.min_vendi_growth:
            return True, (f"cumulative_vendi grew {growth:.4g} < min_vendi_growth "
                          f"{s.min_vendi_growth:g}"), inputs
        return False, f"cumulative_vendi grew {growth:.4g} >= {s.min_vendi_growth:g}", inputs
    rise = now - then
    inputs["self_bleu_rise"] = round(rise, _DIGITS)
    if rise > s.max_self_bleu_rise:
        return True, f"self_bleu rose {rise:.4g} > max_self_bleu_rise {s.max_self_bleu_rise:g}", \
            inputs
    return False, f"self_bleu rose {rise:.4g} <= {s.max_self_bleu_rise:g}", inputs


def next_alpha(alpha: float, last: Mapping[str, Any], before: Mapping[str, Any] | None,
               settings: AdaptiveSettings) -> AlphaDecision:
    """One step: alpha for the iteration after ``last`` (that iteration's metrics record), which
    ran at ``alpha``; ``before`` is the record of the iteration before it (None at iteration 1).

    >>> s = AdaptiveSettings(alpha=0.75)
    >>> next_alpha(0.9, {"iteration": 2, "valid_fraction": 0.2}, None, s).alpha  # bounded
    1.0
    >>> d = next_alpha(0.8, {"iteration": 3, "valid_fraction": 0.97, "cumulative_vendi": 50.0},
    ...                {"iteration": 2, "valid_fraction": 0.9, "cumulative_vendi": 40.0}, s)
    >>> d.rule, d.alpha, d.reason
    ('hold', 0.8, 'cumulative_vendi grew 0.25 >= 0.03')
    >>> next_alpha(0.76, {"iteration": 3, "valid_fraction": 0.99, "cumulative_vendi": 40.0},
    ...            {"iteration": 2, "cumulative_vendi": 40.0}, s).alpha  # at the floor
    0.75
    """
    s = settings
    t = int(last.get("iteration", 0))
    valid = _signal(last, "valid_fraction")
    inputs: dict[str, Any] = {"valid_fraction": valid}
    if valid is None:
        return AlphaDecision(t + 1, _clip(s, alpha), "hold", "valid_fraction missing (None)",
                             alpha, inputs)
    if valid < s.valid_target:
        raised = _clip(s, alpha + s.raise_gain * (s.valid_target - valid))
        reason = (f"valid_fraction {valid:g} < valid_target {s.valid_target:g}: alpha {alpha:g} "
                  f"+ {s.raise_gain:g} x {s.valid_target - valid:.4g} = {raised:g}")
        return AlphaDecision(t + 1, raised, "raise", reason, alpha, inputs)
    stalled, why, more = _stall(last, before, s)
    inputs.update(more)
    if stalled:
        step = round(min(s.lower_step, s.raise_gain * (valid - s.valid_target)), _DIGITS)
        lowered = _clip(s, alpha - step)
        if lowered < _clip(s, alpha):
            return AlphaDecision(t + 1, lowered, "lower", f"{why}: alpha {alpha:g} - {step:g} "
                                 f"-> {lowered:g} (floor {s.alpha_min:g})", alpha, inputs)
        why += f", but no room to lower (valid_fraction {valid:g}, floor {s.alpha_min:g})"
    return AlphaDecision(t + 1, _clip(s, alpha), "hold", why, alpha, inputs)


def _check_history(history: Sequence[Mapping[str, Any]]) -> None:
    for i, record in enumerate(history, start=1):
        if not isinstance(record, Mapping):
            raise ValueError(f"history[{i - 1}] is a {type(record).__name__}; allowed: a "
                             "metrics.json record (a mapping)")
        if record.get("iteration", i) != i:
            raise ValueError(f"history[{i - 1}] is iteration {record.get('iteration')!r}; "
                             f"allowed: the records of iterations 1, 2, ... in order ({i} here)")


def alpha_trajectory(history: Sequence[Mapping[str, Any]],
                     settings: AdaptiveSettings) -> list[AlphaDecision]:
    """Every decision from iteration 1 to ``len(history) + 1``: ``history`` holds the metrics
    records of iterations 1 .. n in order (``metrics.json``; a record without ``iteration`` is
    taken to be in its place). Pure and deterministic: the same records give the same list."""
    _check_history(history)
    start = _clip(settings, settings.alpha)
    decisions = [AlphaDecision(1, start, "start", f"vocab_dropout.alpha = {start:g}")]
    for i, last in enumerate(history):
        before = history[i - 1] if i else None
        decisions.append(next_alpha(decisions[-1].alpha, {"iteration": i + 1, **last}, before,
                                    settings))
    return decisions


def adaptive_alpha(history: Sequence[Mapping[str, Any]],
                   settings: AdaptiveSettings) -> AlphaDecision:
    """The decision for the next iteration, ``len(history) + 1``, from the metrics records of
    the finished iterations 1 .. n (the public entry point; :func:`alpha_trajectory` has them
    all). ``history = []`` gives iteration 1's start alpha."""
    return alpha_trajectory(history, settings)[-1]
