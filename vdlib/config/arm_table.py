"""The table of the paper's arms: each arm's name and the overrides it merges over a base config
(:mod:`vdlib.loop.arms` describes them and applies them). It imports nothing above
:mod:`vdlib.utils.registry`, so :mod:`vdlib.config` can check arm names without an import circle."""

from __future__ import annotations

from typing import Any

from vdlib.utils.registry import Registry

__all__ = ["ARMS", "arm_names"]

ARMS: Registry[dict[str, Any]] = Registry("arm")
ARMS.add("baseline", {"vocab_dropout": {"alpha": 1.0}})
ARMS.add("vd85", {"vocab_dropout": {"alpha": 0.85, "phases": "both"}})
ARMS.add("vd75", {"vocab_dropout": {"alpha": 0.75, "phases": "both"}})
ARMS.add("train_only", {"vocab_dropout": {"alpha": 0.75, "phases": "train"}})
ARMS.add("gen_only", {"vocab_dropout": {"alpha": 0.75, "phases": "gen"}})
ARMS.add("anneal", {"vocab_dropout": {"alpha": 0.75, "alpha_final": 1.0, "schedule": "linear",
                                      "phases": "both"}})
# issue 54 (vdlib's, not a paper arm): alpha starts at 0.75 and the controller of
# vdlib.method.adaptive_alpha sets each later iteration's from the run's last metrics
ARMS.add("adaptive", {"vocab_dropout": {"alpha": 0.75, "schedule": "adaptive",
                                        "phases": "both"}})
ARMS.add("kl_cov", {"vocab_dropout": {"alpha": 1.0}, "proposer": {"loss_variant": "kl_cov"}})
# the committed gpu-small KL-Cov runs: old log-probs from a padded recompute, bit-identical to
# the update's in bf16, so KL-Cov's term never acted (docs/experiments.md, "KL-Cov on-policy")
ARMS.add("kl_cov_inert", {"vocab_dropout": {"alpha": 1.0},
                          "proposer": {"loss_variant": "kl_cov", "cov_old_logprobs": "recompute"}})
ARMS.add("kl_cov_offpolicy", {"vocab_dropout": {"alpha": 1.0},
                              "proposer": {"loss_variant": "kl_cov", "ppo_mini_batches": 2}})
ARMS.add("clip_cov", {"vocab_dropout": {"alpha": 1.0}, "proposer": {"loss_variant": "clip_cov"}})
ARMS.add("vd85_gen", {"vocab_dropout": {"alpha": 0.85, "phases": "gen"}})
ARMS.add("vd95", {"vocab_dropout": {"alpha": 0.95, "phases": "both"}})
# R-Zero's parse-failure reward without its penalty, -1 (R-Zero's code: -1 - 1/batch; the
# paper's Algorithm 1 gives 0): the incentive's pair
ARMS.add("baseline_fail_neg", {"vocab_dropout": {"alpha": 1.0},
                               "scoring": {"parse_failure_reward": -1.0}})
ARMS.add("vd75_fail_neg", {"vocab_dropout": {"alpha": 0.75, "phases": "both"},
                           "scoring": {"parse_failure_reward": -1.0}})


def arm_names() -> list[str]:
    return ARMS.names()
