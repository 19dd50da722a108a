"""The engine setting (vdlib.engines) on CPU: the transformers engine per stage, the server
engine over fake servers, TRL's rollout arguments, the processor class over whatever vLLM
interfaces exist, and the loop opening each stage's engine on the checkpoint it must sample.
The same paths on a real vLLM and a GPU: tests/test_vllm_gpu.py."""

from __future__ import annotations

import abc
import sys
import types

import pytest
import torch

from vdlib.config.experiment import ConfigError, EngineConfig, load_params
from vdlib.engines import vllm_backend as vb
from vdlib.engines.generation import HFEngine
from vdlib.engines.setting import (
    open_engine,
    rollout_llm_kwargs,
    rollout_mode,
    trl_vllm_args,
    vllm_max_len,
)
from vdlib.loop.trainer import check_rollouts_masked
from vdlib.method.vocab_dropout import VocabDropout


def test_hf_engine_per_stage_generates_and_is_released():
    with open_engine(EngineConfig(backend="hf", batch_size=3), "tiny-random", device="cpu",
                     max_new_tokens=4, show_progress=False) as engine:
        assert isinstance(engine, HFEngine) and engine.batch_size == 3
        out = engine.generate(["a", "b"], n=2, max_new_tokens=4, seed=0)
        assert len(out) == 4 and all(len(s.token_ids) <= 4 for s in out)


def test_cpu_dtype_sets_the_cpu_sampling_engines_weights_and_attention():
    """engine.cpu_dtype: float32 (default) keeps the checkpoint's weights and SDPA; bfloat16
    loads bfloat16 weights with transformers' eager attention (torch's CPU SDPA decodes bfloat16
    slower), and the engine still samples the masked ids never; a bad value names the values."""
    with open_engine(EngineConfig(backend="hf"), "tiny-random", device="cpu",
                     show_progress=False) as engine:
        assert engine.model.dtype == torch.float32
        assert engine.model.config._attn_implementation != "eager"
    with open_engine(EngineConfig(backend="hf", cpu_dtype="bfloat16"), "tiny-random",
                     device="cpu", show_progress=False) as engine:
        assert engine.model.dtype == torch.bfloat16
        assert engine.model.config._attn_implementation == "eager"
        vd = VocabDropout(engine.tokenizer, 0.5, vocab_width=engine.model.config.vocab_size)
        out = engine.generate(["a", "b"], n=2, max_new_tokens=6, seed=0, vocab_dropout=vd,
                              mask_seed=3)
        allowed = vd.sample(3)
        assert out and all(allowed[t] for s in out for t in s.token_ids)
    with pytest.raises(ConfigError, match=r"engine\.cpu_dtype = 'float16'.*float32, bfloat16"):
        load_params({"engine": {"cpu_dtype": "float16"}})


def test_unknown_backend_is_a_config_error_naming_the_values():
    with pytest.raises(ConfigError, match=r"engine\.backend = 'tgi'.*hf, vllm, server"):
        load_params({"engine": {"backend": "tgi"}})
    with pytest.raises(ConfigError, match=r"engine\.rollouts"):
        load_params({"engine": {"rollouts": "vllm"}})


def test_rollout_mode_and_trl_arguments():
    assert rollout_mode(EngineConfig(backend="hf")) == "hf"
    assert trl_vllm_args(EngineConfig(backend="hf"), 100, 512) == {}
    kw = trl_vllm_args(EngineConfig(backend="vllm", rollout_gpu_memory_utilization=0.25),
                       100, 512)
    assert kw == {"use_vllm": True, "vllm_mode": "colocate",
                  "vllm_gpu_memory_utilization": 0.25, "vllm_max_model_length": 768}
    assert rollout_mode(EngineConfig(backend="server")) == "colocate"
    kw = trl_vllm_args(EngineConfig(rollouts="server", rollout_server_url="http://h:1"), 10, 10)
    assert kw == {"use_vllm": True, "vllm_mode": "server", "vllm_server_base_url": "http://h:1"}
    assert trl_vllm_args(EngineConfig(rollouts="hf"), 10, 10) == {}
    assert vllm_max_len(0, 4096) == 4096 and vllm_max_len(1, 4096) == 4352


