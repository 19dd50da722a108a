"""Grid launchers (vdlib.grid.launch): GPU slots, a local launcher that isolates failures,
submitit's local executor standing in for SLURM, and re-submitted grids that skip finished runs."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from test_coevolution import tiny_params

from vdlib.app.cli import main
from vdlib.config import layout
from vdlib.config.experiment import load_params
from vdlib.grid.launch import (
    LocalLauncher,
    format_plan,
    format_results,
    gpu_slots,
    plan_grid,
    slurm_launch,
    visible_gpus,
)


def _grid(tmp_path: Path, arms=("baseline", "vd75", "vd85", "train_only", "gen_only"),
          seeds=(0,)) -> dict:
    return tiny_params(tmp_path, arms=list(arms), seeds=list(seeds))


def test_visible_gpus_follow_cuda_visible_devices():
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "3,5, 7"}) == ["3", "5", "7"]
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == []
    assert gpu_slots(visible_gpus({"CUDA_VISIBLE_DEVICES": "3,5,7"}), 2) == [["3", "5"]]
    with pytest.raises(ValueError, match="only 1 GPU"):
        gpu_slots(["0"], 2)


# A stand-in for `vdlib run`: records its GPUs and the time it ran, fails for the vd75 run.
_FAKE_RUN = """
import json, os, sys, time
params = sys.argv[1]
start = time.time()
time.sleep(0.6)
with open(params + ".ran", "w") as f:
    json.dump({"gpus": os.environ.get("CUDA_VISIBLE_DEVICES"), "start": start,
               "port": os.environ.get("MASTER_PORT"),
               "end": time.time()}, f)
