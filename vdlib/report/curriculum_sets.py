"""The final curricula of finished co-evolution runs, measured: what they hold
(:func:`composition_frame`, paper tab:wellposed) and how diverse they are
(:func:`diversity_frame`, paper tab:nli_diversity). Notebook 03 shows both at every model scale
of ``reference_experiments`` (:func:`vdlib.report.experiments.reference_runs_by_experiment`).

- The **curriculum-filtered set** of a run at iteration t: its valid questions whose solver
  accuracy lies in the difficulty band [tau_min, tau_max] (paper App. "Curriculum diversity
  controlling for correctness": "the productive difficulty band ... that the solver trains
  on"), :func:`curriculum_set`.
- **Composition** (tab:wellposed): generated, in-band (Filter pass, Pass rate), well-posed and
  correct (the ``verification.correctness_model`` judge, paper GPT-4.1-mini), the Vendi score
  of the well-posed and correct subsets (``metrics.embedder``) and the NLI diversity of the
  well-posed subset (``nli_wp``; the appendix's "+0.12 at 4B and +0.03 at 8B").
- **Diversity** (tab:nli_diversity), on the curriculum-filtered set: mean pairwise cosine
  distance with ``metrics.semantic_embedder`` (paper Qwen3-Embedding-4B), NLI logical diversity
  (``metrics.nli_model``, bidirectional), each with a bootstrap SE of
  ``metrics.bootstrap_resamples`` resamples (:mod:`vdlib.metrics.bootstrap`), and the paper's
  robustness checks: the cosine column with ``metrics.swap_embedder`` (paper all-MiniLM-L6-v2)
  and unidirectional NLI (``metrics.nli_unidirectional``).

Each row carries ``group``: the run's model scale (:func:`scale_label`, e.g. ``Qwen3-8B``),
which the tables use to put our rows beside the paper's rows of the same scale.

>>> scale_label("Qwen/Qwen3-8B-Base"), scale_label("smollm2-135m")
('Qwen3-8B', 'smollm2-135m')
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from vdlib.config import layout
from vdlib.config.experiment import ExperimentConfig, MetricsConfig
from vdlib.method.curriculum import filter_curriculum
from vdlib.utils.artifacts import read_jsonl

__all__ = ["scale_label", "run_scale", "curriculum_set", "set_diversity", "composition_frame",
           "diversity_frame", "DIVERSITY_COLUMNS"]

logger = logging.getLogger(__name__)

RunKey = tuple[str, int]  # (arm, seed)

#: the per-run values of :func:`diversity_frame` (each with a ``<name>_se`` column)
DIVERSITY_COLUMNS = ("semantic", "semantic_swap", "logical", "logical_unidirectional")


def scale_label(model: str) -> str:
    """A model's scale label as the paper's tables name it: the Hub id without organisation
    and ``-Base`` suffix (``Qwen/Qwen3-4B-Base`` -> ``Qwen3-4B``)."""
    name = str(model).rstrip("/").rsplit("/", 1)[-1]
    return name.removesuffix("-Base")


def run_scale(run_dir: str | os.PathLike) -> str:
    """:func:`scale_label` of the proposer in a run's ``config.yaml`` (``unknown`` without)."""
    import yaml

    path = layout.config_path(Path(run_dir))
    cfg = yaml.safe_load(path.read_text()) if path.is_file() else None
    model = ((cfg or {}).get("model") or {}).get("proposer")
    return scale_label(model) if model else "unknown"


def _questions(run_dir: Path, iteration: int) -> list[dict[str, Any]]:
    return read_jsonl(layout.iteration_dir(run_dir, iteration) / layout.QUESTIONS_FILE)


def curriculum_set(questions: Sequence[dict[str, Any]], band: tuple[float, float]
                   ) -> list[dict[str, Any]]:
    """The curriculum-filtered set: valid questions with solver accuracy in ``band`` and a
    proposer answer (:func:`vdlib.method.curriculum.filter_curriculum`, target proposer)."""
    return filter_curriculum(list(questions), band[0], band[1], target="proposer")


def _band(cfg: ExperimentConfig) -> tuple[float, float]:
    return cfg.scoring.tau_min, cfg.scoring.tau_max


def _nli_stats(texts: list[str], m: MetricsConfig, direction: str, seed: int,
               device: str) -> tuple[float | None, float | None]:
    from vdlib.metrics.bootstrap import pair_bootstrap_se
    from vdlib.metrics.nli import nli_pair_scores

    if len(texts) < 2:
        return None, None
    pairs, scores = nli_pair_scores(texts, m.nli_model, direction, max_pairs=m.nli_max_pairs,
                                    seed=seed, device=device)
    se = pair_bootstrap_se(pairs, scores, len(texts), m.bootstrap_unit, m.bootstrap_resamples,
                           seed)
    return float(scores.mean()), se


