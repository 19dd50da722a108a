"""Experiment tracking (vdlib.utils.tracking): TensorBoard event files read back, the ``none``
tracker writes nothing, unknown names and missing packages fail helpfully, and wandb / MLflow /
Trackio in their offline / local modes (skipped where the package is not installed)."""

from __future__ import annotations

import importlib.util
import json
import os
import struct
import time
from pathlib import Path

import pytest

from vdlib.utils import tracking
from vdlib.utils.registry import UnknownNameError

# two iterations of a metrics.json as vdlib.metrics.run_metrics writes it
METRICS = [
    {"iteration": 1, "alpha_train": 0.75, "alpha_gen": 1.0, "proposer_masked": True,
     "kept_fraction": 0.74, "proposer_mean_reward": -0.25, "solver_mean_reward": 0.5,
     "valid_fraction": 1.0, "mean_acc": 0.4, "curriculum_size": 3, "solver_trained": True,
     "self_bleu": 0.13, "vendi": 6.2, "novelty_rate": 1.0, "cumulative_vendi": 6.2,
     "unique_tokens": 183, "embedder": "minilm", "proposer_entropy": 1.12,
     "proposer_entropy_last": None},
    {"iteration": 2, "alpha_train": 0.75, "alpha_gen": 1.0, "proposer_masked": True,
     "kept_fraction": 0.76, "proposer_mean_reward": 0.1, "solver_mean_reward": 0.25,
     "valid_fraction": 0.9, "mean_acc": 0.5, "curriculum_size": 5, "solver_trained": True,
     "self_bleu": 0.2, "vendi": 5.0, "novelty_rate": 0.5, "cumulative_vendi": 9.3,
     "unique_tokens": 150, "embedder": "minilm", "proposer_entropy": 1.0,
     "proposer_entropy_last": 0.9},
]
CONFIG = {"experiment": "tracking_test", "seed": 0, "vocab_dropout": {"alpha": 0.75}}


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Any connection from this process to a host other than this one fails the test."""
    import socket

    local = {"localhost", "127.0.0.1", "::1", "0.0.0.0", None, ""}
    connect, getaddrinfo = socket.socket.connect, socket.getaddrinfo

    def guarded_connect(sock, address):
        if sock.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in local:
            raise AssertionError(f"network connection to {address}")
        return connect(sock, address)

    def guarded_getaddrinfo(host, *args, **kwargs):
        if host not in local:
            raise AssertionError(f"name lookup of {host}")
        return getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket, "getaddrinfo", guarded_getaddrinfo)


def test_the_network_guard_refuses_remote_hosts():
    import socket

    with pytest.raises(AssertionError, match="name lookup of pypi.org"):
        socket.create_connection(("pypi.org", 443), timeout=1)


def _log_iterations(tracker) -> None:
    for t, m in enumerate(METRICS, 1):
        tracker.log(tracking.iteration_scalars(m), step=t)


# ----------------------------------------------------------------------------- selection


def test_iteration_scalars_pick_the_loop_numbers():
    s = tracking.iteration_scalars(METRICS[0])
    assert s["curriculum_size"] == 3.0 and s["kept_fraction"] == 0.74
    assert {"proposer_mean_reward", "solver_mean_reward", "self_bleu", "vendi", "novelty_rate",
            "cumulative_vendi", "unique_tokens", "proposer_entropy", "valid_fraction",
            "mean_acc", "alpha_train", "alpha_gen"} <= set(s)
    # names, flags, missing values and the iteration itself are not charted
    assert not {"embedder", "solver_trained", "proposer_masked", "proposer_entropy_last",
                "iteration"} & set(s)
    assert all(type(v) is float for v in s.values())


def test_flat_scalars_flatten_nested_and_drop_non_numbers():
    import numpy as np

    got = tracking.flat_scalars({"a": {"b": np.float32(0.5), "c": {"d": 2}}, "e": "x",
                                 "f": float("inf"), "g": None, "h": False, "i": [1, 2]})
    assert got == {"a/b": 0.5, "a/c/d": 2.0}


# ----------------------------------------------------------------------------- names


def test_every_tracker_is_a_report_to_value_transformers_accepts():
    from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK

    assert tracking.tracker_names() == ["mlflow", "none", "tensorboard", "trackio", "wandb"]
    for kind in tracking.tracker_names():
        value = tracking.trl_report_to(kind)
        assert value == kind
        assert value == "none" or value in INTEGRATION_TO_CALLBACK


def test_unknown_tracker_lists_the_valid_names(tmp_path):
    for call in (lambda: tracking.open_tracker("tensorbord", tmp_path, "r"),
                 lambda: tracking.trl_report_to("comet"),
                 lambda: tracking.trainer_arguments("neptune", "r", "x"),
                 lambda: tracking.check_tracker("")):
        with pytest.raises(UnknownNameError, match="valid names: mlflow, none, tensorboard, "
                                                   "trackio, wandb"):
            call()
    assert not any(tmp_path.iterdir())


def test_a_missing_package_names_the_extra(tmp_path, monkeypatch):
    real = importlib.util.find_spec
    hidden = {"tensorboard", "tensorboardX", "wandb", "mlflow", "trackio"}
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in hidden else real(name, *a))
    for kind in ("tensorboard", "wandb", "mlflow", "trackio"):
        with pytest.raises(ImportError, match=r"pip install 'vdlib\[tracking\]'"):
            tracking.open_tracker(kind, tmp_path, "r")
    tracking.check_tracker("none")
    assert not any(tmp_path.iterdir())


def test_none_writes_nothing(tmp_path):
    with tracking.open_tracker("none", tmp_path, "seed0", CONFIG) as tracker:
        logged = tracker.log(tracking.iteration_scalars(METRICS[0]), step=1)
    assert logged["loop/curriculum_size"] == 3.0  # what would have been logged
    assert not any(tmp_path.iterdir())
    assert tracking.trainer_arguments("none", "seed0", "x") == {"report_to": "none"}
    before = dict(os.environ)
    with tracking.trainer_environment("none", tmp_path, "seed0", "x") as added:
        assert added == {} and dict(os.environ) == before
    with pytest.raises(RuntimeError, match="closed"):
        tracker.log({"a": 1}, step=2)


def test_trainer_environment_sets_only_unset_variables_and_restores(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_DIR", raising=False)
    monkeypatch.delenv("WANDB_PROJECT", raising=False)
    monkeypatch.delenv("WANDB_RUN_GROUP", raising=False)
    monkeypatch.setenv("WANDB_MODE", "online")  # the user's choice wins
    with tracking.trainer_environment("wandb", tmp_path, "seed0", "x", project="p") as added:
        assert os.environ["WANDB_MODE"] == "online" and "WANDB_MODE" not in added
        assert os.environ["WANDB_DIR"] == str(tracking.tracking_dir(tmp_path))
        assert os.environ["WANDB_PROJECT"] == "p" and os.environ["WANDB_RUN_GROUP"] == "seed0"
    assert "WANDB_DIR" not in os.environ and os.environ["WANDB_MODE"] == "online"
    assert tracking.trainer_arguments("trackio", "seed0", "a/b", project="p") == {
        "report_to": "trackio", "run_name": "seed0/a/b", "project": "p"}


# ----------------------------------------------------------------------------- TensorBoard


def _tfrecords(path: Path):
    """The records of a TFRecord file (length, crc, data, crc), without TensorFlow."""
    data = path.read_bytes()
    pos = 0
    while pos < len(data):
        (length,) = struct.unpack("<Q", data[pos:pos + 8])
        yield data[pos + 12:pos + 12 + length]
        pos += 12 + length + 4


def _event_class():
    if importlib.util.find_spec("tensorboard") is not None:
        from tensorboard.compat.proto.event_pb2 import Event
    else:
        from tensorboardX.proto.event_pb2 import Event
    return Event


def read_scalars(log_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of the event files directly in ``log_dir``: tag -> [(step, value)]."""
    Event = _event_class()
    out: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(log_dir.glob("events.out.tfevents.*")):
        for record in _tfrecords(path):
            event = Event.FromString(record)
            for v in event.summary.value:
                if v.HasField("simple_value"):
                    value = v.simple_value
                elif v.HasField("tensor") and v.tensor.float_val:
                    value = v.tensor.float_val[0]
                else:
                    continue
                out.setdefault(v.tag, []).append((event.step, value))
    return out


