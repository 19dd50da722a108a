"""Batch execution of the experiment notebooks with papermill (``vdlib notebooks run``).

Notebook ``notebooks/NN_name.ipynb`` runs once per params file of its profile:
``params/<profile>/<name>.yaml`` and any variants ``params/<profile>/<name>@<variant>.yaml``
(e.g. ``main_table@8b.yaml`` for the other model size). Its executed copy goes to
``<output_dir>/notebooks/<profile>/NN_name[@variant].ipynb``. Every params file is validated
before the first notebook starts, so a bad key fails in seconds, naming the file and the key.

``seeds`` overrides the params' ``seeds`` (notebooks with a single ``seed`` parameter run once
per seed, as variants ``seed<N>``). Every notebook keeps a report (:mod:`vdlib.report`) in
``<output_dir>/<experiment>/reports/<notebook>/``; a job whose report's ``summary.json`` holds
the same resolved config (:func:`vdlib.report.summary.summary_matches`) and whose executed copy
exists is skipped unless ``force``; the runs inside a notebook resume on their own. A failing
notebook does not stop the others; the summary lists it and the exit status is 1. Kernels run quiet
(:mod:`vdlib.utils.terminal`): progress shows as the heartbeat's log lines, not as tqdm bars, and
the known warnings of the pinned dependencies are filtered.

A profile of :data:`PROFILE_NOTEBOOKS` (``gpu-small``) names its notebooks' params files
instead: its files are the grid recipes of ``vdlib grid``, named for their experiment
(``params/gpu-small/entropy_baselines.yaml`` is notebook 01's ``entropy_baselines`` variant), and
:data:`PROFILE_SETTINGS` adds what only a notebook needs over each (a local judge for the
correctness table). Without ``only``, a notebook that has no params file in the profile is left
out. ``only`` names notebooks (``01_main_table``: each of its params files) or one variant
(``01_main_table@fail_neg``). Cuts without editing a file: ``sets`` (``--set KEY=VALUE``,
a dotted config key and a YAML value) go over every params file, ``arms`` keeps only those arms
of each (a file left with none is not run), ``seeds`` replaces the seeds; all of them are
validated with the rest before the first notebook starts, passed to the notebook as its
parameters (the executed copy's injected cell shows them) and recorded in the job file the
runner leaves in the report folder
(:data:`vdlib.experiments.experiment_results.JOB_FILE`), which the experiment's results JSON
copies (``notebook``).
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["NotebookJob", "PROFILE_NOTEBOOKS", "PROFILE_SETTINGS", "notebook_params_file",
           "profile_params_files", "parse_sets", "plan_jobs", "is_complete", "run_notebooks",
           "format_summary", "merge_command"]

logger = logging.getLogger(__name__)

#: Profiles whose params files are the grid recipes of ``vdlib grid``, named for their
#: experiment: per notebook, its params files (stems; the notebook's own name first where it
#: has one). A file ``<stem>.yaml`` other than the notebook's own name runs as variant
#: ``<stem>`` (executed copy ``NN_name@<stem>.ipynb``). Every other profile pairs
#: ``notebooks/NN_name.ipynb`` with ``params/<profile>/name.yaml`` and ``name@*.yaml``.
PROFILE_NOTEBOOKS: dict[str, dict[str, tuple[str, ...]]] = {
    # the experiments a 135M model can show (docs/experiments.md, "The gpu-small notebooks"):
    # the main table with its entropy baselines (KL-Cov's packed rerun beside) and the
    # reward-ordering variant, the phase ablation, single-policy GRPO, annealing (and the
    # adaptive schedule beside it, issue 54)
    "gpu-small": {
        "01_main_table": ("main_table", "entropy_baselines", "entropy_kl_cov", "fail_neg"),
        "02_phase_ablation": ("phase_ablation",),
        "04_single_policy": ("single_policy",),
        "05_annealing": ("annealing", "adaptive"),
    },
}

#: What a profile's notebooks set over each of its params files: the keys only a notebook
#: needs (the grid recipes leave them at their defaults). gpu-small's correctness table
#: (notebooks 01, 02) judges with the packaged SmolLM2 on the GPU: the default judge,
#: GPT-4.1-mini, needs a key and a network the GPU machine may not have.
PROFILE_SETTINGS: dict[str, dict[str, Any]] = {
    "gpu-small": {"verification": {"backend": "local", "correctness_model": "smollm2-135m",
                                   "max_new_tokens": 512}},
}


def _short(notebook: Path) -> str:
    return notebook.stem.split("_", 1)[1] if "_" in notebook.stem else notebook.stem


def notebook_params_file(notebook: Path, profile: str, params_dir: Path) -> Path:
    """``params/<profile>/<name>.yaml`` for ``notebooks/NN_name.ipynb``."""
    return params_dir / profile / f"{_short(notebook)}.yaml"


def profile_params_files(notebook: Path, profile: str, params_dir: Path
                         ) -> list[tuple[str | None, Path]]:
    """``(variant, params file)`` of ``notebook`` in ``profile`` (variant None: the notebook's
    own file); ``[]`` when the profile has none for it. :data:`PROFILE_NOTEBOOKS` where the
    profile is listed there, else ``<name>.yaml`` and ``<name>@<variant>.yaml``."""
    listed = PROFILE_NOTEBOOKS.get(profile)
    if listed is not None:
        return [(None if stem == _short(notebook) else stem,
                 params_dir / profile / f"{stem}.yaml")
                for stem in listed.get(notebook.stem, ())]
    main = notebook_params_file(notebook, profile, params_dir)
    if not main.is_file():
        return []
    return [(None, main)] + [(f.stem.split("@", 1)[1], f)
                             for f in sorted(main.parent.glob(f"{_short(notebook)}@*.yaml"))]


def parse_sets(items: list[str] | None) -> dict[str, Any]:
    """``--set KEY=VALUE`` items as nested params (``curriculum.num_questions=64`` ->
    ``{"curriculum": {"num_questions": 64}}``; VALUE is YAML: ``[gsm8k]``, ``null``, ``0.5``).
    A malformed item is ``SystemExit`` naming it.

    >>> parse_sets(["curriculum.num_questions=64", "arms=[baseline, vd75]"])
    {'curriculum': {'num_questions': 64}, 'arms': ['baseline', 'vd75']}
    """
    import yaml

    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, text = item.partition("=")
        parts = key.strip().split(".")
        if not sep or not all(p.strip() for p in parts):
            raise SystemExit(f"--set {item!r}: expected KEY=VALUE with a dotted config key, "
                             "e.g. --set curriculum.num_questions=64")
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise SystemExit(f"--set {item!r}: the value is not YAML ({e.__class__.__name__})"
                             ) from None
        node = out
        for p in parts[:-1]:
            if not isinstance(node.setdefault(p.strip(), {}), dict):
                raise SystemExit(f"--set {item!r}: {p.strip()!r} is set to a value above")
            node = node[p.strip()]
        node[parts[-1].strip()] = value
    return out


def _dotted(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in tree.items():
        if isinstance(v, dict) and v:
            out.update(_dotted(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


@dataclass
class NotebookJob:
    """One execution: a notebook, its params (file values plus overrides) and its output."""

    notebook: Path
    params_file: Path
    params: dict[str, Any]
    output: Path  #: the executed copy
    report: Path  #: the summary.json a complete run of the notebook leaves
    config: dict[str, Any] = field(default_factory=dict)  #: the resolved config
    status: str = "pending"  # pending, ran, skipped, failed
    seconds: float | None = None
    error: str | None = None
    record: dict[str, Any] = field(default_factory=dict)  #: the job file's entries

    @property
    def name(self) -> str:
        return self.output.stem


def _declared(notebook: Path) -> set[str]:
    import papermill

    return set(papermill.inspect_notebook(str(notebook)))


def _select(notebooks: list[Path], only: list[str] | None
            ) -> list[tuple[Path, set[str | None] | None]]:
    """``(notebook, variants)`` of ``only`` (``NN_name`` or ``NN_name@variant``; variants None:
    every one), in ``only``'s order."""
    if not only:
        return [(nb, None) for nb in notebooks]
    names = {nb.stem: nb for nb in notebooks}
    chosen: dict[str, set[str | None] | None] = {}
    for o in only:
        stem, _, variant = o.partition("@")
        if stem not in names:
            raise SystemExit(f"unknown notebook {o!r}; available: {', '.join(names)}")
        if not variant:
            chosen[stem] = None
        elif stem not in chosen or chosen[stem] is not None:
            chosen[stem] = (chosen.get(stem) or set()) | {variant}
    return [(names[stem], variants) for stem, variants in chosen.items()]


