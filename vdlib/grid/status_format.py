"""How ``vdlib status`` prints a metric cell (kept apart so the status table and other text
reports share one rule)."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["format_number"]


def format_number(value: Any) -> str:
    """A metric cell: ``-`` for None, an integer as it is, a float to 3 significant digits
    (without an exponent from 1000 up).

    >>> [format_number(v) for v in (None, 120, 0.123456, 12.345, 4567.8, float("nan"))]
    ['-', '120', '0.123', '12.3', '4570', 'nan']
    """
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        return str(value)
    rounded = float(f"{value:.3g}")
    return f"{rounded:.0f}" if abs(rounded) >= 1000 else f"{value:.3g}"
