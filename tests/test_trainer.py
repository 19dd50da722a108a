"""The TRL trainer with vocabulary dropout, on the tiny random model (CPU)."""

from __future__ import annotations

import logging

import pytest
import torch
from datasets import Dataset

from vdlib.config.experiment import GRPOConfig
from vdlib.engines.models import load_model
from vdlib.loop.trainer import MaskedGRPOTrainer, trl_args
from vdlib.method.prompts import proposer_prompt
from vdlib.method.vocab_dropout import VocabDropout, mask_seed

TINY = GRPOConfig(global_batch_size=1, rollout_batch_size=1, num_generations=4,
                  micro_batch_size_update=4, max_response_length=8, max_steps=2,
                  precision="float32", gradient_checkpointing=False, learning_rate=1e-2,
                  temperature=1.5)


class RecordingReward:
    __name__ = "recording_reward"

    def __init__(self):
        self.completion_ids = []

    def __call__(self, prompts, completions, completion_ids, **kwargs):
        self.completion_ids.append(completion_ids)
        return [float(len(c)) for c in completion_ids]  # varied rewards: non-zero advantages


def _trainer(tmp_path, g=TINY, alpha=0.5, loss_variant="grpo", offload_max_grad_norm=None,
             **kw):
    model, tok = load_model("tiny-random", device="cpu")
    path = tmp_path / "model"  # TRL builds the reference model (beta > 0) from a path
    model.save_pretrained(path)
    tok.save_pretrained(path)
    data = Dataset.from_dict({"prompt": [proposer_prompt(tok)] * 4})
    vd = VocabDropout.for_model(model, tok, alpha=alpha) if alpha is not None else None
    reward = RecordingReward()
    args = trl_args(g, output_dir=str(tmp_path), seed=0, use_cpu=True, masked=vd is not None,
                    **kw)
    trainer = MaskedGRPOTrainer(
        model=str(path), reward_funcs=[reward], args=args, train_dataset=data,
        processing_class=tok, vocab_dropout=vd,
        mask_seed_fn=(lambda step: mask_seed(0, 1, "train", step)) if vd else None,
        loss_variant=loss_variant, offload_max_grad_norm=offload_max_grad_norm)
    return trainer, reward, vd, trainer.model


def test_masked_training_changes_parameters_and_never_samples_dropped_ids(tmp_path, capsys,
                                                                          caplog):
    trainer, reward, vd, model = _trainer(tmp_path)
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    capsys.readouterr()
    with caplog.at_level(logging.DEBUG, logger="vdlib.loop.trainer_logs"):
        trainer.train()
    # the per-step dicts go to logging (vdlib.loop.trainer_logs), not stdout
    assert "'loss'" not in capsys.readouterr().out
    steps = [r.getMessage() for r in caplog.records if r.name == "vdlib.loop.trainer_logs"]
    assert any(m.startswith("step 1: ") and "'loss'" in m for m in steps), steps
    changed = [k for k, v in model.named_parameters() if not torch.equal(v, before[k])]
    assert changed, "no parameter changed after training"
    assert len(trainer.mask_log) == 2 and len(reward.completion_ids) == 2
    for entry, batch in zip(trainer.mask_log, reward.completion_ids, strict=True):
        allowed = vd.sample(entry["mask_seed"])
        assert entry["mask_seed"] == mask_seed(0, 1, "train", entry["step"])
        assert abs(entry["kept_fraction"] - 0.5) < 0.02
        for ids in batch:
            assert all(bool(allowed[t]) for t in ids), "a dropped id was sampled"
    assert trainer.mask_log[0]["mask_seed"] != trainer.mask_log[1]["mask_seed"]


@pytest.mark.slow  # 27 s on 2 cores; the variants' selection: tests/test_kl_cov_fidelity.py
@pytest.mark.parametrize("variant", ["kl_cov", "clip_cov"])
def test_cov_variants_train(tmp_path, variant):
    g = GRPOConfig(**{**TINY.__dict__, "ppo_mini_batches": 2})  # off-policy steps for KL-Cov
    trainer, _, _, model = _trainer(tmp_path, g=g, loss_variant=variant)
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    trainer.train()
    assert any(not torch.equal(v, before[k]) for k, v in model.named_parameters())
    logged = [row for row in trainer.state.log_history if f"{variant}/n_selected" in row]
    assert len(logged) == 4  # 2 rollout batches x 2 mini-batches, one log row per step
    if variant == "kl_cov":  # each batch's first step is on-policy, its second is not
        assert [row["kl_cov/n_active"] > 0 for row in logged] == [False, True, False, True]
        assert [row["kl_cov/penalty"] > 0 for row in logged] == [False, True, False, True]