def _writers():
    kinds = []
    if importlib.util.find_spec("tensorboard") is not None:
        kinds.append("torch")
    if importlib.util.find_spec("tensorboardX") is not None:
        kinds.append("tensorboardX")
    return kinds or [pytest.param("none", marks=pytest.mark.skip("no TensorBoard writer"))]


@pytest.mark.parametrize("writer", _writers())
def test_tensorboard_writes_event_files_that_read_back(tmp_path, monkeypatch, writer):
    if writer == "tensorboardX":
        from tensorboardX import SummaryWriter

        monkeypatch.setattr(tracking, "_summary_writer_class", lambda: SummaryWriter)
    run_dir = tmp_path / "exp" / "seed0"
    with tracking.open_tracker("tensorboard", run_dir, "seed0", CONFIG) as tracker:
        _log_iterations(tracker)
    log_dir = tracking.tensorboard_dir(run_dir)
    assert log_dir == run_dir / "tracking" / "tensorboard"
    assert list(log_dir.glob("events.out.tfevents.*"))
    scalars = read_scalars(log_dir)
    assert scalars["loop/curriculum_size"] == [(1, 3.0), (2, 5.0)]
    assert [s for s, _ in scalars["loop/kept_fraction"]] == [1, 2]
    assert scalars["loop/kept_fraction"][1][1] == pytest.approx(0.76)
    assert scalars["loop/vendi"][0][1] == pytest.approx(6.2)
    assert len(scalars["loop/proposer_entropy_last"]) == 1  # None in iteration 1
    if importlib.util.find_spec("tensorboard") is not None:  # TensorBoard's own reader agrees
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        acc = EventAccumulator(str(log_dir)).Reload()
        assert "loop/self_bleu" in acc.Tags()["scalars"]
        assert [(e.step, round(e.value, 4)) for e in acc.Scalars("loop/self_bleu")] == [
            (1, 0.13), (2, 0.2)]


