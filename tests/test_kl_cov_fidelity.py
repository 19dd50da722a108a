"""KL-Cov / Clip-Cov as the paper's system ran them: old log-probs from a separate pass.

verl (<= v0.5.x) and EasyR1 / R-Zero always compute ``old_log_probs`` in a separate no-grad
forward (``compute_log_prob``, micro-batches of the experience size) before the update, even at
one on-policy update per rollout batch; on a GPU in bf16 that pass rounds differently from the
update's forward, and KL-Cov's ``|logp - old|`` then has a full-size gradient on its selected
tokens (docs/experiments.md, "KL-Cov on-policy"). On this CPU the tiny model's two passes are
bit-identical, so the tests below emulate the GPU's rounding by moving the recomputed old
log-probs one float32 ulp; the GPU measurement is ``benchmarks/kl_cov_active.py``.
All runs: one rollout batch (1 prompt x G 4), the paper's micro-batches (update 2,
experience 4), the same seed, so every run trains on the same completions.
"""

from __future__ import annotations

import pytest
import torch
from datasets import Dataset
from transformers import TrainerCallback

from vdlib.config.experiment import ConfigError, GRPOConfig, load_params
from vdlib.engines.models import load_model
from vdlib.loop.trainer import COV_OLD_LOGPROBS, MaskedGRPOTrainer, trl_args
from vdlib.method.prompts import proposer_prompt

G = GRPOConfig(global_batch_size=1, rollout_batch_size=1, num_generations=4,
               micro_batch_size_update=2, micro_batch_size_experience=4, max_response_length=8,
               max_steps=1, precision="float32", gradient_checkpointing=False,
               learning_rate=1e-2, temperature=1.5)


class IdReward:
    """Varied deterministic rewards (non-zero advantages)."""

    __name__ = "id_reward"

    def __call__(self, prompts, completions, completion_ids, **kwargs):
        return [float(sum(ids) % 7) for ids in completion_ids]


class GradRecorder(TrainerCallback):
    """The clipped gradient of the (only) optimizer step."""

    grads: dict[str, torch.Tensor] | None = None

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        self.grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()
                      if p.grad is not None}


def _run(tmp_path, variant="grpo", cov=None, nudge=False):
    """Train one step; returns (trainer, gradient, experience-pass calls, logged rows)."""
    model, tok = load_model("tiny-random", device="cpu")
    path = tmp_path / "model"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    rec = GradRecorder()
    trainer = MaskedGRPOTrainer(
        model=str(path), reward_funcs=[IdReward()],
        args=trl_args(G, output_dir=str(tmp_path), seed=0, use_cpu=True),
        train_dataset=Dataset.from_dict({"prompt": [proposer_prompt(tok)] * 4}),
        processing_class=tok, loss_variant=variant, cov=cov, callbacks=[rec])
    passes: list[dict] = []
    real_pass, real_logps = trainer._experience_logps, trainer._get_per_token_logps_and_entropies

    def logps_spy(*args, **kwargs):
        passes.append({"batch_size": kwargs.get("batch_size"), "rows": args[1].shape[0],
                       "grad": torch.is_grad_enabled()})
        return real_logps(*args, **kwargs)

    def experience_spy(batch):
        passes.append({"experience": True})
        old = real_pass(batch)
        # a GPU's bf16 recompute differs from the update by rounding: emulate it with one ulp
        return torch.nextafter(old, torch.full_like(old, -torch.inf)) if nudge else old

    trainer._experience_logps = experience_spy
    trainer._get_per_token_logps_and_entropies = logps_spy
    trainer.train()
    rows = [r for r in trainer.state.log_history if f"{variant}/n_selected" in r]
    return trainer, rec.grads, passes, rows


def _max_diff(a, b):
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("grpo"))


def test_defaults_are_the_papers_system():
    g = load_params(None).proposer
    assert g.cov_old_logprobs == "recompute" and g.micro_batch_size_experience == 4
    assert COV_OLD_LOGPROBS == ("recompute", "detach")
    with pytest.raises(ConfigError) as err:
        load_params({"proposer": {"cov_old_logprobs": "detatch"}})
    assert "proposer.cov_old_logprobs" in str(err.value) and "recompute, detach" in str(
        err.value)


