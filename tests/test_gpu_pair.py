"""tools/lent-gpus/gpu_pair.sh, the lanes of a GPU hold (issue 30), with a stub gpu_small.sh: each
lane's GPU slots, rendezvous ports by lane (two lanes may share a GPU), its VAR=VALUE settings,
the grid's reserve before a following step, and the checks that refuse a bad lane before any
lane starts."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STUB = """echo "$1 seeds=${*:2} gpus=$GRID_GPUS port=$VDLIB_GRID_PORT_BASE graphs=[$GRAPHS] \\
life=[$LIFETIME] end=$END gs=$GS_DIR"
"""


def _pair(tmp_path: Path, lanes: str, *steps: str, out: str = "out", stub: str = STUB,
          **env_extra: str) -> subprocess.CompletedProcess:
    bench = tmp_path / "b"
    bench.mkdir(exist_ok=True)
    shutil.copy(ROOT / "tools" / "lent-gpus" / "gpu_pair.sh", bench)
    shutil.copy(ROOT / "tools" / "lent-gpus" / "new_session.py", bench)
    (bench / "gpu_env.sh").write_text("true\n")  # the lent machine's checks, not here
    (bench / "gpu_small.sh").write_text(stub)
    env = {**os.environ, "OUT": str(tmp_path / out), "END": "2000000000", "GRAPHS": "1",
           "LANES": lanes, "PYTHONPATH": str(ROOT), "HOLD_DIR": str(tmp_path / "hold"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **env_extra}
    return subprocess.run(["bash", str(bench / "gpu_pair.sh"), *steps], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_lanes_get_their_gpu_slots_ports_by_lane_and_their_own_settings(tmp_path):
    r = _pair(tmp_path, "main0:params/gpu-small/main_table.yaml:1:0:GRAPHS=,LIFETIME=stage "
                        "ent:params/gpu-small/entropy_baselines.yaml:1:1,2", "grid", "eval")
    assert r.returncode == 0, r.stderr
    main0 = (tmp_path / "out" / "main0.txt").read_text().splitlines()
    ent = (tmp_path / "out" / "ent.txt").read_text().splitlines()
    # three arms x one seed on GPU 1; graphs off and the stage lifetime for this lane alone
    assert main0[0].startswith("grid seeds=0 gpus=1,1,1 port=29600 graphs=[] life=[stage]")
    assert "end=1999999800" in main0[0] and "end=2000000000" in main0[2]  # RESERVE before eval
    assert main0[1] == "main0 grid: rc 0" and main0[3] == "main0 eval: rc 0"
    # two arms x two seeds on the same GPU, the next lane's ports, the hold's GRAPHS
    assert ent[0].startswith("grid seeds=1 2 gpus=1,1,1,1 port=29700 graphs=[1] life=[]")
    assert "gs=/tmp/gs_ent" in ent[0] and "gs=/tmp/gs_main0" in main0[0]


@pytest.mark.parametrize("lanes, message", [
    ("x:params/gpu-small/main_table.yaml:0:0:notasetting", "setting 'notasetting' is not"),
    ("x:params/gpu-small/main_table.yaml:gpu0:0", "not NAME:PARAMS:GPU:SEEDS"),
    ("x:params/gpu-small/main_table.yaml:0:0;rm", "not NAME:PARAMS:GPU:SEEDS"),
])
def test_a_bad_lane_is_refused_before_any_lane_starts(tmp_path, lanes, message):
    r = _pair(tmp_path, f"ok:params/gpu-small/main_table.yaml:0:0 {lanes}", "grid")
    assert r.returncode == 2 and message in r.stdout
    assert not (tmp_path / "out" / "ok.txt").exists()  # the good lane did not start either


# a step that leaves a file in its lane's folder; grid waits for a file the test writes
SLOW_STUB = STUB + """mkdir -p "$OUT" && echo "$1 in $PWD" > "$OUT/step_$1.txt"
if [ "$1" = grid ]; then while [ ! -f "$HOLD_DIR/go" ]; do sleep 0.2; done; fi
"""


def _members(tgz: Path) -> dict[str, str]:
    import tarfile

    with tarfile.open(tgz) as tar:
        return {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile()}


def test_a_detached_hold_runs_on_between_waits_and_comes_back_a_file_a_lane(tmp_path):
    """`start` returns at once with the steps running in their own session; `wait` returns
    at its deadline with what exists so far, then, once the steps are done, with each lane's
    folder and log in <lane>.tgz and the hold's log (8 files a command come back)."""
    import time

    lanes = ("main0:params/gpu-small/main_table.yaml:1:0:GRAPHS=,LIFETIME=stage "
             "ent:params/gpu-small/entropy_baselines.yaml:1:1,2")
    r = _pair(tmp_path, lanes, "start", "grid", "eval", "export", out="o1", stub=SLOW_STUB)
    assert r.returncode == 0 and "hold started: main0 ent" in r.stdout, r.stdout + r.stderr
    again = _pair(tmp_path, lanes, "start", "grid", out="o1", stub=SLOW_STUB)
    assert again.returncode == 2 and "already started" in again.stdout
    # a wait at its deadline: the grids still run; what exists comes back
    early = _pair(tmp_path, "", "wait", out="o2", stub=SLOW_STUB, WAIT_END=str(int(time.time())))
    assert early.returncode == 0 and "wait again" in early.stdout
    assert "gone" not in early.stdout  # start returned with the session up, not starting
    assert {p.name for p in (tmp_path / "o2").iterdir()} <= {"main0.tgz", "ent.tgz", "hold.log"}
    # a detached session killed (as a machine that ends every process of a command would):
    # the next wait starts the steps again, and the grids resume
    import signal

    for _ in range(300):  # both lanes' grids started
        out = tmp_path / "hold" / "out"
        if all((out / n / "step_grid.txt").exists() for n in ("main0", "ent")):
            break
        time.sleep(0.1)
    os.killpg(int((tmp_path / "hold" / "pid").read_text()), signal.SIGKILL)
    time.sleep(0.5)
    gone = _pair(tmp_path, "", "wait", out="o2b", stub=SLOW_STUB, WAIT_END=str(int(time.time())))
    assert "gone unfinished: starting them again" in gone.stdout and "wait again" in gone.stdout
    (tmp_path / "hold" / "go").touch()  # the grids end
    done = _pair(tmp_path, "", "wait", out="o3", stub=SLOW_STUB,
                 WAIT_END=str(int(time.time()) + 100))
    assert done.returncode == 0 and "hold done (rc 0)" in done.stdout, done.stdout
    assert sorted(p.name for p in (tmp_path / "o3").iterdir()) == [
        "ent.tgz", "hold.log", "main0.tgz"]
    main0 = _members(tmp_path / "o3" / "main0.tgz")
    assert sorted(main0) == ["main0.txt", "main0/step_eval.txt", "main0/step_export.txt",
                             "main0/step_grid.txt"]
    # the steps ran in the hold's copy of the checkout, not in the synced one
    assert main0["main0/step_eval.txt"].strip() == f"eval in {tmp_path / 'hold' / 'repo'}"
    assert (tmp_path / "hold" / "repo" / "params" / "gpu-small" / "fail_neg.yaml").is_file()
    lines = main0["main0.txt"].splitlines()
    assert lines[0].startswith("grid seeds=0 gpus=1,1,1 port=29600 graphs=[] life=[stage]")
    # the first grid was killed unrecorded; the restart ran every step, in order
    assert [x for x in lines if ": rc " in x] == ["main0 grid: rc 0", "main0 eval: rc 0",
                                                  "main0 export: rc 0"]
    assert lines[1].startswith("grid seeds=0 gpus=1,1,1 port=29600 graphs=[] life=[stage]")
    assert "ent.txt" in _members(tmp_path / "o3" / "ent.tgz")


