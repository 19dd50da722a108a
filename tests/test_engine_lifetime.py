"""The run's engine (``engine.lifetime: run``, vdlib.engines.engine_lifetime) on CPU, over a fake
``vllm.LLM`` that records every call: when the engine starts, wakes, receives weights and
sleeps; what it receives; TRL's handle; the wiring through vdlib.engines.vllm_backend,
vdlib.loop.trainer and vdlib.loop.model_store; the config key. No vLLM, no GPU, no network."""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

import vdlib.engines.engine_lifetime as el
import vdlib.engines.vllm_backend as vb
import vdlib.engines.vllm_engine as ve
import vdlib.loop.model_store as ms
from vdlib.config.experiment import ConfigError, EngineConfig, load_params, to_dict
from vdlib.engines.engine_lifetime import (
    RunEngine,
    SharedVLLMEngine,
    checkpoint_tensors,
    local_checkpoint,
    same_architecture,
)
from vdlib.engines.generation import GenerationBatch
from vdlib.engines.setting import RolloutSetting, rollout_setting
from vdlib.loop.trainer import release_rollout_engine
from vdlib.runs.run_state import NOT_FINGERPRINTED, config_fingerprint

# ----------------------------------------------------------------------------- fakes


class FakeModel:
    """vLLM's model behind ``llm_engine.model_executor.driver_worker.model_runner.model``."""

    def __init__(self, calls: list) -> None:
        self.calls = calls
        self.received: list[list[tuple[str, torch.Tensor]]] = []  # one list per load_weights

    def load_weights(self, weights) -> None:
        batch = list(weights)
        self.received.append(batch)
        self.calls.append(("load_weights", len(batch)))


class FakeLLM:
    """Records ``sleep``, ``wake_up``, ``reset_prefix_cache``, ``generate``, ``load_weights``
    and the engine's shutdown, in one ordered list of calls."""

    def __init__(self, **kwargs) -> None:
        self.kwargs = kwargs
        self.calls: list[tuple] = []
        self.model = FakeModel(self.calls)
        runner = SimpleNamespace(model=self.model)
        self.llm_engine = SimpleNamespace(
            model_executor=SimpleNamespace(driver_worker=SimpleNamespace(model_runner=runner)),
            shutdown=lambda: self.calls.append(("shutdown",)))

    def sleep(self, level: int = 1) -> None:
        self.calls.append(("sleep", level))

    def wake_up(self, tags=None) -> None:
        self.calls.append(("wake_up", tuple(tags) if tags is not None else None))

    def reset_prefix_cache(self) -> None:
        self.calls.append(("reset_prefix_cache",))

    def generate(self, prompts, params, use_tqdm=True):
        self.calls.append(("generate", len(prompts), use_tqdm))
        outs = []
        for prompt, p in zip(prompts, params, strict=True):
            first = len(prompt["prompt_token_ids"])
            ids = [first, 17, 18][: p.kwargs["max_tokens"]]
            comps = [SimpleNamespace(index=j, token_ids=[ids[0] + j, *ids[1:]],
                                     finish_reason="length") for j in range(p.kwargs["n"])]
            outs.append(SimpleNamespace(outputs=comps[::-1]))  # any order: sorted by index
        return outs

    def names(self) -> list[str]:
        return [c[0] for c in self.calls]


class FakeSamplingParams:
    def __init__(self, **kwargs) -> None:
        self.kwargs = kwargs


@pytest.fixture
def fake_vllm(monkeypatch):
    """``build_llm`` returns a :class:`FakeLLM` (each one appended to the returned list)."""
    built: list[FakeLLM] = []

    def build_llm(model, **kwargs):
        llm = FakeLLM(model=model, **kwargs)
        built.append(llm)
        return llm

    monkeypatch.setattr(vb, "build_llm", build_llm)
    monkeypatch.setattr(ve, "require_vllm",
                        lambda: SimpleNamespace(SamplingParams=FakeSamplingParams))
    return built


