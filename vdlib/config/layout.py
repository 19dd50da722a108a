"""Where a run's files live: run ids, run folders, iteration folders and the files the other
modules read across runs; starting a run folder (``config.yaml`` + ``manifest.json``).

Every run path is formatted (and parsed back) here and nowhere else::

    <output_dir>/<experiment>/                      experiment_dir
        <run_id>/                                   run_path: run_id, or arm_run_id
            config.yaml, manifest.json              config_path, manifest_path; run_start.start_run
            iter_<t>/                               iteration_dir / iteration_of / iteration_dirs
                questions.jsonl, curriculum.jsonl, metrics.json, <role>_model/, ...
            eval/<role>_iter<t>/                    evaluation_dir
            policy_model/, policy_train.json        single-policy runs
            verification/iter_<t>_correctness.jsonl verification_path
            verification/proposer_correctness.json  correctness_summary_path
            transfer/iter_<t>/curriculum.jsonl      transfer_dataset_path
            verified/curriculum.jsonl, transfer/    a transfer run's verified set and training
        base_eval/<model>/                          base_evaluation_dir
        reports/<notebook>/                         report_dir

``run_id`` is the config's, or ``seed<seed>``; a notebook's arms use ``<arm>-seed<seed>``.
Nothing here creates a folder except :func:`make_run_dir` (and
:func:`vdlib.runs.run_start.start_run`). The experiment and run folders are never symbolic links
(:func:`linked_run_folder`; refused by :func:`vdlib.runs.run_state.claim_run`); ``output_dir``
itself may be one.

>>> from vdlib.config.experiment import load_params
>>> cfg = load_params({"experiment": "x", "output_dir": "/o", "seed": 2})
>>> run_id(cfg), str(run_path(cfg)), str(iteration_dir(run_path(cfg), 3))
('seed2', '/o/x/seed2', '/o/x/seed2/iter_3')
>>> arm_run_id("vd75", 1)
'vd75-seed1'
>>> parse_arm_run_id(arm_run_id("train_only", 12)), iteration_of(iteration_dir("/o/x/r", 7))
(('train_only', 12), 7)
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from vdlib.config.config_yaml import config_text

__all__ = [
    # names and folders
    "run_id", "arm_run_id", "parse_arm_run_id", "seed_variant", "experiment_dir", "run_path",
    "arm_run_path", "iteration_dir", "iteration_of", "iteration_dirs", "report_dir",
    "executed_notebook_path", "grid_dir", "grid_params_path", "grid_log_path",
    # files and folders inside a run
    "config_path", "manifest_path", "role_model_dir", "policy_model_dir", "evaluation_dir",
    "base_evaluation_dir", "verification_path", "correctness_summary_path",
    "transfer_dataset_path", "dataset_summary_path", "verified_curriculum_path",
    "transfer_training_dir",
    "CONFIG_FILE", "MANIFEST_FILE", "QUESTIONS_FILE", "CURRICULUM_FILE", "METRICS_FILE",
    "PROPOSER_TRAIN_FILE", "POLICY_TRAIN_FILE",
    # starting a run
    "make_run_dir", "linked_run_folder", "config_text", "package_versions",
]

CONFIG_FILE = "config.yaml"  # a run's resolved config (marks a folder as a run folder)
MANIFEST_FILE = "manifest.json"  # a run's config fingerprint, seeds, versions, git commit, times
QUESTIONS_FILE = "questions.jsonl"  # iter_<t>: every generated question, scored
CURRICULUM_FILE = "curriculum.jsonl"  # iter_<t>: the filtered questions the solver trains on
METRICS_FILE = "metrics.json"  # iter_<t>: the iteration's metrics (written last)
PROPOSER_TRAIN_FILE = "proposer_train.json"  # iter_<t>: the proposer phase's TRL log
POLICY_TRAIN_FILE = "policy_train.json"  # a single-policy run's TRL log

_ITERATION = re.compile(r"^iter_(\d+)$")
_ARM_RUN_ID = re.compile(r"^(?P<arm>.+)-seed(?P<seed>\d+)$")


def run_id(cfg: Any) -> str:
    """The run's folder name: ``cfg.run_id``, or ``seed<seed>``."""
    return cfg.run_id or f"seed{cfg.seed}"


