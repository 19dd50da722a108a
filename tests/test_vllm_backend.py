"""vdlib.engines.vllm_backend: shared mask state (CPU, no vLLM), adapters over fake and (if
installed) real vLLM base classes and the engine over a fake LLM (GPU runs:
tests/test_vllm_gpu.py)."""

from __future__ import annotations

import abc
import importlib.util
import json
import pickle
import subprocess
import sys
import types
from dataclasses import dataclass
from enum import Enum

import numpy as np
import pytest
import torch

from vdlib.engines import vllm_backend as vb
from vdlib.engines import vllm_engine as ve
from vdlib.engines.generation import Sample
from vdlib.method.vocab_dropout import VocabDropout

HAS_VLLM = importlib.util.find_spec("vllm") is not None
needs_vllm = pytest.mark.skipif(not HAS_VLLM, reason="vLLM not installed")


def _has_v2() -> bool:
    try:
        return HAS_VLLM and importlib.util.find_spec(
            "vllm.v1.worker.gpu.sample.logits_processor") is not None
    except ModuleNotFoundError:
        return False


needs_v2 = pytest.mark.skipif(not _has_v2(), reason="this vLLM has no model runner V2 "
                              "processor interface (added after 0.25)")
WIDTH = 64


@pytest.fixture
def vd():
    return VocabDropout.from_sizes(n_real=50, vocab_width=WIDTH, alpha=0.5, protected=[0, 1, 2])


def masked_rows(out: torch.Tensor) -> torch.Tensor:
    return torch.isneginf(out)


# ----------------------------------------------------------------------------- args


def test_extra_args_round_trip_through_json(vd):
    args = vb.extra_args(vd, seed=2**63 - 1)
    expected = vb.MaskSpec(0.5, 50, (0, 1, 2), 2**63 - 1)
    assert vb.parse_extra_args(args) == expected
    assert vb.parse_extra_args(json.loads(json.dumps(args))) == expected  # as the server sees it
    assert vb.parse_extra_args({**args, "vd_protected": [2, 0, 1, 0]}) == expected
    assert vb.parse_extra_args({**args, "vd_protected": []}).protected == ()


@pytest.mark.parametrize("args", [None, {}, {"kv_transfer_params": {"a": 1}}])
def test_no_mask_args_mean_no_mask(args):
    assert vb.parse_extra_args(args) is None


@pytest.mark.parametrize("key, value, match", [
    ("vd_seed", -1, "vd_seed"), ("vd_seed", 1.5, "vd_seed"), ("vd_seed", True, "vd_seed"),
    ("vd_alpha", 0.0, "vd_alpha"), ("vd_alpha", 1.5, "vd_alpha"), ("vd_alpha", "0.5", "vd_alpha"),
    ("vd_n_real", 0, "vd_n_real"), ("vd_protected", [0, 50], "vd_protected"),
    ("vd_protected", "0,one", "vd_protected"), ("vd_protected", "0,50", "vd_protected"),
    ("vd_protected", 3, "vd_protected"),
])
def test_malformed_args_raise_naming_the_key(vd, key, value, match):
    with pytest.raises(ValueError, match=match):
        vb.parse_extra_args({**vb.extra_args(vd, 1), key: value})


def test_partial_args_raise(vd):
    with pytest.raises(ValueError, match="lack"):
        vb.parse_extra_args({"vd_seed": 3, "vd_alpha": 0.5})


# ----------------------------------------------------------------------------- RequestMasks


