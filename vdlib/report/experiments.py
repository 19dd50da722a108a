"""A notebook's experiment grid: arms x seeds of runs, their evaluations, tidy tables.

The notebooks are thin drivers over these functions:

- :func:`run_grid` runs (or resumes) every arm of ``cfg.arms`` for every seed of ``seeds``
  (default ``cfg.seeds``), each in ``<output_dir>/<experiment>/<arm>-seed<seed>/``; a finished
  run is read back, so notebooks that share an experiment folder share runs;
- :func:`evaluate_checkpoint` evaluates one model folder under ``cfg.evaluation`` into
  ``<folder>/summary.json`` (resumable, read back without loading the model when complete);
  :func:`evaluate_runs` does it for a role (solver or proposer) of every run at an iteration,
  :func:`evaluate_base` for the untrained starting checkpoint (the tables' "Base" row);
- :func:`pool_seeds` turns per-run summaries into one summary per arm under
  ``evaluation.per_seed`` and ``evaluation.se_ddof`` (the one pooling rule of every notebook);
- :func:`accuracy_frame` and :func:`entropy_frame` give tidy tables for :mod:`vdlib.report.plots`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import statistics
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from vdlib.config import layout
from vdlib.config.experiment import ExperimentConfig, load_params
from vdlib.evaluation import EvalSummary, pool_runs, protocol_kwargs
from vdlib.evaluation.stats import seed_value
from vdlib.report.curriculum_sets import composition_frame, diversity_frame
from vdlib.utils.stats import compare_seeds, mean_and_se

__all__ = ["RunKey", "seed_configs", "run_grid", "experiment_dir", "report_dir",
           "evaluate_checkpoint", "evaluate_runs", "evaluate_base", "read_evaluation",
           "last_iteration",
           "reference_runs", "instruct_config", "pool_seeds", "accuracy_frame",
           "entropy_frame", "correctness_frame", "composition_frame", "diversity_frame",
           "reference_runs_by_experiment", "transfer_runs", "curriculum_frames",
           "transfer_grid",
           "COMPARED", "compare_arms"]

logger = logging.getLogger(__name__)

RunKey = tuple[str, int]  # (arm, seed)


def _cfg(config: ExperimentConfig | Mapping[str, Any] | str) -> ExperimentConfig:
    return config if isinstance(config, ExperimentConfig) else load_params(config)  # type: ignore[arg-type]


def seed_configs(cfg: ExperimentConfig, seeds: Iterable[int] | None = None
                 ) -> list[ExperimentConfig]:
    """``cfg`` once per seed (``seeds`` or ``cfg.seeds``), ``seed`` set."""
    return [dataclasses.replace(cfg, seed=int(s)) for s in (cfg.seeds if seeds is None
                                                            else seeds)]


def experiment_dir(cfg: ExperimentConfig) -> Path:
    """``<output_dir>/<experiment>`` of ``cfg`` (:func:`vdlib.config.layout.experiment_dir`)."""
    return layout.experiment_dir(cfg.output_dir, cfg.experiment)


def report_dir(cfg: ExperimentConfig, notebook: str) -> Path:
    """``<output_dir>/<experiment>/reports/<notebook>/``: a notebook's tables and figures
    (:func:`vdlib.config.layout.report_dir`), created if missing."""
    path = layout.report_dir(cfg.output_dir, cfg.experiment, notebook)
    path.mkdir(parents=True, exist_ok=True)
    return path


def run_grid(config: ExperimentConfig | Mapping[str, Any] | str,
             seeds: Iterable[int] | None = None,
             runner: Callable[[ExperimentConfig], Any] | None = None,
             on_stage: Callable[[int, str], None] | None = None,
             launcher: str | None = None) -> dict[RunKey, Path]:
    """Run (or resume) every arm x seed; ``{(arm, seed): run folder}``. Every config is built
    and validated before the first run starts. ``runner(cfg)`` runs one arm's config (default:
    the co-evolution loop, in this process); it may return a folder or a :class:`RunResult`.
    ``launcher`` (``local`` or ``slurm``) spreads the runs instead, as ``vdlib grid`` does
    (:mod:`vdlib.grid.launch`: one run per GPU group, or a SLURM job array); a failed run is then an
    error naming it, after the others have finished, and a run whose folder holds another
    config (which ``vdlib run``, and this function without a launcher, refuse) is a
    :class:`vdlib.loop.run_state.RunConfigMismatch` naming it and the keys that differ: its old
    results are never returned as this config's. Co-evolution runs of several GPUs each
    (``launcher.gpus_per_run`` > 1, the paper profile's 2) go through ``launcher.kind``'s
    launcher even when ``launcher`` is not given (``accelerate launch`` per run, as ``vdlib
    grid``), unless this process is already one of several."""
    from vdlib.grid.launch import format_results, grid_configs, launch_grid
    from vdlib.loop.coevolution import run
    from vdlib.loop.run_state import RunConfigMismatch

    cfg = _cfg(config)
    grid = grid_configs(cfg, seeds)
    if launcher is None and runner is None and _several_gpus_a_run(cfg):
        launcher = cfg.launcher.kind  # one process cannot train on several GPUs: vdlib grid's way
    if launcher is not None:
        runs = launch_grid(cfg, seeds, kind=launcher)
        refused = [f"{r.run_dir} ({r.error})" for r in runs if r.status == "refused"]
        failed = [r.name for r in runs if r.status == "failed"]
        if refused:
            raise RunConfigMismatch(
                "grid runs refused, their folders hold another config (the keys that differ: "
                f"folder -> now): {'; '.join(refused)}\n{format_results(runs)}")
        if failed:
            raise RuntimeError(f"grid runs failed: {', '.join(failed)}\n{format_results(runs)}")
        return {(r.arm, r.seed): r.run_dir for r in runs}
    out: dict[RunKey, Path] = {}
    for (arm, seed), c in grid.items():
        logger.info("run %s seed %d", arm, seed)
        result = runner(c) if runner is not None else run(c, on_stage)
        out[(arm, seed)] = Path(getattr(result, "run_dir", result))
    return out


def _several_gpus_a_run(cfg: ExperimentConfig) -> bool:
    """Does a run of ``cfg`` take several GPUs, started from this single process?"""
    from vdlib.loop.distributed import world_size

    return (cfg.launcher.gpus_per_run > 1 and not str(cfg.model.device).startswith("cpu")
            and world_size() == 1)


# ----------------------------------------------------------------------------- evaluation


def _protocol_kwargs(cfg: ExperimentConfig) -> dict[str, Any]:
    return protocol_kwargs(cfg.evaluation)


def read_evaluation(out_dir: str | Path, cfg: ExperimentConfig) -> EvalSummary | None:
    """The finished evaluation in ``out_dir`` (its ``summary.json``) restricted to
    ``cfg.evaluation.benchmarks``, or None unless every benchmark has all
    ``cfg.evaluation.runs`` runs."""
    path = Path(out_dir) / "summary.json"
    if not path.is_file():
        return None
    summary = EvalSummary.from_dict(json.loads(path.read_text(encoding="utf-8")))
    want = set(cfg.evaluation.benchmarks)
    runs = {len(r.accuracies) for r in summary.results.values()}
    if want <= set(summary.results) and runs == {cfg.evaluation.runs}:
        return EvalSummary({b: summary.results[b] for b in cfg.evaluation.benchmarks},
                           summary.protocol)
    return None


def evaluate_checkpoint(model_dir: str | Path, cfg: ExperimentConfig, out_dir: str | Path,
                        seed: int = 0) -> EvalSummary:
    """pass@1 of the model in ``model_dir`` under ``cfg.evaluation`` (records and
    ``summary.json`` in ``out_dir``; a complete folder is read back without loading the
    model)."""
    from vdlib.engines.models import resolve_device
    from vdlib.engines.setting import open_engine
    from vdlib.evaluation import ROUND_TOKENS, evaluate

    out_dir = Path(out_dir)
    done = read_evaluation(out_dir, cfg)
    if done is not None:
        logger.info("evaluation %s: complete, read back", out_dir)
        return done
    device = str(resolve_device(cfg.model.device))
    dtype = cfg.model.dtype if device != "cpu" else "float32"
    ev = cfg.evaluation
    with open_engine(cfg.engine, str(model_dir), device=device, dtype=dtype,
                     cache_dir=cfg.model.cache_dir, max_new_tokens=ev.max_context,
                     max_prompt_tokens=0, batch_size=ev.batch_size, round_tokens=ROUND_TOKENS,
                     show_progress=False, seed=seed) as engine:
        summary = evaluate(engine, engine.tokenizer, ev.benchmarks, seed=seed, out_dir=out_dir,
                           **_protocol_kwargs(cfg))
    return summary


def _last_iteration(run_dir: Path) -> int:
    finished = layout.iteration_dirs(run_dir, layout.METRICS_FILE)
    if not finished:
        raise FileNotFoundError(f"{run_dir} has no finished iteration")
    return finished[-1][0]


def evaluate_runs(runs: Mapping[RunKey, Path], cfg: ExperimentConfig, role: str = "solver",
                  iteration: int | None = None) -> dict[RunKey, EvalSummary]:
    """Evaluate ``iter_<iteration>/<role>_model`` (default: each run's last iteration) of every
    run; records under ``<run>/eval/<role>_iter<t>/``. ``role``: solver, proposer or policy
    (single-policy runs: ``<run>/policy_model``)."""
    if role not in ("solver", "proposer", "policy"):
        raise ValueError(f"role = {role!r}; allowed: solver, proposer, policy")
    out: dict[RunKey, EvalSummary] = {}
    for key, run_dir in runs.items():
        run_dir = Path(run_dir)
        if role == "policy":
            model_dir = layout.policy_model_dir(run_dir)
            out_dir = layout.evaluation_dir(run_dir, role)
        else:
            t = iteration if iteration is not None else _last_iteration(run_dir)
            model_dir = layout.role_model_dir(run_dir, t, role)
            out_dir = layout.evaluation_dir(run_dir, role, t)
        out[key] = evaluate_checkpoint(model_dir, cfg, out_dir)
    return out


def evaluate_base(cfg: ExperimentConfig, model: str | None = None) -> EvalSummary:
    """The starting checkpoint of ``model`` (default ``cfg.solver_model``; format-warm-started
    when ``warm_start.mode`` is sft), under ``<output_dir>/<experiment>/base_eval/<name>/``."""
    from vdlib.loop.model_store import ModelStore

    name = model or cfg.solver_model
    path = ModelStore(cfg).base(name, "base")
    return evaluate_checkpoint(path, cfg,
                               layout.base_evaluation_dir(cfg.output_dir, cfg.experiment, name))


def pool_seeds(summaries: Mapping[Any, EvalSummary], cfg: ExperimentConfig
               ) -> dict[Any, EvalSummary]:
    """One summary per arm (in first-seen order), the one pooling rule of every notebook's
    tables: :func:`vdlib.evaluation.pool_runs` under ``cfg.evaluation``'s ``per_seed`` and
    ``se_ddof`` (:mod:`vdlib.utils.stats`). With several seeds each contributes one accuracy per
    benchmark (``first_run``: its first evaluation run, the paper's; ``mean``: the mean of its
    runs), so the standard error is across training seeds; with one seed, or a plain key (the
    starting checkpoint's row), the evaluation runs are kept. :func:`vdlib.report.eval_grid.pool` is
    this function."""
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


# ----------------------------------------------------------------------------- derived configs


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


def instruct_config(cfg: ExperimentConfig, arms: Iterable[str] = ("baseline", "vd75")
                    ) -> ExperimentConfig:
    """The instruction-tuned-model runs of notebook 06: ``model.instruct`` as proposer and
    solver, no format warm-start, experiment ``<experiment>_instruct``."""
    return dataclasses.replace(
        cfg, experiment=f"{cfg.experiment}_instruct", arms=list(arms),
        model=dataclasses.replace(cfg.model, proposer=cfg.model.instruct, solver=None),
        warm_start=dataclasses.replace(cfg.warm_start, mode="none"))


# ----------------------------------------------------------------------------- verification


def correctness_frame(runs: Mapping[RunKey, Path], cfg: ExperimentConfig):
    """Tidy ``arm, seed, iteration, correct`` (fraction of valid questions whose proposer answer
    the ``verification.correctness_model`` confirms; paper ``tab:correctness``)."""
    import pandas as pd

    from vdlib.evaluation.verification import make_verifier, proposer_correctness

    verifier = make_verifier(cfg.verification, "correctness", device=cfg.model.device,
                             engine=cfg.engine)
    rows = []
    for (arm, seed), run_dir in runs.items():
        for t, frac in proposer_correctness(run_dir, verifier).items():
            rows.append({"arm": arm, "seed": seed, "iteration": int(t), "correct": frac})
    verifier.close()
    return pd.DataFrame(rows, columns=["arm", "seed", "iteration", "correct"])


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
