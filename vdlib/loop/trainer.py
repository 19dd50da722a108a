"""GRPO on TRL (pinned: trl==1.16.0) with vocabulary dropout at sampling time.

:class:`MaskedGRPOTrainer` subclasses TRL's ``GRPOTrainer`` and changes two things:

- **Sampling under the mask.** Every rollout generation (``_generate_single_turn``) draws the
  batch's mask from ``mask_seed_fn(global_step)`` (identical on every rank: it depends only on
  the step) and applies it while sampling: on the transformers path through a forward hook on the
  output embedding (``lm_head``, :func:`vdlib.method.rollout_mask.lm_head_mask`) that exists
  only for the duration of ``generate``; on TRL's vLLM
  path (``use_vllm``, colocate or server) through the vdlib seeded processor's ``extra_args``
  (:mod:`vdlib.engines.vllm_backend`; TRL's vLLM loads the processor from vdlib's entry point).
  Every rollout batch is checked: no sampled id is one the batch's mask drops. The loss forward
  runs without the hook, so the GRPO update uses **full-vocabulary** log-probabilities (paper,
  Sec. "Vocabulary dropout"). vLLM importance-sampling correction is off whenever a mask is
  active (under a mask every ratio pi_full / pi_masked <= 1: TRL would down-weight sequences).
- **Loss variants.** ``grpo`` is TRL's clipped surrogate with the k3 KL term and token-mean
  aggregation over the generation batch (``loss_type="dapo"``); ``kl_cov`` and ``clip_cov`` (the
  paper's entropy-control baselines, proposer only) replace the policy term with
  :func:`vdlib.method.grpo.kl_cov_loss` / :func:`vdlib.method.grpo.clip_cov_loss` and keep the KL
  term and the aggregation. Their statistics (KL-Cov's ``penalty``, ``n_active``; Clip-Cov's
  ``n_selected``, the tokens whose gradient it cut) go into TRL's per-step logs as
  ``<variant>/<stat>``, which the run keeps in ``proposer_train.json`` (per step: KL-Cov's
  ``active_fraction``, ``penalty`` and ``grad_ratio``, the penalty's gradient against the policy
  term's; Clip-Cov's ``selected_fraction`` and ``grad_ratio``). Their old log-probs
  (``cov["old_logprobs"]``, config ``cov_old_logprobs``, :data:`COV_OLD_LOGPROBS`):

  - ``packed`` (default; the paper's system): a separate no-grad forward over the rollout batch
    before its update, in chunks of ``cov["experience_micro_batch"]`` completions (config
    ``micro_batch_size_experience``, the paper's 4), each chunk packed into one row without
    padding (:func:`pack_rows`), as verl's ``compute_log_prob`` with ``use_remove_padding``
    (v0.4.1-v0.5.0; EasyR1 / R-Zero ``padding_free``) computes them. The update's forward is
    TRL's, padded, in micro-batches of 2, so the two passes compute the same log-probs with
    other rounding, as verl's two passes do; KL-Cov's ``|logp - old|`` then has a gradient on
    its selected tokens wherever the two differ, at one on-policy update per rollout batch too
    (on a CPU in bf16 autocast they differ on most tokens: tests/test_kl_cov_fidelity.py).
  - ``recompute``: the same separate pass, padded like the update's. In bf16 it agrees with
    the update bit for bit (27 of 27 proposer steps on an H200; bf16 autocast on a CPU too), so
    KL-Cov's term never acts: the committed gpu-small KL-Cov runs (arm ``kl_cov_inert``).
  - ``detach``: TRL's rule (the update's own log-probs, detached, whenever TRL skips its pass:
    exactly on-policy, where KL-Cov's term is 0).

  See docs/experiments.md, "KL-Cov on-policy". ``skip_null_backward``
  (config of that name) skips the backward of a micro-batch whose gradient is 0 by construction
  (:func:`vdlib.method.grpo.null_gradient`).

Batch sizes follow verl's meaning, which the paper's table uses: ``global_batch_size`` and
``rollout_batch_size`` count *prompts*; each prompt gets ``num_generations`` completions. So a
proposer step updates on 16 x 4 = 64 completions. ``ppo_mini_batches`` = n splits each global
batch into n optimizer steps (verl's ``ppo_mini_batch_size``); ``max_steps`` keeps counting
global batches, so TRL runs ``n * max_steps`` optimizer steps on the same rollouts.
:func:`trl_args` maps a :class:`vdlib.config.experiment.GRPOConfig` onto TRL's ``GRPOConfig``.

The reward callables the trainers call are in :mod:`vdlib.loop.grpo_rewards`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Iterator
from typing import Any

import torch
from transformers import LogitsProcessorList
from trl import GRPOTrainer

from vdlib.config.experiment import GRPOConfig
from vdlib.engines.sampling import sampling_processors
from vdlib.method.grpo import clip_cov_loss, kl_cov_loss, null_gradient
from vdlib.method.rollout_mask import lm_head_mask
from vdlib.method.vocab_dropout import VocabDropout

__all__ = ["MaskedGRPOTrainer", "trl_args", "cov_settings", "training_dtypes",
           "check_rollouts_masked",
           "prepare_vllm_rollouts", "release_rollout_engine", "split_timing", "COV_OLD_LOGPROBS",
           "pack_rows"]

#: Where KL-Cov / Clip-Cov take their old log-probs from (see the module docstring).
COV_OLD_LOGPROBS = ("packed", "recompute", "detach")

logger = logging.getLogger(__name__)


def check_rollouts_masked(completion_ids: Any, vd: VocabDropout, seed: int) -> None:
    """Raise RuntimeError if a rollout holds an id that mask ``seed`` drops (e.g. vLLM built
    without vdlib's processor). ``completion_ids``: lists of ids or a 2-D tensor (a tensor's
    padding is the pad id, which is protected)."""
    allowed = vd.sample(seed)
    rows = completion_ids.tolist() if isinstance(completion_ids, torch.Tensor) else \
        completion_ids
    bad = []
    for i, ids in enumerate(rows):
        if not len(ids):
            continue
        t = torch.as_tensor(list(ids), dtype=torch.long)
        hit = (t >= allowed.shape[0]) | ~allowed[t.clamp(max=allowed.shape[0] - 1)]
        if bool(hit.any()):
            bad.append((i, t[hit][:5].tolist()))
    if bad:
        raise RuntimeError(f"{len(bad)} GRPO rollouts hold ids dropped by mask {seed} (row, "
                           f"ids): {bad[:3]}; with vLLM rollouts, vdlib's processor must be "
                           "loaded through its entry point (pip install -e .)")


def prepare_vllm_rollouts(masked: bool) -> None:
    """Before TRL builds its colocated ``vllm.LLM``: TRL reloads the policy's weights into the
    engine in this process (so vLLM must not run its engine core in a child process), and a
    masked run needs vdlib's processor, which TRL cannot pass, from the entry point."""
    from vdlib.engines.vllm_backend import (
        ENTRY_POINT_GROUP,
        entry_point_registered,
        use_inprocess_engines,
    )

    use_inprocess_engines()
    if masked:

        if not entry_point_registered():
            raise RuntimeError(
                "GRPO rollouts through vLLM under a vocabulary mask need vdlib's logits "
                f"processor in the {ENTRY_POINT_GROUP!r} entry-point group, which TRL's vLLM "
                "loads; install vdlib (pip install -e .) or set engine.rollouts: hf")


