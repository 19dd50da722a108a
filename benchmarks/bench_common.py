"""Shared pieces of the benchmark scripts: Qwen3 model shapes and result output."""

from __future__ import annotations

import json
import random
import sys
from typing import Any

QWEN3_REAL_IDS = 151_669  # len(tokenizer) of Qwen3
QWEN3_WIDTH = 151_936  # its logits width (config.vocab_size)
QWEN3_SHAPES = {
    "qwen3-0.6b-shape": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                             num_attention_heads=16, num_key_value_heads=8, head_dim=128),
    "qwen3-4b-shape": dict(hidden_size=2560, intermediate_size=9728, num_hidden_layers=36,
                           num_attention_heads=32, num_key_value_heads=8, head_dim=128),
}


def qwen3_config(shape: str, **ids: Any) -> Any:
    """A ``Qwen3Config`` of ``shape`` with Qwen3's logits width (random init is fine)."""
    from transformers import Qwen3Config

    return Qwen3Config(vocab_size=QWEN3_WIDTH, max_position_embeddings=4096,
                       tie_word_embeddings=True, **ids, **QWEN3_SHAPES[shape])


def report(result: dict[str, Any], summary: str, json_path: str | None) -> None:
    """Print ``result`` as JSON and a one-line ``summary``; append it to ``json_path``."""
    sys.stdout.write(json.dumps(result, indent=2) + "\n\n" + summary + "\n")
    if json_path:
        with open(json_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(result) + "\n")


class SeededReward:
    """Seeded random rewards: non-zero GRPO advantages at no cost (the same in every run)."""

    __name__ = "seeded_reward"

    def __init__(self) -> None:
        self.rng = random.Random(0)

    def __call__(self, prompts, completions, **kwargs):
        return [self.rng.random() for _ in completions]
