"""The run's engine (``engine.lifetime: run``): ONE in-process vLLM engine for the whole run,
shared by both roles and by TRL's GRPO rollouts, asleep while training holds the GPU.

Why one engine and not one per role: vLLM 0.25.1 allows one sleep-mode engine per process
("CuMem allocator can only be used for one instance per process"), and the proposer and the
solver of a run share one architecture, so one engine serves both by swapping weights in
memory (docs/vllm.md, "Sharing one GPU with training"). Each use is a hand-over:

1. wake the weights (``wake_up(tags=["weights"])``);
2. push the weights the use must sample from, in memory: a checkpoint's tensors (read from disk
   once and kept on the host, keyed by the checkpoint's files) for vdlib's stages, or the
   trainer's live policy for TRL's rollouts (TRL's own ``sync_weights``);
3. wake the KV cache, reset the prefix cache, sample;
4. ``sleep(level=2)``: weights and KV cache are dropped and their memory goes back to training.

Nothing is reloaded from disk by vLLM and nothing is compiled again after the engine's start.
TRL receives the engine through :func:`vdlib.engines.vllm_backend.trl_llm_kwargs`' factory, as a
:class:`_TRLHandle` whose ``sleep``/``wake_up`` keep this module's bookkeeping, so TRL's
sleep-mode code runs unchanged (it always re-pushes the policy after a level-2 sleep).

Seeds: vdlib's requests carry their own seeds; TRL's rollouts sample from the engine's global
generator, which a fresh engine would have seeded at TRL's engine start, so the hand-over to a
trainer reseeds it the same way (:meth:`RunEngine.trl_llm`): a resumed run samples as an
uninterrupted one.

``VDLIB_ENGINE_FRESHNESS=FILE.jsonl`` (a diagnostic, off by default) appends, at every push,
what the engine now samples from: the source, exact checksums of a few of the engine's weight
tensors and its log-probabilities of fixed prompts; for TRL's pushes also the live policy's own
log-probabilities (tests/test_vllm_gpu.py checks them against the checkpoints).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import random
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from vdlib.engines.generation import GenerationBatch, Sample
from vdlib.engines.vllm_engine import VLLMEngine

__all__ = ["RunEngine", "SharedVLLMEngine", "checkpoint_tensors", "same_architecture",
           "local_checkpoint",
           "FRESHNESS_ENV", "FRESHNESS_PROMPTS"]

logger = logging.getLogger(__name__)

FRESHNESS_ENV = "VDLIB_ENGINE_FRESHNESS"
FRESHNESS_PROMPTS = ("Question: what is 12 plus 30? Answer: 42.",
                     "The derivative of x squared is two x, so at x = 3 it equals six.",
                     "Let n be the smallest prime larger than 20. Then n = 23.")
_ARCH_KEYS = ("architectures", "model_type", "hidden_size", "intermediate_size",
              "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "vocab_size",
              "tie_word_embeddings")


def local_checkpoint(path: str) -> str | None:
    """A checkpoint folder for ``path``: itself when it is one, a Hub id's snapshot already in
    the local Hub cache, else None (never downloads)."""
    if Path(path).is_dir():
        return path
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(path, local_files_only=True)
    except Exception:  # noqa: BLE001 - not cached, not a Hub id: the caller falls back
        return None


def same_architecture(a: str, b: str) -> bool:
    """Whether two checkpoint folders share one architecture (their ``config.json`` agree on
    the shape keys), so one engine can serve both by swapping weights. False when either has
    no readable ``config.json`` (e.g. a Hub id not yet downloaded)."""
    def shape(path: str) -> dict[str, Any] | None:
        folder = local_checkpoint(path)
        try:
            cfg = json.loads((Path(folder or path) / "config.json").read_text())
        except (OSError, ValueError):
            return None
        return {k: cfg.get(k) for k in _ARCH_KEYS}

    sa, sb = shape(a), shape(b)
    return sa is not None and sa == sb


def _files_key(path: str) -> tuple:
    files = sorted(Path(local_checkpoint(path) or path).glob("*.safetensors"))
    return tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files)


def checkpoint_tensors(path: str, dtype: torch.dtype | None = torch.bfloat16,
                       pin: bool = False) -> list[tuple[str, torch.Tensor]]:
    """Every tensor of a checkpoint folder's ``*.safetensors`` files, as ``(name, tensor)`` on
    the host in ``dtype`` (the engine's; None: the checkpoint's own, as for ``model.dtype:
    auto``), in file and key order; floating tensors only are cast. Raises FileNotFoundError
    when the folder has none."""
    from safetensors import safe_open

    files = sorted(Path(local_checkpoint(path) or path).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{path}: no *.safetensors files to push into the engine")
    out: list[tuple[str, torch.Tensor]] = []
    for f in files:
        with safe_open(str(f), framework="pt") as st:
            for name in st.keys():
                t = st.get_tensor(name)
                if dtype is not None and t.is_floating_point():
                    t = t.to(dtype)
                out.append((name, t.pin_memory() if pin else t))
    return out


class SharedVLLMEngine(VLLMEngine):
    """vdlib's :class:`~vdlib.engines.vllm_engine.VLLMEngine` over the run's engine, sampling from
    the weights of ``path``: every call wakes the engine with those weights (unless a ``hold``
    keeps them there) and puts it back to sleep. ``close`` releases nothing: the run owns the
    engine."""

    def __init__(self, owner: RunEngine, path: str, *, route: str = "processor",
                 show_progress: bool = True) -> None:
        super().__init__(_LazyLLM(owner), owner.tokenizer, route=route,
                         show_progress=show_progress)
        self.owner, self.path = owner, path

    def close(self) -> None:
        return None

    def generate_batches(self, batches: Sequence[GenerationBatch], **kwargs: Any
                         ) -> list[list[Sample]]:
        with self.owner.serving(self.path):
            return super().generate_batches(batches, **kwargs)


class _LazyLLM:
    """The owner's ``vllm.LLM``, looked up at each use (the engine starts at its first use)."""

    def __init__(self, owner: RunEngine) -> None:
        self._owner = owner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._owner.llm, name)


