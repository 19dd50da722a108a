r"""Benchmark evaluation: the paper's protocol, pass@1 over k runs, mean +- standard error.

The protocol (paper, "Standard benchmarks" and the evaluation prompt in its appendix):

- zero-shot; the question followed by the evaluation instruction, in the model's chat template,
  with no system message (:func:`vdlib.method.prompts.evaluation_prompt`);
- temperature 0.7, top-p 1.0, a maximum context of 4096 tokens (the defaults of the config's
  ``evaluation`` section, :class:`vdlib.config.experiment.EvaluationConfig`, the one source of these
  values): each prompt may generate ``max_context - len(prompt tokens)`` new tokens (optionally
  capped by ``max_new_tokens``);
- the last ``\boxed{}`` of the completion is graded against the gold answer with
  :func:`vdlib.method.grading.is_equivalent` (math-verify, gold first);
- ``k = runs`` independent runs, run ``r`` sampled with seed ``seed + r``; pass@1 of a run is the
  mean correctness over the benchmark's items; the reported number is the mean over runs with
  the standard error across runs, ``SE = std(ddof) / sqrt(k)`` (None for ``k = 1``), following
  Miller (2024), "Adding error bars to evals: a statistical approach to language model
  evaluations", as the paper does; ``ddof = 0`` (population SD, ``evaluation.se_ddof``) is the
  rule that reproduces the paper's printed cells (:mod:`vdlib.utils.stats`). Several training seeds
  pool into one row with :func:`pool_runs` (``evaluation.per_seed``).

Benchmarks (:data:`BENCHMARKS`, :func:`load_benchmark`; their names are
:data:`vdlib.config.experiment.KNOWN_BENCHMARKS`):

- maths, from the Hub (pinned ids and splits, R-Zero's list) or from
  ``<data_dir>/<name>/test.jsonl``: ``gsm8k``, ``math500``, ``amc23``, ``olympiadbench``,
  ``aime24``, ``aime25``, ``minerva``; OlympiadBench is the paper's 910 items by default
  (English text-only open-ended maths + physics; ``evaluation.olympiadbench_subset``);
- offline stand-ins: ``gsm_symbolic`` (reasoning-gym, ``limit`` items from ``seed``) and
  ``champ`` (the ``champ-dataset`` package, 270 competition problems);
- out-of-domain multiple choice, Hub only: ``bbh``, ``medqa``, ``supergpqa``, ``winogrande``;
  the answer is read by :func:`parse_choice`.

>>> [round(x, 4) for x in mean_and_se([0.5, 0.7, 0.6])]
[0.6, 0.0471]
>>> mean_and_se([0.4])
(0.4, None)
>>> parse_choice("so the answer is (B).", "ABCD")
'B'
>>> split_top_level("(1,8,19), (2,7,13)")
['(1,8,19)', '(2,7,13)']
"""

from __future__ import annotations

from vdlib.evaluation.answers import (  # noqa: F401
    answers_match,
    grade,
    parse_choice,
    split_top_level,
)
from vdlib.evaluation.benchmarks import (  # noqa: F401
    BENCHMARKS,
    OLYMPIADBENCH_PHYSICS_FILE,
    OLYMPIADBENCH_SUBSETS,
    BenchmarkSpec,
    BenchmarkUnavailableError,
    gsm8k_gold,
    load_benchmark,
    strip_dollars,
)
from vdlib.evaluation.runner import (  # noqa: F401
    ROUND_TOKENS,
    evaluate,
    protocol_kwargs,
)
from vdlib.evaluation.stats import (  # noqa: F401
    BenchmarkResult,
    EvalSummary,
    mean_and_se,
    pool_runs,
)
from vdlib.evaluation.tables import (  # noqa: F401
    display_name,
    format_table,
    latex_escape,
)

__all__ = [
    "ROUND_TOKENS",
    "display_name",
    "latex_escape",
    "answers_match",
    "strip_dollars",
    "BENCHMARKS",
    "OLYMPIADBENCH_PHYSICS_FILE",
    "OLYMPIADBENCH_SUBSETS",
    "gsm8k_gold",
    "BenchmarkResult",
    "BenchmarkSpec",
    "BenchmarkUnavailableError",
    "EvalSummary",
    "evaluate",
    "format_table",
    "grade",
    "load_benchmark",
    "mean_and_se",
    "parse_choice",
    "pool_runs",
    "protocol_kwargs",
    "split_top_level",
]
