"""Issue 50's red team: hostile and careless uses of the ``vdlib`` command line, as data.

Each case is a small function that does through the CLI (``python -m vdlib ...`` in a
subprocess, ``HF_HUB_OFFLINE=1``, the tiny profile, a temporary output folder) what a careless or
hostile user does, and says whether the promised behaviour **held**: a one-line error (exit
status, no traceback), nothing written or lost, no hang (every subprocess under a timeout and a
4 GiB address-space limit, FIFOs included), the right grid state, a resume equal to an
uninterrupted run. ``item`` is the issue's numbered item (``"1"`` to ``"7"``) or ``"held"`` for
the behaviours its top lists as already holding.

One finished tiny run (arm ``baseline``, seed 0, one iteration) is built once per code tree and
copied into each case that needs a finished folder.

    python tests/redteam_cases.py [--tree DIR] [--out FILE.json] [--only NAME ...] [--jobs N]
    python tests/redteam_cases.py --table BEFORE.json AFTER.json   # docs/reliability.md's table

runs every case against the vdlib code in DIR (default: this checkout; ``PYTHONPATH=DIR`` and the
editable install's finder removed, so ``python -m vdlib`` imports that tree alone) and writes
``[{case, item, held, observation, seconds}]``. ``tests/test_redteam.py`` runs them (slow) and
checks the table's coverage (fast). The module is not collected by pytest (no ``test_`` prefix).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
MEMORY_LIMIT = 4 << 30  #: RLIMIT_AS of every vdlib subprocess: a runaway read fails, not the box
SECRET = "sk-redteam-0123456789abcdefSECRETKEY"  #: OPENAI_API_KEY of the reference run
FOREIGN = "FOREIGN-CONTENT-7d1c"  #: what a linked timing.json points at
ITEMS = ("1", "2", "3", "4", "5", "6", "7", "held")

#: the tiny params of tests/test_coevolution.tiny_params, as one arm and seed
TINY = {"profile": "tiny", "experiment": "t", "iterations": 1,
        "arms": ["baseline"], "seeds": [0],
        "model": {"proposer": "tiny-random"}, "warm_start": {"mode": "none"},
        "proposer": {"max_response_length": 12}, "solver": {"max_response_length": 12},
        "scoring": {"num_solver_samples": 2, "max_new_tokens": 6},
        "curriculum": {"num_questions": 4, "batch_size": 2, "max_new_tokens": 12}}
RUN = Path("t") / "baseline-seed0"  #: the finished run's folder inside an output folder
GOOD_RESULTS = {"iterations": 1, "records": [
    {"arm": "base", "seed": None, "iteration": 0, "pass1_gsm8k": 10.0,
     "pass1_gsm8k_runs": [9.0, 11.0]},
    {"arm": "baseline", "seed": 0, "iteration": 1, "self_bleu": 0.5, "vendi": 3.0},
    {"arm": "vd75", "seed": 0, "iteration": 1, "self_bleu": 0.3, "vendi": 4.0}]}
_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [A-Z]+ ")
_SHIM = ("import sys\n"
         "sys.meta_path[:] = [f for f in sys.meta_path if 'Editable' not in repr(f)]\n")


@dataclass
class Case:
    name: str
    item: str
    what: str
    fn: Callable[[Ctx], tuple[bool, str]]


CASES: list[Case] = []


def case(item: str, what: str):
    """Register ``fn(ctx) -> (held, observation)`` as a case of ``item``."""
    assert item in ITEMS, item

    def register(fn):
        CASES.append(Case(fn.__name__, item, what, fn))
        return fn
    return register


@dataclass
class Res:
    rc: int | None
    out: str
    err: str
    timed_out: bool
    seconds: float

    @property
    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.out + self.err

    def error_lines(self) -> list[str]:
        """stderr without the log lines, progress bars, the -v hint and blank lines."""
        return [ln for ln in self.err.splitlines() if ln.strip() and not _LOG_LINE.match(ln)
                and ln.strip() != "(-v shows the traceback)" and "it/s]" not in ln]

    def brief(self) -> str:
        if self.timed_out:
            return f"no answer after {self.seconds:.0f} s (killed)"
        if self.traceback:
            last = [ln for ln in (self.err or self.out).splitlines() if ln.strip()]
            return f"exit {self.rc}, traceback: {last[-1][:160] if last else ''}"
        last_out = [ln for ln in self.out.splitlines() if ln.strip()][-1:]
        errors = self.error_lines()
        lines = (last_out or errors) if self.rc == 0 else (errors or last_out)
        many = f" ({len(errors)} error lines, the last)" if self.rc and len(errors) > 1 else ""
        return f"exit {self.rc}{many}: {lines[-1][:200] if lines else '(no output)'}"


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    # Ctrl-C as at a terminal: a runner started in the background (nohup, `&`) inherits SIGINT
    # ignored, and Python would then never raise KeyboardInterrupt
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Ctx:
    """One case's temporary folder, the code tree under test and the reference run."""

    def __init__(self, tree: Path, work: Path, reference: Path | None, shim: Path):
        self.tree, self.work, self.reference, self.shim = tree, work, reference, shim

    # ------------------------------------------------------------------ processes

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("VDLIB_") and k not in ("OPENAI_API_KEY", "PYTHONPATH")}
        env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
                   PYTHONUNBUFFERED="1", CUDA_VISIBLE_DEVICES="",
                   PYTHONPATH=f"{self.tree}{os.pathsep}{self.shim}")
        env.update(extra)
        return env

    def popen(self, argv: list, env: dict | None = None, **kw) -> subprocess.Popen:
        return subprocess.Popen(argv, cwd=self.work, env=env or self.env(), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=_limit_memory, **kw)

    def wait(self, p: subprocess.Popen, timeout: float, start: float) -> Res:
        try:
            out, err = p.communicate(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            _killpg(p)
            out, err = p.communicate()
            timed_out = True
        return Res(None if timed_out else p.returncode, out, err, timed_out,
                   time.monotonic() - start)

    def vdlib(self, *args, timeout: float = 120, env: dict | None = None, **kw) -> Res:
        start = time.monotonic()
        p = self.popen([PYTHON, "-m", "vdlib", *args], env=env, **kw)
        return self.wait(p, timeout, start)

    def python(self, code: str, *args, timeout: float = 120, env: dict | None = None) -> Res:
        start = time.monotonic()
        return self.wait(self.popen([PYTHON, "-c", code, *args], env=env), timeout, start)

    # ------------------------------------------------------------------ files

    def params(self, name: str = "p.yaml", out: str | Path = "out", drop: tuple = (),
               **over) -> Path:
        """A tiny params file (one arm, seed 0) writing to ``work/out``; ``over`` takes dotted
        keys (``curriculum.num_questions``), ``drop`` removes top-level keys."""
        p = json.loads(json.dumps(TINY))
        p["output_dir"] = str(self.work / out)
        for key in drop:
            p.pop(key, None)
        for key, value in over.items():
            *parents, last = key.split("__") if "__" in key else key.split(".")
            node = p
            for part in parents:
                node = node.setdefault(part, {})
            node[last] = value
        path = self.work / name
        path.write_text(yaml.safe_dump(p))
        return path

    def raw_params(self, text: str, name: str = "raw.yaml") -> Path:
        path = self.work / name
        path.write_text(f"output_dir: {self.work / 'out'}\n" + text)
        return path

    def finished(self, out: str = "out") -> Path:
        """A copy of the finished reference run at ``work/out/t/baseline-seed0``."""
        assert self.reference is not None
        target = self.work / out / RUN
        shutil.copytree(self.reference / RUN, target, symlinks=True)
        return target


def _killpg(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def snapshot(folder: Path, skip: tuple[str, ...] = (".lock",)) -> dict[str, str]:
    """Path -> SHA-256 (or the link target, or 'fifo'/'dir') of everything under ``folder``."""
    out = {}
    if not folder.exists() and not folder.is_symlink():
        return out
    for p in sorted(folder.rglob("*")):
        rel = str(p.relative_to(folder))
        if p.name in skip:
            continue
        st = p.lstat()
        if stat.S_ISLNK(st.st_mode):
            out[rel] = "link:" + os.readlink(p)
        elif stat.S_ISDIR(st.st_mode):
            out[rel] = "dir"
        elif stat.S_ISREG(st.st_mode):
            h = hashlib.sha256()
            with open(p, "rb") as f:  # streamed: a case may leave a 2 GiB sparse file
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
            out[rel] = h.hexdigest()
        else:
            out[rel] = "special"
    return out


def artifacts(run_dir: Path) -> dict[str, str]:
    """What a resume must reproduce: every file but those holding paths or wall-clock times."""
    return snapshot(run_dir, skip=("manifest.json", "config.yaml", "timing.json", ".lock"))


def one_line(res: Res, *needles: str, rc: int | None = None) -> tuple[bool, str]:
    """Held when the command ended (no timeout) with a non-zero status (``rc`` if given), no
    traceback, one error line holding every needle."""
    lines = res.error_lines()
    text = " ".join(lines)
    held = (not res.timed_out and not res.traceback and res.rc not in (None, 0)
            and (rc is None or res.rc == rc) and len(lines) == 1
            and all(n in text for n in needles))
    return held, res.brief()


def _fifo(path: Path) -> Path:
    if path.exists() or path.is_symlink():
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    os.mkfifo(path)
    return path


def _sparse(path: Path, size: int = 2 << 30) -> None:
    path.unlink(missing_ok=True)
    with open(path, "wb") as f:
        f.truncate(size)


def _results(ctx: Ctx, data: dict | str | bytes) -> tuple[Path, Path]:
    path = ctx.work / "r.json"
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path, ctx.work / "report"


# ============================================================================ item 1


@case("1", "vdlib grid --dry-run on a finished run whose params then changed "
      "(curriculum.num_questions 4 -> 6)")
def grid_dry_run_finished_other_config(ctx: Ctx):
    ctx.finished()
    r = ctx.vdlib("grid", ctx.params(curriculum__num_questions=6), "--dry-run", "--gpus", "")
    held = (r.rc == 2 and not r.traceback and "done (skipped)" not in r.out
            and "refused (curriculum.num_questions: 4 -> 6)" in r.out)
    row = [ln for ln in r.out.splitlines() if "baseline-seed0" in ln]
    return held, f"exit {r.rc}; plan row: {row[0].strip() if row else r.brief()}"


@case("1", "vdlib grid (local launcher, CPU) on a finished run of another config")
def grid_local_finished_other_config(ctx: Ctx):
    run = ctx.finished()
    before = snapshot(run)
    r = ctx.vdlib("grid", ctx.params(curriculum__num_questions=6), "--gpus", "")
    summary = [ln for ln in r.out.splitlines() if " ran, " in ln]
    held = (r.rc == 2 and not r.traceback and "skipped)" not in r.out
            and any("1 refused" in s for s in summary) and snapshot(run) == before
            and "num_questions: 4" in (run / "config.yaml").read_text())
    return held, f"exit {r.rc}; {summary[0].strip() if summary else r.brief()}; " \
                 f"folder {'unchanged' if snapshot(run) == before else 'changed'}"


@case("1", "vdlib grid on a partly run folder (metrics.json deleted) of another config "
      "(scoring.tau_min)")
def grid_partial_other_config(ctx: Ctx):
    run = ctx.finished()
    (run / "iter_1" / "metrics.json").unlink()
    before = snapshot(run)
    r = ctx.vdlib("grid", ctx.params(scoring__tau_min=0.25), "--gpus", "")
    started = (ctx.work / "out" / "t" / "grid").exists()
    held = (r.rc == 2 and not r.traceback and "refused" in r.out and not started
            and snapshot(run) == before)
    summary = [ln for ln in r.out.splitlines() if " ran, " in ln]
    return held, (f"exit {r.rc}; {summary[0].strip() if summary else r.brief()}; "
                  f"run {'started (grid log written)' if started else 'not started'}")


_RUN_GRID = """
import sys
from vdlib.config.experiment import load_params
from vdlib.experiments.grids import run_grid
runs = run_grid(load_params(sys.argv[1]), launcher="local")
print("RETURNED", runs)
"""


@case("1", "the notebooks' launcher path, report.experiments.run_grid(cfg, launcher='local'), "
      "on a finished run of another config")
def notebooks_run_grid_other_config(ctx: Ctx):
    run = ctx.finished()
    before = snapshot(run)
    r = ctx.python(_RUN_GRID, str(ctx.params(curriculum__num_questions=6)))
    raised = [ln for ln in r.err.splitlines() if ln.startswith("vdlib.")
              and "Error" in ln.split(":")[0]
              or ln.startswith(("vdlib.loop.run_state.", "vdlib.runs.run_state."))]
    held = (r.rc not in (0, None) and "RETURNED" not in r.out and bool(raised)
            and "RunConfigMismatch" in raised[0] and "curriculum.num_questions: 4 -> 6" in r.err
            and snapshot(run) == before)
    seen = ("returned the old run's folder" if "RETURNED" in r.out
            else raised[0][:160] if raised else r.brief())
    return held, f"exit {r.rc}: {seen}"


# ============================================================================ item 2


@case("2", "manifest.json replaced by a FIFO, then vdlib run")
def manifest_fifo_run(ctx: Ctx):
    run = ctx.finished()
    _fifo(run / "manifest.json")
    return one_line(ctx.vdlib("run", ctx.params(), timeout=60), "manifest.json")


@case("2", "manifest.json replaced by a FIFO in one of two runs, then vdlib status")
def manifest_fifo_status(ctx: Ctx):
    ctx.finished()
    other = ctx.work / "out" / "t2" / "baseline-seed0"
    shutil.copytree(ctx.reference / RUN, other, symlinks=True)
    _fifo(other / "manifest.json")
    r = ctx.vdlib("status", str(ctx.work / "out"), timeout=60)
    rows = [ln for ln in r.out.splitlines() if "baseline-seed0" in ln]
    held = (r.rc == 0 and len(rows) == 2 and any("| t2 " in x and "unreadable" in x for x in rows)
            and any("| t " in x and "| done " in x for x in rows))
    return held, f"exit {r.rc}; rows: {[' '.join(x.split()[:6]) for x in rows]}" \
        if not r.timed_out else r.brief()


@case("2", "manifest.json a link to /dev/zero, then vdlib run")
def manifest_dev_zero_run(ctx: Ctx):
    run = ctx.finished()
    (run / "manifest.json").unlink()
    (run / "manifest.json").symlink_to("/dev/zero")
    return one_line(ctx.vdlib("run", ctx.params(), timeout=90), "manifest.json")


@case("2", "manifest.json a link to /dev/zero, then vdlib status")
def manifest_dev_zero_status(ctx: Ctx):
    run = ctx.finished()
    (run / "manifest.json").unlink()
    (run / "manifest.json").symlink_to("/dev/zero")
    r = ctx.vdlib("status", str(ctx.work / "out"), timeout=90)
    rows = [ln for ln in r.out.splitlines() if "baseline-seed0" in ln]
    held = r.rc == 0 and len(rows) == 1 and "unreadable (manifest.json)" in rows[0]
    return held, f"exit {r.rc}; row: {' '.join(rows[0].split()[:8])}" if rows else r.brief()


@case("2", "manifest.json grown to a 2 GiB sparse file, then vdlib status (4 GiB limit)")
def manifest_sparse_status(ctx: Ctx):
    run = ctx.finished()
    _sparse(run / "manifest.json")
    r = ctx.vdlib("status", str(ctx.work / "out"), timeout=120)
    rows = [ln for ln in r.out.splitlines() if "baseline-seed0" in ln]
    held = r.rc == 0 and len(rows) == 1 and "unreadable (manifest.json)" in rows[0] \
        and r.seconds < 60
    return held, (f"exit {r.rc} in {r.seconds:.0f} s; row: {' '.join(rows[0].split()[:8])}"
                  if rows else r.brief())


@case("2", "manifest.json a 2 GiB sparse file, then vdlib run (4 GiB limit)")
def manifest_sparse_run(ctx: Ctx):
    run = ctx.finished()
    _sparse(run / "manifest.json")
    return one_line(ctx.vdlib("run", ctx.params(), timeout=120), "manifest.json")


@case("2", "a recorded stage file (questions.jsonl) grown to a 2 GiB sparse file, then vdlib "
      "run: the stage reruns at once, within a 4 GiB limit")
def stage_record_sparse_run(ctx: Ctx):
    run = ctx.finished()
    questions = run / "iter_1" / "questions.jsonl"
    _sparse(questions)
    r = ctx.vdlib("run", ctx.params(), timeout=300)
    same = artifacts(run) == artifacts(ctx.reference / RUN)
    held = r.rc == 0 and not r.traceback and same and questions.stat().st_size < 1 << 20
    return held, (f"exit {r.rc} in {r.seconds:.0f} s; artifacts "
                  f"{'equal the reference' if same else 'differ'}" if r.rc == 0 else r.brief())


# ============================================================================ item 3


@case("3", "the run folder is a symbolic link to an empty folder elsewhere, then vdlib run")
def linked_run_folder(ctx: Ctx):
    elsewhere = ctx.work / "elsewhere"
    elsewhere.mkdir()
    (ctx.work / "out" / "t").mkdir(parents=True)
    (ctx.work / "out" / RUN).symlink_to(elsewhere)
    held, seen = one_line(ctx.vdlib("run", ctx.params(), timeout=180), "symbolic link")
    written = sorted(p.name for p in elsewhere.iterdir())
    return held and not written, f"{seen}; target holds {written or 'nothing'}"


@case("3", "the experiment folder is a symbolic link to an empty folder, then vdlib run")
def linked_experiment_folder(ctx: Ctx):
    elsewhere = ctx.work / "elsewhere"
    elsewhere.mkdir()
    (ctx.work / "out").mkdir()
    (ctx.work / "out" / "t").symlink_to(elsewhere)
    held, seen = one_line(ctx.vdlib("run", ctx.params(), timeout=180), "symbolic link")
    written = sorted(p.name for p in elsewhere.iterdir())
    return held and not written, f"{seen}; target holds {written or 'nothing'}"


def _timing_case(ctx: Ctx, damage: Callable[[Path], None]) -> tuple[Res, Path]:
    """A finished run whose metrics stage must rerun (metrics.json deleted) with a damaged
    timing.json: the stage writes the iteration's times again."""
    run = ctx.finished()
    (run / "iter_1" / "metrics.json").unlink()
    damage(run / "iter_1" / "timing.json")
    return ctx.vdlib("run", ctx.params(), timeout=120), run


@case("3", "iter_1/timing.json a link to someone's JSON file, then a resume that rewrites it")
def timing_link(ctx: Ctx):
    foreign = ctx.work / "foreign.json"
    foreign.write_text(json.dumps({"generate": 1.0, "note": FOREIGN}))
    kept = foreign.read_bytes()

    def damage(p: Path):
        p.unlink()
        p.symlink_to(foreign)
    r, run = _timing_case(ctx, damage)
    timing = run / "iter_1" / "timing.json"
    copied = any(FOREIGN.encode() in f.read_bytes() for f in run.rglob("*")
                 if f.is_file() and not f.is_symlink())
    held = (r.rc == 0 and not r.traceback and not copied and not timing.is_symlink()
            and foreign.read_bytes() == kept)
    return held, (f"exit {r.rc}; foreign content {'copied into' if copied else 'not in'} the "
                  f"run folder; timing.json {'still a link' if timing.is_symlink() else 'a file'}"
                  if r.rc == 0 else r.brief())


@case("3", "iter_1/timing.json replaced by a FIFO, then a resume that rewrites it")
def timing_fifo(ctx: Ctx):
    r, run = _timing_case(ctx, _fifo)
    timing = run / "iter_1" / "timing.json"
    held = r.rc == 0 and not r.traceback and timing.is_file() and not timing.is_symlink()
    return held, f"exit {r.rc}; timing.json a regular file again" if held else r.brief()


@case("3", "iter_1/timing.json truncated (a cut-short write), then a resume that rewrites it")
def timing_truncated(ctx: Ctx):
    def damage(p: Path):
        p.write_text(p.read_text()[:15])
    r, run = _timing_case(ctx, damage)
    try:
        json.loads((run / "iter_1" / "timing.json").read_text())
        parses = True
    except (ValueError, OSError):
        parses = False
    held = r.rc == 0 and not r.traceback and parses
    return held, f"exit {r.rc}; timing.json parses again" if held else r.brief()


# ============================================================================ item 4


@case("4", "vdlib run PARAMS(arms) --run-id try2")
def run_id_flag_with_arms(ctx: Ctx):
    held, seen = one_line(ctx.vdlib("run", ctx.params(), "--run-id", "try2", timeout=180),
                          "--run-id")
    made = sorted(str(p.relative_to(ctx.work / "out")) for p in (ctx.work / "out").glob("*/*"))
    return held and not made, f"{seen}; folders made: {made or 'none'}"


@case("4", "vdlib run PARAMS with a run_id key and arms")
def run_id_key_with_arms_run(ctx: Ctx):
    held, seen = one_line(ctx.vdlib("run", ctx.params(run_id="try2"), timeout=180), "run_id")
    made = sorted(str(p.relative_to(ctx.work / "out")) for p in (ctx.work / "out").glob("*/*"))
    return held and not made, f"{seen}; folders made: {made or 'none'}"


@case("4", "vdlib grid --dry-run on PARAMS with a run_id key and arms")
def run_id_key_with_arms_grid(ctx: Ctx):
    return one_line(ctx.vdlib("grid", ctx.params(run_id="try2"), "--dry-run", "--gpus", ""),
                    "run_id")


# ============================================================================ item 5


@case("5", "vdlib results on a file with two records of baseline seed 0 iteration 1")
def results_duplicate_records(ctx: Ctx):
    dup = {**GOOD_RESULTS, "records": [*GOOD_RESULTS["records"],
                                       {"arm": "baseline", "seed": 0, "iteration": 1,
                                        "self_bleu": 0.9, "vendi": 9.0}]}
    path, out = _results(ctx, dup)
    held, seen = one_line(ctx.vdlib("results", str(path), "--out", str(out)),
                          "records[1] and records[3]")
    return held and not out.exists(), seen


@case("5", "vdlib results on a file with the base model's record twice")
def results_duplicate_base(ctx: Ctx):
    data = {**GOOD_RESULTS, "records": [*GOOD_RESULTS["records"], GOOD_RESULTS["records"][0]]}
    path, out = _results(ctx, data)
    held, seen = one_line(ctx.vdlib("results", str(path), "--out", str(out)), "both base")
    return held and not out.exists(), seen


# ============================================================================ item 6


@case("6", "params: seed is an integer of 5,000 digits (beyond CPython's int-to-str limit)")
def yaml_huge_int(ctx: Ctx):
    return one_line(ctx.vdlib("params", "check", ctx.raw_params(f"seed: {'9' * 5000}\n")),
                    "seed")


@case("6", "params: scoring.tau_min: 1e999999")
def yaml_1e999999(ctx: Ctx):
    return one_line(ctx.vdlib("params", "check",
                              ctx.raw_params("scoring: {tau_min: 1e999999}\n")), "tau_min")


@case("6", "params: seed: 2026-02-30 (a date that does not exist)")
def yaml_bad_date(ctx: Ctx):
    return one_line(ctx.vdlib("params", "check", ctx.raw_params("seed: 2026-02-30\n")), "seed")


@case("6", "params: curriculum.num_questions an integer of 400 digits (beyond a float)")
def yaml_int_beyond_float(ctx: Ctx):
    return one_line(ctx.vdlib("params", "check",
                              ctx.raw_params(f"curriculum: {{num_questions: 1{'0' * 400}}}\n")),
                    "num_questions")


@case("6", "vdlib results on an empty file")
def results_empty(ctx: Ctx):
    path, out = _results(ctx, "")
    held, seen = one_line(ctx.vdlib("results", str(path), "--out", str(out)), "r.json")
    return held and not out.exists(), seen


@case("6", "vdlib results on a file with an empty records list")
def results_no_records(ctx: Ctx):
    path, out = _results(ctx, {"records": []})
    held, seen = one_line(ctx.vdlib("results", str(path), "--out", str(out)), "r.json")
    return held and not out.exists(), seen


@case("6", "vdlib results on a file holding NaN")
def results_nan(ctx: Ctx):
    data = json.dumps(GOOD_RESULTS).replace('"vendi": 4.0', '"vendi": NaN')
    path, out = _results(ctx, data)
    held, seen = one_line(ctx.vdlib("results", str(path), "--out", str(out)), "NaN")
    return held and not out.exists(), seen


@case("6", "vdlib results on a file holding 1e309 (reads as infinity) and 1e308 (means overflow)")
def results_extreme_values(ctx: Ctx):
    data = json.dumps(GOOD_RESULTS).replace('"vendi": 4.0', '"vendi": 1e308')[:-1] \
        + ', "card": 1e309}'
    path, out = _results(ctx, data)
    r = ctx.vdlib("results", str(path), "--out", str(out))
    held, seen = one_line(r, "r.json")
    infinity = any(b"Infinity" in p.read_bytes() for p in out.rglob("*") if p.is_file()) \
        if out.exists() else False
    return held and not out.exists() and not infinity, \
        seen + ("; Infinity written into the report" if infinity else "")


@case("6", "vdlib run --run-id with non-UTF-8 bytes (os.fsencode argv b'r\\xff1')")
def run_id_non_utf8(ctx: Ctx):
    r = ctx.vdlib("run", ctx.params(drop=("arms",)), b"--run-id", b"r\xff1", timeout=180)
    held, seen = one_line(r, "run_id")
    made = list((ctx.work / "out").glob("*/*"))
    return held and not made, f"{seen}; folders made: {len(made)}"


@case("6", "vdlib run --output-dir with non-UTF-8 bytes (b'out\\xfe')")
def output_dir_non_utf8(ctx: Ctx):
    r = ctx.vdlib("run", ctx.params(), b"--output-dir", os.fsencode(ctx.work) + b"/out\xfe",
                  timeout=180)
    held, seen = one_line(r, "output_dir")
    made = [p.name for p in ctx.work.iterdir() if p.name.startswith("out")]
    return held and not made, f"{seen}; made: {made or 'nothing'}"


def _interrupt(ctx: Ctx, params: Path, marker: str, timeout: float = 180) -> Res:
    """vdlib run PARAMS, Ctrl-C (SIGINT to its process group, as a terminal sends it) once a
    stderr line holds ``marker``."""
    start = time.monotonic()
    p = ctx.popen([PYTHON, "-m", "vdlib", "run", str(params)])
    err: list[str] = []

    def read():
        for line in p.stderr:
            err.append(line)
            if marker in line:
                time.sleep(0.5)  # inside the stage
                try:
                    os.killpg(p.pid, signal.SIGINT)
                except ProcessLookupError:
                    pass
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        out = p.stdout.read()
        p.wait(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        _killpg(p)
        p.wait()
        out, timed_out = "", True
    reader.join(timeout=10)
    return Res(None if timed_out else p.returncode, out, "".join(err), timed_out,
               time.monotonic() - start)


@case("6", "Ctrl-C inside a stage (the proposer's GRPO) of vdlib run")
def ctrl_c_inside_stage(ctx: Ctx):
    r = _interrupt(ctx, ctx.params(), "stage 1/6 proposer: started")
    held, seen = one_line(r, "interrupted; resume with the same command", rc=130)
    left = [p.name for p in (ctx.work / "out" / RUN).rglob(".*") if p.name != ".lock"]
    return held and not left, f"{seen}; working folders left: {left or 'none'}"


@case("6", "VDLIB_HEARTBEAT_S=inf vdlib run on a finished run")
def env_heartbeat_inf(ctx: Ctx):
    ctx.finished()
    r = ctx.vdlib("run", ctx.params(), env=ctx.env(VDLIB_HEARTBEAT_S="inf"))
    return one_line(r, "VDLIB_HEARTBEAT_S")


@case("6", "VDLIB_GRID_PORT_BASE=abc vdlib grid --dry-run")
def env_port_base_text(ctx: Ctx):
    r = ctx.vdlib("grid", ctx.params(), "--dry-run", "--gpus", "",
                  env=ctx.env(VDLIB_GRID_PORT_BASE="abc"))
    return one_line(r, "VDLIB_GRID_PORT_BASE")


@case("6", "VDLIB_WAIT_TIMEOUT_S=nan vdlib status")
def env_wait_timeout_nan(ctx: Ctx):
    (ctx.work / "out").mkdir()
    r = ctx.vdlib("status", str(ctx.work / "out"), env=ctx.env(VDLIB_WAIT_TIMEOUT_S="nan"))
    return one_line(r, "VDLIB_WAIT_TIMEOUT_S")


@case("6", "vdlib plan params/gpu/main_table.yaml --gpus nan")
def plan_flag_nan(ctx: Ctx):
    r = ctx.vdlib("plan", str(ctx.tree / "params" / "gpu" / "main_table.yaml"), "--gpus", "nan")
    return one_line(r, "--gpus")


@case("6", "vdlib plan --table FIFO")
def plan_table_fifo(ctx: Ctx):
    fifo = _fifo(ctx.work / "table.json")
    r = ctx.vdlib("plan", str(ctx.tree / "params" / "gpu" / "main_table.yaml"),
                  "--table", str(fifo), timeout=60)
    return one_line(r, "table.json")


@case("6", "vdlib run --stop-after inf")
def stop_after_inf(ctx: Ctx):
    ctx.finished()
    return one_line(ctx.vdlib("run", ctx.params(), "--stop-after", "inf"), "--stop-after")


# ============================================================================ item 7


@case("7", "params check: experiment '.hidden' (a leading dot)")
def name_leading_dot(ctx: Ctx):
    return one_line(ctx.vdlib("params", "check", ctx.params(experiment=".hidden")), "experiment")


@case("7", "params check: experiment with a newline ('a\\nb')")
def name_newline(ctx: Ctx):
    return one_line(ctx.vdlib("params", "check", ctx.params(experiment="a\nb")), "experiment")


@case("7", "params check: run_id 'manifest.json' (a name vdlib gives its own entries)")
def name_reserved_run_id(ctx: Ctx):
    return one_line(ctx.vdlib("params", "check", ctx.params(run_id="manifest.json",
                                                           drop=("arms",))), "run_id")


@case("7", "params check: experiment 'grid' (the grid's own folder)")
def name_reserved_experiment(ctx: Ctx):
    return one_line(ctx.vdlib("params", "check", ctx.params(experiment="grid")), "experiment")


@case("7", "vdlib run --run-id with an escape character ('a\\x1b[2Jb')")
def run_id_control_char(ctx: Ctx):
    r = ctx.vdlib("run", ctx.params(drop=("arms",)), "--run-id", "a\x1b[2Jb", timeout=180)
    held, seen = one_line(r, "run_id")
    made = list((ctx.work / "out").glob("*/*"))
    return held and not made, f"{seen}; folders made: {len(made)}"


@case("7", "vdlib status with a hand-made run folder whose name holds a newline and a forged row")
def status_forged_row(ctx: Ctx):
    ctx.finished()
    forged = ctx.work / "out" / "t" / "x\n| t | forged | done | 1 of 1 | 6 of 6 | - | now |"
    shutil.copytree(ctx.reference / RUN, forged, symlinks=True)
    r = ctx.vdlib("status", str(ctx.work / "out"))
    rows = [ln for ln in r.out.splitlines() if re.match(r"\|\s*t\s*\|", ln)]
    spoof = [ln for ln in r.out.splitlines() if re.match(r"\|\s*t\s*\|\s*forged", ln)]
    held = r.rc == 0 and not r.traceback and len(rows) == 2 and not spoof
    return held, f"exit {r.rc}; {len(rows)} rows of experiment t, forged row " \
                 f"{'shown' if spoof else 'not shown'}" if not r.timed_out else r.brief()


@case("7", "vdlib grid --seeds 4294967296 --dry-run, params without arms")
def grid_seed_out_of_range(ctx: Ctx):
    r = ctx.vdlib("grid", ctx.params(drop=("arms",)), "--seeds", "4294967296", "--dry-run",
                  "--gpus", "")
    return one_line(r, "seed")


@case("7", "vdlib grid --seeds 0 .. 149 --dry-run (150 seeds)")
def grid_too_many_seeds(ctx: Ctx):
    r = ctx.vdlib("grid", ctx.params(), "--seeds", *map(str, range(150)), "--dry-run",
                  "--gpus", "")
    return one_line(r, "seeds")


@case("7", "vdlib grid --stop-after nan --dry-run")
def grid_stop_after_nan(ctx: Ctx):
    r = ctx.vdlib("grid", ctx.params(), "--stop-after", "nan", "--dry-run", "--gpus", "")
    return one_line(r, "--stop-after")


@case("7", "vdlib params check on a FIFO")
def params_fifo(ctx: Ctx):
    fifo = _fifo(ctx.work / "p.yaml")
    return one_line(ctx.vdlib("params", "check", str(fifo), timeout=30), "FIFO")


@case("7", "vdlib run <(...): a process substitution (a pipe, /dev/fd/N) that stays open")
def params_process_substitution(ctx: Ctx):
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, b"profile: tiny\n")  # the writer has more to say, and never ends
        r = ctx.vdlib("run", f"/dev/fd/{read_end}", timeout=30, pass_fds=(read_end,))
    finally:
        os.close(read_end)
        os.close(write_end)
    return one_line(r, "pipe")


# ============================================================================ held


@case("held", "SIGINT inside a stage, then the same command: the artifacts equal an "
      "uninterrupted run's")
def sigint_then_resume(ctx: Ctx):
    params = ctx.params()
    first = _interrupt(ctx, params, "stage 3/6 score: started")
    second = ctx.vdlib("run", params, timeout=300)
    same = artifacts(ctx.work / "out" / RUN) == artifacts(ctx.reference / RUN)
    held = first.rc not in (0, None) and second.rc == 0 and same  # 130 itself: item 6's case
    return held, (f"interrupted: exit {first.rc}; resumed: exit {second.rc}; artifacts "
                  f"{'equal' if same else 'differ from'} the reference")


@case("held", "two vdlib run of one params file started 50 ms apart: the loser exits 73")
def two_runs_at_once(ctx: Ctx):
    params = ctx.params()
    start = time.monotonic()
    a = ctx.popen([PYTHON, "-m", "vdlib", "run", str(params)])
    time.sleep(0.05)
    b = ctx.popen([PYTHON, "-m", "vdlib", "run", str(params)])
    loser = None
    while time.monotonic() - start < 240 and loser is None:
        loser = next((p for p in (a, b) if p.poll() is not None), None)
        time.sleep(0.1)
    for p in (a, b):
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGINT)
    res = [ctx.wait(p, 120, start) for p in (a, b)]
    if loser is None:
        return False, "neither run ended within 240 s"
    lr = res[0] if loser is a else res[1]
    held, seen = one_line(lr, "pid", rc=73)
    return held, f"first to end: {seen}"


def _stage_file_case(ctx: Ctx, damage: Callable[[Path], None]) -> tuple[bool, str]:
    run = ctx.finished()
    metrics = run / "iter_1" / "metrics.json"
    damage(metrics)
    r = ctx.vdlib("run", ctx.params(), timeout=120)
    same = artifacts(run) == artifacts(ctx.reference / RUN)
    held = r.rc == 0 and not r.traceback and same and metrics.is_file() \
        and not metrics.is_symlink()
    return held, (f"exit {r.rc}; metrics stage redone, artifacts "
                  f"{'equal' if same else 'differ from'} the reference" if not r.timed_out
                  else r.brief())


@case("held", "iter_1/metrics.json replaced by a FIFO: the stage is redone, no hang")
def stage_file_fifo(ctx: Ctx):
    return _stage_file_case(ctx, _fifo)


@case("held", "iter_1/metrics.json replaced by a link to a copy elsewhere: redone, the copy kept")
def stage_file_link(ctx: Ctx):
    elsewhere = ctx.work / "elsewhere.json"

    def damage(p: Path):
        shutil.copy(p, elsewhere)
        p.unlink()
        p.symlink_to(elsewhere)
    kept_before = None

    def damage_and_keep(p: Path):
        nonlocal kept_before
        damage(p)
        kept_before = elsewhere.read_bytes()
    held, seen = _stage_file_case(ctx, damage_and_keep)
    kept = elsewhere.read_bytes() == kept_before
    return held and kept, f"{seen}; link target {'untouched' if kept else 'changed'}"


@case("held", "iter_1/metrics.json replaced by a folder: the stage is redone")
def stage_file_folder(ctx: Ctx):
    def damage(p: Path):
        p.unlink()
        p.mkdir()
        (p / "x").write_text("x")
    return _stage_file_case(ctx, damage)


@case("held", "OPENAI_API_KEY set for a whole run: the key is in no file of the run folder and "
      "not in its log")
def api_key_not_in_artifacts(ctx: Ctx):
    found = [str(p.relative_to(ctx.reference)) for p in ctx.reference.rglob("*")
             if p.is_file() and SECRET.encode() in p.read_bytes()]
    log = (ctx.reference.parent / "reference.log").read_text(errors="replace")
    in_log = SECRET in log
    held = not found and not in_log and (ctx.reference / RUN / "iter_1" / "metrics.json").is_file()
    return held, f"key found in {found or 'no file'}; in the log: {in_log}"


_NOTEBOOK = {"nbformat": 4, "nbformat_minor": 5,
             "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                         "language": "python"}},
             "cells": [{"cell_type": "code", "id": "p", "metadata": {"tags": ["parameters"]},
                        "execution_count": None, "outputs": [],
                        "source": "experiment = 'x'\nvocab_dropout = {}\n"},
                       {"cell_type": "code", "id": "b", "metadata": {}, "execution_count": None,
                        "outputs": [], "source": "print(vocab_dropout['format_strings'][-1])\n"}]}


@case("held", "vdlib notebooks run with params whose strings are code (papermill parameter "
      "injection), OPENAI_API_KEY set: inert, key not in the executed copy")
def papermill_injection(ctx: Ctx):
    nbs, pdir = ctx.work / "nbs", ctx.work / "pdir" / "tiny"
    nbs.mkdir()
    pdir.mkdir(parents=True)
    (nbs / "00_quickstart.ipynb").write_text(json.dumps(_NOTEBOOK))
    pwned = ctx.work / "PWNED"
    hostile = [f"'''\nopen({str(pwned)!r}, 'w').write('1')\n'''",
               f"\"); open({str(pwned) + '2'!r}, 'w')  #",
               "{__import__('os').system('touch " + str(pwned) + "3')}"]
    params = {**TINY, "vocab_dropout": {"format_strings": ["<question>", *hostile]}}
    (pdir / "quickstart.yaml").write_text(yaml.safe_dump(params))
    r = ctx.vdlib("notebooks", "run", "--profile", "tiny", "--only", "00_quickstart",
                  "--notebooks-dir", str(nbs), "--params-dir", str(ctx.work / "pdir"),
                  "--output-dir", str(ctx.work / "out"), timeout=240,
                  env=ctx.env(OPENAI_API_KEY=SECRET))
    ran = list((ctx.work / "out").rglob("00_quickstart*.ipynb"))
    text = ran[0].read_text() if ran else ""
    hit = sorted(p.name for p in ctx.work.glob("PWNED*"))
    held = r.rc == 0 and bool(ran) and not hit and SECRET not in text and "touch" in text
    return held, (f"exit {r.rc}; executed copy {'written' if ran else 'missing'}; injected code "
                  f"{'ran: ' + str(hit) if hit else 'inert'}; key in the copy: {SECRET in text}")


_POLL = """
import contextlib, io, sys, time
from vdlib.app.cli import main
out, stop = sys.argv[1], sys.argv[2]
import os
polls = bad = 0
while not os.path.exists(stop):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        main(["status", out])
    text = buf.getvalue()
    polls += 1
    if "damaged" in text or "unreadable" in text:
        bad += 1
        print("BAD", text, file=sys.stderr)
print(polls, bad)
"""


@case("held", "vdlib status polled in a loop during a whole run: never damaged or unreadable")
def status_during_run(ctx: Ctx):
    params = ctx.params()
    (ctx.work / "out").mkdir()
    stop = ctx.work / "stop"
    start = time.monotonic()
    poller = ctx.popen([PYTHON, "-c", _POLL, str(ctx.work / "out"), str(stop)])
    r = ctx.vdlib("run", params, timeout=300)
    stop.touch()
    pr = ctx.wait(poller, 60, start)
    try:
        polls, bad = map(int, pr.out.split()[-2:])
    except ValueError:
        return False, f"poller: {pr.brief()}"
    held = r.rc == 0 and polls >= 5 and bad == 0 and not pr.traceback
    return held, f"run exit {r.rc}; {polls} polls, {bad} showing damage"


@case("held", "vdlib run with a changed config on a finished folder: refused naming the key, "
      "nothing rewritten")
def run_changed_config(ctx: Ctx):
    run = ctx.finished()
    before = snapshot(run)
    r = ctx.vdlib("run", ctx.params(curriculum__num_questions=6))
    held = (r.rc == 2 and not r.traceback and "curriculum.num_questions: 4 -> 6" in r.err
            and snapshot(run) == before)  # the keys that differ: one line each
    return held, (f"exit {r.rc}: {' '.join(r.error_lines()[:2])[:200]}; folder "
                  f"{'unchanged' if snapshot(run) == before else 'changed'}")


# ============================================================================ runner


def build_reference(tree: Path, work: Path, shim: Path) -> Path:
    """The finished tiny run every case copies, run by ``tree``'s code with OPENAI_API_KEY set
    (its log kept beside it for the key case)."""
    ctx = Ctx(tree, work, None, shim)
    r = ctx.vdlib("run", ctx.params(out="ref"), timeout=600, env=ctx.env(OPENAI_API_KEY=SECRET))
    (work / "reference.log").write_text(r.out + r.err)
    if r.rc != 0 or not (work / "ref" / RUN / "iter_1" / "metrics.json").is_file():
        raise SystemExit(f"the reference run failed ({r.brief()}); see {work}/reference.log")
    return work / "ref"


def run_case(c: Case, tree: Path, reference: Path, shim: Path, keep: bool = False) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"rt-{c.name}-"))
    start = time.monotonic()
    try:
        held, seen = c.fn(Ctx(tree, work, reference, shim))
    except Exception as e:  # noqa: BLE001 - a case that cannot run is reported, not hidden
        held, seen = False, f"case error: {type(e).__name__}: {str(e)[:200]}"
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    return {"case": c.name, "item": c.item, "what": c.what, "held": bool(held),
            "observation": " ".join(str(seen).split()), "seconds": round(time.monotonic() - start,
                                                                         1)}


