"""Vocabulary dropout inside vLLM (0.25.1 and 0.33.0 ran): a seeded logits processor and an engine.

Two routes (usage, server included, in docs/vllm.md):

- ``"processor"``: a request carries only its mask's ``(seed, alpha, n_real, protected,
  n_draw)`` in
  ``SamplingParams.extra_args`` (or the server's ``vllm_xargs``); the class
  ``vdlib.engines.vllm_backend:VocabDropoutLogitsProcessor`` (give it to
  ``LLM(logits_processors=...)`` or ``vllm serve --logits-processors``, or let vLLM find it through
  the ``vllm.logits_processors`` entry point that an installed vdlib declares) rebuilds each mask on
  the logits' device and applies :func:`vdlib.method.vocab_dropout.apply_mask` once per group of
  rows sharing a mask. The class is built at run time over the interfaces the installed vLLM offers
  (:func:`vllm_interfaces`): the V1 batch-level interface (every vLLM since 0.10.1; in 0.25.x a
  custom processor makes vLLM run its model runner V1) and, where it exists (0.31+; 0.33.0 runs
  it on V2), the model runner V2 interface too.
- ``"allowed_token_ids"`` (the paper's): the allowed ids per request; model runner V2 caps the
  list at 1,024 ids, so it needs ``VLLM_USE_V2_MODEL_RUNNER=0``.

The tensor logic is :class:`RequestMasks` (no vLLM needed). The module imports without vLLM;
the processor class raises an ImportError naming the ``gpu`` extra. The generation engine over
an ``LLM`` is :class:`vdlib.engines.vllm_engine.VLLMEngine`.

>>> from vdlib.method.vocab_dropout import VocabDropout
>>> vd = VocabDropout.from_sizes(n_real=6, vocab_width=8, alpha=0.5, protected=[0])
>>> args = extra_args(vd, seed=11)
>>> args
{'vd_seed': 11, 'vd_alpha': 0.5, 'vd_n_real': 6, 'vd_protected': [0]}
>>> masks = RequestMasks()
>>> masks.set(0, args), masks.set(1, None)
(True, False)
>>> out = masks.apply(torch.zeros(2, 8))
>>> torch.equal(out[0] == 0, vd.sample(11)), bool((out[1] == 0).all())
(True, True)
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import torch

from vdlib.method.mask_schedule import check_alpha
from vdlib.method.vocab_dropout import VocabDropout, apply_mask

# VocabDropoutLogitsProcessor is built on first access (it subclasses vLLM's classes); it is not
# in __all__ so that a star import works without vLLM.
__all__ = ["ARG_KEYS", "ROUTES", "MaskSpec", "RequestMasks", "extra_args", "parse_extra_args",
           "logits_processor_class", "vllm_interfaces", "require_vllm",
           "entry_point_registered", "processor_fqcns", "build_llm", "shutdown_llm",
           "ENTRY_POINT_GROUP", "PROCESSOR_FQCN", "use_inprocess_engines", "trl_llm_kwargs"]

logger = logging.getLogger(__name__)

ARG_KEYS = ("vd_seed", "vd_alpha", "vd_n_real", "vd_protected")
#: optional: the drawn ids (vocab_dropout.width), sent only when fewer than n_real; absent (and
#: MaskSpec.n_draw None) = all n_real ids
N_DRAW_KEY = "vd_n_draw"
ROUTES = ("processor", "allowed_token_ids")
MRV2_MAX_ALLOWED_TOKEN_IDS = 1024  # vllm/v1/worker/gpu/sample/logit_bias.py:20
_INSTALL_HINT = "vLLM is not installed; install the GPU extra: pip install -e '.[gpu]'"
ENTRY_POINT_GROUP = "vllm.logits_processors"  # declared in pyproject.toml
PROCESSOR_FQCN = "vdlib.engines.vllm_backend:VocabDropoutLogitsProcessor"
_V1_MODULE = "vllm.v1.sample.logits_processor"
_V2_MODULE = "vllm.v1.worker.gpu.sample.logits_processor"


def require_vllm() -> Any:
    try:
        import vllm
    except ImportError as err:
        raise ImportError(_INSTALL_HINT) from err
    return vllm


# ----------------------------------------------------------------------------- request args


class MaskSpec(NamedTuple):
    """One request's mask, parsed from its extra args (hashable: rows are grouped by it)."""

    alpha: float
    n_real: int
    protected: tuple[int, ...]
    seed: int
    n_draw: int | None = None