def test_rows_get_their_own_masks_and_unmasked_rows_are_untouched(vd):
    masks = vb.RequestMasks()
    seeds = {0: 1, 2: 2, 3: 1, 5: 3}  # rows 0 and 3 share a mask (non-contiguous group)
    for row in range(6):
        assert masks.set(row, vb.extra_args(vd, seeds[row]) if row in seeds else None) == (
            row in seeds)
    logits = torch.randn(6, WIDTH)
    out = masks.apply(logits.clone())
    for row in range(6):
        if row in seeds:
            assert torch.equal(masked_rows(out[row]), ~vd.sample(seeds[row]))
            assert torch.equal(out[row][vd.sample(seeds[row])], logits[row][vd.sample(seeds[row])])
        else:
            assert torch.equal(out[row], logits[row])
    assert not torch.equal(vd.sample(1), vd.sample(2))


def test_one_shared_mask_and_row_mapping(vd):
    masks = vb.RequestMasks()
    for slot in (7, 3, 9):
        masks.set(slot, vb.extra_args(vd, 5))
    out = masks.apply(torch.zeros(4, WIDTH), rows=[3, 9, 4, 7])  # slot 4 has no mask
    assert torch.equal(masked_rows(out[[0, 1, 3]]), (~vd.sample(5)).expand(3, -1))
    assert not masked_rows(out[2]).any()


def test_width_comes_from_logits_padded_rows_dropped(vd):
    masks = vb.RequestMasks()
    masks.set(0, vb.extra_args(vd, 4))
    out = masks.apply(torch.zeros(1, WIDTH + 6))
    wide = VocabDropout.from_sizes(50, WIDTH + 6, 0.5, [0, 1, 2])
    assert torch.equal(masked_rows(out[0]), ~wide.sample(4))
    assert masked_rows(out[0, 50:]).all() and not masked_rows(out[0, :3]).any()


def test_no_dropped_id_can_be_argmax_or_sampled(vd):
    masks = vb.RequestMasks()
    for row in range(8):
        masks.set(row, vb.extra_args(vd, 100 + row))
    logits = torch.randn(8, WIDTH)
    for row in range(8):
        logits[row, ~vd.sample(100 + row)] += 50.0  # dropped ids would win without the mask
    out = masks.apply(logits)
    gen = torch.Generator().manual_seed(0)
    draws = torch.multinomial(out.softmax(-1), 200, replacement=True, generator=gen)
    for row in range(8):
        allowed = vd.sample(100 + row)
        assert allowed[out[row].argmax()] and allowed[draws[row]].all()


def test_move_swap_remove_and_mask_cache(vd):
    masks = vb.RequestMasks(cache_size=2)
    masks.set(0, vb.extra_args(vd, 1))
    masks.set(1, vb.extra_args(vd, 2))
    masks.move(0, 1, swap=True)
    assert (masks.specs[0].seed, masks.specs[1].seed) == (2, 1)
    masks.move(1, 3)
    assert set(masks.specs) == {0, 3} and masks.specs[3].seed == 1
    masks.remove(0)
    masks.remove(42)
    assert set(masks.specs) == {3}
    spec = masks.specs[3]
    assert masks.dropped(spec, WIDTH, "cpu") is masks.dropped(spec, WIDTH, "cpu")
    for seed in range(5):
        masks.dropped(spec._replace(seed=seed), WIDTH, "cpu")
    assert len(masks._dropped) == 2


# ----------------------------------------------------------------------------- fake vLLM bases


class Direction(Enum):
    UNIDIRECTIONAL = 1
    SWAP = 2


@dataclass(frozen=True)
class FakeBatchUpdate:
    batch_size: int
    removed: list
    added: list
    moved: list


class FakeV1Base(abc.ABC):
    @abc.abstractmethod
    def apply(self, logits): ...

    @abc.abstractmethod
    def is_argmax_invariant(self): ...

    @abc.abstractmethod
    def update_state(self, batch_update): ...


class FakeV2Base(abc.ABC):
    def add_request(self, req_idx, sampling_params):
        return True

    def apply_staged_writes(self):  # noqa: B027 (as in vLLM)
        pass

    @abc.abstractmethod
    def apply(self, logits, ctx): ...


def params(vd, seed):
    return types.SimpleNamespace(extra_args=None if seed is None else vb.extra_args(vd, seed))