class _TRLHandle:
    """What TRL's colocated-vLLM code holds as ``self.llm``: the run's engine, with ``sleep``
    and ``wake_up`` routed through :class:`RunEngine` (idempotent, bookkept) and every other
    attribute forwarded. Any use by TRL leaves the engine's weights unknown to vdlib, so
    vdlib's next use pushes its own."""

    def __init__(self, owner: RunEngine) -> None:
        self._owner = owner
        self.policy: Any = None  # the trainer's model (freshness diagnostic only)

    def sleep(self, level: int = 1) -> None:
        self._owner.sleep()

    def wake_up(self, tags: list[str] | None = None) -> None:
        self._owner.loaded = None  # TRL pushes its policy's weights next
        self._owner.wake(tags)
        if tags == ["kv_cache"] and self._owner.freshness is not None:
            self._owner.record_freshness("trl-policy", policy=self.policy)

    def __getattr__(self, name: str) -> Any:
        self._owner.loaded = None
        return getattr(self._owner.llm, name)


def _close_at_exit(ref: weakref.ref) -> None:
    engine = ref()
    if engine is not None:
        engine.close()


class RunEngine:
    """One run's engine (see the module docstring). ``build_path``: the checkpoint the engine
    starts on (the run's base; the same path across iterations and resumes, so vLLM's compile
    cache key stays the same); ``max_model_len`` must hold every use's prompt and answer."""

    def __init__(self, ecfg: Any, build_path: str, tokenizer: Any, *, max_model_len: int,
                 dtype: str = "bfloat16", seed: int = 0, cache_size: int = 2) -> None:
        self.ecfg, self.build_path, self.tokenizer = ecfg, build_path, tokenizer
        self.max_model_len, self.dtype, self.seed = max_model_len, dtype, seed
        self._llm: Any = None
        self.awake: set[str] = set()
        self.loaded: str | None = None  # the checkpoint whose weights the engine holds now
        self._held = 0
        self._cache: OrderedDict[tuple, list[tuple[str, torch.Tensor]]] = OrderedDict()
        self._cache_size = cache_size
        self.starts: list[float] = []  # seconds of each engine start (one per process)
        self.pushes: list[tuple[str, float]] = []  # (source, seconds)
        path = os.environ.get(FRESHNESS_ENV)
        self.freshness: Path | None = Path(path) if path else None
        self._handle: _TRLHandle | None = None

    # ---------------------------------------------------------------- the engine

    @property
    def llm(self) -> Any:
        if self._llm is None:
            self._start()
        return self._llm

    def _start(self) -> None:
        from vdlib.engines.setting import kv_cache_bytes
        from vdlib.engines.vllm_backend import build_llm

        start = time.perf_counter()
        self._llm = build_llm(self.build_path, dtype=self.dtype, seed=self.seed,
                              max_model_len=self.max_model_len,
                              gpu_memory_utilization=self.ecfg.gpu_memory_utilization,
                              enforce_eager=self.ecfg.enforce_eager, enable_sleep_mode=True,
                              # TRL's colocated engine's setting: its rollout log-probs are
                              # those after temperature and processors (TRL's IS correction)
                              logprobs_mode="processed_logprobs",
                              **kv_cache_bytes(self.ecfg.kv_cache_gb))
        self.starts.append(time.perf_counter() - start)
        self.awake = {"weights", "kv_cache"}
        # a process that ends without closing its run (an exception, a stop) still shuts the
        # engine down awake (close's docstring); weakly, so the hook keeps no engine alive
        atexit.register(_close_at_exit, weakref.ref(self))
        self.loaded = self.build_path
        logger.info("run engine: started once for the run on %s (%.1f s); it sleeps between "
                    "uses and receives each role's weights in memory", self.build_path,
                    self.starts[-1])

    def close(self) -> None:
        """Shut the engine down (end of the run, or the process's exit).

        A sleeping engine is woken first: tensors freed while their memory is released (vLLM
        0.25.1's cumem allocator, sleep level 2) make the allocator call the CUDA driver on
        released handles, which printed "CUDA Error: invalid argument at cumem_allocator.cpp"
        at the exit of a process whose run engine slept (the H100 freshness log; the failure
        mode of vllm-project/vllm#36651)."""
        if self._llm is not None:
            from vdlib.engines.vllm_backend import shutdown_llm

            if self.awake != {"weights", "kv_cache"}:
                try:
                    self._llm.wake_up()
                except Exception as err:  # noqa: BLE001 - shutting down regardless
                    logger.warning("run engine: wake-up before shutdown failed: %s", err)
            llm, self._llm = self._llm, None
            self.awake, self.loaded = set(), None
            shutdown_llm(llm)
        self._cache.clear()

    def sleep(self) -> None:
        """Drop the weights and the KV cache (level 2); their memory returns to training."""
        if self._llm is None or not self.awake or self._held:
            return
        self._llm.sleep(level=2)
        self.awake, self.loaded = set(), None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def wake(self, tags: list[str] | None = None) -> None:
        """Map the memory of ``tags`` (default: both) again; level-2 weights need a push."""
        wanted = set(tags or ("weights", "kv_cache"))
        todo = [t for t in ("weights", "kv_cache") if t in wanted and t not in self.awake]
        if todo and self._llm is not None:
            self._llm.wake_up(tags=todo)
        self.awake |= wanted

    # ---------------------------------------------------------------- weights

    def _tensors(self, path: str) -> list[tuple[str, torch.Tensor]]:
        key = (str(Path(path).resolve()), _files_key(path))
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        # "auto" (a legal model.dtype, passed to vLLM as is) is no torch dtype: push the
        # checkpoint's own; vLLM's weight loaders copy into the engine's parameters' dtype
        dtype = None if self.dtype == "auto" else getattr(torch, self.dtype)
        tensors = checkpoint_tensors(path, dtype, pin=torch.cuda.is_available())
        self._cache[key] = tensors
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return tensors

    def push(self, path: str) -> None:
        """Load checkpoint ``path``'s weights into the (awake) engine, in memory."""
        start = time.perf_counter()
        model = self.llm.llm_engine.model_executor.driver_worker.model_runner.model
        model.load_weights(iter(self._tensors(path)))
        self.llm.reset_prefix_cache()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        self.loaded = path
        self.pushes.append((path, time.perf_counter() - start))
        logger.debug("run engine: %s pushed in %.3f s", path, self.pushes[-1][1])
        if self.freshness is not None:
            self.record_freshness(path)

    @contextlib.contextmanager
    def serving(self, path: str) -> Iterator[Any]:
        """Within the block the engine is awake and samples from checkpoint ``path``'s
        weights; it sleeps again on exit unless a :meth:`hold` is open."""
        llm = self.llm
        self._held += 1
        try:  # a failed push leaves the engine asleep again, its memory back to training
            if self.loaded != path or "weights" not in self.awake:
                self.wake(["weights"])
                self.push(path)
            self.wake(["kv_cache"])
            yield llm
        finally:
            self._held -= 1
            if not self._held:
                self.sleep()

    @contextlib.contextmanager
    def hold(self, path: str) -> Iterator[None]:
        """Keep the engine awake on ``path`` for a whole stage (several calls, one push)."""
        with self.serving(path):
            yield

    def view(self, path: str, *, show_progress: bool = True) -> SharedVLLMEngine:
        """A :class:`~vdlib.engines.generation.GenerationEngine` sampling from ``path``'s
        weights."""
        return SharedVLLMEngine(self, path, route=self.ecfg.route, show_progress=show_progress)

    # ---------------------------------------------------------------- TRL

    def trl_llm(self, **trl_kwargs: Any) -> _TRLHandle:
        """The engine as TRL's colocated ``LLM`` (called by TRL's ``LLM(...)`` through
        :func:`vdlib.engines.vllm_backend.trl_llm_kwargs`). TRL's keywords are checked against the
        engine's (its context must fit), and the generators are reseeded as a fresh engine with
        TRL's seed would (vLLM seeds python, numpy and torch at start)."""
        need = trl_kwargs.get("max_model_len")
        if need is not None and need > self.max_model_len:
            raise ValueError(f"TRL's rollouts need a context of {need} tokens; the run's "
                             f"engine holds {self.max_model_len}: raise engine.max_model_len")
        self.llm  # noqa: B018 - start it now if this is its first use
        self.sleep()  # TRL pushes the policy at its first generation
        seed = int(trl_kwargs.get("seed", 0))
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)
        if self._handle is None:
            self._handle = _TRLHandle(self)
        self._handle.policy = None
        return self._handle

    # ---------------------------------------------------------------- diagnostic

    def record_freshness(self, source: str, policy: Any = None) -> None:
        """Append what the engine samples from now to ``$VDLIB_ENGINE_FRESHNESS``."""
        from vllm import SamplingParams

        assert self.freshness is not None
        llm = self._llm
        wake_kv = "kv_cache" not in self.awake
        if wake_kv:
            self.wake(["kv_cache"])
        params = SamplingParams(max_tokens=1, temperature=1.0, prompt_logprobs=0,
                                detokenize=False, seed=0)
        ids = [self.tokenizer(p, add_special_tokens=False)["input_ids"]
               for p in FRESHNESS_PROMPTS]
        outs = llm.generate([{"prompt_token_ids": x} for x in ids], params, use_tqdm=False)
        engine_lp = []
        for x, o in zip(ids, outs, strict=True):
            row = o.prompt_logprobs[1:]
            engine_lp.append([float(d[tok].logprob) for d, tok in zip(row, x[1:], strict=True)])
        model = llm.llm_engine.model_executor.driver_worker.model_runner.model
        rec: dict[str, Any] = {"source": source, "engine_logprobs": engine_lp,
                               "weight_sums": _weight_sums(model), "time": time.time()}
        if policy is not None:
            rec["policy_logprobs"] = _policy_logprobs(policy, ids)
            rec["policy_weight_sums"] = _weight_sums(policy, torch.bfloat16)
        with open(self.freshness, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")


_CHECKED = ("model.embed_tokens.weight", "model.layers.0.self_attn.o_proj.weight",
            "model.norm.weight")


@torch.no_grad()
def _weight_sums(model: Any, cast: torch.dtype | None = None) -> dict[str, float]:
    """Float sums of a few weight tensors (``cast`` first: the dtype a push gives them)."""
    out = {}
    for n, p in model.named_parameters():
        if n in _CHECKED:
            t = p.detach() if cast is None else p.detach().to(cast)
            out[n] = float(t.float().sum())
    return out


@torch.no_grad()
def _policy_logprobs(model: Any, ids: list[list[int]]) -> list[list[float]]:
    """Each prompt's next-token log-probabilities under ``model`` in bf16 (as pushed)."""
    device = next(model.parameters()).device
    out = []
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
        for x in ids:
            t = torch.tensor([x], device=device)
            logits = model(input_ids=t).logits.float()[0, :-1]
            lp = torch.log_softmax(logits, -1).gather(1, t[0, 1:, None])[:, 0]
            out.append(lp.tolist())
    return out