@pytest.fixture
def keep_rng():
    """Restore the global generators after a test that reseeds them."""
    py, npy, pt = random.getstate(), np.random.get_state(), torch.get_rng_state()
    yield
    random.setstate(py)
    np.random.set_state(npy)
    torch.set_rng_state(pt)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory, tiny_model_and_tokenizer) -> str:
    """A real checkpoint folder (config, tokenizer, one ``model.safetensors``, float32)."""
    model, tok = tiny_model_and_tokenizer
    path = tmp_path_factory.mktemp("ckpt") / "tiny"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


def _small_ckpt(path: Path, value: float) -> str:
    """A folder with two safetensors files: float tensors filled with ``value``, an int one."""
    path.mkdir(parents=True, exist_ok=True)
    save_file({"b.weight": torch.full((3, 2), value), "a.bias": torch.full((2,), value)},
              str(path / "model-00001-of-00002.safetensors"))
    save_file({"c.weight": torch.full((4,), value, dtype=torch.float64),
               "counts": torch.arange(3, dtype=torch.int64)},
              str(path / "model-00002-of-00002.safetensors"))
    return str(path)


def _engine(tokenizer, build: str, **kw) -> RunEngine:
    return RunEngine(EngineConfig(backend="vllm"), build, tokenizer, max_model_len=256, **kw)


# ----------------------------------------------------------------------------- checkpoints


def test_checkpoint_tensors_cast_floats_keep_order_and_need_files(tmp_path):
    path = _small_ckpt(tmp_path / "c", 0.5)
    got = checkpoint_tensors(path)
    assert [n for n, _ in got] == ["a.bias", "b.weight", "c.weight", "counts"]  # file, key order
    assert [t.dtype for _, t in got] == [torch.bfloat16] * 3 + [torch.int64]
    assert torch.equal(got[3][1], torch.arange(3))
    assert checkpoint_tensors(path, torch.float32)[2][1].dtype == torch.float32
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no \\*.safetensors"):
        checkpoint_tensors(str(tmp_path / "empty"))


def test_same_architecture_compares_shape_keys_only(tmp_path, tiny_dir):
    cfg = json.loads((Path(tiny_dir) / "config.json").read_text())

    def write(name: str, **over) -> str:
        d = tmp_path / name
        d.mkdir()
        (d / "config.json").write_text(json.dumps({**cfg, **over}))
        return str(d)

    same = write("same", _name_or_path="elsewhere", torch_dtype="bfloat16")
    wider = write("wider", hidden_size=cfg["hidden_size"] * 2)
    assert same_architecture(tiny_dir, same)
    assert not same_architecture(tiny_dir, wider)
    assert not same_architecture(tiny_dir, write("vocab", vocab_size=cfg["vocab_size"] + 64))
    (tmp_path / "noconfig").mkdir()
    assert not same_architecture(tiny_dir, str(tmp_path / "noconfig"))
    assert not same_architecture(str(tmp_path / "noconfig"), str(tmp_path / "noconfig"))
    assert not same_architecture(tiny_dir, "nobody-vdlib/not-a-model-xyz")


def test_local_checkpoint_never_downloads():
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    assert local_checkpoint("nobody-vdlib/not-a-model-xyz") is None


def test_local_checkpoint_of_a_folder_is_itself(tmp_path):
    assert local_checkpoint(str(tmp_path)) == str(tmp_path)


# ----------------------------------------------------------------------------- hand-overs


