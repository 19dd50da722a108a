"""``vdlib plan PARAMS --measure``: one iteration's figures on the GPU at hand, as a cost-table
entry (the format of ``vdlib/data/cost_table.json``'s ``entries``).

**Written in a session without a GPU: not yet run on one** (docs/SCALING.md, "Planning a run:
vdlib plan", says what the first run should check). It runs the params' first arm for one
iteration through vdlib's own loop (:func:`vdlib.loop.coevolution.run`) in this process, then the
final solver's evaluation on ``eval_limit`` items per benchmark, and records per stage:

- seconds (the loop's ``timing.json``), tokens generated through vLLM (``vllm.LLM.generate`` in
  this process, vdlib's server engine over HTTP), TRL's training time
  (``transformers.Trainer.train``), vLLM engine starts (``vdlib.engines.vllm_backend.build_llm``);
- the peak memory of every visible GPU (``nvidia-smi`` every second: every process on the card,
  vLLM servers included).

``dummy_weights``: a random-init checkpoint of the model's shape (the cost table's shape as a
``config.json``, the tokenizer from ``tokenizer``), saved once in the work folder. Such a model
writes no parseable question, which would leave scoring and the solver without work, so the
generated questions are replaced by real ones (GSM8K test items from ``bench_dir``) before
scoring, and the curriculum by real problems with their answers before the solver: each stage
does its real work at the params' shapes, with every sample running to its token limit (the
worst case). The proposer reward's answers then have no valid rollout to answer; the entry
prices them at the scoring rate (``reward_tokens_per_s``) and says so.

``gpus_per_run`` 2: the paper's topology in one process (docs/SCALING.md, "Two GPUs"): the
trainer on GPU 0, a vLLM server on each GPU (``engine.backend: server``) for the reward,
generation and scoring; the solver trains on GPU 0 (the loop trains on both only under
``accelerate launch``, which this measurement does not use; the entry says so).
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any

from vdlib.app.plan_meter import Meter, check_idle_gpus, instrument, machine_gpus, time_calls
from vdlib.app.plan_table import PlanError, load_table, resolve_shape

__all__ = ["measure", "time_calls"]

logger = logging.getLogger(__name__)


def _dummy_checkpoint(model: str, tokenizer: str | None, work: Path) -> tuple[Path, str]:
    """A random-init bf16 checkpoint of ``model``'s shape with ``tokenizer``'s files; returns
    the folder and the SHA-256 of its tokenizer.json."""
    import hashlib

    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen3Config

    if not tokenizer or not (Path(tokenizer) / "tokenizer.json").is_file():
        raise PlanError("--dummy-weights needs --tokenizer DIR holding the model's tokenizer.json "
                        "and tokenizer_config.json (Qwen3's: ../shared/tools/qwen3-tokenizer DIR)")
    shape = resolve_shape(model, load_table())
    folder = work / f"dummy-{shape.name}"
    sha = hashlib.sha256((Path(tokenizer) / "tokenizer.json").read_bytes()).hexdigest()
    if (folder / "config.json").is_file():
        return folder, sha
    kwargs = dict(vocab_size=shape.vocab, hidden_size=shape.hidden,
                  num_hidden_layers=shape.layers, num_attention_heads=shape.heads,
                  num_key_value_heads=shape.kv_heads, head_dim=shape.head_dim,
                  intermediate_size=shape.intermediate, tie_word_embeddings=shape.tied,
                  max_position_embeddings=8192)
    config = Qwen3Config(**kwargs) if shape.qk_norm else LlamaConfig(**kwargs)
    with torch.device("cuda"):
        net = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    net.save_pretrained(tmp)
    del net
    torch.cuda.empty_cache()
    for f in Path(tokenizer).iterdir():
        if f.is_file() and (f.name.startswith("tokenizer") or f.suffix in (".txt", ".model")
                            or f.name in ("special_tokens_map.json", "vocab.json")):
            shutil.copy2(f, tmp / f.name)
    tmp.rename(folder)
    return folder, sha


def _real_problems(bench_dir: Path) -> list[tuple[str, str]]:
    path = bench_dir / "gsm8k" / "test.jsonl"
    if not path.is_file():
        raise PlanError(f"--dummy-weights gives scoring and the solver real questions from "
                        f"{path}; not found (give --bench-dir, e.g. ../shared/benchmarks)")
    rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    return [(r["question"], r["answer"].split("####")[-1].strip()) for r in rows]


#: Benchmarks the evaluation's rate is measured on, where ``bench_dir`` holds them.
_EVAL_BENCHMARKS = ("gsm8k", "math500", "amc23", "aime24", "aime25", "minerva")


def _measured_config(params: str, work: Path, gpus_per_run: int, eval_limit: int,
                     bench_dir: Path, steps: int | None = None,
                     questions: int | None = None) -> Any:
    """The params' first arm, one iteration, one seed, in ``work``; offline metrics (MiniLM,
    no epiplexity or NLI: their models and the OpenAI embedder are not timed); evaluation of
    the params' benchmarks that ``bench_dir`` holds, ``eval_limit`` items each, one run.

    ``steps`` (GRPO global batches of each role) and ``questions`` (K) cut the iteration to a few
    steps at the params' batch shapes: the table's figures are per step and per token, so a
    shorter iteration measures the same rates (the paper's K = 8,000 would take hours at 4B).
    Neither raises what the params have; ``None`` keeps the params' value."""
    from vdlib.config import load_params, to_dict
    from vdlib.loop.arms import arm_params

    base = to_dict(load_params(params))
    arm = base["arms"][0] if base["arms"] else None
    base.update(iterations=1, seed=0, seeds=[0], output_dir=str(work / "runs"),
                experiment="plan_measure", run_id=None, arms=[], tracking="none")
    for role in ("proposer", "solver"):
        if steps is not None:
            base[role]["max_steps"] = min(base[role]["max_steps"], steps)
    if questions is not None:
        k = min(base["curriculum"]["num_questions"], questions)
        base["curriculum"]["num_questions"] = k
        base["curriculum"]["batch_size"] = min(base["curriculum"]["batch_size"], k)
    base["metrics"].update(embedder="minilm", extra=[])
    here = [b for b in base["evaluation"]["benchmarks"]
            if b in _EVAL_BENCHMARKS and (bench_dir / b / "test.jsonl").is_file()]
    base["evaluation"].update(limit=eval_limit, runs=1, ood_benchmarks=[], judge=False,
                              benchmarks=here or ["gsm8k"], data_dir=str(bench_dir))
    if gpus_per_run > 1:
        base["engine"].update(backend="server",
                              server_gpus=[str(i) for i in range(gpus_per_run)])
        base["model"]["device"] = "cuda:0"
    # the measurement's own topology, one process (vdlib.loop.gpu_count accepts it)
    base["launcher"]["gpus_per_run"] = gpus_per_run
    return load_params(arm_params(base, arm) if arm else base)



def measure(params: str, *, card: str, out: str, work: str = "/tmp/vdlib_plan_measure",
            dummy_weights: bool = False, tokenizer: str | None = None, gpus_per_run: int = 1,
            bench_dir: str = ".bench", eval_limit: int = 64, steps: int | None = None,
            questions: int | None = None, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """Measure one iteration of ``params`` here and write its cost-table entry to ``out``.

    ``skip`` (with ``dummy_weights``): stages replaced by stand-ins that write their outputs
    without their work (:func:`_skip_stage`), to measure the others again without paying for
    them; the entry lists them under ``skipped_stages`` and holds no figure for them."""
    bad = [s for s in skip if s not in SKIPPABLE]
    if bad:
        raise PlanError(f"--skip {','.join(bad)}: not a stage; allowed: {', '.join(SKIPPABLE)}")
    if skip and not dummy_weights:
        raise PlanError("--skip needs --dummy-weights (a skipped training stage's model is the "
                        "random-init checkpoint)")
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not torch.cuda.is_available():
        raise PlanError("vdlib plan --measure needs a GPU (CUDA); this machine has none. Run it "
                        "on the card to be measured; `vdlib plan PARAMS` itself needs none")
    name = torch.cuda.get_device_name(0)
    found = next((c for c in ("h100", "h200") if c in name.lower()), name)
    if found != card:
        raise PlanError(f"--card {card}, but this machine's GPU 0 is {name!r}")
    if machine_gpus(torch) < gpus_per_run:
        raise PlanError(f"--gpus-per-run {gpus_per_run}: this machine has "
                        f"{machine_gpus(torch)} GPU(s)")
    from dataclasses import replace

    import vllm

    from vdlib.config import layout
    from vdlib.experiments.evaluate import evaluate_checkpoint
    from vdlib.loop import coevolution
    from vdlib.loop.progress import RunPaused
    from vdlib.utils.artifacts import atomic_write_text

    work_dir = Path(work)
    work_dir.mkdir(parents=True, exist_ok=True)
    cfg = _measured_config(params, work_dir, gpus_per_run, eval_limit, Path(bench_dir),
                           steps=steps, questions=questions)
    sha = None
    table = original = coevolution.STAGE_TABLE
    if dummy_weights:
        folder, sha = _dummy_checkpoint(cfg.model.proposer, tokenizer, work_dir)
        cfg = replace(cfg, model=replace(cfg.model, proposer=str(folder), solver=None))
        table = _real_work_table(_real_problems(Path(bench_dir)),
                                 max(cfg.solver.max_steps * cfg.solver.global_batch_size, 64),
                                 skip=skip, checkpoint=folder,
                                 num_questions=cfg.curriculum.num_questions)
    shape = resolve_shape(cfg.model.proposer, load_table())
    meter = Meter()
    prior = _prior_entry(Path(out), params, work_dir)
    if prior is not None:  # the same measurement, stopped: its counters go on
        meter.load(prior["raw"])
        if prior.get("error"):  # the stage that failed runs again, from clean counters
            meter.forget(str(prior["error"]).split(":", 1)[0])
        logger.info("--measure: going on from %s (%s)", out, prior.get("partial")
                    or f"after {prior['error']}")
    check_idle_gpus(gpus_per_run)
    instrument(meter)
    run_dir = layout.run_path(cfg)

    def save(error: str | None, partial: str | None = None) -> dict[str, Any]:
        entry = _entry(cfg, run_dir, meter, shape.name, card, gpus_per_run, error,
                       dummy_weights, skip)
        entry.update(params=params, vllm_version=vllm.__version__, dummy_weights=dummy_weights,
                     tokenizer_sha256=sha, card_name=name)
        if partial:  # what finished so far; the same command goes on from there
            entry["partial"] = partial
        entry["raw"] = {"work": str(work_dir.resolve()), **meter.dump()}
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(Path(out), json.dumps(entry, indent=1) + "\n")
        return entry

    def on_stage(t: int, stage: str) -> None:
        if meter.stage != "setup":
            save(None, partial=f"stopped in {stage} (the stages before it finished)")
        meter.stage = stage

    meter.start()
    error = partial = None
    coevolution.STAGE_TABLE = table
    try:
        coevolution.run(cfg, on_stage=on_stage, force=prior is None)
        if "evaluate" not in skip:
            save(None, partial="stopped in evaluate (the iteration finished)")
            meter.stage = "evaluate"
            start = time.perf_counter()
            evaluate_checkpoint(layout.role_model_dir(run_dir, 1, "solver"), cfg,
                                work_dir / "evaluation")
            meter.add("seconds", time.perf_counter() - start)
    except RunPaused as e:  # $VDLIB_STOP_AT: the same command goes on from here
        partial = f"paused: {e}"
    except Exception as e:  # noqa: BLE001 - a stage that does not fit is a result
        error = f"{meter.stage}: {type(e).__name__}: {e}"
        logger.exception("vdlib plan --measure stopped in %s", meter.stage)
    finally:
        coevolution.STAGE_TABLE = original
        meter.stop()
    entry = save(error, partial)
    logger.info("wrote %s%s", out, f" (stopped: {error or partial})" if error or partial else "")
    return entry


def _prior_entry(out: Path, params: str, work: Path) -> dict[str, Any] | None:
    """``out`` when it is a partial entry of this measurement (same params, same work folder,
    whose run folder the loop resumes), else None (a new measurement)."""
    try:
        entry = json.loads(out.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    raw = entry.get("raw") if isinstance(entry, dict) else None
    if ((entry.get("partial") or entry.get("error")) and isinstance(raw, dict)
            and entry.get("params") == params and raw.get("work") == str(work.resolve())):
        return entry
    return None


#: Stages ``--skip`` may replace by a stand-in (the evaluation is skipped by ``evaluate``).
SKIPPABLE = ("proposer", "generate", "score", "solver", "metrics", "evaluate")


def _skip_stage(name: str, problems: list[tuple[str, str]], k: int,
                checkpoint: Path) -> Any:
    """A stand-in for a stage that ``--skip`` leaves out: it writes the stage's outputs without
    its work (a training stage's model is ``checkpoint``, hard-linked; generation's questions
    are K real problems; scoring gives each acc 0.5), marked ``skipped``, so the later stages
    run on inputs of the same shape and the entry leaves the stage out."""
    from vdlib.utils.artifacts import atomic_write_json, read_jsonl, write_jsonl

    note = {"skipped": "vdlib plan --measure --skip: not measured in this run"}

    def model(target: Path) -> None:
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(checkpoint, target, copy_function=_link_or_copy)

    def run(store: Any, t: int, out: Path) -> None:
        if name == "proposer":
            write_jsonl(out / "proposer_rollouts.jsonl", [])
            atomic_write_json(out / "proposer_train.json", note)
            model(out / "proposer_model")
        elif name == "generate":
            write_jsonl(out / "generated.jsonl", [
                {"index": i, "question": q, "answer": a, "valid": True, "text": q, **note}
                for i, (q, a) in enumerate(problems[j % len(problems)] for j in range(k))])
        elif name == "score":
            rows = read_jsonl(out / "generated.jsonl")
            for r in rows:
                r.update(solver_answers=[], majority=r["answer"], acc=0.5, proposer_agrees=True)
            write_jsonl(out / "questions.jsonl", rows)
        elif name == "solver":
            atomic_write_json(out / "solver_train.json", note)
            model(out / "solver_model")
        elif name == "metrics":
            atomic_write_json(out / "metrics.json", note)

    return run


def _link_or_copy(src: str, dst: str) -> None:
    import os

    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _real_work_table(problems: list[tuple[str, str]], solver_rows: int,
                     skip: tuple[str, ...] = (), checkpoint: Path | None = None,
                     num_questions: int = 0) -> tuple[Any, ...]:
    """The loop's stage table for dummy weights, whose text never parses: generation does its
    work and then hands scoring real questions (GSM8K's, each valid), and the filter hands the
    solver ``solver_rows`` real problems, so every stage works at the params' shapes. Changed
    inside the stages, before the loop records their outputs, so a resume finds them intact.
    The stages in ``skip`` are stand-ins (:func:`_skip_stage`) writing ``num_questions``
    questions and ``checkpoint`` as a trained model."""
    from dataclasses import replace

    from vdlib.loop import stages
    from vdlib.utils.artifacts import read_jsonl, write_jsonl

    def generate(store: Any, t: int, out: Path) -> None:
        stages.generate(store, t, out)
        records = read_jsonl(out / "generated.jsonl")
        for i, r in enumerate(records):
            q, a = problems[i % len(problems)]
            r.update(question=q, answer=a, valid=True)
        write_jsonl(out / "generated.jsonl", records)

    def curriculum(store: Any, t: int, out: Path) -> None:
        write_jsonl(out / "curriculum.jsonl", [
            {"question": q, "answer": a, "acc": 0.5, "proposer_answer": a, "majority": None,
             "mask_seed": None}
            for q, a in (problems[i % len(problems)] for i in range(solver_rows))])

    runs = {"generate": generate, "curriculum": curriculum}
    for name in skip:
        if name != "evaluate":
            runs[name] = _skip_stage(name, problems, num_questions, checkpoint)
    return tuple(replace(s, run=runs.get(s.name, s.run)) for s in stages.STAGE_TABLE)


def _train_tokens(path: Path, per_step: int) -> tuple[float, int]:
    hist = [h for h in json.loads(path.read_text())["log_history"]
            if "completions/mean_length" in h]
    return sum(h["completions/mean_length"] for h in hist) * per_step, len(hist)


def _entry(cfg: Any, run_dir: Path, meter: Meter, shape: str, card: str, gpus: int,
           error: str | None, dummy: bool, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The cost-table entry of what was measured (stages that did not finish, and the stages
    in ``skip``, are left out)."""
    from vdlib.config import layout
    from vdlib.utils.artifacts import read_jsonl

    it = layout.iteration_dir(run_dir, 1)
    scored = read_jsonl(it / "questions.jsonl") if (it / "questions.jsonl").exists() else []
    valid = sum(1 for r in scored if r.get("valid")) or cfg.curriculum.num_questions
    timing = json.loads((it / "timing.json").read_text()) if (it / "timing.json").exists() else {}
    timing = {s: v for s, v in timing.items() if s not in skip}
    c = meter.c
    src = f"vdlib plan {cfg.experiment} --measure"
    stages: dict[str, Any] = {}
    lengths: dict[str, Any] = {"source": f"{src}: tokens counted per stage"}
    k, m = cfg.curriculum.num_questions, cfg.scoring.num_solver_samples
    p_roll = cfg.proposer.global_batch_size * cfg.proposer.num_generations
    s_roll = cfg.solver.global_batch_size * cfg.solver.num_generations
    for stage in ("generate", "score"):
        if stage in timing and c[stage]["tokens"]:
            work_s = timing[stage] - c[stage]["engine_start_s"]
            stages[stage] = {"tokens_per_s": round(c[stage]["tokens"] / work_s, 1),
                             "startup_s": round(c[stage]["engine_start_s"], 2),
                             "source": f"{src}: tokens / (stage seconds - engine starts)"}
    if "generate" in stages:
        lengths["question"] = round(c["generate"]["tokens"] / k, 1)
    if "score" in stages:
        lengths["answer"] = round(c["score"]["tokens"] / (valid * m), 1)
    if "proposer" in timing and (it / "proposer_train.json").exists():
        rollout, steps = _train_tokens(it / "proposer_train.json", p_roll)
        reward = max(c["proposer"]["tokens"] - rollout, 0.0)
        train_s = c["proposer"]["train_s"]
        fig = {"step_s": round(train_s / steps, 2),
               "startup_s": round(timing["proposer"] - train_s, 2),
               "source": f"{src}: Trainer.train seconds / steps"}
        lengths["proposer_rollout"] = round(rollout / (steps * p_roll), 2)
        if reward > 0.05 * rollout and "answer" in lengths:
            fig["step_tokens"] = round((rollout + reward) / steps)
            lengths["reward_answers_per_rollout"] = round(
                reward / lengths["answer"] / (steps * p_roll), 2)
        elif "score" in stages:  # no valid rollout to answer (dummy weights)
            fig.update(step_tokens=round(rollout / steps),
                       reward_tokens_per_s=stages["score"]["tokens_per_s"])
            fig["source"] += "; the reward's answers priced at the scoring rate (none measured)"
            lengths["reward_answers_per_rollout"] = float(m)
        stages["proposer"] = fig
    if "solver" in timing and (it / "solver_train.json").exists():
        rollout, steps = _train_tokens(it / "solver_train.json", s_roll)
        if steps:
            train_s = c["solver"]["train_s"]
            stages["solver"] = {"step_s": round(train_s / steps, 2),
                                "step_tokens": round(rollout / steps),
                                "startup_s": round(timing["solver"] - train_s, 2),
                                "source": f"{src}: Trainer.train seconds / steps"}
            lengths["solver_rollout"] = round(rollout / (steps * s_roll), 2)
    if "metrics" in timing:
        stages["metrics"] = {"s_per_question": round(timing["metrics"] / k, 5),
                             "source": f"{src}: timing.json"}
    if c["evaluate"]["tokens"] and "evaluate" not in skip:
        ev = c["evaluate"]
        stages["evaluate"] = {"tokens_per_s": round(ev["tokens"] / (ev["seconds"]
                                                                   - ev["engine_start_s"]), 1),
                              "startup_s": round(ev["engine_start_s"], 2),
                              "source": f"{src}: evaluation on {cfg.evaluation.limit} items a "
                                        "benchmark, one run"}
    lengths["valid_fraction"] = 1.0 if dummy else round(valid / k, 3)
    if dummy:
        lengths["source"] += ("; dummy weights: every output at its token limit, the questions "
                              "scored and trained on are GSM8K's (valid fraction 1)")
    peak = {s: {str(g): v for g, v in sorted(p.items())} for s, p in meter.peak.items()
            if s not in skip}
    lifetime = cfg.engine.lifetime if cfg.engine.backend == "vllm" else "stage"
    return {
        "id": f"{shape}@{card}/{cfg.engine.backend}-{lifetime}/"
              + (f"{gpus}gpu" if gpus > 1 else "x1"),
        "shape": shape, "card": card, "backend": cfg.engine.backend, "lifetime": lifetime,
        "enforce_eager": cfg.engine.enforce_eager, "gpus_per_run": gpus, "runs_per_gpu": 1,
        "measured_at": {"proposer_steps": cfg.proposer.max_steps,
                        "proposer_prompts": cfg.proposer.global_batch_size,
                        "proposer_generations": cfg.proposer.num_generations,
                        "solver_steps": cfg.solver.max_steps,
                        "solver_prompts": cfg.solver.global_batch_size,
                        "solver_generations": cfg.solver.num_generations,
                        "num_questions": k, "num_solver_samples": m,
                        "max_new_tokens": cfg.scoring.max_new_tokens},
        "run_iterations": 1, "lengths": lengths, "stages": stages,
        "memory": {"peak_gib_per_gpu": max((v for p in peak.values() for v in p.values()),
                                           default=None),
                   "per_stage_gib": peak, "runs_on_the_gpu": 1,
                   "source": f"{src}: nvidia-smi every second, every process on the card"},
        "timing_s": timing, "error": error, "skipped_stages": list(skip),
        "note": ("solver trained on GPU 0 only (one process); " if gpus > 1 else "")
                + "measured by vdlib plan --measure",
    }
