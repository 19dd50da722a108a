"""Issue 16, training protocol: each default pinned to the paper's text (items 1, 8, 11, 12).

Every test quotes the sentence or table of the paper (shared/paper/vocab_dropout_paper.tex) that
fixes the default; where the paper is silent the docstring says so and names the source used.
"""

from __future__ import annotations

import copy

import pytest
import torch

from vdlib.config.experiment import GRPOConfig, ScoringConfig, VocabDropoutConfig, load_params
from vdlib.config.mask_settings import mask_schedule, mask_spec
from vdlib.engines.generation import Sample
from vdlib.engines.vllm_backend import RequestMasks, extra_args, parse_extra_args
from vdlib.loop.arms import arm_params
from vdlib.loop.grpo_rewards import ProposerReward
from vdlib.loop.trainer import trl_args
from vdlib.method.grpo import kl_cov_loss, token_mean
from vdlib.method.vocab_dropout import VocabDropout, phase_mask, protected_token_ids

# ----------------------------------------------------------------------------- 1. KL-Cov


def _trl(g: GRPOConfig, tmp_path) -> object:
    return trl_args(g, output_dir=str(tmp_path), seed=0, use_cpu=True)


def test_kl_cov_arm_changes_only_the_loss(tmp_path):
    """App. 'Entropy-control baselines': "Both are applied to the proposer only, matching VD's
    scope, with all other training settings identical to the Baseline and VD arms." So the
    ``kl_cov`` / ``clip_cov`` arms differ from ``baseline`` in ``proposer.loss_variant`` only:
    the same rollouts, batch sizes and optimizer steps."""
    base = load_params(arm_params({"profile": "paper"}, "baseline"))
    for arm in ("kl_cov", "clip_cov"):
        cfg = load_params(arm_params({"profile": "paper"}, arm))
        assert cfg.proposer.loss_variant == arm
        assert {**vars(cfg.proposer), "loss_variant": "grpo"} == vars(base.proposer)
        assert cfg.solver == base.solver and cfg.vocab_dropout == base.vocab_dropout
        a, b = _trl(cfg.proposer, tmp_path), _trl(base.proposer, tmp_path)
        for key in ("max_steps", "gradient_accumulation_steps", "steps_per_generation",
                    "per_device_train_batch_size", "num_iterations"):
            assert getattr(a, key) == getattr(b, key), key


def test_paper_table_gives_one_on_policy_update_per_rollout_batch(tmp_path):
    """Tab. training_hypers (proposer): "Global batch size & 16", "Rollout batch size & 16",
    "Max steps per phase & 6": one optimizer step per rollout batch, six rollout batches
    (the table lists no PPO epochs or mini-batches: ``ppo_mini_batches = updates_per_batch = 1``,
    R-Zero's one PPO epoch)."""
    g = GRPOConfig()
    assert (g.global_batch_size, g.rollout_batch_size, g.max_steps) == (16, 16, 6)
    assert g.ppo_mini_batches == 1 and g.updates_per_batch == 1
    args = _trl(g, tmp_path)
    assert args.steps_per_generation == args.gradient_accumulation_steps  # on-policy
    assert args.max_steps == 6 and args.num_iterations == 1


def test_kl_cov_offpolicy_splits_each_batch_and_keeps_the_rollouts(tmp_path):
    """The off-policy variant (vdlib's, not a paper arm) splits each global batch into two
    optimizer mini-batches, as verl's ``ppo_mini_batch_size``: the same 6 rollout batches of
    16 x 4 completions as the baseline, 12 optimizer steps of 32 completions."""
    cfg = load_params(arm_params({"profile": "paper"}, "kl_cov_offpolicy"))
    g = cfg.proposer
    assert g.loss_variant == "kl_cov" and g.ppo_mini_batches == 2 and g.updates_per_batch == 1
    off, on = _trl(g, tmp_path), _trl(GRPOConfig(), tmp_path)
    completions = lambda a: a.per_device_train_batch_size * a.steps_per_generation  # noqa: E731
    assert completions(off) == completions(on) == 64  # one rollout batch per generation
    assert off.per_device_train_batch_size * off.gradient_accumulation_steps == 32
    assert off.steps_per_generation == 2 * off.gradient_accumulation_steps
    assert off.max_steps == 12 and on.max_steps == 6  # 12 x 32 = 6 x 64 completions
    assert off.num_iterations == 1
    with pytest.raises(ValueError, match="ppo_mini_batches"):
        _trl(GRPOConfig(global_batch_size=1, num_generations=3, rollout_batch_size=1,
                        ppo_mini_batches=2), tmp_path)


