"""GRPO of one policy on a fixed problem set with a binary correctness reward.

Three places train a policy this way:

- the loop's solver phase (vdlib.loop.coevolution): the filtered curriculum, target = the
  proposer's (or the majority) answer, no mask;
- curriculum transfer (paper Sec. "Curriculum quality in isolation", notebook 03): a fresh
  model on an externally verified curriculum for ``transfer.epochs`` epochs
  (:func:`train_transfer`);
- single-policy GRPO (paper App. "Vocabulary dropout outside co-evolution", notebook 04):
  GSM8K training problems, with the vocabulary-dropout mask on the policy's rollouts when the
  arm's alpha < 1 (:func:`run_single_policy`).

:func:`grpo_on_problems` is the shared core: solver prompts,
:class:`vdlib.loop.grpo_rewards.SolverReward`, ``MaskedGRPOTrainer``; it returns the trained
trainer (the caller saves the model). Each run writes atomically and is skipped when its model
folder exists (resume).
"""

from __future__ import annotations

import json
import logging
import math
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from transformers import TrainerCallback

from vdlib.config import layout
from vdlib.config.experiment import ExperimentConfig, GRPOConfig, load_params
from vdlib.config.mask_settings import mask_schedule, mask_spec
from vdlib.loop.distributed import open_run
from vdlib.method.prompts import solver_prompt
from vdlib.method.seeding import derive_seed
from vdlib.utils.artifacts import atomic_write_json, read_jsonl

__all__ = ["grpo_on_problems", "train_log", "training_problems", "train_transfer",
           "run_single_policy"]

logger = logging.getLogger(__name__)


def grpo_on_problems(model: Any, tok: Any, problems: Sequence[dict[str, Any]], g: GRPOConfig,
                     work_dir: Path, *, seed: int, use_cpu: bool, rows: int | None = None,
                     max_steps: int | None = None, vocab_dropout: Any = None,
                     mask_seed_fn: Callable[[int], int] | None = None,
                     engine: Any = None,
                     tracked: Callable[[], Any] | None = None,
                     run_engine: Any = None,
                     checkpoint_every: int = 0) -> tuple[Any, Any]:
    """Train ``model`` with GRPO on ``problems`` (``question``, ``answer``) in solver prompts,
    reward 1 when the last ``\\boxed{}`` is equivalent to ``answer``. The data are the problems
    cycled to ``rows`` rows (default: enough for ``g.max_steps`` rollout batches); the mask,
    when given, acts on rollouts only. Returns ``(trainer, reward)`` after training; TRL's
    scratch folder ``work_dir`` is removed. ``engine`` (an
    :class:`~vdlib.config.experiment.EngineConfig`) routes TRL's rollouts through vLLM
    (vdlib.engines.setting.trl_vllm_args); None = transformers. ``tracked()``: a context manager
    yielding TRL arguments (:func:`vdlib.utils.tracking.tracked_trainer`) inside which the trainer
    is built and trained. ``run_engine``: the run's engine, handed to TRL's colocated rollouts
    (:meth:`vdlib.loop.model_store.ModelStore.run_engine`; with ``engine``, through
    :func:`vdlib.engines.setting.rollout_setting`). ``checkpoint_every`` > 0:
    TRL saves a checkpoint every that many GRPO steps in ``work_dir`` (weights, optimizer,
    scheduler, RNG, log history, and vdlib's mask log and reward records) and a call that finds
    one goes on from the last (:func:`last_checkpoint`)."""
    import contextlib

    from datasets import Dataset

    from vdlib.loop.distributed import is_main_process, world_size
    from vdlib.loop.grpo_rewards import SolverReward
    from vdlib.loop.offload import role_max_grad_norm
    from vdlib.loop.trainer import (
        MaskedGRPOTrainer,
        cov_settings,
        release_rollout_engine,
        trl_args,
    )

    if not problems:
        raise ValueError("grpo_on_problems needs at least one problem")
    n = rows if rows is not None else max(len(problems), g.max_steps * g.rollout_batch_size)
    data_rows = [problems[i % len(problems)] for i in range(n)]
    data = Dataset.from_dict({"prompt": [solver_prompt(tok, r["question"]) for r in data_rows],
                              "answer": [r["answer"] for r in data_rows]})
    reward = SolverReward()
    overrides: dict[str, Any] = {"max_steps": max_steps} if max_steps is not None else {}
    if checkpoint_every > 0:  # TRL counts optimizer steps: ppo_mini_batches per GRPO step
        # the two newest only: a run resumes from the last complete one (the newest lacks
        # vdlib's state file until on_save, after TRL's rotation), and every checkpoint kept
        # (~1.6 GB each at 135M with AdamW) filled a 64 GB disk with six runs of 100 steps
        overrides.update(save_strategy="steps", save_steps=checkpoint_every * g.ppo_mini_batches,
                         save_total_limit=2)
    rollout = None  # transformers rollouts, TRL's default
    if engine is not None:
        from vdlib.engines.setting import rollout_setting

        longest = max(len(tok(p, add_special_tokens=False)["input_ids"])
                      for p in data["prompt"][: min(len(data), 4096)])
        rollout = rollout_setting(engine, longest, g.max_response_length, run_engine)
        overrides.update(rollout.trl_args)
    with tracked() if tracked is not None else contextlib.nullcontext({}) as tracking_args:
        args = trl_args(g, output_dir=str(work_dir), use_cpu=use_cpu, seed=seed % 2**31,
                        masked=vocab_dropout is not None, num_processes=world_size(),
                        **overrides, **tracking_args)
        trainer = MaskedGRPOTrainer(model=model, reward_funcs=[reward], args=args,
                                    train_dataset=data, processing_class=tok,
                                    vocab_dropout=vocab_dropout, mask_seed_fn=mask_seed_fn,
                                    loss_variant=g.loss_variant, cov=cov_settings(g),
                                    offload_max_grad_norm=role_max_grad_norm(g),
                                    skip_null_backward=g.skip_null_backward,
                                    rollout_llm_kwargs=rollout.llm_kwargs if rollout else {},
                                    rollout_llm_factory=rollout.llm_factory if rollout else None)
        resume = last_checkpoint(work_dir) if checkpoint_every > 0 else None
        if checkpoint_every > 0:
            trainer.add_callback(_SavedState(trainer, reward))
        if resume is not None:
            _SavedState.restore(resume, trainer, reward)
            logger.info("GRPO goes on from %s", resume)
        trainer.train(resume_from_checkpoint=str(resume) if resume is not None else None)
    release_rollout_engine(trainer)
    if is_main_process():
        shutil.rmtree(work_dir, ignore_errors=True)
    return trainer, reward


