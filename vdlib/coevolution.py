"""The co-evolution loop (paper Algorithm 1): resumable, deterministic, one folder per run.

For t = 1..T, in stages, each finished by an atomic write (so a killed run loses at most the
stage in progress and re-running the same command continues after the last finished stage):

1. ``proposer``: GRPO on the proposer prompt (G samples per prompt) with the train-phase mask of
   each rollout batch; rewards from the FROZEN previous solver (:class:`ProposerReward`).
   Writes ``proposer_rollouts.jsonl``, ``proposer_train.json``, then ``proposer_model/``.
2. ``generate``: the trained proposer writes K questions, a fresh gen-phase mask per batch.
   Writes ``generated.jsonl``.
3. ``score``: the frozen previous solver answers each valid question M times (majority answer,
   acc). Writes ``questions.jsonl``.
4. ``curriculum``: keep tau_min <= acc <= tau_max; target = the proposer's answer (paper) or the
   majority answer (R-Zero). Writes ``curriculum.jsonl``.
5. ``solver``: GRPO of the solver on the curriculum, binary reward against the target.
   Writes ``solver_train.json``, then ``solver_model/`` (an empty curriculum carries the previous
   solver forward unchanged, and says so).
6. ``metrics``: the iteration's numbers. Writes ``metrics.json``.

Wall-clock seconds per stage go to ``iter_<t>/timing.json`` (the one file that differs between
two runs of the same config, with ``manifest.json``).

Multi-process (``accelerate launch``, N processes, one GPU each): the training stages
(``proposer``, ``solver``) run on every rank through TRL, with the paper's global batch sizes
split over the ranks; the other stages and every artifact or manifest write run on the main
process while the other ranks wait at a barrier and then read the results from disk. Each rank
scores its own proposer rollouts with its own frozen solver copy; the records are gathered into
one ``proposer_rollouts.jsonl`` (each with its ``rank``). See :func:`init_distributed`.

Iteration 1 starts both roles from the base checkpoint (the proposer from its format
warm-start in the tiny profile). Every stage seeds itself from ``(seed, stage, t)`` and reads its
inputs from disk, so an interrupted-and-resumed run produces the same artifacts as an
uninterrupted one. Layout: ``<output_dir>/<experiment>/<run_id>/`` with ``config.yaml``,
``manifest.json`` and ``iter_<t>/`` (DESIGN.md).
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from vdlib.artifacts import atomic_write_json, read_jsonl, start_run, write_jsonl
from vdlib.artifacts import run_dir as run_folder
from vdlib.config import ConfigError, ExperimentConfig, load_params
from vdlib.curriculum import generate_proposals, proposal_records
from vdlib.distributed import (
    _deepspeed_fp32_state_dict,
    barrier,
    broadcast_from_main,
    gather_to_main,
    init_distributed,
    is_main_process,
    local_rank,
    merge_rank_records,
    rank,
    shutdown_distributed,
    world_size,
)
from vdlib.engines import open_engine, rollout_mode, trl_vllm_args
from vdlib.models import MODELS, atomic_build_dir, load_model, resolve_device
from vdlib.prompts import proposer_prompt
from vdlib.scoring import score_questions
from vdlib.seeding import derive_seed
from vdlib.vocab_dropout import VocabDropout, alpha_at, mask_active, mask_seed

__all__ = ["STAGES", "TRAINING_STAGES", "Loop", "RunResult", "run", "run_arms", "iteration_dir",
           "check_visible_gpus",
           "filter_curriculum", "split_timing", "init_distributed", "shutdown_distributed",
           "world_size", "rank",
           "local_rank", "is_main_process", "barrier", "broadcast_from_main", "gather_to_main",
           "merge_rank_records"]

logger = logging.getLogger(__name__)

STAGES = ("proposer", "generate", "score", "curriculum", "solver", "metrics")
TRAINING_STAGES = ("proposer", "solver")  # run on every rank; the others on the main one
_DONE = {"proposer": "proposer_model", "generate": "generated.jsonl", "score": "questions.jsonl",
         "curriculum": "curriculum.jsonl", "solver": "solver_model", "metrics": "metrics.json"}


@dataclass
class RunResult:
    """Where the run lives and each iteration's metrics."""

    run_dir: Path
    iterations: list[dict[str, Any]] = field(default_factory=list)


