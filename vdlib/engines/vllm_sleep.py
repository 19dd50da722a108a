"""vLLM's sleep on a GPU other processes share (several runs a card, as ``vdlib grid`` places
them): its device-wide accounting check becomes a warning (:func:`tolerant_sleep`).

The module imports without vLLM; :func:`tolerate_shared_gpu_sleep` wraps the installed vLLM's
worker once, from :func:`vdlib.engines.vllm_backend.use_inprocess_engines` (every vdlib and TRL
engine of a process is in-process, so its worker is this process's).
"""

from __future__ import annotations

import functools
import logging
from typing import Any

__all__ = ["SHARED_GPU_SLEEP_ASSERTION", "tolerant_sleep", "tolerate_shared_gpu_sleep"]

logger = logging.getLogger(__name__)

#: vLLM's check after an engine sleeps (vllm/v1/worker/gpu_worker.py, 0.25.1)
SHARED_GPU_SLEEP_ASSERTION = "Memory usage increased after sleeping."


def tolerant_sleep(sleep: Any) -> Any:
    """``Worker.sleep`` that survives vLLM's accounting check on a GPU other processes share.

    vLLM compares the device's free memory before and after the engine releases its weights and
    KV cache, and asserts that it grew. Another process on the same GPU (three runs a card, as
    ``vdlib grid`` places them) can allocate more in between than the engine released: one of
    twelve runs failed so on 4 x H100, 2026-11-28, though its sleep had freed 8.3 GiB. The check
    comes after the release and only precedes a log line, so this wrapper logs a warning in its
    place; any other AssertionError propagates."""
    if getattr(sleep, "_vdlib_tolerant", False):
        return sleep

    @functools.wraps(sleep)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return sleep(self, *args, **kwargs)
        except AssertionError as err:
            if str(err) != SHARED_GPU_SLEEP_ASSERTION:
                raise
            logger.warning("vLLM engine asleep, but the GPU had less free memory afterwards than "
                           "before: another process on this GPU allocated meanwhile (vLLM's "
                           "check is device-wide); going on")
            return None

    wrapper._vdlib_tolerant = True  # type: ignore[attr-defined]
    return wrapper


def tolerate_shared_gpu_sleep() -> bool:
    """Wrap the installed vLLM's ``Worker.sleep`` with :func:`tolerant_sleep` (once); False where
    vLLM (or its GPU worker) is not importable."""
    try:
        from vllm.v1.worker import gpu_worker
    except Exception:  # noqa: BLE001 - no vLLM, or one without a CUDA build: nothing to wrap
        return False
    worker = getattr(gpu_worker, "Worker", None)
    if worker is None or not callable(getattr(worker, "sleep", None)):
        return False
    worker.sleep = tolerant_sleep(worker.sleep)
    return True
