"""Notebook 03's curriculum transfer: each run's curriculum verified by
``verification.transfer_model``, then a fresh ``model.transfer`` GRPO-trained on the kept
questions (:func:`transfer_grid`). The runs it transfers are
:func:`vdlib.report.experiments.transfer_runs`; the students are evaluated with
:func:`vdlib.experiments.evaluate.evaluate_checkpoint`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vdlib.config import layout
from vdlib.config.experiment import ExperimentConfig
from vdlib.report.experiments import RunKey

__all__ = ["transfer_grid"]


def transfer_grid(runs: Mapping[RunKey, Path], cfg: ExperimentConfig, iteration: int
                  ) -> dict[RunKey, dict[str, Any]]:
    """Verify each run's iteration-``iteration`` curriculum (``verification.transfer_source``:
    the band-filtered questions, as the paper, or every valid one) with
    ``verification.transfer_model`` (:func:`vdlib.evaluation.verification.build_transfer_dataset`)
    and GRPO-train a fresh
    ``model.transfer`` on the kept ones (:func:`vdlib.loop.policy.train_transfer`), under
    ``<output_dir>/<experiment>/<arm>-seed<seed>/``. Returns per run the counts and the
    trained model folder (``model``): ``valid`` questions, verified ``candidates``, kept
    (``verified``) and ``kept_fraction`` of the candidates."""
    from vdlib.evaluation.verification import build_transfer_dataset, make_verifier
    from vdlib.loop.policy import train_transfer

    verifier = make_verifier(cfg.verification, "transfer", device=cfg.model.device,
                             engine=cfg.engine)
    out: dict[RunKey, dict[str, Any]] = {}
    for (arm, seed), run_dir in runs.items():
        target = layout.arm_run_path(cfg.output_dir, cfg.experiment, arm, seed)
        data = build_transfer_dataset(run_dir, iteration, verifier,
                                      out_path=layout.verified_curriculum_path(target),
                                      source=cfg.verification.transfer_source,
                                      band=(cfg.scoring.tau_min, cfg.scoring.tau_max))
        verifier.close()  # a local engine frees the GPU before the transfer model trains
        summary = json.loads(layout.dataset_summary_path(data).read_text())
        c = dataclasses.replace(cfg, seed=seed, run_id=layout.arm_run_id(arm, seed))
        model = train_transfer(c, data, layout.transfer_training_dir(target))
        out[(arm, seed)] = {"verified": summary["n_kept"], "valid": summary["n_valid"],
                            "candidates": summary["n_candidates"],
                            "kept_fraction": summary["kept_fraction"], "model": str(model)}
    return out