def _cosine_stats(texts: list[str], m: MetricsConfig, embedder: str, seed: int,
                  device: str) -> tuple[float | None, float | None]:
    from vdlib.metrics.bootstrap import pair_bootstrap_se, pairwise_cosine_distances
    from vdlib.metrics.diversity import mean_pairwise_cosine_distance
    from vdlib.metrics.embeddings import embed

    if len(texts) < 2 or embedder == "none":
        return None, None
    vectors = embed(texts, embedder, device=device)
    pairs, dist = pairwise_cosine_distances(vectors)
    se = pair_bootstrap_se(pairs, dist, len(texts), m.bootstrap_unit, m.bootstrap_resamples,
                           seed)
    return float(mean_pairwise_cosine_distance(vectors)), se


def set_diversity(texts: Sequence[str], metrics: MetricsConfig, seed: int = 0,
                  device: str = "auto") -> dict[str, float | None]:
    """tab:nli_diversity's values of one question set: ``semantic`` (mean pairwise cosine
    distance, ``metrics.semantic_embedder``), ``logical`` (mean bidirectional NLI score,
    ``metrics.nli_model``), the robustness checks ``semantic_swap`` (``metrics.swap_embedder``;
    None when ``none``) and ``logical_unidirectional`` (None unless
    ``metrics.nli_unidirectional``), each with its bootstrap ``<name>_se``; ``n`` = set size.
    Values are None below two texts."""
    texts = list(texts)
    out: dict[str, float | None] = {"n": len(texts)}
    out["semantic"], out["semantic_se"] = _cosine_stats(texts, metrics,
                                                        metrics.semantic_embedder, seed, device)
    out["semantic_swap"], out["semantic_swap_se"] = _cosine_stats(
        texts, metrics, metrics.swap_embedder, seed, device)
    out["logical"], out["logical_se"] = _nli_stats(texts, metrics, "bidirectional", seed,
                                                   device)
    out["logical_unidirectional"], out["logical_unidirectional_se"] = (
        _nli_stats(texts, metrics, "unidirectional", seed, device)
        if metrics.nli_unidirectional else (None, None))
    return out


def diversity_frame(runs: Mapping[RunKey, Path], cfg: ExperimentConfig,
                    iteration: int, group: str | None = None) -> pd.DataFrame:
    """tab:nli_diversity per run: ``group`` (default :func:`run_scale`), ``arm, seed,
    iteration, n`` and :func:`set_diversity` of the run's curriculum-filtered set at
    ``iteration`` (bootstrap seeded with ``cfg.seed``)."""
    rows = []
    for (arm, seed), run_dir in runs.items():
        band = curriculum_set(_questions(Path(run_dir), iteration), _band(cfg))
        values = set_diversity([q["question"] for q in band], cfg.metrics, seed=cfg.seed,
                               device=cfg.model.device)
        rows.append({"group": group or run_scale(run_dir), "arm": arm, "seed": seed,
                     "iteration": iteration, **values})
    return pd.DataFrame(rows)


def composition_frame(runs: Mapping[RunKey, Path], cfg: ExperimentConfig, iteration: int,
                      group: str | None = None) -> pd.DataFrame:
    """Curriculum composition at ``iteration`` (paper tab:wellposed), one row per run:
    ``group`` (default :func:`run_scale`), ``generated``, ``filter_pass`` (questions in the
    difficulty band), ``pass_rate``, ``well_posed`` and ``correct`` (verifier judgments of the
    band's questions), the Vendi score of the well-posed (``vendi_wp``) and correct
    (``vendi_c``) subsets with ``metrics.embedder`` (None below two questions or with embedder
    ``none``) and ``nli_wp``, the NLI diversity (``metrics.nli_model``, bidirectional) of the
    well-posed subset (None below two questions)."""
    from vdlib.evaluation.verification import make_verifier
    from vdlib.metrics import vendi_score
    from vdlib.metrics.embeddings import embed

    verifier = make_verifier(cfg.verification, "correctness", device=cfg.model.device,
                             engine=cfg.engine)

    def vendi(texts: list[str]) -> float | None:
        if len(texts) < 2 or cfg.metrics.embedder == "none":
            return None
        return float(vendi_score(embed(texts, cfg.metrics.embedder)))

    pending = []
    for (arm, seed), run_dir in runs.items():
        questions = _questions(Path(run_dir), iteration)
        band = curriculum_set(questions, _band(cfg))
        texts = [q["question"] for q in band]
        posed = verifier.label_well_posed(texts)
        checked = verifier.check_answers(band)
        wp = [t for t, ok in zip(texts, posed, strict=True) if ok]
        ok_texts = [r["question"] for r in checked if r["correct"]]
        pending.append(({"group": group or run_scale(run_dir), "arm": arm, "seed": seed,
                         "iteration": iteration, "generated": len(questions),
                         "filter_pass": len(band),
                         "pass_rate": len(band) / len(questions) if questions else None,
                         "well_posed": len(wp), "correct": len(ok_texts),
                         "vendi_wp": vendi(wp), "vendi_c": vendi(ok_texts)}, wp))
    verifier.close()  # a local judge frees its memory before the NLI model loads
    rows = []
    for row, wp in pending:
        nli = _nli_stats(wp, cfg.metrics, "bidirectional", cfg.seed, cfg.model.device)[0]
        rows.append({**row, "nli_wp": nli})
    return pd.DataFrame(rows)
