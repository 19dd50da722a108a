"""pass@1 statistics: mean +- standard error over runs, per benchmark and per model, and the
pooling of several training seeds into one row (:func:`pool_runs`).

Part of :mod:`vdlib.evaluation` (the protocol is described there)."""

from __future__ import annotations

import logging
import statistics
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from vdlib.utils.stats import SE_DDOF, mean_and_se

__all__ = ["BenchmarkResult", "EvalSummary", "mean_and_se", "pool_runs", "PER_SEED_CHOICES",
           "seed_value", "pool_accuracies", "pooling_note"]

logger = logging.getLogger(__name__)

#: What one training seed contributes to a pooled cell (``evaluation.per_seed``).
PER_SEED_CHOICES = ("first_run", "mean")


@dataclass
class BenchmarkResult:
    """One benchmark's pass@1 per run (fractions in [0, 1]) and its n items; ``ddof`` is the
    spread rule of :attr:`se` (:data:`vdlib.utils.stats.SE_DDOF`, the paper's)."""

    benchmark: str
    n: int
    accuracies: list[float]
    seeds: list[int]
    ddof: int = SE_DDOF

    @property
    def mean(self) -> float:
        return mean_and_se(self.accuracies, self.ddof)[0]

    @property
    def se(self) -> float | None:
        return mean_and_se(self.accuracies, self.ddof)[1]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "mean": self.mean, "se": self.se}


@dataclass
class EvalSummary:
    """Per-benchmark results of one model (or arm); ``average()`` is the table's Avg. column."""

    results: dict[str, BenchmarkResult] = field(default_factory=dict)
    protocol: dict[str, Any] = field(default_factory=dict)

    def average(self, benchmarks: Sequence[str] | None = None) -> tuple[float, float | None]:
        """Mean over benchmarks of their run-mean, and the SE across runs of the per-run
        averages (None when runs differ in number or there is one run)."""
        names = list(benchmarks) if benchmarks is not None else list(self.results)
        res = [self.results[b] for b in names]
        if not res:
            raise ValueError("average of no benchmarks")
        mean = statistics.fmean(r.mean for r in res)
        k = {len(r.accuracies) for r in res}
        if len(k) != 1 or k == {1}:
            return mean, None
        per_run = [statistics.fmean(r.accuracies[i] for r in res) for i in range(k.pop())]
        return mean, mean_and_se(per_run, res[0].ddof)[1]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EvalSummary:
        """Inverse of :meth:`to_dict` (``summary.json`` of an evaluation folder)."""
        return cls(results={b: BenchmarkResult(b, int(r["n"]), [float(a) for a in r["accuracies"]],
                                               [int(x) for x in r["seeds"]],
                                               int(r.get("ddof", SE_DDOF)))
                            for b, r in data.get("benchmarks", {}).items()},
                   protocol=dict(data.get("protocol", {})))

    def to_dict(self) -> dict[str, Any]:
        avg, avg_se = self.average() if self.results else (None, None)
        return {"protocol": self.protocol,
                "benchmarks": {b: r.to_dict() for b, r in self.results.items()},
                "average": {"mean": avg, "se": avg_se}}


def pool_runs(summaries: Mapping[Any, EvalSummary], per_seed: str = "first_run",
              ddof: int = SE_DDOF) -> dict[Hashable, EvalSummary]:
    """One summary per arm (keys ``(arm, seed)``, in first-seen order; a plain key is an arm
    with one seed), its SE under ``ddof``.

    With one seed the arm's evaluation runs are its values. With several, each seed adds one
    value per benchmark: ``per_seed="first_run"`` its first evaluation run (the paper: every
    cell is k single evaluations), ``"mean"`` the mean over its runs. Only benchmarks every seed
    has are kept.

    >>> s = lambda accs: EvalSummary({"a": BenchmarkResult("a", 30, accs, [0, 1, 2])})
    >>> p = pool_runs({("vd", 0): s([0.1, 0.2, 0.3]), ("vd", 1): s([0.2, 0.2, 0.2])})
    >>> p["vd"].results["a"].accuracies, p["vd"].protocol["per_seed"]
    ([0.1, 0.2], 'first_run')
    """
    if per_seed not in PER_SEED_CHOICES:
        raise ValueError(f"per_seed = {per_seed!r}; allowed: {', '.join(PER_SEED_CHOICES)}")
    by_arm: dict[Hashable, list[tuple[int | None, EvalSummary]]] = {}
    for key, s in summaries.items():
        arm, seed = key if isinstance(key, tuple) else (key, None)
        by_arm.setdefault(arm, []).append((seed, s))
    pooled: dict[Hashable, EvalSummary] = {}
    for arm, items in by_arm.items():
        first = items[0][1]
        benches = [b for b in first.results if all(b in s.results for _, s in items)]
        if len(items) == 1:
            res = {b: BenchmarkResult(b, r.n, list(r.accuracies), list(r.seeds), ddof)
                   for b, r in first.results.items()}
            pooled[arm] = EvalSummary(res, {**first.protocol, "se_ddof": ddof})
            continue

        pooled[arm] = EvalSummary(
            {b: BenchmarkResult(b, first.results[b].n,
                                [seed_value(s.results[b].accuracies, per_seed) for _, s in items],
                                [int(seed) if seed is not None else i
                                 for i, (seed, _) in enumerate(items)], ddof)
             for b in benches},
            {**first.protocol, "pooled_over_seeds": [seed for seed, _ in items],
             "per_seed": per_seed, "se_ddof": ddof})
    return pooled