_TIMING_KEYS = ("train_runtime", "train_samples_per_second", "train_steps_per_second",
                "step_time")


def split_timing(history: list[dict[str, Any]]) -> dict[str, Any]:
    """TRL's log history without its wall-clock fields, so the same seed gives the same file
    (stage wall-clock times go to ``timing.json``)."""
    return {"log_history": [{k: v for k, v in row.items() if k not in _TIMING_KEYS}
                            for row in history]}


def release_rollout_engine(trainer: Any) -> None:
    """Shut down TRL's colocated vLLM once training is over, so that its GPU memory returns
    before the next stage starts its own engine (no-op without one). The run's engine
    (``engine.lifetime: run``) is only taken back from TRL, asleep, for the run's next use."""
    generation = getattr(trainer, "vllm_generation", None)
    llm = getattr(generation, "llm", None)
    if llm is not None and hasattr(llm, "policy"):  # vdlib.engines.engine_lifetime._TRLHandle
        generation.llm = None
        llm.policy = None
        llm.sleep(level=2)
    elif llm is not None:
        from vdlib.engines.vllm_backend import shutdown_llm

        generation.llm = None
        shutdown_llm(llm)


def training_dtypes(precision: str, use_cpu: bool,
                    optimizer_offload: bool = False) -> tuple[str, str]:
    """``(policy, reference)`` dtypes of a GRPO run at ``precision``. The trained policy is
    held in float32 (master weights; TRL's ``bf16``/``fp16`` autocast computes in the low
    precision): AdamW updates of ~lr = 1e-6 are far below half a bf16 ulp of typical weights and
    would round away in bf16 weights. With ``optimizer_offload`` on GPU the policy's weights are
    in ``precision`` and their float32 masters live on the CPU (:mod:`vdlib.loop.offload`).
    The frozen reference model needs no master copy and is loaded in ``precision`` on GPU.
    CPU: float32 for both."""
    if use_cpu:
        return "float32", "float32"
    low = precision if precision in ("bfloat16", "float16") else "float32"
    return (low if optimizer_offload else "float32"), low