def test_serving_starts_once_pushes_the_checkpoint_and_sleeps(fake_vllm, tokenizer, tiny_dir,
                                                              tmp_path):
    build = _small_ckpt(tmp_path / "build", 0.0)
    engine = _engine(tokenizer, build)
    assert not fake_vllm and engine._llm is None  # lazy: nothing starts before a use
    with engine.serving(tiny_dir) as llm:
        assert len(fake_vllm) == 1 and llm is fake_vllm[0]
        assert engine.awake == {"weights", "kv_cache"} and engine.loaded == tiny_dir
    llm = fake_vllm[0]
    kw = llm.kwargs
    assert kw["model"] == build and kw["enable_sleep_mode"] is True
    assert kw["max_model_len"] == 256 and kw["dtype"] == "bfloat16"
    assert kw["logprobs_mode"] == "processed_logprobs"
    # a fresh engine is awake: the push needs no wake-up; level-2 sleep on exit
    assert llm.calls == [("load_weights", 20), ("reset_prefix_cache",), ("sleep", 2)]
    assert engine.awake == set() and engine.loaded is None
    with safe_open(str(Path(tiny_dir) / "model.safetensors"), framework="pt") as st:
        names = list(st.keys())
        expected = {n: st.get_tensor(n) for n in names}
    got = llm.model.received[0]
    assert [n for n, _ in got] == names  # exactly the file's tensors, in its order
    for name, t in got:
        assert t.dtype == torch.bfloat16
        assert torch.equal(t, expected[name].to(torch.bfloat16)), name

    llm.calls.clear()
    with engine.serving(tiny_dir):  # asleep: wake the weights, push, wake the KV cache
        pass
    assert llm.calls == [("wake_up", ("weights",)), ("load_weights", 20),
                         ("reset_prefix_cache",), ("wake_up", ("kv_cache",)), ("sleep", 2)]
    assert len(fake_vllm) == 1 and len(engine.starts) == 1 and len(engine.pushes) == 2


def test_the_build_checkpoint_needs_no_push_on_a_fresh_engine(fake_vllm, tokenizer, tmp_path):
    build = _small_ckpt(tmp_path / "build", 0.0)
    engine = _engine(tokenizer, build)
    with engine.serving(build):
        pass
    assert fake_vllm[0].calls == [("sleep", 2)]  # vLLM loaded it from disk at its start


def test_hold_pushes_once_and_sleeps_once(fake_vllm, tokenizer, tmp_path):
    a = _small_ckpt(tmp_path / "a", 1.0)
    b = _small_ckpt(tmp_path / "b", 2.0)
    engine = _engine(tokenizer, _small_ckpt(tmp_path / "build", 0.0))
    with engine.hold(a):
        for _ in range(3):
            with engine.serving(a) as llm:
                llm.generate([], [], use_tqdm=False)
    llm = fake_vllm[0]
    assert llm.names() == ["load_weights", "reset_prefix_cache"] + ["generate"] * 3 + ["sleep"]
    llm.calls.clear()
    with engine.hold(b):  # another checkpoint: pushed again
        with engine.serving(b):
            pass
    assert llm.names() == ["wake_up", "load_weights", "reset_prefix_cache", "wake_up", "sleep"]
    assert [p for p, _ in engine.pushes] == [a, b]
    assert all(float(t.float().mean()) == 2.0 for n, t in llm.model.received[-1] if n != "counts")


def test_a_failed_push_puts_the_engine_back_to_sleep(fake_vllm, tokenizer, tmp_path):
    engine = _engine(tokenizer, _small_ckpt(tmp_path / "build", 0.0))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError), engine.serving(str(empty)):
        pass
    assert fake_vllm[0].names()[-1] == "sleep" and not engine.awake


