"""Tests for vdlib.engines.split_linear: linear layers split across threads give the same bits
(or fall back), only where they may, only inside the block; the engine's samples are unchanged."""

from __future__ import annotations

import pytest
import torch

from vdlib.engines import split_linear
from vdlib.engines.generation import HFEngine
from vdlib.engines.split_linear import split_linears, split_product
from vdlib.method.prompts import proposer_prompt, solver_prompt


@pytest.fixture
def threads():
    """Two torch threads for the test (the split is a no-op with one)."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield 2
    torch.set_num_threads(before)


@pytest.mark.parametrize(("rows", "out", "width"), [(1, 64, 32), (2, 576, 576), (5, 192, 576),
                                                    (64, 96, 40)])
def test_split_product_is_the_layer_product(rows, out, width):
    torch.manual_seed(0)
    x, weight = torch.randn(rows, width), torch.randn(out, width)
    expected = torch.nn.functional.linear(x, weight)
    for parts in (1, 2, 4):
        got = split_product(x, weight, parts)
        assert got.shape == expected.shape
        # float32 sums of up to 576 products in another order (the BLAS kernel and its threads
        # differ by machine and load): values ~ 24, so 1e-4 absolute; equal bits are checked at
        # run time
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-4)


def test_layers_patched_only_inside_the_block_and_outputs_equal():
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(16, 8, bias=False), torch.nn.Linear(8, 6),
                                torch.nn.Linear(6, 5, bias=False))
    x = torch.randn(2, 3, 16)
    with torch.no_grad():
        expected = model(x)
        with split_linears(model, parts=2):
            patched = [("forward" in vars(m)) for m in model]
            got = model(x)
    assert patched == [True, False, False]  # a bias, or out_features 5 not divisible by 2
    assert torch.equal(got, expected)
    assert not any("forward" in vars(m) for m in model)
    with pytest.raises(RuntimeError), split_linears(model, parts=2):
        raise RuntimeError("boom")
    assert not any("forward" in vars(m) for m in model)  # restored after an error too
    with split_linears(model, parts=1):
        assert not any("forward" in vars(m) for m in model)


def test_falls_back_when_not_bit_equal_or_not_applicable(monkeypatch):
    layer = torch.nn.Linear(12, 10, bias=False)
    x = torch.randn(4, 12)
    expected = torch.nn.functional.linear(x, layer.weight)
    calls = []

    def off_by_a_bit(x, weight, parts):
        calls.append(x.shape[0])
        return torch.nn.functional.linear(x, weight) + 1e-3

    monkeypatch.setattr(split_linear, "split_product", off_by_a_bit)
    monkeypatch.setattr(split_linear, "_CHECKED", {})
    with torch.no_grad(), split_linears(layer, parts=2, max_rows=4):
        assert torch.equal(layer(x), expected)  # checked, differs: the layer's own product
        assert torch.equal(layer(x), expected)  # and not checked again
        assert calls == [4]
        wide = torch.randn(5, 12)
        assert torch.equal(layer(wide), torch.nn.functional.linear(wide, layer.weight))
        assert calls == [4]  # more rows than max_rows: never split
    with split_linears(layer, parts=2):  # autograd recording: never split
        assert layer(x).requires_grad and calls == [4]


def test_engine_samples_unchanged_by_split_decoding(tiny_model_and_tokenizer, threads):
    model, tok = tiny_model_and_tokenizer
    prompts = [proposer_prompt(tok), solver_prompt(tok, "What is 2+2?")]
    kw = dict(n=3, temperature=1.0, top_p=0.95, max_new_tokens=16, seed=3)
    split = HFEngine(model, tok, batch_size=4, show_progress=False).generate(prompts, **kw)
    plain = HFEngine(model, tok, batch_size=4, show_progress=False,
                     split_decoding=False).generate(prompts, **kw)
    assert [s.token_ids for s in split] == [s.token_ids for s in plain]
    assert not any("forward" in vars(m) for m in model.modules())
