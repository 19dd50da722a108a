"""KL-Cov / Clip-Cov as the paper's system ran them: old log-probs from a separate pass.

verl v0.4.1-v0.5.0 and EasyR1 / R-Zero always compute ``old_log_probs`` in a separate no-grad
forward (``compute_log_prob``, micro-batches of the experience size, packed without padding)
before the update, even at one on-policy update per rollout batch; where that pass rounds
differently from the update's forward, KL-Cov's ``|logp - old|`` has a full-size gradient on
its selected tokens (docs/experiments.md, "KL-Cov on-policy"). A padded recompute
(``cov_old_logprobs: recompute``) agrees with the padded update bit for bit in bf16 (the
committed H200 runs: 27 of 27 steps inert; bf16 autocast on this CPU too: below); the packed one
(``packed``, the default) does not. Some tests emulate a GPU's rounding by moving the recomputed
old log-probs one float32 ulp; the GPU measurement is ``benchmarks/kl_cov_active.py``.
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
from vdlib.loop.trainer import COV_OLD_LOGPROBS, MaskedGRPOTrainer, pack_rows, trl_args
from vdlib.method.prompts import proposer_prompt

PARAMS = __import__("pathlib").Path(__file__).resolve().parents[1] / "params" / "gpu-small"

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


def _run(tmp_path, variant="grpo", cov=None, nudge=False, bf16=False):
    """Train one step (``bf16``: under bf16 autocast, float32 master weights, as on the GPU);
    returns (trainer, gradient, experience-pass calls, logged rows)."""
    model, tok = load_model("tiny-random", device="cpu")
    path = tmp_path / "model"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    rec = GradRecorder()
    trainer = MaskedGRPOTrainer(
        model=str(path), reward_funcs=[IdReward()],
        args=trl_args(G, output_dir=str(tmp_path), seed=0, use_cpu=True,
                      **({"bf16": True} if bf16 else {})),
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
    assert g.cov_old_logprobs == "packed" and g.micro_batch_size_experience == 4
    assert COV_OLD_LOGPROBS == ("packed", "recompute", "detach")
    with pytest.raises(ConfigError) as err:
        load_params({"proposer": {"cov_old_logprobs": "detatch"}})
    assert "proposer.cov_old_logprobs" in str(err.value) and "packed, recompute, detach" in str(
        err.value)


def test_the_inert_and_the_acting_arms_say_what_they_are():
    """``kl_cov`` is the paper's (packed old log-probs, one update per rollout batch);
    ``kl_cov_inert`` keeps the committed runs' padded recompute under a name that says it never
    acted; ``kl_cov_offpolicy`` is ours (two optimizer steps per rollout batch)."""
    from vdlib.loop.arms import arm_params

    def proposer(arm):
        return load_params(arm_params({"profile": "gpu"}, arm)).proposer

    assert (proposer("kl_cov").cov_old_logprobs, proposer("kl_cov").ppo_mini_batches) == (
        "packed", 1)
    assert proposer("kl_cov_inert").cov_old_logprobs == "recompute"
    assert proposer("kl_cov_offpolicy").ppo_mini_batches == 2


def test_rerun_params_are_the_main_tables_cuts_with_the_kl_cov_arms():
    """The GPU rerun's file (docs/experiments.md) keeps every cut of main_table.yaml and runs
    only the acting KL-Cov arms; the old file's comment no longer says KL-Cov acts."""
    import yaml

    main = yaml.safe_load((PARAMS / "main_table.yaml").read_text(encoding="utf-8"))
    rerun = yaml.safe_load((PARAMS / "entropy_kl_cov.yaml").read_text(encoding="utf-8"))
    assert {k for k in set(main) | set(rerun) if main.get(k) != rerun.get(k)} == {
        "experiment", "arms"}
    assert rerun["arms"] == ["kl_cov", "kl_cov_offpolicy"] and rerun["seeds"] == [0, 1, 2]
    assert rerun["iterations"] == 3 and rerun["experiment"] != "gpu_small_entropy"
    old = (PARAMS / "entropy_baselines.yaml").read_text(encoding="utf-8")
    assert "so it acts at one update per rollout batch" not in old


def test_bad_cov_old_logprobs_names_the_allowed_values():
    with pytest.raises(ValueError, match="allowed values: packed, recompute, detach"):
        MaskedGRPOTrainer(model=None, loss_variant="kl_cov", cov={"old_logprobs": "exact"})