sys.exit(3 if "vd75" in params else 75 if "gen_only" in params else 0)
"""


def test_the_local_launcher_packs_runs_on_gpus_and_isolates_a_failure(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    cfg = load_params(_grid(tmp_path))
    runs = plan_grid(cfg)
    assert [r.name for r in runs] == ["baseline-seed0", "vd75-seed0", "vd85-seed0",
                                      "train_only-seed0", "gen_only-seed0"]
    slots = gpu_slots(visible_gpus(), cfg.launcher.gpus_per_run)
    assert slots == [["4"], ["6"]]
    launcher = LocalLauncher(slots, poll_s=0.05,
                             command=lambda params, gpus: [sys.executable, "-c", _FAKE_RUN,
                                                           str(params)])
    done = launcher.launch(runs)
    status = {r.name: r.status for r in done}
    assert status == {"baseline-seed0": "ran", "vd75-seed0": "failed", "vd85-seed0": "ran",
                      "train_only-seed0": "ran", "gen_only-seed0": "paused"}  # 75: --stop-after
    assert "exit status 3" in next(r.error for r in done if r.name == "vd75-seed0")
    ran = {r.name: json.loads(Path(str(layout.grid_params_path(
        cfg.output_dir, cfg.experiment, r.name)) + ".ran").read_text()) for r in done}
    assert {v["gpus"] for v in ran.values()} == {"4", "6"}
    # one rendezvous port per slot: runs side by side never share one
    assert {(v["gpus"], v["port"]) for v in ran.values()} == {("4", "29600"), ("6", "29601")}
    # never two runs on one GPU at once, and two GPUs busy at once at some point
    spans = sorted((v["start"], v["end"], v["gpus"]) for v in ran.values())
    for i, (_, e0, g0) in enumerate(spans):
        for s1, _, g1 in spans[i + 1:]:
            if s1 < e0:
                assert g0 != g1
    assert any(s1 < e0 for (_, e0, _), (s1, _, _) in zip(spans, spans[1:], strict=False))
    # each run's resolved params went to the grid folder: one run, not the grid again
    params = load_params(layout.grid_params_path(cfg.output_dir, cfg.experiment, "vd85-seed0"))
    assert params.arms == [] and params.run_id == "vd85-seed0"
    assert params.vocab_dropout.alpha == 0.85


def test_the_dry_run_plan_shows_states_gpus_and_waves(tmp_path, capsys):
    path = tmp_path / "grid.yaml"
    path.write_text(json.dumps(_grid(tmp_path, seeds=(0, 1))))
    assert main(["grid", str(path), "--dry-run", "--gpus", "0,1,2,3"]) == 0
    out = capsys.readouterr().out
    assert "| 6 | baseline-seed1 | new | 1 | 2 |" in out
    assert "10 runs: 10 to launch (0 resumed), 0 done; 4 in parallel" in out
    assert not (tmp_path / "t").exists()  # nothing launched or written
    runs = plan_grid(load_params(_grid(tmp_path)))
    runs[0].state = "done"
    assert "| 1 | baseline-seed0 | done (skipped) | - | - |" in format_plan(runs, [["0"]])


def test_slurm_parameters_come_from_the_launcher_section():
    pytest.importorskip("submitit")
    from vdlib.grid.launch import slurm_parameters

    cfg = load_params({"profile": "tiny", "launcher": {"gpus_per_run": 2, "slurm": {
        "partition": "gpu", "time_min": 90, "mem_gb": 64, "extra": ["qos=high", "foo=bar"]}}})
    p = slurm_parameters(cfg, 3)
    assert p["partition"] == "gpu" and p["time"] == 90 and p["gpus_per_node"] == 2
    assert p["mem"] == "64GB" and p["qos"] == "high" and p["array_parallelism"] == 3
    assert p["additional_parameters"] == {"foo": "bar"}


@pytest.mark.slow  # submitit's local executor, ~1 min on 2 cores; the real SLURM test is slow
def test_submitit_runs_a_grid_and_a_resubmitted_grid_skips_finished_runs(tmp_path):
    pytest.importorskip("submitit")
    cfg = load_params({**_grid(tmp_path, arms=("baseline", "vd75")),
                       "launcher": {"gpus_per_run": 0}})
    runs = slurm_launch(plan_grid(cfg), cfg, cluster="local")
    assert [(r.name, r.status) for r in runs] == [("baseline-seed0", "ran"),
                                                  ("vd75-seed0", "ran")], \
        [(r.name, r.error) for r in runs]
    for r in runs:
        metrics = json.loads((r.run_dir / "iter_1" / "metrics.json").read_text())
        assert metrics["alpha_gen"] == (1.0 if r.arm == "baseline" else 0.75)
    again = plan_grid(cfg)
    assert [r.state for r in again] == ["done", "done"]
    resubmitted = slurm_launch(again, cfg, cluster="local")
    assert [r.status for r in resubmitted] == ["skipped", "skipped"]
    # the local launcher skips them too, without starting a process
    local = LocalLauncher([None], command=lambda p, g: pytest.fail("started a finished run"))
    assert [r.status for r in local.launch(plan_grid(cfg))] == ["skipped", "skipped"]


def test_slot_ports_and_the_multi_gpu_command(monkeypatch):
    from vdlib.grid.launch import _default_command, slot_port

    monkeypatch.delenv("VDLIB_GRID_PORT_BASE", raising=False)
    assert [slot_port(i) for i in range(3)] == [29600, 29601, 29602]
    monkeypatch.setenv("VDLIB_GRID_PORT_BASE", "31000")
    assert slot_port(2) == 31002
    argv = _default_command(Path("p.yaml"), ["0", "1"], 31002)
    assert argv[argv.index("--main_process_port") + 1] == "31002"
    assert "--main_process_port" not in _default_command(Path("p.yaml"), ["0"], 31002)


# ----------------------------------------------------------------------------- hostile grids
# (issue 29, items 5, 7, 8, 10, 12)

# A stand-in for `vdlib run` that takes the run folder's real lock, starts a grandchild in its
# process group (which ignores SIGTERM, as a stuck helper would), records both pids, and then
# waits; SIGTERM ends it cleanly (as `vdlib run` turns SIGTERM into an exit).
_LOCKING_RUN = """
import os, signal, subprocess, sys, time
from pathlib import Path
from vdlib.config.experiment import load_params
from vdlib.config.layout import run_path
from vdlib.runs.run_state import RunLock
params = sys.argv[1]
lock = RunLock(run_path(load_params(params))).acquire()
helper = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(10**6)"])
def stop(signum, frame):
    Path(params + ".sigterm").write_text("")
    raise SystemExit(143)
