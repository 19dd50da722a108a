"""The checkpoints of one run: where each role's weights are, and how they are built, loaded,
saved and sampled from, under one process or several.

- **Bases** (iteration 0): a registered model saved once into the run (``base_models/``), a
  directory or Hub id as given, or the format warm-start of ``warm_start.mode: sft`` (cached per
  machine). Under several processes the main one builds them first (:meth:`prepare_bases`).
- **Trained roles**: ``iter_<t>/proposer_model`` and ``iter_<t>/solver_model`` (:meth:`proposer`,
  :meth:`solver`; t = 0 is the base).
- **Loading**: :meth:`load` for generation only (``model.dtype`` on GPU), :meth:`load_policy` for
  a GRPO stage (float32 master weights, see :func:`vdlib.loop.trainer.training_dtypes`).
- **Saving**: :meth:`save_model` saves a trained policy once (every rank takes part under
  ZeRO-3 / FSDP; the main one writes), atomically.
- **Sampling**: :meth:`engine` opens the ``engine.backend`` engine on a checkpoint for one stage
  (vdlib.engines).

The loop (vdlib.loop.coevolution), curriculum transfer and single-policy GRPO (vdlib.loop.policy)
and the notebooks' grids (vdlib.experiments) all reach weights through this class.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from vdlib.config.experiment import ExperimentConfig
from vdlib.config.layout import iteration_dir, run_path
from vdlib.engines.models import MODELS, atomic_build_dir, load_model, resolve_device
from vdlib.engines.setting import open_engine, rollout_mode
from vdlib.loop.distributed import (
    barrier,
    deepspeed_fp32_state_dict,
    is_main_process,
    local_rank,
    rank,
    world_size,
)
from vdlib.runs.run_state import FOLDER_RECORD, verified_build_dir

__all__ = ["ModelStore"]

logger = logging.getLogger(__name__)


class ModelStore:
    """One run's checkpoints (see the module docstring). ``run_dir``: the run's folder
    (default: the config's, :func:`vdlib.config.layout.run_path`)."""

    def __init__(self, cfg: ExperimentConfig, run_dir: Path | None = None) -> None:
        self.cfg = cfg
        self.run_dir = Path(run_dir) if run_dir is not None else run_path(cfg)
        self.device = str(resolve_device(cfg.model.device))
        if world_size() > 1 and self.device.startswith("cuda"):
            self.device = f"cuda:{local_rank()}"  # one GPU per rank
        self.use_cpu = self.device == "cpu"
        if world_size() > 1:
            logger.info("process %d of %d on %s", rank(), world_size(), self.device)
        self._bases: dict[tuple[str, str], str] = {}
        self._run_engine: Any = None
        self._lifetime_checked = False

    # ---------------------------------------------------------------- where

    def base(self, name: str, role: str) -> str:
        """Iteration-0 checkpoint of a role: the base model, format-warm-started if asked."""
        key = (name, role)
        if key not in self._bases:
            self._bases[key] = self._build_base(name, role)
        return self._bases[key]

    def _build_base(self, name: str, role: str) -> str:
        cfg = self.cfg
        if cfg.warm_start.mode == "sft":
            from vdlib.loop.warm_start import warm_start_dir

            return str(warm_start_dir(name, cfg.warm_start, seed=cfg.seed,
                                      cache_dir=cfg.model.cache_dir, device=self.device,
                                      check=world_size() == 1 or is_main_process()))
        return self._materialise(name, role)

    def _materialise(self, name: str, role: str) -> str:
        """A path (or Hub id) TRL can load: registered names are saved once into the run
        (``base_models/<role>-<name>``, with a record of its files: on reuse a folder that
        does not match it is built again, :func:`vdlib.runs.run_state.verified_build_dir`)."""
        if Path(name).expanduser().is_dir():
            return str(Path(name).expanduser())
        if name not in MODELS:
            return name  # Hugging Face id
        target = self.run_dir / "base_models" / f"{role}-{name}"
        if world_size() > 1 and not is_main_process() and (target / FOLDER_RECORD).is_file():
            return str(target)  # the main process built and checked it (prepare_bases)

        def build(tmp: Path) -> None:
            model, tok = load_model(name, dtype="float32", device="cpu",
                                    cache_dir=self.cfg.model.cache_dir)
            model.save_pretrained(tmp)
            tok.save_pretrained(tmp)

        return str(verified_build_dir(target, build, f"the {role}'s converted base {name}",
                                      exclusive=is_main_process()))  # the run's lock holder

    def prepare_bases(self) -> None:
        """Build both roles' iteration-0 checkpoints on the main process first (they are written
        into the run or the cache, and checked against their records there), then resolve them
        on the other ranks (which do not check them again)."""
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

    def proposer(self, t: int) -> str:
        """The proposer after iteration ``t`` (t = 0: its base)."""
        return str(iteration_dir(self.run_dir, t) / "proposer_model") if t else \
            self.base(self.cfg.model.proposer, "proposer")

    def solver(self, t: int) -> str:
        """The solver after iteration ``t`` (t = 0: its base)."""
        return str(iteration_dir(self.run_dir, t) / "solver_model") if t else \
            self.base(self.cfg.solver_model, "solver")

    # ---------------------------------------------------------------- load / save

    def load(self, path: str) -> tuple[Any, Any]:
        """A model for generation only: ``model.dtype`` on GPU, float32 on CPU."""
        return load_model(path, dtype=self.cfg.model.dtype if not self.use_cpu else "float32",
                          device=self.device, cache_dir=self.cfg.model.cache_dir)

    def load_policy(self, path: str, g: Any) -> tuple[Any, Any]:
        """The policy a GRPO stage trains (role settings ``g``): float32 master weights, with
        TRL's bf16/fp16 autocast when ``g.precision`` asks for it (:func:`training_dtypes`).
        ``g.optimizer_offload``: the weights in the training precision on the device, their
        float32 masters kept on the CPU for the optimizer (:mod:`vdlib.loop.offload`)."""
        from vdlib.loop.trainer import training_dtypes

        policy_dtype, _ = training_dtypes(g.precision, self.use_cpu, g.optimizer_offload)
        if not g.optimizer_offload:
            return load_model(path, dtype=policy_dtype, device=self.device,
                              cache_dir=self.cfg.model.cache_dir)
        import torch

        from vdlib.loop.offload import attach_masters

        model, tok = load_model(path, dtype="float32", device="cpu",
                                cache_dir=self.cfg.model.cache_dir)
        attach_masters(model)
        return model.to(device=self.device, dtype=getattr(torch, policy_dtype)), tok

    def save_model(self, trainer: Any, tok: Any, target: Path) -> None:
        """Save a trained policy once. Several processes: every rank calls TRL's ``save_model``
        (ZeRO-3 / FSDP gather the weights there), only the main one writes, into one shared
        temporary folder that it then renames."""
        if world_size() > 1:
            tmp = target.parent / f".{target.name}.tmp-dist"
            if is_main_process():
                shutil.rmtree(tmp, ignore_errors=True)
            barrier()
            fp32 = deepspeed_fp32_state_dict(trainer)  # collective: every rank
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

        from vdlib.loop.offload import save_state_dict

        masters = save_state_dict(trainer.model, trainer.optimizer)  # optimizer_offload: fp32

        def build(tmp: Path) -> None:
            if masters is None:
                trainer.save_model(str(tmp))
            else:
                trainer.model.save_pretrained(tmp, state_dict=masters)
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

    # ---------------------------------------------------------------- sample

    def lifetime(self) -> str:
        """The engine lifetime this run uses: ``engine.lifetime``, except ``stage`` where
        ``run`` cannot apply (another backend than vllm, several processes, or roles of
        different architectures: one vLLM 0.25.1 process holds one sleep-mode engine), said
        once in the log."""
        e = self.cfg.engine
        if e.backend != "vllm" or e.lifetime == "stage":
            return "stage"
        why = None
        if world_size() > 1:
            why = "several processes (each rank would need its own engine beside TRL's)"
        elif self.use_cpu:
            why = "no GPU"
        else:
            from vdlib.engines.engine_lifetime import same_architecture
            from vdlib.engines.models import checkpoint_path

            cache = self.cfg.model.cache_dir
            if not same_architecture(checkpoint_path(self.proposer(0), cache),
                                     checkpoint_path(self.solver(0), cache)):
                why = "the proposer and the solver differ in architecture"
        if why is not None:
            if not self._lifetime_checked:
                logger.info("engine.lifetime: run does not apply (%s); engines live per stage",
                            why)
            self._lifetime_checked = True
            return "stage"
        return "run"

    def run_engine(self) -> Any:
        """The run's one engine (:class:`vdlib.engines.engine_lifetime.RunEngine`), created on first
        use (it starts at its first sampling), or None under ``engine.lifetime: stage``."""
        if self._run_engine is None and self.lifetime() == "run":
            from vdlib.engines.engine_lifetime import RunEngine
            from vdlib.engines.models import checkpoint_path, load_tokenizer
            from vdlib.engines.setting import vllm_max_len

            cfg, e = self.cfg, self.cfg.engine
            longest = max(cfg.proposer.max_response_length, cfg.solver.max_response_length,
                          cfg.scoring.max_new_tokens, cfg.curriculum.max_new_tokens)
            build = checkpoint_path(self.solver(0), cfg.model.cache_dir)
            self._run_engine = RunEngine(
                e, build, load_tokenizer(build),
                max_model_len=e.max_model_len or vllm_max_len(1024, longest),
                dtype=cfg.model.dtype)
        return self._run_engine

    def close(self) -> None:
        """Shut the run's engine down (end of the run; no-op without one)."""
        if self._run_engine is not None:
            self._run_engine.close()
            self._run_engine = None

    @contextmanager
    def engine(self, path: str, max_new_tokens: int, *, seed: int = 0,
               batch_size: int | None = None, training: bool = False) -> Iterator[Any]:
        """The ``engine.backend`` engine over checkpoint ``path`` for one stage (vdlib.engines).

        ``engine.lifetime: run``: a view of the run's one engine that samples from ``path``'s
        weights, pushed in memory at each hand-over (:mod:`vdlib.engines.engine_lifetime`); held
        awake for the whole block unless ``training`` (the proposer phase's reward, between
        TRL's rollouts: it wakes, pushes and sleeps per call).

        ``stage``: always started from the checkpoint on disk, so it samples from the weights
        the previous stage saved, and released when the stage ends. ``training``: a trainer
        holds this process's GPU meanwhile (the proposer phase's reward); beside TRL's
        colocated vLLM the engine then runs eager (two in-process engines share vLLM's
        CUDA-graph state)."""
        run_engine = self.run_engine()
        if run_engine is not None:
            from vdlib.engines.models import checkpoint_path

            local = checkpoint_path(path, self.cfg.model.cache_dir)
            view = run_engine.view(local, show_progress=not training)
            if training:
                yield view
            else:
                with run_engine.hold(local):
                    yield view
            return
        e = self.cfg.engine
        shares = training and e.backend == "vllm" and rollout_mode(e) == "colocate"
        with open_engine(e, path, device=self.device,
                         dtype=self.cfg.model.dtype,  # on CPU open_engine takes cpu_dtype
                         cache_dir=self.cfg.model.cache_dir, max_new_tokens=max_new_tokens,
                         batch_size=batch_size, seed=seed,
                         training_device=self.device if training else None,
                         enforce_eager=True if shares else None) as eng:
            yield eng
