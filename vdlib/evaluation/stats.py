"""pass@1 statistics: mean +- standard error over runs, per benchmark and per model.

Part of :mod:`vdlib.evaluation` (the protocol is described there)."""

from __future__ import annotations

import logging
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from vdlib.stats import mean_and_se

__all__ = ["BenchmarkResult", "EvalSummary", "mean_and_se"]

logger = logging.getLogger(__name__)


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


