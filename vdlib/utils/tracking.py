"""Experiment tracking (off by default): the loop's per-iteration numbers and TRL's training logs
sent to one tracker, chosen by name.

====================  =========================================================================
``none`` (default)    nothing is written, nothing is imported
``tensorboard``       event files under ``<run>/tracking/tensorboard/`` (the loop's numbers) and
                      ``<run>/tracking/tensorboard/<name>/`` (one TRL trainer each); the writer
                      of ``torch.utils.tensorboard`` when ``tensorboard`` is installed, else
                      ``tensorboardX``'s
``wandb``             Weights & Biases, ``mode="offline"`` under ``<run>/tracking/`` unless
                      ``WANDB_MODE`` / ``WANDB_DIR`` say otherwise; one W&B run per vdlib run
                      (name and group: the run id), which TRL's callback reuses
``mlflow``            MLflow, a local store ``<run>/tracking/mlflow/`` (SQLite + artifacts)
                      unless ``MLFLOW_TRACKING_URI`` is set; one MLflow run per vdlib run
                      (name: the run id, experiment: the vdlib experiment), each TRL trainer
                      a child run of it
``trackio``           Trackio's local store (``$TRACKIO_DIR``, default
                      ``$HF_HOME/trackio``; ``trackio show`` opens it) unless
                      ``TRACKIO_SPACE_ID`` / ``TRACKIO_SERVER_URL`` name a hosted one; project:
                      the vdlib experiment, run name and group: the run id
====================  =========================================================================

Nothing here contacts a network unless the user picks a hosted setting through the tracker's own
environment variables. Every tracker's name is also the value of TRL / transformers'
``report_to`` (:func:`trl_report_to`), so the GRPO trainers log to the same place
(:func:`trainer_arguments` and :func:`trainer_environment`).

:func:`open_tracker` returns a :class:`Tracker`; ``tracker.log(metrics, step)`` logs the numeric
scalars of ``metrics`` (nested dicts flattened with ``/``; strings, booleans, None, NaN and inf
are dropped) as ``loop/<name>`` at ``step`` (the iteration), apart from TRL's ``train/*``.
:func:`iteration_scalars` picks the numbers worth plotting from an iteration's ``metrics.json``.
A tracker whose package is missing raises :class:`ImportError` naming the package to install.

>>> iteration_scalars({"iteration": 2, "curriculum_size": 3, "self_bleu": 0.25, "vendi": None,
...                    "embedder": "minilm", "solver_trained": True})
{'curriculum_size': 3.0, 'self_bleu': 0.25}
>>> flat_scalars({"a": 1, "b": {"c": 2.5, "d": "x"}, "e": float("nan")})
{'a': 1.0, 'b/c': 2.5}
>>> trl_report_to("none"), trl_report_to("tensorboard")
('none', 'tensorboard')
"""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import numbers
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vdlib.utils.registry import Registry

__all__ = ["tracked_trainer", "TRACKERS", "TrackerSpec", "Tracker", "open_tracker", "tracker_names",
           "check_tracker", "trl_report_to", "trainer_arguments", "trainer_variables",
           "trainer_environment",
           "iteration_scalars", "flat_scalars", "tracking_dir", "tensorboard_dir",
           "mlflow_dir", "mlflow_store_uri", "ITERATION_SCALARS", "LOOP_PREFIX", "INSTALL_HINT"]

logger = logging.getLogger(__name__)

LOOP_PREFIX = "loop/"  # the loop's numbers, apart from TRL's "train/*"
INSTALL_HINT = "pip install 'vdlib[tracking]'"

# The numbers of an iteration's metrics.json worth a chart (vdlib.metrics.loop and
# vdlib.metrics.run_metrics name them); absent or non-numeric ones are skipped.
ITERATION_SCALARS = (
    # mask retention and kept fraction
    "alpha", "alpha_train", "alpha_gen", "kept_fraction",
    # rewards
    "proposer_mean_reward", "solver_mean_reward",
    # counts and difficulty
    "proposer_rollouts", "proposer_valid_fraction", "generated", "valid_questions",
    "valid_fraction", "mean_acc", "proposer_agreement", "curriculum_size",
    # diversity
    "self_bleu", "vendi", "novelty_rate", "cumulative_vendi", "mean_pairwise_cosine_distance",
    "unique_tokens", "distinct_words", "mean_question_words", "mean_question_tokens",
    "mean_question_chars", "mean_distinct_numbers",
    # policy entropy
    "proposer_entropy", "proposer_entropy_last",
    # optional extra metrics (vdlib.metrics.run_metrics.EXTRA_METRICS)
    "nli_diversity", "nli_diversity_unidirectional", "curriculum_nli_diversity", "epiplexity",
)


