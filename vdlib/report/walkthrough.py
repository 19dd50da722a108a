"""The method's pieces on small inputs, as tables and figures: what
``notebooks/07_method_walkthrough.ipynb`` shows, step by step in the order of the paper's
Algorithm 1 (App. "Algorithm").

Each function calls the modules that hold the method (:mod:`vdlib.method.vocab_dropout`,
:mod:`vdlib.method.rewards`, :mod:`vdlib.method.bleu_penalty`, :mod:`vdlib.method.grpo`,
:mod:`vdlib.method.curriculum`, :mod:`vdlib.metrics`) and lays out what they return. The only
numbers computed here are views of one next-token distribution (:func:`mask_effect`: its entropy,
its perplexity ``exp(H)`` and its top tokens, before and after a mask; not the paper's "effective
vocabulary", the distinct tokens used over many generations, which
:mod:`vdlib.report.mask_regimes` measures), a synthetic toy batch for GRPO
(:func:`toy_grpo_batch`) and the loss of each variant on it as the loop's trainer adds it up
(:func:`grpo_loss_frame`), and the alpha of each mask phase and iteration
(:func:`phase_switch_frame`, :func:`schedule_frame`).

>>> e = mask_effect(torch.log(torch.tensor([0.5, 0.25, 0.25])), torch.tensor([False, True, True]))
>>> round(e.dropped_mass, 3), round(e.perplexity_masked, 3), e.top_masked
(0.5, 2.0, [(1, 0.5), (2, 0.5)])
>>> curve = reward_curve(0.3, 0.7, points=11)
>>> curve["reward"].round(2).tolist()
[0.0, 0.0, 0.0, 0.3, 0.4, 0.5, 0.4, 0.3, 0.0, 0.0, 0.0]
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
import torch

from vdlib.config.mask_settings import mask_schedule
from vdlib.method import grpo
from vdlib.method.bleu_penalty import BleuClusters
from vdlib.method.curriculum import filter_curriculum, in_window
from vdlib.method.mask_schedule import PHASE_SETTINGS, alpha_at, phase_alphas
from vdlib.method.rewards import proposer_reward
from vdlib.method.vocab_dropout import VocabDropout, apply_mask
from vdlib.report.drawing import figure_style, new_figure
from vdlib.report.plots import PlotResult, save_figure

__all__ = ["MaskEffect", "mask_effect", "next_token_logits", "mask_effect_frame",
           "mask_effect_figure", "fresh_masks_frame", "completion_logprobs", "samples_frame",
           "logprob_frame", "reward_curve",
           "reward_figure", "bleu_figure", "toy_grpo_batch", "grpo_token_frame",
           "covariance_figure", "filter_frame", "similarity_figure", "grpo_loss_frame",
           "phase_switch_frame", "schedule_frame"]

DROPPED, KEPT, MASKED = "#DD8452", "#787878", "#4C72B0"  # the paper's Fig. 1: orange = masked


def _result(fig: Any, out_dir: str | os.PathLike | None, name: str,
            data: pd.DataFrame) -> PlotResult:
    return PlotResult(fig, save_figure(fig, out_dir, name) if out_dir is not None else [], data)


# ----------------------------------------------------------------------------- 1. the mask


@dataclass(frozen=True)
class MaskEffect:
    """What one mask does to one next-token distribution (:func:`mask_effect`)."""

    entropy: float  #: nats, of softmax(logits / temperature)
    entropy_masked: float  #: nats, of the distribution renormalised over the allowed ids
    #: exp(entropy), the perplexity: how many equally likely tokens this one distribution
    #: amounts to (not the paper's effective vocabulary: distinct tokens over many generations)
    perplexity: float
    perplexity_masked: float
    dropped_mass: float  #: probability the unmasked distribution put on the dropped ids
    top: list[tuple[int, float]]  #: the k most probable (id, probability) without the mask
    top_masked: list[tuple[int, float]]  #: the same under the mask (renormalised)


def mask_effect(logits: torch.Tensor, allowed: torch.Tensor, k: int = 10,
                temperature: float = 1.0) -> MaskEffect:
    """Sec. "Vocabulary dropout", Eq. 4, on one distribution: ``logits`` (V,), ``allowed`` bool
    (V,) (:meth:`VocabDropout.sample`) -> entropy, perplexity and top-``k`` ids before
    and after the dropped logits are set to -inf (:func:`vdlib.method.vocab_dropout.apply_mask`)."""
    if logits.dim() != 1 or allowed.shape != logits.shape:
        raise ValueError(f"logits (V,) and allowed (V,) expected, got {tuple(logits.shape)} "
                         f"and {tuple(allowed.shape)}")
    if not bool(allowed.any()):
        raise ValueError("the mask allows no id")
    scaled = logits.detach().float().cpu() / temperature
    allowed = allowed.detach().cpu().bool()
    p = torch.softmax(scaled, dim=-1)
    q = torch.softmax(apply_mask(scaled.clone().unsqueeze(0), ~allowed)[0], dim=-1)
    h, h_masked = (float(torch.special.entr(x).sum()) for x in (p, q))

    def top(x: torch.Tensor) -> list[tuple[int, float]]:  # never a dropped id (probability 0)
        values, ids = torch.topk(x, min(k, int((x > 0).sum())))
        return [(int(i), float(v)) for i, v in zip(ids, values, strict=True)]

    return MaskEffect(h, h_masked, math.exp(h), math.exp(h_masked), float(p[~allowed].sum()),
                      top(p), top(q))


@torch.no_grad()
def next_token_logits(model: Any, tokenizer: Any, text: str) -> torch.Tensor:
    """The model's logits (V,) float32 for the token after ``text`` (tokenised as is)."""
    enc = tokenizer(text, return_tensors="pt", add_special_tokens=False).to(model.device)
    return model(**enc).logits[0, -1].float().cpu()