def _relative(path: Path, params_dir: Path) -> str:
    try:
        return path.resolve().relative_to(params_dir.resolve().parent).as_posix()
    except ValueError:
        return str(path)


def plan_jobs(profile: str, only: list[str] | None, notebooks_dir: Path, params_dir: Path,
              output_dir: Path, seeds: list[int] | None = None, *,
              arms: list[str] | None = None, sets: list[str] | None = None
              ) -> list[NotebookJob]:
    """Every (notebook, params file[, seed]) job, each params set validated
    (:class:`vdlib.config.experiment.ConfigError` -> ``SystemExit`` naming the file).

    ``output_dir`` is the one output root, resolved against the current working directory:
    each job's ``output_dir`` is set to it (absolute, so the kernel, which runs in the
    repository root, writes the same place) and the executed copies go to
    ``<output_dir>/notebooks/<profile>/``. ``sets`` (``KEY=VALUE``, :func:`parse_sets`) go
    over every file after :data:`PROFILE_SETTINGS`; ``arms`` keeps only those arms of a
    notebook that takes ``arms`` (a file left with none is not planned; an arm in no file is
    ``SystemExit``); ``seeds`` replaces the seeds."""
    from vdlib.config.experiment import (
        ConfigError,
        load_params,
        merge_params,
        read_params_file,
        to_dict,
    )
    from vdlib.config.layout import executed_notebook_path, seed_variant
    from vdlib.report.summary import summary_path

    folders = sorted(p.name for p in params_dir.iterdir() if p.is_dir()) \
        if params_dir.is_dir() else []
    if profile not in folders:
        raise SystemExit(f"unknown profile {profile!r} (no folder {params_dir / profile}); "
                         f"available: {', '.join(folders)}")
    overrides = merge_params(PROFILE_SETTINGS.get(profile, {}), parse_sets(sets))
    root = Path(output_dir).expanduser().resolve()
    jobs, arms_seen = [], set()
    for nb, variants in _select(sorted(notebooks_dir.glob("[0-9][0-9]_*.ipynb")), only):
        files = profile_params_files(nb, profile, params_dir)
        if variants is not None:
            known = [v for v, _ in files if v]
            unknown = sorted(v for v in variants if v not in known)
            if unknown:
                raise SystemExit(f"{nb.stem}@{unknown[0]}: no such variant in profile "
                                 f"{profile!r}; its variants: {', '.join(known) or 'none'}")
            files = [(v, f) for v, f in files if v in variants]
        if not files:
            if only:
                raise SystemExit(f"no params file for {nb.name} in profile {profile!r} "
                                 f"({notebook_params_file(nb, profile, params_dir)})")
            logger.info("%s: no params file in profile %r; left out", nb.name, profile)
            continue
        declared = _declared(nb) if seeds is not None or arms is not None else set()
        for variant, f in files:
            if not f.is_file():
                raise SystemExit(f"no params file {f} for {nb.name} (profile {profile!r})")
            try:
                params = merge_params(read_params_file(f), overrides)
                params["output_dir"] = str(root)
                if arms is not None and "arms" in declared:
                    have = list(load_params(params).arms)
                    arms_seen.update(have)
                    kept = [a for a in have if a in arms]
                    if not kept:
                        logger.info("%s: no arm of --arms among %s; not run", f.name, have)
                        continue
                    params["arms"] = kept
            except ConfigError as e:
                raise SystemExit(f"{f}: {e}") from None
            per_seed: list[tuple[str | None, dict[str, Any]]] = [(variant, params)]
            if seeds is not None:
                if "seeds" in declared:
                    per_seed = [(variant, {**params, "seeds": list(seeds)})]
                elif "seed" in declared:
                    per_seed = [(seed_variant(variant, s), {**params, "seed": s})
                                for s in seeds]
            for v, p in per_seed:
                try:
                    cfg = load_params(p)  # fail before any kernel starts
                except ConfigError as e:
                    raise SystemExit(f"{f}: {e}") from None
                record = {"notebook": nb.stem, "profile": profile,
                          "params": _relative(f, params_dir), "variant": v,
                          "set": _dotted(overrides)}
                if arms is not None and "arms" in declared:
                    record["arms"] = list(p["arms"])
                if seeds is not None:
                    record["seeds"] = list(seeds)
                jobs.append(NotebookJob(
                    nb, f, p, executed_notebook_path(root, profile, nb.stem, v),
                    summary_path(cfg.output_dir, cfg.experiment, nb.stem), to_dict(cfg),
                    record=record))
    missing = sorted(set(arms or ()) - arms_seen) if arms_seen else []
    if missing:
        raise SystemExit(f"--arms {missing[0]}: an arm of no params file planned; their arms: "
                         f"{', '.join(sorted(arms_seen))}")
    return jobs