# ----------------------------------------------------------------------------- paths
# (to move to vdlib.config.layout)


def tracking_dir(run_dir: str | os.PathLike) -> Path:
    """``<run>/tracking``: every local tracker file of a run (not created)."""
    return Path(run_dir) / "tracking"


def tensorboard_dir(run_dir: str | os.PathLike, name: str | None = None) -> Path:
    """``<run>/tracking/tensorboard``: the loop's event files; ``<...>/<name>`` those of one
    TRL trainer (``name`` e.g. ``iter_3/proposer``) (not created)."""
    root = tracking_dir(run_dir) / "tensorboard"
    return root / name if name else root


def mlflow_dir(run_dir: str | os.PathLike) -> Path:
    """``<run>/tracking/mlflow``: a run's local MLflow store, ``mlflow.db`` (SQLite; MLflow 3
    refuses its old file store by default) and ``artifacts/`` (not created)."""
    return tracking_dir(run_dir) / "mlflow"


def mlflow_store_uri(run_dir: str | os.PathLike) -> str:
    """The local MLflow tracking URI of a run: ``sqlite:///<run>/tracking/mlflow/mlflow.db``."""
    return f"sqlite:///{(mlflow_dir(run_dir) / 'mlflow.db').resolve()}"


# ----------------------------------------------------------------------------- scalars


def _number(value: Any) -> float | None:
    """``value`` as a finite float, or None (booleans, strings, None, NaN, inf, arrays)."""
    if isinstance(value, bool) or value is None:
        return None
    if not isinstance(value, numbers.Real):
        if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):  # 0-d numpy / torch
            return _number(value.item())
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def flat_scalars(metrics: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """The finite numeric scalars of ``metrics``, nested mappings flattened with ``/``."""
    out: dict[str, float] = {}
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flat_scalars(value, f"{name}/"))
        elif (number := _number(value)) is not None:
            out[name] = number
    return out


