"""Does this machine have the GPUs a run of these params takes (``launcher.gpus_per_run``)?

The paper runs each experiment on 2 x H200 (paper, App. 'Compute requirements'), and the
``paper`` profile says so: ``launcher.gpus_per_run: 2``. A run takes them one of two ways:

- **one process per GPU** (``accelerate launch --num_processes N -m vdlib run``, which
  ``vdlib grid`` starts for a run of N GPUs): the world size is N;
- **one process, a vLLM server per GPU** (``engine.backend: server`` with
  ``engine.server_gpus`` naming the N GPUs; ``params/smollm2/topology_2gpu.yaml``, and what
  ``vdlib plan --measure --gpus-per-run N`` runs): the machine must have N GPUs.

:func:`gpu_shortfall` says in one line what is missing, before any model loads (pure: the
counts are arguments, so tests give fake ones); :func:`check_gpus_per_run` raises it as a
:class:`vdlib.config.ConfigError` naming the key.

>>> gpu_shortfall(2, visible=1, world=1, servers=0, machine=1).split(" (")[0]
'launcher.gpus_per_run = 2: a run of these params takes 2 GPUs, but this machine shows 1'
>>> gpu_shortfall(2, visible=2, world=2, servers=0, machine=2) is None
True
"""

from __future__ import annotations

import os
import shutil
import subprocess

__all__ = ["gpu_shortfall", "visible_gpu_count", "machine_gpu_count", "check_gpus_per_run"]


def _fix(need: int) -> str:
    return (f"run it on a machine with {need} GPUs, or set launcher.gpus_per_run: 1 in the "
            "params to run it on one (slower; docs/SCALING.md, 'Planning a run')")


def gpu_shortfall(need: int, *, visible: int, world: int, servers: int, machine: int
                  ) -> str | None:
    """Why a run needing ``need`` GPUs cannot start here, or None. ``visible``: GPUs this
    process sees; ``world``: processes of the run (``accelerate launch``); ``servers``: distinct
    ``engine.server_gpus`` with the server backend (0 otherwise); ``machine``: GPUs of the
    machine (a process pinned to one still starts servers on the others)."""
    if need <= 1:
        return None
    head = f"launcher.gpus_per_run = {need}: a run of these params takes {need} GPUs"
    if world > 1:  # accelerate launch: every process sees the run's GPUs
        if visible < need:
            return (f"{head}, but its {world} processes see {visible} GPU(s); {_fix(need)}")
        return None
    if servers >= need:  # the paper's topology in one process: servers on the machine's GPUs
        if machine < need:
            return (f"{head} (engine.server_gpus: one vLLM server each), but this machine has "
                    f"{machine}; {_fix(need)}")
        return None
    if max(visible, machine) < need:
        return f"{head}, but this machine shows {max(visible, machine)} ({_fix(need)})"
    return (f"{head}, one process each: start it with `accelerate launch --num_processes "
            f"{need} -m vdlib run PARAMS`, or with `vdlib grid PARAMS` (which does that for "
            "each run, as the notebooks' run_grid does); or "
            f"{_fix(need).split(', or ')[1]}")


def visible_gpu_count() -> int:
    """GPUs this process sees: ``CUDA_VISIBLE_DEVICES`` when set (``""``: none), else torch's
    count."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return len([g for g in env.split(",") if g.strip()])
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def machine_gpu_count() -> int:
    """GPUs of the machine (``nvidia-smi -L``), whatever this process sees; at least the
    visible ones."""
    n = 0
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True,
                                 timeout=30).stdout
            n = sum(1 for line in out.splitlines() if line.startswith("GPU "))
        except (OSError, subprocess.SubprocessError):
            n = 0
    return max(n, visible_gpu_count())


def check_gpus_per_run(cfg, *, visible: int | None = None, world: int | None = None,
                       machine: int | None = None) -> None:
    """Raise :class:`vdlib.config.ConfigError` (one line, naming ``launcher.gpus_per_run``) when
    this machine or launch cannot give a run of ``cfg`` its GPUs (a run on ``model.device``
    cpu takes none); the counts default to this machine's."""
    from vdlib.config import ConfigError
    from vdlib.loop.distributed import world_size

    need = cfg.launcher.gpus_per_run
    if need <= 1 or str(cfg.model.device).startswith("cpu"):  # a CPU run takes no GPU
        return
    servers = len(set(cfg.engine.server_gpus)) if cfg.engine.backend == "server" else 0
    visible = visible_gpu_count() if visible is None else visible
    world = world_size() if world is None else world
    if machine is None:
        machine = machine_gpu_count() if servers >= need else visible
    why = gpu_shortfall(need, visible=visible, world=world, servers=servers, machine=machine)
    if why:
        raise ConfigError(why)
