"""The transformers generation engine on the tiny random model."""

from __future__ import annotations

import pytest
import torch
from transformers import LogitsProcessor

from vdlib.engines.generation import HFEngine, Sample, eos_token_ids
from vdlib.method.prompts import proposer_prompt, solver_prompt


@pytest.fixture(scope="module")
def engine(tiny_model_and_tokenizer):
    model, tok = tiny_model_and_tokenizer
    return HFEngine(model, tok, batch_size=4, show_progress=False)


@pytest.fixture(scope="module")
def prompts(tiny_model_and_tokenizer):
    _, tok = tiny_model_and_tokenizer
    return [proposer_prompt(tok), solver_prompt(tok, "What is 2+2?")]


class ForceToken(LogitsProcessor):
    """Forces ``token`` from generation step ``at`` on (to exercise EOS handling)."""

    def __init__(self, token: int, at: int) -> None:
        self.token, self.at, self.step = token, at, 0

    def __call__(self, input_ids, scores):
        if self.step >= self.at:
            scores = torch.full_like(scores, float("-inf"))
            scores[:, self.token] = 0.0
        self.step += 1
        return scores


def test_same_seed_same_samples_different_seed_different(engine, prompts):
    kw = dict(n=3, temperature=1.0, top_p=1.0, max_new_tokens=12)
    a = engine.generate(prompts, seed=7, **kw)
    b = engine.generate(prompts, seed=7, **kw)
    c = engine.generate(prompts, seed=8, **kw)
    assert [s.token_ids for s in a] == [s.token_ids for s in b]
    assert [s.text for s in a] == [s.text for s in b]
    assert [s.token_ids for s in a] != [s.token_ids for s in c]


def test_global_rng_untouched(engine, prompts):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    engine.generate(prompts, n=2, max_new_tokens=4, seed=1)
    assert torch.equal(torch.rand(3), expected)


