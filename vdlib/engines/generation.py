"""One generation interface over engines; the transformers engine is implemented here.

An engine turns prompt *texts* (already rendered with the chat template, see
:mod:`vdlib.method.prompts`) into :class:`Sample` records. Every engine implements
:class:`GenerationEngine.generate` with the same arguments and the same output order
(prompt-major: prompt 0's ``n`` samples, then prompt 1's, ...), so the co-evolution loop, the
scorer and the evaluation harness never know which engine runs. A vLLM engine (GPU profile)
implements the same method with ``SamplingParams``.

:class:`HFEngine` batches the expanded ``prompts x n`` list with left padding, shows a tqdm bar
and seeds each batch from ``derive_seed(seed, "generate", batch_index)`` inside a forked RNG, so
a fixed seed (and batch size) gives identical samples on CPU, whatever ran before.
"""

from __future__ import annotations

import copy
import inspect
import logging
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol

import torch
from tqdm.auto import tqdm
from transformers import GenerationConfig, LogitsProcessor, LogitsProcessorList

from vdlib.engines.sampling import sampling_processors
from vdlib.engines.split_linear import split_linears
from vdlib.method.seeding import derive_seed
from vdlib.method.vocab_dropout import VocabDropout
from vdlib.utils.terminal import bars_disabled

__all__ = ["Sample", "GenerationEngine", "GenerationBatch", "BatchedGenerate", "HFEngine",
           "eos_token_ids",
           "check_generate_args", "generate_batches", "cache_kwarg", "empty_cache"]

logger = logging.getLogger(__name__)

FinishReason = Literal["stop", "length"]


@dataclass(frozen=True)
class Sample:
    """One generated completion.

    ``token_ids`` are the generated ids up to and including the first EOS (``finish_reason``
    "stop") or all ``max_new_tokens`` ids ("length"); ``text`` is their decoding without special
    tokens. ``seed`` is the sampling seed of the batch the sample came from; ``mask_seed`` the
    vocabulary-dropout mask seed (None when no mask was applied).
    """

    prompt: str
    prompt_index: int
    sample_index: int
    token_ids: list[int]
    text: str
    finish_reason: FinishReason
    seed: int
    mask_seed: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class GenerationBatch:
    """One call's worth of :meth:`GenerationEngine.generate` arguments that may differ between
    the batches of :func:`generate_batches` (the sampling settings are shared)."""

    prompts: Sequence[str]
    n: int = 1
    seed: int = 0
    vocab_dropout: VocabDropout | None = None
    mask_seed: int | None = None


def generate_batches(engine: Any, batches: Sequence[GenerationBatch], **sampling: Any
                     ) -> list[list[Sample]]:
    """Each batch's samples, as ``engine.generate(batch.prompts, n=batch.n, seed=batch.seed,
    vocab_dropout=..., mask_seed=..., **sampling)`` would return them, in batch order.

    An engine with its own ``generate_batches`` (:class:`~vdlib.engines.vllm_engine.VLLMEngine`)
    gets all batches in one call, each batch keeping its own seed and mask, so that the engine
    schedules them together instead of waiting for each batch's longest sample; any other
    engine gets one ``generate`` call per batch."""
    own = getattr(engine, "generate_batches", None)
    if callable(own):
        return own(batches, **sampling)
    return [engine.generate(b.prompts, n=b.n, seed=b.seed, vocab_dropout=b.vocab_dropout,
                            mask_seed=b.mask_seed, **sampling) for b in batches]


class BatchedGenerate:
    """``generate`` for an engine whose work is done by ``generate_batches``: one batch. The
    subclass sets ``PROCESSOR_HINT``, the error for transformers logits processors, which
    cannot run inside its engine."""

    PROCESSOR_HINT = "transformers logits processors cannot run inside this engine"

    def generate(self, prompts: Sequence[str], *, n: int = 1, temperature: float = 1.0,
                 top_p: float = 1.0, top_k: int = 0, max_new_tokens: int = 256, seed: int = 0,
                 logits_processors: Sequence[Any] | None = None,
                 vocab_dropout: VocabDropout | None = None,
                 mask_seed: int | None = None) -> list[Sample]:
        if logits_processors:
            raise ValueError(self.PROCESSOR_HINT)
        batch = GenerationBatch(prompts, n=n, seed=seed, vocab_dropout=vocab_dropout,
                                mask_seed=mask_seed)
        return self.generate_batches([batch], temperature=temperature,  # type: ignore[attr-defined]
                                     top_p=top_p, top_k=top_k, max_new_tokens=max_new_tokens)[0]


