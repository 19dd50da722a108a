"""Per-iteration diversity metrics of a run's artifacts, and a tidy table over runs.

:func:`compute_iteration_metrics` extends :func:`vdlib.metrics.loop.iteration_metrics` (counts,
difficulty, rewards, kept fraction) with the paper's diversity metrics of the iteration's
*valid* generated questions (``questions.jsonl`` records with ``valid`` true):

============================  ===================================================================
``self_bleu``                 Texygen Self-BLEU (lexical; lower = more diverse)
``vendi``                     Vendi score of the question embeddings (effective question types)
``novelty_rate``              share of questions whose nearest-neighbour cosine distance to all
                              valid questions of ``previous_dirs`` exceeds 0.3 (1.0 with no
                              previous iterations, as :func:`vdlib.metrics.diversity.novelty_rate`)
``cumulative_vendi``          Vendi of ``previous_dirs`` + this iteration pooled (subsample 2,000)
``mean_pairwise_cosine_distance``  mean ``1 - cos`` over question pairs
``unique_tokens``             distinct token ids over all questions (proposer tokenizer)
``mean_question_tokens``      mean tokens per question (proposer tokenizer)
``mean_question_chars``       mean characters per question
``mean_distinct_numbers``     mean number of distinct numeric values per question
``proposer_entropy``          mean of the ``entropy`` entries of ``proposer_train.json``'s
                              ``log_history`` (the policy entropy H_pi of the proposer's GRPO
                              phase, nats/token); ``proposer_entropy_last``: the last entry
``embedder``                  the embedder name used (None: embedding metrics skipped)
============================  ===================================================================

Metrics over pairs (Self-BLEU, Vendi, cumulative Vendi, cosine distance) are None with fewer
than two valid questions, every question metric is None with none; token metrics are None
without a tokenizer; the entropy is None when the proposer logged none. ``extra`` adds costlier
metrics by name (:data:`EXTRA_METRICS`: ``nli_diversity``, ``nli_diversity_unidirectional``
and ``curriculum_nli_diversity`` with the paper's DeBERTa NLI model on at most 20,000 sampled
pairs; ``epiplexity`` with the run's ``model.proposer`` and the paper's settings) or as callables
``f(ctx: IterationContext) -> dict``. Embeddings of earlier iterations are recomputed unless
``cache_dir`` names an embedding cache (OpenAI embedders cache by default).

:func:`write_iteration_metrics` writes the result to ``iter_<t>/metrics.json`` atomically;
:func:`summary_metrics` gathers ``metrics.json`` of many runs into a tidy
``(arm, seed, iteration, metric, value)`` table.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from vdlib.config import layout
from vdlib.metrics import diversity as div
from vdlib.metrics.loop import iteration_metrics
from vdlib.utils.artifacts import atomic_write_json, read_jsonl
from vdlib.utils.registry import Registry

__all__ = ["compute_iteration_metrics", "write_iteration_metrics", "config_metric_kwargs",
           "summary_metrics",
           "valid_questions", "proposer_entropy", "previous_iteration_dirs", "IterationContext",
           "EXTRA_METRICS", "SUMMARY_COLUMNS", "run_folders", "arm_and_seed"]

logger = logging.getLogger(__name__)

SUMMARY_COLUMNS = ["arm", "seed", "iteration", "metric", "value"]


def valid_questions(iter_dir: str | os.PathLike, filename: str = layout.QUESTIONS_FILE
                    ) -> list[str]:
    """The ``question`` texts of the records with ``valid`` true (missing file: [])."""
    path = Path(iter_dir) / filename
    if not path.exists():
        return []
    return [r["question"] for r in read_jsonl(path) if r.get("valid") and r.get("question")]


def proposer_entropy(iter_dir: str | os.PathLike) -> tuple[float | None, float | None]:
    """(mean, last) of the ``entropy`` entries of ``proposer_train.json``'s log history."""
    path = Path(iter_dir) / layout.PROPOSER_TRAIN_FILE
    if not path.exists():
        return None, None
    history = json.loads(path.read_text()).get("log_history", [])
    values = [float(row["entropy"]) for row in history
              if isinstance(row.get("entropy"), int | float) and math.isfinite(row["entropy"])]
    if not values:
        return None, None
    return sum(values) / len(values), values[-1]


def previous_iteration_dirs(iter_dir: str | os.PathLike, t: int) -> list[Path]:
    """The sibling ``iter_<s>`` folders with ``s < t`` that hold a ``questions.jsonl``."""
    parent = Path(iter_dir).parent
    return [layout.iteration_dir(parent, s) for s in range(1, t)
            if (layout.iteration_dir(parent, s) / layout.QUESTIONS_FILE).exists()]


def _clean(x: Any) -> Any:
    """numpy scalars -> Python; NaN/inf -> None (metrics.json stays valid JSON)."""
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _mean(xs: Sequence[float]) -> float | None:
    return float(np.mean(xs)) if len(xs) else None


