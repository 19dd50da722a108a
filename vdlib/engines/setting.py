"""The engine setting (``engine.backend``): one :class:`~vdlib.engines.generation.GenerationEngine`
per sampling stage, started from that stage's checkpoint and released after it.

Every stage that samples (curriculum generation, solver scoring, the proposer reward's solver
answers, evaluation, the local verifier) asks :func:`open_engine` for an engine over a checkpoint
*path on disk* and uses it inside a ``with`` block:

- ``hf``: the checkpoint loaded with transformers (:class:`~vdlib.engines.generation.HFEngine`);
- ``vllm``: an in-process ``vllm.LLM`` with vdlib's logits processor
  (:class:`~vdlib.engines.vllm_engine.VLLMEngine`), shut down on exit so its GPU memory returns
  before the next stage trains;
- ``server``: a vLLM OpenAI server (:class:`~vdlib.engines.serving.ServerEngine`), started by vdlib
  for the block (one per GPU of ``engine.server_gpus``) or reached at ``engine.server_url``.

**Lifetime (one GPU shared with training).** Each engine lives exactly as long as its stage and
is always started from the checkpoint that the previous stage *saved* (the trained proposer for
generation, the frozen solver of iteration t-1 for scoring), so generation always samples from
the current weights and never from a stale copy; training then gets the GPU's memory back. The
only engine that lives through training is TRL's own colocated vLLM for the GRPO rollouts,
which TRL reloads with the policy's weights before every rollout batch (``sync_weights``).

>>> from vdlib.config.experiment import load_params
>>> engine_kind(load_params({"profile": "tiny"}).engine)
'hf'
>>> engine_kind(load_params({"profile": "gpu"}).engine), rollout_mode(load_params({}).engine)
('vllm', 'colocate')
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import logging
import urllib.request
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the engine section, read by attribute (config sits below the engines)
    from vdlib.config.config_runtime import EngineConfig

__all__ = ["open_engine", "engine_kind", "rollout_mode", "trl_vllm_args", "rollout_llm_kwargs",
           "RolloutSetting", "rollout_setting", "kv_cache_bytes", "vllm_max_len",
           "served_model_name", "server_gpus", "release_cuda_memory"]

logger = logging.getLogger(__name__)


def engine_kind(ecfg: EngineConfig) -> str:
    """The backend name (``hf``, ``vllm`` or ``server``)."""
    return ecfg.backend


def rollout_mode(ecfg: EngineConfig) -> str:
    """Engine of TRL's GRPO rollouts: ``hf`` (transformers), ``colocate`` or ``server``."""
    if ecfg.rollouts != "auto":
        return ecfg.rollouts
    return "hf" if ecfg.backend == "hf" else "colocate"


def trl_vllm_args(ecfg: EngineConfig, max_prompt_tokens: int, max_completion: int) -> dict:
    """TRL ``GRPOConfig`` keywords that route the rollouts through vLLM (empty for ``hf``)."""
    mode = rollout_mode(ecfg)
    if mode == "hf":
        return {}
    kw: dict[str, Any] = {"use_vllm": True, "vllm_mode": mode}
    if mode == "colocate":
        kw.update(vllm_gpu_memory_utilization=ecfg.rollout_gpu_memory_utilization,
                  vllm_max_model_length=ecfg.max_model_len
                  or vllm_max_len(max_prompt_tokens, max_completion))
    elif ecfg.rollout_server_url:
        kw["vllm_server_base_url"] = ecfg.rollout_server_url
    return kw


def kv_cache_bytes(gib: float | None) -> dict[str, int]:
    """``{"kv_cache_memory_bytes": ...}`` for a KV cache of ``gib`` GiB ({} for None).

    >>> kv_cache_bytes(0.5), kv_cache_bytes(None)
    ({'kv_cache_memory_bytes': 536870912}, {})
    """
    return {} if gib is None else {"kv_cache_memory_bytes": int(gib * 2**30)}


