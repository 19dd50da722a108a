"""A run's config fingerprint: SHA-256 of the resolved config as canonical JSON without the keys
that cannot change what the loop writes (:data:`NOT_FINGERPRINTED`), and the keys two configs
differ in. Re-exported by :mod:`vdlib.runs.run_state`."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["NOT_FINGERPRINTED", "fingerprinted", "config_fingerprint", "fingerprint_diff"]


# Dotted keys left out of the fingerprint: they cannot change what the loop writes.
NOT_FINGERPRINTED: dict[str, str] = {
    "experiment": "names the folder",
    "output_dir": "where the folder is",
    "run_id": "names the folder",
    "profile": "a name for the defaults; the resolved values are fingerprinted",
    "seeds": "the grid's seed list (the run's own seed is fingerprinted)",
    "arms": "the grid's arm list (an arm's settings are merged into the fingerprinted keys)",
    "reference_experiments": "other experiments a notebook reads",
    "curricula_dir": "the exports a notebook shows",
    "model.cache_dir": "where checkpoints are cached",
    "model.transfer": "read by the transfer experiment only",
    "model.instruct": "read by evaluation only",
    "evaluation": "evaluations keep their own protocol record",
    "verification": "verification keeps its own cache and records",
    "transfer": "the transfer experiment's own training",
    "launcher": "how a grid is spread over GPUs or a cluster",
    "tracking": "where numbers are logged, not what they are",
    "engine.gpu_memory_utilization": "GPU memory share",
    "engine.rollout_gpu_memory_utilization": "GPU memory share",
    "engine.server_url": "where a server listens",
    "engine.rollout_server_url": "where a server listens",
    "engine.server_gpus": "which GPUs serve",
    "engine.lifetime": "how long an engine lives; every sample is seeded per request or per "
                       "trainer hand-over, the same in both (docs/vllm.md)",
}


def _drop(data: Any, dotted: str) -> None:
    head, _, rest = dotted.partition(".")
    if not isinstance(data, dict) or head not in data:
        return
    if rest:
        _drop(data[head], rest)
    else:
        del data[head]


def fingerprinted(config: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a resolved config (``vdlib.config.experiment.to_dict``) that the fingerprint
    covers."""
    data = json.loads(json.dumps(config, sort_keys=True, default=str))
    for key in NOT_FINGERPRINTED:
        _drop(data, key)
    return data


def config_fingerprint(config: Mapping[str, Any]) -> str:
    """SHA-256 of :func:`fingerprinted` ``config`` as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(fingerprinted(config), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict) and (data or not prefix):
        out: dict[str, Any] = {}
        for k, v in data.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: data}


def fingerprint_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """``key: old -> new`` for every dotted key whose value differs (missing: ``<absent>``)."""
    a, b = _flatten(dict(old)), _flatten(dict(new))
    out = []
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key, "<absent>"), b.get(key, "<absent>")
        if x != y:
            out.append(f"{key}: {x!r} -> {y!r}".replace("'<absent>'", "<absent>"))
    return out
