"""A quiet terminal for batch runs: known warnings of the pinned dependencies filtered, and
progress on the heartbeat lines (:mod:`vdlib.loop.progress`) instead of carriage-return bars.

``vdlib notebooks run`` (and so ``make demo``) streams each notebook kernel's output to the
terminal. Left alone, that output interleaves the log lines with tqdm bars redrawn by carriage
returns (transformers' weight loading and GGUF conversion, TRL's training bar, datasets' maps,
vdlib's own generate / majority-vote / warm-start bars) and with warnings that the pinned
versions emit on every run. :func:`run_notebooks <vdlib.app.notebooks.run_notebooks>` therefore
starts each kernel

- with :data:`QUIET_ENV` in its environment (:func:`quiet_env`): ``TQDM_DISABLE`` (tqdm's own
  switch, for every bar created without an explicit ``disable``), ``HF_HUB_DISABLE_PROGRESS_BARS``
  (huggingface_hub and transformers' ``logging.tqdm``) and ``HF_DATASETS_DISABLE_PROGRESS_BARS``;
  vdlib's own bars ask :func:`bars_disabled`;
- with :data:`KERNEL_ARGUMENTS`: the kernel runs :func:`quiet_kernel` before the first cell (it
  installs :func:`filter_known_warnings` and :func:`filter_known_log_records`), and its own
  start-up notice (ipykernel's "running over TCP without encryption") is not logged.

Interactively (JupyterLab, a plain ``papermill`` call) nothing changes: the bars show.

Only the warnings of :data:`KNOWN_WARNINGS` are filtered, each by its message, category and
the module that emits it, so the same message from elsewhere, or any other warning of the same
modules, still shows; likewise the log records of :data:`KNOWN_LOG_RECORDS`, by logger and text.

>>> import warnings
>>> with warnings.catch_warnings(record=True) as seen:
...     warnings.simplefilter("always")
...     filter_known_warnings()
...     warnings.warn_explicit("`gradient_checkpointing` is deprecated and will be removed in v6.",
...                            FutureWarning, "training_args.py", 1,
...                            module="transformers.training_args")
...     warnings.warn_explicit("`gradient_checkpointing` is deprecated", FutureWarning,
...                            "mine.py", 1, module="mine")
>>> [str(w.message) for w in seen]
['`gradient_checkpointing` is deprecated']
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import os
import re
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

__all__ = ["KnownWarning", "KNOWN_WARNINGS", "KnownLogRecord", "KNOWN_LOG_RECORDS", "QUIET_ENV",
           "KERNEL_ARGUMENTS", "filter_known_warnings", "filter_known_log_records", "quiet_env",
           "quiet_kernel", "bars_disabled"]


@dataclass(frozen=True)
class KnownWarning:
    """A warning a pinned dependency emits on every run, and why it is harmless here."""

    message: str  #: the start of the warning's text (matched literally)
    category: str  #: a builtin warning class name, e.g. "FutureWarning"
    module: str  #: the emitting module or package (its submodules too), dotted
    why: str

    def module_pattern(self) -> str:
        """A regex for the ``module`` warnings match against: the dotted name, or, for
        warnings raised while a file is compiled (SyntaxWarning), its path without ``.py``."""
        dotted = re.escape(self.module)
        path = re.escape(self.module.replace(".", "/"))
        return rf"(?:{dotted}(?:\..+)?|(?:.*/)?{path}(?:/.+)?)\Z"


#: The warnings ``make demo`` printed on 2 CPU cores with constraints/cpu.txt (transformers
#: 5.24, TRL 1.16, tqdm 4.70, reasoning-gym's cellpylib); each is filtered by message, category
#: and module.
KNOWN_WARNINGS: tuple[KnownWarning, ...] = (
    KnownWarning("IProgress not found", "Warning", "tqdm.auto",
                 "tqdm.auto in a kernel without ipywidgets falls back to the text bar"),
    KnownWarning("`gradient_checkpointing` is deprecated", "FutureWarning",
                 "transformers.training_args",
                 "vdlib passes TrainingArguments' gradient_checkpointing, the name every "
                 "transformers of pyproject's range (>=5.17) accepts; it still applies"),
    KnownWarning("`is_gradient_checkpointing` is deprecated", "FutureWarning",
                 "transformers.modeling_utils",
                 "TRL 1.16 reads the old property around generation; the value is right"),
    KnownWarning('"is" with a literal', "SyntaxWarning", "cellpylib",
                 "cellpylib (reasoning-gym's dependency) compiles with it once per install"),
)

@dataclass(frozen=True)
class KnownLogRecord:
    """A log record a pinned dependency writes on every run, and why it is harmless here."""

    logger: str  #: the logger's name (records of that logger only)
    message: str  #: a part of the record's text (matched literally)
    why: str


#: Log records ``make demo`` printed that say nothing to a reader of the demo
KNOWN_LOG_RECORDS: tuple[KnownLogRecord, ...] = (
    KnownLogRecord("trl.trainer.grpo_trainer",
                   "You passed `model_init_kwargs` to the `GRPOConfig`, but your model is "
                   "already instantiated",
                   "vdlib passes them for the reference model that TRL 1.16 builds from the "
                   "policy's path (beta > 0), where they apply; only the policy, passed "
                   "instantiated, ignores them"),
)


class _DropKnown(logging.Filter):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def filter(self, record: logging.LogRecord) -> bool:
        return self.text not in record.getMessage()


#: Environment of a batch-run kernel: every tqdm bar off (progress goes to the heartbeat lines)
QUIET_ENV: dict[str, str] = {
    "TQDM_DISABLE": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
}

#: Kernel command-line arguments of a batch run (nbclient's ``extra_arguments``)
KERNEL_ARGUMENTS: list[str] = [
    '--IPKernelApp.exec_lines=__import__("vdlib.utils.terminal").utils.terminal.quiet_kernel()',
    "--IPKernelApp.log_level=ERROR",
]


def filter_known_warnings() -> None:
    """Ignore each warning of :data:`KNOWN_WARNINGS` (by message, category and module) in this
    process."""
    for known in KNOWN_WARNINGS:
        category = getattr(builtins, known.category)
        warnings.filterwarnings("ignore", message=re.escape(known.message), category=category,
                                module=known.module_pattern())


def filter_known_log_records() -> None:
    """Drop each record of :data:`KNOWN_LOG_RECORDS` at its logger, in this process (once)."""
    for known in KNOWN_LOG_RECORDS:
        log = logging.getLogger(known.logger)
        if not any(isinstance(f, _DropKnown) and f.text == known.message for f in log.filters):
            log.addFilter(_DropKnown(known.message))


def quiet_kernel() -> None:
    """What a batch-run kernel does before its first cell: :func:`filter_known_warnings` and
    :func:`filter_known_log_records`."""
    filter_known_warnings()
    filter_known_log_records()


@contextlib.contextmanager
def quiet_env(extra: Mapping[str, str] | None = None) -> Iterator[None]:
    """``os.environ`` with :data:`QUIET_ENV` (and ``extra``) for the block, as it was after it;
    a kernel started inside inherits it."""
    values = {**QUIET_ENV, **(extra or {})}
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def bars_disabled() -> bool:
    """Whether tqdm bars are switched off (``TQDM_DISABLE`` set to a true value, as in a batch
    run): vdlib's own bars, which pass ``disable=`` explicitly and so bypass tqdm's reading of
    the variable, ask this."""
    return os.environ.get("TQDM_DISABLE", "").strip().lower() in ("1", "true", "yes", "on")