def rollout_llm_kwargs(ecfg: EngineConfig) -> dict[str, Any]:
    """Extra ``vllm.LLM`` keywords of TRL's colocated engine (``engine.rollout_kv_cache_gb``),
    for :class:`~vdlib.loop.trainer.MaskedGRPOTrainer`'s ``rollout_llm_kwargs``."""
    return kv_cache_bytes(ecfg.rollout_kv_cache_gb) if rollout_mode(ecfg) == "colocate" else {}


@dataclasses.dataclass(frozen=True)
class RolloutSetting:
    """How TRL's GRPO rollouts sample, for one trainer (:func:`rollout_setting`).

    - ``mode``: ``hf`` (transformers), ``colocate`` or ``server`` (:func:`rollout_mode`);
    - ``trl_args``: TRL ``GRPOConfig`` keywords (:func:`trl_vllm_args`, plus sleep mode when the
      run's engine serves the rollouts); empty for ``hf``;
    - ``llm_kwargs``: extra ``vllm.LLM`` keywords of TRL's colocated engine
      (:func:`rollout_llm_kwargs`), for ``MaskedGRPOTrainer(rollout_llm_kwargs=...)``;
    - ``llm_factory``: what TRL's ``LLM(...)`` returns instead of a new engine (the run's engine,
      ``engine.lifetime: run``), for ``MaskedGRPOTrainer(rollout_llm_factory=...)``; else None.
    """

    mode: str
    trl_args: dict[str, Any]
    llm_kwargs: dict[str, Any]
    llm_factory: Any = None


def rollout_setting(ecfg: EngineConfig, max_prompt_tokens: int, max_completion: int,
                    run_engine: Any = None) -> RolloutSetting:
    """The whole rollout setting of one GRPO trainer from the engine section: its mode, TRL's
    keywords, the colocated engine's keywords, and the run's engine handed to TRL when there is
    one (``run_engine``: the run's :class:`~vdlib.engines.engine_lifetime.RunEngine`, or None)
    and TRL colocates its rollouts (sleep mode on: TRL pushes its policy again after every
    sleep). ``max_prompt_tokens`` + ``max_completion`` size a colocated engine's context.

    >>> from vdlib.config.experiment import load_params
    >>> rollout_setting(load_params({"profile": "tiny"}).engine, 100, 512)
    RolloutSetting(mode='hf', trl_args={}, llm_kwargs={}, llm_factory=None)
    """
    mode = rollout_mode(ecfg)
    trl = trl_vllm_args(ecfg, max_prompt_tokens, max_completion)
    factory = None
    if run_engine is not None and mode == "colocate":
        factory = run_engine.trl_llm
        trl = {**trl, "vllm_enable_sleep_mode": True}
    return RolloutSetting(mode=mode, trl_args=trl, llm_kwargs=rollout_llm_kwargs(ecfg),
                          llm_factory=factory)


