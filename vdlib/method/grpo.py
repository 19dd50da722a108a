"""GRPO losses and the entropy-control baselines KL-Cov and Clip-Cov, as pure torch functions.

Sources. GRPO: Shao et al. 2024 (DeepSeekMath), group-normalised advantages and the PPO clipped
surrogate with a k3 ("low-variance") KL term to the reference policy, as in the paper's
"Preliminaries", R-Zero (verl/EasyR1) and TRL's ``GRPOTrainer`` with ``beta > 0``. KL-Cov and
Clip-Cov: Cui et al. 2025, "The Entropy Mechanism of Reinforcement Learning for Reasoning
Language Models", with the semantics of verl's ``core_algos.compute_policy_loss_kl_cov`` and
``compute_policy_loss_clip_cov`` (verl's ``core_algos.py``). The paper's values
are the defaults: KL-Cov k = 2e-3, coefficient 1.0; Clip-Cov rho = 2e-4, bounds (1, 5); GRPO
beta = 1e-2.

Shapes: ``B`` sequences (completions), ``T`` completion tokens, ``V`` logits width. ``mask`` is
``(B, T)``, bool or 0/1 (``> 0`` counts as valid). Per-token losses are 0 at padding. Advantages
are per sequence ``(B,)`` (broadcast over tokens) or already per token ``(B, T)``. Every mean
"over valid tokens" divides by ``max(N_valid, 1)``, so an all-padding batch gives 0, not NaN.
Stats are detached 0-dim tensors (no device sync).

Old log-probs (KL-Cov / Clip-Cov): these functions take ``old_logp`` as given; where it comes
from (a separate no-grad pass, as verl's ``compute_log_prob``, or the update's own detached
log-probs) is the trainer's choice (``vdlib.loop.trainer``, config ``cov_old_logprobs``).

Selection scope (KL-Cov / Clip-Cov): the covariance means, N_valid, k and the random draw are
taken over exactly the batch passed in. verl calls the loss per micro-batch
(``scope="micro_batch"``). ``scope="mini_batch"`` means the caller selects over the whole
mini-batch at once: call :func:`select_cov_tokens` on the concatenated mini-batch (current
log-probs, e.g. from a no-grad forward) and pass each micro-batch's slice as ``selected=``.

>>> import torch
>>> group_advantages(torch.tensor([1.0, 0.0, 1.0, 1.0]), group_size=2)
tensor([ 0.7071, -0.7071,  0.0000,  0.0000])
>>> lp = torch.zeros(1, 3)
>>> float(k3_kl(lp, lp).sum()), float(token_mean(torch.ones(1, 3), torch.tensor([[1, 1, 0]])))
(0.0, 1.0)
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = [
    "LOSS_AGGREGATIONS",
    "COV_METHODS",
    "group_advantages",
    "null_gradient",
    "token_mean",
    "seq_mean_token_mean",
    "k3_kl",
    "clipped_surrogate",
    "grpo_loss",
    "token_covariance",
    "kl_cov_select",
    "clip_cov_select",
    "select_cov_tokens",
    "clip_cov_loss",
    "kl_cov_loss",
    "entropy_from_logits",
    "selective_log_softmax",
]


def _valid(mask: Tensor) -> Tensor:
    return mask if mask.dtype == torch.bool else mask > 0


def _token_adv(advantages: Tensor, like: Tensor) -> Tensor:
    """(B,) or (B, T) advantages -> (B, T) (a broadcast view)."""
    adv = advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages
    return adv.to(like.dtype).expand_as(like)


def group_advantages(rewards: Tensor, group_size: int, eps: float = 1e-6,
                     scale: bool = True) -> Tensor:
    """GRPO advantages ``(N,) -> (N,)``: ``(r - mean_g) / (std_g + eps)`` per group.

    Groups are consecutive blocks of ``group_size`` (G) rewards (the G samples of one prompt).
    ``std_g`` is the *unbiased* (Bessel-corrected, N-1) standard deviation, as in every GRPO
    implementation we follow: verl and EasyR1/R-Zero call ``torch.std`` (unbiased by default) and
    TRL's ``nanstd`` applies Bessel's correction. ``eps``: 1e-6 in verl/R-Zero (default here);
    TRL adds 1e-4. ``scale=False`` gives ``r - mean_g`` (Dr. GRPO; TRL ``scale_rewards="none"``).
    A constant group gets advantage 0. ``group_size == 1`` gives zeros (TRL's convention; verl
    instead uses mean 0, std 1 for a singleton group).
    """
    if group_size < 1 or rewards.dim() != 1 or rewards.numel() % group_size:
        raise ValueError(f"rewards must be 1-D with length a multiple of group_size={group_size}, "
                         f"got shape {tuple(rewards.shape)}")
    r = rewards.to(torch.promote_types(rewards.dtype, torch.float32)).view(-1, group_size)
    centred = r - r.mean(dim=1, keepdim=True)
    if scale and group_size > 1:
        centred = centred / (r.std(dim=1, keepdim=True, correction=1) + eps)
    return centred.reshape(-1)


def null_gradient(advantages: Tensor, optimizer_step: int) -> bool:
    """Whether a GRPO micro-batch's gradient is 0 by construction: every advantage is 0 and
    no optimizer step has been taken in the phase yet, so the policy equals the old policy
    (the clipped surrogate is ``-A * ratio`` = 0 for every token) and the reference (the k3
    KL's gradient, ``1 - exp(ref - logp)``, is 0 at ``logp = ref``); KL-Cov and Clip-Cov add
    only such KL and clipped terms.

    >>> null_gradient(torch.zeros(4), 0), null_gradient(torch.zeros(4), 1)
    (True, False)
    >>> null_gradient(torch.tensor([0.0, 0.5, -0.5, 0.0]), 0)
    False
    """
    return optimizer_step == 0 and not bool(torch.any(advantages != 0))


def token_mean(values: Tensor, mask: Tensor) -> Tensor:
    """``sum(values * mask) / max(sum(mask), 1)``: verl/DAPO "token-mean" (TRL "dapo"/"bnpo").

    ``values``, ``mask``: (B, T) -> scalar. Every valid token weighs the same, so long sequences
    weigh more. Across gradient-accumulation micro-batches the caller owns the global count.
    """
    m = _valid(mask)
    return torch.where(m, values, 0).sum() / m.sum().clamp(min=1)


def seq_mean_token_mean(values: Tensor, mask: Tensor) -> Tensor:
    """Mean over sequences of each sequence's token mean (TRL ``loss_type="grpo"``; verl
    "seq-mean-token-mean"). (B, T) -> scalar. Rows without valid tokens are left out of the
    outer mean (verl); a batch with none gives 0.
    """
    m = _valid(mask)
    counts = m.sum(dim=1)
    per_seq = torch.where(m, values, 0).sum(dim=1) / counts.clamp(min=1)
    has = counts > 0
    return torch.where(has, per_seq, 0).sum() / has.sum().clamp(min=1)


LOSS_AGGREGATIONS = {"token_mean": token_mean, "seq_mean_token_mean": seq_mean_token_mean}


def k3_kl(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """Schulman's k3 estimate of KL(pi || pi_ref) per token: ``exp(d) - d - 1``, d = ref - logp.

    (B, T) x (B, T) -> (B, T); >= 0, and 0 exactly where ``logp == ref_logp``. This is verl's
    ``low_var_kl`` (without its clamp to [-10, 10]) and TRL's ``per_token_kl``.
    """
    d = ref_logp - logp
    return torch.exp(d) - d - 1


def _ppo_terms(logp: Tensor, old_logp: Tensor, advantages: Tensor, eps_low: float,
               eps_high: float) -> tuple[Tensor, Tensor, Tensor]:
    """L1 = -A r, L2 = -A clip(r, 1 - eps_low, 1 + eps_high), r = exp(logp - old_logp); (B, T)."""
    ratio = torch.exp(logp - old_logp)
    adv = _token_adv(advantages, ratio)
    return ratio, -adv * ratio, -adv * torch.clamp(ratio, 1 - eps_low, 1 + eps_high)


def clipped_surrogate(logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor,
                      eps_low: float = 0.2, eps_high: float = 0.2) -> tuple[Tensor, Tensor]:
    """PPO/GRPO clipped surrogate: ``-min(r A, clip(r, 1-eps_low, 1+eps_high) A)`` per token.

    ``logp``, ``old_logp``, ``mask``: (B, T); ``advantages``: (B,) or (B, T). Returns
    ``(per_token_loss (B, T), clip_fraction scalar)``. A token is *clipped* when the clipped
    branch is strictly the larger loss (L2 > L1, verl's ``pg_clipfrac``); equivalently
    (r > 1+eps_high and A > 0) or (r < 1-eps_low and A < 0), TRL's ``clip_ratio/region_mean``.
    Clipped tokens get no gradient. ``clip_fraction`` is their share of the valid tokens.
    """
    m = _valid(mask)
    _, l1, l2 = _ppo_terms(logp, old_logp, advantages, eps_low, eps_high)
    per_token = torch.where(m, torch.maximum(l1, l2), 0)
    return per_token, token_mean((l2 > l1).float(), m).detach()


def grpo_loss(logp: Tensor, old_logp: Tensor, ref_logp: Tensor | None, advantages: Tensor,
              mask: Tensor, eps_low: float = 0.2, eps_high: float = 0.2, beta: float = 1e-2,
              loss_agg: str = "token_mean") -> tuple[Tensor, dict[str, Tensor]]:
    """GRPO loss: aggregate of ``clipped_surrogate + beta * k3_kl(logp, ref_logp)``.

    Shapes as in :func:`clipped_surrogate`; ``ref_logp`` (B, T) or None (then ``beta`` must be 0).
    The KL is a loss term (paper, R-Zero, TRL with ``beta > 0``), not a reward penalty.
    ``loss_agg`` names a :data:`LOSS_AGGREGATIONS` entry. Stats: ``kl`` (k3 mean over valid
    tokens; 0 without a reference), ``clip_fraction``, ``policy_loss`` (surrogate alone).
    """
    if loss_agg not in LOSS_AGGREGATIONS:
        raise ValueError(f"unknown loss_agg {loss_agg!r}; valid: {sorted(LOSS_AGGREGATIONS)}")
    if ref_logp is None and beta != 0:
        raise ValueError("beta != 0 needs ref_logp")
    agg = LOSS_AGGREGATIONS[loss_agg]
    surrogate, clip_fraction = clipped_surrogate(logp, old_logp, advantages, mask, eps_low,
                                                 eps_high)
    per_token, kl = surrogate, logp.new_zeros(())
    if ref_logp is not None:
        per_token_kl = k3_kl(logp, ref_logp)
        kl = token_mean(per_token_kl, mask).detach()
        if beta != 0:
            per_token = surrogate + beta * torch.where(_valid(mask), per_token_kl, 0)
    stats = {"kl": kl, "clip_fraction": clip_fraction,
             "policy_loss": agg(surrogate, mask).detach()}
    return agg(per_token, mask), stats


@torch.no_grad()
def token_covariance(logp: Tensor, advantages: Tensor, mask: Tensor) -> Tensor:
    """Per-token covariance term of Cui et al.: ``(A_i - mean A) * (logp_i - mean logp)``.

    (B, T) [, (B,)] -> (B, T), no gradient. Both means are over the valid tokens of this batch
    (so the sequence advantage is weighted by length, as in verl); padding gets 0.
    """
    m = _valid(mask)
    lp = logp.detach()
    adv = _token_adv(advantages.detach(), lp)
    centred = (adv - token_mean(adv, m)) * (lp - token_mean(lp, m))
    return torch.where(m, centred, 0)


@torch.no_grad()
def kl_cov_select(logp: Tensor, advantages: Tensor, mask: Tensor, k_frac: float = 2e-3) -> Tensor:
    """KL-Cov selection: the top ``max(1, int(N_valid * k_frac))`` valid tokens by covariance.

    (B, T) -> bool (B, T); none when N_valid == 0. Ties follow ``torch.topk``.
    """
    m = _valid(mask)
    selected = torch.zeros_like(m)
    n_valid = int(m.sum())
    if n_valid == 0:
        return selected
    k = max(1, int(n_valid * k_frac))
    cov = token_covariance(logp, advantages, m)[m]
    flat_idx = m.reshape(-1).nonzero().squeeze(1)[torch.topk(cov, k).indices]
    selected.view(-1)[flat_idx] = True
    return selected


@torch.no_grad()
def clip_cov_select(logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor,
                    eps_low: float = 0.2, eps_high: float = 0.2, clip_ratio: float = 2e-4,
                    cov_lb: float = 1.0, cov_ub: float = 5.0,
                    generator: torch.Generator | None = None) -> Tensor:
    """Clip-Cov selection: ``max(int(clip_ratio * N_valid), 1)`` tokens drawn uniformly at random
    (without replacement; all of them if fewer) from the candidates. (B, T) -> bool (B, T).

    Candidates: valid tokens not already clipped by PPO (L2 > L1, see :func:`clipped_surrogate`:
    they have no gradient anyway) with ``cov_lb < cov < cov_ub`` (strict, as verl). The draw is
    ``torch.randperm`` over the candidates in row-major order on ``generator``'s device (CPU by
    default), so a seeded CPU generator picks the same tokens on every device.
    """
    m = _valid(mask)
    _, l1, l2 = _ppo_terms(logp.detach(), old_logp, advantages.detach(), eps_low, eps_high)
    cov = token_covariance(logp, advantages, m)
    cand = m & ~(l2 > l1) & (cov > cov_lb) & (cov < cov_ub)
    cand_idx = cand.reshape(-1).nonzero().squeeze(1)
    n_pick = min(max(int(clip_ratio * int(m.sum())), 1), cand_idx.numel())
    selected = torch.zeros_like(m)
    if n_pick:
        device = generator.device if generator is not None else "cpu"
        perm = torch.randperm(cand_idx.numel(), generator=generator, device=device)
        selected.view(-1)[cand_idx[perm[:n_pick].to(cand_idx.device)]] = True
    return selected


COV_METHODS = {"kl_cov": kl_cov_select, "clip_cov": clip_cov_select}


def select_cov_tokens(method: str, logp: Tensor, old_logp: Tensor, advantages: Tensor,
                      mask: Tensor, **kwargs) -> Tensor:
    """Dispatch to :func:`kl_cov_select` or :func:`clip_cov_select` by name -> bool (B, T).

    For ``scope="mini_batch"``: pass the whole mini-batch, then slice the result per
    micro-batch into the loss's ``selected=``. ``kwargs`` go to the chosen selector.
    """
    if method == "kl_cov":
        return kl_cov_select(logp, advantages, mask, **kwargs)
    if method == "clip_cov":
        return clip_cov_select(logp, old_logp, advantages, mask, **kwargs)
    raise ValueError(f"unknown covariance method {method!r}; valid: {sorted(COV_METHODS)}")


def clip_cov_loss(logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor,
                  eps_low: float = 0.2, eps_high: float = 0.2, clip_ratio: float = 2e-4,
                  cov_lb: float = 1.0, cov_ub: float = 5.0,
                  generator: torch.Generator | None = None,
                  selected: Tensor | None = None) -> tuple[Tensor, dict[str, Tensor]]:
    """Clip-Cov per-token loss (B, T): ``max(L1, L2)`` (the clipped surrogate), except 0 on the
    selected tokens (verl multiplies them by ``corr = 0``: value 0 and no gradient, but they
    still count in the token-mean denominator). Aggregate with :func:`token_mean`.

    Selection: :func:`clip_cov_select` on this batch, or a precomputed bool (B, T) ``selected``.
    Stats: ``clip_fraction`` (PPO, as :func:`clipped_surrogate`), ``selected_fraction``
    (selected / N_valid: verl logs this as Clip-Cov's ``pg_clipfrac``), ``n_selected``,
    ``grad_ratio`` (the share of the policy gradient Clip-Cov cuts, measured on the
    per-token weights of ``grad log pi``: ``||A r on the selected tokens|| / ||A r on every
    token with a gradient||``, :func:`_norm_ratio`).
    """
    if selected is None:
        selected = clip_cov_select(logp, old_logp, advantages, mask, eps_low, eps_high,
                                   clip_ratio, cov_lb, cov_ub, generator)
    m = _valid(mask)
    per_token, clip_fraction = clipped_surrogate(logp, old_logp, advantages, m, eps_low, eps_high)
    selected = selected & m
    # d(loss)/d(logp) per token of the unclipped surrogate: -A r where PPO leaves a gradient
    _, l1, l2 = _ppo_terms(logp.detach(), old_logp, advantages.detach(), eps_low, eps_high)
    per_token_full = torch.where(m & ~(l2 > l1), l1, 0)
    per_token = per_token * (~selected).to(per_token.dtype)
    stats = {"clip_fraction": clip_fraction,
             "selected_fraction": token_mean(selected.float(), m),
             "n_selected": selected.sum(),
             "grad_ratio": _norm_ratio(torch.where(selected, per_token_full.detach(), 0),
                                       per_token_full.detach(), m)}
    return per_token, stats


def kl_cov_loss(logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor,
                k_frac: float = 2e-3, kl_coef: float = 1.0,
                selected: Tensor | None = None) -> tuple[Tensor, dict[str, Tensor]]:
    """KL-Cov per-token loss (B, T): ``-A r`` on every valid token (no PPO clip), plus
    ``kl_coef * |logp - old_logp|`` on the selected ones (Cui et al. Eq. 14 as verl implements
    it). Aggregate with :func:`token_mean`.

    Selection: :func:`kl_cov_select` on this batch, or a precomputed bool (B, T) ``selected``.
    Where ``logp == old_logp`` exactly, the penalty and its gradient (``sign(0) = 0``) vanish and
    KL-Cov equals plain ``-A r``. Where they differ at all, however little, the gradient is the
    full ``kl_coef * sign(logp - old_logp) * grad logp``. In verl before v0.6.0 and in
    EasyR1 / R-Zero, ``old_logp`` always comes from a separate no-grad forward
    (``compute_log_prob``, experience micro-batches, packed without padding) whose bf16 rounding
    can differ from the update's, so the term can act even at one on-policy step per rollout
    batch
    (docs/experiments.md, "KL-Cov on-policy"; config ``cov_old_logprobs``).
    Stats: ``abs_log_ratio`` (mean |logp - old_logp| over valid tokens: verl's ``ppo_kl``),
    ``selected_fraction``, ``n_selected``, ``penalty`` (the KL term's share of the token-mean
    loss: ``sum_selected kl_coef |logp - old_logp| / N_valid``) and ``n_active`` (selected
    tokens with ``logp != old_logp``, i.e. where the term has a gradient; 0 on-policy) and
    ``differ_fraction`` (share of the valid tokens with ``logp != old_logp``, selected or not),
    ``active_fraction`` (``n_active / n_selected``: the share of the selected tokens whose term
    acts; 0 when none is selected) and ``grad_ratio`` (the penalty's gradient against the policy
    term's, on the per-token weights of ``grad log pi``: ``||kl_coef sign(logp - old) on the
    selected tokens|| / ||A r on every valid token||``, :func:`_norm_ratio`; 0 where it does
    not act).
    """
    if selected is None:
        selected = kl_cov_select(logp, advantages, mask, k_frac)
    m = _valid(mask)
    log_ratio = logp - old_logp
    per_token = -_token_adv(advantages, logp) * torch.exp(log_ratio)
    selected = selected & m
    penalty = kl_coef * log_ratio.abs()
    per_token = torch.where(selected, per_token + penalty, per_token)
    stats = {"abs_log_ratio": token_mean(log_ratio.detach().abs(), m),
             "selected_fraction": token_mean(selected.float(), m),
             "n_selected": selected.sum(),
             "penalty": token_mean(torch.where(selected, penalty.detach(), 0), m),
             "n_active": (selected & (log_ratio.detach() != 0)).sum(),
             "differ_fraction": token_mean((log_ratio.detach() != 0).float(), m)}
    stats["active_fraction"] = stats["n_active"] / stats["n_selected"].clamp(min=1)
    pg_weight = torch.where(m, -_token_adv(advantages, logp) * torch.exp(log_ratio), 0).detach()
    penalty_weight = torch.where(selected, kl_coef * torch.sign(log_ratio.detach()), 0)
    stats["grad_ratio"] = _norm_ratio(penalty_weight, pg_weight, m)
    return torch.where(m, per_token, 0), stats


@torch.no_grad()
def _norm_ratio(part: Tensor, whole: Tensor, mask: Tensor) -> Tensor:
    """``||part|| / ||whole||`` (L2 over the valid tokens of two (B, T) tensors of per-token
    weights ``w`` of a loss ``sum w * logp`` differentiated at fixed ``w``, i.e. d(loss)/d(logp));
    0 when ``whole`` is 0. Both losses go through the same ``grad log pi`` and the same
    normaliser, so this is the ratio of their gradients with respect to the token log-probs: a
    per-step measure that costs no backward pass (the parameter-space norms would need one
    each, and differ from it by how ``grad log pi`` of the tokens aligns).

    >>> m = torch.ones(1, 2, dtype=torch.bool)
    >>> float(_norm_ratio(torch.tensor([[0.0, 3.0]]), torch.tensor([[4.0, 0.0]]), m))
    0.75
    """
    m = _valid(mask)
    num = torch.where(m, part.float(), 0).norm()
    den = torch.where(m, whole.float(), 0).norm()
    return torch.where(den > 0, num / den.clamp(min=torch.finfo(torch.float32).tiny),
                       den.new_zeros(()))


def _t_chunks(logits: Tensor, chunk_tokens: int):
    """Yield (t0, t1) slices over T holding about ``chunk_tokens`` positions (B rows each)."""
    step = max(1, chunk_tokens // max(1, logits.shape[0]))
    for t0 in range(0, logits.shape[1], step):
        yield t0, min(t0 + step, logits.shape[1])


def _work_dtype(dtype: torch.dtype, upcast: bool) -> torch.dtype:
    return torch.promote_types(dtype, torch.float32) if upcast else dtype


def entropy_from_logits(logits: Tensor, mask: Tensor, temperature: float = 1.0,
                        chunk_tokens: int = 1024, upcast: bool = True) -> Tensor:
    """Mean per-token entropy (nats) of ``softmax(logits / temperature)`` over valid tokens.

    ``logits`` (B, T, V), ``mask`` (B, T) -> scalar (0 without valid tokens). Per token,
    ``H = logsumexp(l) - sum(softmax(l) * l)``, computed over chunks of ~``chunk_tokens``
    positions along T (in float32 when ``upcast``), so the extra memory is a few
    ``chunk_tokens x V`` buffers even at V = 151,936. Differentiable; as a metric, call it under
    ``torch.no_grad()`` (autograd keeps every chunk's buffers otherwise).
    """
    dtype = _work_dtype(logits.dtype, upcast)
    parts = [logits.new_zeros((logits.shape[0], 0), dtype=dtype)]
    for t0, t1 in _t_chunks(logits, chunk_tokens):
        chunk = logits[:, t0:t1].to(dtype) / temperature
        lse = torch.logsumexp(chunk, dim=-1)
        parts.append(lse - (torch.softmax(chunk, dim=-1) * chunk).sum(-1))
    return token_mean(torch.cat(parts, dim=1), mask)


def selective_log_softmax(logits: Tensor, ids: Tensor, temperature: float = 1.0,
                          chunk_tokens: int = 1024, upcast: bool = True) -> Tensor:
    """Log-probabilities of the taken tokens over the FULL vocabulary.

    ``logits`` (B, T, V), ``ids`` (B, T) int -> (B, T): ``l[ids] / temperature - logsumexp(l /
    temperature)``, chunked along T like :func:`entropy_from_logits`, never materialising a
    (B, T, V) log-softmax. The paper's update uses these even when sampling was masked (vocabulary
    dropout masks sampling only). Result dtype: float32 at least when ``upcast`` (the default).
    """
    dtype = _work_dtype(logits.dtype, upcast)
    parts = [logits.new_zeros((logits.shape[0], 0), dtype=dtype)]
    for t0, t1 in _t_chunks(logits, chunk_tokens):
        chunk = logits[:, t0:t1]
        taken = chunk.gather(-1, ids[:, t0:t1].unsqueeze(-1)).squeeze(-1).to(dtype)
        lse = torch.logsumexp(chunk.to(dtype) / temperature, dim=-1)
        parts.append(taken / temperature - lse)
    return torch.cat(parts, dim=1)
