"""Why the GPU evidence run's generated questions were invalid, per arm and iteration, pooled
over the seeds that docs/results/gpu_small_main.json merges (run at the repository root):

    python benchmarks/results/gpu_small/invalid_reasons.py

Each of the K = 1,024 generations per run-iteration (``questions.jsonl.gz``: the parse verdict
``valid``, the raw ``text`` and vLLM's ``finish_reason``) falls in the first class that fits:
valid; ``truncated`` (ran to the 512-token limit); ``no closed question`` (stopped, but no
``<question> ... </question>`` block); ``no answer`` (a block, but no ``\\boxed{}`` after it);
``other``. Prints a markdown table of percentages.
"""

from __future__ import annotations

import collections
import gzip
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
# the runs merge.sh takes: part 2's seed 2, part 4's seed 1, part 6's seed 0 (the detached hold)
ARMS = ("baseline", "vd85", "vd75")
RUNS = [HERE / "h100x1" / f"{arm}-seed2" for arm in ARMS]
RUNS += [HERE / "h200x1" / f"{arm}-seed1" for arm in ARMS]
RUNS += [HERE / "hold_h200x2_detached" / "main_s0" / "runs" / f"{arm}-seed0" for arm in ARMS]
CLASSES = ("valid", "truncated", "no closed question", "no answer", "other")


def classify(rec: dict) -> str:
    if rec.get("valid"):
        return "valid"
    text = rec.get("text") or ""
    if rec.get("finish_reason") == "length":
        return "truncated"
    if "<question>" not in text or "</question>" not in text:
        return "no closed question"
    if "\\boxed" not in text.split("</question>")[-1]:
        return "no answer"
    return "other"


def main() -> None:
    counts: dict[tuple[str, int], collections.Counter] = collections.defaultdict(
        collections.Counter)
    for run in RUNS:
        arm = run.name.split("-")[0]
        for f in sorted(run.glob("iter_*/questions.jsonl.gz")):
            t = int(f.parent.name.split("_")[1])
            with gzip.open(f, "rt", encoding="utf-8") as src:
                for line in src:
                    counts[(arm, t)][classify(json.loads(line))] += 1
    print("| arm | it. | generations | " + " | ".join(CLASSES) + " |")
    print("|---|---|---|" + "---|" * len(CLASSES))
    for arm in ARMS:
        for t in sorted(k[1] for k in counts if k[0] == arm):
            c = counts[(arm, t)]
            n = sum(c.values())
            print(f"| {arm} | {t} | {n:,} | "
                  + " | ".join(f"{100 * c[k] / n:.1f} %" for k in CLASSES) + " |")


if __name__ == "__main__":
    main()
