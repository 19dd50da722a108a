"""How a configuration field is declared: :func:`param` (default, help text, validation rules)
and the citations help texts use for where a value comes from.

>>> PAPER.startswith("paper")
True
"""

from __future__ import annotations

import copy
from dataclasses import field
from typing import Any

__all__ = ["PAPER", "SETUP", "RZERO", "VDLIB", "param"]

#: Where a value comes from, cited in help texts (the paper, or R-Zero's repository, by name).
PAPER = "paper, App. 'Training hyperparameters' (tab:training_hypers)"
SETUP = "paper, Sec. 'Experiments / Setup'"
RZERO = "R-Zero's code (github.com/Chengsong-Huang/R-Zero); the paper does not state it"
VDLIB = "vdlib choice; the paper does not state it"


def param(default: Any, help: str, *, choices: tuple | None = None, gt: float | None = None,
          ge: float | None = None, le: float | None = None, lt: float | None = None) -> Any:
    """A dataclass field with help text and declarative validation rules."""
    meta = {"help": help, "choices": choices, "gt": gt, "ge": ge, "le": le, "lt": lt}
    if isinstance(default, list | dict):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=meta)
    return field(default=default, metadata=meta)