@pytest.fixture(scope="module")
def fake_cls():
    return vb._build_processor_class(FakeV1Base, FakeV2Base)


def seeds_by_row(out):
    return [tuple(masked_rows(row).nonzero().flatten().tolist()) for row in out]


def dropped_of(vd, seed):
    return tuple((~vd.sample(seed)).nonzero().flatten().tolist()) if seed is not None else ()


def test_as_v1_processor_it_follows_batch_updates(vd, fake_cls):
    proc = fake_cls(None, torch.device("cpu"), False)  # how model runner V1 builds it
    assert proc.is_argmax_invariant() is False
    add = [(0, params(vd, 10), [1], []), (1, params(vd, None), None, []),
           (2, params(vd, 12), [], [])]
    proc.update_state(FakeBatchUpdate(3, [], add, []))
    proc.update_state(None)  # no change
    assert seeds_by_row(proc.apply(torch.zeros(3, WIDTH))) == [
        dropped_of(vd, s) for s in (10, None, 12)]
    # request 1 finishes, the last one (row 2) moves into its row; then rows 0 and 1 swap
    proc.update_state(FakeBatchUpdate(2, [1], [], [(2, 1, Direction.UNIDIRECTIONAL)]))
    proc.update_state(FakeBatchUpdate(2, [], [], [(0, 1, Direction.SWAP)]))
    assert seeds_by_row(proc.apply(torch.zeros(2, WIDTH))) == [
        dropped_of(vd, s) for s in (12, 10)]
    proc.update_state(FakeBatchUpdate(2, [], [(0, params(vd, None), [], [])], []))  # reuse row
    assert seeds_by_row(proc.apply(torch.zeros(2, WIDTH))) == [(), dropped_of(vd, 10)]
    proc.update_state(FakeBatchUpdate(1, [1], [], []))  # the last row finishes: no state left
    assert proc.masks.specs == {}
    with pytest.raises(ValueError, match="vd_alpha"):
        type(proc).validate_params(types.SimpleNamespace(extra_args={
            **vb.extra_args(vd, 1), "vd_alpha": 2.0}))


def test_as_v2_processor_it_maps_rows_to_slots(vd, fake_cls):
    proc = fake_cls(None, types.SimpleNamespace(vocab_size=WIDTH))  # as model runner V2 does
    assert proc.add_request(4, params(vd, 7)) is True
    assert proc.add_request(1, params(vd, None)) is False
    assert proc.add_request(6, params(vd, 8)) is True
    ctx = types.SimpleNamespace(idx_mapping_np=np.array([6, 1, 4]),
                                expanded_idx_mapping=torch.tensor([6, 1, 4]))
    assert seeds_by_row(proc.apply(torch.zeros(3, WIDTH), ctx)) == [
        dropped_of(vd, s) for s in (8, None, 7)]
    # speculative decoding: several logits rows per request, mapped by expanded_idx_mapping
    ctx = types.SimpleNamespace(idx_mapping_np=np.array([4, 6]),
                                expanded_idx_mapping=torch.tensor([4, 4, 6]))
    assert seeds_by_row(proc.apply(torch.zeros(3, WIDTH), ctx)) == [
        dropped_of(vd, s) for s in (7, 7, 8)]
    assert proc.add_request(4, params(vd, None)) is False  # a recycled slot is reset
    ctx = types.SimpleNamespace(idx_mapping_np=np.array([4]), expanded_idx_mapping=None)
    assert seeds_by_row(proc.apply(torch.zeros(1, WIDTH), ctx)) == [()]


def test_processor_classes_need_vllm_with_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)
    monkeypatch.setattr(vb, "_CLASS", [])
    with pytest.raises(ImportError, match=r"pip install -e '\.\[gpu\]'"):
        vb.VocabDropoutLogitsProcessor  # noqa: B018
    with pytest.raises(AttributeError):
        vb.NoSuchThing  # noqa: B018


