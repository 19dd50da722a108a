"""A notebook's report: its validated config, its runs, and the tables and figures it writes to
``<output_dir>/<experiment>/reports/<notebook>/`` (:func:`vdlib.config.layout.report_dir`).

Every experiment notebook drives one :class:`Report`::

    report = open_report("01_main_table", locals())   # right after the parameters cell
    runs = report.add_runs(grids.run_grid(report.cfg)) # every arm x seed, resumed, recorded
    report.runs_overview(["valid_questions", "vendi"]) # loop metrics per arm and iteration
    report.add_table("main_table", tables.main_table(rows))
    report.add_figure("diversity_dynamics", plots.diversity_dynamics(report.loop_metrics()))
    report.finish()                                    # summary.json: the report is complete

:func:`open_report` builds the config from the notebook's parameters
(:func:`vdlib.config.experiment.notebook_params`, so a misspelt parameter fails before any model
loads), sets up logging and removes a previous ``summary.json`` (the report is incomplete until
:meth:`Report.finish`). Each table and figure is written as soon as it is added (tables as
``.md``, ``.tex`` and ``.csv``, figures as ``.png``, ``.pdf`` and their numbers as ``.csv``;
atomic writes) and shown in the notebook. :meth:`Report.finish` writes ``summary.json``: the
notebook, the resolved config, the run folders, the tables, figures and files, and any extra
entries. ``vdlib notebooks run`` skips a notebook whose summary holds the same resolved config
(:func:`summary_matches`) and whose executed copy exists.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from vdlib.config.experiment import ExperimentConfig, load_params, notebook_params, to_dict
from vdlib.config.layout import arm_run_id, report_dir
from vdlib.report import plots
from vdlib.report.settings_tables import settings_table
from vdlib.report.summary import SUMMARY_FILE, read_summary, summary_matches, summary_path
from vdlib.report.table_format import Table, render_table
from vdlib.utils.artifacts import atomic_write_json, atomic_write_text

__all__ = ["SUMMARY_FILE", "DEFAULT_SETTINGS", "OVERVIEW_METRICS", "Report", "open_report",
           "setup_logging", "summary_path", "read_summary", "summary_matches", "write_outputs",
           "runs_overview"]

logger = logging.getLogger(__name__)

#: the config keys a report shows when it opens
DEFAULT_SETTINGS = ("experiment", "profile", "seeds", "iterations", "arms")
#: the loop metrics :func:`runs_overview` shows by default
OVERVIEW_METRICS = ["valid_questions", "generated", "mean_acc", "curriculum_size", "self_bleu",
                    "vendi", "novelty_rate", "unique_tokens"]
#: summary entries :meth:`Report.finish` writes itself
_RESERVED = ("notebook", "config", "runs", "tables", "figures", "files")

RunKey = tuple[str, int]  # (arm, seed)


# ----------------------------------------------------------------------------- files


def write_outputs(out_dir: str | os.PathLike, *, tables: Mapping[str, Any] | None = None,
                  figures: Mapping[str, plots.PlotResult] | None = None) -> list[Path]:
    """Write each table as ``<name>.md``, ``<name>.tex`` and ``<name>.csv`` (its frame), save
    each figure not saved yet as ``<name>.png/.pdf`` (recording the paths on it), and write each
    figure's numbers as ``<stem>.csv`` next to its PNG; atomic writes. A table may be a
    :class:`vdlib.report.table_format.Table`, a table builder's frame (it has a ``label`` column),
    any other DataFrame (``.csv`` only) or Markdown text (``.md``). Returns every file written."""
    out = Path(out_dir)
    written: list[Path] = []
    for name, table in (tables or {}).items():
        if isinstance(table, pd.DataFrame):
            table = Table(frame=table, latex="",
                          markdown=render_table(table) if "label" in table.columns else "")
        elif isinstance(table, str):
            table = Table(markdown=table)
        for key, ext in (("markdown", "md"), ("latex", "tex")):
            if table.get(key):
                written.append(atomic_write_text(out / f"{name}.{ext}", table[key]))
        if table.get("frame") is not None:
            written.append(atomic_write_text(out / f"{name}.csv",
                                             table["frame"].to_csv(index=False)))
    for name, fig in (figures or {}).items():
        if not fig.paths:
            fig.paths = plots.save_figure(fig.figure, out, name)
        written += fig.paths
        written.append(atomic_write_text(fig.paths[0].with_suffix(".csv"),
                                         fig.data.to_csv(index=False)))
    logger.info("wrote %d files to %s", len(written), out)
    return written


# ----------------------------------------------------------------------------- display


def setup_logging(level: int = logging.INFO) -> None:
    """Log records of ``level`` and above as ``LEVEL name: message`` (HTTP clients only from
    warnings), once per process."""
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)


def _display(obj: Any, markdown: bool = False) -> None:
    """Show ``obj`` (as Markdown text with ``markdown``) in a running IPython kernel; outside
    one, do nothing."""
    try:
        from IPython import get_ipython
        from IPython.display import Markdown, display
    except ImportError:
        return
    if get_ipython() is not None:
        display(Markdown(obj) if markdown else obj)


def runs_overview(metrics: pd.DataFrame, shown: Sequence[str] = OVERVIEW_METRICS,
                  decimals: int = 3) -> pd.DataFrame:
    """Loop metrics (``arm, seed, iteration, metric, value``) as one row per arm and iteration
    and one column per metric of ``shown`` (in that order; mean over seeds, rounded). Metrics
    the runs lack are left out."""
    d = metrics[metrics["metric"].isin(list(shown))]
    if d.empty:
        index = pd.MultiIndex.from_tuples([], names=["arm", "iteration"])
        return pd.DataFrame(index=index)
    wide = d.pivot_table(index=["arm", "iteration"], columns="metric", values="value",
                         aggfunc="mean")
    return wide.reindex(columns=[m for m in shown if m in wide.columns]).round(decimals)


# ----------------------------------------------------------------------------- the report


class Report:
    """One notebook's report folder, config and runs; tables and figures are written as they
    are added, ``summary.json`` by :meth:`finish`. Make one with :func:`open_report`."""

    def __init__(self, notebook: str, cfg: ExperimentConfig,
                 settings: Sequence[str] = DEFAULT_SETTINGS) -> None:
        self.notebook = notebook
        self.cfg = cfg
        self.folder = report_dir(cfg.output_dir, cfg.experiment, notebook)
        self.settings_keys = tuple(settings)
        self.runs: dict[RunKey, Path] = {}
        self._files: dict[str, list[Path]] = {}  # "table:<name>" / "figure:<name>" -> files

    # -- what the report is about

    @property
    def config(self) -> dict[str, Any]:
        """The resolved config as a dict (:func:`vdlib.config.experiment.to_dict`)."""
        return to_dict(self.cfg)

    def settings(self) -> dict[str, Any]:
        """The config values the report shows when it opens (``settings`` of
        :func:`open_report`)."""
        config = self.config
        return {k: config[k] for k in self.settings_keys if k in config}

    def __repr__(self) -> str:
        return f"Report({self.notebook!r}, folder={str(self.folder)!r})"

    def _repr_markdown_(self) -> str:
        rows = [f"| {k} | `{json.dumps(v)}` |" for k, v in self.settings().items()]
        return "\n".join([f"**{self.notebook}** → `{self.folder}`", "", "| setting | value |",
                          "|---|---|", *rows]) + "\n"

    # -- runs

    def add_runs(self, runs: Mapping[RunKey, str | os.PathLike], prefix: str = ""
                 ) -> dict[RunKey, Path]:
        """Record run folders (``{(arm, seed): folder}``, e.g. what
        :func:`vdlib.experiments.grids.run_grid` returns) in the summary, arms named
        ``<prefix><arm>``; returns ``runs`` (folders as paths)."""
        self.runs.update({(f"{prefix}{arm}", seed): Path(p) for (arm, seed), p in runs.items()})
        return {key: Path(p) for key, p in runs.items()}

    def loop_metrics(self) -> pd.DataFrame:
        """:func:`vdlib.metrics.run_metrics.summary_metrics` of the recorded runs: ``arm, seed,
        iteration, metric, value``."""
        from vdlib.metrics.run_metrics import summary_metrics

        return summary_metrics(list(self.runs.values()))

    def runs_overview(self, shown: Sequence[str] = OVERVIEW_METRICS,
                      decimals: int = 3) -> pd.DataFrame:
        """:func:`runs_overview` of the recorded runs' loop metrics."""
        return runs_overview(self.loop_metrics(), shown, decimals)

    # -- tables and figures

    def add_table(self, name: str, table: Any, show: bool = True) -> None:
        """Write ``table`` (see :func:`write_outputs`) as ``<name>.*`` now and show it."""
        self._files[f"table:{name}"] = write_outputs(self.folder, tables={name: table})
        if show:
            _display(table, markdown=isinstance(table, str))

    def add_figure(self, name: str, result: plots.PlotResult, show: bool = True) -> None:
        """Save ``result`` as ``<name>.png/.pdf`` (unless already saved) with its numbers as
        ``.csv`` now, and show it."""
        self._files[f"figure:{name}"] = write_outputs(self.folder, figures={name: result})
        if show:
            _display(plots.show(result))

    @property
    def files(self) -> list[Path]:
        """Every file written so far, in order."""
        return [p for paths in self._files.values() for p in paths]

    def _names(self, kind: str) -> list[str]:
        return [k.split(":", 1)[1] for k in self._files if k.startswith(kind + ":")]

    def finish(self, **extra: Any) -> Path:
        """Write the ``settings`` table (the paper's settings tables and the protocol switches
        beside this config's values: :func:`vdlib.report.settings_tables.settings_table`), then
        ``summary.json`` (notebook, resolved config, runs, tables, figures, files and the
        JSON-serialisable ``extra`` entries): the report is complete. Returns its path."""
        clash = sorted(set(extra) & set(_RESERVED))
        if clash:
            raise ValueError(f"finish(): {clash} are written by the report itself")
        if "table:settings" not in self._files:  # the settings this report ran with
            frame = settings_table(self.cfg)
            self.add_table("settings", Table(frame=frame, latex="",
                                             markdown=frame.to_markdown(index=False) + "\n"),
                           show=False)
        summary = {"notebook": self.notebook, "config": self.config,
                   "runs": {arm_run_id(a, s): str(p) for (a, s), p in self.runs.items()},
                   "tables": self._names("table"), "figures": self._names("figure"),
                   "files": [str(p) for p in self.files], **extra}
        path = atomic_write_json(self.folder / SUMMARY_FILE, summary)
        logger.info("%s: %d files and %s written", self.notebook, len(self.files), path)
        return path


def open_report(notebook: str, namespace: Mapping[str, Any], *,
                settings: Sequence[str] = DEFAULT_SETTINGS,
                log_level: int | None = logging.INFO) -> Report:
    """The report of ``notebook`` (e.g. ``"01_main_table"``) from its parameters: ``namespace``
    is ``locals()`` after the parameters cell (:func:`vdlib.config.experiment.notebook_params` ->
    :func:`vdlib.config.experiment.load_params`; a bad key raises ``ConfigError`` here). Sets up
    logging (``log_level`` None: leave it), creates the report folder and removes an earlier
    ``summary.json`` there, so the report counts as complete only once :meth:`Report.finish`
    has run. ``settings``: the config keys the report shows."""
    cfg = load_params(notebook_params(dict(namespace)))
    if log_level is not None:
        setup_logging(log_level)
    report = Report(notebook, cfg, settings)
    report.folder.mkdir(parents=True, exist_ok=True)
    stale = report.folder / SUMMARY_FILE
    if stale.exists():
        stale.unlink()
        logger.info("%s: removed the previous %s; finish() writes a new one", notebook, stale)
    return report
