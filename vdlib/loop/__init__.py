"""One run of the co-evolution loop (Algorithm 1), resumable.

- :mod:`~vdlib.loop.coevolution`: the runner (``run``, ``run_arms``): iterations x stage table,
  resume, timing; :mod:`~vdlib.loop.stages`: the six stages and ``STAGE_TABLE``;
- :mod:`~vdlib.loop.proposals`, :mod:`~vdlib.loop.scoring`: proposer sampling, self-consistency
  scoring;
- :mod:`~vdlib.loop.trainer`, :mod:`~vdlib.loop.policy`: the TRL subclass (mask at sampling, loss
  variants, reward callables); GRPO of one policy on fixed problems;
- :mod:`~vdlib.loop.model_store`, :mod:`~vdlib.loop.warm_start`: a run's checkpoints and engines;
  the format warm start;
- :mod:`~vdlib.loop.alpha_records`: the alpha an iteration uses (the adaptive schedule reads
  the run's earlier metrics);
- :mod:`~vdlib.loop.arms`, :mod:`~vdlib.loop.distributed`, :mod:`~vdlib.loop.progress`: an arm's
  config and run id; ranks under accelerate and the run folder opened once for all of them; the
  stage heartbeat and ``--stop-after``.

The run folder's bookkeeping (fingerprint, lock, stage records, manifest, start) is
:mod:`vdlib.runs`.

May import: :mod:`vdlib.method`, :mod:`vdlib.utils`, :mod:`vdlib.engines`, :mod:`vdlib.config`,
:mod:`vdlib.metrics`, :mod:`vdlib.evaluation`, :mod:`vdlib.runs`.
"""