def test_kl_cov_term_vanishes_exactly_on_policy():
    """Cui et al. Eq. 14 as verl implements it: ``kl_coef * |logp - old_logp|`` on the top-k
    covariance tokens. On-policy (``old_logp = logp``) the term, its logged ``penalty`` and the
    tokens where it has a gradient (``n_active``) are all 0; off-policy they are not."""
    torch.manual_seed(0)
    logp = torch.randn(4, 6, requires_grad=True)
    adv, mask = torch.tensor([1.0, -1.0, 0.5, -0.5]), torch.ones(4, 6)
    per_token, stats = kl_cov_loss(logp, logp.detach(), adv, mask, k_frac=0.25)
    assert float(stats["penalty"]) == 0.0 and int(stats["n_active"]) == 0
    assert int(stats["n_selected"]) == 6
    token_mean(per_token, mask).backward()
    plain = -adv.unsqueeze(1).expand(4, 6) / 24  # the gradient of token_mean(-A r) at r = 1
    assert torch.allclose(logp.grad, plain)
    old = logp.detach() - 0.1
    _, stats = kl_cov_loss(logp, old, adv, mask, k_frac=0.25, kl_coef=1.0)
    assert int(stats["n_active"]) == 6 and float(stats["penalty"]) == pytest.approx(6 * 0.1 / 24)


# ----------------------------------------------------------------------------- 8. penalty


class _Engine:
    """A solver that answers every question with ``\\boxed{1}`` (acc 1.0)."""

    def generate(self, prompts, n=1, seed=0, **kwargs):
        return [Sample(prompt=p, prompt_index=i, sample_index=k, token_ids=[1],
                       text="\\boxed{1}", finish_reason="stop", seed=seed)
                for i, p in enumerate(prompts) for k in range(n)]


def test_repetition_penalty_default_is_rzero_whole_batch(tokenizer):
    """Sec. 'Preliminaries: GRPO and R-Zero': "R-Zero additionally penalizes intra-batch
    repetition via pairwise BLEU similarity, clustering near-duplicate questions and
    subtracting a penalty proportional to cluster size from the uncertainty reward." The paper
    names no denominator and no treatment of failed rollouts, so R-Zero's code decides:
    every rollout is clustered (a failed one as ``""``) and the cluster size is divided by the
    whole batch. ``penalty_scope: valid`` (vdlib's earlier rule) is the switch."""
    assert ScoringConfig().penalty_scope == "batch"
    q = "<question>What is 2 + 3 times 4 ?</question> \\boxed{1}"
    other = "<question>Find all primes p such that p + 2 is prime .</question> \\boxed{1}"
    completions = [q, q, "no question here", other]
    for scope, n in (("batch", 4), ("valid", 3)):
        cfg = ScoringConfig(num_solver_samples=2, penalty_scope=scope)
        reward = ProposerReward(_Engine(), tokenizer, cfg)
        rewards = reward(["p"] * 4, completions)
        pens = [r["penalty"] for r in reward.records]
        assert pens == [2 / n, 2 / n, 1 / 4 if scope == "batch" else 0.0, 1 / n]
        # acc 1.0 is outside [0.3, 0.7]: reward 0 - penalty; the failed rollout keeps 0
        # (Algorithm 1: "if parse fails: r_i = 0; continue")
        assert rewards == [-2 / n, -2 / n, 0.0, -1 / n]


# ----------------------------------------------------------------------------- 11. clip


def test_clip_bounds_are_one_symmetric_epsilon(tmp_path):
    """Sec. 'Preliminaries: GRPO and R-Zero': "min(rho_i A_i, clip(rho_i, 1-eps, 1+eps) A_i)":
    one epsilon on both sides. Its value is not stated; 0.2 is verl's default clip_ratio (the
    trainer of Sec. 'Setup'). R-Zero's code clips the upper side at 0.3 (its actor config's
    clip_ratio_high; a
    switch)."""
    for g in (GRPOConfig(), load_params({"profile": "paper"}).solver,
              load_params({"profile": "paper"}).transfer):
        assert g.clip_eps_low == g.clip_eps_high == 0.2
    args = _trl(GRPOConfig(), tmp_path)
    assert args.epsilon == args.epsilon_high == 0.2
    assert _trl(GRPOConfig(clip_eps_high=0.3), tmp_path).epsilon_high == 0.3


