"""The config keys that are folder paths, checked at load
(:func:`vdlib.config.experiment.load_params`): ``output_dir``, where runs are written, and
``curricula_dir``, the exports notebook 01 shows.

>>> check_output_dir("outputs")
>>> check_curricula_dir("committed"); check_curricula_dir("")
>>> check_curricula_dir("/nonexistent/exports")
Traceback (most recent call last):
...
vdlib.config.config_yaml.ConfigError: curricula_dir = '/nonexistent/exports' is not a folder; ...
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

from vdlib.config.config_yaml import ConfigError, shown

__all__ = ["check_output_dir", "check_curricula_dir", "COMMITTED_CURRICULA_DIR"]

#: the value of ``curricula_dir`` that names the repository's committed gpu-small exports
COMMITTED_CURRICULA_DIR = "committed"


def check_output_dir(value: str) -> None:
    """``output_dir`` is a path: not empty, UTF-8 text (a command line's undecodable bytes
    arrive as lone surrogates, which no file can record), no control character."""
    if not value:
        raise ConfigError("output_dir = '' is empty; allowed: a folder path (e.g. outputs)")
    bad = next((c for c in value if unicodedata.category(c) in ("Cc", "Cs")), None)
    if bad is not None:
        what = ("a byte that is not UTF-8" if unicodedata.category(bad) == "Cs"
                else f"the control character {bad!r}")
        raise ConfigError(f"output_dir = {shown(value)} holds {what}; allowed: a folder path "
                          "of UTF-8 text without control characters")


def check_curricula_dir(value: str) -> None:
    """``curricula_dir``: ``committed``, ``''`` or a folder that exists (a relative path from
    the working directory, as ``output_dir``); whether it holds exports is checked where it is
    read (:func:`vdlib.export.read_back.curricula_folder`)."""
    if value in (COMMITTED_CURRICULA_DIR, "") or Path(value).is_dir():
        return
    raise ConfigError(f"curricula_dir = {shown(value)} is not a folder; allowed values: "
                      "committed (the repository's gpu-small exports), '' (skip the section) "
                      "or a folder of `vdlib export` outputs")