def test_module_imports_without_vllm():
    code = ("import sys; sys.modules['vllm'] = None\n"
            "import vdlib.engines.vllm_backend as vb\n"
            "assert vb.parse_extra_args(None) is None and sys.modules['vllm'] is None\n"
            "from vdlib.engines.vllm_backend import *\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# ----------------------------------------------------------------------------- engine (fake LLM)


class FakeSamplingParams:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class FakeLLM:
    """Samples ``max_tokens`` ids uniformly from what the request's mask allows (or from all ids
    with ``honour_mask=False``), EOS (id 2) ending a one-token prompt's completions at step 3."""

    def __init__(self, vd, honour_mask=True):
        self.vd, self.honour_mask, self.calls = vd, honour_mask, []

    def generate(self, prompts, params, use_tqdm=False):
        self.calls.append((prompts, params))
        outs = []
        for prompt, sp in zip(prompts, params, strict=True):
            allowed = torch.ones(WIDTH, dtype=torch.bool)
            if self.honour_mask and getattr(sp, "allowed_token_ids", None):
                allowed = torch.zeros(WIDTH, dtype=torch.bool)
                allowed[sp.allowed_token_ids] = True
            elif self.honour_mask and getattr(sp, "extra_args", None):
                allowed = self.vd.sample(sp.extra_args["vd_seed"])
            gen = torch.Generator().manual_seed(sp.seed)
            comps = []
            for i in range(sp.n):
                ids = allowed.nonzero().flatten()[torch.randint(int(allowed.sum()),
                                                                (sp.max_tokens,), generator=gen)]
                ids = ids.tolist()
                reason = "length"
                if len(prompt["prompt_token_ids"]) == 1:
                    ids, reason = ids[:2] + [2], "stop"
                comps.append(types.SimpleNamespace(index=sp.n - 1 - i, token_ids=ids,
                                                   finish_reason=reason))
            outs.append(types.SimpleNamespace(outputs=comps))
        return outs


@pytest.fixture
def fake_vllm(monkeypatch):
    fake = types.SimpleNamespace(SamplingParams=FakeSamplingParams)
    monkeypatch.setitem(sys.modules, "vllm", fake)


@pytest.mark.parametrize("route", vb.ROUTES)
def test_engine_prompt_major_samples_within_the_mask(tokenizer, vd, fake_vllm, route,
                                                     monkeypatch):
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "0")
    llm = FakeLLM(vd)
    engine = ve.VLLMEngine(llm, tokenizer, route=route)
    out = engine.generate(["a b", "c"], n=3, max_new_tokens=5, seed=1, vocab_dropout=vd,
                          mask_seed=9)
    assert [(s.prompt_index, s.sample_index) for s in out] == [(p, i) for p in range(2)
                                                               for i in range(3)]
    assert all(isinstance(s, Sample) and s.mask_seed == 9 for s in out)
    assert [s.finish_reason for s in out] == ["length"] * 3 + ["stop"] * 3
    assert len({s.seed for s in out}) == 2 and len(out[0].token_ids) == 5
    prompts, sps = llm.calls[0]
    assert prompts[1] == {"prompt_token_ids": tokenizer("c", add_special_tokens=False)["input_ids"]}
    assert sps[0].top_k == 0 and sps[0].n == 3 and sps[0].detokenize is False
    if route == "processor":
        assert sps[0].extra_args == vb.extra_args(vd, 9)
    else:
        assert sps[0].allowed_token_ids == vd.allowed_token_ids(9)


