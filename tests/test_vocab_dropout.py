"""Vocabulary dropout: protected set, Bernoulli draw, padded rows, seeds, schedules, sampling."""

from __future__ import annotations

import math

import pytest
import torch

from vdlib.engines.generation import HFEngine
from vdlib.engines.models import load_model
from vdlib.method.mask_schedule import DEFAULT_FORMAT_STRINGS, alpha_at, mask_active
from vdlib.method.prompts import proposer_prompt
from vdlib.method.vocab_dropout import (
    VocabDropout,
    VocabMaskProcessor,
    apply_mask,
    mask_seed,
    protected_token_ids,
)

# SmolLM2's protected set, pinned (documented in vdlib/method/vocab_dropout.py).
SMOLLM2_PROTECTED = {"<|im_start|>", "<|im_end|>", "<", "Ġ<", "</", "Ġ</", "question", ">", "\\",
                     "Ġ\\", "box", "ed", "{", "}", "Ġ}"}


@pytest.fixture(scope="module")
def vd(tiny_model_and_tokenizer):
    model, tok = tiny_model_and_tokenizer
    return VocabDropout.for_model(model, tok, alpha=0.75)


def test_protected_set_for_smollm2(tokenizer):
    ids = protected_token_ids(tokenizer)
    assert set(tokenizer.convert_ids_to_tokens(sorted(ids))) == SMOLLM2_PROTECTED
    assert tokenizer.eos_token_id in ids


def test_format_pieces_protected_in_context(tokenizer):
    ids = protected_token_ids(tokenizer)
    for text in ("<question>\nWhat is 1+1?\n</question>\n\n\\boxed{2}",
                 "Sure. <question> x </question> \\boxed{\\frac{1}{2}}"):
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        for tid, (a, b) in zip(enc["input_ids"], enc["offset_mapping"], strict=True):
            piece = text[a:b].strip()
            if piece in ("<", "</", ">", "question", "\\", "box", "ed", "{", "}"):
                assert tid in ids, (piece, tid)


def test_a_whitespace_format_string_protects_its_whitespace_tokens(tokenizer):
    """A whitespace-only format string (the quickstart's two newlines) protects the newline
    tokens, and punctuation format strings their marks; nothing else is added."""
    base = protected_token_ids(tokenizer)
    more = protected_token_ids(tokenizer, (*DEFAULT_FORMAT_STRINGS, "\n\n", "?", "."))
    added = set(tokenizer.convert_ids_to_tokens(sorted(more - base)))
    assert {"Ċ", "ĊĊ", "?", "."} <= added
    assert added <= {"Ċ", "ĊĊ", "?", ".", "Ġ?", "Ġ."}
    assert base <= more
    # whitespace tokens of other text stay unprotected: a space, three newlines
    spaces = protected_token_ids(tokenizer, (*DEFAULT_FORMAT_STRINGS, "\n"))
    assert set(tokenizer.convert_ids_to_tokens(sorted(spaces - base))) == {"Ċ"}
    assert tokenizer.convert_tokens_to_ids("ĊĊĊ") not in more


def test_protected_extra_and_out_of_range(tokenizer):
    assert 12345 in protected_token_ids(tokenizer, extra=[12345])
    with pytest.raises(ValueError, match="outside the real ids"):
        protected_token_ids(tokenizer, extra=[len(tokenizer) + 5])


def test_mask_shape_protected_kept_padded_dropped(vd, tiny_model_and_tokenizer):
    model, tok = tiny_model_and_tokenizer
    assert vd.vocab_width == model.config.vocab_size > len(tok) == vd.n_real
    for seed in range(5):
        m = vd.sample(seed)
        assert m.dtype == torch.bool and m.shape == (vd.vocab_width,)
        assert bool(m[vd.protected].all())
        assert not bool(m[len(tok):].any())
        assert bool(m[tok.eos_token_id])


@pytest.mark.parametrize("alpha", [0.1, 0.5, 0.75, 0.85, 0.95])
def test_kept_fraction_within_binomial_bounds(tokenizer, alpha):
    vd = VocabDropout(tokenizer, alpha=alpha)
    n_free = vd.n_real - len(vd.protected)
    sd = math.sqrt(alpha * (1 - alpha) / n_free)
    for seed in range(3):
        assert abs(vd.kept_fraction(seed) - alpha) < 5 * sd


def test_seeds(vd):
    a, b = vd.sample(1), vd.sample(1)
    assert torch.equal(a, b)
    assert not torch.equal(vd.sample(1), vd.sample(2))
    fresh = VocabDropout.from_sizes(vd.n_real, vd.vocab_width, 0.75, vd.protected.tolist())
    assert torch.equal(fresh.sample(1), a)  # same on every process / rank: CPU generator


def test_mask_seed_derivation():
    s = mask_seed(0, 1, "train", 3)
    assert s == mask_seed(0, 1, "train", 3)
    others = {mask_seed(1, 1, "train", 3), mask_seed(0, 2, "train", 3), mask_seed(0, 1, "gen", 3),
              mask_seed(0, 1, "train", 4)}
    assert s not in others and len(others) == 4
    with pytest.raises(ValueError, match="train, gen"):
        mask_seed(0, 1, "solver", 0)