def _padded_and_packed(model, batch, chunk, dtype):
    """Completion log-probs of ``batch`` through TRL's fused head: padded in chunks of 2 and of
    ``chunk`` (as the update and ``recompute``), and packed in chunks of ``chunk``."""
    from trl.trainer.utils import add_fused_lm_head

    add_fused_lm_head(model)
    prompt, pm, comp, cm = batch
    ids, am = torch.cat([prompt, comp], 1), torch.cat([pm, cm], 1)
    t = comp.shape[1]

    def padded(size):
        out = []
        for s in range(0, ids.shape[0], size):
            lab = ids[s:s + size].masked_fill(am[s:s + size] == 0, -100)
            lab[:, :-t] = -100
            out.append(model(input_ids=ids[s:s + size], attention_mask=am[s:s + size],
                             labels=lab, fused_lm_head=True).log_probs[:, -t:].float())
        return torch.cat(out)

    def packed(size):
        out = torch.zeros(comp.shape)
        for s in range(0, ids.shape[0], size):
            x, pos, lab, (r, c, i) = pack_rows(prompt[s:s + size], pm[s:s + size],
                                               comp[s:s + size], cm[s:s + size])
            lp = model(input_ids=x, position_ids=pos, labels=lab, fused_lm_head=True).log_probs
            out[r + s, c] = lp[0, i - 1].float()
        return out

    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16,
                                         enabled=dtype == torch.bfloat16):
        return padded(2), padded(chunk), packed(chunk)


def test_packed_pass_is_the_same_function_rounded_otherwise():
    """Packing (left-padded prompts, right-padded completions of different lengths) scores
    every completion token as the padded forward does, up to rounding (float32); in bf16
    autocast the padded passes at micro-batch 2 and 4 agree bit for bit (why the committed
    runs' KL-Cov never acted) while the packed pass differs on most tokens (as verl's)."""
    model, _ = load_model("tiny-random", device="cpu")
    model.eval()
    g = torch.Generator().manual_seed(0)
    prompt, comp = torch.randint(5, 1000, (4, 6), generator=g), torch.randint(5, 1000, (4, 8),
                                                                              generator=g)
    pm, cm = torch.ones(4, 6, dtype=torch.long), torch.ones(4, 8, dtype=torch.long)
    pm[1, :2] = pm[3, :1] = 0
    cm[0, 5:] = cm[2, 3:] = 0
    valid = cm.bool()
    pad2, pad4, packed = _padded_and_packed(model, (prompt, pm, comp, cm), 4, torch.float32)
    assert float((packed - pad2)[valid].abs().max()) < 1e-5
    assert (packed[~valid] == 0).all()
    pad2, pad4, packed = _padded_and_packed(model, (prompt, pm, comp, cm), 4, torch.bfloat16)
    assert torch.equal(pad2[valid], pad4[valid])
    differ = float((packed != pad2)[valid].float().mean())
    assert differ > 0.5 and float((packed - pad2)[valid].abs().max()) < 0.05


def test_packed_kl_cov_acts_in_bf16(tmp_path):
    """One proposer step under bf16 autocast (the GPU's training precision), no nudge: the
    default ``packed`` old log-probs differ from the update's, so KL-Cov's selected tokens carry
    a gradient (n_active, active_fraction, penalty and grad_ratio > 0, logged per step). Each
    value is the step's mean over its two update micro-batches. KL-Cov selects a quarter of the
    tokens here: at app:klcov's k = 2e-3 a micro-batch selects verl's minimum of one token, and
    whether that one token's two bf16 passes round apart depends on the CPU's kernels (on an
    AVX2-only EPYC at this seed they did not, while most other tokens did); on the H200 the
    selected tokens differed in 27 of 27 gpu-small proposer steps
    (benchmarks/results/kl_cov_active_h200.log, docs/RESULTS.md "Entropy baselines")."""
    _, _, passes, rows = _run(tmp_path, "kl_cov", cov={"k_frac": 0.25}, bf16=True)
    assert {"experience": True} in passes
    assert not any(p.get("batch_size") == 4 for p in passes)  # not TRL's padded helper
    row = rows[0]
    assert row["kl_cov/n_selected"] >= 1
    assert row["kl_cov/n_active"] > 0 and row["kl_cov/active_fraction"] > 0
    assert row["kl_cov/differ_fraction"] > 0 and row["kl_cov/penalty"] > 0
    assert 0 < row["kl_cov/abs_log_ratio"] < 0.05  # rounding, not another function ...
    assert row["kl_cov/grad_ratio"] > 0.01  # ... with a gradient against the policy term's


@pytest.mark.slow
def test_padded_recompute_is_inert_in_bf16(tmp_path):
    """The committed runs' setting (arm ``kl_cov_inert``): the padded recompute gives exactly
    the update's log-probs under bf16 autocast, and KL-Cov's term never acts."""
    _, _, passes, rows = _run(tmp_path, "kl_cov", cov={"old_logprobs": "recompute",
                                                       "k_frac": 0.25}, bf16=True)
    assert {"experience": True} in passes
    row = rows[0]
    assert row["kl_cov/n_selected"] >= 1 and row["kl_cov/n_active"] == 0
    assert row["kl_cov/differ_fraction"] == 0 and row["kl_cov/penalty"] == 0
    assert row["kl_cov/grad_ratio"] == 0 and row["kl_cov/active_fraction"] == 0


def test_recompute_is_a_separate_no_grad_pass_in_experience_chunks(tmp_path, baseline):
    """KL-Cov with ``recompute``: before the update, one no-grad forward over the whole
    rollout batch in chunks of 4, padded, the update in chunks of 2; the two give identical
    log-probs, so the term is 0 (``kl_cov_inert``)."""
    _, grads, passes, rows = _run(tmp_path, "kl_cov", cov={"old_logprobs": "recompute"})
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
