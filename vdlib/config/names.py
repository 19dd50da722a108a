"""The one rule for the names vdlib turns into folders: an experiment (``<output_dir>/<experiment>``),
an arm and a run (``<experiment>/<run_id>``, an arm's ``<arm>-seed<seed>``). :func:`check_name`
is called by :func:`vdlib.config.experiment.load_params` (so ``vdlib params check``, every CLI
command and every notebook) and by the CLI for names given on the command line.

A name is 1 to :data:`MAX_NAME_BYTES` bytes (UTF-8), each a letter, a digit or one of ``_ . + -``
(letters and digits of any script, in NFC form, so that ``ünï`` is one folder on every file
system; no ``/``, no space, no control or format character, no newline that could forge a
line of ``vdlib status``, no undecodable byte of a command line), does not start with a dot or
a dash (no hidden folder, no ``..``, nothing a command line reads as a flag), and is none of
the names vdlib gives its own folders and files inside an output, experiment or run folder
(:data:`RESERVED_NAMES`, ``iter_<t>``, ``<name>.replaced-<time>``).

>>> check_name("run_id", "vd75-seed0")
>>> check_name("experiment", "a\\nb")
Traceback (most recent call last):
...
vdlib.config.config_yaml.ConfigError: experiment = 'a\\nb' is not allowed: ...
>>> check_name("run_id", "iter_1")
Traceback (most recent call last):
...
vdlib.config.config_yaml.ConfigError: run_id = 'iter_1' is a name vdlib uses for its own folders ...
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from vdlib.config.config_yaml import ConfigError, shown

__all__ = ["check_name", "name_problem", "NAME_CHARS", "MAX_NAME_BYTES", "RESERVED_NAMES"]

#: the characters of a name, as the error messages say them
NAME_CHARS = "letters, digits, _ . + -"
#: the longest name in UTF-8 bytes (a file system allows 255; ``.replaced-<time>`` and
#: ``-seed<n>`` are appended to some)
MAX_NAME_BYTES = 128
_CHAR = re.compile(r"[\w.+-]")  # \w: letters, digits and _ of any script
#: folders and files vdlib writes beside a run folder or inside one (vdlib.config.layout,
#: vdlib.loop.run_state, vdlib.loop.model_store, vdlib.app.notebooks), compared case-blind
RESERVED_NAMES = frozenset({
    # <output_dir>/: executed notebooks, `vdlib eval` records
    "notebooks", "eval",
    # <output_dir>/<experiment>/: a grid's params and logs, base evaluations, reports
    "grid", "base_eval", "reports",
    # <run>/: what a run folder holds beside its iterations
    "config.yaml", "manifest.json", "timing.json", "base_models", "policy_model",
    "policy_train.json",
})
#: names of a form vdlib gives its own entries: iteration folders, folders set aside by
#: ``--force``
_RESERVED_FORMS = (re.compile(r"iter_\d+", re.I), re.compile(r".*\.replaced-.*", re.I))


def name_problem(value: Any) -> str | None:
    """What is wrong with ``value`` as a name (None: nothing); see the module's rule."""
    if not isinstance(value, str):
        return f"it is a {type(value).__name__}, not text"
    if not value:
        return "it is empty"
    if value.startswith("."):
        return "it starts with a dot (a hidden folder, or '.' / '..')"
    if value.startswith("-"):
        return "it starts with a dash (read as a flag)"
    if not unicodedata.is_normalized("NFC", value):
        return "it is not in Unicode NFC form (write it composed, e.g. 'ü' as one character)"
    bad = next((c for c in value if not _CHAR.fullmatch(c)), None)
    if bad is not None:
        return f"it holds {ascii(bad)}"
    if len(value.encode("utf-8")) > MAX_NAME_BYTES:
        return (f"it is {len(value.encode('utf-8')):,} bytes long in UTF-8 (at most "
                f"{MAX_NAME_BYTES})")
    if value.lower() in RESERVED_NAMES or any(f.fullmatch(value) for f in _RESERVED_FORMS):
        return "reserved"
    return None


def check_name(key: str, value: Any) -> None:
    """Raise a one-line :class:`ConfigError` naming ``key`` unless ``value`` is a name by the
    rule of this module (experiment, arm and run names)."""
    problem = name_problem(value)
    if problem is None:
        return
    if problem == "reserved":
        raise ConfigError(f"{key} = {shown(value)} is a name vdlib uses for its own folders and "
                          "files (iter_<t>, <name>.replaced-<time>, "
                          f"{', '.join(sorted(RESERVED_NAMES))}); choose another")
    raise ConfigError(f"{key} = {shown(value)} is not allowed: {problem}; a name is 1 to "
                      f"{MAX_NAME_BYTES} bytes of {NAME_CHARS}, not starting with '.' or "
                      "'-' (it names a folder)")