class GenerationEngine(Protocol):
    """What every engine provides (transformers here; vLLM in the GPU profile)."""

    def generate(
        self,
        prompts: Sequence[str],
        *,
        n: int = 1,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        max_new_tokens: int = 256,
        seed: int = 0,
        logits_processors: Sequence[LogitsProcessor] | None = None,
        vocab_dropout: VocabDropout | None = None,
        mask_seed: int | None = None,
    ) -> list[Sample]:
        """``len(prompts) * n`` samples, prompt-major. ``temperature == 0`` is greedy;
        ``top_k == 0`` and ``top_p == 1`` disable those filters. With ``vocab_dropout``, the
        mask of ``mask_seed`` applies to every sample of the call (one batch of the paper) and
        each sample records ``mask_seed``."""
        ...


def eos_token_ids(model: Any, tokenizer: Any) -> list[int]:
    """Every EOS id of the tokenizer and the model's generation config, sorted."""
    ids: set[int] = set()
    for source in (getattr(model, "generation_config", None), tokenizer):
        eos = getattr(source, "eos_token_id", None)
        if isinstance(eos, int):
            ids.add(eos)
        elif isinstance(eos, list | tuple):
            ids.update(int(e) for e in eos)
    return sorted(ids)


def check_generate_args(prompts: Sequence[str], n: int, temperature: float, top_p: float,
                        top_k: int, max_new_tokens: int) -> None:
    """Shared argument checks of every engine's ``generate`` (ValueError naming the argument)."""
    if isinstance(prompts, str):
        raise TypeError("prompts must be a sequence of strings, not a single string")
    if n < 1:
        raise ValueError(f"n = {n}; allowed: n >= 1")
    if temperature < 0:
        raise ValueError(f"temperature = {temperature}; allowed: temperature >= 0 (0 = greedy)")
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p = {top_p}; allowed: 0 < top_p <= 1")
    if top_k < 0:
        raise ValueError(f"top_k = {top_k}; allowed: top_k >= 0 (0 = disabled)")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens = {max_new_tokens}; allowed: max_new_tokens >= 1")