@pytest.mark.parametrize("steps, message", [
    (["start", "grid", "evaluate"], "step 'evaluate': one of grid, eval, export"),
    (["start"], "start what?"),
])
def test_a_detached_hold_refuses_bad_steps_and_more_lanes_than_come_back(tmp_path, steps, message):
    r = _pair(tmp_path, "a:params/gpu-small/main_table.yaml:0:0", *steps)
    assert r.returncode == 2 and message in r.stdout
    many = " ".join(f"l{i}:params/gpu-small/main_table.yaml:0:0" for i in range(8))
    r = _pair(tmp_path, many, "start", "grid")
    assert r.returncode == 2 and "at most 7 lanes" in r.stdout
    assert not (tmp_path / "hold").exists()
    r = _pair(tmp_path, "", "wait")
    assert r.returncode == 2 and "no hold started" in r.stdout


def _bundle(folder: Path, files: dict[str, str]) -> None:
    import tarfile

    src = folder / "src"
    for name, text in files.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(text)
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(folder / "bundle.tgz", "w:gz") as tar:
        for name in files:
            tar.add(src / name, arcname=name)
    shutil.rmtree(src)


def test_import_hold_lays_a_lanes_bundles_out_as_an_export_folder(tmp_path):
    """The last command's bundle gives the export, runs (no logs), gzipped run logs and the
    evaluation log; every command's bundle its launcher log; the first, the prepare log."""
    import gzip
    import json

    timing = json.dumps({"proposer": 100.4, "generate": 10, "score": 50, "solver": 40.2})
    run = {"runs/a-seed0/iter_1/metrics.json": "{}", "runs/a-seed0/iter_1/timing.json": timing}
    _bundle(tmp_path / "d1" / "lane", {"gpu_small_grid.log": "cmd1", "gpu_small_prepare.log": "p",
                                       "runs/a-seed0.log": "half", **run})
    _bundle(tmp_path / "d2" / "lane", {
        "gpu_small_grid.log": "cmd2", "gpu_small_x.json": '{"records": []}',
        "gpu_small_status.txt": "done", "gpu_small_eval_a-seed0.log": "eval",
        "runs/a-seed0.log": "whole", **run})
    dest = tmp_path / "dest"
    script = ROOT / "tools" / "lent-gpus" / "import_lane.sh"
    r = subprocess.run(["bash", str(script), "lane", str(dest), str(tmp_path / "d1"),
                        str(tmp_path / "d2")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "| a-seed0 | 1 | 100 | 10 | 50 | 40 | 201 |" in r.stdout
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()) == [
        "a-seed0.log.gz", "eval.log.gz", "gpu_small_status.txt", "gpu_small_x.json",
        "grid_cmd1.log", "grid_cmd2.log", "prepare.log", "runs/a-seed0/iter_1/metrics.json",
        "runs/a-seed0/iter_1/timing.json"]
    assert gzip.decompress((dest / "a-seed0.log.gz").read_bytes()) == b"whole"
    assert (dest / "grid_cmd1.log").read_text() == "cmd1"
    again = subprocess.run(["bash", str(script), "lane", str(dest), str(tmp_path / "d2")],
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 1 and "exists" in again.stdout  # never over a committed folder


def _import_packed_lane(tmp_path, lane: str, files: dict[str, str], log: str | None = None):
    """import_lane.sh on a lane as a detached hold's wait packs it: device/<lane>.tgz holding
    <lane>/bundle.tgz (``files``) and, given ``log``, <lane>.txt; returns (result, dest)."""
    import tarfile

    _bundle(tmp_path / "pack" / lane, files)
    if log is not None:
        (tmp_path / "pack" / f"{lane}.txt").write_text(log)
    device = tmp_path / "device"
    device.mkdir()
    with tarfile.open(device / f"{lane}.tgz", "w:gz") as tar:
        tar.add(tmp_path / "pack" / lane, arcname=lane)
        if log is not None:
            tar.add(tmp_path / "pack" / f"{lane}.txt", arcname=f"{lane}.txt")
    dest = tmp_path / "dest"
    script = ROOT / "tools" / "lent-gpus" / "import_lane.sh"
    r = subprocess.run(["bash", str(script), lane, str(dest), str(device)],
                       capture_output=True, text=True, timeout=60)
    return r, dest


def test_import_hold_takes_a_detached_holds_packed_lane(tmp_path):
    """A detached hold's wait brings the lane back as lane.tgz (lane/bundle.tgz, lane.txt)."""
    timing = '{"proposer": 10, "generate": 1, "score": 5, "solver": 4}'
    r, dest = _import_packed_lane(tmp_path, "lane", {
        "gpu_small_grid.log": "all", "gpu_small_x.json": "{}",
        "runs/a-seed0/iter_3/timing.json": timing, "runs/a-seed0.log": "log"},
        log="lane export: rc 0\n")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "| a-seed0 | 3 | 10 | 1 | 5 | 4 | 20 |" in r.stdout
    assert (dest / "grid_cmd1.log").read_text() == "all"
    assert (dest / "runs" / "a-seed0" / "iter_3" / "timing.json").is_file()


def test_import_hold_takes_a_single_policy_lane(tmp_path):
    """A lane of gpu_single_policy.sh has no runs/: its export and its train and eval logs come
    over (gzipped), and each run's last tqdm step is printed instead of stage seconds."""
    import gzip

    r, dest = _import_packed_lane(tmp_path, "sp0", {
        "gpu_small_single_policy.json": '{"runs": []}',
        "train_vd95-seed0.log": " 99%|x| 99/100 [11:10<00:06,  6.70s/it]\r"
                                "100%|x| 100/100 [11:17<00:00,  6.71s/it]",
        "eval_vd95-seed0.log": "eval", "eval_base.log": "base"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "train_vd95-seed0: 100%|x| 100/100 [11:17<00:00,  6.71s/it]" in r.stdout
    assert sorted(p.name for p in dest.iterdir()) == [
        "eval_base.log.gz", "eval_vd95-seed0.log.gz", "gpu_small_single_policy.json",
        "train_vd95-seed0.log.gz"]
    assert gzip.decompress((dest / "eval_base.log.gz").read_bytes()) == b"base"


SP_DRIVER = """#!/bin/bash
echo "$1 ${*:2} gpu=$CUDA_VISIBLE_DEVICES port=$MASTER_PORT" >> "$CALLS"
if [ "$1" = export ]; then
    while [ $# -gt 0 ] && [ "$1" != --out ]; do shift; done
    echo '{"runs": [{"pass1": {"x": 1}}], "base_pass1": {"x": 1}}' > "$2"
fi
"""


def test_single_policy_steps_take_a_lanes_seeds_gpu_slots_and_ports(tmp_path):
    """gpu_single_policy.sh as a lane of gpu_pair.sh: one step at a time, only the lane's
    seeds, run i on GPU slot i, ports from the lane's base, the base evaluation optional."""
    work = tmp_path / "w"
    (work / "tools" / "lent-gpus").mkdir(parents=True)
    shutil.copy(ROOT / "tools" / "lent-gpus" / "gpu_single_policy.sh", work / "tools" / "lent-gpus")
    (work / "tools" / "lent-gpus" / "gpu_env.sh").write_text(
        'budget() { echo 100; }\nbundle() { [ -n "$NO_BUNDLE" ] || touch "$OUT/bundle.tgz"; }\n')
    (work / ".bench" / "gsm_symbolic").mkdir(parents=True)
    (work / ".bench" / "gsm_symbolic" / "seed10000_n800.jsonl").write_text("{}\n")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text("#!/bin/bash\necho GPU 0; echo GPU 1; echo GPU 2\n")
    (fake / "driver").write_text(SP_DRIVER)
    for f in ("nvidia-smi", "driver"):
        (fake / f).chmod(0o755)
    calls = tmp_path / "calls.txt"
    env = {**os.environ, "OUT": str(tmp_path / "out"), "GS_DIR": str(tmp_path / "sp"),
           "PARAMS": str(ROOT / "params" / "gpu-small" / "single_policy.yaml"),
           "PYTHONPATH": str(ROOT), "SP_DRIVER": str(fake / "driver"), "CALLS": str(calls),
           "GRID_GPUS": "2,2,2,2", "VDLIB_GRID_PORT_BASE": "29700", "NO_BUNDLE": "1",
           "PATH": os.pathsep.join([str(fake), str(Path(sys.executable).parent),
                                    os.environ["PATH"]])}

    def step(*args: str, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "tools/lent-gpus/gpu_single_policy.sh", *args], cwd=work,
                              env={**env, **extra}, capture_output=True, text=True, timeout=120)

    assert step("grid", "0", "2").returncode == 0
    runs = sorted(calls.read_text().splitlines())
    assert len(runs) == 4 and all(r.startswith("run ") and " gpu=2 " in r for r in runs)
    assert {r.split("--seed ")[1].split()[0] for r in runs} == {"0", "2"}  # only the lane's seeds
    assert {r.rsplit("port=", 1)[1] for r in runs} == {"29700", "29701", "29702", "29703"}
    calls.unlink()
    assert step("eval", "0", "2", NO_BASE_EVAL="1").returncode == 0
    assert "--base" not in calls.read_text() and calls.read_text().count("eval ") == 4
    calls.unlink()
    assert step("eval", "1").returncode == 0  # two runs and the starting checkpoint, on the slot
    evals = calls.read_text().splitlines()
    assert len(evals) == 3 and any("--base" in e and "gpu=2 port=29702" in e for e in evals)
    r = step("export", "0", "2", NO_BUNDLE="")
    assert r.returncode == 0 and "all evaluated" in r.stdout
    assert (tmp_path / "out" / "bundle.tgz").is_file()
    assert step("train").returncode == 2  # not a step
    # no step: every seed, round robin over the machine's GPUs (the hold C way)
    calls.unlink()
    env.pop("GRID_GPUS")
    assert step().returncode == 0
    lines = calls.read_text().splitlines()
    trains = [x for x in lines if x.startswith("run ")]
    assert len(trains) == 6 and {t.split("gpu=")[1].split()[0] for t in trains} == {"0", "1", "2"}
    assert sum("--base" in x for x in lines) == 1 and any(x.startswith("export ") for x in lines)


def test_a_lane_runs_the_script_its_setting_names(tmp_path):
    bench = tmp_path / "b"
    bench.mkdir()
    (bench / "gpu_single_policy.sh").write_text('echo "single policy $1 ${*:2} gpus=$GRID_GPUS"\n')
    r = _pair(tmp_path, "sp:params/gpu-small/single_policy.yaml:3:0,1:SCRIPT=gpu_single_policy.sh "
                        "m:params/gpu-small/main_table.yaml:0:0", "grid")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "out" / "sp.txt").read_text().splitlines()[0] == \
        "single policy grid 0 1 gpus=3,3,3,3"
    assert (tmp_path / "out" / "m.txt").read_text().startswith("grid seeds=0")
    bad = _pair(tmp_path, "x:params/gpu-small/main_table.yaml:0:0:SCRIPT=rm.sh", "grid")
    assert bad.returncode == 2
    assert "SCRIPT is gpu_small.sh (the default) or gpu_single_policy.sh" in bad.stdout
