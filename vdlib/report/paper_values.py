"""The paper's reported numbers, transcribed into ``vdlib/data/paper_values.yaml``.

Every result table and figure of the paper is one entry keyed by its LaTeX label
(``tab:vanilla_eval``, ``fig:diversity_combined``, ...) with ``caption``, ``source`` (label,
file, line range), ``notes`` and ``data``:

- tables: ``data[group][row][column] = {"mean": m, "se": s}`` (``se`` None when the paper prints
  none) or a plain number; rows are vdlib arm names (``base`` = the untrained model), columns
  vdlib benchmark names (``avg`` = the table's Avg. column); percentages as printed;
- figures: ``data[group][metric][series] = [[x, y], ...]`` from the pgfplots ``coordinates``
  blocks, metrics named as in :mod:`vdlib.metrics.run_metrics`.

>>> paper_values("tab:vanilla_eval")["data"]["Qwen3-8B"]["vd75"]["avg"]["mean"]
43.8
>>> paper_series("fig:embedding_diversity", "Qwen3-4B", "cumulative_vendi", "baseline")[:2]
[(1, 44.6), (2, 46.1)]
>>> paper_scale("Qwen/Qwen3-8B-Base"), paper_scale("smollm2-135m"), paper_scale("x", None)
('Qwen3-8B', 'Qwen3-4B', None)
"""

from __future__ import annotations

import copy
from functools import lru_cache
from importlib import resources
from typing import Any

__all__ = ["paper_values", "paper_labels", "paper_series", "paper_cells", "paper_scale",
           "PAPER_SCALES", "ARM_LABELS"]

#: The model scales of the paper's co-evolution tables and figures (their groups).
PAPER_SCALES = ("Qwen3-4B", "Qwen3-8B")

#: Display names of arms and paper rows (ASCII, so they work in LaTeX too).
ARM_LABELS = {
    "base": "Base (no training)", "baseline": "Baseline", "vd85": "VD85", "vd75": "VD75",
    "vd95": "VD95", "train_only": "Train-only", "gen_only": "Gen-only", "anneal": "VD75 (anneal)",
    "kl_cov": "KL-Cov", "kl_cov_inert": "KL-Cov (inert)",
    "kl_cov_offpolicy": "KL-Cov (off-policy)", "clip_cov": "Clip-Cov",
    "vd85_gen": "VD85 (gen-only)", "baseline_fail_neg": "Baseline (failure -1)",
    "vd75_fail_neg": "VD75 (failure -1)", "adaptive": "VD (adaptive)",
    "delta": "Delta (VD - baseline)",
}


@lru_cache(maxsize=1)
def _load() -> dict[str, Any]:
    import yaml

    text = resources.files("vdlib").joinpath("data", "paper_values.yaml").read_text("utf-8")
    return yaml.safe_load(text)


def paper_labels() -> list[str]:
    """The LaTeX labels that have transcribed values."""
    return [k for k in _load() if k != "meta"]


def paper_values(label: str | None = None) -> dict[str, Any]:
    """The whole YAML (``label=None``) or one entry (a deep copy, safe to modify).

    An unknown label raises ``KeyError`` naming the known ones."""
    data = _load()
    if label is None:
        return copy.deepcopy(data)
    if label not in data or label == "meta":
        raise KeyError(f"no paper values for {label!r}; known: {', '.join(paper_labels())}")
    return copy.deepcopy(data[label])


def paper_series(label: str, group: str, metric: str, series: str
                 ) -> list[tuple[float, float]]:
    """One figure series as ``[(x, y), ...]`` ([] when the paper has no such series)."""
    data = _load()[label]["data"]
    pts = data.get(group, {}).get(metric, {}).get(series, [])
    return [(x, y) for x, y in pts]


def paper_cells(label: str, group: str) -> dict[str, dict[str, dict[str, float | None]]]:
    """``{row: {column: {"mean", "se"}}}`` of one group of a table ({} for an unknown group);
    plain numbers become ``{"mean": x, "se": None}``."""
    rows = _load()[label]["data"].get(group, {})
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    for row, cols in rows.items():
        out[row] = {c: v if isinstance(v, dict) else {"mean": v, "se": None}
                    for c, v in cols.items()}
    return out


def paper_scale(model: str | None, default: str | None = "Qwen3-4B") -> str | None:
    """The group of the paper's co-evolution tables and figures that ``model`` reproduces:
    ``Qwen/Qwen3-8B-Base`` (or ``Qwen3-8B``) -> ``Qwen3-8B``, the same for 4B. A model the paper
    did not co-evolve (the tiny and GPU profiles' models) gets ``default``: the paper's main
    scale as a labelled reference, or None for no overlay. A figure of an 8B run thus draws the
    paper's 8B curves, never its 4B ones."""
    name = str(model or "").rstrip("/").rsplit("/", 1)[-1].removesuffix("-Base")
    return name if name in PAPER_SCALES else default