signal.signal(signal.SIGTERM, stop)
Path(params + ".pids").write_text(f"{os.getpid()} {helper.pid}")
while not Path(params + ".release").exists():
    time.sleep(0.05)
sys.exit(0)
"""

# `vdlib grid` with that stand-in as each run's command (cli.exit_on_sigterm as in vdlib).
_GRID = """
import logging, sys
from vdlib.app.cli import exit_on_sigterm
from vdlib.config.experiment import load_params
from vdlib.grid.launch import LocalLauncher, format_results, plan_grid
exit_on_sigterm()
logging.basicConfig(level=logging.INFO)
cfg = load_params(sys.argv[1])
runs = plan_grid(cfg)
launcher = LocalLauncher([None] * int(sys.argv[2]), poll_s=0.05,
                         command=lambda p, g: [sys.executable, sys.argv[3], str(p)])
print(format_results(launcher.launch(runs)), flush=True)
"""


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, which no init reaped yet, counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _wait_for(predicate, what: str, proc=None, limit_s: float = 300.0) -> None:
    """Poll until ``predicate()``; fail (not hang) if ``proc`` exits first or after a
    generous safety limit."""
    import time

    end = time.monotonic() + limit_s
    while not predicate():
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"exited ({proc.returncode}) before {what}: {proc.stdout.read()[-3000:]}")
        if time.monotonic() > end:
            pytest.fail(f"never saw {what}")
        time.sleep(0.05)


def _start_grid(tmp_path: Path, params: Path, slots: int):
    """The stand-in grid in a subprocess; :func:`_end_grid` cleans up after a failed test."""
    import subprocess

    (tmp_path / "grid.py").write_text(_GRID)
    (tmp_path / "child.py").write_text(_LOCKING_RUN)
    return subprocess.Popen([sys.executable, str(tmp_path / "grid.py"), str(params), str(slots),
                             str(tmp_path / "child.py")], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            cwd=Path(__file__).resolve().parent.parent)


def _end_grid(grid, cfg) -> None:
    """After a test (passed or not): release every stand-in run, stop the grid, then SIGKILL
    any stand-in or helper still alive, so that even a failed test leaves no process."""
    import signal

    params = [layout.grid_params_path(cfg.output_dir, cfg.experiment, r.name)
              for r in plan_grid(cfg)]
    for p in params:
        if p.parent.exists():
            Path(str(p) + ".release").write_text("")
    if grid.poll() is None:
        grid.send_signal(signal.SIGTERM)
        try:
            grid.wait(timeout=120)
        except Exception:  # noqa: BLE001 - last resort
            grid.kill()
            grid.wait()
    for p in params:
        pids = Path(str(p) + ".pids")
        for pid in map(int, pids.read_text().split()) if pids.exists() else ():
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_sigterm_to_a_grid_stops_every_run_and_leaves_no_process(tmp_path):
    """Item 5: SIGTERM to `vdlib grid` reaches each running run (its whole process group); the
    grid waits for them, kills what ignores SIGTERM, and exits 143; no process is left and every
    run's lock is free, so a resubmitted grid finds no live orphan."""
    path = tmp_path / "grid.yaml"
    path.write_text(json.dumps(_grid(tmp_path, arms=("baseline", "vd75", "vd85"))))
    cfg = load_params(path)
    grid = _start_grid(tmp_path, path, slots=2)
    try:
        _sigterm_checks(grid, cfg)
    finally:
        _end_grid(grid, cfg)