def test_alpha_one_masks_only_padded_rows(vd, tokenizer):
    full = VocabDropout(tokenizer, alpha=1.0, vocab_width=vd.vocab_width)
    m = full.sample(7)
    assert bool(m[: full.n_real].all()) and not bool(m[full.n_real:].any())
    assert full.kept_fraction(7) == 1.0


def test_allowed_token_ids_matches_mask(vd):
    ids = vd.allowed_token_ids(4)
    m = vd.sample(4)
    assert ids == sorted(ids) and len(ids) == int(m.sum())
    assert all(bool(m[i]) for i in ids[:100])


def test_processor_masks_to_minus_inf(vd):
    proc = vd.logits_processor(3)
    scores = torch.randn(2, vd.vocab_width)
    out = proc(torch.zeros(2, 1, dtype=torch.long), scores.clone())
    allowed = vd.sample(3)
    assert torch.isinf(out[:, ~allowed]).all() and (out[:, ~allowed] < 0).all()
    assert torch.equal(out[:, allowed], scores[:, allowed])
    with pytest.raises(ValueError, match="logits width"):
        apply_mask(torch.zeros(1, 3), torch.zeros(4, dtype=torch.bool))


def test_noop_processor_returns_scores_untouched():
    proc = VocabMaskProcessor(torch.ones(5, dtype=torch.bool))
    scores = torch.randn(1, 5)
    assert proc(None, scores) is scores


def test_sampling_never_emits_a_dropped_id(vd, tiny_model_and_tokenizer):
    """High temperature on a random model spreads mass over the whole vocabulary."""
    model, tok = tiny_model_and_tokenizer
    engine = HFEngine(model, tok, batch_size=8, show_progress=False)
    prompt = proposer_prompt(tok)
    for seed in range(6):
        samples = engine.generate([prompt], n=8, temperature=1.5, top_p=1.0, max_new_tokens=24,
                                  seed=seed, vocab_dropout=vd, mask_seed=1000 + seed)
        allowed = vd.sample(1000 + seed)
        for s in samples:
            assert s.mask_seed == 1000 + seed
            assert all(bool(allowed[t]) for t in s.token_ids), "a dropped id was sampled"


def test_greedy_respects_the_mask(vd, tiny_model_and_tokenizer):
    model, tok = tiny_model_and_tokenizer
    engine = HFEngine(model, tok, show_progress=False)
    out = engine.generate([proposer_prompt(tok)], temperature=0, max_new_tokens=16, seed=0,
                          vocab_dropout=vd, mask_seed=5)
    assert all(bool(vd.sample(5)[t]) for t in out[0].token_ids)


def test_alpha_one_equals_unmasked_token_for_token():
    """No padded rows (as SmolLM2): the alpha = 1 path is bit-identical to no mask at all."""
    model, tok = load_model("tiny-random", pad_vocab=False, device="cpu")
    vd1 = VocabDropout.for_model(model, tok, alpha=1.0)
    engine = HFEngine(model, tok, batch_size=4, show_progress=False)
    prompt = proposer_prompt(tok)
    kw = dict(n=4, temperature=1.0, top_p=0.99, max_new_tokens=32, seed=11)
    plain = engine.generate([prompt], **kw)
    masked = engine.generate([prompt], vocab_dropout=vd1, mask_seed=9, **kw)
    assert [s.token_ids for s in plain] == [s.token_ids for s in masked]


def test_mask_argument_pairing(vd, tiny_model_and_tokenizer):
    model, tok = tiny_model_and_tokenizer
    engine = HFEngine(model, tok, show_progress=False)
    with pytest.raises(ValueError, match="together"):
        engine.generate(["x"], vocab_dropout=vd)


def test_anneal_schedule_paper_values():
    got = [alpha_at(t, 5, alpha=0.75, alpha_final=1.0, schedule="linear") for t in range(1, 6)]
    assert got == pytest.approx([0.75, 0.8125, 0.875, 0.9375, 1.0])
    assert [alpha_at(t, 5, alpha=0.85) for t in range(1, 6)] == [0.85] * 5
    assert alpha_at(1, 1, alpha=0.75, schedule="linear") == 0.75


@pytest.mark.parametrize("bad", [0.0, -0.1, 1.5, float("nan"), "0.5", True])
def test_bad_alpha_fails_clearly(tokenizer, bad):
    with pytest.raises(ValueError, match="alpha"):
        VocabDropout(tokenizer, alpha=bad)
    with pytest.raises(ValueError, match="alpha"):
        alpha_at(1, 5, alpha=bad)


def test_phases():
    assert mask_active("both", "train") and mask_active("both", "gen")
    assert mask_active("train", "train") and not mask_active("train", "gen")
    assert mask_active("gen", "gen") and not mask_active("gen", "train")
    assert not mask_active("none", "train") and not mask_active("none", "gen")
    with pytest.raises(ValueError, match="both, train, gen, none"):
        mask_active("always", "train")
    with pytest.raises(ValueError, match="schedule"):
        alpha_at(1, 5, alpha=0.75, schedule="cosine")
