"""The vocabulary-dropout mask on a model's logits while GRPO rollouts sample (paper Sec.
"Vocabulary dropout": the mask constrains sampling only; the policy-gradient loss uses
full-vocabulary log-probabilities).

:func:`lm_head_mask` is a context manager: inside it the model's logits at the dropped ids are
-inf (a forward hook on the output embedding), so ``generate`` samples under the mask; on exit
the hook is removed and every later forward pass (the GRPO loss) sees the full vocabulary.
``allowed``: ``torch.BoolTensor[vocab_width]``, True = allowed
(:meth:`vdlib.method.vocab_dropout.VocabDropout.sample`); the logits ``(batch, seq, vocab)``.
:class:`vdlib.loop.trainer.MaskedGRPOTrainer` wraps TRL's transformers rollouts in it (TRL's
vLLM rollouts take the mask through vdlib's logits processor instead).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

__all__ = ["lm_head_mask"]


@contextlib.contextmanager
def lm_head_mask(model: Any, allowed: torch.Tensor) -> Iterator[None]:
    """Within the block, ``model``'s logits at dropped ids are -inf (a forward hook on the output
    embedding); the hook is removed on exit, so later forward passes see the full vocabulary."""
    head = model.get_output_embeddings()
    dropped = (~allowed).to(head.weight.device)

    def hook(_module: Any, _inputs: Any, output: torch.Tensor) -> torch.Tensor:
        return output.masked_fill(dropped, float("-inf"))

    handle = head.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()
