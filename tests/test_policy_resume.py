"""Single-policy GRPO goes on from its last checkpoint (``single_policy.checkpoint_every``), on
the tiny random model (CPU)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from vdlib.config.experiment import GRPOConfig
from vdlib.engines.models import load_model
from vdlib.loop import policy
from vdlib.method.vocab_dropout import VocabDropout, mask_seed

G = GRPOConfig(global_batch_size=1, rollout_batch_size=1, num_generations=4,
               micro_batch_size_update=4, max_response_length=8, max_steps=2,
               precision="float32", gradient_checkpointing=False)
PROBLEMS = [{"question": "What is 2+3?", "answer": "5"},
            {"question": "What is 4+4?", "answer": "8"}]


def _train(tmp_path, work, g=G):
    model, tok = load_model("tiny-random", device="cpu")
    path = tmp_path / "model"  # TRL builds the reference model (beta > 0) from a path
    if not path.exists():
        model.save_pretrained(path)
        tok.save_pretrained(path)
    model, tok = load_model(str(path), device="cpu")
    vd = VocabDropout.for_model(model, tok, alpha=0.5)
    return policy.grpo_on_problems(model, tok, PROBLEMS, g, work, seed=3, use_cpu=True,
                                   vocab_dropout=vd, mask_seed_fn=lambda s: mask_seed(0, 1,
                                                                                      "train", s),
                                   checkpoint_every=1)


def _kill_after_step(monkeypatch, step: int):
    """The run is killed just after it saved the checkpoint of ``step``; returns the original
    ``on_save`` (to set back for a resume)."""
    original = policy._SavedState.on_save

    def killed(self, args, state, control, **kw):
        original(self, args, state, control, **kw)
        if state.global_step == step:
            raise KeyboardInterrupt("killed")

    monkeypatch.setattr(policy._SavedState, "on_save", killed)
    return original


def test_a_killed_run_goes_on_from_its_last_checkpoint(tmp_path, monkeypatch):
    work = tmp_path / "trl"
    original = _kill_after_step(monkeypatch, 1)
    with pytest.raises(KeyboardInterrupt):
        _train(tmp_path, work)
    assert policy.last_checkpoint(work).name == "checkpoint-1"
    saved = json.loads((work / "checkpoint-1" / policy._SavedState.FILE).read_text())
    assert len(saved["mask_log"]) == 1 and len(saved["reward_records"]) == 1 * 4
    # a checkpoint cut short (no state file, written last) is passed over
    (work / "checkpoint-2").mkdir()
    assert policy.last_checkpoint(work).name == "checkpoint-1"
    (work / "checkpoint-2").rmdir()

    monkeypatch.setattr(policy._SavedState, "on_save", original)
    trainer, reward = _train(tmp_path, work)
    assert trainer.state.global_step == 2
    assert [m["step"] for m in trainer.mask_log] == [0, 1]  # every step, the first restored
    assert len(reward.records) == 2 * 4
    steps = [h for h in trainer.state.log_history if "loss" in h]
    assert len(steps) == 2  # TRL's log history came back with the checkpoint
    assert not work.exists()  # finished: the scratch folder goes


def test_only_the_two_newest_checkpoints_are_kept(tmp_path, monkeypatch):
    """Six 100-step runs kept every checkpoint and filled a lent machine's 64 GB disk (stop 47);
    the older of the two kept is complete while the newest is still being written."""
    work = tmp_path / "trl"
    _kill_after_step(monkeypatch, 3)
    with pytest.raises(KeyboardInterrupt):
        _train(tmp_path, work, dataclasses.replace(G, max_steps=4))
    assert sorted(d.name for d in work.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-3"]
    assert policy.last_checkpoint(work).name == "checkpoint-3"


def test_checkpoint_every_is_a_validated_setting():
    from vdlib.config.experiment import ConfigError, load_params

    assert load_params({"profile": "tiny"}).single_policy.checkpoint_every == 0
    with pytest.raises(ConfigError, match="single_policy.checkpoint_every"):
        load_params({"profile": "tiny", "single_policy": {"checkpoint_every": -1}})
