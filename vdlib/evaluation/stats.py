"""pass@1 statistics: mean +- standard error over runs, per benchmark and per model.

Part of :mod:`vdlib.evaluation` (the protocol is described there)."""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["BenchmarkResult", "EvalSummary", "mean_and_se"]

logger = logging.getLogger(__name__)


def mean_and_se(values: Sequence[float]) -> tuple[float, float | None]:
    """``(mean, standard error)`` across runs: ``SE = stdev(ddof=1) / sqrt(k)``; k = 1 -> None.

    Miller (2024), "Adding error bars to evals". An empty sequence is an error.
    """
    if not values:
        raise ValueError("mean_and_se of no values")
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, None
    return mean, statistics.stdev(values) / math.sqrt(len(values))


@dataclass
class BenchmarkResult:
    """One benchmark's pass@1 per run (fractions in [0, 1]) and its n items."""

    benchmark: str
    n: int
    accuracies: list[float]
    seeds: list[int]

    @property
    def mean(self) -> float:
        return mean_and_se(self.accuracies)[0]

    @property
    def se(self) -> float | None:
        return mean_and_se(self.accuracies)[1]

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
        return mean, mean_and_se(per_run)[1]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EvalSummary:
        """Inverse of :meth:`to_dict` (``summary.json`` of an evaluation folder)."""
        return cls(results={b: BenchmarkResult(b, int(r["n"]), [float(a) for a in r["accuracies"]],
                                               [int(x) for x in r["seeds"]])
                            for b, r in data.get("benchmarks", {}).items()},
                   protocol=dict(data.get("protocol", {})))

    def to_dict(self) -> dict[str, Any]:
        avg, avg_se = self.average() if self.results else (None, None)
        return {"protocol": self.protocol,
                "benchmarks": {b: r.to_dict() for b, r in self.results.items()},
                "average": {"mean": avg, "se": avg_se}}