def test_one_call_builds_the_whole_rollout_setting():
    """rollout_setting: the mode, TRL's keywords, the colocated engine's keywords and the run's
    engine handed to TRL, from the engine section alone (what the stages used to gather from
    five calls)."""
    from types import SimpleNamespace

    from vdlib.engines.setting import RolloutSetting, rollout_setting

    assert rollout_setting(EngineConfig(backend="hf"), 100, 512) == RolloutSetting("hf", {}, {})
    run = SimpleNamespace(trl_llm=object())  # the run's engine (engine.lifetime: run)
    assert rollout_setting(EngineConfig(backend="hf"), 100, 512, run).llm_factory is None
    ecfg = EngineConfig(backend="vllm", rollout_gpu_memory_utilization=0.25,
                        rollout_kv_cache_gb=0.25)
    own = rollout_setting(ecfg, 100, 512)  # TRL builds its own colocated engine
    assert own == RolloutSetting("colocate", trl_vllm_args(ecfg, 100, 512),
                                 {"kv_cache_memory_bytes": 2**28})
    shared = rollout_setting(ecfg, 100, 512, run)  # TRL is handed the run's engine, asleep
    assert shared.llm_factory is run.trl_llm and shared.llm_kwargs == own.llm_kwargs
    assert shared.trl_args == {**own.trl_args, "vllm_enable_sleep_mode": True}
    server = EngineConfig(backend="vllm", rollouts="server", rollout_server_url="http://h:1")
    assert rollout_setting(server, 10, 10, run) == RolloutSetting(
        "server", {"use_vllm": True, "vllm_mode": "server",
                   "vllm_server_base_url": "http://h:1"}, {})


def test_kv_cache_sizes_reach_every_engine_vdlib_starts(monkeypatch):
    """engine.kv_cache_gb goes to the in-process LLM and the server; rollout_kv_cache_gb to
    TRL's colocated LLM, through a patch of TRL's module that is undone afterwards."""
    import trl.generation.vllm_generation as trl_vllm

    import vdlib.engines.vllm_backend as backend
    import vdlib.engines.vllm_engine as vengine

    built = []
    monkeypatch.setattr(backend, "build_llm", lambda path, **kw: built.append(kw) or object())
    monkeypatch.setattr(vengine.VLLMEngine, "close", lambda self: None)
    ecfg = EngineConfig(backend="vllm", kv_cache_gb=1.5, rollout_kv_cache_gb=0.25)
    with open_engine(ecfg, "tiny-random", device="cpu", max_new_tokens=4):
        pass
    assert built[0]["kv_cache_memory_bytes"] == int(1.5 * 2**30)
    with open_engine(EngineConfig(backend="vllm"), "tiny-random", device="cpu"):
        pass
    assert "kv_cache_memory_bytes" not in built[1]
    assert rollout_llm_kwargs(ecfg) == {"kv_cache_memory_bytes": 2**28}
    assert rollout_llm_kwargs(EngineConfig(backend="vllm", rollouts="hf",
                                           rollout_kv_cache_gb=1)) == {}
    calls = []
    monkeypatch.setattr(trl_vllm, "LLM", lambda **kw: calls.append(kw), raising=False)
    original = trl_vllm.LLM
    with vb.trl_llm_kwargs(rollout_llm_kwargs(ecfg)):
        trl_vllm.LLM(model="m", gpu_memory_utilization=0.3)
    assert calls == [{"model": "m", "gpu_memory_utilization": 0.3,
                      "kv_cache_memory_bytes": 2**28}]
    assert trl_vllm.LLM is original
    with vb.trl_llm_kwargs({}):
        assert trl_vllm.LLM is original
    with pytest.raises(ConfigError, match="kv_cache_gb"):
        load_params({"engine": {"kv_cache_gb": 0}})


