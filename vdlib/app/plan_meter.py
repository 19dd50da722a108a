"""What ``vdlib plan --measure`` (:mod:`vdlib.app.plan_measure`) counts while the loop runs:
per-stage counters fed by patched calls (TRL's training, engine starts, the tokens vLLM
generates in-process or through vdlib's servers), every GPU's peak memory (nvidia-smi every
second), and the checks on the machine before a measurement (how many GPUs it has, whether
other processes already fill them)."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from vdlib.app.plan_table import PlanError

__all__ = ["Meter", "time_calls", "instrument", "check_idle_gpus", "machine_gpus",
           "gpu_memory_used"]


class Meter:
    """Per-stage counters fed by the patches and the memory sampler."""

    def __init__(self) -> None:
        self.stage = "setup"
        self.c: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.peak: dict[str, dict[int, float]] = defaultdict(dict)
        self._stop = threading.Event()

    def add(self, key: str, value: float) -> None:
        self.c[self.stage][key] += value

    def sample(self) -> None:
        while not self._stop.wait(1.0):
            for gpu, used in gpu_memory_used(timeout=10).items():
                self.peak[self.stage][gpu] = max(self.peak[self.stage].get(gpu, 0.0),
                                                 round(used, 1))

    def dump(self) -> dict[str, Any]:
        """The counters and peaks as JSON (a later command of the same measurement loads them)."""
        return {"counters": {k: dict(v) for k, v in self.c.items()},
                "peak": {k: {str(g): v for g, v in p.items()} for k, p in self.peak.items()}}

    def load(self, raw: dict[str, Any]) -> None:
        for stage, counts in raw.get("counters", {}).items():
            for key, value in counts.items():
                self.c[stage][key] += float(value)
        for stage, peaks in raw.get("peak", {}).items():
            self.peak[stage].update({int(g): float(v) for g, v in peaks.items()})

    def forget(self, stage: str) -> None:
        """Drop a stage's counters and peaks (a failed attempt: the stage runs again)."""
        self.c.pop(stage, None)
        self.peak.pop(stage, None)

    def start(self) -> None:
        if shutil.which("nvidia-smi"):
            threading.Thread(target=self.sample, daemon=True).start()

    def stop(self) -> None:
        self._stop.set()


def time_calls(owner: Any, name: str, add: Callable[[str, float], None], key: str,
               count: str | None = None) -> None:
    """Patch ``owner.name`` so that every call adds its seconds to ``key`` through ``add`` (and,
    with ``count``, 1 to ``count``), also when it raises. Used here and by
    benchmarks/iteration_profile.py."""
    original = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            add(key, time.perf_counter() - start)
            if count:
                add(count, 1)

    setattr(owner, name, wrapper)


def instrument(meter: Meter) -> None:
    import transformers

    import vdlib.engines.serving as serving
    import vdlib.engines.vllm_backend as vb

    time_calls(transformers.Trainer, "train", meter.add, "train_s")
    time_calls(vb, "build_llm", meter.add, "engine_start_s")
    # the servers start together
    time_calls(serving.VLLMServer, "wait_ready", meter.add, "engine_start_s")
    try:
        import vllm
    except ImportError:
        vllm = None
    if vllm is not None:
        original = vllm.LLM.generate

        def generate(self: Any, *args: Any, **kwargs: Any) -> Any:
            outs = original(self, *args, **kwargs)
            meter.add("tokens", sum(len(c.token_ids) for o in outs for c in o.outputs))
            return outs

        vllm.LLM.generate = generate
    # generate_batches: ServerEngine.generate calls it, and curriculum generation calls it alone
    server_generate = serving.ServerEngine.generate_batches

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        per_batch = server_generate(self, *args, **kwargs)
        meter.add("tokens", sum(len(s.token_ids) for batch in per_batch for s in batch))
        return per_batch

    serving.ServerEngine.generate_batches = counted



def check_idle_gpus(gpus: int, *, limit_gib: float = 2.0) -> None:
    """Refuse to measure on GPUs that other processes already fill: every peak would include
    their memory. Measured: a vLLM server orphaned by a killed command held 56.8 GiB of an H200,
    and the next solver stage ran out of memory beside it."""
    busy = [f"GPU {gpu}: {used:.1f} GiB in use"
            for gpu, used in gpu_memory_used().items() if gpu < gpus and used > limit_gib]
    if not busy:
        return
    try:
        apps = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                               "--format=csv,noheader"], capture_output=True, text=True,
                              timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        apps = ""
    raise PlanError(f"--measure needs idle GPUs, but {'; '.join(busy)} before it starts "
                    f"(processes: {apps or 'none listed'}); stop them (e.g. a vLLM server "
                    "left by a killed command: pkill -f vllm.entrypoints) and run again")


def gpu_memory_used(timeout: float = 30) -> dict[int, float]:
    """GiB in use on each GPU, every process counted (nvidia-smi); empty without it."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,memory.used",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=timeout).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    used = {}
    for line in out.strip().splitlines():
        try:
            gpu, mib = (int(x) for x in line.split(","))
        except ValueError:
            continue
        used[gpu] = mib / 1024
    return used


def machine_gpus(torch: Any) -> int:
    """The machine's GPUs, not only the visible ones: the trainer sees GPU 0 alone (TRL trains
    one process on one GPU) and the vLLM servers get the physical ids of ``engine.server_gpus``."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
        n = sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))
    except (OSError, subprocess.SubprocessError):
        n = 0
    return max(n, torch.cuda.device_count())