def cache_kwarg(model: Any) -> str:
    """The keyword of a transformers model's KV cache: transformers renamed
    ``past_key_values`` to ``cache`` (5.2x deprecates the old name; the GPU machine's 5.17 knows
    only the old one)."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def empty_cache(model: Any) -> Any:
    """An empty ``DynamicCache`` for ``model`` (older transformers take no config: the cache
    then learns its layers as it fills)."""
    from transformers import DynamicCache

    try:
        return DynamicCache(config=model.config)
    except TypeError:
        return DynamicCache()


class HFEngine:
    """Batched transformers ``generate`` with left padding (see the module docstring)."""

    def __init__(self, model: Any, tokenizer: Any, *, batch_size: int = 8,
                 show_progress: bool = True, round_tokens: int | None = None,
                 split_decoding: bool = True) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size = {batch_size}; allowed: batch_size >= 1")
        if round_tokens is not None and round_tokens < 1:
            raise ValueError(f"round_tokens = {round_tokens}; allowed: None or >= 1")
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.show_progress = show_progress
        self.round_tokens = round_tokens
        self.split_decoding = split_decoding
        self.eos_ids = eos_token_ids(model, tokenizer)
        pad = tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else (self.eos_ids[0] if self.eos_ids else 0)

    def _generation_config(self, temperature: float, top_p: float, top_k: int,
                           max_new_tokens: int) -> GenerationConfig:
        # Every sampling field is set explicitly so the model's own generation_config defaults
        # (e.g. top_k=50) never leak in.
        common = dict(max_new_tokens=max_new_tokens, eos_token_id=self.eos_ids or None,
                      pad_token_id=self.pad_id)
        if temperature == 0:
            return GenerationConfig(do_sample=False, **common)
        # temperature, top-k and top-p come as explicit processors after the caller's (the mask):
        # the order generate would use, with a nucleus filter that sorts no full vocabulary
        return GenerationConfig(do_sample=True, temperature=1.0, top_p=1.0, top_k=0, **common)

    def _split(self, ids: list[int], max_new_tokens: int) -> tuple[list[int], FinishReason]:
        for i, t in enumerate(ids):
            if t in self.eos_ids:
                return ids[: i + 1], "stop"
        return ids[:max_new_tokens], "length"

    @torch.inference_mode()
    def generate(
        self,
        prompts: Sequence[str],
        *,
        n: int = 1,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        max_new_tokens: int = 256,
        seed: int = 0,
        logits_processors: Sequence[LogitsProcessor] | None = None,
        vocab_dropout: VocabDropout | None = None,
        mask_seed: int | None = None,
    ) -> list[Sample]:
        check_generate_args(prompts, n, temperature, top_p, top_k, max_new_tokens)
        if (vocab_dropout is None) != (mask_seed is None):
            raise ValueError("vocab_dropout and mask_seed go together: pass both or neither")
        jobs = [(pi, si, p) for pi, p in enumerate(prompts) for si in range(n)]
        gen_config = self._generation_config(temperature, top_p, top_k, max_new_tokens)
        device = self.model.device
        processors = LogitsProcessorList(logits_processors or [])
        if vocab_dropout is not None:
            processors.append(vocab_dropout.logits_processor(mask_seed, device))
        if temperature > 0:
            processors.extend(sampling_processors(temperature, top_k, top_p))
        fork_devices = [device] if device.type == "cuda" else []
        starts = range(0, len(jobs), self.batch_size)
        out: list[Sample] = []
        with self._decoding_threads(device):
            for b, start in enumerate(tqdm(starts, desc="generate", unit="batch",
                                           disable=not self.show_progress or len(starts) < 2
                                           or bars_disabled())):
                batch = jobs[start : start + self.batch_size]
                enc = self.tokenizer([p for _, _, p in batch], return_tensors="pt",
                                     padding=True, padding_side="left",
                                     add_special_tokens=False).to(device)
                batch_seed = derive_seed(seed, "generate", b)
                if self.round_tokens is not None and max_new_tokens > self.round_tokens:
                    new_tokens = self._generate_in_rounds(enc, gen_config, processors,
                                                          batch_seed, max_new_tokens,
                                                          fork_devices)
                else:
                    rows = [p for _, _, p in batch]
                    shared = self._shared_prompt_cache(rows, device)
                    if shared is not None:  # each distinct prompt prefilled once, then repeated
                        enc, cache = shared
                    with torch.random.fork_rng(devices=fork_devices):
                        torch.manual_seed(batch_seed)
                        generated = self.model.generate(**enc, generation_config=gen_config,
                                                        logits_processor=processors,
                                                        **({self._cache_kwarg: cache}
                                                           if shared is not None else {}))
                    new_tokens = generated[:, enc["input_ids"].shape[1]:].tolist()
                for (pi, si, prompt), ids in zip(batch, new_tokens, strict=True):
                    ids, reason = self._split(ids, max_new_tokens)
                    text = self.tokenizer.decode(ids, skip_special_tokens=True)
                    out.append(Sample(prompt, pi, si, ids, text, reason, batch_seed, mask_seed))
        logger.debug("generated %d samples in %d batches", len(out), len(starts))
        return out

    def _decoding_threads(self, device: Any) -> AbstractContextManager[None]:
        """On a CPU with several torch threads, the decoding steps split their linear layers
        across the threads (:mod:`vdlib.engines.split_linear`: the same bits, steps ~1.8x
        faster on 2 cores); elsewhere nothing changes."""
        if self.split_decoding and device.type == "cpu" and torch.get_num_threads() > 1:
            return split_linears(self.model)
        return nullcontext()

    @property
    def _cache_kwarg(self) -> str:
        return cache_kwarg(self.model)

    def _shared_prompt_cache(self, rows: list[str], device: Any) -> tuple[Any, Any] | None:
        """Prefix sharing for a batch that repeats prompts (``n`` samples of each, as scoring's M
        answers and generation's K questions are): each distinct prompt's KV cache is computed
        once (all but its last token, which ``generate`` feeds to get the first logits) and
        repeated for its rows, instead of prefilling every row. Returns the batch's encoding
        (left-padded to the distinct prompts' width) and the repeated cache, or None when no
        prompt repeats. The positions are ``generate``'s own (attention-mask cumsum), so the
        samples are the ones a plain call draws (tests/test_generation.py checks it); on 1 CPU
        thread the prefill was 35% of generation's 16 x 96-token stage and 22% of scoring's
        16 x 4 answers (benchmarks/hf_generation_speed.py)."""
        groups: list[str] = []
        index: list[int] = []
        for text in rows:
            if not groups or groups[-1] != text:
                groups.append(text)
            index.append(len(groups) - 1)
        if len(groups) == len(rows):
            return None
        enc = self.tokenizer(groups, return_tensors="pt", padding=True, padding_side="left",
                             add_special_tokens=False).to(device)
        ids, mask = enc["input_ids"], enc["attention_mask"]
        if ids.shape[1] < 2:
            return None
        positions = mask.long().cumsum(-1) - 1
        positions.masked_fill_(mask == 0, 1)
        cache = empty_cache(self.model)
        self.model(input_ids=ids[:, :-1], attention_mask=mask[:, :-1],
                   position_ids=positions[:, :-1], use_cache=True,
                   **{self._cache_kwarg: cache})
        rows_index = torch.tensor(index, device=ids.device)
        cache.batch_select_indices(rows_index)
        return {"input_ids": ids[rows_index], "attention_mask": mask[rows_index]}, cache

    def _generate_in_rounds(self, enc: Any, gen_config: GenerationConfig,
                            processors: LogitsProcessorList, batch_seed: int,
                            max_new_tokens: int, fork_devices: list) -> list[list[int]]:
        """New token ids of each row, sampled ``round_tokens`` at a time: after each round the
        rows that emitted EOS are done and only the others continue, from their exact token
        ids (prompt + everything sampled so far; the KV cache is rebuilt by one prefill), so a
        batch no longer decodes at full width until its slowest row ends. Each round is a
        ``generate`` call seeded from ``(batch_seed, round)``: the same sampling distribution
        as one call, a different random stream."""
        device = self.model.device
        prompts = [row[mask.bool()].tolist() for row, mask in
                   zip(enc["input_ids"], enc["attention_mask"], strict=True)]
        done: list[list[int]] = [[] for _ in prompts]
        active = list(range(len(prompts)))
        r = 0
        while active:
            budget = min(self.round_tokens or max_new_tokens,
                         max_new_tokens - len(done[active[0]]))
            seqs = [prompts[i] + done[i] for i in active]
            width = max(map(len, seqs))
            ids = torch.full((len(seqs), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros((len(seqs), width), dtype=torch.long)
            for j, seq in enumerate(seqs):
                ids[j, width - len(seq):] = torch.tensor(seq, dtype=torch.long)
                mask[j, width - len(seq):] = 1
            config = copy.deepcopy(gen_config)
            config.max_new_tokens = budget
            with torch.random.fork_rng(devices=fork_devices):
                torch.manual_seed(derive_seed(batch_seed, "round", r))
                out = self.model.generate(input_ids=ids.to(device),
                                          attention_mask=mask.to(device),
                                          generation_config=config, logits_processor=processors)
            still = []
            for i, new in zip(active, out[:, width:].tolist(), strict=True):
                kept, reason = self._split(new, budget)
                done[i].extend(kept)
                if reason == "length" and len(done[i]) < max_new_tokens:
                    still.append(i)
            logger.info("generation round %d: %d of %d rows still going (%d tokens each)",
                        r, len(still), len(prompts), len(done[still[0]]) if still else 0)
            active, r = still, r + 1
        return done