def test_trl_trainer_logs_into_the_run_tensorboard_folder(tmp_path):
    if not any(importlib.util.find_spec(m) for m in ("tensorboard", "tensorboardX")):
        pytest.skip("no TensorBoard writer")
    from transformers import TrainerState, TrainingArguments
    from transformers.integrations import TensorBoardCallback

    run_dir = tmp_path / "seed0"
    kw = tracking.trainer_arguments("tensorboard", "seed0", "iter_1/proposer")
    with tracking.trainer_environment("tensorboard", run_dir, "seed0", "iter_1/proposer"):
        callback = TensorBoardCallback()  # as the trainer builds it from report_to
    args = TrainingArguments(output_dir=str(tmp_path / ".trl"), **kw)
    state = TrainerState()
    callback.on_train_begin(args, state, None)
    callback.on_log(args, state, None, logs={"reward": 0.5, "loss": 1.0})
    callback.on_train_end(args, state, None)
    assert args.report_to == ["tensorboard"] and args.run_name == "seed0/iter_1/proposer"
    scalars = read_scalars(tracking.tensorboard_dir(run_dir, "iter_1/proposer"))
    assert scalars["train/reward"] == [(0, 0.5)]


# ----------------------------------------------------------------------------- wandb


def _wandb_records(run_dir: Path) -> tuple[list[dict[str, str]], list[tuple[str, str]]]:
    """History rows and metric definitions ``(name or glob, x axis)`` of the offline ``.wandb``
    file (LevelDB log records of wandb's protobuf), up to the last complete record (the test
    reads the file while wandb's service may still be writing it: a half-written record failed
    to parse once under load, 2026-11-28)."""
    from wandb.proto import wandb_internal_pb2 as pb

    (path,) = run_dir.glob("tracking/wandb/offline-run-*/run-*.wandb")
    data, pos, block, buf, rows, metrics = path.read_bytes(), 7, 32768, b"", [], []
    while pos + 7 <= len(data):
        if block - pos % block < 7:
            pos += block - pos % block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if pos + 7 + length > len(data):  # the service is still writing this record
            break
        buf, pos = buf + data[pos + 7:pos + 7 + length], pos + 7 + length
        if kind in (1, 4):  # a full record, or the last piece of one
            record = pb.Record.FromString(buf)
            buf = b""
            if record.WhichOneof("record_type") == "history":
                rows.append({i.key or "/".join(i.nested_key): i.value_json
                             for i in record.history.item})
            elif record.WhichOneof("record_type") == "metric":
                m = record.metric
                metrics.append((m.name or m.glob_name, m.step_metric))
    return rows, metrics


