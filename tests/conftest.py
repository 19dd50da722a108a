"""Shared test setup: no network, and session-scoped tiny model / tokenizer fixtures."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers / huggingface_hub are imported
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny_model_and_tokenizer():
    """Seeded random 2-layer Llama (padded vocab) with SmolLM2's tokenizer; eval mode, CPU."""
    from vdlib.engines.models import load_model

    return load_model("tiny-random")


@pytest.fixture(scope="session")
def tokenizer():
    """SmolLM2's tokenizer (left padding), the one the tiny and packaged models use."""
    from vdlib.engines.models import load_tokenizer

    return load_tokenizer("tiny-random")
