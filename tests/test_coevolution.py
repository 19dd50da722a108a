"""The co-evolution loop: artifact tree, curriculum filter, determinism, resume after a kill."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from vdlib.config.experiment import ConfigError, load_params
from vdlib.loop.arms import arm_names, arm_params
from vdlib.loop.coevolution import STAGES, run
from vdlib.method.curriculum import filter_curriculum
from vdlib.utils.artifacts import read_jsonl

ROOT = Path(__file__).resolve().parent.parent


def tiny_params(out: Path, iterations: int = 1, **over) -> dict:
    """The loop on the random tiny model: seconds per iteration."""
    p = {"profile": "tiny", "experiment": "t", "output_dir": str(out), "iterations": iterations,
         "model": {"proposer": "tiny-random"}, "warm_start": {"mode": "none"},
         "proposer": {"max_response_length": 12}, "solver": {"max_response_length": 12},
         "scoring": {"num_solver_samples": 2, "max_new_tokens": 6},
         "curriculum": {"num_questions": 4, "batch_size": 2, "max_new_tokens": 12}}
    p.update(over)
    return p


def test_full_artifact_tree(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="vdlib.loop.coevolution"):
        result = run(tiny_params(tmp_path))
    started = [r.getMessage() for r in caplog.records if r.getMessage().endswith(": started")]
    assert started == [f"t/seed0 | iteration 1/1 | stage {k}/{len(STAGES)} {s}: started"
                       for k, s in enumerate(STAGES, start=1)]  # the heartbeat's stage labels
    it = result.run_dir / "iter_1"
    for name in ("proposer_rollouts.jsonl", "proposer_train.json", "generated.jsonl",
                 "questions.jsonl", "curriculum.jsonl", "solver_train.json", "metrics.json",
                 "timing.json", "proposer_model/config.json", "solver_model/config.json"):
        assert (it / name).exists(), name
    assert (result.run_dir / "config.yaml").exists() and (result.run_dir / "manifest.json").exists()
    assert set(json.loads((it / "timing.json").read_text())) == set(STAGES)
    m = result.iterations[0]
    assert m["generated"] == 4 and m["proposer_rollouts"] == 8 and m["proposer_masked"]
    assert 0.70 < m["kept_fraction"] < 0.80
    questions = read_jsonl(it / "questions.jsonl")
    seeds = {q["mask_seed"] for q in questions}
    assert len(seeds) == 2 and None not in seeds  # one gen-phase mask per batch of 2
    assert not list(it.glob(".*")), "temporary folders left behind"


def test_same_config_and_seed_give_the_same_artifacts(tmp_path):
    a = run(tiny_params(tmp_path / "a")).run_dir
    b = run(tiny_params(tmp_path / "b")).run_dir
    assert _artifacts(a) == _artifacts(b)


@pytest.mark.slow  # 15 s on 2 cores (make test's 15 minutes; make test-slow runs it)
def test_another_seed_gives_other_questions(tmp_path):
    a = run(tiny_params(tmp_path / "a")).run_dir
    c = run(tiny_params(tmp_path / "c", seed=1)).run_dir
    assert _artifacts(c)["iter_1/generated.jsonl"] != _artifacts(a)["iter_1/generated.jsonl"]


@pytest.mark.slow  # 15 s on 2 cores; the quickstart's execution runs the baseline arm too
def test_baseline_arm_runs_without_a_mask(tmp_path):
    result = run(arm_params(tiny_params(tmp_path), "baseline"))
    assert result.run_dir.name == "baseline-seed0"
    m = result.iterations[0]
    assert not m["proposer_masked"] and m["kept_fraction"] == 1.0
    assert all(q["mask_seed"] is None
               for q in read_jsonl(result.run_dir / "iter_1" / "generated.jsonl"))


def test_filter_curriculum_window_and_target():
    qs = [{"valid": True, "question": "a", "answer": "1", "acc": 0.5, "majority": "2"},
          {"valid": True, "question": "b", "answer": "1", "acc": 0.3, "majority": "1"},
          {"valid": True, "question": "c", "answer": "1", "acc": 0.8, "majority": "1"},
          {"valid": True, "question": "d", "answer": "1", "acc": None, "majority": None},
          {"valid": False, "question": None, "answer": None, "acc": None}]
    kept = filter_curriculum(qs, 0.3, 0.7, "proposer")
    assert [k["question"] for k in kept] == ["a", "b"]
    assert [k["answer"] for k in kept] == ["1", "1"]
    assert [k["answer"] for k in filter_curriculum(qs, 0.3, 0.7, "majority")] == ["2", "1"]


@pytest.mark.parametrize("arm", arm_names())
@pytest.mark.parametrize("profile", ["tiny", "paper"])
def test_every_arm_validates(arm, profile):
    cfg = load_params(arm_params({"profile": profile}, arm))
    assert cfg.run_id == f"{arm}-seed0"


def test_a_removed_key_fails_before_loading(tmp_path):
    with pytest.raises(ConfigError, match="unknown key 'proposer.cov_scope'"):
        run(tiny_params(tmp_path, proposer={"cov_scope": "mini_batch"}))


def _artifacts(run_dir: Path) -> dict[str, bytes]:
    """Every artifact except the files that hold paths or wall-clock times."""
    skip = {"manifest.json", "config.yaml", "timing.json", ".lock"}
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*"))
            if p.is_file() and p.name not in skip}


def _launch(params_file: Path) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "vdlib", "run", str(params_file)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.slow  # two subprocess runs (~1 min on 2 cores); the SIGKILL suite is slow too
def test_resume_after_a_real_kill_equals_an_uninterrupted_run(tmp_path):
    ref_file, cut_file = tmp_path / "ref.yaml", tmp_path / "cut.yaml"
    ref_file.write_text(yaml.safe_dump(tiny_params(tmp_path / "ref", iterations=2)))
    cut_file.write_text(yaml.safe_dump(tiny_params(tmp_path / "cut", iterations=2)))
    ref = _launch(ref_file)
    assert ref.wait(timeout=600) == 0, ref.stdout.read()

    cut = _launch(cut_file)
    run_dir = tmp_path / "cut" / "t" / "seed0"
    marker = run_dir / "iter_2" / ".trl_proposer"  # iteration 2's proposer training started
    deadline = time.monotonic() + 600
    while not marker.exists() and cut.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert cut.poll() is None, "the run ended before it could be killed"
    cut.send_signal(signal.SIGKILL)
    cut.wait(timeout=60)
    assert cut.returncode == -signal.SIGKILL
    assert (run_dir / "iter_1" / "metrics.json").exists()
    assert not (run_dir / "iter_2" / "proposer_model").exists()  # the stage in progress was lost

    resumed = _launch(cut_file)
    out = resumed.communicate(timeout=600)[0]
    assert resumed.returncode == 0, out
    assert "iteration 1 proposer: done earlier, skipped" in out
    assert _artifacts(run_dir) == _artifacts(tmp_path / "ref" / "t" / "seed0")


# ----------------------------------------------------------------------------- processes


def test_merge_rank_records_orders_by_call_rank_index():
    from vdlib.loop.distributed import merge_rank_records

    r0 = [{"call": c, "index": i} for c in range(2) for i in range(2)]
    r1 = [{"call": c, "index": i} for c in range(2) for i in range(2)]
    merged = merge_rank_records([r0, r1])
    assert [(r["call"], r["rank"], r["index"]) for r in merged] == [
        (c, k, i) for c in range(2) for k in range(2) for i in range(2)]
    assert merge_rank_records([r0]) == r0 and "rank" not in merge_rank_records([r0])[0]


@pytest.mark.parametrize("rank", [0, 1])
def test_rank_gating(tmp_path, monkeypatch, rank):
    """Two processes (faked): every rank trains, only the main one runs the other stages and
    writes timing / manifest; the barrier closes every stage."""
    import dataclasses

    import vdlib.loop.coevolution as co
    import vdlib.loop.distributed as ds  # open_run's gating
    import vdlib.loop.model_store as ms
    from vdlib.loop.coevolution import Loop
    from vdlib.loop.model_store import ModelStore

    barriers = []
    for mod in (co, ms, ds):
        monkeypatch.setattr(mod, "world_size", lambda: 2)
        monkeypatch.setattr(mod, "is_main_process", lambda: rank == 0)
        monkeypatch.setattr(mod, "barrier", lambda: barriers.append(1))
    monkeypatch.setattr(ms, "rank", lambda: rank)
    monkeypatch.setattr(co, "broadcast_from_main", lambda value: False)  # main: not done yet
    monkeypatch.setattr(ModelStore, "_build_base", lambda self, name, role: f"/base/{role}")
    ran = []

    def fake(stage):
        def run_stage(store, t, out):
            ran.append(stage.name)
            for name in stage.outputs:  # what the stage writes (the runner records it)
                if not rank:
                    (out / name).write_text(json.dumps({"iteration": t}))
        return dataclasses.replace(stage, run=run_stage)

    monkeypatch.setattr(co, "STAGE_TABLE", tuple(fake(s) for s in co.STAGE_TABLE))
    cfg = load_params(tiny_params(tmp_path))
    loop = Loop(cfg)
    if rank == 1:  # what the main process wrote while this rank waited
        (loop.run_dir / "iter_1").mkdir(parents=True)
        (loop.run_dir / "iter_1" / "metrics.json").write_text(json.dumps({"iteration": 1}))
    result = loop.run()
    assert result.iterations == [{"iteration": 1}]
    assert ran == (list(STAGES) if rank == 0 else ["proposer", "solver"])
    assert (loop.run_dir / "manifest.json").exists() == (rank == 0)
    assert (loop.run_dir / "iter_1" / "timing.json").exists() == (rank == 0)
    # init + prepare_bases + one per stage + the end of the run
    assert len(barriers) == 2 + len(STAGES) + 1
    assert loop.store.base(cfg.model.proposer, "proposer") == "/base/proposer"


def test_generation_stages_keep_model_dtype_training_loads_fp32(tmp_path, monkeypatch):
    import vdlib.loop.model_store as ms

    calls = []
    monkeypatch.setattr(ms, "load_model", lambda path, dtype, device, cache_dir: calls.append(
        (dtype, device)))
    cfg = load_params(tiny_params(tmp_path, model={"proposer": "tiny-random", "device": "cuda",
                                                   "dtype": "bfloat16"}))
    store = ms.ModelStore(cfg)
    store.load("x")
    store.load_policy("x", cfg.proposer.__class__(precision="bfloat16"))
    assert calls == [("bfloat16", "cuda"), ("float32", "cuda")]


def test_process_helpers_under_two_real_processes(tmp_path):
    """gloo, 2 CPU processes (torchrun): rank, barrier, broadcast, gather."""
    script = tmp_path / "dist_check.py"
    script.write_text(
        "import json, sys\n"
        "from vdlib.loop.distributed import (init_distributed, rank, world_size, barrier,\n"
        "    broadcast_from_main, gather_to_main, merge_rank_records, shutdown_distributed)\n"
        "init_distributed()\n"
        "barrier()\n"
        "seen = broadcast_from_main(f'from {rank()}')\n"
        "got = gather_to_main([{'call': 0, 'index': 0, 'who': rank()}])\n"
        "if rank() == 0:\n"
        "    json.dump({'world': world_size(), 'seen': seen,\n"
        "               'merged': merge_rank_records(got)}, open(sys.argv[1], 'w'))\n"
        "else:\n"
        "    assert got is None and seen == 'from 0'\n"
        "shutdown_distributed()\n")
    import socket

    with socket.socket() as sock:  # a free port for the rendezvous
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    out = tmp_path / "out.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node",
                             "2", "--master_addr", "127.0.0.1", "--master_port", str(port),
                             str(script), str(out)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, stderr = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the launcher and both workers
        raise
    assert proc.returncode == 0, stderr[-3000:]
    res = json.loads(out.read_text())
    assert res["world"] == 2 and res["seen"] == "from 0"
    assert [(r["rank"], r["who"]) for r in res["merged"]] == [(0, 0), (1, 1)]


def test_packaged_warm_start_examples_equal_reasoning_gym(monkeypatch):
    """Machines without reasoning-gym (the GPU machines) warm-start from the packaged copy:
    the same triples reasoning-gym gives for every packaged (examples, seed)."""
    import sys

    from vdlib.loop import warm_start

    for n, seed in warm_start.PACKAGED_KEYS:
        assert warm_start.format_examples(n, seed) == warm_start._generate_examples(n, seed, 45,
                                                                                    60)
    live = warm_start.format_examples(64, 1)
    monkeypatch.setitem(sys.modules, "reasoning_gym", None)
    assert warm_start.format_examples(64, 1) == live
    with pytest.raises(ImportError, match="reasoning-gym"):
        warm_start.format_examples(65, 0)


def test_warm_start_target_loss_equals_the_models_own_loss():
    """The warm-start's loss (output layer on the target positions only) is the causal-LM loss
    transformers computes from ``labels`` over every position, and so is its gradient."""
    from vdlib.engines.models import load_model
    from vdlib.loop.warm_start import target_loss

    model, _ = load_model("tiny-random", dtype="float32", device="cpu")
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 1000, (3, 12), generator=g)
    attn = torch.ones_like(ids)
    attn[2, 9:] = 0
    labels = torch.full_like(ids, -100)
    labels[0, 4:] = ids[0, 4:]
    labels[1, 7:] = ids[1, 7:]
    labels[2, 5:9] = ids[2, 5:9]
    ours = target_loss(model, ids, attn, labels)
    ours.backward()
    grad = model.get_output_embeddings().weight.grad.clone()
    model.zero_grad()
    theirs = model(input_ids=ids, attention_mask=attn, labels=labels).loss
    theirs.backward()
    assert float(ours) == pytest.approx(float(theirs), rel=1e-5)
    assert torch.allclose(grad, model.get_output_embeddings().weight.grad, atol=1e-6)


def test_warm_start_can_train_only_the_top_layers():
    """``warm_start.train_layers``: the top N layers and the final norm change, every other
    weight (embeddings, lower layers) is bitwise the base's; 0 trains all, N above the model's
    layer count every layer; a model without decoder layers is refused naming the key."""
    from vdlib.config.config_sections import WarmStartConfig
    from vdlib.engines.models import load_model
    from vdlib.loop.warm_start import batch_loss, trainable_parameters

    model, tok = load_model("tiny-random", dtype="float32", device="cpu")
    n = len(model.model.layers)
    assert len(trainable_parameters(model, 0)) == len(list(model.parameters()))
    before = {k: p.detach().clone() for k, p in model.named_parameters()}
    params = trainable_parameters(model, 1)
    assert {id(p) for p in params} == {id(p) for p in model.parameters() if p.requires_grad}
    opt = torch.optim.AdamW(params, lr=1e-2)
    g = torch.Generator().manual_seed(0)
    rows = [(torch.randint(5, 1000, (12,), generator=g).tolist(), 6) for _ in range(2)]
    batch_loss(model, rows, [], 0, "cpu").backward()
    opt.step()
    top = f"model.layers.{n - 1}."
    for k, p in model.named_parameters():
        changed = not torch.equal(p, before[k])
        assert changed == (k.startswith(top) or k.startswith("model.norm")), k
    every = trainable_parameters(model, n + 5)  # more than the model has: every layer
    assert len(every) == sum(1 for k, _ in model.named_parameters()
                             if k.startswith(("model.layers.", "model.norm")))
    with pytest.raises(ValueError, match="warm_start.train_layers"):
        trainable_parameters(torch.nn.Linear(2, 2), 1)
    assert WarmStartConfig().train_layers == 0


def test_warm_start_batches_share_the_proposer_prompt_with_the_same_loss_and_gradient():
    """Rows that begin with the proposer prompt share one forward pass of it: the loss and
    gradient of the right-padded batch (target_loss), whatever the mix of rows."""
    from vdlib.engines.models import load_model
    from vdlib.loop.warm_start import _padded, batch_loss, target_loss

    model, _ = load_model("tiny-random", dtype="float32", device="cpu")
    g = torch.Generator().manual_seed(1)
    prefix = torch.randint(5, 1000, (9,), generator=g).tolist()

    def row(n, shared):
        head = prefix if shared else torch.randint(5, 1000, (7,), generator=g).tolist()
        return head + torch.randint(5, 1000, (n,), generator=g).tolist(), len(head)

    for rows in ([row(4, True), row(6, False), row(3, True), row(2, False)],
                 [row(5, True), row(5, True)], [row(4, False)], [row(3, True)]):
        ours = batch_loss(model, rows, prefix, 0, "cpu")
        ours.backward()
        grads = {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}
        model.zero_grad()
        theirs = target_loss(model, *_padded(rows, 0, "cpu"))
        theirs.backward()
        assert ours.item() == pytest.approx(theirs.item(), rel=1e-5)
        for k, p in model.named_parameters():
            if p.grad is not None:
                assert torch.allclose(grads[k], p.grad, atol=1e-5, rtol=1e-4), k
        model.zero_grad()