def test_host_cache_is_bounded_and_notices_a_rewritten_checkpoint(fake_vllm, tokenizer, tmp_path,
                                                                  monkeypatch):
    reads: list[str] = []
    real = el.checkpoint_tensors

    def counting(path, *args, **kwargs):
        reads.append(Path(path).name)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(el, "checkpoint_tensors", counting)
    a, b, c = (_small_ckpt(tmp_path / n, v) for n, v in (("a", 1.0), ("b", 2.0), ("c", 3.0)))
    engine = _engine(tokenizer, _small_ckpt(tmp_path / "build", 0.0), cache_size=2)

    def serve(path: str) -> None:
        with engine.serving(path):
            pass

    for path in (a, b, a, b):
        serve(path)
    assert reads == ["a", "b"]  # read from disk once each, then from the host
    serve(c)
    assert reads == ["a", "b", "c"] and len(engine._cache) == 2
    serve(b)  # still cached
    assert reads == ["a", "b", "c"]
    serve(a)  # evicted by c (least recently used)
    assert reads == ["a", "b", "c", "a"] and len(engine._cache) == 2

    # b rewritten in place (a later stage saved over it): its files key changes
    first = Path(b) / "model-00001-of-00002.safetensors"
    save_file({"b.weight": torch.full((3, 2), 7.0), "a.bias": torch.full((2,), 7.0)}, str(first))
    st = first.stat()
    os.utime(first, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # coarse clocks
    serve(b)
    assert reads[-1] == "b" and len(reads) == 5
    pushed = dict(fake_vllm[0].model.received[-1])
    assert float(pushed["b.weight"][0, 0]) == 7.0 and float(pushed["c.weight"][0]) == 2.0
    assert len(engine._cache) == 2


def test_auto_dtype_pushes_the_checkpoints_own_dtype(fake_vllm, tokenizer, tmp_path):
    """``model.dtype: auto`` is a legal config: vLLM picks the engine's dtype, and the push
    keeps the checkpoint's (vLLM's weight loaders copy into the engine's parameters)."""
    a = _small_ckpt(tmp_path / "a", 1.0)
    engine = _engine(tokenizer, _small_ckpt(tmp_path / "build", 0.0), dtype="auto")
    with engine.serving(a):
        pass
    assert fake_vllm[0].kwargs["dtype"] == "auto"
    got = dict(fake_vllm[0].model.received[0])
    assert got["b.weight"].dtype == torch.float32 and got["c.weight"].dtype == torch.float64
    f32 = _engine(tokenizer, a, dtype="float32")
    with f32.serving(_small_ckpt(tmp_path / "b", 2.0)):
        pass
    assert dict(fake_vllm[1].model.received[0])["c.weight"].dtype == torch.float32


# ----------------------------------------------------------------------------- vdlib's view


def test_shared_view_generates_through_serving_and_close_keeps_the_engine(fake_vllm, tokenizer,
                                                                         tmp_path):
    a = _small_ckpt(tmp_path / "a", 1.0)
    engine = _engine(tokenizer, _small_ckpt(tmp_path / "build", 0.0))
    view = engine.view(a, show_progress=False)
    assert isinstance(view, SharedVLLMEngine) and view.path == a
    assert not fake_vllm  # a view does not start the engine
    batches = [GenerationBatch(["1 + 1 =", "2 + 2 ="], n=2, seed=3),
               GenerationBatch(["x"], n=1, seed=4)]
    out = view.generate_batches(batches, max_new_tokens=3)
    llm = fake_vllm[0]
    assert llm.names() == ["load_weights", "reset_prefix_cache", "generate", "sleep"]
    assert llm.calls[2] == ("generate", 3, False)  # one call for every batch, no progress bar
    assert [len(s) for s in out] == [4, 1]
    assert [s.sample_index for s in out[0]] == [0, 1, 0, 1]
    assert out[0][1].token_ids[1:] == [17, 18] and out[0][1].finish_reason == "length"

    llm.calls.clear()
    with engine.hold(a):  # a stage: several calls, one push, one sleep
        view.generate_batches(batches[:1], max_new_tokens=3)
        view.generate_batches(batches[1:], max_new_tokens=3)
    assert llm.names() == ["wake_up", "load_weights", "reset_prefix_cache", "wake_up",
                           "generate", "generate", "sleep"]

    llm.calls.clear()
    view.close()
    with view:
        pass
    assert "shutdown" not in llm.names() and engine._llm is llm
    engine.close()  # asleep: woken before the shutdown (vLLM's allocator frees mapped memory)
    assert llm.names() == ["wake_up", "shutdown"] and engine._llm is None and not engine._cache
    assert llm.calls[0] == ("wake_up", None)
    assert engine.awake == set() and engine.loaded is None
    engine.close()  # idempotent
    assert llm.names() == ["wake_up", "shutdown"]


def test_a_process_that_never_closes_its_engine_closes_it_at_exit(fake_vllm, tokenizer,
                                                                 tmp_path, monkeypatch):
    import atexit

    hooks = []
    monkeypatch.setattr(atexit, "register", lambda fn, *args: hooks.append((fn, args)))
    engine = _engine(tokenizer, _small_ckpt(tmp_path / "build", 0.0))
    with engine.serving(engine.build_path):
        pass
    [(fn, args)] = hooks  # registered once, at the engine's start
    fn(*args)  # what the interpreter does at exit
    assert fake_vllm[0].names()[-2:] == ["wake_up", "shutdown"] and engine._llm is None
    del engine
    fn(*args)  # the hook holds the engine weakly: a collected engine is left alone


# ----------------------------------------------------------------------------- TRL's handle


def test_trl_llm_refuses_a_longer_context(fake_vllm, tokenizer, tmp_path):
    engine = _engine(tokenizer, _small_ckpt(tmp_path / "build", 0.0))
    with pytest.raises(ValueError, match="context of 512 tokens.*holds 256.*engine.max_model_len"):
        engine.trl_llm(max_model_len=512, seed=0)
    assert not fake_vllm  # refused before the engine starts
    engine.trl_llm(max_model_len=256, seed=0)
    assert len(fake_vllm) == 1


def test_trl_llm_reseeds_as_a_fresh_engine(fake_vllm, tokenizer, tmp_path, keep_rng):
    engine = _engine(tokenizer, _small_ckpt(tmp_path / "build", 0.0))

    def draws():
        return random.random(), float(np.random.rand()), float(torch.rand(1))

    random.seed(3)
    np.random.seed(3)
    torch.manual_seed(3)
    expected = draws()
    torch.manual_seed(99)
    random.seed(99)
    engine.trl_llm(seed=3, max_model_len=128)
    assert draws() == expected
    engine.trl_llm(seed=3)  # a second trainer hand-over: the same start again
    assert draws() == expected
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    expected0 = draws()
    engine.trl_llm()  # TRL's default seed
    assert draws() == expected0


def test_trl_handle_sleep_wake_are_idempotent_and_bookkept(fake_vllm, tokenizer, tmp_path):
    a = _small_ckpt(tmp_path / "a", 1.0)
    engine = _engine(tokenizer, _small_ckpt(tmp_path / "build", 0.0))
    handle = engine.trl_llm(seed=0, max_model_len=64)
    assert engine.trl_llm(seed=0) is handle  # one handle per engine
    llm = fake_vllm[0]
    assert llm.calls == [("sleep", 2)]  # started, then asleep until TRL's first push
    handle.sleep(level=2)  # TRL's own sleep after its start: already asleep
    assert llm.calls == [("sleep", 2)]

    llm.calls.clear()
    # TRL's rollout: wake the weights, push the policy, wake the KV cache, generate, sleep
    handle.wake_up(tags=["weights"])
    handle.wake_up(tags=["weights"])
    model = handle.llm_engine.model_executor.driver_worker.model_runner.model
    model.load_weights([("w", torch.zeros(1))])
    handle.reset_prefix_cache()
    handle.wake_up(tags=["kv_cache"])
    handle.generate([], [], use_tqdm=False)
    handle.sleep(level=2)
    handle.sleep(level=2)
    assert llm.calls == [("wake_up", ("weights",)), ("load_weights", 1), ("reset_prefix_cache",),
                         ("wake_up", ("kv_cache",)), ("generate", 0, False), ("sleep", 2)]
    assert engine.awake == set() and engine.loaded is None

    # vdlib's stage after TRL's use: pushes its checkpoint
    llm.calls.clear()
    with engine.serving(a):
        pass
    assert llm.names() == ["wake_up", "load_weights", "reset_prefix_cache", "wake_up", "sleep"]

    # within a hold on a, TRL's wake-up leaves the weights unknown: the same path pushes again
    with engine.hold(a):
        llm.calls.clear()
        with engine.serving(a):
            pass
        assert llm.calls == []  # held on a: nothing to do
        handle.wake_up(tags=["weights"])
        assert engine.loaded is None
        with engine.serving(a):
            pass
        assert llm.names() == ["load_weights", "reset_prefix_cache"]
        handle.sleep(level=2)  # a hold keeps the engine awake
        assert "sleep" not in llm.names()
    assert llm.names()[-1] == "sleep" and engine.awake == set()


def test_release_rollout_engine_detaches_the_handle_without_shutdown(fake_vllm, tokenizer,
                                                                     tmp_path):
    engine = _engine(tokenizer, _small_ckpt(tmp_path / "build", 0.0))
    handle = engine.trl_llm(seed=0)
    handle.policy = object()
    handle.wake_up(tags=["weights"])
    handle.wake_up(tags=["kv_cache"])
    trainer = SimpleNamespace(vllm_generation=SimpleNamespace(llm=handle))
    fake_vllm[0].calls.clear()
    release_rollout_engine(trainer)
    assert trainer.vllm_generation.llm is None and handle.policy is None
    assert fake_vllm[0].calls == [("sleep", 2)]  # asleep, not shut down
    assert engine._llm is fake_vllm[0] and engine.awake == set()
    release_rollout_engine(trainer)  # nothing left to release
    assert fake_vllm[0].calls == [("sleep", 2)]


def test_release_rollout_engine_shuts_down_trls_own_engine():
    own = FakeLLM()
    trainer = SimpleNamespace(vllm_generation=SimpleNamespace(llm=own))
    release_rollout_engine(trainer)
    assert trainer.vllm_generation.llm is None and own.names() == ["shutdown"]


# ----------------------------------------------------------------------------- TRL's LLM(...)


def test_trl_llm_kwargs_factory_replaces_trls_llm_inside_the_block(monkeypatch):
    import trl.generation.vllm_generation as trl_vllm

    seen = []

    def original(*args, **kwargs):
        seen.append(("original", kwargs))
        return "trl-engine"

    def factory(**kwargs):
        seen.append(("factory", kwargs))
        return "run-engine"

    monkeypatch.setattr(trl_vllm, "LLM", original, raising=False)
    with vb.trl_llm_kwargs(None, factory=factory):
        assert trl_vllm.LLM(model="m", seed=2, max_model_len=64) == "run-engine"
    assert trl_vllm.LLM is original
    assert seen == [("factory", {"model": "m", "seed": 2, "max_model_len": 64})]
    seen.clear()
    with vb.trl_llm_kwargs({"kv_cache_memory_bytes": 5}):  # no factory: extra keywords
        assert trl_vllm.LLM(model="m") == "trl-engine"
    assert seen == [("original", {"model": "m", "kv_cache_memory_bytes": 5})]
    assert trl_vllm.LLM is original
    with pytest.raises(RuntimeError), vb.trl_llm_kwargs(None, factory=factory):
        raise RuntimeError("TRL failed")
    assert trl_vllm.LLM is original  # restored on error too
    with vb.trl_llm_kwargs(None):  # neither: unchanged
        assert trl_vllm.LLM is original


def test_trl_llm_kwargs_without_vllm_changes_nothing(monkeypatch):
    """TRL imported without vLLM has no ``LLM`` (TRL itself refuses ``use_vllm``)."""
    import trl.generation.vllm_generation as trl_vllm

    monkeypatch.delattr(trl_vllm, "LLM", raising=False)
    called = []
    with vb.trl_llm_kwargs({"x": 1}, factory=lambda **kw: called.append(kw)):
        assert getattr(trl_vllm, "LLM", None) is None
    assert getattr(trl_vllm, "LLM", None) is None and not called
    monkeypatch.setattr(trl_vllm, "LLM", None, raising=False)
    with vb.trl_llm_kwargs(None, factory=lambda **kw: called.append(kw)):
        assert trl_vllm.LLM is None
    assert trl_vllm.LLM is None and not called


def test_masked_trainer_hands_trl_the_factorys_engine(monkeypatch, fake_vllm, tokenizer,
                                                      tmp_path, keep_rng):
    """MaskedGRPOTrainer(rollout_llm_factory=...): TRL's ``LLM(...)`` (here a stand-in for
    TRL's colocated set-up) returns the run's handle, whose policy becomes the trainer's model."""
    import trl
    import trl.generation.vllm_generation as trl_vllm

    from vdlib.loop.trainer import MaskedGRPOTrainer

    monkeypatch.setattr(trl_vllm, "LLM", lambda **kw: pytest.fail("TRL's own engine"),
                        raising=False)
    policy = torch.nn.Linear(2, 2)

    def grpo_init(self, *args, **kwargs):
        llm = trl_vllm.LLM(model="policy", seed=0, max_model_len=128, enable_sleep_mode=True)
        self.vllm_generation = SimpleNamespace(llm=llm)
        self.model = policy
        self.args = SimpleNamespace(seed=0, bf16=False, fp16=False)
        self.accelerator = SimpleNamespace(device="cpu")

    monkeypatch.setattr(trl.GRPOTrainer, "__init__", grpo_init)
    engine = _engine(tokenizer, _small_ckpt(tmp_path / "build", 0.0))
    trainer = MaskedGRPOTrainer(rollout_llm_factory=engine.trl_llm)
    handle = trainer.vllm_generation.llm
    assert handle is engine._handle and handle.policy is policy
    assert len(fake_vllm) == 1
    release_rollout_engine(trainer)
    assert handle.policy is None and engine._llm is fake_vllm[0]


# ----------------------------------------------------------------------------- ModelStore


def _store(tmp_path, **engine) -> ms.ModelStore:
    cfg = load_params({"profile": "tiny", "experiment": "t", "output_dir": str(tmp_path),
                       "model": {"proposer": "tiny-random"},
                       "engine": {"backend": "vllm", **engine}})
    return ms.ModelStore(cfg)


def _roles(store, monkeypatch, proposer: str, solver: str) -> None:
    monkeypatch.setattr(store, "proposer", lambda t: proposer)
    monkeypatch.setattr(store, "solver", lambda t: solver)


def test_lifetime_falls_back_to_stage_where_run_cannot_apply(tmp_path, monkeypatch, tiny_dir,
                                                            caplog):
    other = tmp_path / "wider"
    shutil.copytree(tiny_dir, other)
    cfg = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**cfg, "num_hidden_layers": 3}))

    hf = ms.ModelStore(load_params({"profile": "tiny", "output_dir": str(tmp_path)}))
    assert hf.cfg.engine.backend == "hf" and hf.lifetime() == "stage"
    assert hf.run_engine() is None
    assert rollout_setting(hf.cfg.engine, 10, 10, hf.run_engine()) == RolloutSetting("hf", {}, {})

    store = _store(tmp_path)
    _roles(store, monkeypatch, tiny_dir, tiny_dir)
    assert store.use_cpu
    with caplog.at_level(logging.INFO, logger="vdlib.loop.model_store"):
        assert store.lifetime() == "stage"  # CPU
        assert store.lifetime() == "stage"
    said = [r.getMessage() for r in caplog.records if "engine.lifetime" in r.getMessage()]
    assert said == ["engine.lifetime: run does not apply (no GPU); engines live per stage"]

    monkeypatch.setattr(store, "use_cpu", False)
    monkeypatch.setattr(ms, "world_size", lambda: 2)
    assert store.lifetime() == "stage"
    monkeypatch.setattr(ms, "world_size", lambda: 1)
    assert store.lifetime() == "run"
    _roles(store, monkeypatch, tiny_dir, str(other))
    assert store.lifetime() == "stage"
    _roles(store, monkeypatch, tiny_dir, "nobody-vdlib/not-a-model-xyz")  # not downloaded
    assert store.lifetime() == "stage"

    staged = _store(tmp_path, lifetime="stage")
    monkeypatch.setattr(staged, "use_cpu", False)
    _roles(staged, monkeypatch, tiny_dir, tiny_dir)
    assert staged.lifetime() == "stage" and staged.run_engine() is None


