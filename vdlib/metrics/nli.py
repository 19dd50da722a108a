"""NLI diversity (Stasaski & Hearst 2022, "Semantic Diversity in Dialogue with Natural Language
Inference", arXiv 2205.01497): logical diversity of a set of texts from an NLI model's labels.

Each pair of texts goes through an NLI classifier (premise, hypothesis); its predicted label
(the argmax class) scores **contradiction +1, neutral 0, entailment -1**. Stasaski & Hearst sum
these scores over the pairs; the vocabulary-dropout paper reports values such as +0.241 and
+0.405, i.e. the **mean** pair score, which is what :func:`nli_diversity` returns (so sets of
different sizes compare): a value in [-1, 1], higher = more mutually contradicting, i.e. more
logically diverse.

- ``direction="bidirectional"`` (the paper's main numbers): the mean over all ordered pairs
  ``(i, j), i != j`` (each unordered pair scored both ways, as premise and as hypothesis).
- ``direction="unidirectional"`` (the paper's robustness check): the mean over ``i < j`` with
  ``texts[i]`` as premise and ``texts[j]`` as hypothesis (input order matters).
- ``max_pairs``: score a uniform sample (without replacement, ``seed``) of that many pairs
  instead of all of them (``n (n-1)`` pairs grow fast: 7,000 texts have 49 M ordered pairs).

Models (``NLI_MODELS``): the paper's DeBERTa-v3-large fine-tuned on MNLI/FEVER/ANLI/LingNLI/
WANLI (``"deberta-v3-large-mnli-fever-anli-ling-wanli"``, the default), the
``cross-encoder/nli-deberta-v3-large`` cross-encoder, or ``"hf:<id or folder>"`` for any
sequence-classification NLI model. The label order is read from the model config's
``id2label`` (the two registered models order their classes differently), never assumed. Any
object with the :class:`NLIClassifier` interface may be passed instead of a name.
``"tiny-random"`` is the offline stand-in of the tiny profile: a seeded, randomly initialised
one-layer BERT classifier with MiniLM's tokenizer (packaged), built once into the vdlib cache
(:func:`tiny_random_nli_path`); its labels are noise, but it runs the real classifier path.

>>> _pair_indices(3, "bidirectional", None, 0).tolist()
[[0, 1], [0, 2], [1, 0], [1, 2], [2, 0], [2, 1]]
>>> _pair_indices(3, "unidirectional", None, 0).tolist()
[[0, 1], [0, 2], [1, 2]]
>>> class Stub:  # contradiction whenever the two texts differ in length
...     def predict(self, premises, hypotheses, batch_size):
...         return ["contradiction" if len(p) != len(h) else "entailment"
...                 for p, h in zip(premises, hypotheses)]
>>> nli_diversity(["a", "b", "cc"], model=Stub())  # 4 contradictions, 2 entailments
0.3333333333333333
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from vdlib.utils.registry import Registry, UnknownNameError

__all__ = ["NLI_MODELS", "NLIClassifier", "HFNLIClassifier", "nli_diversity", "nli_pair_scores",
           "get_nli_model", "LABEL_SCORES", "DEFAULT_NLI_MODEL", "DIRECTIONS",
           "TINY_RANDOM_NLI", "tiny_random_nli_path"]

logger = logging.getLogger(__name__)

LABEL_SCORES = {"contradiction": 1, "neutral": 0, "entailment": -1}
DIRECTIONS = ("bidirectional", "unidirectional")

NLI_MODELS: Registry[str] = Registry("NLI model")
NLI_MODELS.add("deberta-v3-large-mnli-fever-anli-ling-wanli",
               "MoritzLaurer/DeBERTa-v3-large-mnli-fever-anli-ling-wanli")
NLI_MODELS.add("nli-deberta-v3-large", "cross-encoder/nli-deberta-v3-large")
DEFAULT_NLI_MODEL = "deberta-v3-large-mnli-fever-anli-ling-wanli"
TINY_RANDOM_NLI = "tiny-random"  #: the offline stand-in (tiny profile, tests)


class NLIClassifier(Protocol):
    """Predicts one of ``"entailment" | "neutral" | "contradiction"`` per (premise, hypothesis)."""

    def predict(self, premises: list[str], hypotheses: list[str],
                batch_size: int) -> list[str]: ...


def canonical_label(name: str) -> str | None:
    """``"ENTAILMENT"``, ``"Contradiction"``, ``"neutral"`` ... -> the canonical lower-case
    label, or None for anything else (``"LABEL_0"``, ``"not_entailment"``).

    >>> [canonical_label(x) for x in ("ENTAILMENT", "contradiction", "Neutral", "LABEL_0")]
    ['entailment', 'contradiction', 'neutral', None]
    """
    key = name.strip().lower()
    if key.startswith("entail"):
        return "entailment"
    if key.startswith("contradict"):
        return "contradiction"
    if key == "neutral":
        return "neutral"
    return None


def labels_from_config(id2label: dict[Any, str], ref: str = "model") -> list[str]:
    """Canonical labels indexed by class id, from a config's ``id2label``; fails unless the
    three NLI classes are each named exactly once.

    >>> labels_from_config({0: "entailment", 1: "neutral", 2: "contradiction"})
    ['entailment', 'neutral', 'contradiction']
    """
    ids = sorted(int(i) for i in id2label)
    labels = [canonical_label(str(id2label.get(i, id2label.get(str(i), "")))) for i in ids]
    if ids != list(range(len(ids))) or sorted(x or "" for x in labels) != sorted(LABEL_SCORES):
        raise ValueError(f"{ref}: config.id2label = {dict(id2label)} does not name the three NLI "
                         "classes (entailment, neutral, contradiction); set id2label in its "
                         "config.json")
    return labels  # type: ignore[return-value]


@functools.lru_cache(maxsize=2)
def _load_classifier(ref: str, device: str) -> tuple[Any, Any]:
    from vdlib.engines.models import load_auxiliary_model

    return load_auxiliary_model(ref, "AutoModelForSequenceClassification", "NLI model", device)


class HFNLIClassifier:
    """A transformers sequence-classification NLI model (argmax label, order from id2label)."""

    def __init__(self, ref: str, device: str = "auto", max_length: int = 512) -> None:
        from vdlib.engines.models import resolve_device

        self.ref = ref
        self.device = str(resolve_device(device))
        self.max_length = max_length
        model, _ = _load_classifier(ref, self.device)
        self.labels = labels_from_config(model.config.id2label, ref)

    def predict(self, premises: list[str], hypotheses: list[str],
                batch_size: int) -> list[str]:
        import torch
        from tqdm.auto import tqdm

        from vdlib.utils.terminal import bars_disabled

        model, tokenizer = _load_classifier(self.ref, self.device)
        out: list[str] = []
        starts = range(0, len(premises), batch_size)
        for s in tqdm(starts, desc="NLI pairs", disable=len(starts) < 8 or bars_disabled(),
                      leave=False):
            batch = tokenizer(premises[s:s + batch_size], hypotheses[s:s + batch_size],
                              padding=True, truncation=True, max_length=self.max_length,
                              return_tensors="pt").to(self.device)
            with torch.inference_mode():
                ids = model(**batch).logits.argmax(dim=-1).tolist()
            out.extend(self.labels[i] for i in ids)
        return out


def tiny_random_nli_path(cache_dir: str | Path | None = None) -> Path:
    """The folder of the ``tiny-random`` NLI stand-in (built on first use, seed 0, atomically):
    a one-layer BERT sequence classifier (hidden size 32, labels entailment / neutral /
    contradiction) with the packaged MiniLM tokenizer; no network."""
    from vdlib.engines.models import atomic_build_dir, default_cache_dir
    from vdlib.metrics.embeddings import minilm_path

    def build(tmp: Path) -> None:
        import torch
        from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

        tok = AutoTokenizer.from_pretrained(minilm_path())
        id2label = {0: "entailment", 1: "neutral", 2: "contradiction"}
        config = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1,
                            num_attention_heads=2, intermediate_size=64, num_labels=3,
                            initializer_range=1.0,  # wide weights: labels vary across pairs
                            id2label=id2label, label2id={v: k for k, v in id2label.items()})
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = BertForSequenceClassification(config).eval()
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)

    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    return atomic_build_dir(root / "nli-tiny-random", build)


def get_nli_model(model: str | NLIClassifier, device: str = "auto") -> NLIClassifier:
    """A classifier from a registered name, ``"hf:<id or folder>"`` or an existing folder;
    objects with a ``predict`` method pass through."""
    if not isinstance(model, str):
        if not callable(getattr(model, "predict", None)):
            raise TypeError("model must be a name or have predict(premises, hypotheses, "
                            "batch_size)")
        return model
    if model in NLI_MODELS:
        return HFNLIClassifier(NLI_MODELS.get(model), device=device)
    if model == TINY_RANDOM_NLI:
        return HFNLIClassifier(str(tiny_random_nli_path()), device=device)
    if model.startswith("hf:") and len(model) > 3:
        return HFNLIClassifier(model[3:], device=device)
    if Path(model).expanduser().is_dir():
        return HFNLIClassifier(str(Path(model).expanduser()), device=device)
    raise UnknownNameError(f"unknown NLI model {model!r}; valid names: "
                           f"{', '.join(NLI_MODELS.names())}, {TINY_RANDOM_NLI}; also "
                           "'hf:<id or folder>'")


def _pair_indices(n: int, direction: str, max_pairs: int | None, seed: int) -> np.ndarray:
    """(m, 2) int array of (premise, hypothesis) indices, in enumeration order."""
    if direction not in DIRECTIONS:
        raise ValueError(f"unknown direction {direction!r}; valid: {', '.join(DIRECTIONS)}")
    bidirectional = direction == "bidirectional"
    total = n * (n - 1) if bidirectional else n * (n - 1) // 2
    if max_pairs is not None and max_pairs < total:
        if max_pairs < 1:
            raise ValueError(f"max_pairs must be >= 1, got {max_pairs}")
        k = np.sort(np.random.default_rng(seed).choice(total, size=max_pairs, replace=False))
    else:
        k = np.arange(total, dtype=np.int64)
    if bidirectional:  # row i holds the n-1 hypotheses j != i
        i, r = np.divmod(k, n - 1)
        j = r + (r >= i)
    else:  # row i holds j = i+1 .. n-1; starts[i] pairs come before row i
        rows = np.arange(n, dtype=np.int64)
        starts = rows * (2 * n - rows - 1) // 2
        i = np.searchsorted(starts, k, side="right") - 1
        j = k - starts[i] + i + 1
    return np.stack([i, j], axis=1).astype(np.int64)


def nli_pair_scores(texts: Sequence[str], model: str | NLIClassifier = DEFAULT_NLI_MODEL,
                    direction: str = "bidirectional", batch_size: int = 32,
                    max_pairs: int | None = None, seed: int = 42, *,
                    device: str = "auto") -> tuple[np.ndarray, np.ndarray]:
    """The scored pairs ``(m, 2)`` (premise, hypothesis indices) and their scores ``(m,)``
    in {+1, 0, -1} (for bootstrap standard errors over pairs)."""
    texts = list(texts)
    if len(texts) < 2:
        raise ValueError(f"NLI diversity needs >= 2 texts, got {len(texts)}")
    pairs = _pair_indices(len(texts), direction, max_pairs, seed)
    classifier = get_nli_model(model, device=device)
    labels = classifier.predict([texts[i] for i in pairs[:, 0]],
                                [texts[j] for j in pairs[:, 1]], batch_size)
    if len(labels) != len(pairs):
        raise RuntimeError(f"the NLI model returned {len(labels)} labels for {len(pairs)} pairs")
    try:
        scores = np.array([LABEL_SCORES[label] for label in labels], dtype=np.float64)
    except KeyError as err:
        raise ValueError(f"NLI label {err.args[0]!r} is not one of {sorted(LABEL_SCORES)}") \
            from None
    return pairs, scores


def nli_diversity(texts: Sequence[str], model: str | NLIClassifier = DEFAULT_NLI_MODEL,
                  direction: str = "bidirectional", batch_size: int = 32,
                  max_pairs: int | None = None, seed: int = 42, *,
                  device: str = "auto") -> float:
    """Mean NLI pair score of ``texts`` (contradiction +1, neutral 0, entailment -1) over all
    ordered pairs (``bidirectional``) or premise-before-hypothesis pairs ``i < j``
    (``unidirectional``), or over ``max_pairs`` sampled ones; see the module docstring."""
    _, scores = nli_pair_scores(texts, model, direction, batch_size, max_pairs, seed,
                                device=device)
    logger.info("NLI diversity %s over %d pairs: %.4f", direction, len(scores), scores.mean())
    return float(scores.mean())
