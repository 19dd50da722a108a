"""An experiment's results JSON, written by its notebook, and the join of several.

The committed evidence (``docs/results/*.json``) has two formats, and a notebook writes its
experiment's file in the one its runs take, to ``<output_dir>/results/<experiment>.json``
(:func:`results_path`):

- co-evolution (notebooks 01, 02, 05): :func:`coevolution_results`, the settings (``card``,
  ``vllm_version``, ``K``, ``M``, ``iterations``, ``params``, ``arms``, ``seeds``, GRPO steps,
  ``evaluation``) and one record per arm, seed and finished iteration
  (:func:`vdlib.report.results.collect_results`), joined as
  :func:`vdlib.report.results.merge_results` joins them (``runs``: each run's finished
  iterations and whether its final solver was evaluated);
- single-policy GRPO (notebook 04): :func:`single_policy_results`, per run its per-step
  policy entropy and reward and its pass@1, the starting checkpoint's pass@1, the settings.

Both record the notebook's job when ``vdlib notebooks run`` started it (``notebook``: the params
file, the variant and every ``--set`` / ``--arms`` / ``--seeds`` override; read from the job
file the runner leaves in the report folder, :data:`JOB_FILE`, only when that job's resolved
config is the report's). :func:`merge_files` joins files of one experiment made on different
machines (``vdlib notebooks merge A.json B.json --out C.json``): co-evolution files through
``merge_results`` (a later file's run replaces the same run's records), single-policy files
through :func:`merge_single_policy` (each run from the file that finished it).
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib.metadata
import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vdlib.config import layout
from vdlib.config.experiment import ExperimentConfig

__all__ = ["JOB_FILE", "RESULTS_DIR", "results_path", "read_job", "machine", "coevolution_results",
           "single_policy_results", "write_results", "merge_single_policy", "merge_files",
           "write_json"]

logger = logging.getLogger(__name__)

#: the job record ``vdlib notebooks run`` leaves in a notebook's report folder before it runs it
JOB_FILE = "notebook_job.json"
#: the folder under ``output_dir`` that holds every experiment's results JSON
RESULTS_DIR = "results"


def results_path(output_dir: str | os.PathLike, experiment: str) -> Path:
    """``<output_dir>/results/<experiment>.json``.

    >>> results_path("outputs", "gpu_small_main").as_posix()
    'outputs/results/gpu_small_main.json'
    """
    return Path(output_dir) / RESULTS_DIR / f"{experiment}.json"


def read_job(report: Any) -> dict[str, Any] | None:
    """The job record in ``report.folder`` (:data:`JOB_FILE`) without its ``config``, or None
    when there is none or it was written for another config (a notebook run by hand after a
    batch run)."""
    path = Path(report.folder) / JOB_FILE
    if not path.is_file():
        return None
    job = json.loads(path.read_text(encoding="utf-8"))
    if job.get("config") != json.loads(json.dumps(report.config)):
        logger.info("%s: written for another config; not recorded", path)
        return None
    return {k: v for k, v in job.items() if k != "config"}


def machine() -> dict[str, Any]:
    """``card`` (the first CUDA device's name, or ``cpu``) and ``vllm_version`` (None without
    vLLM)."""
    import torch

    try:
        vllm_version: str | None = importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        vllm_version = None
    card = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    return {"card": card, "vllm_version": vllm_version}


def _evaluation_meta(ev: Any, base: Any) -> dict[str, Any]:
    return {"benchmarks": list(ev.benchmarks), "runs": ev.runs, "temperature": ev.temperature,
            "max_new_tokens": ev.max_new_tokens, "limit": ev.limit,
            "items": {b: r.n for b, r in base.results.items()} if base is not None else None,
            "per_seed": ev.per_seed, "se_ddof": ev.se_ddof}


def coevolution_results(cfg: ExperimentConfig, runs: Mapping[tuple[str, int], Path],
                        evaluations: Mapping[tuple[str, int], Any] | None = None,
                        base: Any = None, job: Mapping[str, Any] | None = None,
                        evaluation: ExperimentConfig | None = None) -> dict[str, Any]:
    """The co-evolution results of ``runs`` in docs/results' format: the settings, one record
    per arm, seed and finished iteration (pass@1 of ``evaluations[(arm, seed)]`` on the last,
    ``base`` as arm ``base``), and ``runs`` (:func:`vdlib.report.results.merge_results` of
    the one part). ``evaluation``: the config the solvers were evaluated under (default
    ``cfg``; notebook 01's ``seed_eval_config``)."""
    from vdlib.report.results import collect_results, merge_results

    ev = (evaluation or cfg).evaluation
    meta = {**machine(), "K": cfg.curriculum.num_questions, "M": cfg.scoring.num_solver_samples,
            "iterations": cfg.iterations, "params": (job or {}).get("params"),
            "arms": list(cfg.arms), "seeds": list(cfg.seeds),
            "proposer_steps": cfg.proposer.max_steps, "solver_steps": cfg.solver.max_steps,
            "evaluation": _evaluation_meta(ev, base)}
    part = collect_results(runs, evaluations, base, meta, ev)
    merged = merge_results([part])  # + runs; settings that are None (no vLLM) stay from part
    data = {k: v for k, v in part.items() if k != "records"}
    data.update({k: v for k, v in merged.items() if k not in ("records", "evaluation")})
    data.update(iterations_planned=cfg.iterations, experiment=cfg.experiment,
                date=datetime.date.today().isoformat())
    if job:
        data["notebook"] = dict(job)
    return {**data, "records": merged["records"]}


def _pass1(summary: Any) -> dict[str, Any] | None:
    return None if summary is None else summary.to_dict()["benchmarks"]


def single_policy_results(cfg: ExperimentConfig, runs: Mapping[tuple[str, int], Path],
                          evaluations: Mapping[tuple[str, int], Any] | None = None,
                          base: Any = None, job: Mapping[str, Any] | None = None,
                          evaluation: ExperimentConfig | None = None) -> dict[str, Any]:
    """The single-policy results of ``runs`` in docs/results' format
    (``gpu_small_single_policy.json``): per run ``finished``, ``alpha_train``,
    ``mean_reward``, ``steps`` (step, policy entropy, reward: TRL's log history) and ``pass1``
    (``evaluations[(arm, seed)]``), ``base_pass1`` and the settings. ``evaluation``: the config
    the policies were evaluated under (default ``cfg``; notebook 04's ``single_eval_config``)."""
    ev = (evaluation or cfg).evaluation
    out_runs = []
    for (arm, seed), run_dir in runs.items():
        train = Path(run_dir) / layout.POLICY_TRAIN_FILE
        log = json.loads(train.read_text(encoding="utf-8")) if train.is_file() else None
        history = (log or {}).get("log_history", [])
        out_runs.append({
            "arm": arm, "seed": seed, "finished": log is not None,
            "alpha_train": (log or {}).get("alpha_train"),
            "mean_reward": (log or {}).get("mean_reward"),
            "steps": [{"step": int(h.get("step", i + 1)), "entropy": h.get("entropy"),
                       "reward": h.get("reward")}
                      for i, h in enumerate(r for r in history if "entropy" in r)],
            "pass1": _pass1((evaluations or {}).get((arm, seed)))})
    data = {"experiment": cfg.experiment, "params": (job or {}).get("params"), **machine(),
            "steps_planned": cfg.solver.max_steps,
            "batch": {"prompts": cfg.solver.global_batch_size,
                      "generations": cfg.solver.num_generations,
                      "max_response_length": cfg.solver.max_response_length},
            "dataset": cfg.single_policy.dataset,
            "warm_start": dataclasses.asdict(cfg.warm_start),
            "evaluation": {"benchmarks": list(ev.benchmarks), "runs": ev.runs,
                           "temperature": ev.temperature, "per_seed": ev.per_seed,
                           "se_ddof": ev.se_ddof},
            "base_pass1": _pass1(base), "date": datetime.date.today().isoformat()}
    if job:
        data["notebook"] = dict(job)
    return {**data, "runs": sorted(out_runs, key=lambda r: (r["arm"], r["seed"]))}


def write_json(path: str | os.PathLike, data: Mapping[str, Any]) -> Path:
    """``data`` as indented JSON at ``path`` (atomic; folders made)."""
    from vdlib.utils.artifacts import atomic_write_text

    return atomic_write_text(Path(path), json.dumps(data, indent=1) + "\n")


def write_results(report: Any, runs: Mapping[tuple[str, int], Path],
                  evaluations: Mapping[tuple[str, int], Any] | None = None, base: Any = None,
                  evaluation: ExperimentConfig | None = None, kind: str = "coevolution"
                  ) -> Path:
    """Write the experiment's results JSON of a notebook's ``report``
    (:func:`vdlib.report.open_report`) to :func:`results_path`, checked as ``vdlib results``
    reads it; returns its path. ``kind``: ``coevolution`` (:func:`coevolution_results`) or
    ``single_policy`` (:func:`single_policy_results`)."""
    from vdlib.report.results import load_results
    from vdlib.report.results_single_policy import load_single_policy

    builders = {"coevolution": (coevolution_results, load_results),
                "single_policy": (single_policy_results, load_single_policy)}
    if kind not in builders:
        raise ValueError(f"kind = {kind!r}; allowed values: {', '.join(builders)}")
    build, check = builders[kind]
    cfg = report.cfg
    data = build(cfg, runs, evaluations, base, read_job(report), evaluation)
    path = results_path(cfg.output_dir, cfg.experiment)
    check(path, json.loads(json.dumps(data)))  # what vdlib results will read
    write_json(path, data)
    logger.info("%s: results of %d runs -> %s", report.notebook, len(runs), path)
    return path


# ----------------------------------------------------------------------------- joining files

#: what every part of a single-policy join must share (the runs' settings; the card may differ)
SHARED = ("experiment", "steps_planned", "batch", "dataset", "warm_start", "evaluation",
          "vllm_version")


def merge_single_policy(parts: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """One single-policy file from several (name -> data): each (arm, seed) from the part that
    finished it (none finished: the part with the most logged steps), ``source`` naming that
    part; ``base_pass1`` from the part that has it. Raises ValueError when the parts differ in
    a :data:`SHARED` setting, when two parts finished the same run, or when two parts hold
    different base evaluations."""
    if not parts:
        raise ValueError("merge: no parts")
    names = list(parts)
    for key in SHARED:
        values = {json.dumps(parts[n].get(key), sort_keys=True) for n in names}
        if len(values) > 1:
            raise ValueError(f"merge: the parts differ in {key!r}: "
                             + "; ".join(f"{n}: {parts[n].get(key)!r}" for n in names))
    chosen: dict[tuple[str, int], dict[str, Any]] = {}
    for n in names:
        for run in parts[n].get("runs", []):
            key = (run["arm"], run["seed"])
            old = chosen.get(key)
            if run.get("finished") and old is not None and old.get("finished"):
                raise ValueError(f"merge: {key[0]} seed {key[1]} finished in both "
                                 f"{old['source']} and {n}; give one of them")
            if old is None or (run.get("finished") and not old.get("finished")) or (
                    not old.get("finished")
                    and len(run.get("steps") or []) > len(old.get("steps") or [])):
                chosen[key] = {**run, "source": n}
    bases = {n: parts[n]["base_pass1"] for n in names if parts[n].get("base_pass1")}
    if len({json.dumps(b, sort_keys=True) for b in bases.values()}) > 1:
        raise ValueError(f"merge: different base evaluations in {', '.join(bases)}")
    cards = sorted({parts[n]["card"] for n in names if parts[n].get("card")})
    first = parts[names[0]]
    return {**{k: v for k, v in first.items()
               if k not in ("runs", "base_pass1", "card", "notebook")},
            "card": " / ".join(cards) if cards else None, "parts": names,
            "base_pass1": next(iter(bases.values()), None),
            "base_source": next(iter(bases), None),
            "runs": sorted(chosen.values(), key=lambda r: (r["arm"], r["seed"]))}


def merge_files(paths: Sequence[str | os.PathLike]) -> dict[str, Any]:
    """One results file from the files at ``paths`` (earliest first), each checked as
    ``vdlib results`` reads it: all co-evolution files (:func:`vdlib.report.results.merge_results`;
    each part's runs name it as their ``source``) or all single-policy files
    (:func:`merge_single_policy`). Raises :class:`vdlib.report.results.ResultsFileError` (a
    bad file, mixed formats, different pooling rules) or ValueError (parts that differ)."""
    from vdlib.report.results import ResultsFileError, load_results, merge_results, read_json_file
    from vdlib.report.results_single_policy import is_single_policy, load_single_policy

    if not paths:
        raise ValueError("merge: no files")
    datas = {Path(p).as_posix(): read_json_file(p) for p in paths}
    single = {name: is_single_policy(d) for name, d in datas.items()}
    if len(set(single.values())) > 1:
        raise ResultsFileError("merge: " + ", ".join(n for n, s in single.items() if s)
                               + " are single-policy files, the others co-evolution files")
    if all(single.values()):
        return merge_single_policy({n: load_single_policy(n, d) for n, d in datas.items()})
    parts = []
    for name, d in datas.items():
        part = load_results(name, d)
        parts.append({**{k: v for k, v in part.items() if k != "notebook"}, "source": name})
    data = merge_results(parts)
    return {k: v for k, v in data.items() if k != "records"} | {"records": data["records"]}