def iteration_dir(run_dir: Path, t: int) -> Path:
    return run_dir / f"iter_{t}"


def _done(run_dir: Path, t: int, stage: str) -> bool:
    path = iteration_dir(run_dir, t) / _DONE[stage]
    return (path / "config.json").exists() if path.suffix == "" else path.exists()


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def filter_curriculum(questions: list[dict[str, Any]], tau_min: float, tau_max: float,
                      target: str = "proposer") -> list[dict[str, Any]]:
    """Questions in the difficulty window with a target answer (see the module docstring)."""
    out = []
    for q in questions:
        acc = q.get("acc")
        if not q.get("valid") or acc is None or not tau_min - 1e-9 <= acc <= tau_max + 1e-9:
            continue
        answer = q["answer"] if target == "proposer" else q.get("majority")
        if answer is None:
            continue
        out.append({"question": q["question"], "answer": answer, "acc": acc,
                    "proposer_answer": q["answer"], "majority": q.get("majority"),
                    "mask_seed": q.get("mask_seed")})
    return out


class Loop:
    """One run's loop: model paths per iteration, loading, masks, saving, and the stages.
    ``start=False`` only resolves the run folder (no manifest is written): for helpers that
    reuse its model handling (vdlib.policy)."""

    def __init__(self, cfg: ExperimentConfig, start: bool = True) -> None:
        self.cfg = cfg
        self.device = str(resolve_device(cfg.model.device))
        if world_size() > 1 and self.device.startswith("cuda"):
            self.device = f"cuda:{local_rank()}"  # one GPU per rank
        self.use_cpu = self.device == "cpu"
        if world_size() > 1:
            logger.info("process %d of %d on %s", rank(), world_size(), self.device)
        self._bases: dict[tuple[str, str], str] = {}
        folder = (cfg.output_dir, cfg.experiment, cfg.run_id or f"seed{cfg.seed}")
        if start and world_size() > 1:
            if is_main_process():
                start_run(cfg)
            barrier()
            self.run_dir = run_folder(*folder)
        else:
            self.run_dir = start_run(cfg) if start else run_folder(*folder)

    # ---------------------------------------------------------------- models

    def _materialise(self, name: str, role: str) -> str:
        """A path (or Hub id) TRL can load: registered names are saved once into the run."""
        if Path(name).expanduser().is_dir():
            return str(Path(name).expanduser())
        if name not in MODELS:
            return name  # Hugging Face id
        target = self.run_dir / "base_models" / f"{role}-{name}"
        if not (target / "config.json").exists():
            model, tok = load_model(name, dtype="float32", device="cpu",
                                    cache_dir=self.cfg.model.cache_dir)

            def build(tmp: Path) -> None:
                model.save_pretrained(tmp)
                tok.save_pretrained(tmp)

            atomic_build_dir(target, build)
        return str(target)

    def base(self, name: str, role: str) -> str:
        """Iteration-0 checkpoint of a role: the base model, format-warm-started if asked."""
        key = (name, role)
        if key not in self._bases:
            self._bases[key] = self._build_base(name, role)
        return self._bases[key]

    def _build_base(self, name: str, role: str) -> str:
        cfg = self.cfg
        if cfg.warm_start.mode == "sft":
            from vdlib.warm_start import warm_start_dir

            return str(warm_start_dir(name, cfg.warm_start, seed=cfg.seed,
                                      cache_dir=cfg.model.cache_dir, device=self.device))
        return self._materialise(name, role)

    def prepare_bases(self) -> None:
        """Build both roles' iteration-0 checkpoints on the main process first (they are written
        into the run or the cache), then resolve them on the other ranks."""
        if world_size() == 1:
            return
        pairs = ((self.cfg.model.proposer, "proposer"), (self.cfg.solver_model, "solver"))
        if is_main_process():
            for name, role in pairs:
                self.base(name, role)
        barrier()
        if not is_main_process():
            for name, role in pairs:
                self.base(name, role)

    def proposer_path(self, t: int) -> str:
        return str(iteration_dir(self.run_dir, t) / "proposer_model") if t else \
            self.base(self.cfg.model.proposer, "proposer")

    def solver_path(self, t: int) -> str:
        return str(iteration_dir(self.run_dir, t) / "solver_model") if t else \
            self.base(self.cfg.solver_model, "solver")

    def load(self, path: str) -> tuple[Any, Any]:
        """A model for generation only (frozen solver, curriculum generation, scoring):
        ``model.dtype`` on GPU, float32 on CPU."""
        return load_model(path, dtype=self.cfg.model.dtype if not self.use_cpu else "float32",
                          device=self.device, cache_dir=self.cfg.model.cache_dir)

    def load_policy(self, path: str, g: Any) -> tuple[Any, Any]:
        """The policy a GRPO stage trains (role settings ``g``): float32 master weights, with
        TRL's bf16/fp16 autocast when ``g.precision`` asks for it (:func:`training_dtypes`)."""
        from vdlib.trainer import training_dtypes

        policy_dtype, _ = training_dtypes(g.precision, self.use_cpu)
        return load_model(path, dtype=policy_dtype, device=self.device,
                          cache_dir=self.cfg.model.cache_dir)

    def alpha(self, t: int) -> float:
        vd = self.cfg.vocab_dropout
        return alpha_at(t, self.cfg.iterations, alpha=vd.alpha, alpha_final=vd.alpha_final,
                        schedule=vd.schedule)

    def mask_for(self, model: Any, tok: Any, t: int, stage: str) -> VocabDropout | None:
        """The iteration's mask for ``stage``, or None (phase off, or alpha = 1: the unmasked
        baseline runs without any processor)."""
        vd = self.cfg.vocab_dropout
        alpha = self.alpha(t)
        if not mask_active(vd.phases, stage) or alpha >= 1.0:
            return None
        return VocabDropout.for_model(model, tok, alpha, vd.format_strings,
                                      vd.extra_protected_ids)

    @contextmanager
    def engine(self, path: str, max_new_tokens: int, *, seed: int = 0,
               batch_size: int | None = None, training: bool = False) -> Iterator[Any]:
        """The ``engine.backend`` engine over checkpoint ``path`` for one stage (vdlib.engines):
        always started from the checkpoint on disk, so it samples from the weights the
        previous stage saved, and released when the stage ends. ``training``: a trainer holds
        this process's GPU meanwhile (the proposer phase's reward)."""
        shares = training and self.cfg.engine.backend == "vllm" \
            and rollout_mode(self.cfg.engine) == "colocate"  # two in-process vLLM engines
        with open_engine(self.cfg.engine, path, device=self.device,
                         dtype=self.cfg.model.dtype if not self.use_cpu else "float32",
                         cache_dir=self.cfg.model.cache_dir, max_new_tokens=max_new_tokens,
                         batch_size=batch_size, seed=seed,
                         training_device=self.device if training else None,
                         enforce_eager=True if shares else None) as eng:
            yield eng

    def gen_mask(self, path: str, tok: Any, t: int) -> VocabDropout | None:
        """The generation-phase mask of iteration ``t`` for the checkpoint at ``path`` (its
        logits width read from its config: no weights are loaded)."""
        vd = self.cfg.vocab_dropout
        alpha = self.alpha(t)
        if not mask_active(vd.phases, "gen") or alpha >= 1.0:
            return None
        return VocabDropout.for_checkpoint(path, tok, alpha, vd.format_strings,
                                           vd.extra_protected_ids)

    def save_model(self, trainer: Any, tok: Any, target: Path) -> None:
        """Save a trained policy once. Several processes: every rank calls TRL's ``save_model``
        (ZeRO-3 / FSDP gather the weights there), only the main one writes, into one shared
        temporary folder that it then renames."""
        if world_size() > 1:
            tmp = target.parent / f".{target.name}.tmp-dist"
            if is_main_process():
                shutil.rmtree(tmp, ignore_errors=True)
            barrier()
            fp32 = _deepspeed_fp32_state_dict(trainer)  # collective: every rank
            if fp32 is None:
                trainer.save_model(str(tmp))
            elif is_main_process():
                trainer.accelerator.unwrap_model(trainer.model_wrapped).save_pretrained(
                    tmp, state_dict=fp32)
            barrier()
            if is_main_process():
                tok.save_pretrained(tmp)
                (tmp / "training_args.bin").unlink(missing_ok=True)
                os.rename(tmp, target)
            barrier()
            return

        def build(tmp: Path) -> None:
            trainer.save_model(str(tmp))
            tok.save_pretrained(tmp)
            (tmp / "training_args.bin").unlink(missing_ok=True)  # holds paths: not an artifact

        atomic_build_dir(target, build)

    @staticmethod
    def save_pretrained(model: Any, tok: Any, target: Path) -> None:
        """Save an (untrained) model and its tokenizer atomically."""
        def build(tmp: Path) -> None:
            model.save_pretrained(tmp)
            tok.save_pretrained(tmp)

        atomic_build_dir(target, build)

    # ---------------------------------------------------------------- stages

    def stage_proposer(self, t: int, out: Path) -> None:
        cfg = self.cfg
        # the frozen solver's engine first (one per rank), then the policy and TRL's rollouts
        with self.engine(self.solver_path(t - 1), cfg.scoring.max_new_tokens,
                         seed=derive_seed(cfg.seed, "proposer-score-engine", t),
                         training=True) as solver_engine:
            self._train_proposer(t, out, solver_engine)

    def _train_proposer(self, t: int, out: Path, solver_engine: Any) -> None:
        from datasets import Dataset

        from vdlib.trainer import (
            MaskedGRPOTrainer,
            ProposerReward,
            release_rollout_engine,
            trl_args,
        )

        cfg, g = self.cfg, self.cfg.proposer
        model, tok = self.load_policy(self.proposer_path(t - 1), g)
        vd = self.mask_for(model, tok, t, "train")
        prompt = proposer_prompt(tok)
        prompts = [prompt] * (g.max_steps * g.rollout_batch_size)
        trainer_box: list[Any] = []
        # each rank scores its own rollouts; rank 0 keeps the single-process seed
        from vdlib.models import load_tokenizer

        reward = ProposerReward(solver_engine, load_tokenizer(self.solver_path(t - 1)),
                                cfg.scoring,
                                seed=derive_seed(cfg.seed, "proposer-score", t)
                                + 1_000_003 * rank(),
                                trainer_ref=lambda: trainer_box[0] if trainer_box else None)
        prompt_tokens = len(tok(prompt, add_special_tokens=False)["input_ids"])
        args = trl_args(g, output_dir=str(out / ".trl_proposer"), use_cpu=self.use_cpu,
                        seed=derive_seed(cfg.seed, "proposer", t) % 2**31,
                        masked=vd is not None, num_processes=world_size(),
                        **trl_vllm_args(cfg.engine, prompt_tokens, g.max_response_length))
        trainer = MaskedGRPOTrainer(
            model=model, reward_funcs=[reward], args=args,
            train_dataset=Dataset.from_dict({"prompt": prompts}), processing_class=tok,
            vocab_dropout=vd,
            mask_seed_fn=(lambda step: mask_seed(cfg.seed, t, "train", step)) if vd else None,
            loss_variant=g.loss_variant,
            cov={"k_frac": g.kl_cov_k_frac, "beta": g.kl_cov_beta, "ratio": g.clip_cov_ratio,
                 "lb": g.clip_cov_lb, "ub": g.clip_cov_ub})
        trainer_box.append(trainer)
        trainer.train()
        release_rollout_engine(trainer)
        per_rank = gather_to_main(reward.records)
        if is_main_process():
            write_jsonl(out / "proposer_rollouts.jsonl", merge_rank_records(per_rank))
            atomic_write_json(out / "proposer_train.json", {
                "alpha": self.alpha(t) if vd else 1.0, "masked": vd is not None,
                "rollout_engine": rollout_mode(cfg.engine),
                "mask_log": trainer.mask_log, **split_timing(trainer.state.log_history)})
        self.save_model(trainer, tok, out / "proposer_model")
        if is_main_process():
            shutil.rmtree(out / ".trl_proposer", ignore_errors=True)

    def stage_generate(self, t: int, out: Path) -> None:
        from vdlib.models import load_tokenizer

        cfg = self.cfg
        path = self.proposer_path(t)
        tok = load_tokenizer(path)
        vd = self.gen_mask(path, tok, t)
        with self.engine(path, cfg.curriculum.max_new_tokens,
                         batch_size=cfg.curriculum.batch_size,
                         seed=derive_seed(cfg.seed, "generate-engine", t)) as engine:
            samples = generate_proposals(engine, tok, cfg.curriculum, seed=cfg.seed,
                                         iteration=t, vocab_dropout=vd)
        records = proposal_records(samples)
        for r in records:
            r["alpha"] = vd.alpha if vd else 1.0
        write_jsonl(out / "generated.jsonl", records)

    def stage_score(self, t: int, out: Path) -> None:
        cfg, s = self.cfg, self.cfg.scoring
        records = read_jsonl(out / "generated.jsonl")
        from vdlib.models import load_tokenizer

        path = self.solver_path(t - 1)
        tok = load_tokenizer(path)
        with self.engine(path, s.max_new_tokens,
                         seed=derive_seed(cfg.seed, "score-engine", t)) as engine:
            scores = score_questions([r["question"] for r in records], engine, tok,
                                     s.num_solver_samples, seed=derive_seed(cfg.seed, "score", t),
                                     temperature=s.temperature, top_p=s.top_p, top_k=s.top_k,
                                     max_new_tokens=s.max_new_tokens)
        for r, sc in zip(records, scores, strict=True):
            r.update(solver_answers=sc.answers, majority=sc.majority, acc=sc.acc,
                     proposer_agrees=sc.agrees_with(r["answer"]) if sc.acc is not None else None)
        write_jsonl(out / "questions.jsonl", records)

    def stage_curriculum(self, t: int, out: Path) -> None:
        s = self.cfg.scoring
        kept = filter_curriculum(read_jsonl(out / "questions.jsonl"), s.tau_min, s.tau_max,
                                 s.solver_target)
        write_jsonl(out / "curriculum.jsonl", kept)

    def stage_solver(self, t: int, out: Path) -> None:
        from vdlib.policy import grpo_on_problems, train_log

        cfg, g = self.cfg, self.cfg.solver
        curriculum = read_jsonl(out / "curriculum.jsonl")
        previous = self.solver_path(t - 1)
        if not curriculum:
            logger.warning("iteration %d: empty curriculum; the solver is carried forward", t)
            if is_main_process():
                atomic_write_json(out / "solver_train.json", {"skipped": "empty curriculum"})
                model, tok = load_model(previous, dtype="float32", device="cpu")
                self.save_pretrained(model, tok, out / "solver_model")
            return
        model, tok = self.load_policy(previous, g)
        trainer, reward = grpo_on_problems(model, tok, curriculum, g, out / ".trl_solver",
                                           seed=derive_seed(cfg.seed, "solver", t),
                                           use_cpu=self.use_cpu, engine=cfg.engine)
        log = train_log(trainer, reward)  # every rank: the mean reward is gathered
        if is_main_process():
            atomic_write_json(out / "solver_train.json", {"curriculum_size": len(curriculum),
                                                          **log})
        self.save_model(trainer, tok, out / "solver_model")

    def stage_metrics(self, t: int, out: Path) -> dict[str, Any]:
        from vdlib.metrics.run_metrics import write_iteration_metrics
        from vdlib.models import load_tokenizer

        m = self.cfg.metrics
        embedder = None if m.embedder == "none" else m.embedder
        return write_iteration_metrics(out, t, self.alpha(t), embedder=embedder,
                                       tokenizer=load_tokenizer(self.proposer_path(t)),
                                       extra=tuple(m.extra), novelty_threshold=m.novelty_threshold)

    # ---------------------------------------------------------------- driver

    def run(self, on_stage: Callable[[int, str], None] | None = None) -> RunResult:
        """All iterations. With several processes, the training stages run on every rank and
        the others on the main one (the rest wait at a barrier, then read from disk)."""
        result = RunResult(self.run_dir)
        self.prepare_bases()
        main = is_main_process()
        for t in range(1, self.cfg.iterations + 1):
            out = iteration_dir(self.run_dir, t)
            out.mkdir(parents=True, exist_ok=True)
            for stage in STAGES:
                if broadcast_from_main(_done(self.run_dir, t, stage)):
                    logger.info("iteration %d %s: done earlier, skipped", t, stage)
                    continue
                here = main or stage in TRAINING_STAGES
                if on_stage is not None and here:
                    on_stage(t, stage)
                start = time.perf_counter()
                _seed_everything(derive_seed(self.cfg.seed, stage, t) % 2**63)
                if here:
                    getattr(self, f"stage_{stage}")(t, out)
                seconds = time.perf_counter() - start
                if main:
                    timing_path = out / "timing.json"
                    timing = json.loads(timing_path.read_text()) if timing_path.exists() else {}
                    atomic_write_json(timing_path, {**timing, stage: round(seconds, 2)})
                    logger.info("iteration %d %s: %.1f s", t, stage, seconds)
                barrier()
            metrics = json.loads((out / "metrics.json").read_text())
            result.iterations.append(metrics)
            logger.info("iteration %d: %s", t, _summary(metrics))
        if main:
            start_run(self.cfg)  # refresh the manifest's "updated" time
        barrier()
        return result


