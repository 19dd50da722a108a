"""The stages of one co-evolution iteration (paper Algorithm 1), each a plain function, and the
table that declares them.

Every stage is ``fn(store, t, out)``: ``store`` is the run's
:class:`~vdlib.loop.model_store.ModelStore` (its config, checkpoints and engines), ``t`` the
iteration, ``out`` its folder ``iter_<t>``. A stage reads its inputs from disk and ends with an
atomic write of its done-marker, so the runner (:mod:`vdlib.loop.coevolution`) can skip it on
resume. :data:`STAGE_TABLE` lists them in order with their done-marker and whether every rank runs
them (the GRPO stages) or only the main process.

Where things happen:
- the vocabulary mask: :func:`vdlib.method.vocab_dropout.phase_mask` decides it per phase (``train``
  for GRPO rollouts in :func:`proposer`, ``gen`` for :func:`generate`), its alpha from the
  schedule and, for the adaptive one, the run's earlier metrics (:mod:`vdlib.loop.alpha_records`);
  the engines and the trainer apply it;
- the proposer reward: :class:`vdlib.loop.grpo_rewards.ProposerReward`, called by TRL inside
  :func:`proposer`, with the frozen solver's engine;
- the difficulty window: :func:`vdlib.method.curriculum.filter_curriculum` in :func:`curriculum`.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vdlib.config.mask_settings import mask_schedule, mask_spec
from vdlib.engines.models import load_model, load_tokenizer
from vdlib.engines.setting import rollout_setting
from vdlib.loop.alpha_records import (
    alpha_history,
    check_recorded_decision,
    decision_record,
    run_phase_alphas,
)
from vdlib.loop.distributed import (
    gather_to_main,
    is_main_process,
    merge_rank_records,
    rank,
    world_size,
)
from vdlib.loop.model_store import ModelStore
from vdlib.loop.proposals import generate_proposals, proposal_records
from vdlib.loop.scoring import score_questions
from vdlib.method.curriculum import filter_curriculum
from vdlib.method.mask_schedule import phase_alphas
from vdlib.method.prompts import proposer_prompt
from vdlib.method.seeding import derive_seed
from vdlib.method.vocab_dropout import mask_seed, phase_mask
from vdlib.utils.artifacts import atomic_write_json, read_jsonl, write_jsonl

__all__ = ["Stage", "STAGE_TABLE", "STAGES", "TRAINING_STAGES", "proposer", "generate", "score",
           "curriculum", "solver", "metrics"]

logger = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- stages


def proposer(store: ModelStore, t: int, out: Path) -> None:
    """GRPO of the proposer (train-phase mask per rollout batch), rewarded by the FROZEN solver
    of iteration t-1. Writes ``proposer_rollouts.jsonl``, ``proposer_train.json``, then
    ``proposer_model/``."""
    cfg = store.cfg
    # the frozen solver's engine first (one per rank), then the policy and TRL's rollouts
    with store.engine(store.solver(t - 1), cfg.scoring.max_new_tokens,
                      seed=derive_seed(cfg.seed, "proposer-score-engine", t),
                      training=True) as solver_engine:
        _train_proposer(store, t, out, solver_engine)


def _tracked(store: ModelStore, out: Path, role: str) -> Callable[[], Any]:
    """The tracking context of one GRPO trainer of the run (``<iter_t>/<role>``)."""
    from vdlib.config.layout import run_id
    from vdlib.utils.tracking import tracked_trainer

    cfg = store.cfg
    return lambda: tracked_trainer(cfg.tracking, store.run_dir, run_id(cfg),
                                   f"{out.name}/{role}", project=cfg.experiment)


def _train_proposer(store: ModelStore, t: int, out: Path, solver_engine: Any) -> None:
    from datasets import Dataset

    from vdlib.loop.grpo_rewards import ProposerReward
    from vdlib.loop.offload import role_max_grad_norm
    from vdlib.loop.trainer import (
        MaskedGRPOTrainer,
        cov_settings,
        release_rollout_engine,
        split_timing,
        trl_args,
    )

    cfg, g = store.cfg, store.cfg.proposer
    model, tok = store.load_policy(store.proposer(t - 1), g)
    history = alpha_history(cfg, store.run_dir, t)  # adaptive schedule: metrics of 1 .. t-1
    schedule = mask_schedule(cfg)
    vd = phase_mask(schedule, mask_spec(cfg), t, "train", tok, model=model, history=history)
    prompt = proposer_prompt(tok)
    prompts = [prompt] * (g.max_steps * g.rollout_batch_size)
    trainer_box: list[Any] = []
    # each rank scores its own rollouts; rank 0 keeps the single-process seed
    reward = ProposerReward(solver_engine, load_tokenizer(store.solver(t - 1)), cfg.scoring,
                            seed=derive_seed(cfg.seed, "proposer-score", t) + 1_000_003 * rank(),
                            trainer_ref=lambda: trainer_box[0] if trainer_box else None)
    prompt_tokens = len(tok(prompt, add_special_tokens=False)["input_ids"])
    # one call: TRL's rollout engine, its keywords, and the run's engine handed to TRL
    rollout = rollout_setting(cfg.engine, prompt_tokens, g.max_response_length, store.run_engine())
    with _tracked(store, out, "proposer")() as tracking_args:
        args = trl_args(g, output_dir=str(out / ".trl_proposer"), use_cpu=store.use_cpu,
                        seed=derive_seed(cfg.seed, "proposer", t) % 2**31,
                        masked=vd is not None, num_processes=world_size(),
                        **rollout.trl_args, **tracking_args)
        trainer = MaskedGRPOTrainer(
            model=model, reward_funcs=[reward], args=args,
            train_dataset=Dataset.from_dict({"prompt": prompts}), processing_class=tok,
            vocab_dropout=vd,
            mask_seed_fn=(lambda step: mask_seed(cfg.seed, t, "train", step)) if vd else None,
            loss_variant=g.loss_variant, rollout_llm_kwargs=rollout.llm_kwargs,
            rollout_llm_factory=rollout.llm_factory,
            cov=cov_settings(g), offload_max_grad_norm=role_max_grad_norm(g),
            skip_null_backward=g.skip_null_backward)
        trainer_box.append(trainer)
        trainer.train()
    release_rollout_engine(trainer)
    per_rank = gather_to_main(reward.records)
    if is_main_process():
        write_jsonl(out / "proposer_rollouts.jsonl", merge_rank_records(per_rank))
        atomic_write_json(out / "proposer_train.json", {
            "alpha_train": phase_alphas(schedule, t, history)["train"], "masked": vd is not None,
            **decision_record(cfg, history, t),
            "rollout_engine": rollout.mode,
            "mask_log": trainer.mask_log, **split_timing(trainer.state.log_history)})
    store.save_model(trainer, tok, out / "proposer_model")
    trainer_box.clear()  # the reward's reference to the trainer: no cycle keeps it alive
    if is_main_process():
        shutil.rmtree(out / ".trl_proposer", ignore_errors=True)


def generate(store: ModelStore, t: int, out: Path) -> None:
    """The trained proposer writes K questions, a fresh gen-phase mask per batch. Writes
    ``generated.jsonl``."""
    cfg = store.cfg
    path = store.proposer(t)
    tok = load_tokenizer(path)
    check_recorded_decision(cfg, store.run_dir, t)
    vd = phase_mask(mask_schedule(cfg), mask_spec(cfg), t, "gen", tok, path=path,
                    history=alpha_history(cfg, store.run_dir, t))
    with store.engine(path, cfg.curriculum.max_new_tokens, batch_size=cfg.curriculum.batch_size,
                      seed=derive_seed(cfg.seed, "generate-engine", t)) as engine:
        samples = generate_proposals(engine, tok, cfg.curriculum, seed=cfg.seed, iteration=t,
                                     vocab_dropout=vd)
    records = proposal_records(samples)
    for r in records:
        r["alpha_gen"] = vd.alpha if vd else 1.0
    write_jsonl(out / "generated.jsonl", records)


def score(store: ModelStore, t: int, out: Path) -> None:
    """The frozen solver of t-1 answers each valid question M times (majority answer, acc).
    Writes ``questions.jsonl``."""
    cfg, s = store.cfg, store.cfg.scoring
    records = read_jsonl(out / "generated.jsonl")
    path = store.solver(t - 1)
    tok = load_tokenizer(path)
    with store.engine(path, s.max_new_tokens,
                      seed=derive_seed(cfg.seed, "score-engine", t)) as engine:
        scores = score_questions([r["question"] for r in records], engine, tok,
                                 s.num_solver_samples, seed=derive_seed(cfg.seed, "score", t),
                                 temperature=s.temperature, top_p=s.top_p, top_k=s.top_k,
                                 max_new_tokens=s.max_new_tokens,
                                 failed_extraction=s.failed_extraction)
    for r, sc in zip(records, scores, strict=True):
        r.update(solver_answers=sc.answers, majority=sc.majority, acc=sc.acc,
                 proposer_agrees=sc.agrees_with(r["answer"]) if sc.acc is not None else None)
    write_jsonl(out / "questions.jsonl", records)


def curriculum(store: ModelStore, t: int, out: Path) -> None:
    """Keep tau_min <= acc <= tau_max with a target answer. Writes ``curriculum.jsonl``."""
    s = store.cfg.scoring
    kept = filter_curriculum(read_jsonl(out / "questions.jsonl"), s.tau_min, s.tau_max,
                             s.solver_target)
    write_jsonl(out / "curriculum.jsonl", kept)


def solver(store: ModelStore, t: int, out: Path) -> None:
    """GRPO of the solver on the curriculum (binary reward against the target). Writes
    ``solver_train.json``, then ``solver_model/``; an empty curriculum carries the previous
    solver forward unchanged, and says so."""
    from vdlib.loop.policy import grpo_on_problems, train_log

    cfg, g = store.cfg, store.cfg.solver
    data = read_jsonl(out / "curriculum.jsonl")
    previous = store.solver(t - 1)
    if not data:
        logger.warning("iteration %d: empty curriculum; the solver is carried forward", t)
        if is_main_process():
            atomic_write_json(out / "solver_train.json", {"skipped": "empty curriculum"})
            model, tok = load_model(previous, dtype="float32", device="cpu")
            store.save_pretrained(model, tok, out / "solver_model")
        return
    model, tok = store.load_policy(previous, g)
    trainer, reward = grpo_on_problems(model, tok, data, g, out / ".trl_solver",
                                       seed=derive_seed(cfg.seed, "solver", t),
                                       use_cpu=store.use_cpu, engine=cfg.engine,
                                       run_engine=store.run_engine(),
                                       tracked=_tracked(store, out, "solver"))
    log = train_log(trainer, reward)  # every rank: the mean reward is gathered
    if is_main_process():
        atomic_write_json(out / "solver_train.json", {"curriculum_size": len(data), **log})
    store.save_model(trainer, tok, out / "solver_model")


def metrics(store: ModelStore, t: int, out: Path) -> None:
    """The iteration's numbers (vdlib.metrics.run_metrics). Writes ``metrics.json``."""
    from vdlib.metrics.run_metrics import config_metric_kwargs, write_iteration_metrics

    write_iteration_metrics(out, t, run_phase_alphas(store.cfg, store.run_dir, t),
                            tokenizer=load_tokenizer(store.proposer(t)),
                            **config_metric_kwargs(store.cfg))


# ----------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Stage:
    """One row of the iteration: ``outputs`` are the files (and checkpoint folders) the stage
    writes, in the order it writes them; the runner records their sizes and hashes in the
    manifest once the stage returns, and a resume skips the stage only if that record still
    matches the disk (:mod:`vdlib.runs.run_state`). ``every_rank``: run on every process (GRPO
    through TRL) rather than only the main one."""

    name: str
    outputs: tuple[str, ...]
    run: Callable[[ModelStore, int, Path], None]
    every_rank: bool = False


STAGE_TABLE: tuple[Stage, ...] = (
    Stage("proposer", ("proposer_rollouts.jsonl", "proposer_train.json", "proposer_model"),
          proposer, every_rank=True),
    Stage("generate", ("generated.jsonl",), generate),
    Stage("score", ("questions.jsonl",), score),
    Stage("curriculum", ("curriculum.jsonl",), curriculum),
    Stage("solver", ("solver_train.json", "solver_model"), solver, every_rank=True),
    Stage("metrics", ("metrics.json",), metrics),
)
STAGES = tuple(s.name for s in STAGE_TABLE)
TRAINING_STAGES = tuple(s.name for s in STAGE_TABLE if s.every_rank)
