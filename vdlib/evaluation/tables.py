"""Evaluation tables in the paper's style (Markdown or LaTeX).

Part of :mod:`vdlib.evaluation` (the protocol is described there)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from vdlib.evaluation.benchmarks import BENCHMARKS
from vdlib.evaluation.stats import EvalSummary

__all__ = ["display_name", "latex_escape", "format_table"]

logger = logging.getLogger(__name__)


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                  "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                  "^": r"\textasciicircum{}"}


def latex_escape(text: str) -> str:
    r"""Escape LaTeX's special characters: ``a_b & 5%`` -> ``a\_b \& 5\%``."""
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def display_name(name: str) -> str:
    return BENCHMARKS.get(name).display if name in BENCHMARKS else name


def format_table(summaries: Mapping[str, EvalSummary], fmt: str = "markdown",
                 benchmarks: Sequence[str] | None = None, average: bool = True) -> str:
    """The paper's table: one row per model / arm (the mapping's keys, in order), one column
    per benchmark then ``Avg.``; cells ``mean ± se`` in percent with one decimal (``mean``
    alone for one run, ``–`` when missing); the best mean per column (after rounding, ties all
    bold) in bold: ``**x**`` in Markdown, ``\\textbf{x}`` in LaTeX (a ``tabular`` body).
    The average is over the benchmarks shown, only for rows that have all of them.
    """
    if fmt not in ("markdown", "latex"):
        raise ValueError(f"fmt = {fmt!r}; allowed: markdown, latex")
    if benchmarks is None:
        benchmarks = list(dict.fromkeys(b for s in summaries.values() for b in s.results))
    cols: list[tuple[str, Callable[[EvalSummary], tuple[float, float | None] | None]]] = []
    for b in benchmarks:
        cols.append((display_name(b), lambda s, b=b: (s.results[b].mean, s.results[b].se)
                     if b in s.results else None))
    if average and benchmarks:
        cols.append(("Avg.", lambda s: s.average(benchmarks)
                     if all(b in s.results for b in benchmarks) else None))
    cells = {label: [f(s) for _, f in cols] for label, s in summaries.items()}
    best = []
    for j in range(len(cols)):
        vals = [round(100 * c[j][0], 1) for c in cells.values() if c[j] is not None]
        best.append(max(vals) if vals else None)
    pm = " ± " if fmt == "markdown" else r" $\pm$ "

    def cell(v: tuple[float, float | None] | None, j: int) -> str:
        if v is None:
            return "–" if fmt == "markdown" else "--"
        mean = round(100 * v[0], 1)
        text = f"{mean:.1f}"
        if mean == best[j] and len(cells) > 1:
            text = f"**{text}**" if fmt == "markdown" else rf"\textbf{{{text}}}"
        if v[1] is not None:
            text += f"{pm}{100 * v[1]:.1f}"
        return text

    header = ["Model"] + [c[0] for c in cols]
    rows = [[label] + [cell(v, j) for j, v in enumerate(vals)] for label, vals in cells.items()]
    if fmt == "markdown":
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines) + "\n"
    spec = "l" + "c" * len(cols)
    lines = [rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
             " & ".join(latex_escape(h) for h in header) + r" \\", r"\midrule"]
    lines += [" & ".join([latex_escape(r[0])] + r[1:]) + r" \\" for r in rows]
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"