def iteration_scalars(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The numbers of :data:`ITERATION_SCALARS` that ``metrics`` (an iteration's
    ``metrics.json``) holds as finite numbers, in that order."""
    return flat_scalars({k: metrics[k] for k in ITERATION_SCALARS if k in metrics})


# ----------------------------------------------------------------------------- trackers


class Tracker:
    """An open tracker of one run. ``log(metrics, step)`` logs the scalars of ``metrics`` as
    ``loop/<name>`` at ``step``; ``close()`` flushes and ends the run (idempotent). Also a
    context manager. This base class is the ``none`` tracker: it writes nothing."""

    kind = "none"

    def __init__(self) -> None:
        self.closed = False

    def log(self, metrics: Mapping[str, Any], step: int) -> dict[str, float]:
        """Log ``metrics``' scalars at ``step``; returns what was logged (prefixed names)."""
        if self.closed:
            raise RuntimeError(f"the {self.kind} tracker is closed")
        scalars = flat_scalars(metrics, LOOP_PREFIX)
        if scalars:
            self._write(scalars, int(step))
        return scalars

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._close()

    def _write(self, scalars: dict[str, float], step: int) -> None:
        pass

    def _close(self) -> None:
        pass

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _summary_writer_class() -> Any:
    """torch's SummaryWriter when ``tensorboard`` is installed, else tensorboardX's."""
    if importlib.util.find_spec("tensorboard") is not None:
        from torch.utils.tensorboard import SummaryWriter

        return SummaryWriter
    if importlib.util.find_spec("tensorboardX") is not None:
        from tensorboardX import SummaryWriter

        return SummaryWriter
    raise ImportError("tracking='tensorboard' needs the 'tensorboard' (or 'tensorboardX') "
                      f"package: {INSTALL_HINT} (or pip install tensorboard)")


class TensorBoardTracker(Tracker):
    """Event files under :func:`tensorboard_dir`; the config as a text summary."""

    kind = "tensorboard"

    def __init__(self, run_dir: Path, run_id: str, config: Mapping[str, Any],
                 project: str) -> None:
        super().__init__()
        self.log_dir = tensorboard_dir(run_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.writer = _summary_writer_class()(log_dir=str(self.log_dir))
        if config:
            text = json.dumps(dict(config), indent=1, default=str, sort_keys=True)
            self.writer.add_text("config", "    " + text.replace("\n", "\n    "), 0)
        logger.info("tracking run %s with TensorBoard in %s", run_id, self.log_dir)

    def _write(self, scalars: dict[str, float], step: int) -> None:
        for name, value in scalars.items():
            self.writer.add_scalar(name, value, global_step=step)
        self.writer.flush()

    def _close(self) -> None:
        self.writer.close()


class WandbTracker(Tracker):
    """One W&B run (name and group: the run id), offline unless ``WANDB_MODE`` is set. The run
    is W&B's global run, so TRL's callback logs into it; the loop's numbers use their own x axis
    ``loop/iteration`` (TRL's rows advance W&B's internal step)."""

    kind = "wandb"

    def __init__(self, run_dir: Path, run_id: str, config: Mapping[str, Any],
                 project: str) -> None:
        super().__init__()
        import wandb

        kwargs: dict[str, Any] = {}
        if not os.environ.get("WANDB_MODE"):
            kwargs["mode"] = "offline"
        if not os.environ.get("WANDB_DIR"):
            kwargs["dir"] = str(tracking_dir(run_dir))
            tracking_dir(run_dir).mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT", project), name=run_id,
                              group=os.environ.get("WANDB_RUN_GROUP", run_id),
                              config=dict(config), **kwargs)
        self._define_axis()  # before any trainer's "*": W&B binds a metric when first seen
        logger.info("tracking run %s with W&B (%s) in %s", run_id,
                    kwargs.get("mode", os.environ.get("WANDB_MODE")), self.run.dir)

    def _define_axis(self) -> None:
        self.run.define_metric(f"{LOOP_PREFIX}iteration")
        self.run.define_metric(f"{LOOP_PREFIX}*", step_metric=f"{LOOP_PREFIX}iteration")

    def _write(self, scalars: dict[str, float], step: int) -> None:
        # W&B applies the latest matching glob, and TRL's callback defines "*" (x axis
        # train/global_step) at every trainer's start: define the loop's axis again first
        self._define_axis()
        self.run.log({**scalars, f"{LOOP_PREFIX}iteration": step})

    def _close(self) -> None:
        self.run.finish()


class MlflowTracker(Tracker):
    """One MLflow run (name: the run id) in the experiment ``project``, written through
    ``MlflowClient`` and never made MLflow's active run (transformers' ``MLflowCallback`` ends
    whatever run is active when it is garbage-collected). TRL's trainers start runs of their
    own, tagged ``mlflow.parentRunId`` (shown nested) by :func:`trainer_variables` while this
    tracker is open; the config is the run's artifact ``config.json``."""

    kind = "mlflow"

    def __init__(self, run_dir: Path, run_id: str, config: Mapping[str, Any],
                 project: str) -> None:
        super().__init__()
        from mlflow import MlflowClient
        from mlflow.exceptions import MlflowException

        local = not os.environ.get("MLFLOW_TRACKING_URI")
        uri = mlflow_store_uri(run_dir) if local else os.environ["MLFLOW_TRACKING_URI"]
        if local:
            mlflow_dir(run_dir).mkdir(parents=True, exist_ok=True)
        self.client = MlflowClient(tracking_uri=uri)
        name = os.environ.get("MLFLOW_EXPERIMENT_NAME", project)
        experiment = self.client.get_experiment_by_name(name)
        if experiment is None:
            artifacts = (mlflow_dir(run_dir) / "artifacts").resolve().as_uri() if local else None
            try:
                experiment_id = self.client.create_experiment(name, artifact_location=artifacts)
            except MlflowException:  # another run created it meanwhile
                experiment_id = self.client.get_experiment_by_name(name).experiment_id
        else:
            experiment_id = experiment.experiment_id
        run = self.client.create_run(experiment_id, run_name=run_id,
                                     tags={"vdlib.run_id": run_id})
        self.run_id, self.key = run.info.run_id, _run_key(run_dir)
        _MLFLOW_PARENTS[self.key] = self.run_id
        if config:
            self.client.log_dict(self.run_id, dict(config), "config.json")
        logger.info("tracking run %s with MLflow at %s", run_id, uri)

    def _write(self, scalars: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric(k, v, now, step)
                                                    for k, v in scalars.items()])

    def _close(self) -> None:
        _MLFLOW_PARENTS.pop(self.key, None)
        self.client.set_terminated(self.run_id)