def run_all(tree: Path, only: list[str] | None = None, jobs: int = 2,
            log: Callable[[str], None] = print) -> list[dict]:
    tree = tree.resolve()
    base = Path(tempfile.mkdtemp(prefix="rt-base-"))
    try:
        shim = base / "shim"
        shim.mkdir()
        (shim / "sitecustomize.py").write_text(_SHIM)
        log(f"reference run with {tree} ...")
        reference = build_reference(tree, base, shim)
        chosen = [c for c in CASES if not only or c.name in only]
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(run_case, c, tree, reference, shim) for c in chosen]
            results = []
            for f in futures:
                row = f.result()
                log(f"{'held' if row['held'] else 'NOT HELD':8} {row['item']:4} {row['case']}: "
                    f"{row['observation']} ({row['seconds']} s)")
                results.append(row)
        return results
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _cell(row: dict, width: int = 150) -> str:
    seen = re.sub(r"/tmp/rt-[\w-]+?-\w{8}/", ".../", row["observation"])
    seen = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in seen)
    seen = seen if len(seen) <= width else seen[:width - 3] + "..."
    return ("held" if row["held"] else "**not held**") + ": " + seen.replace("|", "\\|")


def markdown_table(before: dict, after: dict) -> str:
    """docs/reliability.md's red-team table from the runner's two JSONs."""
    old = {r["case"]: r for r in before["results"]}
    lines = ["| case | item | what the user does | before (8da197a) | after |",
             "|---|---|---|---|---|"]
    for r in after["results"]:
        b = old.get(r["case"])
        lines.append(f"| `{r['case']}` | {r['item']} | {r['what'].replace('|', '/')} | "
                     f"{_cell(b) if b else '-'} | {_cell(r, 90)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tree", type=Path, default=ROOT, help="the vdlib checkout to test")
    p.add_argument("--out", type=Path, help="write the results JSON here (with --only, an "
                   "existing file keeps its other rows)")
    p.add_argument("--only", nargs="+", help="case names")
    p.add_argument("--jobs", type=int, default=2, help="cases run at once")
    p.add_argument("--table", nargs=2, type=Path, metavar=("BEFORE", "AFTER"),
                   help="print the Markdown table of two results JSONs and run nothing")
    args = p.parse_args(argv)
    if args.table:
        before, after = (json.loads(f.read_text()) for f in args.table)
        sys.stdout.write(markdown_table(before, after))
        return 0
    start = time.monotonic()
    results = run_all(args.tree, args.only, args.jobs)
    print(f"{sum(r['held'] for r in results)} of {len(results)} run held "
          f"({time.monotonic() - start:.0f} s)")
    if args.out and args.only and args.out.exists():  # rerun cases replace their rows
        rows = {r["case"]: r for r in json.loads(args.out.read_text())["results"]}
        rows.update({r["case"]: r for r in results})
        results = [rows[c.name] for c in CASES if c.name in rows]
    held = sum(r["held"] for r in results)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"tree": str(args.tree), "held": held,
                                        "cases": len(results), "results": results},
                                       indent=1) + "\n")
    return 0 if held == len(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