def test_store_builds_one_run_engine_and_hands_it_to_trl(tmp_path, monkeypatch, tiny_dir,
                                                        fake_vllm):
    store = _store(tmp_path, max_model_len=300)
    monkeypatch.setattr(store, "use_cpu", False)
    monkeypatch.setattr(ms, "world_size", lambda: 1)
    _roles(store, monkeypatch, tiny_dir, tiny_dir)
    assert store.lifetime() == "run"
    engine = store.run_engine()
    assert isinstance(engine, RunEngine) and store.run_engine() is engine
    assert engine.build_path == tiny_dir and engine.max_model_len == 300
    assert engine.dtype == store.cfg.model.dtype and not fake_vllm
    rollout = rollout_setting(store.cfg.engine, 10, 10, store.run_engine())
    assert rollout.mode == "colocate" and rollout.llm_factory == engine.trl_llm
    assert rollout.trl_args["vllm_enable_sleep_mode"] is True and rollout.trl_args["use_vllm"]

    with store.engine(tiny_dir, 8) as view:  # a stage: held on the checkpoint
        assert isinstance(view, SharedVLLMEngine) and view.show_progress
        assert engine._held == 1
    assert engine._held == 0 and fake_vllm[0].names()[-1] == "sleep"
    with store.engine(tiny_dir, 8, training=True) as view:  # beside a trainer: per call
        assert engine._held == 0 and not view.show_progress
    store.close()
    assert fake_vllm[0].names()[-1] == "shutdown" and store._run_engine is None
    store.close()  # no engine: no-op

    server = _store(tmp_path, rollouts="server")
    monkeypatch.setattr(server, "use_cpu", False)
    _roles(server, monkeypatch, tiny_dir, tiny_dir)
    assert server.run_engine() is not None
    rollout = rollout_setting(server.cfg.engine, 10, 10, server.run_engine())
    assert rollout.mode == "server" and rollout.llm_factory is None
    assert "vllm_enable_sleep_mode" not in rollout.trl_args


