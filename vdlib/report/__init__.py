"""What the notebooks show: their runs read back, tables, figures, a report folder. It reads
artifacts and draws; the verbs that write them (run a grid, evaluate, transfer) are
:mod:`vdlib.experiments`.

- :mod:`~vdlib.report.notebook`: a notebook's report (config, tables, figures,
  ``summary.json``); :func:`open_report` is re-exported here (imported on first use);
  :mod:`~vdlib.report.summary`: the ``summary.json`` that marks a report complete;
- :mod:`~vdlib.report.experiments`, :mod:`~vdlib.report.curriculum_sets`: a notebook's finished
  runs (arms x seeds) and their evaluations pooled; the final curricula measured;
- :mod:`~vdlib.report.frames`, :mod:`~vdlib.report.tables`,
  :mod:`~vdlib.report.curriculum_tables`, :mod:`~vdlib.report.table_format`,
  :mod:`~vdlib.report.settings_tables`: run data as frames; the paper's tables; rendering;
- :mod:`~vdlib.report.drawing`, :mod:`~vdlib.report.plots`: the figures;
- :mod:`~vdlib.report.results`: a committed results JSON and the report drawn from it alone;
- :mod:`~vdlib.report.paper_values`: the paper's reported numbers;
- :mod:`~vdlib.report.walkthrough`: notebook 07's views of the method's pieces.

May import: method, utils, config, engines, metrics, evaluation; nothing of :mod:`vdlib.loop`,
:mod:`vdlib.grid`, :mod:`vdlib.experiments` or :mod:`vdlib.app`.
"""
from typing import Any

__all__ = ["open_report"]


def __getattr__(name: str) -> Any:
    """``open_report``, imported on first use: importing a light submodule
    (:mod:`vdlib.report.summary`, what ``vdlib notebooks run`` reads before a kernel starts)
    does not load the report module's pandas and figures."""
    if name == "open_report":
        from vdlib.report.notebook import open_report

        return open_report
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