def _token(tokenizer: Any, i: int) -> str:
    return repr(tokenizer.decode([i]))


def mask_effect_frame(effect: MaskEffect, allowed: torch.Tensor, tokenizer: Any) -> pd.DataFrame:
    """The top tokens side by side: without the mask (and whether the mask drops each), then
    under it (rows as many as the shorter list)."""
    return pd.DataFrame([{"rank": rank, "token": _token(tokenizer, i), "p": round(p, 4),
                          "dropped": not bool(allowed[i]),
                          "token under the mask": _token(tokenizer, j),
                          "p under the mask": round(q, 4)}
                         for rank, ((i, p), (j, q)) in enumerate(
                             zip(effect.top, effect.top_masked, strict=False), 1)])


def mask_effect_figure(effect: MaskEffect, allowed: torch.Tensor, tokenizer: Any,
                       out_dir: str | os.PathLike | None = None,
                       name: str = "mask_effect") -> PlotResult:
    """Two bar panels: the top tokens without the mask (dropped ones orange, as in the paper's
    Fig. 1), and the top tokens of the renormalised distribution under it."""
    data = mask_effect_frame(effect, allowed, tokenizer)
    with figure_style():
        fig, axes = new_figure(1, 2, w=4.6, h=3.4)
        left, right = axes[0]
        left.barh(data["token"], data["p"], color=[DROPPED if d else KEPT for d in data["dropped"]])
        left.set_title(f"no mask: H = {effect.entropy:.2f} nats, exp(H) = "
                       f"{effect.perplexity:.0f}")
        right.barh(data["token under the mask"], data["p under the mask"], color=MASKED)
        right.set_title(f"mask: H = {effect.entropy_masked:.2f}, exp(H) = "
                        f"{effect.perplexity_masked:.0f}")
        for ax in (left, right):
            ax.invert_yaxis()
            ax.set_xlabel("next-token probability")
        left.text(0.98, 0.02, f"orange: dropped ({effect.dropped_mass:.0%} of the mass)",
                  transform=left.transAxes, ha="right", va="bottom", fontsize=8, color=DROPPED)
    return _result(fig, out_dir, name, data)