def test_kl_cov_inert_arm_logs_a_zero_term(tmp_path):
    """KL-Cov at one on-policy update per rollout batch with the old log-probs recomputed padded
    like the update (``cov_old_logprobs: recompute``, arm ``kl_cov_inert``): its logged term is
    exactly 0 at every step (docs/coevolution.md; the packed default that acts:
    tests/test_kl_cov_fidelity.py)."""
    trainer, _, _, _ = _trainer(tmp_path, loss_variant="kl_cov")
    trainer.cov["old_logprobs"] = "recompute"
    trainer.train()
    logged = [row for row in trainer.state.log_history if "kl_cov/penalty" in row]
    assert len(logged) == 2 and all(row["kl_cov/n_selected"] >= 1 for row in logged)
    assert all(row["kl_cov/penalty"] == 0.0 and row["kl_cov/n_active"] == 0 for row in logged)


def test_trl_args_mapping(tmp_path):
    paper = GRPOConfig()  # proposer column: 16 prompts x G 4 per step, micro-batch 2
    args = trl_args(paper, output_dir=str(tmp_path), seed=1, use_cpu=True)
    assert args.per_device_train_batch_size * args.gradient_accumulation_steps == 64
    assert args.num_generations == 4 and args.beta == 0.01 and args.learning_rate == 1e-6
    assert args.vllm_importance_sampling_correction is False  # verl (the paper's) has none
    switched = GRPOConfig(rollout_is_correction=True)
    assert trl_args(switched, output_dir=str(tmp_path), seed=1,
                    use_cpu=True).vllm_importance_sampling_correction is True
    masked = trl_args(switched, output_dir=str(tmp_path), seed=1, use_cpu=True, masked=True)
    assert masked.vllm_importance_sampling_correction is False  # never under a mask
    with pytest.raises(ValueError, match="multiple"):
        trl_args(GRPOConfig(rollout_batch_size=10), output_dir=str(tmp_path), seed=0)


def test_training_dtypes_keep_fp32_masters_on_gpu():
    from vdlib.loop.trainer import training_dtypes

    assert training_dtypes("bfloat16", use_cpu=False) == ("float32", "bfloat16")
    assert training_dtypes("float16", use_cpu=False) == ("float32", "float16")
    assert training_dtypes("float32", use_cpu=False) == ("float32", "float32")
    assert training_dtypes("bfloat16", use_cpu=True) == ("float32", "float32")
    # optimizer_offload: the GPU weights in the low precision, the fp32 masters on the CPU
    assert training_dtypes("bfloat16", False, optimizer_offload=True) == ("bfloat16", "bfloat16")
    assert training_dtypes("bfloat16", True, optimizer_offload=True) == ("float32", "float32")


@pytest.mark.slow  # ~13 s on 2 cores: `make test-slow` (make test keeps within its budget)
def test_offloaded_adamw_trains_as_transformers_adamw(tmp_path):
    """optimizer_offload through TRL: the trainer's clipping is off, the offloaded AdamW clips
    at the role's norm, and two GRPO steps end at transformers' AdamW's weights, drawing the
    same rollouts."""
    import dataclasses

    g = dataclasses.replace(TINY, optimizer_offload=True)
    args = trl_args(g, output_dir=str(tmp_path / "a"), seed=0, use_cpu=True)
    assert args.max_grad_norm == 0 and trl_args(TINY, output_dir=str(tmp_path / "b"), seed=0,
                                                use_cpu=True).max_grad_norm == 1.0
    runs = {}
    for name, norm in (("plain", None), ("offload", g.max_grad_norm)):
        gg = g if norm is not None else TINY
        trainer, reward, _, model = _trainer(tmp_path / name, g=gg, offload_max_grad_norm=norm)
        trainer.train()
        runs[name] = ({k: v.detach().clone() for k, v in model.named_parameters()},
                      reward.completion_ids, trainer)
    assert runs["plain"][1] == runs["offload"][1]
    from vdlib.loop.offload import OffloadedAdamW

    opt = runs["offload"][2].optimizer
    assert isinstance(getattr(opt, "optimizer", opt), OffloadedAdamW)
    for k, v in runs["plain"][0].items():
        torch.testing.assert_close(runs["offload"][0][k], v, rtol=1e-5, atol=1e-6, msg=k)
    norms = [h["grad_norm"] for h in runs["offload"][2].state.log_history if "grad_norm" in h]
    plain = [h["grad_norm"] for h in runs["plain"][2].state.log_history if "grad_norm" in h]
    assert norms == pytest.approx(plain, rel=1e-4) and len(norms) == 2