@pytest.mark.slow  # 6 s on 2 cores (make test's 15 minutes; make test-slow runs it)
def test_wandb_offline(tmp_path, monkeypatch):
    wandb = pytest.importorskip("wandb")
    for var in ("WANDB_MODE", "WANDB_DIR", "WANDB_PROJECT", "WANDB_RUN_GROUP"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    run_dir = tmp_path / "seed0"
    tracker = tracking.open_tracker("wandb", run_dir, "seed0", CONFIG)
    try:
        assert tracker.run.settings.mode == "offline" and wandb.run is tracker.run
        assert tracker.run.name == "seed0" and tracker.run.group == "seed0"
        assert tracker.run.project == "tracking_test"
        for t, m in enumerate(METRICS, 1):
            # TRL's callback reuses the global run, defines its own x axis for "*" and
            # advances W&B's own step meanwhile
            wandb.define_metric("*", step_metric="train/global_step", step_sync=True)
            wandb.log({"train/reward": 0.5, "train/global_step": 3})
            tracker.log(tracking.iteration_scalars(m), step=t)
    finally:
        tracker.close()
    assert wandb.run is None
    # wandb's service process writes the offline file a moment after finish() returns
    deadline = time.monotonic() + 30
    while len([r for r in _wandb_records(run_dir)[0] if "loop/iteration" in r]) < 2 \
            and time.monotonic() < deadline:
        time.sleep(0.2)
    history, metrics = _wandb_records(run_dir)
    rows = [r for r in history if "loop/iteration" in r]
    assert [(r["loop/iteration"], r["loop/curriculum_size"]) for r in rows] == [
        ("1", "3"), ("2", "5")]
    # the loop's numbers are charted against their own axis, defined again after TRL's "*"
    assert metrics[-1] == ("loop/*", "loop/iteration")


# ----------------------------------------------------------------------------- MLflow


@pytest.mark.slow  # ~6 s on 2 cores: `make test-slow` (make test keeps within its budget)
def test_mlflow_local_store_with_child_trainer_runs(tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow")
    for var in ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_NESTED_RUN",
                "MLFLOW_TAGS", "MLFLOW_RUN_ID"):
        monkeypatch.delenv(var, raising=False)
    import gc

    from transformers import TrainerState, TrainingArguments
    from transformers.integrations import MLflowCallback

    run_dir = tmp_path / "seed0"
    with tracking.open_tracker("mlflow", run_dir, "seed0", CONFIG) as tracker:
        assert mlflow.active_run() is None  # the loop's run is never MLflow's active run
        for t, m in enumerate(METRICS, 1):
            name = f"iter_{t}/solver"  # a trainer, as TRL's callback logs it
            with tracking.trainer_environment("mlflow", run_dir, "seed0", name,
                                              project="tracking_test"):
                args = TrainingArguments(output_dir=str(tmp_path / ".trl"),
                                         **tracking.trainer_arguments("mlflow", "seed0", name))
                callback, state = MLflowCallback(), TrainerState()
                callback.on_train_begin(args, state, None)
                callback.on_log(args, state, None, logs={"reward": 0.25 * t})
                callback.on_train_end(args, state, None)
            del callback  # its __del__ ends whatever run is active
            gc.collect()
            tracker.log(tracking.iteration_scalars(m), step=t)
    assert mlflow.active_run() is None
    client = mlflow.MlflowClient(tracking.mlflow_store_uri(run_dir))
    runs = {r.info.run_name: r for r in client.search_runs(
        [client.get_experiment_by_name("tracking_test").experiment_id])}
    assert set(runs) == {"seed0", "seed0/iter_1/solver", "seed0/iter_2/solver"}
    parent = runs["seed0"]
    history = client.get_metric_history(parent.info.run_id, "loop/curriculum_size")
    assert [(m.step, m.value) for m in history] == [(1, 3.0), (2, 5.0)]
    for t in (1, 2):
        child = runs[f"seed0/iter_{t}/solver"]
        assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert child.data.tags["vdlib.run_id"] == "seed0"
        assert child.data.metrics["reward"] == 0.25 * t and child.info.status == "FINISHED"
    assert parent.info.status == "FINISHED"
    config = json.loads((Path(client.download_artifacts(parent.info.run_id, "config.json",
                                                        str(tmp_path)))).read_text())
    assert config == CONFIG
    assert (run_dir / "tracking" / "mlflow" / "mlflow.db").is_file()
    assert (run_dir / "tracking" / "mlflow" / "artifacts").is_dir()
    assert "mlflow.parentRunId" not in json.loads(tracking.trainer_variables(
        "mlflow", run_dir, "seed0", "x")["MLFLOW_TAGS"])  # closed: no parent any more


# ----------------------------------------------------------------------------- Trackio


def test_trackio_local(tmp_path, monkeypatch):
    if importlib.util.find_spec("trackio") is None:
        pytest.skip("trackio is not installed")
    import sys

    if "trackio" in sys.modules:  # its store is fixed when it is imported
        pytest.skip("trackio was imported before the test could point it at a temporary folder")
    for var in ("TRACKIO_SPACE_ID", "TRACKIO_SERVER_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TRACKIO_DIR", str(tmp_path / "trackio"))
    import trackio
    from trackio.sqlite_storage import SQLiteStorage
    from transformers import TrainerState, TrainingArguments
    from transformers.integrations import TrackioCallback

    run_dir = tmp_path / "seed0"
    with tracking.open_tracker("trackio", run_dir, "seed0", CONFIG) as tracker:
        tracker.log(tracking.iteration_scalars(METRICS[0]), step=1)
        # TRL's callback starts and finishes its own run per trainer
        args = TrainingArguments(output_dir=str(tmp_path / ".trl"),
                                 **tracking.trainer_arguments("trackio", "seed0", "iter_2/solver",
                                                              project="tracking_test"))
        callback, state = TrackioCallback(), TrainerState()
        callback.on_train_begin(args, state, None)
        callback.on_log(args, state, None, logs={"reward": 0.25})
        callback.on_train_end(args, state, None)
        tracker.log(tracking.iteration_scalars(METRICS[1]), step=2)
    assert trackio.context_vars.current_run.get() is None
    assert set(SQLiteStorage.get_runs("tracking_test")) == {"seed0", "seed0/iter_2/solver"}
    logs = SQLiteStorage.get_logs("tracking_test", "seed0")
    assert [(r["step"], r["loop/curriculum_size"]) for r in logs] == [(1, 3.0), (2, 5.0)]
    assert any((tmp_path / "trackio").iterdir()) and not (run_dir / "tracking").exists()


@pytest.mark.slow  # ~9 s on 2 cores: `make test-slow` (make test keeps within its budget)
def test_a_tiny_run_logs_its_iterations_and_trainers_to_tensorboard(tmp_path):
    """The loop's tracker and both GRPO trainers of a run write into the run's folder."""
    pytest.importorskip("tensorboardX")
    from test_coevolution import tiny_params

    from vdlib.loop.coevolution import run

    result = run(tiny_params(tmp_path, tracking="tensorboard"))
    board = tracking.tensorboard_dir(result.run_dir)
    loop = read_scalars(board)
    m = result.iterations[0]
    assert loop["loop/curriculum_size"] == [(1, float(m["curriculum_size"]))]
    assert loop["loop/kept_fraction"] == [(1, pytest.approx(m["kept_fraction"]))]
    for role in ("proposer", "solver") if m["solver_trained"] else ("proposer",):
        trainer = read_scalars(tracking.tensorboard_dir(result.run_dir, f"iter_1/{role}"))
        assert any(k.startswith("train/") for k in trainer), (role, sorted(trainer))


def test_the_config_offers_exactly_the_registered_trackers():
    from vdlib.config.experiment import TRACKER_NAMES, ConfigError, load_params

    assert set(TRACKER_NAMES) == set(tracking.TRACKERS.names())
    with pytest.raises(ConfigError, match="tracking = 'tensorbored' is not allowed"):
        load_params({"profile": "tiny", "tracking": "tensorbored"})
