"""Compare two run-artifact trees (e.g. the tiny quickstart made by two commits).

Counts the files that are identical, those that differ only by the per-phase alpha field names
(``alpha_train`` / ``alpha_gen`` against the older ``alpha``; with ``rename``), and lists every
other difference. ``timing.json``, ``manifest.json`` and ``.lock`` are skipped (times, a pid);
``config.yaml`` is compared with ``output_dir`` masked and its differing lines are shown.

    python benchmarks/compare_run_artifacts.py OLD/quickstart NEW/quickstart [rename]

Results: benchmarks/results/renovation_quickstart_identity_2.txt.
"""

from __future__ import annotations

import difflib
import json
import sys
from pathlib import Path

SKIP = ("timing.json", "manifest.json", ".lock")


def tree(root: str) -> dict[str, bytes]:
    base = Path(root)
    return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*"))
            if p.is_file()}


def without_phase_alphas(obj: object) -> object:
    """``alpha_train`` / ``alpha_gen`` folded back into one ``alpha`` key, in place."""
    if not isinstance(obj, dict):
        return obj
    out = {}
    for k, v in obj.items():
        if k == "alpha_gen" and "alpha_train" in obj:
            continue
        out["alpha" if k in ("alpha_train", "alpha_gen") else k] = v
    return out


def records(path: str, data: bytes) -> list[list]:
    text = data.decode()
    lines = text.splitlines() if path.endswith(".jsonl") else [text]
    return [list(without_phase_alphas(json.loads(x)).items()) for x in lines]


def compare(old: str, new: str, rename: bool) -> str:
    a, b = tree(old), tree(new)
    same = renamed = 0
    other: list[tuple[str, object]] = []
    for k in sorted(set(a) | set(b)):
        if k.endswith(SKIP):
            continue
        if k not in a or k not in b:
            other.append((k, "only in one tree"))
        elif a[k] == b[k]:
            same += 1
        elif k.endswith("config.yaml"):
            la = [x for x in a[k].decode().splitlines() if not x.startswith("output_dir")]
            lb = [x for x in b[k].decode().splitlines() if not x.startswith("output_dir")]
            if la == lb:
                same += 1
            else:
                other.append((k, [d for d in difflib.unified_diff(la, lb, lineterm="", n=0)
                                  if d[:1] in "+-" and d[:3] not in ("---", "+++")]))
        elif rename and k.endswith((".json", ".jsonl")) and records(k, a[k]) == records(k, b[k]):
            renamed += 1
        else:
            other.append((k, "bytes differ"))
    return (f"identical: {same}; differ only by the alpha field names: {renamed}; "
            f"other: {other}")


if __name__ == "__main__":
    sys.stdout.write(compare(sys.argv[1], sys.argv[2], len(sys.argv) > 3) + "\n")
