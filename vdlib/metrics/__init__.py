"""Diversity and curriculum metrics, exact to their definitions (issue "Diversity and
curriculum metrics").

- :mod:`vdlib.metrics.diversity`: Self-BLEU (bit-identical to nltk, fast), Vendi score,
  novelty rate, cumulative Vendi, mean pairwise cosine distance, token / number / length stats.
- :mod:`vdlib.metrics.embeddings`: embedder registry (``minilm`` packaged offline,
  ``openai:<model>`` cached, ``hf:<id>``).
- :mod:`vdlib.metrics.epiplexity`: prequential-MDL epiplexity with a fresh LoRA observer.
- :mod:`vdlib.metrics.nli`: NLI diversity (Stasaski & Hearst 2022).
- :mod:`vdlib.metrics.run_metrics`: per-iteration ``metrics.json`` and tidy summaries.
"""

from vdlib.metrics.diversity import (
    cumulative_vendi,
    distinct_numbers,
    mean_pairwise_cosine_distance,
    novelty_rate,
    question_lengths,
    self_bleu,
    self_bleu_scores,
    unique_tokens,
    vendi_score,
)

__all__ = [
    "self_bleu",
    "self_bleu_scores",
    "vendi_score",
    "novelty_rate",
    "cumulative_vendi",
    "mean_pairwise_cosine_distance",
    "unique_tokens",
    "question_lengths",
    "distinct_numbers",
]