# ----------------------------------------------------------------------------- 12. mask width


@pytest.fixture
def wide_tokenizer(tokenizer):
    """SmolLM2's tokenizer (vocab_size == len == 49,152) plus three added tokens, as Qwen's
    specials sit above ``tokenizer.vocab_size``."""
    tok = copy.deepcopy(tokenizer)
    tok.add_tokens(["<x_one>", "<x_two>", "<x_three>"])
    assert len(tok) == tok.vocab_size + 3 == 49_155
    return tok


def test_mask_width_default_is_tokenizer_vocab_size(wide_tokenizer):
    """App. 'Vocabulary dropout implementation', fig:code_diff: "V = tokenizer.vocab_size;
    mask = torch.bernoulli(torch.full((V,), alpha)).bool()", then "allowed_token_ids =
    mask.nonzero()": ids at or above ``vocab_size`` are never allowed, except protected ones
    (Algorithm 1: the mask is the draw "union F"). ``width: len_tokenizer`` draws over them too,
    with the same draw on the shared ids."""
    assert VocabDropoutConfig().width == "vocab_size"
    tok = wide_tokenizer
    added = list(range(tok.vocab_size, len(tok)))
    protected = protected_token_ids(tok, extra=[added[0]])
    paper = VocabDropout(tok, 0.5, vocab_width=49_216, protected=protected)
    wide = VocabDropout(tok, 0.5, vocab_width=49_216, protected=protected, width="len_tokenizer")
    assert (paper.n_draw, wide.n_draw) == (49_152, 49_155)
    kept_added = 0
    for seed in range(20):
        m, w = paper.sample(seed), wide.sample(seed)
        assert bool(m[added[0]]) and not bool(m[added[1]]) and not bool(m[added[2]])
        assert torch.equal(m[: tok.vocab_size], w[: tok.vocab_size])
        assert not bool(m[len(tok):].any()) and not bool(w[len(tok):].any())  # padded rows
        kept_added += int(w[added[1]]) + int(w[added[2]])
        assert abs(paper.kept_fraction(seed) - 0.5) < 0.02
    assert 5 < kept_added < 35  # about alpha of 40 draws
    full = VocabDropout(tok, 1.0, protected=protected).sample(0)  # the snippet at alpha = 1
    assert bool(full[: tok.vocab_size].all()) and bool(full[added[0]]) and not bool(full[added[1]])


def test_mask_width_is_the_same_in_hf_and_vllm_paths(wide_tokenizer):
    """The seeded mask is identical in the transformers processor and in vLLM's processor
    (rebuilt from the request's extra args, which carry the drawn width)."""
    tok = wide_tokenizer
    vd = VocabDropout(tok, 0.75, vocab_width=49_216)
    args = extra_args(vd, seed=7)
    assert args["vd_n_draw"] == tok.vocab_size and parse_extra_args(args).n_draw == 49_152
    assert "vd_n_draw" not in extra_args(VocabDropout(tok, 0.75, width="len_tokenizer"), 7)
    hf = vd.logits_processor(7)(torch.zeros(1, 1), torch.zeros(2, 49_216))
    masks = RequestMasks()
    masks.set(0, extra_args(vd, 7, flat=True))
    masks.set(1, args)
    vllm = masks.apply(torch.zeros(2, 49_216))
    expected = ~vd.sample(7)
    for out in (hf, vllm):
        assert torch.equal(torch.isneginf(out), expected.expand(2, -1))
    assert vd.allowed_token_ids(7) == (~expected).nonzero(as_tuple=True)[0].tolist()


def test_phase_mask_reads_the_width_switch(tiny_model_and_tokenizer, wide_tokenizer):
    model, _ = tiny_model_and_tokenizer
    for width, n_draw in (("vocab_size", 49_152), ("len_tokenizer", 49_155)):
        cfg = load_params({"profile": "tiny", "vocab_dropout": {"alpha": 0.5, "width": width}})
        vd = phase_mask(mask_schedule(cfg), mask_spec(cfg), 1, "train", wide_tokenizer,
                        model=model)
        assert vd is not None and vd.n_draw == n_draw and vd.vocab_width == 49_216