def fresh_masks_frame(vd: VocabDropout, seeds: Sequence[int], logits: torch.Tensor,
                      tokenizer: Any) -> pd.DataFrame:
    """One row per batch mask (Algorithm 1: "fresh mask per batch"): its seed, the ids it
    allows, the kept fraction of the non-protected ids, its overlap with the first mask
    (Jaccard, over the drawn ids) and what it leaves of the distribution ``logits``."""
    first = vd.sample(seeds[0])[: vd.n_draw]
    rows = []
    for s in seeds:
        allowed = vd.sample(s)
        drawn = allowed[: vd.n_draw]
        effect = mask_effect(logits, allowed, k=1)
        rows.append({"mask seed": s, "allowed ids": int(allowed.sum()),
                     "kept fraction": round(vd.kept_fraction(s), 4),
                     "overlap with the first": round(float((drawn & first).sum())
                                                     / float((drawn | first).sum()), 4),
                     "dropped mass": round(effect.dropped_mass, 4),
                     "exp(H) under the mask": round(effect.perplexity_masked, 1),
                     "top token under the mask": _token(tokenizer, effect.top_masked[0][0])})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- 2. sampling


@torch.no_grad()
def completion_logprobs(model: Any, tokenizer: Any, prompt: str, token_ids: Sequence[int],
                        allowed: torch.Tensor | None = None) -> torch.Tensor:
    """Log-probabilities (T,) of a completion's ``token_ids`` after ``prompt``: over the full
    vocabulary (what the GRPO update uses, :func:`vdlib.method.grpo.selective_log_softmax`), or over
    the ids ``allowed`` (the distribution the masked sampler drew from)."""
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([prompt_ids + list(token_ids)], device=model.device)
    logits = model(input_ids=ids).logits[:, len(prompt_ids) - 1:-1].float().cpu()
    if allowed is not None:
        logits = apply_mask(logits, ~allowed.cpu())
    return grpo.selective_log_softmax(logits, ids[:, len(prompt_ids):].cpu())[0]


def samples_frame(samples: Sequence[Any], vd: VocabDropout) -> pd.DataFrame:
    """Each sample's text, token count, mask seed and the dropped ids it holds
    (:meth:`VocabDropout.dropped_ids`: none, when the mask was applied)."""
    return pd.DataFrame([{"text": s.text, "tokens": len(s.token_ids), "mask seed": s.mask_seed,
                          "dropped ids sampled": len(vd.dropped_ids(s.token_ids, s.mask_seed))}
                         for s in samples])


def logprob_frame(model: Any, tokenizer: Any, prompt: str, token_ids: Sequence[int],
                  allowed: torch.Tensor) -> pd.DataFrame:
    """Each sampled token with its log-probability over the full vocabulary (the update's) and
    under the mask ``allowed`` (the sampler's): :func:`completion_logprobs` twice."""
    full = completion_logprobs(model, tokenizer, prompt, token_ids)
    masked = completion_logprobs(model, tokenizer, prompt, token_ids, allowed)
    return pd.DataFrame({"token": [_token(tokenizer, t) for t in token_ids],
                         "log p (full vocabulary)": full.numpy(),
                         "log p (under the mask)": masked.numpy()})


# ----------------------------------------------------------------------------- 3. reward


def reward_curve(tau_min: float, tau_max: float, m: int | None = None, points: int = 201,
                 variant: str = "paper") -> pd.DataFrame:
    """``acc`` on a grid over [0, 1] (and the values k / ``m`` that M solver answers can give)
    with :func:`vdlib.method.rewards.proposer_reward` and whether acc is inside the window."""
    accs = set(np.linspace(0.0, 1.0, points).round(6).tolist())
    if m:
        accs |= {round(k / m, 6) for k in range(m + 1)}
    acc = sorted(accs)
    return pd.DataFrame({"acc": acc,
                         "reward": proposer_reward(acc, tau_min, tau_max, variant=variant),
                         "in_window": [in_window(a, tau_min, tau_max) for a in acc],
                         "reachable": [bool(m) and abs(a * m - round(a * m)) < 1e-6
                                       for a in acc]})


