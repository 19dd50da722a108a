"""The paper's method, pure: what a reader needs to read, test or reuse it alone.

- :mod:`~vdlib.method.vocab_dropout`: the mask (seeded draw, protected ids, logits processors,
  a run's mask per iteration and phase);
- :mod:`~vdlib.method.mask_schedule`: a run's masks as plain values, torch-free: the schedules
  (fixed, linear, adaptive), the phases, and the ids a mask covers (``MaskSchedule``,
  ``MaskSpec``; built from a config by :mod:`vdlib.config.mask_settings`);
- :mod:`~vdlib.method.adaptive_alpha`: the adaptive alpha schedule's controller (vdlib's, issue
  54: alpha of the next iteration from the last one's valid fraction and diversity);
- :mod:`~vdlib.method.rewards`: the proposer reward (paper / R-Zero), total and solver rewards;
- :mod:`~vdlib.method.bleu`, :mod:`~vdlib.method.bleu_penalty`: the exact pairwise BLEU kernel,
  R-Zero's BLEU-cluster repetition penalty;
- :mod:`~vdlib.method.grpo`: GRPO / KL-Cov / Clip-Cov loss math on ``(batch, seq)`` tensors;
- :mod:`~vdlib.method.curriculum`: the difficulty filter and the target answer;
- :mod:`~vdlib.method.parsing`, :mod:`~vdlib.method.grading`, :mod:`~vdlib.method.prompts`:
  output parsing, answer equivalence and majority vote, the prompts;
- :mod:`~vdlib.method.seeding`: one seed derived from (run seed, iteration, phase, step).

- :mod:`~vdlib.method.rollout_mask`: the mask on a model's logits while GRPO rollouts sample.

May import: the standard library, torch, transformers (the logits-processor base), numpy, scipy,
math-verify; of vdlib only :mod:`vdlib.utils.helper_process` (grading's comparisons run in
helper processes with a hard timeout) (tests/test_architecture.py).
"""