_TIMING_KEYS = ("train_runtime", "train_samples_per_second", "train_steps_per_second",
                "step_time")


def split_timing(history: list[dict[str, Any]]) -> dict[str, Any]:
    """TRL's log history without its wall-clock fields, so the same seed gives the same file
    (stage wall-clock times go to ``timing.json``)."""
    return {"log_history": [{k: v for k, v in row.items() if k not in _TIMING_KEYS}
                            for row in history]}


def _summary(m: dict[str, Any]) -> str:
    keys = ("valid_questions", "generated", "mean_acc", "curriculum_size", "kept_fraction")
    return ", ".join(f"{k}={m.get(k)}" for k in keys)


def _check_supported(cfg: ExperimentConfig) -> None:
    for role in ("proposer", "solver"):
        if getattr(cfg, role).cov_scope != "micro_batch":
            raise ConfigError(f"{role}.cov_scope = 'mini_batch' is not supported by the TRL "
                              "trainer yet; allowed values: micro_batch")


def check_visible_gpus(cfg: ExperimentConfig, device_count: int | None = None) -> None:
    """One process trains on one GPU: TRL refuses a single process that sees several (it would
    wrap the model in ``nn.DataParallel``). Fail before any model loads, saying what to do.

    >>> from vdlib.config import load_params
    >>> check_visible_gpus(load_params({"model": {"device": "cuda:0"}}), device_count=1)
    >>> check_visible_gpus(load_params({"model": {"device": "cuda:0"}}), device_count=2)
    Traceback (most recent call last):
    ...
    vdlib.config.ConfigError: model.device = 'cuda:0', but this single process sees 2 GPUs ...
    """
    if world_size() > 1 or not cfg.model.device.startswith(("cuda", "auto")):
        return
    if device_count is None:
        device_count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if device_count > 1:
        raise ConfigError(
            f"model.device = {cfg.model.device!r}, but this single process sees {device_count} "
            "GPUs and TRL trains one process on one GPU; make one GPU visible "
            "(CUDA_VISIBLE_DEVICES=0 vdlib run ...; engine.server_gpus name physical GPUs for "
            "vdlib's vLLM servers, e.g. the paper's 2-GPU topology), or launch one process per "
            "GPU with accelerate launch")