def reward_figure(curve: pd.DataFrame, tau_min: float, tau_max: float,
                  marks: Mapping[str, float | None] | None = None,
                  out_dir: str | os.PathLike | None = None,
                  name: str = "proposer_reward") -> PlotResult:
    """The proposer reward against acc with the window [tau_min, tau_max] shaded, the values
    M answers can reach as dots and ``marks`` (label -> acc, e.g. the scored questions)."""
    with figure_style():
        fig, axes = new_figure(1, 1, w=5.2, h=3.2)
        ax = axes[0][0]
        ax.axvspan(tau_min, tau_max, color=MASKED, alpha=0.12,
                   label=f"window [{tau_min}, {tau_max}]")
        ax.plot(curve["acc"], curve["reward"], color=MASKED, lw=1.8, label="r_P(acc)")
        reach = curve[curve["reachable"]]
        ax.plot(reach["acc"], reach["reward"], "o", color=MASKED, ms=4)
        placed: list[tuple[float, float]] = []
        for label, acc in (marks or {}).items():
            if acc is None:
                continue
            r = float(curve.loc[(curve["acc"] - acc).abs().idxmin(), "reward"])
            ax.plot([acc], [r], "*", color=DROPPED, ms=11)
            lift = sum(abs(a - acc) < 0.15 and abs(b - r) < 0.05 for a, b in placed)
            ax.annotate(label, (acc, r), textcoords="offset points", xytext=(4, 6 + 11 * lift),
                        fontsize=8)
            placed.append((acc, r))
        ax.set_xlabel("acc (solver answers agreeing with the majority)")
        ax.set_ylabel("proposer reward")
        ax.legend(loc="upper right", frameon=False, fontsize=8)
    return _result(fig, out_dir, name, curve)


# ----------------------------------------------------------------------------- 4. penalty


def _heatmap(ax: Any, matrix: np.ndarray, labels: Sequence[str], title: str) -> None:
    im = ax.imshow(matrix, vmin=0, vmax=1, cmap="viridis")
    ax.grid(False)
    ax.set_xticks(range(len(labels)), labels, rotation=90, fontsize=8)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    for (i, j), v in np.ndenumerate(matrix):
        ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7,
                color="white" if v < 0.5 else "black")
    ax.set_title(title)
    ax.figure.colorbar(im, ax=ax, shrink=0.8)


def bleu_figure(clusters: BleuClusters, threshold: float,
                out_dir: str | os.PathLike | None = None,
                name: str = "bleu_distance") -> PlotResult:
    """The BLEU-distance matrix as a heatmap, each question labelled ``q<i> (cluster c,
    penalty p)``; the data: one row per question pair."""
    labels = [f"q{i} (c{c}, {p:.2f})" for i, (c, p) in
              enumerate(zip(clusters.labels.tolist(), clusters.penalties, strict=True))]
    with figure_style():
        fig, axes = new_figure(1, 1, w=6.0, h=5.0)
        _heatmap(axes[0][0], clusters.distance, labels,
                 f"1 - BLEU; clusters merge below {threshold}")
    n = len(labels)
    data = pd.DataFrame([{"i": i, "j": j, "distance": float(clusters.distance[i, j]),
                          "same_cluster": bool(clusters.labels[i] == clusters.labels[j])}
                         for i in range(n) for j in range(n)])
    return _result(fig, out_dir, name, data)