@dataclass
class IterationContext:
    """What an extra metric gets: the iteration folder, its valid questions and the run's
    config (``config.yaml`` of the run folder, None when absent)."""

    iter_dir: Path
    t: int
    texts: list[str]
    embedder: str | None = None
    embeddings: np.ndarray | None = None
    previous_dirs: list[Path] = field(default_factory=list)

    @cached_property
    def run_config(self) -> dict[str, Any] | None:
        import yaml

        path = layout.config_path(self.iter_dir.parent)
        return yaml.safe_load(path.read_text()) if path.exists() else None

    def curriculum_texts(self) -> list[str]:
        path = self.iter_dir / layout.CURRICULUM_FILE
        return [r["question"] for r in read_jsonl(path)] if path.exists() else []


ExtraMetric = Callable[[IterationContext], dict[str, Any]]
EXTRA_METRICS: Registry[ExtraMetric] = Registry("extra metric")


def _nli(texts: list[str], direction: str, key: str) -> dict[str, Any]:
    """The paper's NLI model on ``texts``; at most 20,000 sampled pairs (seed 42)."""
    from vdlib.metrics.nli import nli_diversity

    value = nli_diversity(texts, direction=direction, max_pairs=20000) if len(texts) >= 2 \
        else None
    return {key: value}


EXTRA_METRICS.add("nli_diversity",
                  lambda ctx: _nli(ctx.texts, "bidirectional", "nli_diversity"))
EXTRA_METRICS.add("nli_diversity_unidirectional",
                  lambda ctx: _nli(ctx.texts, "unidirectional", "nli_diversity_unidirectional"))
EXTRA_METRICS.add("curriculum_nli_diversity",  # the paper's table: curriculum-filtered sets
                  lambda ctx: _nli(ctx.curriculum_texts(), "bidirectional",
                                   "curriculum_nli_diversity"))


@EXTRA_METRICS.register("epiplexity")
def _epiplexity(ctx: IterationContext) -> dict[str, Any]:
    """Epiplexity of the valid questions with the run's base proposer model (paper settings)."""
    from vdlib.metrics.epiplexity import epiplexity

    cfg = ctx.run_config or {}
    base = (cfg.get("model") or {}).get("proposer")
    if base is None:
        raise ValueError(f"{ctx.iter_dir.parent}: no config.yaml with model.proposer; the "
                         "epiplexity observer starts from the loop's base model")
    try:
        result = epiplexity(ctx.texts, base, device="auto")
    except ValueError as err:  # fewer than two usable questions
        logger.warning("iteration %d: epiplexity skipped: %s", ctx.t, err)
        return {"epiplexity": None}
    return {"epiplexity": result["epiplexity_per_token"],
            "epiplexity_best_epoch": result["best_epoch"],
            "epiplexity_epochs_run": result["epochs_run"],
            "epiplexity_train_tokens": result["n_train_tokens"]}


def _resolve_tokenizer(tokenizer: Any) -> Any:
    if isinstance(tokenizer, str):
        from vdlib.engines.models import load_tokenizer

        return load_tokenizer(tokenizer)
    return tokenizer


def config_metric_kwargs(cfg: Any) -> dict[str, Any]:
    """The :func:`compute_iteration_metrics` keywords that a run config's ``metrics`` section
    sets (``embedder: none`` -> None)."""
    m = cfg.metrics
    return {"embedder": None if m.embedder == "none" else m.embedder, "extra": tuple(m.extra),
            "novelty_threshold": m.novelty_threshold}


