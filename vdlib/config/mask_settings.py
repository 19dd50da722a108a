"""A run's config as the plain values its masks need (issue 52: the method takes values, not a
config object): :func:`mask_schedule` (schedule, alpha, phases, iterations, the adaptive
controller's settings) and :func:`mask_spec` (format strings, extra protected ids, the draw's
width), from the ``vocab_dropout`` section and ``iterations``.

Imports only the torch-free :mod:`vdlib.method.mask_schedule` and
:mod:`vdlib.method.adaptive_alpha`, so the config stays light.

>>> from vdlib.config import load_params
>>> cfg = load_params({"profile": "tiny", "iterations": 3,
...                    "vocab_dropout": {"alpha": 0.75, "schedule": "linear"}})
>>> s = mask_schedule(cfg)
>>> (s.schedule, s.alpha, s.alpha_final, s.phases, s.iterations, s.adaptive)
('linear', 0.75, 1.0, 'both', 3, None)
>>> mask_spec(cfg).width
'vocab_size'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vdlib.method.adaptive_alpha import AdaptiveSettings
from vdlib.method.mask_schedule import MaskSchedule, MaskSpec

if TYPE_CHECKING:
    from vdlib.config.config_sections import ExperimentConfig, VocabDropoutConfig

__all__ = ["adaptive_settings", "mask_schedule", "mask_spec"]


def adaptive_settings(vocab_dropout: VocabDropoutConfig) -> AdaptiveSettings:
    """The adaptive controller's settings: the section's ``alpha`` (the start) and its
    ``adaptive`` keys. A ValueError when ``alpha < adaptive.alpha_min``, which the config
    refuses for the adaptive schedule only (:func:`mask_schedule` asks for these only then)."""
    a = vocab_dropout.adaptive
    return AdaptiveSettings(alpha=vocab_dropout.alpha, alpha_min=a.alpha_min,
                            valid_target=a.valid_target, raise_gain=a.raise_gain,
                            lower_step=a.lower_step, diversity_signal=a.diversity_signal,
                            min_vendi_growth=a.min_vendi_growth,
                            max_self_bleu_rise=a.max_self_bleu_rise)


def mask_schedule(cfg: ExperimentConfig) -> MaskSchedule:
    """Each iteration's alpha and where the mask acts: ``vocab_dropout.schedule``, ``alpha``,
    ``alpha_final``, ``phases``, the run's ``iterations``, and, for the adaptive schedule only,
    :func:`adaptive_settings` (a timetable never reads the adaptive keys, so their rules do not
    apply to it)."""
    vd = cfg.vocab_dropout
    adaptive = adaptive_settings(vd) if vd.schedule == "adaptive" else None
    return MaskSchedule(alpha=vd.alpha, iterations=cfg.iterations, schedule=vd.schedule,
                        alpha_final=vd.alpha_final, phases=vd.phases, adaptive=adaptive)


def mask_spec(cfg: ExperimentConfig) -> MaskSpec:
    """The ids every mask of the run covers and keeps: ``vocab_dropout.format_strings``,
    ``extra_protected_ids`` and ``width``."""
    vd = cfg.vocab_dropout
    return MaskSpec(format_strings=tuple(vd.format_strings),
                    extra_protected_ids=tuple(vd.extra_protected_ids), width=vd.width)
