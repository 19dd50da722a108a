"""A run's curricula shared as a Hugging Face ``datasets`` dataset (``vdlib export``), with a
dataset card, a model card per exported checkpoint, a guarded push to the Hub, and the export
read back for notebooks (docs/sharing.md).

- :mod:`~vdlib.export.run_folder`: a run folder (or a committed extract of one) read and
  checked against its records;
- :mod:`~vdlib.export.curricula`: the rows, their columns and types, the parquet and Arrow
  files;
- :mod:`~vdlib.export.cards`: the dataset card and the model cards (YAML provenance);
- :mod:`~vdlib.export.export_run`: ``vdlib export`` itself, written whole or not at all;
- :mod:`~vdlib.export.hub`: ``--push-to-hub``, guarded (token from ``HF_TOKEN``, refused
  offline);
- :mod:`~vdlib.export.read_back`: :func:`load_curricula`, :func:`curricula_frame`,
  :func:`read_card` for notebooks; a folder of exports (the committed gpu-small main table,
  :func:`committed_curricula`) summarised per arm and iteration.

May import: method, utils, config, engines, metrics, evaluation, runs (what a run folder is:
:mod:`vdlib.runs.run_state`), loop; beside :mod:`vdlib.grid`, it imports nothing of
it. :mod:`vdlib.app` (the command line) and the notebooks import it.
"""

from typing import Any

_READ_BACK = ("load_curricula", "curricula_frame", "read_card", "committed_curricula",
              "curricula_folder", "curricula_runs", "curricula_runs_frame", "curricula_summary",
              "example_questions")
__all__ = ["export_run", *_READ_BACK, "ExportError"]

_LAZY = {"export_run": "vdlib.export.export_run", "ExportError": "vdlib.export.run_folder",
         **{name: "vdlib.export.read_back" for name in _READ_BACK}}


def __getattr__(name: str) -> Any:
    """The public names, imported on first use (``datasets`` loads only when needed)."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
