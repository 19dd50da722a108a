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
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["NotebookJob", "notebook_params_file", "plan_jobs", "is_complete", "run_notebooks",
           "format_summary"]

logger = logging.getLogger(__name__)


def _short(notebook: Path) -> str:
    return notebook.stem.split("_", 1)[1] if "_" in notebook.stem else notebook.stem


def notebook_params_file(notebook: Path, profile: str, params_dir: Path) -> Path:
    """``params/<profile>/<name>.yaml`` for ``notebooks/NN_name.ipynb``."""
    return params_dir / profile / f"{_short(notebook)}.yaml"


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

    @property
    def name(self) -> str:
        return self.output.stem


def _declared(notebook: Path) -> set[str]:
    import papermill

    return set(papermill.inspect_notebook(str(notebook)))


def plan_jobs(profile: str, only: list[str] | None, notebooks_dir: Path, params_dir: Path,
              output_dir: Path, seeds: list[int] | None = None) -> list[NotebookJob]:
    """Every (notebook, params file[, seed]) job, each params set validated
    (:class:`vdlib.config.experiment.ConfigError` -> ``SystemExit`` naming the file).

    ``output_dir`` is the one output root, resolved against the current working directory:
    each job's ``output_dir`` is set to it (absolute, so the kernel, which runs in the
    repository root, writes the same place) and the executed copies go to
    ``<output_dir>/notebooks/<profile>/``."""
    from vdlib.config.experiment import ConfigError, load_params, read_params_file, to_dict
    from vdlib.config.layout import executed_notebook_path, seed_variant
    from vdlib.report.summary import summary_path

    notebooks = sorted(notebooks_dir.glob("[0-9][0-9]_*.ipynb"))
    if only:
        names = {nb.stem: nb for nb in notebooks}
        missing = [o for o in only if o not in names]
        if missing:
            raise SystemExit(f"unknown notebook {missing[0]!r}; available: {', '.join(names)}")
        notebooks = [names[o] for o in only]
    root = Path(output_dir).expanduser().resolve()
    jobs = []
    for nb in notebooks:
        main = notebook_params_file(nb, profile, params_dir)
        if not main.is_file():
            raise SystemExit(f"no params file {main} for {nb.name} (profile {profile!r})")
        files = [main] + sorted(main.parent.glob(f"{_short(nb)}@*.yaml"))
        declared = _declared(nb) if seeds is not None else set()
        for f in files:
            variant = f.stem.split("@", 1)[1] if "@" in f.stem else None
            try:
                params = {**read_params_file(f), "output_dir": str(root)}
            except ConfigError as e:
                raise SystemExit(str(e)) from None
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
                jobs.append(NotebookJob(
                    nb, f, p, executed_notebook_path(root, profile, nb.stem, v),
                    summary_path(cfg.output_dir, cfg.experiment, nb.stem), to_dict(cfg)))
    return jobs


def is_complete(job: NotebookJob) -> bool:
    """Whether ``job`` needs no execution: its executed copy exists and its report's summary
    was written for the same resolved config."""
    from vdlib.report.summary import summary_matches

    return job.output.is_file() and summary_matches(job.report, job.config)


def run_notebooks(profile: str, only: list[str] | None, notebooks_dir: Path, params_dir: Path,
                  output_dir: Path, seeds: list[int] | None = None, force: bool = False,
                  cwd: Path | None = None) -> list[NotebookJob]:
    """Plan, then execute each job with papermill (skipping complete ones unless ``force``);
    returns the jobs with their status and seconds. Each kernel runs quiet
    (:mod:`vdlib.utils.terminal`): tqdm bars off (progress is the heartbeat's log lines), the known
    warnings of the pinned dependencies filtered."""
    import papermill

    from vdlib.utils.terminal import KERNEL_ARGUMENTS, quiet_env

    jobs = plan_jobs(profile, only, notebooks_dir, params_dir, output_dir, seeds)
    for job in jobs:
        if not force and is_complete(job):
            job.status = "skipped"
            logger.info("%s: complete (%s), skipped", job.name, job.report)
            continue
        job.output.parent.mkdir(parents=True, exist_ok=True)
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