def test_prompt_major_order_and_fields(engine, prompts):
    out = engine.generate(prompts, n=3, max_new_tokens=5, seed=0)
    assert len(out) == 6
    assert [(s.prompt_index, s.sample_index) for s in out] == [
        (0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert all(isinstance(s, Sample) and s.prompt == prompts[s.prompt_index] for s in out)
    assert all(s.mask_seed is None for s in out)
    d = out[0].to_dict()
    assert set(d) >= {"prompt", "token_ids", "text", "finish_reason", "seed", "mask_seed"}


def test_length_finish_reason(engine, prompts, tiny_model_and_tokenizer):
    _, tok = tiny_model_and_tokenizer
    force = ForceToken(token=tok.convert_tokens_to_ids("hello"), at=0)
    out = engine.generate(prompts[:1], n=2, max_new_tokens=6, seed=0, logits_processors=[force])
    for s in out:
        assert s.finish_reason == "length"
        assert len(s.token_ids) == 6
        assert s.text == "hello" * 6


def test_stop_at_eos_and_logits_processor_applied(engine, prompts, tiny_model_and_tokenizer):
    model, tok = tiny_model_and_tokenizer
    eos = eos_token_ids(model, tok)
    assert tok.eos_token_id in eos
    out = engine.generate(prompts, n=2, max_new_tokens=20, seed=0,
                          logits_processors=[ForceToken(tok.eos_token_id, at=3)])
    for s in out:
        assert s.finish_reason == "stop"
        assert len(s.token_ids) == 4 and s.token_ids[-1] == tok.eos_token_id
        assert "<|im_end|>" not in s.text  # special tokens are not decoded into the text


def test_greedy_is_seed_independent_and_padding_safe(engine, tiny_model_and_tokenizer):
    _, tok = tiny_model_and_tokenizer
    short = solver_prompt(tok, "1+1?")
    long = solver_prompt(tok, "A much longer question " * 10)
    alone = engine.generate([short], temperature=0, max_new_tokens=8, seed=1)
    batched = engine.generate([long, short], temperature=0, max_new_tokens=8, seed=2)
    assert alone[0].token_ids == batched[1].token_ids  # left padding does not change the answer


def test_more_samples_than_one_batch(engine, prompts):
    out = engine.generate(prompts[:1], n=9, max_new_tokens=3, seed=0)  # 3 batches of <= 4
    assert len(out) == 9 and len({s.seed for s in out}) == 3


@pytest.mark.parametrize(("kwargs", "word"), [
    ({"n": 0}, "n"), ({"temperature": -1.0}, "temperature"), ({"top_p": 0.0}, "top_p"),
    ({"top_k": -1}, "top_k"), ({"max_new_tokens": 0}, "max_new_tokens")])
def test_bad_arguments(engine, prompts, kwargs, word):
    with pytest.raises(ValueError, match=word):
        engine.generate(prompts, **kwargs)


def test_single_string_rejected(engine, prompts):
    with pytest.raises(TypeError, match="sequence of strings"):
        engine.generate(prompts[0])


def test_rounds_greedy_equal_one_pass(tiny_model_and_tokenizer, prompts):
    """Greedy decoding in rounds of 3 tokens continues from the exact ids: same tokens as one
    pass, with the same lengths and finish reasons."""
    model, tok = tiny_model_and_tokenizer
    one = HFEngine(model, tok, batch_size=4, show_progress=False)
    rounds = HFEngine(model, tok, batch_size=4, show_progress=False, round_tokens=3)
    a = one.generate(prompts, n=2, temperature=0, max_new_tokens=11, seed=0)
    b = rounds.generate(prompts, n=2, temperature=0, max_new_tokens=11, seed=0)
    assert [s.token_ids for s in a] == [s.token_ids for s in b]
    assert [s.finish_reason for s in b] == ["length"] * 4 and all(len(s.token_ids) == 11
                                                                    for s in b)


def test_rounds_drop_finished_rows(tiny_model_and_tokenizer, prompts, caplog):
    model, tok = tiny_model_and_tokenizer
    rounds = HFEngine(model, tok, batch_size=4, show_progress=False, round_tokens=4)
    forced = [ForceToken(tok.eos_token_id, at=2)]
    with caplog.at_level("INFO", logger="vdlib.engines.generation"):
        out = rounds.generate(prompts, n=2, max_new_tokens=12, seed=0,
                              logits_processors=forced)
    assert all(s.finish_reason == "stop" and len(s.token_ids) == 3 for s in out)
    assert "round 0: 0 of 4 rows still going" in caplog.text  # no second round needed
    sampled = rounds.generate(prompts, n=3, temperature=1.0, max_new_tokens=9, seed=5)
    again = rounds.generate(prompts, n=3, temperature=1.0, max_new_tokens=9, seed=5)
    assert [s.token_ids for s in sampled] == [s.token_ids for s in again]  # seeded per round
    assert all(len(s.token_ids) <= 9 for s in sampled)
    with pytest.raises(ValueError, match="round_tokens"):
        HFEngine(model, tok, round_tokens=0)


@pytest.mark.parametrize("n", [3, 4, 1])
def test_prefix_sharing_draws_the_samples_of_a_plain_call(tiny_model_and_tokenizer, prompts,
                                                         monkeypatch, n):
    """Each distinct prompt prefilled once and its cache repeated (batch 4 splits a prompt's
    samples across batches at n = 3): the same tokens as prefilling every row, under a mask
    too, with the batch's rows left-padded to different prompt lengths."""
    from vdlib.method.vocab_dropout import VocabDropout

    model, tok = tiny_model_and_tokenizer
    engine = HFEngine(model, tok, batch_size=4, show_progress=False)
    vd = VocabDropout(tok, alpha=0.75, vocab_width=model.config.vocab_size)
    calls = []
    real = HFEngine._shared_prompt_cache

    def spy(self, rows, device):
        out = real(self, rows, device)
        calls.append(out is not None)
        return out

    kw = dict(n=n, temperature=1.0, max_new_tokens=10, seed=3)
    monkeypatch.setattr(HFEngine, "_shared_prompt_cache", spy)
    shared = engine.generate(prompts, **kw)
    masked = engine.generate(prompts, vocab_dropout=vd, mask_seed=5, **kw)
    assert any(calls) == (n > 1)
    monkeypatch.setattr(HFEngine, "_shared_prompt_cache", lambda self, rows, device: None)
    assert [s.token_ids for s in engine.generate(prompts, **kw)] == \
        [s.token_ids for s in shared]
    assert [s.token_ids for s in engine.generate(prompts, vocab_dropout=vd, mask_seed=5, **kw)] \
        == [s.token_ids for s in masked]
