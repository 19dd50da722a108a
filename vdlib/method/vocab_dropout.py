"""Vocabulary dropout: a hard, per-batch random mask over the proposer's output vocabulary.

Paper, Sec. "Vocabulary dropout" and App. "Vocabulary dropout implementation": at each batch b,
every non-protected token v survives with probability alpha (m_v ~ Bernoulli(alpha)); protected
format-critical tokens always survive; dropped tokens get logit -inf before sampling
(temperature, top-k, top-p). The mask applies at *sampling* time only: the GRPO update still
computes log-probabilities over the full vocabulary.

Three vocabulary sizes (transformers' tokenizers and model configs): ``tokenizer.vocab_size`` omits
added tokens; ``len(tokenizer)`` is the number of real ids; the model's logits width
(``config.vocab_size``) may be larger, and those padded rows are always dropped. Which ids the
Bernoulli draw covers is ``width`` (config ``vocab_dropout.width``,
:data:`~vdlib.method.mask_schedule.WIDTHS`):

- ``"vocab_size"`` (default, the paper's snippet in App. "Vocabulary dropout implementation":
  ``V = tokenizer.vocab_size``; ``mask = torch.bernoulli(torch.full((V,), alpha))``): ids in
  ``[vocab_size, len(tokenizer))`` (Qwen's added tokens: ``<|im_end|>``, ``<tool_call>``, ...)
  are outside the drawn mask, so they are never allowed unless protected. The snippet's
  ``mask[t] = True`` cannot index them, but Algorithm 1 writes the mask as the draw union the
  protected set F, so protected added tokens (EOS, chat-template tokens) are kept.
- ``"len_tokenizer"``: the draw covers every real id, so added tokens survive with
  probability alpha like any other.

The draw is ``torch.rand(n_real, generator=torch.Generator().manual_seed(seed)) < alpha`` on the
CPU, then ids at or above the drawn width are dropped, so both widths give the same mask on the
shared ids, and a seed gives the same mask on every machine, rank and device; the mask seed of
every batch comes from :func:`mask_seed` and is stored with every generated sample.

What :func:`protected_token_ids` returns:

- SmolLM2-135M-Instruct (49,152 real ids, no padded rows): 15 ids: ``<|im_start|>`` (1),
  ``<|im_end|>`` (2, EOS and pad) and the pieces ``<`` `` <`` ``</`` `` </`` ``question`` ``>``
  ``\\`` `` \\`` ``box`` ``ed`` ``{`` ``}`` `` }`` (the test suite pins this set).
  ``<|endoftext|>`` (0) is neither EOS nor emitted by the chat template, so it can be dropped.
- Qwen3 (151,669 real ids, logits width 151,936): ``<|endoftext|>``, ``<|im_start|>``,
  ``<|im_end|>`` (EOS), ``<think>``/``</think>`` where the template emits them, and the
  format pieces as Qwen's BPE splits them; computed from the tokenizer at run time (the Hub is
  not reachable here, so no list is pinned for it).

>>> import torch
>>> vd = VocabDropout.from_sizes(n_real=10, vocab_width=12, alpha=0.5, protected=[0, 1])
>>> m = vd.sample(seed=3)
>>> m.shape, bool(m[0] and m[1]), bool(m[10] or m[11])
(torch.Size([12]), True, False)
>>> torch.equal(m, vd.sample(seed=3))
True
>>> narrow = VocabDropout.from_sizes(10, 12, alpha=0.5, protected=[0, 1, 9], n_draw=8)
>>> m8 = narrow.sample(seed=3)
>>> torch.equal(m8[:8], m[:8]), bool(m8[8]), bool(m8[9])  # id 8 undrawn, 9 protected
(True, False, True)

Which alpha each iteration and phase uses (the schedules ``fixed``, ``linear``, ``adaptive``;
the phase switch) is :mod:`vdlib.method.mask_schedule`, torch-free; :func:`phase_mask` turns its
:class:`~vdlib.method.mask_schedule.MaskSchedule` and
:class:`~vdlib.method.mask_schedule.MaskSpec` into iteration t's mask for one phase.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

import torch
from transformers import LogitsProcessor

from vdlib.method.mask_schedule import (
    DEFAULT_FORMAT_STRINGS,
    PHASES,
    WIDTHS,
    MaskSchedule,
    MaskSpec,
    check_alpha,
    phase_alphas,
)
from vdlib.method.seeding import derive_seed

__all__ = [
    "draw_width",
    "phase_mask",
    "protected_token_ids",
    "VocabDropout",
    "VocabMaskProcessor",
    "apply_mask",
    "mask_seed",
]

logger = logging.getLogger(__name__)

# Contexts in which a format string is tokenised: start of text, after a space, a newline, two
# newlines, a word, a digit, punctuation; followed by nothing, a newline, a space, a word or digit.
_PREFIXES = ("", " ", "\n", "\n\n", "word", "word ", "7", ". ", ":", "}")
_SUFFIXES = ("", "\n", " ", "\n\n", "x", "7", ".")


# ----------------------------------------------------------------------------- protected ids


def _eos_ids(tokenizer: Any, generation_config: Any = None) -> set[int]:
    ids: set[int] = set()
    for source in (tokenizer, generation_config):
        eos = getattr(source, "eos_token_id", None) if source is not None else None
        if isinstance(eos, int):
            ids.add(eos)
        elif isinstance(eos, list | tuple):
            ids.update(int(e) for e in eos)
    return ids


def _template_special_ids(tokenizer: Any) -> set[int]:
    """Added / special token ids that the chat template emits around a conversation."""
    added = set(getattr(tokenizer, "added_tokens_decoder", {}) or {})
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    if not getattr(tokenizer, "chat_template", None):
        return special
    conversation = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                    {"role": "assistant", "content": "a"}]
    ids: set[int] = set()
    for msgs, gen_prompt in ((conversation, False), (conversation[:2], True)):
        try:
            text = tokenizer.apply_chat_template(msgs, tokenize=False,
                                                 add_generation_prompt=gen_prompt)
        except Exception as err:  # a template may reject a system role, etc.
            logger.debug("chat template rendering failed: %s", err)
            continue
        ids.update(tokenizer.encode(text, add_special_tokens=False))
    return {i for i in ids if i in added or i in special}


def _piece_ids(tokenizer: Any, text: str, prefix: str, suffix: str) -> set[int]:
    """Ids of the tokens covering ``text`` when ``prefix + text + suffix`` is tokenised."""
    full = prefix + text + suffix
    start, end = len(prefix), len(prefix) + len(text)
    try:
        enc = tokenizer(full, add_special_tokens=False, return_offsets_mapping=True)
        offsets = enc["offset_mapping"]
    except (NotImplementedError, ValueError, TypeError, KeyError):
        offsets = None
    if offsets is not None:
        ids = {tid for tid, (a, b) in zip(enc["input_ids"], offsets, strict=True)
               if a < end and b > start}
    else:  # slow tokenizers (no offsets): tokens of the whole string not made by the context
        ids = set(tokenizer.encode(full, add_special_tokens=False))
        ids -= set(tokenizer.encode(prefix, add_special_tokens=False)) if prefix else set()
        ids -= set(tokenizer.encode(suffix, add_special_tokens=False)) if suffix else set()
    if not text.strip():  # a whitespace format string ("\n\n"): its whitespace tokens
        return {tid for tid in ids if (piece := tokenizer.decode([tid])) and not piece.strip()
                and piece in text}
    # keep tokens that are a piece of ``text`` (up to surrounding whitespace), not merges with
    # the context such as ":\\" or "}."
    return {tid for tid in ids if (piece := tokenizer.decode([tid]).strip()) and piece in text}


def protected_token_ids(tokenizer: Any, format_strings: Sequence[str] = DEFAULT_FORMAT_STRINGS,
                        extra: Iterable[int] = (), *, generation_config: Any = None) -> set[int]:
    """Token ids that vocabulary dropout never drops.

    Every EOS id (tokenizer and ``generation_config``), the pad id, every special / added token
    that the chat template emits, every token covering a piece of a format string as the
    tokenizer actually splits it in several contexts (start of text, after a space, a newline,
    a word, a digit, ...), and ``extra``. A token counts as a piece when its text, up to
    surrounding whitespace, is a substring of the format string: merges with the context such as
    ``"}}"`` or ``":\\"`` are not protected. That is fine because training uses the sampled ids
    and never re-tokenises decoded text. A format string of whitespace only (two newlines, say)
    protects the whitespace tokens whose text is a substring of it (one newline, two newlines).
    """
    ids = _eos_ids(tokenizer, generation_config)
    if getattr(tokenizer, "pad_token_id", None) is not None:
        ids.add(int(tokenizer.pad_token_id))
    ids |= _template_special_ids(tokenizer)
    for s in format_strings:
        if not s:
            continue
        for prefix in _PREFIXES:
            for suffix in _SUFFIXES:
                ids |= _piece_ids(tokenizer, s, prefix, suffix)
    ids.update(int(i) for i in extra)
    n_real = len(tokenizer)
    bad = sorted(i for i in ids if not 0 <= i < n_real)
    if bad:
        raise ValueError(f"protected ids {bad[:5]} are outside the real ids [0, {n_real})")
    return ids


# ----------------------------------------------------------------------------- the mask


def draw_width(tokenizer: Any, width: str = "vocab_size") -> int:
    """How many ids (from 0) the Bernoulli draw covers: ``tokenizer.vocab_size`` (the paper's
    snippet) or ``len(tokenizer)`` (every real id), never more than ``len(tokenizer)``."""
    if width not in WIDTHS:
        raise ValueError(f"width = {width!r} is not allowed; allowed values: {', '.join(WIDTHS)}")
    n_real = len(tokenizer)
    size = getattr(tokenizer, "vocab_size", None) if width == "vocab_size" else None
    return n_real if size is None else min(int(size), n_real)


def apply_mask(scores: torch.Tensor, dropped: torch.Tensor) -> torch.Tensor:
    """Set dropped logits to -inf in place: ``scores`` (batch, V), ``dropped`` bool (V,).

    The one tensor operation shared by the transformers processor and the vLLM adapters.
    """
    if scores.shape[-1] != dropped.shape[0]:
        raise ValueError(f"logits width {scores.shape[-1]} != mask width {dropped.shape[0]}")
    return scores.masked_fill_(dropped, float("-inf"))


class VocabMaskProcessor(LogitsProcessor):
    """transformers ``LogitsProcessor``: one ``masked_fill_`` per step (also under greedy).

    User processors run after the built-in ones and before temperature / top-k / top-p, so the
    sampling distribution is renormalised over the surviving tokens.
    """

    def __init__(self, allowed: torch.Tensor) -> None:
        self.allowed = allowed
        self.dropped = ~allowed
        self.noop = not bool(self.dropped.any())

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.noop:  # alpha = 1 and no padded rows: bit-identical to no processor at all
            return scores
        if self.dropped.device != scores.device:
            self.dropped = self.dropped.to(scores.device)
        return apply_mask(scores, self.dropped)


class VocabDropout:
    """Bernoulli(alpha) masks over the real token ids, with protected ids and padded rows.

    ``tokenizer`` gives the real ids (``len(tokenizer)``), the drawn ids (``width``, see
    :func:`draw_width` and the module docstring: ids in ``[n_draw, len(tokenizer))`` are kept
    only when protected) and, unless ``protected`` is given, the protected set
    (:func:`protected_token_ids`). ``vocab_width`` is the logits width (the model's
    ``config.vocab_size``; default ``len(tokenizer)``): ids in ``[len(tokenizer), vocab_width)``
    are always dropped. Masks are cached per (seed, device) (the last ``cache_size`` of them).
    """

    def __init__(self, tokenizer: Any, alpha: float, vocab_width: int | None = None,
                 protected: Iterable[int] | None = None, *, cache_size: int = 16,
                 width: str = "vocab_size") -> None:
        n_real = len(tokenizer)
        if protected is None:
            protected = protected_token_ids(tokenizer)
        self._init(n_real, vocab_width, alpha, protected, cache_size,
                   draw_width(tokenizer, width))

    @classmethod
    def for_model(cls, model: Any, tokenizer: Any, alpha: float,
                  format_strings: Sequence[str] = DEFAULT_FORMAT_STRINGS,
                  extra: Iterable[int] = (), width: str = "vocab_size") -> VocabDropout:
        """Mask for ``model``'s logits width, protecting the generation config's EOS ids too."""
        logits_width = model.get_output_embeddings().weight.shape[0]
        protected = protected_token_ids(tokenizer, format_strings, extra,
                                        generation_config=getattr(model, "generation_config", None))
        return cls(tokenizer, alpha, vocab_width=logits_width, protected=protected, width=width)

    @classmethod
    def for_checkpoint(cls, path: str, tokenizer: Any, alpha: float,
                       format_strings: Sequence[str] = DEFAULT_FORMAT_STRINGS,
                       extra: Iterable[int] = (), width: str = "vocab_size") -> VocabDropout:
        """The same mask as :meth:`for_model` for the checkpoint at ``path``, read from its
        ``config.json`` and ``generation_config.json`` without loading weights (for engines
        that load the weights themselves, e.g. vLLM)."""
        from transformers import AutoConfig, GenerationConfig

        config = AutoConfig.from_pretrained(path)
        logits_width = config.get_text_config().vocab_size
        try:
            gen_config = GenerationConfig.from_pretrained(path)
        except OSError:  # no generation_config.json: the model config's ids
            gen_config = GenerationConfig.from_model_config(config)
        protected = protected_token_ids(tokenizer, format_strings, extra,
                                        generation_config=gen_config)
        return cls(tokenizer, alpha, vocab_width=logits_width, protected=protected, width=width)

    @classmethod
    def from_sizes(cls, n_real: int, vocab_width: int | None, alpha: float,
                   protected: Iterable[int], *, cache_size: int = 16,
                   n_draw: int | None = None) -> VocabDropout:
        """Build without a tokenizer (e.g. inside a vLLM worker, or for random-init models);
        ``n_draw`` = the drawn ids (default: all ``n_real``)."""
        obj = cls.__new__(cls)
        obj._init(n_real, vocab_width, alpha, protected, cache_size, n_draw)
        return obj

    def _init(self, n_real: int, vocab_width: int | None, alpha: float,
              protected: Iterable[int], cache_size: int, n_draw: int | None = None) -> None:
        self.alpha = check_alpha(alpha)
        width = n_real if vocab_width is None else int(vocab_width)
        if width < 1 or n_real < 1:
            raise ValueError(f"vocab_width = {width}, n_real = {n_real}; both must be >= 1")
        self.n_real = min(n_real, width)  # ids beyond the logits width can never be sampled
        self.n_draw = self.n_real if n_draw is None else max(0, min(int(n_draw), self.n_real))
        self.vocab_width = width
        prot = sorted({int(i) for i in protected if 0 <= int(i) < self.n_real})
        self.protected = torch.tensor(prot, dtype=torch.long)
        self._is_protected = torch.zeros(self.n_real, dtype=torch.bool)
        self._is_protected[self.protected] = True
        self._cache: OrderedDict[tuple[int, str], torch.Tensor] = OrderedDict()
        self._cache_size = cache_size

    def __repr__(self) -> str:
        return (f"VocabDropout(alpha={self.alpha}, n_real={self.n_real}, n_draw={self.n_draw}, "
                f"vocab_width={self.vocab_width}, protected={len(self.protected)})")

    def sample(self, seed: int, device: str | torch.device = "cpu") -> torch.BoolTensor:
        """The allowed-token mask (True = allowed), shape ``(vocab_width,)``, for ``seed``."""
        key = (int(seed), str(torch.device(device)))
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        allowed = torch.zeros(self.vocab_width, dtype=torch.bool)
        if self.alpha == 1.0:
            allowed[: self.n_draw] = True
        else:  # the draw spans every real id, so both widths agree on [0, n_draw)
            gen = torch.Generator(device="cpu").manual_seed(int(seed))
            allowed[: self.n_real] = torch.rand(self.n_real, generator=gen) < self.alpha
            allowed[self.n_draw : self.n_real] = False
        allowed[self.protected] = True
        allowed = allowed.to(device)
        self._cache[key] = allowed
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return allowed

    def logits_processor(self, seed: int, device: str | torch.device = "cpu") -> VocabMaskProcessor:
        """A transformers processor applying the mask of ``seed``."""
        return VocabMaskProcessor(self.sample(seed, device))

    def allowed_token_ids(self, seed: int) -> list[int]:
        """Allowed ids as a list, for vLLM's ``SamplingParams.allowed_token_ids`` (the paper's
        route; on vLLM's V2 model runner it is capped at 1,024 ids: set
        ``VLLM_USE_V2_MODEL_RUNNER=0`` or use the seeded processor in
        ``vdlib.engines.vllm_backend``)."""
        return self.sample(seed).nonzero(as_tuple=True)[0].tolist()

    def dropped_ids(self, token_ids: Iterable[int], seed: int) -> list[int]:
        """The ids of ``token_ids`` (e.g. a sample's) that the mask of ``seed`` drops, in order;
        ids at or beyond the logits width count as dropped. ``[]`` for a masked sample."""
        allowed = self.sample(seed)
        return [int(t) for t in token_ids if not 0 <= int(t) < self.vocab_width
                or not bool(allowed[int(t)])]

    def kept_fraction(self, seed: int) -> float:
        """Fraction of the non-protected drawn ids (below ``n_draw``) that the mask of ``seed``
        keeps: about alpha."""
        allowed = self.sample(seed)[: self.n_draw]
        free = ~self._is_protected[: self.n_draw]
        return float(allowed[free].float().mean()) if bool(free.any()) else 1.0


# ----------------------------------------------------------------------------- seeds


def mask_seed(run_seed: int, iteration: int, phase: str, step: int) -> int:
    """The mask seed of one batch: ``derive_seed(run_seed, "vocab_dropout", iteration, phase,
    step)``.

    ``phase`` is ``"train"`` (a GRPO rollout batch; ``step`` = the generation step) or ``"gen"``
    (curriculum generation; ``step`` = the generation batch). Stored with every sample, so any
    output can be re-checked against its mask.
    """
    if phase not in PHASES:
        raise ValueError(f"phase = {phase!r} is not allowed; allowed values: {', '.join(PHASES)}")
    return derive_seed(run_seed, "vocab_dropout", int(iteration), phase, int(step))


# ----------------------------------------------------------------------------- a run's masks


def phase_mask(schedule: MaskSchedule, spec: MaskSpec, t: int, phase: str, tok: Any, *,
               model: Any = None, path: str | None = None,
               history: Sequence[Any] | None = None) -> VocabDropout | None:
    """Iteration ``t``'s mask for ``phase`` (``train`` or ``gen``) over ``model``'s logits or,
    without loading weights, the checkpoint at ``path``: its alpha from ``schedule``
    (:func:`vdlib.method.mask_schedule.phase_alphas`), its protected and drawn ids from
    ``spec``; None when the phase is off or alpha is 1 (the unmasked baseline runs without any
    processor). ``history``: the metrics records of iterations 1 .. t-1, read by the adaptive
    schedule only."""
    alpha = phase_alphas(schedule, t, history)[phase]
    if alpha >= 1.0:
        return None
    if model is not None:
        return VocabDropout.for_model(model, tok, alpha, spec.format_strings,
                                      spec.extra_protected_ids, width=spec.width)
    return VocabDropout.for_checkpoint(path, tok, alpha, spec.format_strings,
                                       spec.extra_protected_ids, width=spec.width)