def arm_run_id(arm: str, seed: int) -> str:
    """The folder name of one arm and seed of a notebook's grid."""
    return f"{arm}-seed{seed}"


def parse_arm_run_id(name: str) -> tuple[str, int] | None:
    """``(arm, seed)`` of a name :func:`arm_run_id` made; None for any other name.

    >>> parse_arm_run_id("kl_cov-seed3"), parse_arm_run_id("seed3")
    (('kl_cov', 3), None)
    """
    match = _ARM_RUN_ID.match(str(name))
    return (match["arm"], int(match["seed"])) if match else None


def config_path(run_dir: str | os.PathLike) -> Path:
    """``<run>/config.yaml``: the run's resolved config."""
    return Path(run_dir) / CONFIG_FILE


def manifest_path(run_dir: str | os.PathLike) -> Path:
    """``<run>/manifest.json``: the run's config fingerprint, seeds, versions, git commit, times
    (and, written by :mod:`vdlib.runs.run_state`, its stage records)."""
    return Path(run_dir) / MANIFEST_FILE


def experiment_dir(output_dir: str | os.PathLike, experiment: str) -> Path:
    """``<output_dir>/<experiment>``: an experiment's runs, reports and base evaluations (not
    created)."""
    return Path(output_dir) / experiment


def run_path(cfg: Any) -> Path:
    """``<output_dir>/<experiment>/<run_id>`` (not created)."""
    return experiment_dir(cfg.output_dir, cfg.experiment) / run_id(cfg)


def arm_run_path(output_dir: str | os.PathLike, experiment: str, arm: str, seed: int) -> Path:
    """``<output_dir>/<experiment>/<arm>-seed<seed>``: one arm and seed of a grid (not created).

    >>> str(arm_run_path("/o", "main", "vd75", 0))
    '/o/main/vd75-seed0'
    """
    return experiment_dir(output_dir, experiment) / arm_run_id(arm, seed)


def iteration_dir(run_dir: str | os.PathLike, t: int) -> Path:
    """``<run>/iter_<t>``: iteration ``t``'s artifacts."""
    return Path(run_dir) / f"iter_{t}"


def iteration_of(path: str | os.PathLike) -> int | None:
    """The iteration ``t`` of an ``iter_<t>`` folder (its last path part); None otherwise.

    >>> iteration_of("/o/x/seed0/iter_12"), iteration_of("/o/x/seed0/iter_a")
    (12, None)
    """
    match = _ITERATION.match(Path(path).name)
    return int(match[1]) if match else None


