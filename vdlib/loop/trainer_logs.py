"""The GRPO trainers' per-step logs through ``logging``, not ``print``.

transformers' Trainer hands every ``log`` call to its ProgressCallback, which writes the dict
above the progress bar (``{'loss': ...}`` on stdout twice a step with TRL's extra metrics), or,
with tqdm off, to PrinterCallback, which prints it. vdlib keeps the same numbers in each phase's
``*_train.json`` (``log_history``) and in the run's tracker; :func:`log_not_print` swaps both
callbacks for ones that send the dict to this module's logger at DEBUG (``vdlib -v`` shows it),
keeping the progress bar.
"""

from __future__ import annotations

import logging
from typing import Any

from transformers.trainer_callback import PrinterCallback, ProgressCallback, TrainerCallback

__all__ = ["LogRecordCallback", "QuietProgressCallback", "log_not_print"]

logger = logging.getLogger(__name__)


def _debug(state: Any, logs: dict[str, Any] | None) -> None:
    if logs and state.is_world_process_zero:
        logger.debug("step %s: %s", state.global_step,
                     {k: v for k, v in logs.items() if k != "total_flos"})


class QuietProgressCallback(ProgressCallback):
    """transformers' progress bar, with the logs sent to ``logging`` instead of the bar."""

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
        _debug(state, logs)


class LogRecordCallback(TrainerCallback):
    """PrinterCallback's place with tqdm off: the logs to ``logging``."""

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
        _debug(state, logs)


def log_not_print(trainer: Any) -> None:
    """Swap ``trainer``'s ProgressCallback / PrinterCallback for the logging ones (the others
    and their order kept); a trainer without a callback handler is left as it is."""
    handler = getattr(trainer, "callback_handler", None)
    for i, cb in enumerate(getattr(handler, "callbacks", None) or []):
        if type(cb) is ProgressCallback:
            handler.callbacks[i] = QuietProgressCallback(
                **({"max_str_len": cb.max_str_len} if hasattr(cb, "max_str_len") else {}))
        elif type(cb) is PrinterCallback:
            handler.callbacks[i] = LogRecordCallback()
