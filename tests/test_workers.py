"""vdlib.utils.workers (arms in CPU worker processes) and run_arms' choice of how many at once."""

from __future__ import annotations

import logging
import warnings

import pytest

from vdlib.config import load_params
from vdlib.loop.coevolution import parallel_arms
from vdlib.utils.workers import (
    Relay,
    portable_filters,
    run_jobs,
    threads_per_worker,
    worker_count,
)


@pytest.mark.parametrize(("jobs", "workers", "expected"), [
    (2, None, 1), (2, 1, 1), (2, 2, 2), (2, 8, 2), (5, 3, 3), (1, 4, 1), (0, 2, 1)])
def test_worker_count_is_at_most_the_jobs_and_the_limit(jobs, workers, expected):
    assert worker_count(jobs, workers) == expected


@pytest.mark.parametrize(("jobs", "workers", "cpus", "expected"), [
    (2, 2, 2, 1), (2, 2, 16, 8), (3, 2, 3, 1), (2, 4, 8, 4), (4, 4, 2, 1), (2, None, 2, 2)])
def test_threads_share_the_cpus_among_the_workers_at_once(jobs, workers, cpus, expected):
    assert threads_per_worker(jobs, workers, cpus) == expected


def _record(name: str, level: int, msg: str) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, None, None)


def test_relay_hands_a_record_to_its_logger_with_its_level_and_filters(caplog):
    log = logging.getLogger("vdlib.test_workers.relay")
    caplog.set_level(logging.INFO)
    relay = Relay()
    relay.handle(_record(log.name, logging.INFO, "iteration 1/2 | stage 1/6 proposer: started"))
    relay.handle(_record(log.name, logging.DEBUG, "below the level"))

    class Drop(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            return "known notice" not in record.getMessage()

    drop = Drop()
    log.addFilter(drop)
    try:
        relay.handle(_record(log.name, logging.WARNING, "a known notice"))
        relay.handle(_record(log.name, logging.WARNING, "something else"))
    finally:
        log.removeFilter(drop)
    seen = [(r.name, r.getMessage()) for r in caplog.records]
    assert seen == [(log.name, "iteration 1/2 | stage 1/6 proposer: started"),
                    (log.name, "something else")]


def test_portable_filters_leave_out_a_filter_a_worker_cannot_import():
    class LocalWarning(UserWarning):
        pass

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="kept", category=FutureWarning,
                                module="transformers")
        warnings.filterwarnings("ignore", category=LocalWarning)
        kept = portable_filters()
        everything = list(warnings.filters)
    assert len(kept) == len(everything) - 1
    assert not any(f[2] is LocalWarning for f in kept)
    assert any(f[2] is FutureWarning and f[1] is not None and f[1].pattern == "kept"
               for f in kept)


def test_one_worker_runs_the_jobs_here_in_order():
    calls: list[int] = []

    def job(x: int) -> int:  # a local function: no process could import it
        calls.append(x)
        return x * x

    assert run_jobs(job, [(3,), (1,), (2,)], 1) == [9, 1, 4]
    assert calls == [3, 1, 2]
    assert run_jobs(job, [(5,)], 4) == [25]  # one job: no worker process either


def _params(**over):
    return load_params({"profile": "tiny", "arms": ["baseline", "vd75"], **over})


def test_run_arms_runs_arms_at_once_only_on_the_cpu_and_when_asked(monkeypatch):
    assert parallel_arms(_params(), 2) == 1  # launcher.max_parallel unset
    assert parallel_arms(_params(launcher={"max_parallel": 2}), 2) == 2
    assert parallel_arms(_params(launcher={"max_parallel": 4}), 2) == 2
    assert parallel_arms(_params(launcher={"max_parallel": 2}), 1) == 1
    gpu = _params(launcher={"max_parallel": 2}, model={"device": "cuda"})
    assert parallel_arms(gpu, 2) == 1
    import vdlib.loop.coevolution as coevolution

    monkeypatch.setattr(coevolution, "world_size", lambda: 2)  # under accelerate launch
    assert parallel_arms(_params(launcher={"max_parallel": 2}), 2) == 1


def _log_and_square(x: int) -> tuple[int, int]:
    import torch

    logging.getLogger("vdlib.test_workers.job").info("job %d in a worker", x)
    if x < 0:
        raise ValueError(f"negative job {x}")
    return x * x, torch.get_num_threads()


@pytest.mark.slow
def test_two_workers_return_in_order_relay_logs_and_share_the_cpus(caplog):
    caplog.set_level(logging.INFO)
    out = run_jobs(_log_and_square, [(3,), (4,), (5,)], 2, cpus=2)
    assert out == [(9, 1), (16, 1), (25, 1)]
    relayed = sorted(r.getMessage() for r in caplog.records if r.name.endswith(".job"))
    assert relayed == ["job 3 in a worker", "job 4 in a worker", "job 5 in a worker"]
    with pytest.raises(ValueError, match="negative job -1"):
        run_jobs(_log_and_square, [(2,), (-1,)], 2, cpus=2)


def test_the_shared_warm_start_is_built_here_first_with_a_heartbeat(monkeypatch, caplog):
    """run_arms builds the format warm-start the arms share before starting them (with a
    heartbeat line, as a stage would log); a config without a warm-start builds nothing here
    (its base is converted into its own run folder, under the run's lock)."""
    import vdlib.loop.warm_start as warm_start
    from vdlib.loop.coevolution import build_shared_bases

    built = []
    monkeypatch.setattr(warm_start, "warm_start_dir",
                        lambda name, cfg, **kw: built.append((name, cfg.steps)) or "/cached")
    caplog.set_level(logging.INFO)
    arms = [_params(), _params(vocab_dropout={"alpha": 0.75})]
    build_shared_bases(arms)
    # the proposer's and the solver's base of each arm (cached: the second call finds it)
    assert built == [("smollm2-135m", arms[0].warm_start.steps)] * 4
    assert any("format warm-start of smollm2-135m" in r.getMessage() and "started" in
               r.getMessage() for r in caplog.records)
    built.clear()
    build_shared_bases([_params(warm_start={"mode": "none"})])
    assert built == []