def test_trl_args_gpu_autocast_reference_model_and_processes(tmp_path, monkeypatch):
    import trl

    monkeypatch.setattr(trl, "GRPOConfig", lambda **kw: kw)  # no GPU here: inspect the kwargs
    kw = trl_args(GRPOConfig(), output_dir=str(tmp_path), seed=0, use_cpu=False,
                  num_processes=2)
    assert kw["bf16"] is True and kw["fp16"] is False
    # reference model: bf16, never spread over the GPUs with device_map="auto"
    assert kw["model_init_kwargs"] == {"dtype": "bfloat16", "device_map": None}
    # the paper's 16 x 4 = 64 completions per step stay global over 2 processes
    assert kw["per_device_train_batch_size"] * kw["gradient_accumulation_steps"] * 2 == 64
    cpu = trl_args(GRPOConfig(), output_dir=str(tmp_path), seed=0, use_cpu=True)
    assert cpu["bf16"] is False and cpu["model_init_kwargs"]["dtype"] == "float32"


@pytest.mark.parametrize("alpha", [None, 0.5])
def test_rollouts_through_the_nucleus_filter_are_transformers_own(tmp_path, alpha):
    """TRL's transformers rollouts (temperature 1.5, top-p 0.99) sample through vdlib's
    processors (a top-p that sorts no full vocabulary): the same completions as TRL's own
    warpers under the same seed, with and without the mask; the config comes back intact."""
    import contextlib

    trainer, _, _, _ = _trainer(tmp_path, alpha=alpha)
    prompt = trainer.processing_class(proposer_prompt(trainer.processing_class),
                                      add_special_tokens=False)["input_ids"]
    saved = (trainer.generation_config.temperature, trainer.generation_config.top_p)
    assert saved == (1.5, 0.99)

    def rollouts():
        torch.manual_seed(0)
        return trainer._generate_single_turn([prompt] * 4, None, {}, 4)[0]

    from vdlib.engines.sampling import NucleusFilter

    seen = []
    real = NucleusFilter.__call__
    NucleusFilter.__call__ = lambda self, ids, scores: seen.append(1) or real(self, ids, scores)
    try:
        ours = rollouts()
    finally:
        NucleusFilter.__call__ = real
    assert seen, "the rollouts did not go through the nucleus filter"
    assert (trainer.generation_config.temperature, trainer.generation_config.top_p) == saved
    assert "generate" not in vars(trainer.accelerator.unwrap_model(trainer.model))
    trainer._nucleus_filter = contextlib.nullcontext
    assert rollouts() == ours


class ConstantReward(RecordingReward):
    def __call__(self, prompts, completions, completion_ids, **kwargs):
        self.completion_ids.append(completion_ids)
        return [0.5] * len(completion_ids)  # one group, equal rewards: every advantage 0


class IndexReward(RecordingReward):
    def __call__(self, prompts, completions, completion_ids, **kwargs):
        return [float(i) for i in range(len(completion_ids))]  # distinct: advantages != 0


def test_skip_null_backward_leaves_the_weights_only_where_the_gradient_is_zero(tmp_path):
    """skip_null_backward: with all advantages 0 at the phase's first step, the backward (and
    AdamW's weight decay, the only change such a step makes: 0.05 of each weight here) is
    skipped, and the loss and entropy are still logged; with varied rewards it never fires."""
    from dataclasses import replace

    g = replace(TINY, max_steps=1, weight_decay=0.5, learning_rate=0.1)
    for reward, skipped in ((ConstantReward(), True), (IndexReward(), False)):
        trainer, _, _, model = _trainer(tmp_path / str(skipped), g=g, alpha=None)
        trainer.reward_funcs, trainer.skip_null_backward = [reward], True
        before = {k: v.detach().clone() for k, v in model.named_parameters()}
        trainer.train()
        same = all(torch.equal(v, before[k]) for k, v in model.named_parameters())
        assert same is skipped
        logged = trainer.state.log_history[0]
        assert "entropy" in logged and (logged["reward_std"] == 0.0) is skipped


def test_log_not_print_swaps_only_the_printing_callbacks():
    from types import SimpleNamespace

    from transformers.trainer_callback import (
        DefaultFlowCallback,
        PrinterCallback,
        ProgressCallback,
    )

    from vdlib.loop.trainer_logs import LogRecordCallback, QuietProgressCallback, log_not_print

    flow = DefaultFlowCallback()
    for printing, quiet in ((ProgressCallback(max_str_len=7), QuietProgressCallback),
                            (PrinterCallback(), LogRecordCallback)):
        trainer = SimpleNamespace(callback_handler=SimpleNamespace(callbacks=[flow, printing]))
        log_not_print(trainer)
        assert trainer.callback_handler.callbacks[0] is flow
        assert type(trainer.callback_handler.callbacks[1]) is quiet
    assert trainer.callback_handler.callbacks[1].on_log(
        None, SimpleNamespace(is_world_process_zero=True, global_step=3), None,
        logs={"loss": 1.0}) is None
