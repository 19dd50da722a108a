"""How a result table looks: the :class:`Table` in three forms (frame, Markdown, LaTeX), the
``mean ± se`` cell, and the rows every table builder emits (ours first, then the paper's).

A table frame has the columns ``source`` (``ours`` / ``paper``), ``group``, ``arm``, ``label``
(``ours: <display name>`` or ``paper <group>: <display name>``), optionally ``iteration``, then
value columns, each with an optional ``<col>_se`` companion. :func:`render_table` turns it into
Markdown or a LaTeX ``tabular``; :func:`table_output` gives what a builder's ``fmt`` asks for.

>>> frame = pd.DataFrame([ours_row("vd75", acc=61.25, acc_se=1.5)])
>>> print(render_table(frame), end="")
| Setting | acc |
|---|---|
| ours: VD75 | 61.2 ± 1.5 |
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from vdlib.evaluation import latex_escape
from vdlib.report.frames import arm_label, row_label
from vdlib.report.paper_values import paper_values

__all__ = ["Table", "FORMATS", "check_fmt", "format_cell", "render_table", "table_output",
           "ours_row", "paper_rows"]

#: what a table builder's ``fmt`` may be (None: a :class:`Table` holding all three)
FORMATS = (None, "frame", "markdown", "latex")

#: columns of a table frame that are not values
META_COLUMNS = {"source", "group", "arm", "label", "iteration"}


class Table(dict):
    """A table in three forms: ``["frame"]`` (a DataFrame: ``source`` ours / paper, ``group``,
    ``arm``, ``label``, then value columns with ``<col>_se`` companions), ``["markdown"]`` and
    ``["latex"]`` (a ``tabular``). Displays as Markdown in a notebook."""

    @property
    def frame(self) -> pd.DataFrame:
        return self["frame"]

    def _repr_markdown_(self) -> str:
        return self["markdown"]


def check_fmt(fmt: str | None) -> None:
    """``ValueError`` unless ``fmt`` is one of :data:`FORMATS`."""
    if fmt not in FORMATS:
        raise ValueError(f"fmt = {fmt!r}; allowed: None (all three), frame, markdown, latex")


def format_cell(mean: float | None, se: float | None, fmt: str, decimals: int) -> str:
    """``mean ± se`` (Markdown) or ``mean $\\pm$ se`` (LaTeX) with ``decimals`` places and a
    thousands separator from 1000; a dash for a missing mean, the mean alone without an SE.

    >>> format_cell(6771.0, None, "markdown", 0), format_cell(0.5, 0.25, "latex", 2)
    ('6,771', '0.50 $\\\\pm$ 0.25')
    """
    if mean is None or not np.isfinite(mean):
        return "–" if fmt == "markdown" else "--"
    text = f"{mean:,.{decimals}f}" if abs(mean) >= 1000 else f"{mean:.{decimals}f}"
    if se is not None and np.isfinite(se):
        text += (" ± " if fmt == "markdown" else r" $\pm$ ") + f"{se:.{decimals}f}"
    return text


def render_table(frame: pd.DataFrame, fmt: str = "markdown", decimals: int = 1) -> str:
    """A table builder's frame as Markdown or a LaTeX ``tabular``: the ``label`` column, then
    each value column as ``mean ± se`` (its ``<col>_se`` companion) or ``mean``."""
    if fmt not in ("markdown", "latex"):
        raise ValueError(f"fmt = {fmt!r}; allowed: markdown, latex")
    cols = [c for c in frame.columns if c not in META_COLUMNS and not str(c).endswith("_se")]
    header = ["Setting", *map(str, cols)]
    rows = [[str(r["label"])] + [format_cell(r[c], r.get(f"{c}_se"), fmt, decimals)
                                 for c in cols]
            for _, r in frame.iterrows()]
    if fmt == "markdown":
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows]) + "\n"
    lines = [rf"\begin{{tabular}}{{l{'c' * len(cols)}}}", r"\toprule",
             " & ".join(latex_escape(h) for h in header) + r" \\", r"\midrule"]
    lines += [" & ".join([latex_escape(r[0]), *r[1:]]) + r" \\" for r in rows]
    return "\n".join([*lines, r"\bottomrule", r"\end{tabular}"]) + "\n"


def table_output(frame: pd.DataFrame, fmt: str | None, decimals: int = 1) -> Any:
    """What a builder returns for ``fmt``: a :class:`Table` (None), the frame, or its text."""
    check_fmt(fmt)
    if fmt is None:
        return Table(frame=frame, markdown=render_table(frame, "markdown", decimals),
                     latex=render_table(frame, "latex", decimals))
    return frame if fmt == "frame" else render_table(frame, fmt, decimals)


def ours_row(key: str, **values: Any) -> dict[str, Any]:
    """One of our rows: ``source`` ours, ``arm`` the key, ``label`` ``ours: <display label>``
    (:func:`vdlib.report.frames.row_label`), then ``values``."""
    return {"source": "ours", "group": "ours", "arm": key, "label": f"ours: {row_label(key)}",
            **values}


def paper_rows(label: str, make: Callable[[Any], dict[str, Any]]) -> list[dict[str, Any]]:
    """The paper's rows of table ``label``: ``{source: paper, group, arm, label,
    **make(values)}`` for every group and row of :func:`vdlib.report.paper_values.paper_values`."""
    recs = []
    for g, rows in paper_values(label)["data"].items():
        for arm, vals in rows.items():
            recs.append({"source": "paper", "group": g, "arm": arm,
                         "label": f"paper {g}: {arm_label(arm)}", **make(vals)})
    return recs