def trl_args(g: GRPOConfig, *, output_dir: str, seed: int, num_processes: int = 1,
             use_cpu: bool = False, masked: bool = False, **overrides: Any) -> Any:
    """TRL ``GRPOConfig`` for one role (see the module docstring for the batch-size mapping)."""
    from trl import GRPOConfig as TRLConfig

    n_mini = g.ppo_mini_batches
    if (g.global_batch_size * g.num_generations) % n_mini:
        raise ValueError(f"global_batch_size x num_generations = "
                         f"{g.global_batch_size * g.num_generations} is not a multiple of "
                         f"ppo_mini_batches = {n_mini}")
    completions_per_step = g.global_batch_size * g.num_generations // n_mini  # per AdamW step
    per_device = min(g.micro_batch_size_update, completions_per_step)
    denom = per_device * num_processes
    if completions_per_step % denom:
        raise ValueError(f"global_batch_size x num_generations / ppo_mini_batches = "
                         f"{completions_per_step} is not a multiple of micro_batch_size_update "
                         f"x processes = {denom}")
    if g.rollout_batch_size % g.global_batch_size:
        raise ValueError(f"rollout_batch_size = {g.rollout_batch_size} is not a multiple of "
                         f"global_batch_size = {g.global_batch_size}")
    # max_steps (config or override) counts global batches; TRL counts optimizer steps
    max_steps = int(overrides.pop("max_steps", g.max_steps)) * n_mini
    bf16 = g.precision == "bfloat16" and not use_cpu
    _, ref_dtype = training_dtypes(g.precision, use_cpu)
    kwargs = dict(
        output_dir=output_dir, seed=seed, use_cpu=use_cpu,
        learning_rate=g.learning_rate, weight_decay=g.weight_decay, warmup_steps=g.warmup_steps,
        lr_scheduler_type="constant", optim="adamw_torch",
        # optimizer_offload: the offloaded AdamW clips (the trainer sees no gradients)
        max_grad_norm=0.0 if g.optimizer_offload else g.max_grad_norm,
        beta=g.kl_beta, epsilon=g.clip_eps_low, epsilon_high=g.clip_eps_high,
        loss_type="dapo", scale_rewards="group",
        num_generations=g.num_generations, per_device_train_batch_size=per_device,
        gradient_accumulation_steps=completions_per_step // denom,
        steps_per_generation=(completions_per_step // denom)
        * (g.rollout_batch_size // g.global_batch_size) * n_mini,
        num_iterations=g.updates_per_batch,
        max_completion_length=g.max_response_length, temperature=g.temperature, top_p=g.top_p,
        top_k=g.top_k, max_steps=max_steps, num_train_epochs=g.epochs,
        gradient_checkpointing=g.gradient_checkpointing and not use_cpu,
        bf16=bf16, fp16=g.precision == "float16" and not use_cpu,
        report_to="none", logging_steps=1, save_strategy="no", disable_dropout=True,
        # verl, as the paper used it, has no such correction; TRL's would reweight each
        # sequence by the product of its token ratios (docs/vllm.md); a mask makes the ratio
        # meaningless (vLLM's masked log-probs against the full-vocabulary policy)
        vllm_importance_sampling_correction=g.rollout_is_correction and not masked,
        # the reference model (beta > 0) is rebuilt by TRL from the policy's path with these:
        # in the low precision, and on this rank's device, never spread with device_map="auto"
        # (TRL forces None only under DDP/DeepSpeed; FSDP and one process would spread it)
        model_init_kwargs={"dtype": ref_dtype, "device_map": None},
    )
    kwargs.update(overrides)
    if kwargs.get("use_vllm") and kwargs.get("vllm_mode", "colocate") == "colocate":
        prepare_vllm_rollouts(masked)
    return TRLConfig(**kwargs)


def pack_rows(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor,
              completion_ids: torch.Tensor, completion_mask: torch.Tensor
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...]]:
    """Padding-free packing (verl's ``use_remove_padding``) of ``n`` left-padded prompts and
    right-padded completions ``(n, P)``, ``(n, T)`` into one row: the tokens each row's forward
    attends to (mask 1), row after row, with positions restarting at 0 per sequence (so
    transformers builds a block-diagonal causal mask from them). Returns ``(input_ids,
    position_ids, labels)``, each ``(1, L)`` (labels: the completion tokens, -100 elsewhere),
    and ``where = (rows, cols, index)``: completion token ``(rows[j], cols[j])`` sits at
    ``index[j]`` of the packed row, so its log-prob is the fused head's output at
    ``index[j] - 1``. Rows without a completion token are left out.

    >>> ids, pos, lab, (r, c, i) = pack_rows(torch.tensor([[0, 5], [6, 7]]),
    ...     torch.tensor([[0, 1], [1, 1]]), torch.tensor([[8, 0], [9, 3]]),
    ...     torch.tensor([[1, 0], [1, 1]]))
    >>> ids.tolist(), pos.tolist(), lab.tolist()
    ([[5, 8, 6, 7, 9, 3]], [[0, 1, 0, 1, 2, 3]], [[-100, 8, -100, -100, 9, 3]])
    >>> r.tolist(), c.tolist(), i.tolist()
    ([0, 1, 1], [0, 0, 1], [1, 4, 5])
    """
    n, p = prompt_ids.shape
    ids = torch.cat([prompt_ids, completion_ids], dim=1)
    keep = torch.cat([prompt_mask, completion_mask], dim=1) > 0
    keep &= (completion_mask > 0).any(dim=1, keepdim=True)
    is_completion = torch.zeros_like(keep)
    is_completion[:, p:] = True
    flat = ids[keep]
    positions = (keep.long().cumsum(dim=1) - 1)[keep]
    labels = torch.where(is_completion[keep], flat, torch.full_like(flat, -100))
    index = (keep.reshape(-1).long().cumsum(dim=0) - 1).view(n, -1)
    scored = keep & is_completion
    rows, cols = scored.nonzero(as_tuple=True)
    return (flat.unsqueeze(0), positions.unsqueeze(0), labels.unsqueeze(0),
            (rows, cols - p, index[scored]))


def cov_settings(g: GRPOConfig) -> dict[str, Any]:
    """The KL-Cov / Clip-Cov settings of a role (``MaskedGRPOTrainer``'s ``cov``)."""
    return {"k_frac": g.kl_cov_k_frac, "beta": g.kl_cov_beta, "ratio": g.clip_cov_ratio,
            "lb": g.clip_cov_lb, "ub": g.clip_cov_ub, "old_logprobs": g.cov_old_logprobs,
            "experience_micro_batch": g.micro_batch_size_experience}


class MaskedGRPOTrainer(GRPOTrainer):
    """TRL's GRPOTrainer with the vocabulary mask at sampling time and the loss variants (see
    the module docstring). Extra keyword arguments: ``vocab_dropout``, ``mask_seed_fn(step)``,
    ``loss_variant`` (grpo | kl_cov | clip_cov), ``cov`` (k_frac, beta, ratio, lb, ub,
    old_logprobs: packed | recompute | detach, experience_micro_batch), ``skip_null_backward``,
    ``rollout_llm_kwargs`` (extra ``vllm.LLM`` keywords of TRL's colocated engine,
    :func:`vdlib.engines.setting.rollout_llm_kwargs`) or ``rollout_llm_factory`` (what TRL's
    ``LLM(...)`` returns instead: the run's engine), both from
    :func:`vdlib.engines.setting.rollout_setting`."""

    def __init__(self, *args: Any, vocab_dropout: VocabDropout | None = None,
                 mask_seed_fn: Callable[[int], int] | None = None,
                 loss_variant: str = "grpo", cov: dict | None = None,
                 rollout_llm_kwargs: dict[str, Any] | None = None,
                 rollout_llm_factory: Callable[..., Any] | None = None,
                 offload_max_grad_norm: float | None = None,
                 skip_null_backward: bool = False, **kwargs: Any) -> None:
        if (vocab_dropout is None) != (mask_seed_fn is None):
            raise ValueError("vocab_dropout and mask_seed_fn go together")
        if loss_variant not in ("grpo", "kl_cov", "clip_cov"):
            raise ValueError(f"loss_variant = {loss_variant!r}; allowed values: grpo, "
                             "kl_cov, clip_cov")
        old_mode = (cov or {}).get("old_logprobs", "packed")
        if old_mode not in COV_OLD_LOGPROBS:
            raise ValueError(f"cov old_logprobs = {old_mode!r}; allowed values: "
                             f"{', '.join(COV_OLD_LOGPROBS)}")
        if int((cov or {}).get("experience_micro_batch", 4)) < 1:
            raise ValueError("cov experience_micro_batch must be >= 1")
        from vdlib.engines.vllm_backend import trl_llm_kwargs
        from vdlib.loop.trainer_logs import log_not_print
        # TRL's colocated vLLM starts in here, or receives the run's engine from the factory
        with trl_llm_kwargs(rollout_llm_kwargs, factory=rollout_llm_factory):
            super().__init__(*args, **kwargs)
        log_not_print(self)  # the per-step dicts to logging (DEBUG), not stdout
        handle = getattr(getattr(self, "vllm_generation", None), "llm", None)
        if rollout_llm_factory is not None and hasattr(handle, "policy"):
            handle.policy = self.model  # the freshness diagnostic compares against it
        self.offload_max_grad_norm, self.vocab_dropout = offload_max_grad_norm, vocab_dropout
        self.mask_seed_fn, self.skip_null_backward = mask_seed_fn, skip_null_backward
        self.loss_variant, self.cov, self.current_mask_seed = loss_variant, dict(cov or {}), None
        self.mask_log: list[dict[str, Any]] = []  # (step, seed, kept fraction) per generation
        self._cov_generator = torch.Generator().manual_seed(int(self.args.seed))
        ref = getattr(self, "ref_model", None)
        logger.info("GRPO on %s: policy weights %s, reference %s, autocast %s",
                    self.accelerator.device, next(self.model.parameters()).dtype,
                    next(ref.parameters()).dtype if ref is not None else None,
                    "bf16" if self.args.bf16 else "fp16" if self.args.fp16 else "off")

    def create_optimizer(self, model: Any = None) -> Any:
        """transformers' AdamW, or with ``offload_max_grad_norm`` (``optimizer_offload``) the
        same update with its fp32 state on the CPU (:func:`vdlib.loop.offload.for_trainer`)."""
        if self.offload_max_grad_norm is None or self.optimizer is not None:
            return super().create_optimizer(model)
        from vdlib.loop.offload import for_trainer

        self.optimizer = for_trainer(self, self.model if model is None else model)
        return self.optimizer

    def log(self, logs: dict[str, float], *args: Any, **kwargs: Any) -> None:
        from vdlib.loop.offload import last_grad_norm

        norm = last_grad_norm(getattr(self, "optimizer", None))
        if norm is not None and "loss" in logs:
            logs = {**logs, "grad_norm": norm}  # the offloaded AdamW's norm, before clipping
        super().log(logs, *args, **kwargs)

    def _generate_single_turn(self, prompt_ids: Any, *args: Any, **kwargs: Any) -> Any:
        if self.vocab_dropout is None:
            with self._nucleus_filter():
                return super()._generate_single_turn(prompt_ids, *args, **kwargs)
        step = int(self.state.global_step)
        self.current_mask_seed = seed = self.mask_seed_fn(step)
        kept = self.vocab_dropout.kept_fraction(seed)
        self.mask_log.append({"step": step, "mask_seed": seed, "kept_fraction": kept})
        self._metrics["train"]["vocab_dropout/kept_fraction"].append(kept)
        if self.use_vllm:
            from vdlib.engines.vllm_backend import extra_args

            self.vllm_generation.generation_kwargs["extra_args"] = extra_args(
                self.vocab_dropout, seed)
            out = super()._generate_single_turn(prompt_ids, *args, **kwargs)
        else:
            model = self.accelerator.unwrap_model(self.model)
            allowed = self.vocab_dropout.sample(seed, self.accelerator.device)
            with lm_head_mask(model, allowed), self._nucleus_filter():
                out = super()._generate_single_turn(prompt_ids, *args, **kwargs)
        check_rollouts_masked(out[0], self.vocab_dropout, seed)
        return out

    @contextlib.contextmanager
    def _nucleus_filter(self) -> Iterator[None]:
        """transformers rollouts (not vLLM's) sample through :mod:`vdlib.engines.sampling`'s
        processors: the same temperature / top-k / top-p chain, after the mask (the lm_head
        hook), with a top-p filter that sorts no full vocabulary (15 % of a tiny CPU iteration
        went to ``torch.sort``). TRL's generation config samples plainly meanwhile."""
        cfg = getattr(self, "generation_config", None)
        if self.use_vllm or cfg is None or not cfg.do_sample:
            yield
            return
        chain = sampling_processors(cfg.temperature if cfg.temperature is not None else 1.0,
                                    cfg.top_k or 0, cfg.top_p if cfg.top_p is not None else 1.0)
        if not chain:
            yield
            return
        model = self.accelerator.unwrap_model(self.model)
        saved = (cfg.temperature, cfg.top_k, cfg.top_p)
        cfg.temperature, cfg.top_k, cfg.top_p = 1.0, 0, 1.0
        model.generate = functools.partial(type(model).generate, model,
                                           logits_processor=LogitsProcessorList(chain))
        try:
            yield
        finally:
            del model.generate
            cfg.temperature, cfg.top_k, cfg.top_p = saved

    def _generate_and_score_completions(self, inputs: Any) -> dict[str, Any]:
        out = super()._generate_and_score_completions(inputs)
        if (self.loss_variant != "grpo" and self.model.training
                and self.cov.get("old_logprobs", "packed") in ("packed", "recompute")):
            out["old_per_token_logps"] = self._experience_logps(out)
        return out

    def _experience_logps(self, batch: dict[str, Any]) -> torch.Tensor:
        """Old log-probs of a rollout batch as verl's / EasyR1's ``compute_log_prob``: one
        no-grad forward of the current policy over the whole batch, before any update on it, in
        chunks of ``experience_micro_batch`` completions (the update runs in chunks of
        ``per_device_train_batch_size``), each chunk packed without padding (``packed``) or
        padded as the update's (``recompute``). Replaces TRL's own pass where TRL made one."""
        from trl.models.utils import disable_gradient_checkpointing

        chunk = int(self.cov.get("experience_micro_batch", 4))
        with torch.no_grad(), disable_gradient_checkpointing(
                self.model, self.args.gradient_checkpointing_kwargs):
            if self.cov.get("old_logprobs", "packed") == "packed":
                return self._packed_logps(batch, chunk)
            input_ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
            attention_mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
            logps, _, _ = self._get_per_token_logps_and_entropies(
                self.model, input_ids, attention_mask, batch["completion_ids"].size(1),
                batch_size=chunk)
        return logps

    def _packed_logps(self, batch: dict[str, Any], chunk: int) -> torch.Tensor:
        """The ``packed`` pass: per chunk of ``chunk`` completions one row of their real tokens
        (:func:`pack_rows`), through the same fused log-prob head and autocast as TRL's passes;
        padding positions get 0 (the loss masks them)."""
        completion_ids = batch["completion_ids"]
        out = torch.zeros(completion_ids.shape, dtype=torch.float32,
                          device=completion_ids.device)
        for start in range(0, completion_ids.size(0), chunk):
            rows = slice(start, start + chunk)
            ids, positions, labels, (r, c, index) = pack_rows(
                batch["prompt_ids"][rows], batch["prompt_mask"][rows], completion_ids[rows],
                batch["completion_mask"][rows])
            if not len(r):
                continue
            with self.accelerator.autocast():
                outputs = self.model(input_ids=ids, position_ids=positions, labels=labels,
                                     fused_lm_head=True)
            out[r + start, c] = outputs.log_probs[0, index - 1].float()
        return out

    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        loss = (super()._compute_loss(model, inputs) if self.loss_variant == "grpo"
                else self._cov_loss(model, inputs))
        if (self.skip_null_backward and self.model.training and self.accelerator.num_processes == 1
                and null_gradient(inputs["advantages"], self.state.global_step)):
            logger.info("GRPO step 1: every advantage 0 at the reference policy: no backward")
            return loss.detach().requires_grad_()  # a leaf: backward() reaches no weight
        return loss

    def _cov_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        prompt_ids, prompt_mask = inputs["prompt_ids"], inputs["prompt_mask"]
        completion_ids, mask = inputs["completion_ids"], inputs["completion_mask"]
        input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
        attention_mask = torch.cat([prompt_mask, mask], dim=1)
        logps, entropies, _ = self._get_per_token_logps_and_entropies(
            model, input_ids, attention_mask, completion_ids.size(1), compute_entropy=True)
        old = inputs.get("old_per_token_logps")
        old = logps.detach() if old is None else old
        adv = inputs["advantages"]
        adv = adv if adv.dim() == 1 else adv[:, 0]
        maskf = mask.to(logps.dtype)
        if self.loss_variant == "kl_cov":
            per_token, stats = kl_cov_loss(
                logps, old, adv, maskf, k_frac=self.cov.get("k_frac", 2e-3),
                kl_coef=self.cov.get("beta", 1.0))
        else:
            per_token, stats = clip_cov_loss(
                logps, old, adv, maskf, eps_low=self.epsilon_low, eps_high=self.epsilon_high,
                clip_ratio=self.cov.get("ratio", 2e-4), cov_lb=self.cov.get("lb", 1.0),
                cov_ub=self.cov.get("ub", 5.0), generator=self._cov_generator)
        if self.beta != 0.0:
            ref = inputs["ref_per_token_logps"]
            per_token = per_token + self.beta * (torch.exp(ref - logps) - (ref - logps) - 1)
        # token-mean over the generation batch, as TRL's "dapo" aggregation
        normalizer = inputs["num_items_in_batch"].clamp(min=1.0) / self.accelerator.num_processes
        if self.model.training:
            normalizer = (normalizer * self.current_gradient_accumulation_steps
                          / self.args.steps_per_generation)
        loss = (per_token * maskf).sum() / normalizer
        mode = "train" if self.model.training else "eval"
        self._metrics[mode]["entropy"].append(
            float((entropies.detach() * maskf).sum() / maskf.sum().clamp(min=1.0)))
        for k, v in stats.items():  # per micro-batch; TRL logs each step's mean
            self._metrics[mode][f"{self.loss_variant}/{k}"].append(float(v))
        return loss