def run(config: ExperimentConfig | str | dict, on_stage: Callable[[int, str], None] | None = None
        ) -> RunResult:
    """Run (or resume) the co-evolution of ``config`` (an ExperimentConfig, params path or
    dict); returns the run folder and each iteration's metrics. ``config.arms`` is ignored
    here: see :func:`run_arms`."""
    cfg = config if isinstance(config, ExperimentConfig) else load_params(config)
    _check_supported(cfg)
    init_distributed()
    check_visible_gpus(cfg)
    return Loop(cfg).run(on_stage)


def run_arms(config: ExperimentConfig | str | dict,
             on_stage: Callable[[int, str], None] | None = None) -> dict[str, RunResult]:
    """Run (or resume) every arm in ``config.arms`` (vdlib.arms), each in its own folder
    ``<experiment>/<arm>-seed<seed>``; with no arms, the config itself under its own name."""
    from vdlib.arms import arm_params
    from vdlib.config import to_dict

    cfg = config if isinstance(config, ExperimentConfig) else load_params(config)
    if not cfg.arms:
        return {cfg.run_id or "run": run(cfg, on_stage)}
    base = to_dict(cfg)
    configs = {arm: load_params(arm_params(base, arm)) for arm in cfg.arms}  # validate all first
    for c in configs.values():
        _check_supported(c)
    return {arm: run(c, on_stage) for arm, c in configs.items()}