def seed_value(accuracies: Sequence[float], per_seed: str = "first_run") -> float:
    """What one training seed's evaluation runs add to a pooled cell (``evaluation.per_seed``):
    its first run (``first_run``) or the mean of its runs (``mean``).

    >>> seed_value([0.6, 1.0, 1.4]), seed_value([0.6, 1.0, 1.4], "mean")
    (0.6, 1.0)
    """
    if per_seed not in PER_SEED_CHOICES:
        raise ValueError(f"per_seed = {per_seed!r}; allowed: {', '.join(PER_SEED_CHOICES)}")
    if not accuracies:
        raise ValueError("seed_value of no evaluation runs")
    return float(accuracies[0]) if per_seed == "first_run" else statistics.fmean(accuracies)


def pool_accuracies(runs: Mapping[int | None, Sequence[float]], per_seed: str = "first_run",
                    ddof: int = SE_DDOF) -> BenchmarkResult:
    """One benchmark's cell from each seed's evaluation runs (``{seed: [run accuracies]}``; the
    key None: a model with no training seed, e.g. the starting checkpoint, whose runs are its
    values): :func:`pool_runs`, the notebooks' rule, on that one benchmark. The values keep
    their scale (fractions or %); ``n`` is 0 (unknown here).

    >>> r = pool_accuracies({0: [0.6, 1.0, 1.4], 1: [0.6, 1.0, 0.8], 2: [0.4, 1.2, 1.2]})
    >>> [round(a, 1) for a in r.accuracies], round(r.mean, 4)
    ([0.6, 0.6, 0.4], 0.5333)
    >>> [round(a, 4) for a in pool_accuracies({0: [0.6, 1.0, 1.4], 1: [0.6, 1.0, 0.8]},
    ...                                       "mean").accuracies]
    [1.0, 0.8]
    """
    if not runs:
        raise ValueError("pool_accuracies of no seeds")
    summaries = {(("m", seed) if seed is not None else "m"):
                 EvalSummary({"b": BenchmarkResult("b", 0, [float(a) for a in accs],
                                                   list(range(len(accs))), ddof)})
                 for seed, accs in runs.items()}
    if None in runs and len(runs) > 1:
        raise ValueError("pool_accuracies: a model without a training seed (key None) is "
                         "pooled alone")
    return pool_runs(summaries, per_seed, ddof)["m"].results["b"]


def pooling_note(per_seed: str, ddof: int, source: str | None = None) -> str:
    """The line printed under each pooled table: the rule (``evaluation.per_seed`` and
    ``evaluation.se_ddof``) and, when given, where it came from.

    >>> pooling_note("mean", 1, "the file")[-65:]
    'evaluation.se_ddof = 1 (SE = sample SD / sqrt(k)); from the file.'
    """
    what = ("each training seed adds its first evaluation run" if per_seed == "first_run"
            else "each training seed adds the mean of its evaluation runs")
    sd = "population SD" if ddof == 0 else "sample SD"
    tail = f"; from {source}" if source else ""
    return (f"Pooling: evaluation.per_seed = {per_seed} ({what}), evaluation.se_ddof = {ddof} "
            f"(SE = {sd} / sqrt(k)){tail}.")
