"""fig:question_complexity's four quantities, from the questions themselves, and how far each
arm lies from the baseline on them.

The paper's "question profile" (fig:question_complexity, text of Sec. "Results: diversity")
compares arms on four quantities of an iteration's generated questions (``#Q``, ``Tok/q``,
``Nums``, ``Score``: :data:`vdlib.report.plots.PROFILE_QUANTITIES`), as % change from the
baseline; it says "KL-Cov and Clip-Cov stay within 2 % of baseline on all four metrics".
Per iteration of one run (:func:`iteration_profile`, on the records of ``questions.jsonl``):

- ``valid_questions``: questions that parsed (``valid``), the paper's number of valid questions;
- ``mean_question_tokens``: mean tokens per valid question (the proposer's tokenizer, no
  special tokens: :func:`vdlib.metrics.diversity.question_lengths`);
- ``mean_distinct_numbers``: mean distinct numeric values per valid question
  (:func:`vdlib.metrics.diversity.distinct_numbers`);
- ``mean_acc``: mean self-consistency acc of the valid, scored questions (the paper's "Score",
  which it does not define; mapped as in ``paper_values.yaml``).

These are the definitions of the run's own ``metrics.json`` (:mod:`vdlib.metrics.run_metrics`,
:mod:`vdlib.metrics.loop`), recomputed here from the committed questions. :func:`profile_table`
pools the seeds (mean per arm and iteration) and gives each arm's % change from the baseline
of the same iteration, and :func:`largest_changes` the largest absolute change per arm, the
number a "within x %" claim is held against.

>>> recs = [{"valid": True, "question": "Add 2 and 2.0", "acc": 0.5},
...         {"valid": True, "question": "What is 3 + 4?", "acc": 0.3},
...         {"valid": False, "question": None, "acc": None}]
>>> iteration_profile(recs, lambda s: s.split())
{'valid_questions': 2, 'mean_question_tokens': 4.5, 'mean_distinct_numbers': 1.5, 'mean_acc': 0.4}
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from vdlib.metrics import diversity as div

__all__ = ["PROFILE_METRICS", "iteration_profile", "profile_table", "largest_changes"]

#: The four quantities, in the figure's order (#Q, Tok/q, Nums, Score).
PROFILE_METRICS = ("valid_questions", "mean_question_tokens", "mean_distinct_numbers",
                   "mean_acc")


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def iteration_profile(records: Iterable[Mapping[str, Any]],
                      tokenize: Callable[[str], Sequence[Any]] | Any) -> dict[str, Any]:
    """The four quantities of one iteration's ``questions.jsonl`` records (see the module
    docstring). ``tokenize``: a Hugging Face tokenizer, or a callable text -> tokens. Means
    over no question are None; a record whose ``valid`` is not true is not a question."""
    valid = [r for r in records if r.get("valid") and isinstance(r.get("question"), str)]
    texts = [r["question"] for r in valid]
    scored = [float(r["acc"]) for r in valid if isinstance(r.get("acc"), int | float)]
    lengths = div.question_lengths(texts, tokenize) if texts else []
    return {"valid_questions": len(valid),
            "mean_question_tokens": _mean([float(n) for n in lengths]),
            "mean_distinct_numbers": _mean([float(div.distinct_numbers(x)) for x in texts]),
            "mean_acc": _mean(scored)}


def profile_table(rows: Iterable[Mapping[str, Any]], baseline: str = "baseline"
                  ) -> list[dict[str, Any]]:
    """Seed means per ``(arm, iteration, metric)`` with the % change from ``baseline``'s mean
    at the same iteration (None for the baseline itself, or where either mean is missing or
    the baseline's is 0). ``rows``: ``{"arm", "seed", "iteration", <PROFILE_METRICS>}``.
    Sorted by iteration, then arm (baseline first, then in order of appearance), then metric.

    >>> rows = [{"arm": "baseline", "seed": s, "iteration": 1, "valid_questions": 100 + s,
    ...          "mean_question_tokens": 20.0, "mean_distinct_numbers": 2.0, "mean_acc": 0.5}
    ...         for s in (0, 2)]
    >>> rows += [{"arm": "kl_cov", "seed": 0, "iteration": 1, "valid_questions": 103,
    ...           "mean_question_tokens": 21.0, "mean_distinct_numbers": 2.0, "mean_acc": None}]
    >>> [(r["arm"], r["metric"], r["mean"], r["n"], r["pct_change"])
    ...  for r in profile_table(rows) if r["metric"] in ("valid_questions", "mean_acc")]
    [('baseline', 'valid_questions', 101.0, 2, None), ('baseline', 'mean_acc', 0.5, 2, None), \
('kl_cov', 'valid_questions', 103.0, 1, 1.98), ('kl_cov', 'mean_acc', None, 0, None)]
    """
    values: dict[tuple[str, int, str], list[float]] = {}
    arms: list[str] = []
    for row in rows:
        arm, t = str(row["arm"]), int(row["iteration"])
        if arm not in arms:
            arms.append(arm)
        for metric in PROFILE_METRICS:
            v = row.get(metric)
            cell = values.setdefault((arm, t, metric), [])
            if isinstance(v, int | float) and math.isfinite(v):
                cell.append(float(v))
    order = sorted(arms, key=lambda a: (a != baseline, arms.index(a)))
    out = []
    for t in sorted({k[1] for k in values}):
        for arm in order:
            for metric in PROFILE_METRICS:
                if (arm, t, metric) not in values:
                    continue
                mine = values[(arm, t, metric)]
                base = values.get((baseline, t, metric), [])
                m, b = _mean(mine), _mean(base)
                pct = (None if arm == baseline or m is None or not b
                       else round(100.0 * (m - b) / b, 2))
                out.append({"arm": arm, "iteration": t, "metric": metric, "mean": m,
                            "n": len(mine), "baseline_mean": b, "pct_change": pct})
    return out


def largest_changes(table: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per arm (the baseline left out), the largest absolute % change over every iteration and
    metric of :func:`profile_table`'s rows, with where it is: ``{"pct_change", "metric",
    "iteration"}``.

    >>> largest_changes([{"arm": "a", "iteration": 1, "metric": "m", "pct_change": -3.0},
    ...                  {"arm": "a", "iteration": 2, "metric": "n", "pct_change": 2.5},
    ...                  {"arm": "baseline", "iteration": 1, "metric": "m", "pct_change": None}])
    {'a': {'pct_change': -3.0, 'metric': 'm', 'iteration': 1}}
    """
    out: dict[str, dict[str, Any]] = {}
    for row in table:
        pct = row.get("pct_change")
        if pct is None:
            continue
        best = out.get(row["arm"])
        if best is None or abs(pct) > abs(best["pct_change"]):
            out[row["arm"]] = {"pct_change": pct, "metric": row["metric"],
                               "iteration": row["iteration"]}
    return out