def iteration_dirs(run_dir: str | os.PathLike, containing: str | None = None
                   ) -> list[tuple[int, Path]]:
    """``(t, <run>/iter_<t>)`` of every iteration folder of ``run_dir``, by ``t``; with
    ``containing``, only those holding that file (e.g. :data:`METRICS_FILE`: the finished
    iterations). A missing ``run_dir`` has none.

    >>> import tempfile
    >>> run = Path(tempfile.mkdtemp())
    >>> for t in (10, 2):
    ...     iteration_dir(run, t).mkdir()
    >>> _ = (iteration_dir(run, 2) / METRICS_FILE).write_text("{}")
    >>> [t for t, _ in iteration_dirs(run)], [t for t, _ in iteration_dirs(run, METRICS_FILE)]
    ([2, 10], [2])
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return []
    found = [(t, p) for p in run_dir.iterdir()
             if (t := iteration_of(p)) is not None and p.is_dir()
             and (containing is None or (p / containing).exists())]
    return sorted(found)


def role_model_dir(run_dir: str | os.PathLike, t: int, role: str) -> Path:
    """``<run>/iter_<t>/<role>_model``: the proposer's or solver's checkpoint after iteration
    ``t``."""
    return iteration_dir(run_dir, t) / f"{role}_model"


def policy_model_dir(run_dir: str | os.PathLike) -> Path:
    """``<run>/policy_model``: the trained model of a single-policy run."""
    return Path(run_dir) / "policy_model"


def evaluation_dir(run_dir: str | os.PathLike, role: str, t: int | None = None) -> Path:
    """``<run>/eval/<role>_iter<t>``: the evaluation of ``role``'s model after iteration ``t``;
    ``<run>/eval/<role>`` without ``t`` (a single-policy run's ``policy``).

    >>> evaluation_dir("r", "solver", 3).as_posix(), evaluation_dir("r", "policy").as_posix()
    ('r/eval/solver_iter3', 'r/eval/policy')
    """
    name = role if t is None else f"{role}_iter{t}"
    return Path(run_dir) / "eval" / name


def base_evaluation_dir(output_dir: str | os.PathLike, experiment: str, model: str) -> Path:
    """``<output_dir>/<experiment>/base_eval/<model>``: the evaluation of a starting checkpoint,
    ``/`` in the model's name or path written as ``__``.

    >>> base_evaluation_dir("o", "x", "Qwen/Qwen3-4B-Base").as_posix()
    'o/x/base_eval/Qwen__Qwen3-4B-Base'
    """
    safe = model.strip("/").replace("/", "__")
    return experiment_dir(output_dir, experiment) / "base_eval" / safe


def verification_path(run_dir: str | os.PathLike, t: int) -> Path:
    """``<run>/verification/iter_<t>_correctness.jsonl``: iteration ``t``'s questions with the
    verifier's answer and verdict."""
    return Path(run_dir) / "verification" / f"iter_{t}_correctness.jsonl"


def correctness_summary_path(run_dir: str | os.PathLike) -> Path:
    """``<run>/verification/proposer_correctness.json``: the verified fraction per iteration."""
    return Path(run_dir) / "verification" / "proposer_correctness.json"


def transfer_dataset_path(run_dir: str | os.PathLike, t: int) -> Path:
    """``<run>/transfer/iter_<t>/curriculum.jsonl``: the verified curriculum built from
    iteration ``t``'s questions (the default place of the transfer dataset)."""
    return Path(run_dir) / "transfer" / f"iter_{t}" / CURRICULUM_FILE


def dataset_summary_path(dataset: str | os.PathLike) -> Path:
    """``<stem>.summary.json`` next to a JSONL dataset: its counts and settings.

    >>> dataset_summary_path("r/verified/curriculum.jsonl").as_posix()
    'r/verified/curriculum.summary.json'
    """
    dataset = Path(dataset)
    return dataset.with_name(dataset.stem + ".summary.json")


def stand_in_copy_path(data_dir: str | os.PathLike, name: str, limit: int | None,
                       seed: int) -> Path:
    """``<data_dir>/<name>/seed<seed>_n<limit>.jsonl`` (``seed<seed>_default.jsonl`` without a
    limit): a generated benchmark stand-in's items written for a machine without its generator
    (:func:`vdlib.evaluation.benchmarks.write_stand_in_copy`).

    >>> stand_in_copy_path(".bench", "gsm_symbolic", 800, 10000).as_posix()
    '.bench/gsm_symbolic/seed10000_n800.jsonl'
    """
    size = f"n{limit}" if limit else "default"
    return Path(data_dir) / name / f"seed{seed}_{size}.jsonl"


def verified_curriculum_path(run_dir: str | os.PathLike) -> Path:
    """``<run>/verified/curriculum.jsonl``: a curriculum-transfer run's verified training set."""
    return Path(run_dir) / "verified" / CURRICULUM_FILE


def transfer_training_dir(run_dir: str | os.PathLike) -> Path:
    """``<run>/transfer``: a curriculum-transfer run's trained model (``model/``) and log."""
    return Path(run_dir) / "transfer"


def report_dir(output_dir: str | os.PathLike, experiment: str, notebook: str) -> Path:
    """``<output_dir>/<experiment>/reports/<notebook>``: a notebook's tables, figures and
    ``summary.json`` (not created)."""
    return experiment_dir(output_dir, experiment) / "reports" / notebook


def grid_dir(output_dir: str | os.PathLike, experiment: str) -> Path:
    """``<output_dir>/<experiment>/grid``: a launched grid's per-run params, logs and (SLURM)
    submitit folder (not created)."""
    return experiment_dir(output_dir, experiment) / "grid"


def grid_params_path(output_dir: str | os.PathLike, experiment: str, run: str) -> Path:
    """``<grid>/<run_id>.yaml``: the resolved params a launched run executes."""
    return grid_dir(output_dir, experiment) / f"{run}.yaml"


def grid_log_path(output_dir: str | os.PathLike, experiment: str, run: str) -> Path:
    """``<grid>/<run_id>.log``: a launched run's output (stdout and stderr)."""
    return grid_dir(output_dir, experiment) / f"{run}.log"


def seed_variant(variant: str | None, seed: int) -> str:
    """The variant name of one seed's executed notebook: ``<variant>-seed<seed>``, or
    ``seed<seed>`` for a notebook's main params file (``variant`` None).

    >>> seed_variant("instruct", 2), seed_variant(None, 0)
    ('instruct-seed2', 'seed0')
    """
    return f"{variant}-seed{seed}" if variant else f"seed{seed}"


def executed_notebook_path(output_dir: str | os.PathLike, profile: str, notebook: str,
                           variant: str | None = None) -> Path:
    """``<output_dir>/notebooks/<profile>/<notebook>[@<variant>].ipynb``: the executed copy of a
    notebook that ``vdlib notebooks run`` writes."""
    name = f"{notebook}@{variant}.ipynb" if variant else f"{notebook}.ipynb"
    return Path(output_dir) / "notebooks" / profile / name


def linked_run_folder(output_dir: str | os.PathLike, experiment: str, name: str
                      ) -> Path | None:
    """The first folder from ``<output_dir>/<experiment>`` down to the run folder
    ``<output_dir>/<experiment>/<name>`` that is a symbolic link, or None (missing folders are
    not links). ``output_dir`` itself, and anything above it, may be a link (scratch space):
    only what vdlib names inside it is checked.

    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp())
    >>> (out / "elsewhere").mkdir()
    >>> (out / "x").symlink_to(out / "elsewhere")
    >>> linked_run_folder(out, "x", "seed0") == out / "x", linked_run_folder(out, "y", "seed0")
    (True, None)
    """
    path = Path(output_dir)
    for part in (Path(experiment) / name).parts:
        path = path / part
        if path.is_symlink():
            return path
    return None


def make_run_dir(output_dir: str | os.PathLike, experiment: str, name: str) -> Path:
    """``<output_dir>/<experiment>/<name>/``, created if missing; a symbolic link in place of it
    or of the experiment folder (:func:`linked_run_folder`) is an ``OSError`` (``ELOOP``)
    naming it, and nothing is created through it."""
    import errno

    linked = linked_run_folder(output_dir, experiment, name)
    if linked is not None:
        raise OSError(errno.ELOOP, "a symbolic link where vdlib needs a folder of its own",
                      str(linked))
    path = experiment_dir(output_dir, experiment) / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def package_versions(names: Iterable[str] = ("vdlib", "torch", "transformers", "trl", "peft",
                                             "accelerate", "math-verify", "vllm")) -> dict:
    """Installed versions of the packages that decide a run's numbers (None if absent)."""
    from importlib import metadata

    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out
