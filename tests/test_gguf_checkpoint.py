"""Tests for vdlib.engines.gguf_checkpoint: the dequantisers against gguf.quants on synthetic
blocks, the rotary un-permutation against transformers', a tiny llama GGUF read against
transformers' GGUF loader, and (slow) the packaged SmolLM2 against transformers' conversion."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vdlib.engines import gguf_checkpoint as gc
from vdlib.engines.gguf_checkpoint import (
    GGMLType,
    dequantize,
    dequantize_q4_1,
    dequantize_q8_0,
    llama_config_dict,
    llama_state_dict,
    read_gguf,
    unpermute_rotary_rows,
)

gguf = pytest.importorskip("gguf")


def _bits(a: np.ndarray) -> np.ndarray:
    """float32 values as their bit patterns (so -0.0, inf and NaN compare exactly)."""
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


def _half_bytes(values: np.ndarray) -> np.ndarray:
    return values.astype(np.float16).reshape(-1, 1).view(np.uint8)


def test_dequantize_q4_1_matches_gguf_bit_for_bit():
    rng = np.random.default_rng(0)
    n = 257
    scale = rng.normal(0, 0.02, n)
    scale[:4] = [0.0, -0.0, 65504.0, 6e-8]  # zero, negative zero, float16 max, a subnormal
    low = rng.normal(0, 0.1, n)
    low[4] = -65504.0
    packed = rng.integers(0, 256, (n, 16), dtype=np.uint8)
    blocks = np.concatenate([_half_bytes(scale), _half_bytes(low), packed], axis=1).reshape(-1)
    expected = gguf.quants.dequantize(blocks.reshape(n, 20), gguf.GGMLQuantizationType.Q4_1)
    got = dequantize_q4_1(blocks)
    assert got.dtype == np.float32 and got.shape == (n * 32,)
    assert np.array_equal(_bits(got), _bits(expected.reshape(-1)))


def test_dequantize_q8_0_matches_gguf_bit_for_bit():
    rng = np.random.default_rng(1)
    n = 129
    scale = rng.normal(0, 0.01, n)
    scale[:2] = [0.0, -3.5]
    q = rng.integers(-128, 128, (n, 32), dtype=np.int8).view(np.uint8)
    blocks = np.concatenate([_half_bytes(scale), q], axis=1).reshape(-1)
    expected = gguf.quants.dequantize(blocks.reshape(n, 34), gguf.GGMLQuantizationType.Q8_0)
    assert np.array_equal(_bits(dequantize_q8_0(blocks)), _bits(expected.reshape(-1)))


def test_unpermute_rotary_rows_matches_transformers():
    from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor

    reference = LlamaTensorProcessor()
    weight = torch.arange(12 * 16 * 5, dtype=torch.float32).reshape(12 * 16, 5)
    for heads in (12, 3):
        expected = reference._reverse_permute_weights(weight.numpy(), heads, heads)
        assert torch.equal(unpermute_rotary_rows(weight, heads), torch.from_numpy(expected))


TINY = dict(layers=2, hidden=64, ff=128, heads=4, kv_heads=2, vocab=96)


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    """A 2-layer llama GGUF written with gguf's own writer: Q8_0 embeddings, Q4_1 projections,
    F32 norms, an F16 final norm; tied embeddings; a small byte-free vocabulary."""
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    rng = np.random.default_rng(2)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny test llama")
    writer.add_context_length(256)
    writer.add_block_count(TINY["layers"])
    writer.add_embedding_length(TINY["hidden"])
    writer.add_feed_forward_length(TINY["ff"])
    writer.add_head_count(TINY["heads"])
    writer.add_head_count_kv(TINY["kv_heads"])
    writer.add_rope_dimension_count(TINY["hidden"] // TINY["heads"])
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(TINY["vocab"])
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list([f"t{i}" for i in range(TINY["vocab"])])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    q4_1, q8_0 = gguf.GGMLQuantizationType.Q4_1, gguf.GGMLQuantizationType.Q8_0

    def add(name: str, shape: tuple[int, ...], qtype=None) -> None:
        values = rng.normal(0, 0.05, shape).astype(np.float32)
        if qtype is None:
            writer.add_tensor(name, values)
        elif qtype == "f16":
            writer.add_tensor(name, values.astype(np.float16))
        else:
            writer.add_tensor(name, gguf.quants.quantize(values, qtype), raw_dtype=qtype)

    h, ff, kv = TINY["hidden"], TINY["ff"], TINY["hidden"] // TINY["heads"] * TINY["kv_heads"]
    add("token_embd.weight", (TINY["vocab"], h), q8_0)
    for i in range(TINY["layers"]):
        add(f"blk.{i}.attn_norm.weight", (h,))
        add(f"blk.{i}.attn_q.weight", (h, h), q4_1)
        add(f"blk.{i}.attn_k.weight", (kv, h), q4_1)
        add(f"blk.{i}.attn_v.weight", (kv, h), q4_1)
        add(f"blk.{i}.attn_output.weight", (h, h), q4_1)
        add(f"blk.{i}.ffn_norm.weight", (h,))
        add(f"blk.{i}.ffn_gate.weight", (ff, h), q4_1)
        add(f"blk.{i}.ffn_up.weight", (ff, h), q4_1)
        add(f"blk.{i}.ffn_down.weight", (h, ff), q4_1)
    add("output_norm.weight", (h,), "f16")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_read_gguf_matches_gguf_reader(tiny_gguf):
    ours = read_gguf(tiny_gguf)
    ref = gguf.GGUFReader(tiny_gguf)
    assert list(ours.tensors) == [t.name for t in ref.tensors]
    for t in ref.tensors:
        mine = ours.tensors[t.name]
        assert mine.shape == tuple(int(d) for d in reversed(t.shape))
        assert mine.ggml_type == int(t.tensor_type)
        expected = gguf.quants.dequantize(t.data, t.tensor_type).reshape(mine.shape)
        assert torch.equal(dequantize(mine), torch.from_numpy(np.array(expected)))
    meta = ours.metadata
    assert meta["general.architecture"] == "llama" and meta["general.name"] == "tiny test llama"
    assert meta["llama.block_count"] == 2 and meta["llama.rope.freq_base"] == 10000.0
    assert meta["tokenizer.ggml.tokens"][:3] == ["t0", "t1", "t2"]
    assert ours.tensors["output_norm.weight"].ggml_type == GGMLType.F16


def test_llama_config_and_state_dict_match_transformers(tiny_gguf):
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    ours = read_gguf(tiny_gguf)
    fields = llama_config_dict(ours)
    reference = load_gguf_checkpoint(str(tiny_gguf))["config"]
    assert fields == reference
    config = AutoConfig.for_model(fields.pop("model_type"), **fields)
    model = AutoModelForCausalLM.from_config(config)
    expected = load_gguf_checkpoint(str(tiny_gguf), return_tensors=True,
                                    model_to_load=model)["tensors"]
    state = llama_state_dict(ours)
    assert set(state) == set(model.state_dict()) and set(expected) <= set(state)
    for name, tensor in expected.items():
        assert state[name].dtype == torch.float32 and torch.equal(state[name], tensor), name
    assert state["lm_head.weight"] is state["model.embed_tokens.weight"]  # tied: no output.weight
    model.load_state_dict(state)


def test_other_architectures_and_types_are_refused(tiny_gguf, tmp_path):
    ours = read_gguf(tiny_gguf)
    other = gc.GGUFFile({**ours.metadata, "general.architecture": "qwen2"}, ours.tensors)
    with pytest.raises(NotImplementedError, match="qwen2"):
        llama_state_dict(other)
    bad = gc.GGUFTensor("x", (32,), 12, np.zeros(8, dtype=np.uint8))  # Q4_K
    with pytest.raises(NotImplementedError, match="12"):
        dequantize(bad)
    (tmp_path / "not.gguf").write_bytes(b"GGML" + b"\0" * 32)
    with pytest.raises(ValueError, match="not a GGUF"):
        read_gguf(tmp_path / "not.gguf")


@pytest.mark.slow
def test_smollm2_conversion_equals_transformers_gguf_loader(tmp_path):
    """Every tensor of the packaged SmolLM2, converted here, equals transformers' own
    GGUF conversion (the path before this module; ~25 s)."""
    from transformers import AutoModelForCausalLM

    from vdlib.engines.models import smollm2_gguf_path

    path = smollm2_gguf_path()
    reference = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                     dtype=torch.float32).state_dict()
    state = llama_state_dict(read_gguf(path))
    assert set(state) == set(reference)
    for name, tensor in reference.items():
        assert torch.equal(state[name], tensor), name