def similarity_figure(matrices: Mapping[str, np.ndarray],
                      out_dir: str | os.PathLike | None = None,
                      name: str = "similarity") -> PlotResult:
    """One heatmap per named (n, n) matrix in [0, 1] (e.g. the cosine kernels whose
    eigenvalues give the Vendi score), side by side."""
    with figure_style():
        fig, axes = new_figure(1, len(matrices), w=4.4, h=4.0)
        for ax, (title, m) in zip(axes[0], matrices.items(), strict=True):
            _heatmap(ax, np.clip(np.asarray(m, dtype=float), 0, 1),
                     [f"q{i}" for i in range(len(m))], title)
    data = pd.DataFrame([{"matrix": t, "i": i, "j": j, "value": float(v)}
                         for t, m in matrices.items() for (i, j), v in np.ndenumerate(m)])
    return _result(fig, out_dir, name, data)


# ----------------------------------------------------------------------------- 5. GRPO


def toy_grpo_batch(lengths: Sequence[int], seed: int = 0, drift: float = 0.4,
                   low: float = -5.0) -> dict[str, torch.Tensor]:
    """A synthetic batch of ``len(lengths)`` completions (B, T = max(lengths)): ``old_logp``
    (the sampling policy's log-probs of its tokens, uniform in [``low``, 0]), ``logp`` (the
    policy after some updates: ``old_logp`` + ``drift`` x noise), ``ref_logp`` (the frozen
    reference: half the drift) and ``mask`` (the first ``lengths[i]`` positions of row i)."""
    gen = torch.Generator().manual_seed(seed)
    b, t = len(lengths), max(lengths)
    old = low * torch.rand(b, t, generator=gen)
    return {"old_logp": old,
            "logp": (old + drift * torch.randn(b, t, generator=gen)).clamp(max=0.0),
            "ref_logp": (old + drift / 2 * torch.randn(b, t, generator=gen)).clamp(max=0.0),
            "mask": torch.arange(t) < torch.tensor(list(lengths)).unsqueeze(1)}


def grpo_token_frame(batch: Mapping[str, torch.Tensor], advantages: torch.Tensor, g: Any,
                     seed: int = 0) -> tuple[pd.DataFrame, dict[str, float]]:
    """Every valid token of ``batch`` (:func:`toy_grpo_batch`) with its advantage, ratio,
    whether PPO clips it, its clipped-surrogate loss, its k3 KL, its covariance term and
    whether KL-Cov / Clip-Cov select it (``g``: a :class:`vdlib.config.experiment.GRPOConfig`: clip
    epsilons, KL beta, KL-Cov k and coefficient, Clip-Cov ratio and bounds); and the
    aggregated losses of the three variants (:mod:`vdlib.method.grpo`)."""
    lp, old, ref, mask = batch["logp"], batch["old_logp"], batch["ref_logp"], batch["mask"]
    eps = {"eps_low": g.clip_eps_low, "eps_high": g.clip_eps_high}
    surrogate, _ = grpo.clipped_surrogate(lp, old, advantages, mask, **eps)
    loss, stats = grpo.grpo_loss(lp, old, ref, advantages, mask, beta=g.kl_beta, **eps)
    kl_sel = grpo.kl_cov_select(lp, advantages, mask, g.kl_cov_k_frac)
    clip_sel = grpo.clip_cov_select(lp, old, advantages, mask, clip_ratio=g.clip_cov_ratio,
                                    cov_lb=g.clip_cov_lb, cov_ub=g.clip_cov_ub,
                                    generator=torch.Generator().manual_seed(seed), **eps)
    kl_tok, kl_stats = grpo.kl_cov_loss(lp, old, advantages, mask, g.kl_cov_k_frac,
                                        g.kl_cov_beta, selected=kl_sel)
    clip_tok, clip_stats = grpo.clip_cov_loss(lp, old, advantages, mask, selected=clip_sel,
                                              **eps)
    cov = grpo.token_covariance(lp, advantages, mask)
    k3 = grpo.k3_kl(lp, ref)
    ratio = torch.exp(lp - old)
    adv = advantages.to(lp.dtype).unsqueeze(1).expand_as(lp)  # as grpo casts them
    clipped = surrogate > -adv * ratio  # the clipped branch is the larger loss (no gradient)
    rows = [{"seq": i, "pos": j, "advantage": float(adv[i, j]), "ratio": float(ratio[i, j]),
             "clipped": bool(clipped[i, j]), "surrogate": float(surrogate[i, j]),
             "k3_kl": float(k3[i, j]), "covariance": float(cov[i, j]),
             "kl_cov": bool(kl_sel[i, j]), "clip_cov": bool(clip_sel[i, j])}
            for i, j in mask.nonzero().tolist()]
    kl_term = g.kl_beta * float(stats["kl"])  # beta x token-mean k3: each variant adds it
    summary = {"grpo_loss": float(loss), "kl": float(stats["kl"]), "kl_term": kl_term,
               "clip_fraction": float(stats["clip_fraction"]),
               "grpo_policy": float(stats["policy_loss"]),
               "kl_cov_policy": float(grpo.token_mean(kl_tok, mask) - kl_stats["penalty"]),
               "kl_cov_penalty": float(kl_stats["penalty"]),
               "kl_cov_loss": float(grpo.token_mean(kl_tok, mask)) + kl_term,
               "kl_cov_selected": int(kl_stats["n_selected"]),
               "clip_cov_policy": float(grpo.token_mean(clip_tok, mask)),
               "clip_cov_loss": float(grpo.token_mean(clip_tok, mask)) + kl_term,
               "clip_cov_selected": int(clip_stats["n_selected"]),
               "tokens": int(mask.sum())}
    return pd.DataFrame(rows), summary


