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

__all__ = ["BenchmarkResult", "EvalSummary", "mean_and_se", "pool_runs", "PER_SEED_CHOICES"]

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

        def value(r: BenchmarkResult) -> float:
            return r.accuracies[0] if per_seed == "first_run" else statistics.fmean(r.accuracies)

        pooled[arm] = EvalSummary(
            {b: BenchmarkResult(b, first.results[b].n, [value(s.results[b]) for _, s in items],
                                [int(seed) if seed is not None else i
                                 for i, (seed, _) in enumerate(items)], ddof)
             for b in benches},
            {**first.protocol, "pooled_over_seeds": [seed for seed, _ in items],
             "per_seed": per_seed, "se_ddof": ddof})
    return pooled