def _sigterm_checks(grid, cfg) -> None:
    import signal

    from vdlib.grid.status import lock_holder
    from vdlib.runs.run_state import RunLock

    pid_files = [Path(str(layout.grid_params_path(cfg.output_dir, cfg.experiment, name))
                      + ".pids") for name in ("baseline-seed0", "vd75-seed0")]
    _wait_for(lambda: all(p.exists() for p in pid_files), "both runs started", grid)
    pids = [int(x) for p in pid_files for x in p.read_text().split()]
    runs = [r.run_dir for r in plan_grid(cfg)]
    assert [lock_holder(r) is not None for r in runs] == [True, True, False]
    grid.send_signal(signal.SIGTERM)
    assert grid.wait(timeout=300) == 143
    out = grid.stdout.read()
    assert "SIGTERM to 2 running run(s)" in out
    assert [pid for pid in pids if _alive(pid)] == []  # runs and their helpers: all gone
    for p in pid_files:  # each run got SIGTERM (a clean stop), not only SIGKILL
        assert Path(str(p).replace(".pids", ".sigterm")).exists()
    assert [lock_holder(r) for r in runs] == [None, None, None]
    for r in runs[:2]:
        RunLock(r).acquire().release()  # a resubmitted grid can take them
    assert not Path(str(layout.grid_params_path(cfg.output_dir, cfg.experiment, "vd85-seed0"))
                    + ".pids").exists()  # the queued run never started


def test_two_grids_on_one_folder_report_busy_not_failed(tmp_path, capsys):
    """Item 7: a second grid on the same runs finds them busy (run lock held, or the log held
    by the first grid), starts nothing, writes no log line, and says `busy` (exit 75, not 1);
    a child that finds its folder busy itself is `busy` too; the first grid's runs all ran."""
    path = tmp_path / "grid.yaml"
    path.write_text(json.dumps(_grid(tmp_path, arms=("baseline", "vd75"))))
    cfg = load_params(path)
    first = _start_grid(tmp_path, path, slots=2)
    try:
        _two_grid_checks(first, cfg, path, capsys)
    finally:
        _end_grid(first, cfg)


def _two_grid_checks(first, cfg, path, capsys) -> None:
    from vdlib.loop.progress import BUSY_EXIT, PAUSED_EXIT

    params = {n: layout.grid_params_path(cfg.output_dir, cfg.experiment, n)
              for n in ("baseline-seed0", "vd75-seed0")}
    _wait_for(lambda: all(Path(str(p) + ".pids").exists() for p in params.values()),
              "the first grid's runs started", first)
    logs = {n: layout.grid_log_path(cfg.output_dir, cfg.experiment, n) for n in params}
    before = {n: p.read_bytes() for n, p in logs.items()}
    second = LocalLauncher([None, None], poll_s=0.05,
                           command=lambda p, g: pytest.fail("started a busy run"))
    runs = second.launch(plan_grid(cfg))
    assert [(r.name, r.status) for r in runs] == [("baseline-seed0", "busy"),
                                                  ("vd75-seed0", "busy")]
    assert all("in use by another process (pid" in r.error or "another grid" in r.error
               for r in runs)
    assert "failed" not in format_results(runs).split("\n\n")[0]
    assert "0 ran, 0 skipped, 0 paused, 2 busy, 0 failed" in format_results(runs)
    # the CLI says the same: exit 75 (launch again later), not 1
    assert main(["grid", str(path), "--gpus", ""]) == PAUSED_EXIT
    assert "2 busy" in capsys.readouterr().out
    assert {n: p.read_bytes() for n, p in logs.items()} == before  # no shared log
    for p in params.values():
        Path(str(p) + ".release").write_text("")
    out, _ = first.communicate(timeout=300)
    assert first.returncode == 0 and "2 ran, 0 skipped, 0 paused, 0 failed" in out, out
    # a child that finds its folder busy (a race between two grids) exits BUSY_EXIT: busy
    busy = LocalLauncher([None], poll_s=0.05, command=lambda p, g: [
        sys.executable, "-c", f"import sys; sys.exit({BUSY_EXIT})"])
    assert {r.status for r in busy.launch(plan_grid(cfg))} == {"busy"}


def test_vdlib_run_on_a_busy_folder_exits_with_the_busy_status(tmp_path, capsys):
    import yaml

    from vdlib.loop.progress import BUSY_EXIT
    from vdlib.runs.run_state import RunLock

    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(_grid(tmp_path, arms=())))
    cfg = load_params(path)
    with RunLock(layout.run_path(cfg)):
        assert main(["run", str(path)]) == BUSY_EXIT
        assert "in use by another process" in capsys.readouterr().err
        # a grid finds it busy (a `vdlib run` by hand holds it), starts nothing, says so
        runs = LocalLauncher([None], poll_s=0.05, command=lambda p, g: pytest.fail(
            "started a busy run")).launch(plan_grid(cfg))
        assert [(r.status, r.error) for r in runs] == [
            ("busy", f"in use by another process (pid {os.getpid()})")]