def test_generate_batches_is_one_call_with_each_batch_seed_and_mask(tokenizer, vd, fake_vllm):
    from vdlib.engines.generation import GenerationBatch, generate_batches

    batches = [GenerationBatch(["a b"], n=3, seed=1, vocab_dropout=vd, mask_seed=9),
               GenerationBatch(["c", "d"], n=2, seed=2),
               GenerationBatch(["a b"], n=2, seed=3, vocab_dropout=vd, mask_seed=4)]
    llm = FakeLLM(vd)
    together = generate_batches(ve.VLLMEngine(llm, tokenizer), batches, max_new_tokens=6)
    assert len(llm.calls) == 1 and len(llm.calls[0][1]) == 4
    one_by_one = [ve.VLLMEngine(FakeLLM(vd), tokenizer).generate(
        b.prompts, n=b.n, seed=b.seed, vocab_dropout=b.vocab_dropout, mask_seed=b.mask_seed,
        max_new_tokens=6) for b in batches]
    assert together == one_by_one
    assert [s.mask_seed for s in together[0]] == [9] * 3 and together[1][0].mask_seed is None
    assert [s.prompt_index for s in together[1]] == [0, 0, 1, 1]


def test_engine_greedy_copies_and_guards(tokenizer, vd, fake_vllm, monkeypatch):
    llm = FakeLLM(vd)
    engine = ve.VLLMEngine(llm, tokenizer)
    out = engine.generate(["a"], n=3, temperature=0.0, max_new_tokens=4)
    assert llm.calls[-1][1][0].n == 1 and len({tuple(s.token_ids) for s in out}) == 1
    assert out[0].mask_seed is None and not hasattr(llm.calls[-1][1][0], "extra_args")
    with pytest.raises(ValueError, match="mask_seed"):
        engine.generate(["a"], vocab_dropout=vd)
    with pytest.raises(ValueError, match="transformers logits processors"):
        engine.generate(["a"], logits_processors=[object()])
    with pytest.raises(ValueError, match="route"):
        ve.VLLMEngine(llm, tokenizer, route="bad_words")
    big = VocabDropout.from_sizes(5000, 5000, 0.5, [0])
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "1")
    with pytest.raises(ValueError, match="VLLM_USE_V2_MODEL_RUNNER=0"):
        ve.VLLMEngine(llm, tokenizer, route="allowed_token_ids").generate(
            ["a"], vocab_dropout=big, mask_seed=1)


def test_engine_detects_an_ignored_mask(tokenizer, vd, fake_vllm):
    engine = ve.VLLMEngine(FakeLLM(vd, honour_mask=False), tokenizer)
    with pytest.raises(RuntimeError, match="dropped token ids"):
        engine.generate(["a"], n=4, max_new_tokens=20, vocab_dropout=vd, mask_seed=3)