def grpo_loss_frame(summary: Mapping[str, float]) -> pd.DataFrame:
    """The three loss variants of :func:`grpo_token_frame`'s ``summary`` side by side, each as
    the loop's trainer adds it up (:class:`vdlib.loop.trainer.MaskedGRPOTrainer`: TRL's GRPO
    loss, or ``_cov_loss``; token mean over the batch, TRL ``loss_type="dapo"``): the policy term
    (on KL-Cov's selected tokens without their penalty), the covariance method's own term, and
    beta x k3 KL to the reference, which every variant adds. KL-Cov's penalty is
    ``|log pi - log pi_old|`` (the old policy, not the reference) and its policy term is
    ``-A ratio`` without PPO's clip; KL-Cov and Clip-Cov are the paper's entropy-control
    baselines, applied to the proposer only (App. B.4), not part of the method."""
    s = summary
    return pd.DataFrame([
        {"variant": "GRPO", "role": "the method's update (proposer and solver)",
         "policy term": "clipped surrogate (PPO clip)", "policy": s["grpo_policy"],
         "covariance term": 0.0, "beta x k3 to pi_ref": s["kl_term"], "total": s["grpo_loss"]},
        {"variant": "KL-Cov", "role": "baseline, proposer only (App. B.4)",
         "policy term": "-A ratio, no clip; + kl_coef |log pi - log pi_old| on selected",
         "policy": s["kl_cov_policy"], "covariance term": s["kl_cov_penalty"],
         "beta x k3 to pi_ref": s["kl_term"], "total": s["kl_cov_loss"]},
        {"variant": "Clip-Cov", "role": "baseline, proposer only (App. B.4)",
         "policy term": "clipped surrogate; selected tokens' term set to 0 (no gradient)",
         "policy": s["clip_cov_policy"], "covariance term": 0.0,
         "beta x k3 to pi_ref": s["kl_term"], "total": s["clip_cov_loss"]}])