def is_complete(job: NotebookJob) -> bool:
    """Whether ``job`` needs no execution: its executed copy exists and its report's summary
    was written for the same resolved config."""
    from vdlib.report.summary import summary_matches

    return job.output.is_file() and summary_matches(job.report, job.config)


def run_notebooks(profile: str, only: list[str] | None, notebooks_dir: Path, params_dir: Path,
                  output_dir: Path, seeds: list[int] | None = None, force: bool = False,
                  cwd: Path | None = None, *, arms: list[str] | None = None,
                  sets: list[str] | None = None) -> list[NotebookJob]:
    """Plan, then execute each job with papermill (skipping complete ones unless ``force``);
    returns the jobs with their status and seconds. Each kernel runs quiet
    (:mod:`vdlib.utils.terminal`): tqdm bars off (progress is the heartbeat's log lines), the known
    warnings of the pinned dependencies filtered."""
    import papermill

    from vdlib.experiments.experiment_results import JOB_FILE, write_json
    from vdlib.utils.terminal import KERNEL_ARGUMENTS, quiet_env

    jobs = plan_jobs(profile, only, notebooks_dir, params_dir, output_dir, seeds, arms=arms,
                     sets=sets)
    for job in jobs:
        if not force and is_complete(job):
            job.status = "skipped"
            logger.info("%s: complete (%s), skipped", job.name, job.report)
            continue
        job.output.parent.mkdir(parents=True, exist_ok=True)
        # what started the notebook (params file, variant, overrides), for its results JSON
        write_json(job.report.parent / JOB_FILE,
                   {**job.record, "executed": str(job.output), "config": job.config})
        logger.info("running %s with %s -> %s", job.notebook.name, job.params_file, job.output)
        start = time.perf_counter()
        try:
            # the kernel's output (its log lines: run, iteration, stage, heartbeat) is streamed
            # to this terminal as it comes, not only saved in the executed copy; the kernel
            # runs quiet (vdlib.utils.terminal): no tqdm bars, the known warnings filtered
            with quiet_env():
                papermill.execute_notebook(str(job.notebook), str(job.output),
                                           parameters=job.params,
                                           cwd=str(cwd) if cwd else None, kernel_name="python3",
                                           progress_bar=False, stdout_file=sys.stdout,
                                           stderr_file=sys.stderr,
                                           extra_arguments=list(KERNEL_ARGUMENTS))
            job.status = "ran"
        except Exception as e:  # noqa: BLE001 - reported in the summary, others still run
            job.status, job.error = "failed", f"{type(e).__name__}: {str(e)[:500]}"
            logger.error("%s failed: %s", job.name, job.error)
        job.seconds = round(time.perf_counter() - start, 1)
    return jobs