def test_engine_needs_vllm(tokenizer, vd, monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(ImportError, match="gpu"):
        ve.VLLMEngine(FakeLLM(vd), tokenizer).generate(["a"])


def test_check_no_dropped(vd):
    allowed = vd.sample(4).nonzero().flatten().tolist()
    dropped = (~vd.sample(4)).nonzero().flatten().tolist()
    ok = Sample("p", 0, 0, allowed[:5], "", "length", 0, 4)
    ve.check_no_dropped([ok, Sample("p", 0, 1, dropped[:2], "", "length", 0, None)], vd)
    for ids in ([allowed[0], dropped[0]], [WIDTH + 3]):
        with pytest.raises(RuntimeError, match="dropped"):
            ve.check_no_dropped([ok, Sample("p", 0, 1, ids, "", "length", 0, 4)], vd)


# ----------------------------------------------------------------------------- real vLLM classes


FQCN = "vdlib.engines.vllm_backend:VocabDropoutLogitsProcessor"


@needs_vllm
def test_vllm_loaders_accept_the_dual_class_and_validate_params(vd):
    from vllm import SamplingParams
    from vllm.exceptions import VLLMValidationError
    from vllm.v1.sample.logits_processor import (
        _load_logitsprocs_by_fqcns,
        validate_logits_processors_parameters,
    )
    cls = vb.VocabDropoutLogitsProcessor
    assert cls is vb.logits_processor_class()
    assert _load_logitsprocs_by_fqcns([FQCN, cls]) == [cls, cls]  # model runner V1's loader
    if _has_v2():
        from vllm.v1.worker.gpu.sample.logits_processor.loader import (
            _load_v2_logitsprocs_by_fqcns,
        )

        assert _load_v2_logitsprocs_by_fqcns([FQCN, cls]) == [cls, cls]  # model runner V2's
    assert pickle.loads(pickle.dumps(cls)) is cls  # class objects cross to the engine process
    validate_logits_processors_parameters([FQCN], SamplingParams(extra_args=vb.extra_args(vd, 1)))
    with pytest.raises(VLLMValidationError, match="vd_n_real"):  # HTTP 400 on the server
        validate_logits_processors_parameters(
            [FQCN], SamplingParams(extra_args={**vb.extra_args(vd, 1), "vd_n_real": -5}))


@needs_vllm
def test_real_v1_batch_update_builder_drives_the_processor(vd):
    from vllm import SamplingParams
    from vllm.v1.sample.logits_processor import BatchUpdateBuilder, MoveDirectionality

    proc = vb.VocabDropoutLogitsProcessor(None, torch.device("cpu"), False)
    builder = BatchUpdateBuilder()
    for row, seed in enumerate((3, None, 4)):
        extra = vb.extra_args(vd, seed) if seed is not None else None
        builder.added.append((row, SamplingParams(seed=1, extra_args=extra), [1, 2], []))
    proc.update_state(builder.get_and_reset(3))
    assert seeds_by_row(proc.apply(torch.zeros(3, WIDTH))) == [dropped_of(vd, s)
                                                              for s in (3, None, 4)]
    builder.removed_append(0)
    builder.moved.append((2, 0, MoveDirectionality.UNIDIRECTIONAL))
    proc.update_state(builder.get_and_reset(2))
    assert seeds_by_row(proc.apply(torch.zeros(2, WIDTH))) == [dropped_of(vd, 4), ()]


@needs_vllm
@needs_v2
def test_real_v2_context_drives_the_processor(vd):
    from vllm import SamplingParams
    from vllm.v1.worker.gpu.sample.logits_processor import LogitsContext

    proc = vb.VocabDropoutLogitsProcessor(None, None)
    assert proc.add_request(5, SamplingParams(extra_args=vb.extra_args(vd, 6)))
    assert not proc.add_request(2, SamplingParams())
    mapping = torch.tensor([2, 5])
    ctx = LogitsContext(expanded_idx_mapping=mapping, idx_mapping=mapping,
                        idx_mapping_np=mapping.numpy(), expanded_local_pos=torch.zeros(2),
                        input_ids=torch.zeros(2), pos=torch.zeros(2),
                        seq_lens_upper_bound_np=np.ones(2))
    assert seeds_by_row(proc.apply(torch.zeros(2, WIDTH), ctx)) == [(), dropped_of(vd, 6)]


# The GPU runs of a real vllm.LLM (both routes, the server, mask identity, TRL's rollouts)
# are in tests/test_vllm_gpu.py.


def test_shutdown_runs_the_engine_finalizer_and_frees_the_model_weights():
    """An in-process engine's model stays reachable after vLLM 0.25.1's shutdown (measured on
    2 x H200, docs/SCALING.md): shutdown_llm runs the engine's finalizer and empties the
    weights in place, so their memory returns even though the test keeps a reference."""
    from types import SimpleNamespace

    import torch

    from vdlib.engines.vllm_backend import empty_module_weights, shutdown_llm

    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8))
    model.register_buffer("cos_sin", torch.ones(4))
    calls: list[str] = []
    runner = SimpleNamespace(model=model)
    core = SimpleNamespace(shutdown=lambda: (calls.append("shutdown"),
                                             setattr(runner, "model", None)))
    engine = SimpleNamespace(engine_core=core, _finalizer=lambda: calls.append("finalizer"),
                             model_executor=SimpleNamespace(
                                 driver_worker=SimpleNamespace(model_runner=runner)))
    shutdown_llm(SimpleNamespace(llm_engine=engine))
    assert calls == ["shutdown", "finalizer"]
    assert all(t.numel() == 0 for t in (*model.parameters(), *model.buffers()))
    assert model[0].weight.dtype == torch.float32  # same dtype and device, no storage

    class GraphWrapper:  # vLLM's CUDAGraphWrapper: not a module, forwards attribute lookups
        def __init__(self, runnable):
            self.runnable = runnable

        def __getattr__(self, key):
            return getattr(self.runnable, key)

    inner = torch.nn.Linear(8, 8)
    runner.model = GraphWrapper(GraphWrapper(inner))
    shutdown_llm(SimpleNamespace(llm_engine=engine))
    assert inner.weight.numel() == 0 and inner.bias.numel() == 0
    tied = torch.nn.Sequential(torch.nn.Embedding(4, 8), torch.nn.Linear(8, 4, bias=False))
    tied[1].weight = tied[0].weight
    assert empty_module_weights(tied) == 4 * 8 * 4  # one float32 storage, counted once
    # an engine-core process (no model in this process) only shuts down
    other = SimpleNamespace(engine_core=SimpleNamespace(shutdown=lambda: calls.append("core")))
    shutdown_llm(SimpleNamespace(llm_engine=other))
    assert calls[-1] == "core"


