"""AdamW with its fp32 master weights and moments in CPU memory (``optimizer_offload: true``).

Why: a GRPO stage of the paper's 8B shape does not fit one H200 in the plain layout (fp32
weights, gradients and both AdamW moments are 16 bytes a parameter: 131 GB for Qwen3-8B, before
the bf16 reference and TRL's colocated vLLM). The paper trains the proposer on one GPU (its
appendix on compute) with verl, whose FSDP workers can offload the optimizer to the CPU; this is
the same layout in one process, without DeepSpeed or FSDP (docs/SCALING.md, "8B"):

- **GPU**: the policy's weights in the training precision (bf16: 2 bytes a parameter, what TRL's
  autocast would compute with anyway) and one fp32 gradient accumulator per parameter (4 bytes).
  A hook after each parameter's gradient is accumulated (``register_post_accumulate_grad_hook``)
  adds the low-precision gradient of every micro-batch into its fp32 accumulator and frees it,
  so gradient accumulation over the micro-batches sums in fp32, not bf16.
- **CPU**: the fp32 master weights and AdamW's two moments (12 bytes a parameter); ``step``
  clips the accumulated gradient by its global norm (the trainer's own clipping sees no
  gradients and is turned off) and, a tensor at a time, copies it to the CPU, runs
  ``torch.optim.AdamW`` on the master and copies it, rounded, back into the GPU weight.

The update equals ``torch.optim.AdamW`` with ``clip_grad_norm_`` on fp32 weights given the same
gradients (tests/test_offload.py); only the forward and backward run on rounded weights, as they
do under bf16 autocast. The masters outlive a stage through :func:`save_state_dict` (the saved
model is fp32) and :func:`attach_masters` (the next stage starts from them, not from rounded
weights). One process only: under DDP the hooks would take the gradients before their
all-reduce, so several processes are refused.
"""

from __future__ import annotations

import logging
import math
import weakref
from collections.abc import Iterable, Iterator
from typing import Any

import torch

logger = logging.getLogger(__name__)

#: the attribute of a model that carries fp32 masters from its checkpoint to the optimizer
MASTERS_ATTR = "_vdlib_fp32_masters"


def attach_masters(model: torch.nn.Module) -> None:
    """Keep fp32 CPU copies of ``model``'s trainable weights on the model (before it is cast to
    the training precision and moved to the GPU), for :class:`OffloadedAdamW` to start from."""
    setattr(model, MASTERS_ATTR, {n: p.detach().to("cpu", torch.float32, copy=True)
                                  for n, p in model.named_parameters() if p.requires_grad})


class OffloadedAdamW(torch.optim.Optimizer):
    """AdamW over ``params`` (the GPU weights, in param groups with their ``weight_decay``) whose
    fp32 masters, moments and update live on the CPU; see the module docstring.

    ``names`` maps each parameter to its name (for :func:`save_state_dict` and for masters kept
    by :func:`attach_masters`, passed as ``masters``); ``max_grad_norm`` > 0 clips the summed
    gradient by its global L2 norm, as ``clip_grad_norm_`` does; ``last_grad_norm`` holds the norm
    of the last step (before clipping)."""

    def __init__(self, params: Iterable[Any], *, lr: float,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, max_grad_norm: float = 0.0,
                 names: dict[torch.nn.Parameter, str] | None = None,
                 masters: dict[str, torch.Tensor] | None = None) -> None:
        if torch.distributed.is_available() and torch.distributed.is_initialized() \
                and torch.distributed.get_world_size() > 1:
            raise ValueError("optimizer_offload runs in one process only (under DDP its hooks "
                             "would take each gradient before its all-reduce); set "
                             "optimizer_offload: false for several processes a run")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
        self.max_grad_norm = float(max_grad_norm)
        self.last_grad_norm: float | None = None
        self.names = dict(names or {})
        masters = masters or {}
        self._acc: dict[torch.nn.Parameter, torch.Tensor] = {}
        self._master: dict[torch.nn.Parameter, torch.Tensor] = {}
        # one CPU AdamW per master (single-tensor kernels): its gradient exists only while it
        # steps, so the CPU holds masters and moments (12 bytes a parameter) plus one tensor's
        # gradient, not a full fp32 gradient copy, and no foreach temporaries of every tensor
        self._inner: dict[torch.nn.Parameter, torch.optim.AdamW] = {}
        # the hooks live in the parameters' C++ side, where the garbage collector cannot see a
        # cycle: a hook holding this optimizer would keep it, the model and the fp32 sums alive
        # after the stage (61 GiB of an H200 at the 8B shape); it holds the optimizer weakly
        owner = weakref.ref(self)

        def hook(p: torch.Tensor) -> None:
            opt = owner()
            if opt is not None:
                opt._accumulate(p)

        for group in self.param_groups:
            for p in group["params"]:
                name = self.names.get(p)
                src = masters.get(name) if name is not None else None
                if src is not None and src.shape != p.shape:
                    raise ValueError(f"fp32 master of {name} has shape {tuple(src.shape)}, the "
                                     f"weight {tuple(p.shape)}")
                m = (src if src is not None else p.detach()).to("cpu", torch.float32,
                                                                 copy=src is None)
                self._master[p] = m
                self._acc[p] = torch.zeros(p.shape, dtype=torch.float32, device=p.device)
                p.register_post_accumulate_grad_hook(hook)
                self._inner[p] = torch.optim.AdamW([m], lr=lr, betas=betas, eps=eps,
                                                   weight_decay=group["weight_decay"],
                                                   foreach=False)
        n = sum(p.numel() for p in self._master)
        logger.info("optimizer offload: %.2fB parameters; fp32 masters and AdamW moments on the "
                    "CPU (%.1f GiB), fp32 gradient sums on %s (%.1f GiB)", n / 1e9,
                    12 * n / 2**30, next(iter(self._acc.values())).device if self._acc else "-",
                    4 * n / 2**30)

    def _accumulate(self, p: torch.Tensor) -> None:
        """After a backward pass: add the micro-batch's gradient into p's fp32 accumulator."""
        if p.grad is not None:
            self._acc[p].add_(p.grad)
            p.grad = None

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        for group in self.param_groups:
            yield from group["params"]

    @torch.no_grad()
    def grad_norm(self) -> float:
        """Global L2 norm of the accumulated gradients."""
        norms = [torch.linalg.vector_norm(a) for a in self._acc.values()]
        if not norms:
            return 0.0
        return float(torch.linalg.vector_norm(torch.stack([n.to(norms[0].device)
                                                           for n in norms])))

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        loss = closure() if closure is not None else None
        norm = self.grad_norm()
        self.last_grad_norm = norm
        coef = 1.0
        if self.max_grad_norm > 0 and math.isfinite(norm):
            coef = min(1.0, self.max_grad_norm / (norm + 1e-6))  # clip_grad_norm_'s rule
        for group in self.param_groups:
            for p in group["params"]:
                inner, master, acc = self._inner[p], self._master[p], self._acc[p]
                for key in ("lr", "weight_decay", "betas", "eps"):
                    inner.param_groups[0][key] = group[key]
                if coef != 1.0:
                    acc.mul_(coef)
                master.grad = acc.to("cpu")
                inner.step()
                master.grad = None
                p.copy_(master)
                acc.zero_()
        return loss

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters():
            p.grad = None
            self._acc[p].zero_()

    def masters(self) -> dict[str, torch.Tensor]:
        """The fp32 master weights by parameter name (CPU)."""
        return {self.names[p]: m for p, m in self._master.items() if p in self.names}

    def state_dict(self) -> dict[str, Any]:
        return {"inner": [self._inner[p].state_dict() for p in self.parameters()],
                "max_grad_norm": self.max_grad_norm}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        for p, sd in zip(self.parameters(), state_dict["inner"], strict=True):
            self._inner[p].load_state_dict(sd)