# ----------------------------------------------------------------------------- config


def test_engine_lifetime_config_key():
    assert load_params({"profile": "tiny"}).engine.lifetime == "run"
    for value in ("run", "stage"):
        assert load_params({"profile": "tiny", "engine": {"lifetime": value}}
                           ).engine.lifetime == value
    with pytest.raises(ConfigError, match="engine.lifetime.*allowed values: run, stage"):
        load_params({"profile": "tiny", "engine": {"lifetime": "forever"}})
    assert "engine.lifetime" in NOT_FINGERPRINTED
    run = to_dict(load_params({"profile": "tiny", "engine": {"lifetime": "run"}}))
    stage = to_dict(load_params({"profile": "tiny", "engine": {"lifetime": "stage"}}))
    assert config_fingerprint(run) == config_fingerprint(stage)


def _lifetime_questions():
    from _script_loader import load_script

    return load_script("benchmarks/lifetime_questions.py")


def test_lifetime_questions_compare_finds_where_two_lifetimes_part(tmp_path):
    """benchmarks/lifetime_questions.py compare: the first generation and the first proposer
    step that differ, and each side's valid count and Self-BLEU."""
    lq = _lifetime_questions()
    texts = {"stage": ["<question>What is 2+3?</question>", "<question>What is 4+4?</question>",
                       "no question", "<question>What is 9-1?</question>"],
             "run": ["<question>What is 2+3?</question>", "<question>What is 4+5?</question>",
                     "no question", "<question>What is 9-1?</question>"]}
    logs = {"stage": [{"reward": 0.1, "loss": 0.0}, {"reward": 0.2, "loss": 0.01}],
            "run": [{"reward": 0.1, "loss": 0.0}, {"reward": 0.3, "loss": 0.02}]}
    for name, ts in texts.items():
        d = tmp_path / name
        d.mkdir()
        rows = [{"index": i, "text": t, "valid": t.startswith("<"),
                 "question": t[10:-11] if t.startswith("<") else None} for i, t in enumerate(ts)]
        (d / "generated.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (d / "proposer_train.json").write_text(json.dumps(
            {"log_history": [*logs[name], {"train_runtime": 1.0}]}))
    out = lq.compare(tmp_path / "stage", tmp_path / "run", embedder=None)
    assert out["generations"] == [4, 4] and out["equal_text"] == 3
    assert out["first_different_generation"] == 1 and out["first_different_proposer_step"] == 2
    assert [s["equal"] for s in out["proposer_log_steps"]] == [True, False]
    assert out["diversity"]["stage"]["valid"] == out["diversity"]["run"]["valid"] == 3
    assert 0.0 <= out["diversity"]["run"]["self_bleu"] <= 1.0
