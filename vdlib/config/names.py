"""The one rule for the names vdlib turns into folders: an experiment
(``<output_dir>/<experiment>``), an arm and a run (``<experiment>/<run_id>``, an arm's
``<arm>-seed<seed>``). :func:`check_name` is called by
:func:`vdlib.config.experiment.load_params` (so ``vdlib params check``, every CLI command and
every notebook check every name the same way).

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
from pathlib import Path
from typing import Any

from vdlib.config import layout
from vdlib.config.config_yaml import ConfigError, shown

__all__ = ["check_name", "name_problem", "NAME_CHARS", "MAX_NAME_BYTES", "RESERVED_NAMES"]

#: the characters of a name, as the error messages say them
NAME_CHARS = "letters, digits, _ . + -"
#: the longest name in UTF-8 bytes (a file system allows 255; ``.replaced-<time>`` and
#: ``-seed<n>`` are appended to some)
MAX_NAME_BYTES = 128
_CHAR = re.compile(r"[\w.+-]")  # \w: letters, digits and _ of any script
def _reserved_names() -> frozenset[str]:
    """The names vdlib gives its own folders and files, as :mod:`vdlib.config.layout` formats
    them (and the few other modules that name an entry of a run folder), lower-cased."""
    run, exp = Path("r"), ("o", "e")
    names = {
        # <output_dir>/: executed notebooks, `vdlib eval` records
        layout.executed_notebook_path("o", "p", "n").parent.parent.name, "eval",
        # <output_dir>/<experiment>/: a grid's params and logs, base evaluations, reports
        layout.grid_dir(*exp).name, layout.base_evaluation_dir(*exp, "m").parent.name,
        layout.report_dir(*exp, "n").parent.name,
        # <run>/: what a run folder holds beside its iterations
        layout.CONFIG_FILE, layout.MANIFEST_FILE, layout.POLICY_TRAIN_FILE,
        layout.policy_model_dir(run).name, layout.evaluation_dir(run, "solver").parent.name,
        "timing.json", "base_models",  # vdlib.loop.progress, vdlib.loop.model_store
    }
    return frozenset(n.lower() for n in names)


#: folders and files vdlib writes beside a run folder or inside one, compared case-blind; and
#: of a form vdlib gives its own entries: ``iter_<t>`` (:func:`vdlib.config.layout.iteration_of`)
#: and a folder set aside by ``--force`` (``<name>.replaced-<time>``)
RESERVED_NAMES = _reserved_names()
_SET_ASIDE = re.compile(r".*\.replaced-.*", re.I)


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
    if value.lower() in RESERVED_NAMES or _SET_ASIDE.fullmatch(value) \
            or layout.iteration_of(value.lower()) is not None:
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