def vllm_max_len(max_prompt_tokens: int, max_new_tokens: int) -> int:
    """A context length that holds the prompt and the answer, rounded up to 256."""
    need = max_prompt_tokens + max_new_tokens
    return -(-need // 256) * 256


def served_model_name(base_url: str, timeout: float = 30.0) -> str:
    """The first model a running vLLM server serves (``GET /v1/models``)."""
    with urllib.request.urlopen(base_url.rstrip("/") + "/v1/models", timeout=timeout) as r:
        data = json.loads(r.read().decode())
    models = [m.get("id") for m in data.get("data", []) if m.get("id")]
    if not models:
        raise RuntimeError(f"the server at {base_url} serves no model (GET /v1/models)")
    return str(models[0])


def release_cuda_memory() -> None:
    """Collect garbage (a trainer's reference cycles hold its model, gradients and optimizer
    state) and return the CUDA caching allocator's free blocks, so that the GPU memory of a
    finished stage is free for the next one (a vLLM server, the next trainer). Only in a
    process that has used CUDA: a full collection costs 0.3-1 s with transformers and TRL
    loaded, and on the CPU the loop's many short stages (the tests, the tiny profile) would pay
    it for nothing."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a core dependency
        return
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        gc.collect()
        torch.cuda.empty_cache()
        left = torch.cuda.memory_allocated()
        logger.info("CUDA memory after the stage: %.2f GiB allocated, %.2f GiB reserved",
                    left / 2**30, torch.cuda.memory_reserved() / 2**30)
        if left > LEFTOVER_REPORT_BYTES:
            logger.warning("%.1f GiB of CUDA memory is still allocated after the stage; live "
                           "tensors by owner: %s", left / 2**30, cuda_memory_owners())


#: Memory still allocated after a stage above which :func:`release_cuda_memory` says who holds it.
LEFTOVER_REPORT_BYTES = 2**30


def cuda_memory_owners(top: int = 8, device_type: str = "cuda") -> str:
    """The live CUDA tensors the garbage collector sees, summed by the class of the module that
    holds them as a parameter or buffer (``module.Class``), else ``loose``: which objects keep a
    finished stage's GPU memory (a trainer's policy, a rollout engine's model)."""
    import warnings

    import torch

    with warnings.catch_warnings():  # isinstance() touches deprecated module proxies
        warnings.simplefilter("ignore")
        return _owners(torch, top, device_type)


def _owners(torch: Any, top: int, device_type: str) -> str:
    owners: dict[int, str] = {}
    for obj in gc.get_objects():
        if isinstance(obj, torch.nn.Module):
            name = f"{type(obj).__module__}.{type(obj).__qualname__}"
            for t in (*obj._parameters.values(), *obj._buffers.values()):
                if t is not None:
                    owners.setdefault(id(t), name)
    sizes: dict[str, float] = {}
    seen: set[int] = set()
    for obj in gc.get_objects():
        try:
            if not (isinstance(obj, torch.Tensor) and obj.device.type == device_type):
                continue
            ptr = obj.untyped_storage().data_ptr()
        except Exception:  # noqa: BLE001, S112 - a tensor without storage holds no memory
            continue
        if ptr in seen:
            continue
        seen.add(ptr)
        key = owners.get(id(obj), "loose")
        sizes[key] = sizes.get(key, 0.0) + obj.untyped_storage().nbytes() / 2**30
    ranked = sorted(sizes.items(), key=lambda kv: -kv[1])[:top]
    return ", ".join(f"{k} {v:.2f} GiB" for k, v in ranked) or "none the collector sees"


@contextlib.contextmanager
def open_engine(ecfg: EngineConfig, model: str, *, device: str = "cpu",
                dtype: str = "bfloat16", cache_dir: str | None = None,
                max_new_tokens: int = 2048, max_prompt_tokens: int = 1024,
                batch_size: int | None = None, round_tokens: int | None = None,
                show_progress: bool = True, seed: int = 0,
                training_device: str | None = None,
                enforce_eager: bool | None = None) -> Iterator[Any]:
    """An engine of ``ecfg.backend`` over checkpoint ``model`` (registered name, directory or
    Hub id) for the duration of the block; its memory is released on exit.

    ``batch_size`` and ``round_tokens`` apply to the transformers engine (vLLM schedules its own
    batches); ``max_new_tokens`` + ``max_prompt_tokens`` size vLLM's context unless
    ``engine.max_model_len`` is set. ``training_device`` (e.g. ``cuda:0``) names a GPU that a
    trainer holds during the block: the server backend then starts no server there.
    ``enforce_eager`` overrides ``engine.enforce_eager`` (the loop sets it for an engine that
    shares its process with TRL's colocated vLLM: two in-process engines share vLLM's global
    CUDA-graph state, and the second one's capture breaks the first one's decoding)."""
    from vdlib.engines.models import checkpoint_path, load_model, load_tokenizer

    kind = engine_kind(ecfg)
    if kind == "hf":
        import torch

        from vdlib.engines.generation import HFEngine

        hf_model, tok = load_model(model, dtype=dtype if device != "cpu" else ecfg.cpu_dtype,
                                   device=device, cache_dir=cache_dir)
        if hf_model.device.type == "cpu" and hf_model.dtype == torch.bfloat16:
            # torch's CPU SDPA kernel decodes bfloat16 slower than float32 at this context
            # length; transformers' eager attention does not (benchmarks/cpu_dtype_speed.py)
            hf_model.set_attn_implementation("eager")
        try:
            yield HFEngine(hf_model, tok, batch_size=batch_size or ecfg.batch_size,
                           show_progress=show_progress, round_tokens=round_tokens)
        finally:
            del hf_model
            release_cuda_memory()
        return

    path = checkpoint_path(model, cache_dir)
    tok = load_tokenizer(path)
    max_len = ecfg.max_model_len or vllm_max_len(max_prompt_tokens, max_new_tokens)
    eager = ecfg.enforce_eager if enforce_eager is None else enforce_eager
    vllm_dtype = "float32" if dtype == "float32" else dtype
    if kind == "vllm":
        from vdlib.engines.vllm_backend import build_llm
        from vdlib.engines.vllm_engine import VLLMEngine

        llm = build_llm(path, dtype=vllm_dtype, seed=seed, max_model_len=max_len,
                        gpu_memory_utilization=ecfg.gpu_memory_utilization,
                        enforce_eager=eager, **kv_cache_bytes(ecfg.kv_cache_gb))
        engine = VLLMEngine(llm, tok, route=ecfg.route, show_progress=show_progress)
        try:
            yield engine
        finally:
            engine.close()  # shutdown_llm: engine core, gc, empty_cache
        return

    from vdlib.engines.serving import ServerEngine, VLLMServer
    from vdlib.engines.vllm_backend import processor_fqcns

    if ecfg.route != "processor":
        raise ValueError(f"engine.route = {ecfg.route!r} is not supported by the server "
                         "backend; allowed values there: processor")
    if ecfg.server_url:
        yield ServerEngine(ecfg.server_url, served_model_name(ecfg.server_url), tok)
        return
    extra = ["--enforce-eager"] if eager else []
    if ecfg.kv_cache_gb is not None:
        extra += ["--kv-cache-memory-bytes", str(kv_cache_bytes(ecfg.kv_cache_gb)[
            "kv_cache_memory_bytes"])]
    gpus = server_gpus(ecfg, device, training_device)
    with contextlib.ExitStack() as stack:
        servers = [VLLMServer(path, gpu=gpu, max_model_len=max_len, dtype=vllm_dtype,
                              gpu_memory_utilization=ecfg.gpu_memory_utilization, seed=seed % 2**32,
                              logits_processors=processor_fqcns(), extra=extra)
                   for gpu in gpus]
        for server in servers:  # start all first, then wait: the servers load in parallel
            stack.enter_context(_stopping(server))
            server.start_process()
        for server in servers:
            server.wait_ready()
        logger.info("vLLM servers on GPU(s) %s: %s", ", ".join(str(g) for g in gpus),
                    ", ".join(s.base_url for s in servers))
        yield ServerEngine([s.base_url for s in servers], servers[0].model_name, tok)


@contextlib.contextmanager
def _stopping(server: Any) -> Iterator[None]:
    try:
        yield
    finally:
        server.stop()


def server_gpus(ecfg: EngineConfig, device: str, training_device: str | None = None
                ) -> list[str | None]:
    """The GPUs to start servers on: ``engine.server_gpus`` without the training GPU (if one
    is given and others remain), or the device's own GPU (None: inherit the environment).

    >>> from vdlib.config.experiment import EngineConfig
    >>> server_gpus(EngineConfig(server_gpus=["0", "1"]), "cuda:0", training_device="cuda:0")
    ['1']
    >>> server_gpus(EngineConfig(server_gpus=["0", "1"]), "cuda:0")
    ['0', '1']
    >>> server_gpus(EngineConfig(), "cuda:1")
    ['1']
    """
    gpus: list[str | None] = list(ecfg.server_gpus)
    busy = training_device.split(":", 1)[1] if training_device and ":" in training_device \
        else ("0" if training_device == "cuda" else None)
    if busy is not None and len(gpus) > 1:
        gpus = [g for g in gpus if g != busy] or gpus
    if not gpus:
        gpus = [device.split(":", 1)[1] if device.startswith("cuda:") else None]
    return gpus