def test_server_flat_mask_args_round_trip():
    vd = VocabDropout.from_sizes(n_real=50, vocab_width=64, alpha=0.5, protected=[0, 7, 3])
    flat = vb.extra_args(vd, 9, flat=True)
    assert flat["vd_protected"] == "0,3,7"
    assert all(isinstance(v, str | int | float) for v in flat.values())  # vllm_xargs scalars
    assert vb.parse_extra_args(flat) == vb.parse_extra_args(vb.extra_args(vd, 9))
    with pytest.raises(ValueError, match="vd_protected"):
        vb.parse_extra_args({**flat, "vd_protected": "1,x"})


def test_server_engine_spreads_requests_over_several_servers(tokenizer):
    from vdlib.engines.serving import ServerEngine

    engine = ServerEngine(["http://a:1/", "http://b:2"], "m", tokenizer, concurrency=4)
    seen = []

    def post(body, url=None):
        seen.append(url)
        return {"choices": [{"index": i, "text": "x", "finish_reason": "stop",
                             "token_ids": [5]} for i in range(body["n"])]}

    engine._post = post
    out = engine.generate(["p0", "p1", "p2", "p3"], n=2, max_new_tokens=2, seed=0)
    assert len(out) == 8 and sorted(seen) == ["http://a:1"] * 2 + ["http://b:2"] * 2


def test_server_engine_sends_every_batch_at_once_with_its_own_seed_and_mask(tokenizer):
    from vdlib.engines.generation import GenerationBatch
    from vdlib.engines.serving import ServerEngine

    vd = VocabDropout.from_sizes(n_real=50, vocab_width=64, alpha=0.5, protected=[0])
    allowed = vd.sample(7).nonzero().flatten().tolist()

    def post(body, url=None):
        return {"choices": [{"index": i, "text": "x", "finish_reason": "stop",
                             "token_ids": [allowed[body["seed"] % len(allowed)]]}
                            for i in range(body["n"])]}

    batches = [GenerationBatch(["p0"], n=3, seed=1, vocab_dropout=vd, mask_seed=7),
               GenerationBatch(["p1", "p2"], n=2, seed=2)]
    together_engine = ServerEngine("http://a:1", "m", tokenizer)
    bodies = []
    together_engine._post = lambda body, url=None: bodies.append(body) or post(body)
    together = together_engine.generate_batches(batches, max_new_tokens=2)
    one = ServerEngine("http://a:1", "m", tokenizer)
    one._post = post
    assert together == [one.generate(b.prompts, n=b.n, seed=b.seed, max_new_tokens=2,
                                     vocab_dropout=b.vocab_dropout, mask_seed=b.mask_seed)
                        for b in batches]
    assert len(bodies) == 3 and "vllm_xargs" in bodies[0] and "vllm_xargs" not in bodies[1]
    assert [s.mask_seed for s in together[0]] == [7, 7, 7]


def _fake_vllm(monkeypatch, with_v2: bool) -> type:
    class V1(abc.ABC):
        @abc.abstractmethod
        def apply(self, logits): ...

    mods = {"vllm": types.ModuleType("vllm"), "vllm.v1": types.ModuleType("vllm.v1"),
            "vllm.v1.sample": types.ModuleType("vllm.v1.sample"),
            "vllm.v1.sample.logits_processor": types.ModuleType("lp")}
    mods["vllm"].__version__ = "0.25.1-fake"
    mods["vllm.v1.sample.logits_processor"].LogitsProcessor = V1
    if with_v2:
        v2 = types.ModuleType("v2")
        v2.LogitsProcessor = type("V2", (), {})
        mods["vllm.v1.worker.gpu.sample.logits_processor"] = v2
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setattr(vb, "_CLASS", [])
    return V1


