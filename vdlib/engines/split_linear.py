"""Decoding steps on every CPU thread: a linear layer of few rows split by output features.

A decoding step multiplies a few rows (one new token per sequence) by every weight matrix of
the model, so its cost is streaming the weights from memory. MKL computes such a product on one
thread whatever torch's thread count: on the 2-core quickstart machine SmolLM2-135M's 49,152 x
576 ``lm_head`` took 27 ms for 2 rows with 1 thread and with 2, and a whole step ~100 ms.
Written as one batched matmul over ``parts`` blocks of output features, torch runs the blocks
on separate threads: 14 ms for the ``lm_head``, ~55 ms a step, the notebook's mask cell (4
samples of 80 tokens) 18.1 s -> 11.5 s (``benchmarks/split_linear_speed.py``).

The result is the same bits where the block is computed as the whole matrix was (each output
one length-``in_features`` dot product in the same order), and that is checked, not assumed:
the first time a ``(rows, out, in, dtype)`` shape is met, both products of a random probe are
compared with ``torch.equal``, and a shape whose products differ is never split (here an odd
row count, 5, differed: MKL treats remainder rows otherwise; another BLAS may differ elsewhere).
:func:`split_linears` patches a model's bias-free ``nn.Linear`` layers for the length of
a ``with`` block (:class:`~vdlib.engines.generation.HFEngine` wraps its CPU decoding in it
when torch has several threads); products of more than ``max_rows`` rows, with a bias, with
autograd recording, or off the CPU go through the layer's own ``forward``.

>>> layer = torch.nn.Linear(8, 6, bias=False)
>>> x = torch.randn(3, 8)
>>> with torch.no_grad(), split_linears(layer, parts=2):
...     y = layer(x)
>>> torch.equal(y, torch.nn.functional.linear(x, layer.weight))
True
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

__all__ = ["split_linears", "split_product", "DEFAULT_MAX_ROWS"]

logger = logging.getLogger(__name__)

#: most rows a split product takes (the engine's decoding batches; a prefill is left to MKL)
DEFAULT_MAX_ROWS = 64

# (rows, out_features, in_features, dtype, parts) -> whether the split product was bit-equal
_CHECKED: dict[tuple[int, int, int, torch.dtype, int], bool] = {}


def split_product(x: torch.Tensor, weight: torch.Tensor, parts: int) -> torch.Tensor:
    """``x @ weight.T`` for 2-D ``x`` (rows, in) as one ``torch.bmm`` over ``parts`` equal
    blocks of ``weight``'s rows (``out_features % parts == 0``)."""
    rows, width = x.shape
    out = weight.shape[0]
    blocks = weight.view(parts, out // parts, width).transpose(1, 2)
    return torch.bmm(x.expand(parts, rows, width), blocks).transpose(0, 1).reshape(rows, out)


def _bit_equal(key: tuple[int, int, int, torch.dtype, int], weight: torch.Tensor) -> bool:
    """Whether the split product of this shape equals the layer's, on a random probe (drawn
    from a private generator: the global RNG, which seeds sampling, is left alone); computed
    once per shape."""
    if key not in _CHECKED:
        rows, _, width, dtype, parts = key
        probe = torch.randn(rows, width, dtype=dtype,
                            generator=torch.Generator().manual_seed(rows * 7919 + width))
        same = torch.equal(split_product(probe, weight, parts),
                           torch.nn.functional.linear(probe, weight))
        _CHECKED[key] = same
        if not same:
            logger.info("split linear product of shape %s differs in its last bits; "
                        "that shape runs unsplit", key[:3])
    return _CHECKED[key]


def _split_forward(layer: torch.nn.Linear, parts: int, max_rows: int
                   ) -> Callable[[torch.Tensor], torch.Tensor]:
    own = layer.forward
    out, width = layer.out_features, layer.in_features

    def forward(x: torch.Tensor) -> torch.Tensor:
        weight = layer.weight
        rows = x.numel() // width if x.shape[-1] == width else max_rows + 1
        if (rows > max_rows or layer.bias is not None or x.device.type != "cpu"
                or torch.is_grad_enabled() or not weight.is_contiguous()
                or x.dtype != weight.dtype):
            return own(x)
        flat = x.reshape(rows, width)
        if not _bit_equal((rows, out, width, weight.dtype, parts), weight):
            return own(x)
        return split_product(flat, weight, parts).reshape(*x.shape[:-1], out)

    return forward


@contextmanager
def split_linears(model: torch.nn.Module, parts: int | None = None,
                  max_rows: int = DEFAULT_MAX_ROWS) -> Iterator[None]:
    """Within the block, ``model``'s bias-free linear layers whose ``out_features`` divide by
    ``parts`` (default: torch's thread count) compute products of at most ``max_rows`` rows
    split across threads (module docstring); nothing changes with ``parts`` < 2."""
    parts = torch.get_num_threads() if parts is None else parts
    patched: list[tuple[torch.nn.Linear, Any]] = []
    if parts >= 2 and isinstance(model, torch.nn.Module):
        for module in model.modules():
            if (isinstance(module, torch.nn.Linear) and module.bias is None
                    and module.out_features % parts == 0 and "forward" not in vars(module)):
                patched.append((module, _split_forward(module, parts, max_rows)))
    for module, forward in patched:
        module.forward = forward  # type: ignore[method-assign]
    try:
        yield
    finally:
        for module, _ in patched:
            del module.forward