def test_an_empty_gpus_flag_means_cpu_runs(tmp_path, capsys):
    """Item 10: `--gpus ''` is no GPU (CPU runs), not one GPU named ''."""
    path = tmp_path / "grid.yaml"
    path.write_text(json.dumps(_grid(tmp_path, arms=("baseline", "vd75"))))
    assert main(["grid", str(path), "--dry-run", "--gpus", ""]) == 0
    out = capsys.readouterr().out
    assert "| 1 | baseline-seed0 | new | cpu | 1 |" in out
    assert "| 2 | baseline-seed0 | new | cpu | 2 |" not in out
    assert main(["grid", str(path), "--dry-run", "--gpus", " , "]) == 0
    assert "| 2 | vd75-seed0 | new | cpu | 2 |" in capsys.readouterr().out


@pytest.mark.slow  # 7 s on 2 cores (make test's 15 minutes; make test-slow runs it)
def test_a_failed_slurm_run_shows_its_own_one_line_error(tmp_path, monkeypatch):
    """Item 12: the grid's table shows a failed job's own one-line error (that of `vdlib
    run`), not submitit's `FailedJobError: - <log path>`; a run found busy is `busy`."""
    pytest.importorskip("submitit")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cfg = load_params({**_grid(tmp_path, arms=("baseline", "vd75")),
                       "model": {"proposer": "someorg/not-cached-anywhere"},
                       "launcher": {"gpus_per_run": 0}})
    runs = plan_grid(cfg)
    from vdlib.runs.run_state import RunLock

    with RunLock(runs[1].run_dir):  # vd75 is busy in another process
        runs = slurm_launch(runs, cfg, cluster="local", poll_s=0.1)
    assert [r.status for r in runs] == ["failed", "busy"], [(r.name, r.error) for r in runs]
    error = runs[0].error
    assert error.startswith("'someorg/not-cached-anywhere' is not in the local Hugging Face "
                            "cache"), error
    assert error.endswith(f"; see {runs[0].log}") and "FailedJobError" not in error
    assert "\n" not in error and "Traceback" in runs[0].log.read_text()  # the log keeps it
    assert "in use by another process" in runs[1].error
    table = format_results(runs)
    assert "| baseline-seed0 | failed ('someorg/not-cached-anywhere' is not in" in table


def test_job_error_takes_the_runs_line_from_submitits_trace():
    from vdlib.grid.launch import job_error

    trace = ("Job (task=0) failed during processing with trace:\n----------------------\n"
             "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n"
             "    raise RunFailed(message) from e\n"
             "vdlib.grid.launch_slurm.RunFailed: the run's own error\n----------------------\n"
             "You can check full logs with 'job.stderr(0)' and 'job.stdout(0)'or at paths:\n"
             "  - /x/1_0_log.err\n  - /x/1_0_log.out\n")
    assert job_error(RuntimeError(trace), Path("/x/1_0_log.err")) == \
        "the run's own error; see /x/1_0_log.err"
    assert job_error(RuntimeError("Job 5 has not produced any output (state: CANCELLED)\nx")) \
        == "Job 5 has not produced any output (state: CANCELLED)"


def _slurm_ready() -> bool:
    import shutil
    import subprocess

    if not (shutil.which("sbatch") and shutil.which("squeue") and shutil.which("scancel")):
        return False
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and any(s in out.stdout for s in ("idle", "mix", "alloc"))


@pytest.mark.slow
@pytest.mark.skipif(not _slurm_ready(), reason="no SLURM cluster here "
                    "(../shared/tools/slurm-local starts one)")