_MLFLOW_PARENTS: dict[str, str] = {}  # run folder -> MLflow run id of its open tracker


def _run_key(run_dir: str | os.PathLike) -> str:
    return str(Path(run_dir).resolve())


class TrackioTracker(Tracker):
    """Trackio's local store (project ``project``, run and group: the run id). TRL's callback
    starts (and finishes) its own Trackio run per trainer, which would end a run held open, so
    each :meth:`log` resumes the run by name, logs and finishes it."""

    kind = "trackio"

    def __init__(self, run_dir: Path, run_id: str, config: Mapping[str, Any],
                 project: str) -> None:
        super().__init__()
        import trackio

        self.trackio, self.project, self.name = trackio, project, run_id
        self.config: dict[str, Any] | None = dict(config) if config else None
        logger.info("tracking run %s with Trackio (project %s)", run_id, project)

    def _write(self, scalars: dict[str, float], step: int) -> None:
        run = self.trackio.init(project=self.project, name=self.name, group=self.name,
                                config=self.config, resume="allow", embed=False,
                                auto_log_gpu=False, auto_log_cpu=False)
        self.config = None  # recorded with the first row
        try:
            run.log(scalars, step=step)
        finally:
            self.trackio.finish()


@dataclass(frozen=True)
class TrackerSpec:
    """A tracker: its ``report_to`` value for TRL, the module it imports (None: nothing), the
    package to install, and the :class:`Tracker` class."""

    name: str
    report_to: str
    module: str | None
    package: str | None
    opener: Callable[[Path, str, Mapping[str, Any], str], Tracker]


TRACKERS: Registry[TrackerSpec] = Registry("tracker")
for _spec in (
    TrackerSpec("none", "none", None, None, lambda *args: Tracker()),
    TrackerSpec("tensorboard", "tensorboard", None, "tensorboard", TensorBoardTracker),
    TrackerSpec("wandb", "wandb", "wandb", "wandb", WandbTracker),
    TrackerSpec("mlflow", "mlflow", "mlflow", "mlflow", MlflowTracker),
    TrackerSpec("trackio", "trackio", "trackio", "trackio", TrackioTracker),
):
    TRACKERS.add(_spec.name, _spec)


def tracker_names() -> list[str]:
    """The valid ``tracking`` settings."""
    return TRACKERS.names()


def check_tracker(kind: str) -> TrackerSpec:
    """The tracker ``kind``; an unknown name raises :class:`vdlib.utils.registry.UnknownNameError`
    (listing the valid ones), a missing package :class:`ImportError` naming it. Imports
    nothing: for validating a config before any model loads."""
    spec = TRACKERS.get(kind)
    if spec.name == "tensorboard":
        if not any(importlib.util.find_spec(m) for m in ("tensorboard", "tensorboardX")):
            _summary_writer_class()  # raises the ImportError
    elif spec.module is not None and importlib.util.find_spec(spec.module) is None:
        raise ImportError(f"tracking={kind!r} needs the {spec.package!r} package: "
                          f"{INSTALL_HINT} (or pip install {spec.package})")
    return spec


def open_tracker(kind: str, run_dir: str | os.PathLike, run_id: str,
                 config: Mapping[str, Any] | None = None, *,
                 project: str | None = None) -> Tracker:
    """Open the tracker ``kind`` for the run ``run_id`` in ``run_dir`` (open it on the main
    process only). ``config``: the run's resolved config, recorded with the run; ``project``:
    the W&B project / MLflow experiment / Trackio project, by default ``config["experiment"]``
    or ``"vdlib"``."""
    spec = check_tracker(kind)
    config = dict(config or {})
    project = project or str(config.get("experiment") or "vdlib")
    return spec.opener(Path(run_dir), run_id, config, project)


