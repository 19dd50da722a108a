"""The mask on a model's logits while GRPO rollouts sample (vdlib.method.rollout_mask)."""

from __future__ import annotations

import pytest
import torch

from vdlib.method.rollout_mask import lm_head_mask
from vdlib.method.vocab_dropout import VocabDropout


def test_hook_masks_only_inside_the_block(tiny_model_and_tokenizer):
    model, tok = tiny_model_and_tokenizer
    vd = VocabDropout.for_model(model, tok, alpha=0.5)
    ids = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        with lm_head_mask(model, vd.sample(1)):
            masked = model(ids).logits
        full = model(ids).logits
    dropped = ~vd.sample(1)
    assert torch.isinf(masked[..., dropped]).all()
    assert torch.isfinite(full).all()  # the loss forward sees the full vocabulary
    assert torch.equal(masked[..., ~dropped], full[..., ~dropped])


def test_the_hook_is_removed_when_the_block_raises(tiny_model_and_tokenizer):
    model, tok = tiny_model_and_tokenizer
    vd = VocabDropout.for_model(model, tok, alpha=0.5)
    ids = torch.tensor([[1, 2, 3]])
    with pytest.raises(KeyError), lm_head_mask(model, vd.sample(2)):
        raise KeyError("inside")
    with torch.no_grad():
        assert torch.isfinite(model(ids).logits).all()