def build(model: torch.nn.Module, decay_names: Iterable[str], *, lr: float, weight_decay: float,
          betas: tuple[float, float], eps: float, max_grad_norm: float) -> OffloadedAdamW:
    """An :class:`OffloadedAdamW` over ``model``'s trainable weights, with the transformers
    Trainer's two groups (weight decay on ``decay_names``, none on biases and norms), starting
    from the masters :func:`attach_masters` kept (else from the weights)."""
    decay = set(decay_names)
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    groups = [{"params": [p for n, p in named if n in decay], "weight_decay": weight_decay},
              {"params": [p for n, p in named if n not in decay], "weight_decay": 0.0}]
    return OffloadedAdamW([g for g in groups if g["params"]], lr=lr, betas=betas, eps=eps,
                          weight_decay=weight_decay, max_grad_norm=max_grad_norm,
                          names={p: n for n, p in named},
                          masters=getattr(model, MASTERS_ATTR, None))


def for_trainer(trainer: Any, model: torch.nn.Module) -> OffloadedAdamW:
    """:func:`build` with a transformers ``Trainer``'s settings (learning rate, weight decay and
    its groups, betas, eps) and ``trainer.offload_max_grad_norm`` as the clipping norm."""
    a = trainer.args
    return build(model, trainer.get_decay_parameter_names(model), lr=a.learning_rate,
                 weight_decay=a.weight_decay, betas=(a.adam_beta1, a.adam_beta2),
                 eps=a.adam_epsilon, max_grad_norm=trainer.offload_max_grad_norm)


def role_max_grad_norm(g: Any) -> float | None:
    """``MaskedGRPOTrainer``'s ``offload_max_grad_norm`` for a role's GRPO settings: its clipping
    norm under ``optimizer_offload`` (the offloaded AdamW clips), else None (transformers'
    AdamW)."""
    return g.max_grad_norm if g.optimizer_offload else None


def last_grad_norm(optimizer: Any) -> float | None:
    """The last step's gradient norm of an :class:`OffloadedAdamW` (also inside accelerate's
    wrapper); None for any other optimizer."""
    return getattr(getattr(optimizer, "optimizer", optimizer), "last_grad_norm", None)


def save_state_dict(model: torch.nn.Module, optimizer: Any) -> dict[str, torch.Tensor] | None:
    """The state dict to save for ``model`` trained by ``optimizer``: its weights with the fp32
    masters in place of the rounded trainable weights (None when ``optimizer`` is no
    :class:`OffloadedAdamW`, or wraps none, e.g. accelerate's ``AcceleratedOptimizer``)."""
    inner = getattr(optimizer, "optimizer", optimizer)
    if not isinstance(inner, OffloadedAdamW):
        return None
    by_ptr = {p.data_ptr(): m for p, m in inner._master.items()}  # tied weights share one
    return {n: by_ptr.get(t.data_ptr(), t) for n, t in model.state_dict().items()}
