"""The paper's shapes, stage by stage (issue 28): ``benchmarks/results/paper_shape_<card>.json``
from the cost-table entries that ``benchmarks/gpu_paper_shape.sh`` measured (``vdlib plan
--measure --dummy-weights`` of the 4B and 8B params on 2 GPUs)::

    python benchmarks/paper_shape.py benchmarks/results/cost_entries/qwen3-4b_h200_2gpu.json \\
        benchmarks/results/cost_entries/qwen3-8b_h200_2gpu.json

For each shape and stage: ``seconds`` (the loop's timing.json; the evaluation's own clock),
``tokens`` generated through vLLM, ``steps`` (GRPO stages), ``engine_start_s`` and
``peak_memory_gb`` per GPU (nvidia-smi every second, every process on the card); plus the card,
the vLLM version, the tokenizer's SHA-256, the sizes measured at, and where a stage stopped.
Stages an entry lacks are listed under ``not_run`` with the entry's error or pause.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

#: the stages of one iteration and the final evaluation, in order
STAGES = ("proposer", "generate", "score", "curriculum", "solver", "metrics", "evaluate")


def shape_record(entry: dict[str, Any]) -> dict[str, Any]:
    """One entry's stages as the paper-shape file holds them (pure)."""
    raw = entry.get("raw", {})
    counters = raw.get("counters", {})
    peaks = entry.get("memory", {}).get("per_stage_gib", {})
    timing = entry.get("timing_s", {})
    sizes = entry.get("measured_at", {})
    steps = {"proposer": sizes.get("proposer_steps"), "solver": sizes.get("solver_steps")}
    stages: dict[str, Any] = {}
    for name in STAGES:
        c = counters.get(name, {})
        seconds = timing.get(name, c.get("seconds"))
        if seconds is None:
            continue
        row: dict[str, Any] = {"seconds": round(float(seconds), 2)}
        if c.get("tokens"):
            row["tokens"] = int(c["tokens"])
        if name in steps and name in entry.get("stages", {}):
            row["steps"] = steps[name]
        if c.get("engine_start_s"):
            row["engine_start_s"] = round(float(c["engine_start_s"]), 2)
        row["peak_memory_gb"] = peaks.get(name, {})
        stages[name] = row
    return {
        "params": entry.get("params"), "gpus_per_run": entry.get("gpus_per_run"),
        "backend": entry.get("backend"), "sizes": sizes, "lengths": entry.get("lengths", {}),
        "stages": stages, "not_run": [s for s in STAGES if s not in stages],
        "stopped": entry.get("error") or entry.get("partial"),
        "note": entry.get("note"),
    }


def paper_shape(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The file's content from the entries of one card (pure)."""
    cards = {e["card"] for e in entries}
    if len(cards) != 1:
        raise ValueError(f"entries of one card only; got {sorted(cards)}")
    shas = {e.get("tokenizer_sha256") for e in entries}
    return {
        "card": cards.pop(), "card_name": entries[0].get("card_name"),
        "vllm_version": entries[0].get("vllm_version"),
        "tokenizer": {"name": "Qwen3 (../shared/tools/qwen3-tokenizer)",
                      "sha256": shas.pop() if len(shas) == 1 else sorted(map(str, shas))},
        "dummy_weights": all(e.get("dummy_weights") for e in entries),
        "shapes": {e["shape"]: shape_record(e) for e in entries},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("entries", nargs="+", help="cost-table entry JSON files of one card")
    ap.add_argument("--out", help="default benchmarks/results/paper_shape_<card>.json")
    args = ap.parse_args(argv)
    entries = [json.loads(Path(p).read_text(encoding="utf-8")) for p in args.entries]
    data = paper_shape(entries)
    out = Path(args.out or Path(__file__).parent / "results" / f"paper_shape_{data['card']}.json")
    out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    for shape, rec in data["shapes"].items():
        cells = ", ".join(f"{s} {r['seconds']:.0f} s" for s, r in rec["stages"].items())
        sys.stdout.write(f"{shape}: {cells}; not run: {', '.join(rec['not_run']) or 'none'}"
                         f"{'; stopped: ' + rec['stopped'] if rec['stopped'] else ''}\n")
    sys.stdout.write(f"{out}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
