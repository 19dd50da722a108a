"""optimizer_offload: AdamW with fp32 masters and moments on the CPU (vdlib.loop.offload)."""

from __future__ import annotations

import copy

import pytest
import torch

from vdlib.loop import offload


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(6, 5)
        self.norm = torch.nn.LayerNorm(5)
        self.out = torch.nn.Linear(5, 3, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.norm(self.lin(x)))


DECAY = ["lin.weight", "out.weight"]


def _groups(model: torch.nn.Module, wd: float) -> list[dict]:
    named = list(model.named_parameters())
    return [{"params": [p for n, p in named if n in DECAY], "weight_decay": wd},
            {"params": [p for n, p in named if n not in DECAY], "weight_decay": 0.0}]


def _batches(steps: int, micro: int) -> list[list[torch.Tensor]]:
    g = torch.Generator().manual_seed(3)
    return [[torch.randn(4, 6, generator=g) for _ in range(micro)] for _ in range(steps)]


@pytest.mark.parametrize("max_norm", [0.0, 0.05, 100.0])
def test_update_equals_adamw_with_clipping(max_norm: float) -> None:
    """Same gradients (fp32 weights): the offloaded update is torch's AdamW after
    clip_grad_norm_, over several steps of two accumulated micro-batches each."""
    torch.manual_seed(0)
    ref = Net()
    mine = copy.deepcopy(ref)
    ref_opt = torch.optim.AdamW(_groups(ref, 0.1), lr=1e-2, weight_decay=0.1)
    opt = offload.build(mine, DECAY, lr=1e-2, weight_decay=0.1, betas=(0.9, 0.999), eps=1e-8,
                        max_grad_norm=max_norm)
    for step in _batches(4, 2):
        for x in step:
            ref(x).pow(2).mean().backward()
            mine(x).pow(2).mean().backward()
        assert all(p.grad is None for p in mine.parameters())  # taken by the hooks
        ref_norm = float(torch.nn.utils.clip_grad_norm_(ref.parameters(), max_norm)
                         if max_norm > 0 else torch.nn.utils.get_total_norm(
                             [p.grad for p in ref.parameters()]))
        ref_opt.step()
        ref_opt.zero_grad()
        opt.step()
        assert opt.last_grad_norm == pytest.approx(ref_norm, rel=1e-5)
    for (n, a), b in zip(ref.named_parameters(), mine.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7, msg=n)


def test_low_precision_weights_keep_fp32_masters() -> None:
    """bf16 weights: updates far below a bf16 ulp add up in the fp32 masters (bf16 AdamW would
    round each one away); the weights are the masters rounded; the saved state dict holds the
    masters."""
    torch.manual_seed(0)
    model = Net()
    model.out.weight = torch.nn.Parameter(torch.randn(3, 5))
    offload.attach_masters(model)
    start = {n: t.clone() for n, t in getattr(model, offload.MASTERS_ATTR).items()}
    model = model.to(torch.bfloat16)
    opt = offload.build(model, DECAY, lr=1e-6, weight_decay=0.0, betas=(0.9, 0.999), eps=1e-8,
                        max_grad_norm=1.0)
    x = torch.randn(4, 6, dtype=torch.bfloat16)
    for _ in range(3):
        model(x).float().pow(2).mean().backward()
        opt.step()
    masters = opt.masters()
    moved = masters["lin.weight"] - start["lin.weight"]
    assert 0 < moved.abs().max() < 1e-5  # three steps of ~1e-6 each, kept
    for n, p in model.named_parameters():
        assert torch.equal(p, masters[n].to(torch.bfloat16)), n
    state = offload.save_state_dict(model, opt)
    assert state is not None and state["lin.weight"].dtype == torch.float32
    assert torch.equal(state["lin.weight"], masters["lin.weight"])
    assert offload.save_state_dict(model, torch.optim.SGD(model.parameters(), lr=0.1)) is None


def test_masters_of_wrong_shape_are_refused() -> None:
    model = Net()
    offload.attach_masters(model)
    getattr(model, offload.MASTERS_ATTR)["lin.weight"] = torch.zeros(2, 2)
    with pytest.raises(ValueError, match="lin.weight"):
        offload.build(model, DECAY, lr=1e-3, weight_decay=0.0, betas=(0.9, 0.999), eps=1e-8,
                      max_grad_norm=1.0)


def test_zero_grad_clears_the_sums() -> None:
    model = Net()
    opt = offload.build(model, DECAY, lr=1e-3, weight_decay=0.0, betas=(0.9, 0.999), eps=1e-8,
                        max_grad_norm=0.0)
    model(torch.randn(2, 6)).sum().backward()
    assert opt.grad_norm() > 0
    opt.zero_grad()
    assert opt.grad_norm() == 0


def test_a_dropped_optimizer_and_its_model_are_freed() -> None:
    """The gradient hooks live in the parameters' C++ side, out of the garbage collector's
    sight: a hook holding the optimizer kept the model, its fp32 sums and the masters alive
    after the stage (61 GiB of an H200 with the 8B shape). They hold it weakly."""
    import gc
    import weakref

    model = Net()
    opt = offload.build(model, DECAY, lr=1e-3, weight_decay=0.0, betas=(0.9, 0.999), eps=1e-8,
                        max_grad_norm=1.0)
    model(torch.randn(2, 6)).sum().backward()
    opt.step()
    refs = [weakref.ref(model), weakref.ref(opt), weakref.ref(model.lin.weight)]
    del model, opt
    gc.collect()
    assert [r() is None for r in refs] == [True, True, True]
