"""A notebook report's ``summary.json``: where it is written, reading it back, and whether it
was written for a given config (the file that marks a report complete).

Kept apart from :mod:`vdlib.report.notebook` and light (the standard library and
:mod:`vdlib.config.layout`): ``vdlib notebooks run`` asks it where each report's summary lies
and whether a notebook is already complete before any kernel starts, and importing the report
module there (pandas, and torch through the figures' frames) cost 4.6 s of a cold
``make demo`` on 2 cores before the kernel could start.

>>> summary_path("outputs", "quickstart", "00_quickstart").as_posix()
'outputs/quickstart/reports/00_quickstart/summary.json'
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vdlib.config.layout import report_dir
from vdlib.utils import safe_read

__all__ = ["SUMMARY_FILE", "summary_path", "read_summary", "summary_matches"]

#: the file that marks a report complete
SUMMARY_FILE = "summary.json"


def summary_path(output_dir: str | os.PathLike, experiment: str, notebook: str) -> Path:
    """``<output_dir>/<experiment>/reports/<notebook>/summary.json``: where a complete report
    of ``notebook`` leaves its summary."""
    return report_dir(output_dir, experiment, notebook) / SUMMARY_FILE


def read_summary(path: str | os.PathLike) -> dict[str, Any] | None:
    """A report's ``summary.json`` (or the file in a report folder); None when it is missing or
    not valid JSON."""
    path = Path(path)
    if path.is_dir():
        path = path / SUMMARY_FILE
    try:
        return safe_read.read_json(path, 16 << 20, follow_links=True)  # bounded, non-blocking
    except (OSError, ValueError):
        return None


def summary_matches(path: str | os.PathLike, config: Mapping[str, Any]) -> bool:
    """Whether the summary at ``path`` exists and was written for the resolved ``config``
    (:func:`vdlib.config.experiment.to_dict`; compared as JSON, so tuples equal lists)."""
    summary = read_summary(path)
    return summary is not None and summary.get("config") == json.loads(json.dumps(config))