class _Worker:
    """Stands in for vLLM's GPU worker: its sleep releases, then runs vLLM's device-wide check."""

    def __init__(self, message):
        self.message, self.released = message, 0

    def sleep(self, level=1):
        self.released += 1
        if self.message:
            raise AssertionError(self.message)
        return level


def test_shared_gpu_sleep_check_is_a_warning_not_a_failure(caplog):
    from vdlib.engines import vllm_sleep as vs

    sleep = vs.tolerant_sleep(_Worker.sleep)
    assert vs.tolerant_sleep(sleep) is sleep  # wrapped once
    w = _Worker(vs.SHARED_GPU_SLEEP_ASSERTION)
    with caplog.at_level("WARNING", logger=vs.logger.name):
        assert sleep(w, level=2) is None
    assert w.released == 1 and "another process on this GPU" in caplog.text
    assert sleep(_Worker(None), level=2) == 2  # a clean sleep is unchanged
    with pytest.raises(AssertionError, match="something else"):
        sleep(_Worker("something else"))


def test_tolerate_shared_gpu_sleep_wraps_the_installed_worker(monkeypatch):
    from vdlib.engines import vllm_sleep as vs

    names = ["vllm", "vllm.v1", "vllm.v1.worker", "vllm.v1.worker.gpu_worker"]
    mods = {n: types.ModuleType(n) for n in names}
    cls = type("Worker", (), {"sleep": _Worker.sleep})
    mods["vllm.v1.worker.gpu_worker"].Worker = cls
    mods["vllm.v1.worker"].gpu_worker = mods["vllm.v1.worker.gpu_worker"]
    for n, m in mods.items():
        monkeypatch.setitem(sys.modules, n, m)
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")  # restored after the test
    vb.use_inprocess_engines()  # wraps it, as every engine's start does
    assert cls.sleep._vdlib_tolerant and vs.tolerate_shared_gpu_sleep()
    w = cls.__new__(cls)
    w.message, w.released = vs.SHARED_GPU_SLEEP_ASSERTION, 0
    assert w.sleep() is None and w.released == 1
    monkeypatch.setitem(sys.modules, "vllm.v1.worker.gpu_worker", None)  # import fails
    monkeypatch.delattr(mods["vllm.v1.worker"], "gpu_worker")
    assert vs.tolerate_shared_gpu_sleep() is False
