"""The paper's shapes, stage by stage (issue 28): ``benchmarks/results/paper_shape_<card>.json``
from the cost-table entries that ``tools/lent-gpus/gpu_paper_shape.sh`` measured (``vdlib plan
--measure --dummy-weights`` of the 4B and 8B params on 2 GPUs)::

    python benchmarks/paper_shape.py benchmarks/results/cost_entries/qwen3-4b_h200_2gpu.json \\
        benchmarks/results/cost_entries/qwen3-8b_h200_2gpu.json

For each shape and stage: ``seconds`` (the loop's timing.json; the evaluation's own clock),
``tokens`` generated through vLLM, ``steps`` (GRPO stages), ``engine_start_s`` and
``peak_memory_gb`` per GPU (nvidia-smi every second, every process on the card); plus the card,
the vLLM version, the tokenizer's SHA-256, the sizes measured at, and where a stage stopped.
Stages an entry lacks are listed under ``not_run`` with the entry's error or pause.

A measurement that took several attempts (one stopped by an error, the next going on in the same
run folder from fresh counters) joins into one entry, each stage taken from the attempt that ran
it, with every correction stated in the entry's ``corrections``::

    python benchmarks/paper_shape.py --merge OUT.json --take proposer,score=A.json \
        --take solver,metrics,evaluate=B.json --assume-tokens generate=131072 \
        --correction "..."
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
        if not row["peak_memory_gb"] and raw.get("peak", {}).get(name):
            # left out of the entry's memory: other processes' memory was on the card too
            row["peak_memory_gb_with_other_memory"] = raw["peak"][name]
        stages[name] = row
    return {
        "params": entry.get("params"), "gpus_per_run": entry.get("gpus_per_run"),
        "backend": entry.get("backend"), "sizes": sizes, "lengths": entry.get("lengths", {}),
        "stages": stages, "not_run": [s for s in STAGES if s not in stages],
        "stopped": entry.get("error") or entry.get("partial"),
        "note": entry.get("note"),
        **({"corrections": entry["corrections"], "attempts": entry.get("attempts")}
           if entry.get("corrections") else {}),
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


def merge_attempts(takes: list[tuple[list[str], dict[str, Any]]],
                   assumed_tokens: dict[str, float] | None = None,
                   corrections: list[str] | None = None,
                   drop_peaks: list[str] | None = None) -> dict[str, Any]:
    """One entry from several attempts of one measurement (pure): for each ``(stages, entry)``
    the named stages' figures, seconds, counters and memory peaks come from that entry; the rest
    (ids, sizes) from the last one (an attempt may have skipped the others: ``--skip``).
    ``assumed_tokens`` fills a stage's token count that was not counted (e.g. generation at its
    token limit) and derives
    its rate as the loop does (tokens / (stage seconds - engine starts)); each assumption and
    each ``corrections`` line is listed in ``corrections``. ``drop_peaks``: stages whose memory
    peaks include other processes' memory; they stay in ``raw.peak`` only."""
    base = json.loads(json.dumps(takes[-1][1]))
    timing = dict(base.get("timing_s", {}))
    stages: dict[str, Any] = {}
    counters: dict[str, Any] = {}
    peaks: dict[str, Any] = {}
    lengths = dict(base.get("lengths", {}))
    for names, entry in takes:
        for name in names:
            if name in entry.get("stages", {}):
                stages[name] = entry["stages"][name]
            if name in entry.get("timing_s", {}):  # an attempt that skipped it has none
                timing[name] = entry["timing_s"][name]
            if name in entry.get("raw", {}).get("counters", {}):
                counters[name] = entry["raw"]["counters"][name]
            if name in entry.get("memory", {}).get("per_stage_gib", {}):
                peaks[name] = entry["memory"]["per_stage_gib"][name]
            for key in {"proposer": ("proposer_rollout", "reward_answers_per_rollout"),
                        "solver": ("solver_rollout",), "generate": ("question",),
                        "score": ("answer",)}.get(name, ()):
                if key in entry.get("lengths", {}):
                    lengths[key] = entry["lengths"][key]
    notes = list(corrections or [])
    for name, tokens in (assumed_tokens or {}).items():
        c = counters.setdefault(name, {})
        c["tokens"] = float(tokens)
        seconds = timing[name]
        work = seconds - float(c.get("engine_start_s", 0.0))
        stages[name] = {"tokens_per_s": round(tokens / work, 1),
                        "startup_s": round(float(c.get("engine_start_s", 0.0)), 2),
                        "source": f"tokens assumed ({tokens:.0f}, not counted) / (stage seconds "
                                  "- engine starts)"}
        if name == "generate":
            k = base.get("measured_at", {}).get("num_questions") or 1
            lengths["question"] = round(tokens / k, 1)
        notes.append(f"{name}: {tokens:.0f} tokens assumed, not counted")
    base["stages"] = stages
    base["timing_s"] = {k: timing[k] for k in STAGES if k in timing}
    base["skipped_stages"] = []
    base["raw"]["counters"] = counters
    base["raw"]["peak"] = peaks
    clean = {k: v for k, v in peaks.items() if k not in set(drop_peaks or ())}
    base["memory"]["per_stage_gib"] = clean
    base["memory"]["peak_gib_per_gpu"] = max(
        (v for p in clean.values() for v in p.values()), default=0.0)
    if drop_peaks:
        notes.append(f"memory: the peaks of {', '.join(drop_peaks)} are left out of "
                     "memory.per_stage_gib (kept in raw.peak): they include other memory, above")
    base["lengths"] = lengths
    base["error"] = None
    base.pop("partial", None)
    base["corrections"] = notes
    base["attempts"] = [{"stages": names, "id": e.get("id"), "error": e.get("error")}
                        for names, e in takes]
    return base


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("entries", nargs="*", help="cost-table entry JSON files of one card")
    ap.add_argument("--out", help="default benchmarks/results/paper_shape_<card>.json")
    ap.add_argument("--merge", metavar="OUT", help="join attempts (--take) into one entry")
    ap.add_argument("--take", action="append", default=[], metavar="STAGES=ENTRY",
                    help="with --merge: these comma-separated stages from this entry")
    ap.add_argument("--assume-tokens", action="append", default=[], metavar="STAGE=N")
    ap.add_argument("--correction", action="append", default=[])
    ap.add_argument("--drop-peaks", default="", help="with --merge: comma-separated stages")
    args = ap.parse_args(argv)
    if args.merge:  # the parts may be members of docs/results/archives/paper_shape.zip
        from vdlib.utils.archive import resolve

        takes = []
        for item in args.take:
            names, _, path = item.partition("=")
            takes.append((names.split(","), json.loads(resolve(path).read_text(encoding="utf-8"))))
        if not takes:
            ap.error("--merge needs at least one --take STAGES=ENTRY")
        assumed = {k: float(v) for k, _, v in (a.partition("=") for a in args.assume_tokens)}
        merged = merge_attempts(takes, assumed, args.correction,
                                [x for x in args.drop_peaks.split(",") if x])
        Path(args.merge).write_text(json.dumps(merged, indent=1) + "\n", encoding="utf-8")
        sys.stdout.write(f"{args.merge}: stages {', '.join(merged['stages'])}\n")
        return 0
    if not args.entries:
        ap.error("give the entries (or --merge)")
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