def covariance_figure(tokens: pd.DataFrame, out_dir: str | os.PathLike | None = None,
                      name: str = "covariance") -> PlotResult:
    """The per-token covariance term (sequence x position) with the tokens KL-Cov (x) and
    Clip-Cov (o) select marked; padding blank."""
    grid = tokens.pivot(index="seq", columns="pos", values="covariance")
    with figure_style():
        fig, axes = new_figure(1, 1, w=6.0, h=3.4)
        ax = axes[0][0]
        lim = float(np.nanmax(np.abs(grid.to_numpy()))) or 1.0
        im = ax.imshow(grid.to_numpy(), cmap="coolwarm", vmin=-lim, vmax=lim, aspect="auto")
        ax.grid(False)
        kl, clip = tokens[tokens["kl_cov"]], tokens[tokens["clip_cov"]]
        ax.scatter(kl["pos"], kl["seq"], marker="x", s=90, c="black", label="KL-Cov")
        ax.scatter(clip["pos"], clip["seq"], marker="o", s=120, facecolors="none",
                   edgecolors="black", label="Clip-Cov")
        ax.set_xlabel("token position")
        ax.set_ylabel("completion")
        ax.set_title("(A - mean A)(log p - mean log p) per token")
        ax.legend(loc="upper right", fontsize=8, frameon=True)
        fig.colorbar(im, ax=ax, shrink=0.8)
    return _result(fig, out_dir, name, tokens)


# ----------------------------------------------------------------------------- 6. filter


def filter_frame(questions: Sequence[dict[str, Any]], tau_min: float, tau_max: float
                 ) -> pd.DataFrame:
    """Each scored question (``question``, ``valid``, ``acc``, ``answer``: the proposer's,
    ``majority``), whether :func:`vdlib.method.curriculum.filter_curriculum` keeps it and the
    solver's target under the paper's rule (the proposer's answer) and R-Zero's (the majority)."""
    kept = {t: {q["question"]: q["answer"] for q in filter_curriculum(list(questions), tau_min,
                                                                      tau_max, target=t)}
            for t in ("proposer", "majority")}
    return pd.DataFrame([{"question": q["question"], "acc": q.get("acc"),
                          "proposer's answer": q.get("answer"), "majority": q.get("majority"),
                          "kept": q["question"] in kept["proposer"],
                          "target (paper)": kept["proposer"].get(q["question"]),
                          "target (R-Zero)": kept["majority"].get(q["question"])}
                         for q in questions])


# ----------------------------------------------------------------------------- the loop's alphas


def phase_switch_frame(cfg: Any, iteration: int = 1) -> pd.DataFrame:
    """One row per ``vocab_dropout.phases`` setting (:data:`PHASE_SETTINGS`): the alpha of the
    proposer's GRPO rollouts (mask phase ``train``) and of its curriculum generation (``gen``) at
    ``iteration``, as the loop takes them from :func:`vdlib.method.mask_schedule.phase_alphas`
    (1.0 = no mask), and the solver's, which no setting masks (Algorithm 1)."""
    schedule = mask_schedule(cfg)
    rows = []
    for phases in PHASE_SETTINGS:
        a = phase_alphas(replace(schedule, phases=phases), iteration)
        rows.append({"vocab_dropout.phases": phases, "proposer GRPO rollouts (train)": a["train"],
                     "curriculum generation (gen)": a["gen"], "solver GRPO": 1.0})
    return pd.DataFrame(rows)


def schedule_frame(alpha: float, iterations: int, alpha_final: float = 1.0,
                   adaptive: Sequence[Any] = ()) -> pd.DataFrame:
    """Alpha per iteration 1..``iterations`` under the fixed schedule and the linear anneal
    (:func:`vdlib.method.mask_schedule.alpha_at`), and, when given, an adaptive trajectory
    (``adaptive``: decisions with ``.iteration``, ``.alpha`` and ``.rule``, e.g.
    :func:`vdlib.method.adaptive_alpha.alpha_trajectory`'s)."""
    rows = [{"iteration": t, "fixed": alpha_at(t, iterations, alpha=alpha),
             "linear": round(alpha_at(t, iterations, alpha=alpha, alpha_final=alpha_final,
                                      schedule="linear"), 6)} for t in range(1, iterations + 1)]
    frame = pd.DataFrame(rows)
    if adaptive:
        by_t = {d.iteration: d for d in adaptive}
        frame["adaptive"] = [by_t[t].alpha if t in by_t else None for t in frame["iteration"]]
        frame["adaptive rule"] = [by_t[t].rule if t in by_t else None for t in frame["iteration"]]
    return frame