def extra_args(vd: VocabDropout, seed: int, flat: bool = False) -> dict[str, Any]:
    """The per-request arguments of mask ``seed``: for ``SamplingParams(extra_args=...)``
    offline, or (``flat=True``) for a server's ``vllm_xargs``, whose values must be scalars in
    vLLM 0.25 (``str | int | float``): the protected ids then travel as one comma-separated
    string, which :func:`parse_extra_args` reads too."""
    protected = [int(i) for i in vd.protected.tolist()]
    args = {"vd_seed": int(seed), "vd_alpha": float(vd.alpha), "vd_n_real": int(vd.n_real),
            "vd_protected": ",".join(map(str, protected)) if flat else protected}
    if vd.n_draw < vd.n_real:  # vocab_dropout.width = vocab_size with added tokens
        args[N_DRAW_KEY] = int(vd.n_draw)
    return args


def _as_int(value: Any, key: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value < high:
        raise ValueError(f"extra_args[{key!r}] = {value!r}; allowed: an integer in [{low}, {high})")
    return int(value)


def parse_extra_args(args: Mapping[str, Any] | None) -> MaskSpec | None:
    """The :class:`MaskSpec` of a request's extra args, or None when it carries none of
    :data:`ARG_KEYS` (no mask). A ValueError names the bad key."""
    if not args or not any(k in args for k in ARG_KEYS):
        return None
    missing = [k for k in ARG_KEYS if k not in args]
    if missing:
        raise ValueError(f"vocabulary-dropout extra_args lack {missing}; pass all of {ARG_KEYS} "
                         "(vdlib.engines.vllm_backend.extra_args builds them)")
    seed = _as_int(args["vd_seed"], "vd_seed", 0, 2**64)
    alpha = check_alpha(args["vd_alpha"], "extra_args['vd_alpha']")
    n_real = _as_int(args["vd_n_real"], "vd_n_real", 1, 2**31)
    raw = args["vd_protected"]
    if isinstance(raw, str):  # the server form (vllm_xargs values are scalars)
        try:
            raw = [int(x) for x in raw.split(",") if x.strip()]
        except ValueError:
            raise ValueError(f"extra_args['vd_protected'] = {raw!r}; allowed: a list of token "
                             "ids or a comma-separated string of them") from None
    if not isinstance(raw, list | tuple):
        raise ValueError(f"extra_args['vd_protected'] = {raw!r}; allowed: a list of token ids")
    protected = tuple(sorted({_as_int(i, "vd_protected", 0, n_real) for i in raw}))
    n_draw = _as_int(args[N_DRAW_KEY], N_DRAW_KEY, 0, n_real + 1) if N_DRAW_KEY in args else None
    return MaskSpec(alpha, n_real, protected, seed, None if n_draw == n_real else n_draw)


# ----------------------------------------------------------------------------- shared tensor code


class RequestMasks:
    """Per-request mask state of a vLLM batch: key (MRv1 batch row or MRv2 slot) -> MaskSpec.

    Masks are built on the logits' device, with the logits' width as ``vocab_width`` (padded
    rows dropped), and cached (LRU, ``cache_size`` masks of ``width`` bytes each).
    """

    def __init__(self, cache_size: int = 256) -> None:
        self.specs: dict[int, MaskSpec] = {}
        self._dropped: OrderedDict[tuple, torch.Tensor] = OrderedDict()
        self._cache_size = cache_size

    def __len__(self) -> int:
        return len(self.specs)

    def set(self, key: int, args: Mapping[str, Any] | None) -> bool:
        """(Re)initialise ``key`` from a request's extra args; True if that request is masked."""
        spec = parse_extra_args(args)
        if spec is None:
            self.specs.pop(key, None)
            return False
        self.specs[key] = spec
        return True

    def remove(self, key: int) -> None:
        self.specs.pop(key, None)

    def move(self, src: int, dst: int, swap: bool = False) -> None:
        """Move ``src``'s state to ``dst`` (``dst``'s is dropped), or exchange them (``swap``)."""
        a, b = self.specs.pop(src, None), self.specs.pop(dst, None)
        if a is not None:
            self.specs[dst] = a
        if swap and b is not None:
            self.specs[src] = b

    def dropped(self, spec: MaskSpec, width: int, device: torch.device | str) -> torch.Tensor:
        """Bool ``(width,)``, True = dropped, equal to ``~VocabDropout.sample(spec.seed)``."""
        key = (spec, width, str(device))
        if (mask := self._dropped.get(key)) is not None:
            self._dropped.move_to_end(key)
            return mask
        vd = VocabDropout.from_sizes(spec.n_real, width, spec.alpha, spec.protected, cache_size=1,
                                     n_draw=spec.n_draw)
        mask = ~vd.sample(spec.seed).to(device)
        self._dropped[key] = mask
        if len(self._dropped) > self._cache_size:
            self._dropped.popitem(last=False)
        return mask

    def apply(self, logits: torch.Tensor, rows: Sequence[int] | None = None) -> torch.Tensor:
        """Mask ``logits`` (num_rows, V) in place, row ``i`` with the mask of key ``rows[i]``
        (default: key ``i``). Rows sharing a mask get one ``apply_mask``; rows without a
        mask are untouched."""
        if not self.specs:
            return logits
        n = logits.shape[0]
        groups: dict[MaskSpec, list[int]] = {}
        if rows is None:
            for key, spec in self.specs.items():
                if 0 <= key < n:
                    groups.setdefault(spec, []).append(key)
        else:
            for i, key in enumerate(rows):
                if (spec := self.specs.get(int(key))) is not None:
                    groups.setdefault(spec, []).append(i)
        for spec, idx in groups.items():
            dropped = self.dropped(spec, logits.shape[-1], logits.device)
            idx.sort()
            if idx[-1] - idx[0] + 1 == len(idx):  # contiguous rows: mask a view in place
                apply_mask(logits[idx[0] : idx[-1] + 1], dropped)
            else:
                index = torch.tensor(idx, device=logits.device)
                logits.index_copy_(0, index, apply_mask(logits.index_select(0, index), dropped))
        return logits


# ----------------------------------------------------------------------------- vLLM adapters


def _build_processor_class(v1_base: type, v2_base: type) -> type:
    """The processor class over vLLM's two base classes (fakes in the CPU tests)."""

    class VocabDropoutLogitsProcessor(v1_base, v2_base):
        """Both interfaces (vLLM 0.31+; 0.33.0 ran it on V2). Model runner V1:
        ``__init__(vllm_config, device, is_pin_memory)``, ``update_state(batch_update)``,
        ``apply(logits)`` with rows = batch indices. Model runner V2:
        ``__init__(vllm_config, req_states)``, ``add_request(slot, sampling_params)``,
        ``apply(logits, ctx)`` with rows mapped to slots by ``ctx``."""

        def __init__(self, vllm_config: Any, *args: Any) -> None:
            self.masks = RequestMasks()

        @classmethod
        def validate_params(cls, sampling_params: Any) -> None:
            parse_extra_args(sampling_params.extra_args)  # at admission: HTTP 400 if malformed

        def is_argmax_invariant(self) -> bool:  # V1
            return False  # the mask changes greedy outputs too

        def update_state(self, batch_update: Any) -> None:  # V1
            if not batch_update:
                return
            for index in batch_update.removed:  # vLLM's order: removed, added, moved
                self.masks.remove(index)
            for index, params, _prompt_ids, _output_ids in batch_update.added:
                self.masks.set(index, getattr(params, "extra_args", None))
            for src, dst, direction in batch_update.moved:
                self.masks.move(src, dst, swap=getattr(direction, "name", "") == "SWAP")

        def add_request(self, req_idx: int, sampling_params: Any) -> bool:  # V2
            return self.masks.set(req_idx, sampling_params.extra_args)  # a recycled slot: reset

        def apply(self, logits: torch.Tensor, ctx: Any = None) -> torch.Tensor:
            if ctx is None or not self.masks:  # V1, or nothing to mask
                return self.masks.apply(logits)
            slots = ctx.idx_mapping_np  # host copy: no device sync
            if logits.shape[0] != len(slots):  # speculative decoding: several rows a request
                slots = ctx.expanded_idx_mapping
            return self.masks.apply(logits, slots.tolist())

    VocabDropoutLogitsProcessor.__module__ = __name__  # picklable by reference (__getattr__)
    VocabDropoutLogitsProcessor.__qualname__ = "VocabDropoutLogitsProcessor"
    return VocabDropoutLogitsProcessor


_CLASS: list[type] = []


def _base(module: str) -> type | None:
    """``module.LogitsProcessor``, or None where this vLLM lacks that module."""
    import importlib

    try:
        return importlib.import_module(module).LogitsProcessor
    except ModuleNotFoundError as err:
        if err.name is not None and module.startswith(err.name):
            return None  # the interface does not exist in this vLLM
        raise


def vllm_interfaces() -> dict[str, Any]:
    """What the installed vLLM offers: its version and which processor interfaces exist
    (``v1``: ``vllm.v1.sample.logits_processor``, ``v2``: the model runner V2 one, 0.31+)."""
    vllm = require_vllm()
    return {"vllm_version": getattr(vllm, "__version__", "unknown"),
            "v1": _base(_V1_MODULE) is not None, "v2": _base(_V2_MODULE) is not None}


def logits_processor_class() -> type:
    """The processor class, built once over the interfaces the installed vLLM offers (V1 is
    required; V2 is added where it exists). Needs vLLM."""
    if not _CLASS:
        require_vllm()
        v1 = _base(_V1_MODULE)
        if v1 is None:
            raise ImportError(f"this vLLM has no {_V1_MODULE}.LogitsProcessor (vLLM >= 0.10.1 "
                              "has it); vdlib's processor cannot load")
        v2 = _base(_V2_MODULE)
        _CLASS.append(_build_processor_class(v1, object if v2 is None else v2))
        logger.info("vdlib logits processor built over the %s interface%s",
                    "V1" if v2 is None else "V1 and V2", "" if v2 is None else "s")
    return _CLASS[0]


def entry_point_registered() -> bool:
    """True when vdlib's processor is declared in the ``vllm.logits_processors`` entry-point
    group of an installed distribution (``pip install -e .``): vLLM then loads it into every
    engine, TRL's own included."""
    from importlib.metadata import entry_points

    return any(ep.value.replace(" ", "") == PROCESSOR_FQCN
               for ep in entry_points(group=ENTRY_POINT_GROUP))


def processor_fqcns() -> list[str]:
    """``logits_processors=`` for an engine vdlib starts: empty when the entry point already
    loads the processor (loading it twice would mask twice), else the class's FQCN."""
    return [] if entry_point_registered() else [PROCESSOR_FQCN]


def use_inprocess_engines() -> None:
    """Run vLLM's engine core in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``) for every
    engine of the process: TRL's colocated engine needs it (it reloads the policy's weights into
    the engine here), vLLM caches its environment once the first engine starts (so all engines
    of a process must agree), and an in-process engine's memory is freed by
    :func:`shutdown_llm` without a child process to reap. Servers vdlib starts drop it again.
    Also :func:`vdlib.engines.vllm_sleep.tolerate_shared_gpu_sleep` (the in-process worker is
    this process's)."""
    from vdlib.engines.vllm_sleep import tolerate_shared_gpu_sleep

    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    tolerate_shared_gpu_sleep()


def build_llm(model: str, *, dtype: str = "bfloat16", gpu_memory_utilization: float = 0.4,
              max_model_len: int | None = None, seed: int = 0, enforce_eager: bool = False,
              load_format: str = "auto", tokenizer: str | None = None, **kwargs: Any) -> Any:
    """A ``vllm.LLM`` over checkpoint ``model`` with vdlib's processor loaded (both routes then
    work: the processor route needs it; the allowed_token_ids route needs the model runner V1,
    which vLLM 0.25.x picks whenever a custom processor is loaded)."""
    use_inprocess_engines()
    vllm = require_vllm()
    logits_processor_class()  # fail here, with vdlib's message, if the processor cannot load
    kw: dict[str, Any] = dict(model=model, dtype=dtype, seed=int(seed) % 2**32,  # vLLM's range
                              gpu_memory_utilization=gpu_memory_utilization,
                              enforce_eager=enforce_eager, load_format=load_format,
                              logits_processors=processor_fqcns())
    if max_model_len is not None:
        kw["max_model_len"] = max_model_len
    if tokenizer is not None:
        kw["tokenizer"] = tokenizer
    kw.update(kwargs)
    start = time.perf_counter()
    llm = vllm.LLM(**kw)
    logger.info("vLLM %s engine on %s started in %.1f s", vllm.__version__, model,
                time.perf_counter() - start)
    return llm


def shutdown_llm(llm: Any) -> None:
    """Stop a ``vllm.LLM``'s engine (its engine-core process, if any) and free its GPU memory,
    so that the next stage (training, another engine) gets the memory back.

    In-process engines (vdlib's and TRL's colocated one) keep their model alive after the
    engine core's shutdown: vLLM 0.25.1 drops the compiled model's bytecode hooks (module-level
    in torch._dynamo, so they pin the model) only in a finalizer that runs when the
    ``LLMEngine`` is collected, and something still reaches that engine. Measured on 2 x H200:
    a Qwen3-4B-shaped GRPO stage left 23.7 GiB on its GPU, and a 0.6B-shaped probe named vLLM's
    layers as the holders (docs/SCALING.md). So the finalizer is run here, and the model's
    weights are emptied in place: their memory returns whoever still holds the modules."""
    import gc

    engine = getattr(llm, "llm_engine", None)
    core = getattr(engine, "engine_core", None)
    model = _driver_model(engine)  # before the shutdown, which drops the runner's reference
    for obj in (core, engine):
        stop = getattr(obj, "shutdown", None)
        if callable(stop):
            try:
                stop()
            except Exception as err:  # noqa: BLE001 - best effort: the memory check follows
                logger.warning("vLLM shutdown: %s", err)
            break
    finalizer = getattr(engine, "_finalizer", None)
    if callable(finalizer):
        finalizer()  # runs once: the bytecode hooks go, and the registry's reference
    if model is not None:
        freed = empty_module_weights(model)
        logger.info("vLLM shutdown: emptied the weights of %s in place (%.2f GiB)",
                    type(model).__name__, freed / 2**30)
    del llm, engine, core, model
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _driver_model(engine: Any) -> Any:
    """The model of an in-process engine's driver worker (None for an engine-core process),
    unwrapped from vLLM's CUDA-graph wrapper (``CUDAGraphWrapper``, not a module, holds it in
    ``runnable`` when the engine captures graphs; measured: the first fix looked for a module
    there and found none, leak_probe2 in docs/results/archives/paper_shape.zip)."""
    executor = getattr(engine, "model_executor", None)
    runner = getattr(getattr(executor, "driver_worker", None), "model_runner", None)
    model = getattr(runner, "model", None)
    for _ in range(8):  # wrappers of wrappers, bounded
        if model is None or isinstance(model, torch.nn.Module):
            break
        inner = vars(model).get("runnable")  # not getattr: the wrapper forwards lookups
        model = inner
    return model if isinstance(model, torch.nn.Module) else None


def empty_module_weights(module: Any) -> int:
    """Replace every parameter's and buffer's storage of ``module`` by an empty tensor of the
    same dtype and device, so that their memory is freed even while something still references
    the module (for a model that is never used again). Returns the bytes the tensors held
    (shared storages, e.g. tied embeddings, counted once)."""
    seen: set[int] = set()
    freed = 0
    with torch.no_grad():
        for t in (*module.parameters(), *module.buffers()):
            if t.numel():
                key = t.untyped_storage().data_ptr()
                if key not in seen:
                    seen.add(key)
                    freed += t.untyped_storage().nbytes()
            t.data = torch.empty(0, dtype=t.dtype, device=t.device)
    return freed


@contextlib.contextmanager
def trl_llm_kwargs(extra: Mapping[str, Any] | None,
                   factory: Callable[..., Any] | None = None) -> Iterator[None]:
    """Within the block, TRL's colocated engine (``trl.generation.vllm_generation.LLM``) is
    built with ``extra`` keywords on top of TRL's own (e.g. ``kv_cache_memory_bytes``, which
    TRL's ``GRPOConfig`` does not expose), or, with ``factory``, is ``factory(**kwargs)``
    instead (the run's engine, :meth:`vdlib.engines.engine_lifetime.RunEngine.trl_llm`); nothing
    changes for neither."""
    if not extra and factory is None:
        yield
        return
    import trl.generation.vllm_generation as trl_vllm

    original = getattr(trl_vllm, "LLM", None)
    if original is None:  # TRL imported without vLLM: TRL itself refuses use_vllm
        yield
        return

    def llm(*args: Any, **kwargs: Any) -> Any:
        if factory is not None:
            return factory(**kwargs)
        return original(*args, **{**kwargs, **(extra or {})})

    trl_vllm.LLM = llm
    try:
        yield
    finally:
        trl_vllm.LLM = original


# lazy: the entry point's target, ``vdlib.engines.vllm_backend:VocabDropoutLogitsProcessor``
def __getattr__(name: str) -> type:
    if name == "VocabDropoutLogitsProcessor":
        return logits_processor_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
