"""vdlib's generation engine over a ``vllm.LLM`` (:class:`VLLMEngine`), and the check that no
sample holds an id its mask drops (:func:`check_no_dropped`, shared with the server engine).

The mask reaches vLLM through :mod:`vdlib.engines.vllm_backend` (the seeded logits processor, or the
``allowed_token_ids`` route); :func:`vdlib.engines.vllm_backend.build_llm` starts the ``LLM`` this
engine wraps. The module imports without vLLM; generating needs it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

import torch

from vdlib.engines import generation
from vdlib.engines.generation import GenerationBatch, Sample
from vdlib.engines.vllm_backend import (
    MRV2_MAX_ALLOWED_TOKEN_IDS,
    ROUTES,
    extra_args,
    require_vllm,
    shutdown_llm,
)
from vdlib.method.seeding import derive_seed
from vdlib.method.vocab_dropout import VocabDropout
from vdlib.utils.terminal import bars_disabled

__all__ = ["VLLMEngine", "check_no_dropped"]

logger = logging.getLogger(__name__)


def check_no_dropped(samples: Sequence[Sample], vd: VocabDropout) -> None:
    """Raise RuntimeError if a sample holds an id that its ``mask_seed``'s mask drops (a
    processor that was not loaded, e.g. an entry-point plugin under speculative decoding)."""
    bad = []
    for s in samples:
        if s.mask_seed is None or not s.token_ids:
            continue
        ids = torch.tensor(s.token_ids, dtype=torch.long)
        allowed = vd.sample(s.mask_seed)
        outside = ids >= allowed.shape[0]
        hit = outside | ~allowed[ids.clamp(max=allowed.shape[0] - 1)]
        if bool(hit.any()):
            bad.append((s.prompt_index, s.sample_index, ids[hit].tolist()[:5]))
    if bad:
        raise RuntimeError(f"{len(bad)} samples contain dropped token ids (prompt, sample, ids): "
                           f"{bad[:3]}; is the vdlib logits processor loaded in vLLM (and "
                           "speculative decoding off)?")


def _uses_v2_runner(llm: Any) -> bool:
    config = getattr(getattr(llm, "llm_engine", None), "vllm_config", None)
    if config is not None and hasattr(config, "use_v2_model_runner"):
        return bool(config.use_v2_model_runner)
    return os.environ.get("VLLM_USE_V2_MODEL_RUNNER", "").lower() not in ("0", "false")


class VLLMEngine(generation.BatchedGenerate):
    """:class:`vdlib.engines.generation.GenerationEngine` over ``vllm.LLM.generate``.

    ``route="processor"`` sends the mask as extra args (the LLM must load
    :data:`VocabDropoutLogitsProcessor`); ``"allowed_token_ids"`` sends the allowed ids (MRv1
    only at real vocabulary sizes). Prompts are tokenised here without special tokens, as in
    :class:`~vdlib.engines.generation.HFEngine`; prompt ``i`` gets seed
    ``derive_seed(seed, "vllm", i)`` (vLLM seeds its ``n`` samples with seed + sample index). Every
    masked call ends with :func:`check_no_dropped`.
    """

    PROCESSOR_HINT = ("transformers logits processors cannot run inside vLLM; load vLLM "
                      "processors with LLM(logits_processors=[...])")

    def __init__(self, llm: Any, tokenizer: Any = None, *, route: str = "processor",
                 show_progress: bool = True) -> None:
        if route not in ROUTES:
            raise ValueError(f"route = {route!r} is not allowed; allowed values: {ROUTES}")
        self.llm = llm
        self.tokenizer = tokenizer if tokenizer is not None else llm.get_tokenizer()
        self.route = route
        self.show_progress = show_progress

    def close(self) -> None:
        """Shut the engine down and free its GPU memory (:func:`shutdown_llm`)."""
        if self.llm is not None:
            llm, self.llm = self.llm, None
            shutdown_llm(llm)

    def __enter__(self) -> VLLMEngine:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _mask_kw(self, batch: GenerationBatch) -> dict[str, Any]:
        vd, seed = batch.vocab_dropout, batch.mask_seed
        if (vd is None) != (seed is None):
            raise ValueError("vocab_dropout and mask_seed go together: pass both or neither")
        if vd is None:
            return {}
        if self.route == "processor":
            return {"extra_args": extra_args(vd, seed)}
        ids = vd.allowed_token_ids(seed)
        if len(ids) > MRV2_MAX_ALLOWED_TOKEN_IDS and _uses_v2_runner(self.llm):
            raise ValueError(f"{len(ids)} allowed ids exceed vLLM's model runner V2 cap of "
                             f"{MRV2_MAX_ALLOWED_TOKEN_IDS}: set VLLM_USE_V2_MODEL_RUNNER=0 "
                             "before building the LLM, or use route='processor'")
        return {"allowed_token_ids": ids}

    def generate_batches(self, batches: Sequence[GenerationBatch], *, temperature: float = 1.0,
                         top_p: float = 1.0, top_k: int = 0, max_new_tokens: int = 256
                         ) -> list[list[Sample]]:
        """Every batch in ONE ``LLM.generate`` call (vLLM schedules them together), each with
        its own seeds and mask; the samples are those that one :meth:`generate` call per batch
        would give (:func:`vdlib.engines.generation.generate_batches`)."""
        for b in batches:
            generation.check_generate_args(b.prompts, b.n, temperature, top_p, top_k,
                                           max_new_tokens)
        sampling_params = require_vllm().SamplingParams
        greedy = temperature == 0  # vLLM rejects n > 1 under greedy: one request, n copies
        requests: list[tuple[int, int, int, str]] = []  # (batch, prompt index, seed, prompt)
        params = []
        for bi, b in enumerate(batches):
            mask_kw = self._mask_kw(b)
            for pi, prompt in enumerate(b.prompts):
                s = derive_seed(b.seed, "vllm", pi)
                requests.append((bi, pi, s, prompt))
                params.append(sampling_params(n=1 if greedy else b.n, temperature=temperature,
                                              top_p=top_p, top_k=top_k, max_tokens=max_new_tokens,
                                              seed=s, detokenize=False, **mask_kw))
        if not requests:
            return [[] for _ in batches]
        enc = self.tokenizer([r[3] for r in requests], add_special_tokens=False)["input_ids"]
        outputs = self.llm.generate([{"prompt_token_ids": ids} for ids in enc], params,
                                    use_tqdm=self.show_progress and not bars_disabled())
        result: list[list[Sample]] = [[] for _ in batches]
        for (bi, pi, s, prompt), out in zip(requests, outputs, strict=True):
            completions = sorted(out.outputs, key=lambda c: c.index)
            for si in range(batches[bi].n):
                comp = completions[0 if greedy else si]
                if comp.finish_reason not in ("stop", "length"):
                    raise RuntimeError(f"prompt {pi}: vLLM finish_reason {comp.finish_reason!r}")
                ids = list(comp.token_ids)
                text = self.tokenizer.decode(ids, skip_special_tokens=True)
                result[bi].append(Sample(prompt, pi, si, ids, text, comp.finish_reason, s,
                                         batches[bi].mask_seed))
        for b, samples in zip(batches, result, strict=True):
            if b.vocab_dropout is not None:
                check_no_dropped(samples, b.vocab_dropout)
        logger.debug("vLLM: %d batches, %d samples (route %s)", len(batches),
                     sum(map(len, result)), self.route)
        return result
