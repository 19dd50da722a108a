"""How a configuration field is declared: :func:`param` (default, help text, validation rules)
and the citations help texts use for where a value comes from.

>>> PAPER.startswith("paper")
True
"""

from __future__ import annotations

import copy
from dataclasses import field
from typing import Any

__all__ = ["PAPER", "SETUP", "RZERO", "VDLIB", "param", "range_text"]

#: Where a value comes from, cited in help texts (the paper, or R-Zero's repository, by name).
PAPER = "paper, App. 'Training hyperparameters' (tab:training_hypers)"
SETUP = "paper, Sec. 'Experiments / Setup'"
RZERO = "R-Zero's code (github.com/Chengsong-Huang/R-Zero); the paper does not state it"
VDLIB = "vdlib choice; the paper does not state it"


def range_text(gt: float | None = None, ge: float | None = None, le: float | None = None,
               lt: float | None = None) -> str:
    """The allowed range of a numeric field as an interval (help texts, ``vdlib params
    describe``, docs/config.md); "" without bounds.

    >>> range_text(gt=0, le=1), range_text(ge=0, le=10**6), range_text(ge=2)
    ('(0, 1]', '[0, 1000000]', '[2, inf)')
    """
    if gt is None and ge is None and le is None and lt is None:
        return ""

    def num(x: float) -> str:
        return str(int(x)) if float(x).is_integer() and abs(x) < 1e16 else f"{x:g}"

    low = f"({num(gt)}" if gt is not None else f"[{num(ge)}" if ge is not None else "(-inf"
    high = f"{num(lt)})" if lt is not None else f"{num(le)}]" if le is not None else "inf)"
    return f"{low}, {high}"


def param(default: Any, help: str, *, choices: tuple | None = None, gt: float | None = None,
          ge: float | None = None, le: float | None = None, lt: float | None = None) -> Any:
    """A dataclass field with help text and declarative validation rules. A numeric field
    declares both a lower (``gt`` / ``ge``) and an upper (``le`` / ``lt``) bound, so that every
    value is finite and sized for the tools that read it (``1e999`` reads as infinity and is
    refused; tests/test_strict_inputs.py checks every field); the help text then ends with
    the allowed range."""
    bounds = range_text(gt, ge, le, lt)
    if bounds:
        help = f"{help} Allowed: {bounds}."
    meta = {"help": help, "choices": choices, "gt": gt, "ge": ge, "le": le, "lt": lt}
    if isinstance(default, list | dict):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=meta)
    return field(default=default, metadata=meta)