@pytest.mark.parametrize("with_v2", [False, True])
def test_processor_class_is_built_over_the_interfaces_present(monkeypatch, with_v2):
    v1 = _fake_vllm(monkeypatch, with_v2)
    info = vb.vllm_interfaces()
    assert info == {"vllm_version": "0.25.1-fake", "v1": True, "v2": with_v2}
    cls = vb.logits_processor_class()
    assert issubclass(cls, v1) and cls.__name__ == "VocabDropoutLogitsProcessor"
    bases = {b.__name__ for b in cls.__mro__}
    assert ("V2" in bases) == with_v2
    vd = VocabDropout.from_sizes(n_real=20, vocab_width=32, alpha=0.5, protected=[0])
    proc = cls(None, "cpu", False)
    proc.masks.set(0, vb.extra_args(vd, 4))
    out = proc.apply(torch.zeros(1, 32))
    assert torch.equal(torch.isneginf(out[0]), vd.logits_processor(4).dropped)


def test_processor_is_passed_only_without_the_entry_point(monkeypatch):
    monkeypatch.setattr(vb, "entry_point_registered", lambda: True)
    assert vb.processor_fqcns() == []
    monkeypatch.setattr(vb, "entry_point_registered", lambda: False)
    assert vb.processor_fqcns() == [vb.PROCESSOR_FQCN]


def test_rollouts_are_checked_against_their_mask():
    vd = VocabDropout.from_sizes(n_real=40, vocab_width=48, alpha=0.5, protected=[0, 1])
    allowed = vd.sample(3).nonzero().flatten().tolist()
    dropped = (~vd.sample(3)).nonzero().flatten().tolist()
    check_rollouts_masked([allowed[:5], [], allowed[-3:]], vd, 3)
    check_rollouts_masked(torch.tensor([allowed[:4]]), vd, 3)
    with pytest.raises(RuntimeError, match="dropped by mask 3"):
        check_rollouts_masked([allowed[:2] + [dropped[0]]], vd, 3)
    with pytest.raises(RuntimeError, match="dropped"):
        check_rollouts_masked([[47]], vd, 3)  # a padded row


def test_each_stage_samples_from_the_checkpoint_the_previous_stage_saved(tmp_path,
                                                                         monkeypatch):
    """The loop's engine lifetime: the proposer reward and scoring open the frozen previous
    solver, curriculum generation opens the proposer this iteration just saved, each engine
    is closed before the next stage, and never two at once except the reward's during
    training."""
    from test_coevolution import tiny_params

    import vdlib.loop.coevolution as co
    import vdlib.loop.model_store as ms

    opened: list[tuple[str, bool]] = []
    live = []
    real = ms.open_engine

    def recording(ecfg, path, **kw):
        opened.append((str(path), kw.get("training_device") is not None))
        cm = real(ecfg, path, **kw)

        class Tracked:
            def __enter__(self):
                live.append(path)
                assert len(live) == 1, f"two engines at once: {live}"
                return cm.__enter__()

            def __exit__(self, *exc):
                live.remove(path)
                return cm.__exit__(*exc)

        return Tracked()

    monkeypatch.setattr(ms, "open_engine", recording)
    result = co.run(tiny_params(tmp_path, iterations=2))
    run_dir = result.run_dir
    base = ms.ModelStore(load_params(tiny_params(tmp_path, iterations=2))).base(
        "tiny-random", "solver")
    expect = [(base, True), (str(run_dir / "iter_1/proposer_model"), False), (base, False),
              (str(run_dir / "iter_1/solver_model"), True),
              (str(run_dir / "iter_2/proposer_model"), False),
              (str(run_dir / "iter_1/solver_model"), False)]
    assert opened == expect
    assert not live


def test_memory_owners_name_the_module_that_holds_the_tensors():
    import torch

    from vdlib.engines.setting import cuda_memory_owners

    held = torch.nn.Linear(1024, 1024)  # 4 MiB of float32 parameters
    loose = torch.zeros(2**20)  # 4 MiB outside any module
    text = cuda_memory_owners(device_type="cpu")
    assert "torch.nn.modules.linear.Linear" in text and "loose" in text
    del held, loose