# ----------------------------------------------------------------------------- TRL trainers


def trl_report_to(kind: str) -> str:
    """The ``report_to`` value of TRL / transformers' training arguments for ``kind``."""
    return TRACKERS.get(kind).report_to


def trainer_arguments(kind: str, run_id: str, name: str, *,
                      project: str | None = None) -> dict[str, Any]:
    """Keyword arguments for TRL's ``GRPOConfig`` of one trainer of the run: ``report_to``,
    and (tracking on) ``run_name`` ``<run_id>/<name>`` and Trackio's ``project``.

    >>> trainer_arguments("none", "seed0", "iter_1/proposer")
    {'report_to': 'none'}
    >>> trainer_arguments("trackio", "seed0", "iter_1/solver", project="main")
    {'report_to': 'trackio', 'run_name': 'seed0/iter_1/solver', 'project': 'main'}
    """
    args: dict[str, Any] = {"report_to": trl_report_to(kind)}
    if kind != "none":
        args["run_name"] = f"{run_id}/{name}"
    if kind == "trackio" and project:
        args["project"] = project
    return args


def trainer_variables(kind: str, run_dir: str | os.PathLike, run_id: str, name: str, *,
                      project: str | None = None) -> dict[str, str]:
    """The environment variables transformers' tracking callbacks read for one trainer
    (``name``, e.g. ``iter_3/proposer``): the place and mode :func:`open_tracker` uses.

    >>> trainer_variables("tensorboard", "/o/x/seed0", "seed0", "iter_1/proposer")
    {'TENSORBOARD_LOGGING_DIR': '/o/x/seed0/tracking/tensorboard/iter_1/proposer'}
    """
    TRACKERS.get(kind)
    project = project or "vdlib"
    if kind == "tensorboard":
        return {"TENSORBOARD_LOGGING_DIR": str(tensorboard_dir(run_dir, name))}
    if kind == "wandb":
        return {"WANDB_MODE": "offline", "WANDB_DIR": str(tracking_dir(run_dir)),
                "WANDB_PROJECT": project, "WANDB_RUN_GROUP": run_id}
    if kind == "mlflow":
        tags = {"vdlib.run_id": run_id}
        if (parent := _MLFLOW_PARENTS.get(_run_key(run_dir))) is not None:
            tags["mlflow.parentRunId"] = parent  # the open tracker's run: shown nested
        return {"MLFLOW_TRACKING_URI": mlflow_store_uri(run_dir),
                "MLFLOW_EXPERIMENT_NAME": project, "MLFLOW_TAGS": json.dumps(tags)}
    return {}


@contextmanager
def trainer_environment(kind: str, run_dir: str | os.PathLike, run_id: str, name: str, *,
                        project: str | None = None) -> Iterator[dict[str, str]]:
    """Set :func:`trainer_variables` that the user has not set, for the ``with`` block (wrap the
    trainer's construction and ``train()``: transformers' callbacks read them in both); the
    previous environment is restored afterwards. Yields the variables it set."""
    wanted = trainer_variables(kind, run_dir, run_id, name, project=project)
    added = {k: v for k, v in wanted.items() if k not in os.environ}
    if "TENSORBOARD_LOGGING_DIR" in added:
        Path(added["TENSORBOARD_LOGGING_DIR"]).mkdir(parents=True, exist_ok=True)
    os.environ.update(added)
    try:
        yield added
    finally:
        for key in added:
            os.environ.pop(key, None)


@contextmanager
def tracked_trainer(kind: str, run_dir: str | os.PathLike, run_id: str, name: str, *,
                    project: str | None = None) -> Iterator[dict[str, Any]]:
    """For one GRPO trainer of a run: :func:`trainer_environment` for the ``with`` block
    (build and train the trainer inside it), yielding :func:`trainer_arguments` (pass them to
    ``trl_args``). With ``kind`` ``none`` it sets nothing and yields ``{"report_to": "none"}``."""
    with trainer_environment(kind, run_dir, run_id, name, project=project):
        yield trainer_arguments(kind, run_id, name, project=project)
