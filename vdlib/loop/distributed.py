"""Processes under ``accelerate launch`` / torchrun: which rank am I, wait, gather, broadcast;
a run folder opened once for all of them (:func:`open_run`).

Every process runs ``vdlib run``; the co-evolution loop (vdlib.loop.coevolution) trains on every
rank and runs the other stages on the main process only. Without a process group every helper is the
single-process no-op (rank 0 of 1), so the single-process loop is unchanged.
"""

from __future__ import annotations

import datetime
import logging
import os
from pathlib import Path
from typing import Any

__all__ = ["init_distributed", "shutdown_distributed", "world_size", "rank", "local_rank",
           "is_main_process", "barrier", "broadcast_from_main", "gather_to_main",
           "merge_rank_records", "open_run"]

logger = logging.getLogger(__name__)

# Under ``accelerate launch`` (or torchrun) every process runs ``vdlib run``; these helpers tell
# them apart. Without a process group they are the single-process no-ops (rank 0 of 1), so the
# single-process loop is unchanged. Waiting ranks use a gloo group with a long timeout
# (``VDLIB_WAIT_TIMEOUT_S``, default 48 h): the main process may generate and score for hours
# while the others wait, longer than NCCL's default collective timeout.

_WAIT_GROUP: Any = None


def _dist() -> Any:
    import torch.distributed as dist

    # a group of one (e.g. the one an in-process vLLM engine sets up) is no group: the loop's
    # collectives become local no-ops
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return dist
    return None


def init_distributed() -> None:
    """Join the process group when launched with several processes (``WORLD_SIZE`` > 1):
    accelerate's ``PartialState`` (NCCL on GPUs, each rank on ``cuda:LOCAL_RANK``), plus a gloo
    group for the loop's barriers and object exchange. No-op for one process."""
    global _WAIT_GROUP
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return
    from accelerate import PartialState

    PartialState()
    dist = _dist()
    if dist is not None and _WAIT_GROUP is None:
        timeout = float(os.environ.get("VDLIB_WAIT_TIMEOUT_S", 48 * 3600))
        _WAIT_GROUP = dist.new_group(backend="gloo",
                                     timeout=datetime.timedelta(seconds=timeout))


def shutdown_distributed() -> None:
    """Leave the process group (all ranks, at the end of ``vdlib run``); no-op for one."""
    global _WAIT_GROUP
    dist = _dist()
    if dist is None:
        return
    dist.barrier(group=_WAIT_GROUP)
    dist.destroy_process_group()
    _WAIT_GROUP = None


def world_size() -> int:
    dist = _dist()
    return dist.get_world_size() if dist is not None else 1


def rank() -> int:
    dist = _dist()
    return dist.get_rank() if dist is not None else 0


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0")) if world_size() > 1 else 0


def is_main_process() -> bool:
    return rank() == 0


def barrier() -> None:
    dist = _dist()
    if dist is not None:
        dist.barrier(group=_WAIT_GROUP)


def broadcast_from_main(value: Any) -> Any:
    """The main process's ``value`` on every rank (so all ranks take the same branch)."""
    dist = _dist()
    if dist is None:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0, group=_WAIT_GROUP)
    return box[0]


def gather_to_main(obj: Any) -> list[Any] | None:
    """Every rank's ``obj`` as a list indexed by rank on the main process; None elsewhere.
    One process: ``[obj]``."""
    dist = _dist()
    if dist is None:
        return [obj]
    out: list[Any] | None = [None] * dist.get_world_size() if dist.get_rank() == 0 else None
    dist.gather_object(obj, out, dst=0, group=_WAIT_GROUP)
    return out


def merge_rank_records(per_rank: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Proposer reward records of each rank as one list ordered by (reward call, rank, index),
    each tagged with its ``rank``. One rank: its records unchanged (no ``rank`` key)."""
    if len(per_rank) == 1:
        return list(per_rank[0])
    merged = [{**r, "rank": k} for k, records in enumerate(per_rank) for r in records]
    return sorted(merged, key=lambda r: (r["call"], r["rank"], r["index"]))


def open_run(cfg: Any, *, force: bool = False) -> tuple[Any, Path]:
    """Claim and start the run folder of ``cfg`` as every run does (a co-evolution
    :class:`vdlib.loop.coevolution.Loop`, a single-policy run): on the main process
    :func:`vdlib.runs.run_state.claim_run` (locked, refused with the differing keys when it
    holds another config; moved aside instead under ``force``), then
    :func:`vdlib.runs.run_start.start_run`; every process then waits at a barrier. Returns (the
    held lock, None on the other processes; the folder)."""
    from vdlib.config.layout import run_path
    from vdlib.runs.run_start import start_run
    from vdlib.runs.run_state import claim_run

    lock = None
    if is_main_process():
        lock, _ = claim_run(cfg, force=force)
        start_run(cfg)
    barrier()
    return lock, run_path(cfg)


def deepspeed_fp32_state_dict(trainer: Any) -> dict[str, Any] | None:
    """Under DeepSpeed the module holds bf16/fp16 weights and the fp32 master weights live in
    its optimizer; TRL's ``save_model`` saves the module's low-precision copy, which would round
    away the iteration's small updates (lr 1e-6) at every checkpoint. This gathers the fp32
    masters (a collective: call it on every rank); None when DeepSpeed is not in use."""
    if not getattr(trainer, "is_deepspeed_enabled", False):
        return None
    from deepspeed.utils import safe_get_full_fp32_param

    module = trainer.accelerator.unwrap_model(trainer.model_wrapped)
    out = {}
    for name, p in module.named_parameters():
        full = safe_get_full_fp32_param(p)
        out[name] = (full if full is not None else p.detach().float()).cpu().contiguous()
    return out