def test_bad_cov_old_logprobs_names_the_allowed_values():
    with pytest.raises(ValueError, match="allowed values: recompute, detach"):
        MaskedGRPOTrainer(model=None, loss_variant="kl_cov", cov={"old_logprobs": "exact"})


def test_recompute_is_a_separate_no_grad_pass_in_experience_chunks(tmp_path, baseline):
    """Default KL-Cov: before the update, one no-grad forward over the whole rollout batch in
    chunks of 4, the update in chunks of 2; on this CPU the two give identical log-probs, so
    the term is still 0 here (the GPU's bf16 passes differ: benchmarks/kl_cov_active.py)."""
    _, grads, passes, rows = _run(tmp_path, "kl_cov")
    i = passes.index({"experience": True})
    assert passes[i + 1] == {"batch_size": 4, "rows": 4, "grad": False}
    assert {"batch_size": None, "rows": 2, "grad": True} in passes[i + 2:]  # the update
    assert len(rows) == 1 and rows[0]["kl_cov/n_selected"] >= 1
    assert rows[0]["kl_cov/n_active"] == 0 and rows[0]["kl_cov/penalty"] == 0.0
    assert _max_diff(grads, baseline[1]) < 1e-6


def test_kl_cov_acts_where_recomputed_old_logprobs_differ(tmp_path, baseline):
    """The paper's setting (one on-policy step per rollout batch): recomputed old log-probs one
    ulp off the update's make KL-Cov's update differ from the baseline's on the same batch;
    the on-policy setting (``detach``) keeps the old, inert behaviour."""
    _, base, _, _ = baseline
    _, grads, passes, rows = _run(tmp_path / "recompute", "kl_cov", nudge=True)
    assert {"experience": True} in passes
    assert rows[0]["kl_cov/n_active"] >= 1 and rows[0]["kl_cov/n_active"] == rows[0][
        "kl_cov/n_selected"]
    assert 0 < rows[0]["kl_cov/abs_log_ratio"] < 1e-5  # a rounding-sized difference ...
    acting = _max_diff(grads, base)
    assert acting > 1e-4  # ... moves the gradient by a full-size term

    _, grads_on, passes_on, rows_on = _run(tmp_path / "detach", "kl_cov",
                                           cov={"old_logprobs": "detach"}, nudge=True)
    assert {"experience": True} not in passes_on  # TRL skips old log-probs on-policy
    assert rows_on[0]["kl_cov/n_active"] == 0 and rows_on[0]["kl_cov/penalty"] == 0.0
    assert _max_diff(grads_on, base) < 1e-6 < acting / 100


def test_clip_cov_acts_on_policy_and_recompute_changes_little(tmp_path, baseline):
    """Clip-Cov cuts the gradient of its selected tokens whatever the old log-probs are: it acts
    exactly on-policy (``detach``), and a rounding-sized recompute changes its update only by
    the ratio's rounding. (Bounds widened: on the random model no covariance reaches the
    paper's window (1, 5).)"""
    _, base, _, _ = baseline
    wide = {"ratio": 0.25, "lb": -1e9, "ub": 1e9}
    _, on, passes_on, rows_on = _run(tmp_path / "detach", "clip_cov",
                                     cov={**wide, "old_logprobs": "detach"})
    assert {"experience": True} not in passes_on
    assert rows_on[0]["clip_cov/n_selected"] >= 1
    assert _max_diff(on, base) > 1e-4
    _, rec, passes_rec, rows_rec = _run(tmp_path / "recompute", "clip_cov", cov=wide,
                                        nudge=True)
    assert {"experience": True} in passes_rec
    assert rows_rec[0]["clip_cov/n_selected"] == rows_on[0]["clip_cov/n_selected"]
    assert _max_diff(rec, on) < 1e-5