def last_checkpoint(work_dir: Path) -> Path | None:
    """The newest complete TRL checkpoint (``checkpoint-<step>`` with vdlib's state file) in
    ``work_dir``, or None. A checkpoint cut short by a kill lacks the state file, which is
    written last, and is passed over."""
    found = []
    for d in Path(work_dir).glob("checkpoint-*") if Path(work_dir).is_dir() else []:
        step = d.name.split("-", 1)[1]
        if step.isdigit() and (d / _SavedState.FILE).is_file():
            found.append((int(step), d))
    return max(found)[1] if found else None


class _SavedState(TrainerCallback):
    """Writes, into each checkpoint TRL saves, what the trainer does not keep: the mask log and
    the reward's records (a resumed run's logs then cover every step)."""

    FILE = "vdlib_state.json"

    def __init__(self, trainer: Any, reward: Any) -> None:
        self.trainer, self.reward = trainer, reward

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        from vdlib.loop.distributed import rank
        from vdlib.utils.artifacts import atomic_write_json

        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        name = self.FILE if rank() == 0 else f"vdlib_state_rank{rank()}.json"
        atomic_write_json(folder / name, {"mask_log": self.trainer.mask_log,
                                          "reward_records": self.reward.records})

    @classmethod
    def restore(cls, folder: Path, trainer: Any, reward: Any) -> None:
        from vdlib.loop.distributed import rank

        name = cls.FILE if rank() == 0 else f"vdlib_state_rank{rank()}.json"
        saved = json.loads((folder / name).read_text(encoding="utf-8"))
        trainer.mask_log[:] = saved["mask_log"]
        reward.records[:] = saved["reward_records"]


def train_log(trainer: Any, reward: Any) -> dict[str, Any]:
    """Mean reward (over every rank's rollouts: call it on every rank) and TRL's log history
    without wall-clock fields (deterministic)."""
    from vdlib.loop.distributed import gather_to_main
    from vdlib.loop.trainer import split_timing

    rewards = [r["reward"] for r in reward.records]
    per_rank = gather_to_main(rewards)
    if per_rank is not None:
        rewards = [x for rs in per_rank for x in rs]
    return {"mean_reward": float(np.mean(rewards)) if rewards else None,
            **split_timing(trainer.state.log_history)}


# ----------------------------------------------------------------------------- transfer


def train_transfer(cfg: ExperimentConfig, curriculum: str | Path, out_dir: str | Path) -> Path:
    """GRPO a fresh ``model.transfer`` (format-warm-started in the tiny profile) on a verified
    curriculum (``curriculum.jsonl`` of
    :func:`vdlib.evaluation.verification.build_transfer_dataset`) for ``transfer.epochs`` epochs (at
    most ``transfer.max_steps`` steps). Writes ``<out_dir>/model/`` and ``<out_dir>/train.json``;
    returns the model folder (existing: kept, nothing retrained). An empty curriculum leaves the
    fresh model untrained, and says so."""
    from vdlib.loop.model_store import ModelStore

    out_dir = Path(out_dir)
    target = out_dir / "model"
    if (target / "config.json").exists():
        logger.info("transfer model %s exists; skipped", target)
        return target
    problems = read_jsonl(curriculum)
    store = ModelStore(cfg)
    base = store.base(cfg.model.transfer, "transfer")
    model, tok = store.load_policy(base, cfg.transfer)
    g = cfg.transfer
    if not problems:
        logger.warning("%s is empty: the transfer model stays untrained", curriculum)
        store.save_pretrained(model, tok, target)
        atomic_write_json(out_dir / "train.json", {"skipped": "empty curriculum",
                                                   "base": base})
        return target
    rows = len(problems) * g.epochs
    steps = min(g.max_steps, math.ceil(rows / g.global_batch_size))
    trainer, reward = grpo_on_problems(
        model, tok, problems, g, out_dir / ".trl", seed=derive_seed(cfg.seed, "transfer", 0),
        use_cpu=store.use_cpu, rows=max(rows, steps * g.rollout_batch_size), max_steps=steps,
        engine=cfg.engine)
    store.save_model(trainer, tok, target)
    atomic_write_json(out_dir / "train.json", {"base": base, "problems": len(problems),
                                               "epochs": g.epochs, "steps": steps,
                                               **train_log(trainer, reward)})
    return target