def format_summary(jobs: list[NotebookJob]) -> str:
    """A Markdown table: notebook, params file, status, minutes, executed copy."""
    lines = ["| notebook | params | status | minutes | executed copy |", "|---|---|---|---|---|"]
    for j in jobs:
        minutes = f"{j.seconds / 60:.1f}" if j.seconds is not None else "-"
        status = j.status + (f" ({j.error.splitlines()[0][:80]})" if j.error else "")
        lines.append(f"| {j.name} | {j.params_file.name} | {status} | {minutes} | {j.output} |")
    total = sum(j.seconds or 0 for j in jobs)
    lines.append(f"\ntotal {total / 60:.1f} min; {sum(j.status == 'ran' for j in jobs)} ran, "
                 f"{sum(j.status == 'skipped' for j in jobs)} skipped, "
                 f"{sum(j.status == 'failed' for j in jobs)} failed")
    return "\n".join(lines) + "\n"


def merge_command(files: list[str], out: str | None) -> int:
    """``vdlib notebooks merge A.json B.json --out C.json``: one experiment's results files
    joined (:func:`vdlib.experiments.experiment_results.merge_files`) and written to ``out``;
    prints its path. Bad input: one line on stderr, exit status 2."""
    from vdlib.experiments.experiment_results import merge_files, write_json
    from vdlib.report.results import ResultsFileError

    if not files or not out:
        sys.stderr.write("vdlib notebooks merge: give the results files and --out FILE\n")
        return 2
    try:
        data = merge_files(files)
    except (ResultsFileError, ValueError, OSError) as e:
        sys.stderr.write(f"vdlib notebooks merge: {str(e).splitlines()[0]}\n")
        return 2
    sys.stdout.write(f"{write_json(out, data)}\n")
    return 0