def compute_iteration_metrics(
    iter_dir: str | os.PathLike,
    t: int,
    alphas: Mapping[str, float],
    *,
    embedder: str | None = "minilm",
    tokenizer: Any = None,
    previous_dirs: Iterable[str | os.PathLike] = (),
    extra: Iterable[str | ExtraMetric] = (),
    cache_dir: str | os.PathLike | None = None,
    novelty_threshold: float = 0.3,
) -> dict[str, Any]:
    """:func:`vdlib.metrics.loop.iteration_metrics` plus the diversity metrics of the module
    docstring, for ``iter_dir`` (iteration ``t``, ``alphas``: mask phase -> retention).

    ``embedder``: a :mod:`vdlib.metrics.embeddings` name (None skips the embedding metrics);
    ``tokenizer``: the proposer's tokenizer, or a name for
    :func:`vdlib.engines.models.load_tokenizer`; ``previous_dirs``: the earlier iterations' folders
    (novelty and cumulative Vendi); ``extra``: names in :data:`EXTRA_METRICS` or callables;
    ``cache_dir``: embedding cache; ``novelty_threshold``: cosine distance above which a question
    counts as novel (paper: 0.3).
    """
    iter_dir = Path(iter_dir)
    previous = [Path(p) for p in previous_dirs]
    metrics = iteration_metrics(iter_dir, t, alphas)
    texts = valid_questions(iter_dir)
    n = len(texts)
    pairs = n >= 2
    out: dict[str, Any] = {
        "self_bleu": div.self_bleu(texts) if pairs else None,
        "vendi": None, "novelty_rate": None, "cumulative_vendi": None,
        "mean_pairwise_cosine_distance": None, "embedder": embedder,
    }
    emb = None
    if embedder is not None and n:
        from vdlib.metrics.embeddings import embed

        emb = embed(texts, embedder, cache_dir=cache_dir)
        prev_texts = [valid_questions(p) for p in previous]
        prev_emb = [embed(x, embedder, cache_dir=cache_dir) for x in prev_texts if x]
        out["novelty_rate"] = div.novelty_rate(emb, prev_emb, threshold=novelty_threshold)
        if pairs:
            out["vendi"] = div.vendi_score(emb)
            out["mean_pairwise_cosine_distance"] = div.mean_pairwise_cosine_distance(emb)
            out["cumulative_vendi"] = div.cumulative_vendi([*prev_emb, emb])[-1]
    tok = _resolve_tokenizer(tokenizer)
    lengths = div.question_lengths(texts, tok) if tok is not None and n else []
    out.update({
        "unique_tokens": div.unique_tokens(texts, tok) if tok is not None and n else None,
        "mean_question_tokens": _mean(lengths),
        "mean_question_chars": _mean([len(x) for x in texts]),
        "mean_distinct_numbers": _mean([div.distinct_numbers(x) for x in texts]),
    })
    out["proposer_entropy"], out["proposer_entropy_last"] = proposer_entropy(iter_dir)
    ctx = IterationContext(iter_dir, t, texts, embedder, emb, previous)
    for item in extra:
        fn = EXTRA_METRICS.get(item) if isinstance(item, str) else item
        out.update(fn(ctx))
    metrics.update(out)
    return {k: _clean(v) for k, v in metrics.items()}


def write_iteration_metrics(iter_dir: str | os.PathLike, t: int, alphas: Mapping[str, float], *,
                            previous_dirs: Iterable[str | os.PathLike] | None = None,
                            **kwargs: Any) -> dict[str, Any]:
    """:func:`compute_iteration_metrics` written to ``iter_dir/metrics.json`` (atomically) and
    returned; ``previous_dirs=None`` uses the sibling ``iter_1 .. iter_<t-1>`` folders."""
    iter_dir = Path(iter_dir)
    if previous_dirs is None:
        previous_dirs = previous_iteration_dirs(iter_dir, t)
    metrics = compute_iteration_metrics(iter_dir, t, alphas, previous_dirs=previous_dirs,
                                        **kwargs)
    atomic_write_json(iter_dir / layout.METRICS_FILE, metrics)
    return metrics


def run_folders(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """Run folders (with ``config.yaml``) among ``paths``; an experiment folder expands to its
    runs."""
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if layout.config_path(p).exists():
            out.append(p)
        elif p.is_dir():
            runs = sorted(c for c in p.iterdir() if layout.config_path(c).exists())
            if not runs:
                raise FileNotFoundError(f"{p} has no config.yaml and no run folders")
            out.extend(runs)
        else:
            raise FileNotFoundError(f"no run folder {p}")
    return out


def arm_and_seed(run: Path) -> tuple[str, int | None]:
    """``(arm, seed)`` of a run folder: parsed from its ``run_id`` (``<arm>-seed<n>``:
    :func:`vdlib.config.layout.parse_arm_run_id`; the folder name when the config has none), else
    the experiment name (or run id) and the config's ``seed``."""
    import yaml

    cfg = yaml.safe_load(layout.config_path(run).read_text()) or {}
    run_id = cfg.get("run_id") or run.name
    parsed = layout.parse_arm_run_id(str(run_id))
    if parsed is not None:
        return parsed
    return str(cfg.get("experiment") or run_id), cfg.get("seed")


def summary_metrics(run_dirs: str | os.PathLike | Iterable[str | os.PathLike]):
    """Tidy table of every numeric metric of every iteration of ``run_dirs``.

    Columns ``arm, seed, iteration, metric, value``: ``arm`` and ``seed`` from the run's
    ``config.yaml`` (``run_id = "<arm>-seed<n>"``, else the experiment name and ``seed``),
    ``iteration`` from ``iter_<t>``; one row per numeric entry of its ``metrics.json`` (booleans
    as 0/1; None, i.e. undefined, and strings have no row). ``run_dirs``: run folders or
    experiment folders (expanded to the run folders inside).
    """
    import pandas as pd

    if isinstance(run_dirs, str | os.PathLike):
        run_dirs = [run_dirs]
    rows = []
    for run in run_folders(run_dirs):
        arm, seed = arm_and_seed(run)
        for t, d in layout.iteration_dirs(run, layout.METRICS_FILE):
            for key, value in json.loads((d / layout.METRICS_FILE).read_text()).items():
                if key == "iteration" or value is None or isinstance(value, str | list | dict):
                    continue
                rows.append((arm, seed, t, key, float(value)))
    frame = pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
    return frame.astype({"iteration": "int64", "value": "float64"})
