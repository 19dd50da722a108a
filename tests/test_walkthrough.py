"""The walkthrough's helpers (vdlib.report.walkthrough, VocabDropout.dropped_ids, bleu_clusters):
each view agrees with the method's own functions and with a slow obvious reference."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from vdlib.config.experiment import load_params
from vdlib.method import grpo
from vdlib.method.bleu_penalty import bleu_cluster_penalty, bleu_clusters, bleu_distance_matrix
from vdlib.method.vocab_dropout import VocabDropout
from vdlib.report import walkthrough


def _entropy(p: list[float]) -> float:
    return -sum(x * math.log(x) for x in p if x > 0)


@pytest.mark.parametrize("seed", range(5))
def test_mask_effect_matches_a_slow_reference(seed):
    gen = torch.Generator().manual_seed(seed)
    logits = 3 * torch.randn(50, generator=gen)
    allowed = torch.rand(50, generator=gen) < 0.6
    allowed[0] = True
    effect = walkthrough.mask_effect(logits, allowed, k=5, temperature=0.7)
    z = [math.exp(v / 0.7) for v in logits.tolist()]
    p = [v / sum(z) for v in z]
    kept = [v if a else 0.0 for v, a in zip(z, allowed.tolist(), strict=True)]
    q = [v / sum(kept) for v in kept]
    assert effect.entropy == pytest.approx(_entropy(p), rel=1e-4)
    assert effect.entropy_masked == pytest.approx(_entropy(q), rel=1e-4)
    assert effect.perplexity == pytest.approx(math.exp(_entropy(p)), rel=1e-4)
    assert effect.perplexity_masked == pytest.approx(math.exp(_entropy(q)), rel=1e-4)
    assert effect.dropped_mass == pytest.approx(
        sum(x for x, a in zip(p, allowed.tolist(), strict=True) if not a), abs=1e-5)
    assert [i for i, _ in effect.top] == sorted(range(50), key=lambda i: -p[i])[:5]
    assert [i for i, _ in effect.top_masked] == sorted(range(50), key=lambda i: -q[i])[:5]
    assert all(allowed[i] for i, _ in effect.top_masked)


def test_mask_effect_rejects_bad_shapes_and_empty_masks():
    with pytest.raises(ValueError, match="logits"):
        walkthrough.mask_effect(torch.zeros(3), torch.ones(4, dtype=torch.bool))
    with pytest.raises(ValueError, match="no id"):
        walkthrough.mask_effect(torch.zeros(3), torch.zeros(3, dtype=torch.bool))


def test_dropped_ids_names_the_ids_a_mask_drops():
    vd = VocabDropout.from_sizes(n_real=100, vocab_width=104, alpha=0.5, protected=[0, 1])
    allowed = vd.sample(7)
    dropped = [i for i in range(104) if not allowed[i]]
    kept = [i for i in range(104) if allowed[i]]
    assert vd.dropped_ids(kept, 7) == []
    assert vd.dropped_ids([kept[0], dropped[0], 103, 200, dropped[1]], 7) == [
        dropped[0], 103, 200, dropped[1]]  # padded rows and ids beyond the width count


def test_fresh_masks_frame_overlaps_as_independent_draws():
    vd = VocabDropout.from_sizes(n_real=20000, vocab_width=20000, alpha=0.75, protected=[0])
    logits = torch.randn(20000, generator=torch.Generator().manual_seed(0))
    frame = walkthrough.fresh_masks_frame(vd, [11, 12, 13], logits, _Tok())
    assert frame["overlap with the first"].iloc[0] == 1.0
    expected = 0.75 ** 2 / (2 * 0.75 - 0.75 ** 2)  # |A n B| / |A u B| of Bernoulli(alpha) sets
    assert frame["overlap with the first"].iloc[1:].tolist() == pytest.approx([expected] * 2,
                                                                              abs=0.01)
    assert frame["kept fraction"].tolist() == pytest.approx([0.75] * 3, abs=0.01)


class _Tok:
    def decode(self, ids):
        return f"<{ids[0]}>"


def test_reward_curve_is_the_papers_reward():
    curve = walkthrough.reward_curve(0.3, 0.7, m=10)
    inside = (curve["acc"] >= 0.3 - 1e-9) & (curve["acc"] <= 0.7 + 1e-9)
    expected = np.where(inside, np.minimum(curve["acc"], 1 - curve["acc"]), 0.0)
    assert np.allclose(curve["reward"], expected)
    assert inside.equals(curve["in_window"])
    assert curve.loc[curve["reachable"], "acc"].round(6).tolist() == [k / 10 for k in range(11)]
    rzero = walkthrough.reward_curve(0.3, 0.7, variant="rzero")
    assert np.allclose(rzero["reward"], np.minimum(rzero["acc"], 1 - rzero["acc"]))


def test_bleu_clusters_keep_every_step_of_the_penalty():
    qs = ["What is 2 + 3 times 4 ?", "What is 2 + 3 times 5 ?", "Find all primes p such "
          "that p + 2 is prime.", "What is 2 + 3 times 6 ?"]
    c = bleu_clusters(qs, 0.5)
    assert np.array_equal(c.distance, bleu_distance_matrix(qs))
    assert c.labels.tolist() == [0, 0, 1, 0]
    assert c.penalties == bleu_cluster_penalty(qs) == [0.75, 0.75, 0.25, 0.75]
    empty = bleu_clusters([])
    assert empty.distance.shape == (0, 0) and empty.penalties == []


def test_grpo_token_frame_agrees_with_the_losses():
    g = load_params({"profile": "tiny"}).proposer
    rewards = torch.tensor([0.5, 0.4, 0.0, 0.0, 0.4, 0.4, 0.4, 0.4], dtype=torch.float64)
    adv = grpo.group_advantages(rewards, group_size=4)
    batch = walkthrough.toy_grpo_batch([6, 4, 5, 2, 6, 6, 3, 5], seed=0)
    tokens, summary = walkthrough.grpo_token_frame(batch, adv, g, seed=0)
    mask = batch["mask"]
    assert len(tokens) == summary["tokens"] == int(mask.sum()) == 37
    _, stats = grpo.grpo_loss(batch["logp"], batch["old_logp"], batch["ref_logp"], adv, mask,
                              g.clip_eps_low, g.clip_eps_high, g.kl_beta)
    assert tokens["clipped"].mean() == pytest.approx(float(stats["clip_fraction"]))
    assert tokens["k3_kl"].mean() == pytest.approx(float(stats["kl"]), rel=1e-5)
    assert (tokens["k3_kl"] >= 0).all()
    # KL-Cov: the top max(1, int(N k)) tokens by covariance
    assert tokens["kl_cov"].sum() == summary["kl_cov_selected"] == max(1, int(37 * 2e-3))
    assert tokens.loc[tokens["kl_cov"], "covariance"].min() == tokens["covariance"].max()
    # Clip-Cov: tokens in (lb, ub) that PPO did not clip already
    picked = tokens[tokens["clip_cov"]]
    assert len(picked) == summary["clip_cov_selected"] == 1
    assert ((picked["covariance"] > g.clip_cov_lb) & (picked["covariance"] < g.clip_cov_ub)
            & ~picked["clipped"]).all()
    ratio = torch.exp(batch["logp"] - batch["old_logp"])[mask]
    assert tokens["ratio"].to_numpy() == pytest.approx(ratio.numpy())


def test_grpo_loss_frame_adds_the_k3_term_to_every_variant_as_the_trainer_does():
    """Each row's total is its policy term + its covariance term + beta x k3 (TRL's GRPO loss
    and MaskedGRPOTrainer._cov_loss both add the KL term; token mean over the batch)."""
    g = load_params({"profile": "tiny"}).proposer
    rewards = torch.tensor([0.5, 0.4, 0.0, 0.0, 0.4, 0.4, 0.4, 0.4], dtype=torch.float64)
    adv = grpo.group_advantages(rewards, group_size=4)
    batch = walkthrough.toy_grpo_batch([6, 4, 5, 2, 6, 6, 3, 5], seed=0)
    tokens, summary = walkthrough.grpo_token_frame(batch, adv, g, seed=0)
    lp, old, ref, mask = batch["logp"], batch["old_logp"], batch["ref_logp"], batch["mask"]
    k3 = grpo.k3_kl(lp, ref)
    kl_tok, _ = grpo.kl_cov_loss(lp, old, adv, mask, g.kl_cov_k_frac, g.kl_cov_beta,
                                 selected=torch.tensor(
                                     tokens.pivot(index="seq", columns="pos",
                                                  values="kl_cov").fillna(False)
                                     .to_numpy(dtype=bool)))
    trainer_like = float(grpo.token_mean(kl_tok + g.kl_beta * k3, mask))
    assert summary["kl_cov_loss"] == pytest.approx(trainer_like, rel=1e-5)
    frame = walkthrough.grpo_loss_frame(summary).set_index("variant")
    assert list(frame.index) == ["GRPO", "KL-Cov", "Clip-Cov"]
    assert (frame["beta x k3 to pi_ref"] == summary["kl_term"]).all() and summary["kl_term"] > 0
    parts = frame["policy"] + frame["covariance term"] + frame["beta x k3 to pi_ref"]
    assert parts.to_numpy() == pytest.approx(frame["total"].to_numpy(), rel=1e-5)
    assert frame.loc["KL-Cov", "covariance term"] > 0
    assert frame.loc[["KL-Cov", "Clip-Cov"], "role"].str.contains("proposer only").all()


def test_phase_switch_frame_is_the_loops_phase_alphas():
    cfg = load_params({"profile": "tiny", "vocab_dropout": {"alpha": 0.75}})
    frame = walkthrough.phase_switch_frame(cfg).set_index("vocab_dropout.phases")
    assert frame.to_dict("index") == {
        "both": {"proposer GRPO rollouts (train)": 0.75, "curriculum generation (gen)": 0.75,
                 "solver GRPO": 1.0},
        "train": {"proposer GRPO rollouts (train)": 0.75, "curriculum generation (gen)": 1.0,
                  "solver GRPO": 1.0},
        "gen": {"proposer GRPO rollouts (train)": 1.0, "curriculum generation (gen)": 0.75,
                "solver GRPO": 1.0},
        "none": {"proposer GRPO rollouts (train)": 1.0, "curriculum generation (gen)": 1.0,
                 "solver GRPO": 1.0}}
    assert cfg.vocab_dropout.phases == "both"  # the caller's config is left as it was


def test_schedule_frame_fixed_linear_and_adaptive():
    from vdlib.method.adaptive_alpha import AdaptiveSettings, alpha_trajectory

    frame = walkthrough.schedule_frame(0.75, 5)
    assert frame["fixed"].tolist() == [0.75] * 5
    assert frame["linear"].tolist() == [0.75, 0.8125, 0.875, 0.9375, 1.0]  # App. D.7
    assert "adaptive" not in frame
    history = [{"iteration": 1, "valid_fraction": 0.70, "cumulative_vendi": 44.0},
               {"iteration": 2, "valid_fraction": 0.96, "cumulative_vendi": 44.5}]
    decisions = alpha_trajectory(history, AdaptiveSettings(alpha=0.75))
    with_adaptive = walkthrough.schedule_frame(0.75, 4, adaptive=decisions)
    assert with_adaptive["adaptive"].tolist()[:3] == [d.alpha for d in decisions]
    assert with_adaptive["adaptive rule"].tolist()[:3] == ["start", "raise", "lower"]
    assert with_adaptive["adaptive"].isna().tolist() == [False, False, False, True]


def test_filter_frame_is_the_curriculum_filter_under_both_targets():
    qs = [{"question": "a", "valid": True, "acc": 0.5, "answer": "1", "majority": "2"},
          {"question": "b", "valid": True, "acc": 0.9, "answer": "3", "majority": "3"},
          {"question": "c", "valid": False, "acc": None, "answer": None, "majority": None},
          {"question": "d", "valid": True, "acc": 0.3, "answer": "5", "majority": None}]
    frame = walkthrough.filter_frame(qs, 0.3, 0.7).set_index("question")
    assert frame["kept"].tolist() == [True, False, False, True]
    assert frame.loc["a", "target (paper)"] == "1" and frame.loc["a", "target (R-Zero)"] == "2"
    assert pd.isna(frame.loc["d", "target (R-Zero)"])  # no majority: R-Zero has no target


def test_sampling_views_on_the_tiny_model(tmp_path):
    """Samples drawn under a mask hold no dropped id, and their full-vocabulary log-probs (the
    update's) are never above the masked ones (the sampler's)."""
    from vdlib.engines.generation import HFEngine
    from vdlib.engines.models import load_model

    model, tok = load_model("tiny-random")
    vd = VocabDropout.for_model(model, tok, alpha=0.5)
    samples = HFEngine(model, tok, show_progress=False).generate(
        ["Write a question"], n=2, max_new_tokens=6, seed=0, vocab_dropout=vd, mask_seed=3)
    frame = walkthrough.samples_frame(samples, vd)
    assert frame["dropped ids sampled"].tolist() == [0, 0]
    unmasked = HFEngine(model, tok, show_progress=False).generate(
        ["Write a question"], n=4, max_new_tokens=6, seed=0)
    assert sum(len(vd.dropped_ids(s.token_ids, 3)) for s in unmasked) > 0  # the check can fail
    lp = walkthrough.logprob_frame(model, tok, "Write a question", samples[0].token_ids,
                                   vd.sample(3))
    assert len(lp) == len(samples[0].token_ids)
    assert (lp["log p (full vocabulary)"] <= lp["log p (under the mask)"] + 1e-6).all()
    assert (lp["log p (full vocabulary)"] < lp["log p (under the mask)"]).any()
    logits = walkthrough.next_token_logits(model, tok, "Write a question")
    assert logits.shape == (model.get_output_embeddings().weight.shape[0],)
    effect = walkthrough.mask_effect(logits, vd.sample(3), k=4)
    fig = walkthrough.mask_effect_figure(effect, vd.sample(3), tok, tmp_path)
    assert (tmp_path / "mask_effect.png").is_file() and len(fig.data) == 4


def test_figures_carry_their_numbers(tmp_path):
    curve = walkthrough.reward_curve(0.3, 0.7, m=10)
    fig = walkthrough.reward_figure(curve, 0.3, 0.7, marks={"a": 0.5, "b": None}, out_dir=tmp_path)
    assert fig.data.equals(curve) and (tmp_path / "proposer_reward.pdf").is_file()
    c = bleu_clusters(["a b c d e f", "a b c d e g", "x y z w"], 0.5)
    data = walkthrough.bleu_figure(c, 0.5).data
    assert len(data) == 9 and data["same_cluster"].sum() == 3 + 2  # the diagonal and one pair
    sim = walkthrough.similarity_figure({"k": np.eye(3)}).data
    assert sim["value"].sum() == 3