def test_a_grid_on_a_real_slurm_cluster_survives_scancel_and_resumes(tmp_path):
    """Item 12, on a real SLURM (22.05 from ../shared/tools/slurm-local, accounting off so
    `sacct` fails): a 2-run tiny grid as one job array; `scancel` of one array task while it
    runs; `vdlib grid` returns (it never waits on a task `squeue` no longer lists) with that run
    failed and SLURM's reason, the other ran; the resubmission skips the finished run and
    resumes the cancelled one to the end. A run that fails shows its own one-line error."""
    import subprocess
    import time

    import yaml

    from vdlib.grid.status import collect_status, lock_holder

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    params = {**_grid(tmp_path, arms=("baseline", "vd75")),
              "launcher": {"kind": "slurm", "gpus_per_run": 0,
                           "slurm": {"cpus_per_task": 1, "time_min": 30}}}
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(params))
    cfg = load_params(path)
    cancelled = layout.run_path(plan_grid(cfg)[1].config)

    def log(text: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)

    version = subprocess.run(["sbatch", "--version"], capture_output=True, text=True).stdout
    log(f"sbatch: {version.strip()}")
    sacct = subprocess.run(["sacct", "-n"], capture_output=True, text=True)
    log(f"sacct exit status {sacct.returncode}: {sacct.stderr.strip()[:200]}")
    grid = subprocess.Popen([sys.executable, "-m", "vdlib", "grid", str(path)], env=env,
                            cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    _wait_for(lambda: lock_holder(cancelled) is not None and (cancelled / "iter_1").exists(),
              "the vd75 run inside its first stage", grid, limit_s=600)
    queue = subprocess.run(["squeue", "-h", "-r", "-o", "%i %T %j"], capture_output=True,
                           text=True).stdout
    log(f"squeue while both run:\n{queue}")
    task = next(line.split()[0] for line in queue.splitlines() if line.split()[0].endswith("_1"))
    log(f"scancel {task}")
    subprocess.run(["scancel", task], check=True)
    out, _ = grid.communicate(timeout=900)  # returns: never waits on a task that is gone
    log(f"vdlib grid exit status {grid.returncode}; its tables:\n"
        + "\n".join(line for line in out.splitlines() if line.startswith(("|", "\n")) or
                    " ran, " in line))
    assert grid.returncode == 1, out
    assert "| baseline-seed0 | ran |" in out
    assert f"| vd75-seed0 | failed (job {task} left the queue without a result: " in out
    assert "CANCELLED" in out
    states = {s.run_id: s.state for s in collect_status(cfg.output_dir)}
    log(f"vdlib status: {states}")
    assert states["baseline-seed0"] == "done" and states["vd75-seed0"] in ("new", "stopped")
    assert not list((cancelled / "iter_1").glob(".*"))  # SIGTERM stopped it cleanly

    again = subprocess.run([sys.executable, "-m", "vdlib", "grid", str(path)], env=env,
                           cwd=root, capture_output=True, text=True, timeout=900)
    log(f"resubmission: exit status {again.returncode}\n"
        + "\n".join(line for line in again.stdout.splitlines() if line.startswith("|")
                    or " ran, " in line))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "| baseline-seed0 | skipped |" in again.stdout
    assert "| vd75-seed0 | ran |" in again.stdout
    assert [(s.run_id, s.state) for s in collect_status(cfg.output_dir)
            ] == [("baseline-seed0", "done"), ("vd75-seed0", "done")]

    bad = {**params, "experiment": "bad", "model": {"proposer": "someorg/not-cached-anywhere"},
           "arms": ["baseline"]}
    bad_path = tmp_path / "bad.yaml"
    bad_path.write_text(yaml.safe_dump(bad))
    failed = subprocess.run([sys.executable, "-m", "vdlib", "grid", str(bad_path)], env=env,
                            cwd=root, capture_output=True, text=True, timeout=900)
    row = [line for line in failed.stdout.splitlines() if "| baseline-seed0 |" in line][-1]
    log(f"a failing run: exit status {failed.returncode}\n{row}")
    assert failed.returncode == 1
    assert "| baseline-seed0 | failed ('someorg/not-cached-anywhere' is not in the local " \
           "Hugging Face cache" in row and "FailedJobError" not in row