# ----------------------------------------------------------------------------- single policy


def training_seed(seed: int) -> int:
    """The reasoning-gym seed of a run's ``gsm_symbolic`` training problems (disjoint from the
    evaluation stand-in's seeds)."""
    return 10_000 + seed


def training_problems(dataset: str, limit: int | None, seed: int,
                      data_dir: str | None = None) -> list[dict[str, Any]]:
    """Training problems (``question``, ``answer``) for single-policy GRPO: ``gsm8k`` = the
    Hub's ``openai/gsm8k`` (main) train split, gold after ``#### ``; ``gsm_symbolic`` =
    reasoning-gym items from :func:`training_seed`, or their copy in ``data_dir``
    (:func:`vdlib.evaluation.benchmarks.write_stand_in_copy`) where one was written."""
    if dataset == "gsm_symbolic":
        from vdlib.evaluation import load_benchmark

        items = load_benchmark("gsm_symbolic", data_dir=data_dir, limit=limit,
                               seed=training_seed(seed))
        return [{"question": it["problem"], "answer": it["answer"]} for it in items]
    if dataset == "gsm8k":
        from datasets import load_dataset

        from vdlib.evaluation import gsm8k_gold

        rows = load_dataset("openai/gsm8k", "main", split="train")
        out = [{"question": r["question"], "answer": gsm8k_gold(r["answer"])} for r in rows]
        return out[:limit] if limit is not None else out
    raise ValueError(f"single_policy.dataset = {dataset!r}; allowed: gsm8k, gsm_symbolic")


def run_single_policy(config: ExperimentConfig | dict | str) -> Path:
    """One single-policy GRPO run (one arm, one seed) of ``config``: the ``solver`` section's
    GRPO on :func:`training_problems`, the ``vocab_dropout`` mask on every rollout batch when
    alpha < 1 and the train phase is on (a fresh mask per step, seeded from
    ``(seed, 1, "train", step)``). Writes ``policy_model/`` and ``policy_train.json`` (its
    ``log_history`` holds the per-step policy ``entropy``) in the run folder; returns it.

    The folder is claimed first (:func:`vdlib.runs.run_state.claim_run`, as a co-evolution run):
    locked, and refused with the differing keys when it holds a run of another config (another
    ``warm_start``, say), whose checkpoints would otherwise be resumed or whose model kept."""
    cfg = config if isinstance(config, ExperimentConfig) else load_params(config)
    lock, run_dir = open_run(cfg)
    try:
        return _single_policy(cfg, run_dir)
    finally:
        if lock is not None:
            lock.release()


def _single_policy(cfg: ExperimentConfig, run_dir: Path) -> Path:
    """:func:`run_single_policy` in its claimed folder."""
    from vdlib.loop.model_store import ModelStore
    from vdlib.method.vocab_dropout import mask_seed, phase_mask

    store = ModelStore(cfg, run_dir)
    target = layout.policy_model_dir(run_dir)
    if (target / "config.json").exists():
        logger.info("single-policy model %s exists; skipped", target)
        return run_dir
    sp = cfg.single_policy
    problems = training_problems(sp.dataset, sp.train_examples, cfg.seed,
                                 cfg.evaluation.data_dir)
    model, tok = store.load_policy(store.base(cfg.model.proposer, "policy"), cfg.solver)
    vd = phase_mask(mask_schedule(cfg), mask_spec(cfg), 1, "train", tok, model=model)
    trainer, reward = grpo_on_problems(
        model, tok, problems, cfg.solver, run_dir / ".trl_policy",
        seed=derive_seed(cfg.seed, "policy", 1), use_cpu=store.use_cpu, vocab_dropout=vd,
        mask_seed_fn=(lambda step: mask_seed(cfg.seed, 1, "train", step)) if vd else None,
        engine=cfg.engine, checkpoint_every=sp.checkpoint_every)
    atomic_write_json(run_dir / layout.POLICY_TRAIN_FILE, {
        "dataset": sp.dataset, "problems": len(problems), "alpha_train": vd.alpha if vd else 1.0,
        "masked": vd is not None, "mask_log": trainer.mask_log, **train_log(trainer, reward)})
    store.save_model(trainer, tok, target)
    return run_dir
