"""The paper's experimental arms as named overrides of a base config.

An arm is a small dict merged over a base params dict (``arm_params``); its run folder is
``<experiment>/<arm>-seed<seed>``. Arms (paper, Sec. "Setup", Table "vanilla_eval", appendices):

- ``baseline``: alpha 1.0, the unmasked R-Zero pipeline (no processor at all).
- ``vd85``, ``vd75``: vocabulary dropout in both phases with alpha 0.85 / 0.75.
- ``train_only``, ``gen_only``: alpha 0.75 in GRPO rollouts only / curriculum generation only.
- ``anneal``: linear alpha 0.75 -> 1.0 over the iterations (App. "Annealed masking schedule").
- ``adaptive``: alpha 0.75 at iteration 1, then set each iteration from the last one's valid
  fraction and cumulative Vendi growth by the bounded controller of
  :mod:`vdlib.method.adaptive_alpha` (``vocab_dropout.schedule: adaptive``; issue 54, beyond
  the paper's Sec. 7 "adaptive masks"; docs/schedules.md).
- ``kl_cov``, ``clip_cov``: the entropy-control baselines on the proposer, no mask, "with
  all other training settings identical to the Baseline and VD arms" (App. "Entropy-control
  baselines"): the same rollouts and optimizer steps as ``baseline``. With the paper's one
  on-policy update per rollout batch, KL-Cov's ``|log pi - log pi_old|`` term acts only where
  the separate no-grad pass that computes the old log-probs rounds differently from the
  update's forward: ``cov_old_logprobs: packed`` (the default) packs it without padding, as
  the paper's system (verl v0.4.1-v0.5.0, ``use_remove_padding``) did, so it does
  (docs/experiments.md, "KL-Cov on-policy").
- ``kl_cov_inert``: KL-Cov with the old log-probs recomputed padded like the update
  (``cov_old_logprobs: recompute``): bit-identical to the update in bf16, so its term never
  acts and it trains as ``baseline`` does; the committed gpu-small KL-Cov runs were this
  (``kl_cov/n_active`` 0 in 27 of 27 proposer steps).
- ``kl_cov_offpolicy``: KL-Cov where its term acts (vdlib's variant, not a paper arm): each
  global batch is split into two optimizer mini-batches (``proposer.ppo_mini_batches = 2``, as
  verl's ``ppo_mini_batch_size`` below the rollout batch), so it sees the same rollout batches
  as ``baseline`` and takes twice the optimizer steps, every second one off-policy.
- ``vd85_gen``: alpha 0.85 in curriculum generation only: the dropout arm of the cross-scale
  runs (App. "Cross-scale co-evolution": an 8B proposer and a 4B solver, set through
  ``model.proposer`` / ``model.solver``, compared with ``baseline`` on the same pair).
- ``vd95``: alpha 0.95 (a light mask): the dropout arm of single-policy GRPO (App.
  "Vocabulary dropout outside co-evolution", notebook 04; the mask acts on the policy's
  rollouts).
- ``vd75_fail_neg``, ``baseline_fail_neg``: ``vd75`` and ``baseline`` with
  ``scoring.parse_failure_reward: -1`` (R-Zero's code gives -1 minus the rollout's 1/batch
  repetition penalty; these arms -1 flat) instead of the paper's 0 (Algorithm 1),
  not paper arms. Under the paper's value a rollout that fails to parse (0, no penalty) earns
  more than a valid question outside the difficulty window (0 - |cluster| / batch < 0); with
  -1 it earns no more than any valid rollout (a penalty is at most 1). The pair tests whether
  that incentive, rather than the mask itself, drives the masked arms' falling valid fraction
  (docs/experiments.md, "The format-failure incentive"; ``params/gpu-small/fail_neg.yaml``).

>>> arm_params({"vocab_dropout": {"alpha": 0.5}}, "gen_only")["vocab_dropout"]
{'alpha': 0.75, 'phases': 'gen'}
>>> arm_params({}, "vd75_fail_neg")["scoring"]
{'parse_failure_reward': -1.0}
>>> arm_params({}, "vd99")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
vdlib.utils.registry.UnknownNameError: unknown arm 'vd99'; valid names: adaptive, anneal, ...
"""

from __future__ import annotations

import copy
from typing import Any

from vdlib.config.arm_table import ARMS, arm_names
from vdlib.config.layout import arm_run_id

__all__ = ["ARMS", "arm_params", "arm_names"]


def _merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) \
            else copy.deepcopy(v)
    return out


def arm_params(base: dict[str, Any], arm: str) -> dict[str, Any]:
    """``base`` with the arm's overrides merged in, ``run_id`` set to ``<arm>-seed<seed>`` and
    ``arms`` cleared (the result describes one run)."""
    merged = _merge(base, ARMS.get(arm))
    merged["run_id"] = arm_run_id(arm, merged.get("seed", 0))
    merged["arms"] = []
    return merged
