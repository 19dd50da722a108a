"""A notebook's experiment read back: its runs' folders, their evaluations pooled, tidy tables.

What the verbs of :mod:`vdlib.experiments` wrote (runs, evaluations), read and shaped for the
tables and figures; nothing here trains or evaluates a model:

- :func:`last_iteration`, :func:`reference_runs`, :func:`reference_runs_by_experiment`,
  :func:`transfer_runs`: the finished runs of an experiment folder;
- :func:`pool_seeds` turns per-run summaries into one summary per arm under
  ``evaluation.per_seed`` and ``evaluation.se_ddof`` (the one pooling rule of every notebook);
- :func:`accuracy_frame`, :func:`entropy_frame` and :func:`curriculum_frames` give tidy tables
  for :mod:`vdlib.report.plots` and :mod:`vdlib.report.tables`;
- :func:`compare_arms`: two arms over seeds, per quantity, with the seed tests.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import statistics
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from vdlib.config import layout
from vdlib.config.experiment import ExperimentConfig
from vdlib.evaluation import EvalSummary, pool_runs
from vdlib.evaluation.stats import seed_value
from vdlib.report.curriculum_sets import composition_frame, diversity_frame
from vdlib.utils.stats import compare_seeds, mean_and_se

__all__ = ["RunKey", "experiment_dir", "report_dir", "last_iteration", "reference_runs",
           "pool_seeds", "accuracy_frame", "entropy_frame", "composition_frame",
           "diversity_frame", "reference_runs_by_experiment", "transfer_runs",
           "curriculum_frames", "COMPARED", "compare_arms"]

logger = logging.getLogger(__name__)

RunKey = tuple[str, int]  # (arm, seed)


def experiment_dir(cfg: ExperimentConfig) -> Path:
    """``<output_dir>/<experiment>`` of ``cfg`` (:func:`vdlib.config.layout.experiment_dir`)."""
    return layout.experiment_dir(cfg.output_dir, cfg.experiment)


def report_dir(cfg: ExperimentConfig, notebook: str) -> Path:
    """``<output_dir>/<experiment>/reports/<notebook>/``: a notebook's tables and figures
    (:func:`vdlib.config.layout.report_dir`), created if missing."""
    path = layout.report_dir(cfg.output_dir, cfg.experiment, notebook)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _last_iteration(run_dir: Path) -> int:
    finished = layout.iteration_dirs(run_dir, layout.METRICS_FILE)
    if not finished:
        raise FileNotFoundError(f"{run_dir} has no finished iteration")
    return finished[-1][0]


def pool_seeds(summaries: Mapping[Any, EvalSummary], cfg: ExperimentConfig
               ) -> dict[Any, EvalSummary]:
    """One summary per arm (in first-seen order), the one pooling rule of every notebook's
    tables: :func:`vdlib.evaluation.pool_runs` under ``cfg.evaluation``'s ``per_seed`` and
    ``se_ddof`` (:mod:`vdlib.utils.stats`). With several seeds each contributes one accuracy per
    benchmark (``first_run``: its first evaluation run, the paper's; ``mean``: the mean of its
    runs), so the standard error is across training seeds; with one seed, or a plain key (the
    starting checkpoint's row), the evaluation runs are kept.
    :func:`vdlib.experiments.eval_grid.pool` is this function."""
    ev = cfg.evaluation
    return pool_runs(summaries, ev.per_seed, ev.se_ddof)


def accuracy_frame(summaries: Mapping[Any, EvalSummary], **columns: Any):
    """Tidy ``arm, seed, benchmark, accuracy`` (one row per run-mean), plus constant
    ``columns`` (e.g. ``iteration=3``). Keys are ``(arm, seed)`` or an arm name."""
    import pandas as pd

    rows = []
    for key, s in summaries.items():
        arm, seed = key if isinstance(key, tuple) else (key, None)
        for b, r in s.results.items():
            rows.append({"arm": arm, "seed": seed, **columns, "benchmark": b,
                         "accuracy": r.mean})
    return pd.DataFrame(rows)


def entropy_frame(runs: Mapping[RunKey, Path], filename: str = layout.POLICY_TRAIN_FILE):
    """Tidy ``arm, seed, step, entropy`` from TRL's log history in each run's ``filename``
    (``policy_train.json`` of single-policy runs; ``iter_<t>/proposer_train.json`` works too)."""
    import pandas as pd

    rows = []
    for (arm, seed), run_dir in runs.items():
        path = Path(run_dir) / filename
        if not path.is_file():
            logger.warning("%s missing; %s seed %s skipped", path, arm, seed)
            continue
        history = json.loads(path.read_text(encoding="utf-8")).get("log_history", [])
        for i, row in enumerate(r for r in history if "entropy" in r):
            rows.append({"arm": arm, "seed": seed, "step": int(row.get("step", i + 1)),
                         "entropy": float(row["entropy"])})
    return pd.DataFrame(rows, columns=["arm", "seed", "step", "entropy"])


# ----------------------------------------------------------------------------- finished runs


def last_iteration(runs: Mapping[RunKey, Path]) -> int:
    """The last iteration every run has finished."""
    return min(_last_iteration(Path(p)) for p in runs.values())


def reference_runs(cfg: ExperimentConfig, arms: Iterable[str]) -> dict[RunKey, Path]:
    """Finished runs ``<arm>-seed<seed>`` of every experiment in ``reference_experiments``
    (missing ones are skipped with a warning; nothing is run)."""
    out: dict[RunKey, Path] = {}
    for name in cfg.reference_experiments:
        for arm in arms:
            for seed in cfg.seeds:
                path = layout.arm_run_path(cfg.output_dir, name, arm, seed)
                try:
                    _last_iteration(path)
                except FileNotFoundError:
                    logger.warning("reference run %s not found (run its notebook first)", path)
                    continue
                out[(arm, seed)] = path
    return out


def reference_runs_by_experiment(cfg: ExperimentConfig, arms: Iterable[str]
                                 ) -> dict[str, dict[RunKey, Path]]:
    """:func:`reference_runs` kept apart per experiment of ``reference_experiments`` (in that
    order; experiments without a finished run are left out): notebook 03's tables show each
    model scale (e.g. the 4B and 8B runs of 01) in its own rows."""
    out: dict[str, dict[RunKey, Path]] = {}
    for name in cfg.reference_experiments:
        runs = reference_runs(dataclasses.replace(cfg, reference_experiments=[name]), arms)
        if runs:
            out[name] = runs
    return out


def transfer_runs(cfg: ExperimentConfig, arms: Iterable[str]) -> dict[RunKey, Path]:
    """The finished runs notebook 03 verifies and transfers: those of
    ``verification.transfer_experiment`` (null: the first of ``reference_experiments``; the
    paper: the 8B runs)."""
    name = cfg.verification.transfer_experiment or next(iter(cfg.reference_experiments), None)
    if name is None:
        return {}
    return reference_runs(dataclasses.replace(cfg, reference_experiments=[name]), arms)


def curriculum_frames(runs_by_experiment: Mapping[str, Mapping[RunKey, Path]],
                      cfg: ExperimentConfig, arms: Iterable[str] = ("baseline", "vd75")):
    """Notebook 03's tab:wellposed and tab:nli_diversity inputs: for each experiment
    (:func:`reference_runs_by_experiment`; one model scale each), the ``arms`` runs at their
    last common iteration through :func:`vdlib.report.curriculum_sets.composition_frame` and
    :func:`vdlib.report.curriculum_sets.diversity_frame`. Returns ``(composition, diversity)``, one
    row per run each, with ``group`` the run's model scale."""
    import pandas as pd

    comp, div = [], []
    for name, runs in runs_by_experiment.items():
        picked = {k: p for k, p in runs.items() if k[0] in set(arms)}
        if not picked:
            logger.warning("curriculum_frames: %s has no run of %s", name, list(arms))
            continue
        t = last_iteration(picked)
        comp.append(composition_frame(picked, cfg, iteration=t))
        div.append(diversity_frame(picked, cfg, iteration=t))
    return (pd.concat(comp, ignore_index=True) if comp else pd.DataFrame(),
            pd.concat(div, ignore_index=True) if div else pd.DataFrame())


# ----------------------------------------------------------------------------- seed comparison

#: Final-iteration quantities of :func:`compare_arms` (metric name -> column label).
COMPARED = {"valid_questions": "valid questions", "self_bleu": "Self-BLEU (lower = diverse)",
            "vendi": "Vendi", "novelty_rate": "novelty", "cumulative_vendi": "cumulative Vendi",
            "unique_tokens": "unique tokens", "mean_acc": "mean solver acc",
            "curriculum_size": "curriculum size"}


def compare_arms(runs: Mapping[RunKey, Path], evals: Mapping[RunKey, EvalSummary] | None = None,
                 arms: tuple[str, str] = ("baseline", "vd75"), iteration: int | None = None,
                 per_seed: str | ExperimentConfig = "first_run"):
    """Two arms over seeds at ``iteration`` (default: the last all runs finished), per quantity
    of :data:`COMPARED` (and ``pass@1``, the mean over benchmarks of what each seed adds to a
    pooled cell under ``per_seed``, ``evaluation.per_seed``: its first evaluation run or the
    mean of its runs, as :func:`pool_seeds`; a config: its ``evaluation.per_seed``),
    through :func:`vdlib.utils.stats.compare_seeds`: each arm's mean and standard error across seeds
    (sample SD / sqrt(n)) and ``n``, the difference ``arms[1] - arms[0]`` and its standard
    error (sample SDs), Welch's t, df and two-sided p, the paired t by seed (``n_pairs``, df,
    p), the exact permutation p-values, and ``significant`` / ``paired_significant`` (two-sided
    p < :data:`vdlib.utils.stats.ALPHA`). Missing values (e.g. Vendi with < 2 valid questions) are
    dropped per run."""
    import pandas as pd

    from vdlib.metrics.run_metrics import summary_metrics

    picked = {k: p for k, p in runs.items() if k[0] in arms}
    t = iteration if iteration is not None else last_iteration(picked)
    m = summary_metrics(list(picked.values()))
    m = m[(m.iteration == t) & m.metric.isin(list(COMPARED))]
    values: dict[tuple[str, str], dict[Any, float]] = {}
    for r in m.itertuples():
        values.setdefault((r.metric, r.arm), {})[r.seed] = float(r.value)
    rule = per_seed.evaluation.per_seed if isinstance(per_seed, ExperimentConfig) else per_seed
    if evals:
        for (arm, seed), s in evals.items():
            if arm in arms and s.results:
                values.setdefault(("pass@1", arm), {})[seed] = statistics.fmean(
                    seed_value(r.accuracies, rule) for r in s.results.values())
    rows = []
    for metric, label in [*COMPARED.items(), ("pass@1", "solver pass@1 (stand-in)")]:
        xs = [values.get((metric, arm), {}) for arm in arms]
        row: dict[str, Any] = {"quantity": label}
        for arm, x in zip(arms, xs, strict=True):
            mean, se = mean_and_se(list(x.values()), ddof=1) if x else (float("nan"), None)
            row.update({arm: mean, f"{arm}_se": float("nan") if se is None else se,
                        f"{arm}_n": len(x)})
        if all(xs):
            c = compare_seeds(*xs)
            row.update(difference=c.diff, difference_se=c.se, welch_t=c.welch_t,
                       welch_df=c.welch_df, welch_p=c.welch_p, n_pairs=c.n_pairs,
                       paired_t=c.paired_t, paired_df=c.paired_df, paired_p=c.paired_p,
                       perm_p=c.perm_p, paired_perm_p=c.paired_perm_p,
                       significant=c.welch_significant,
                       paired_significant=c.paired_significant)
        rows.append(row)
    return pd.DataFrame(rows)
