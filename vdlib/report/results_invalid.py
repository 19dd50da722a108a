"""Why generated questions were invalid: each generation's failure class, counted once from the
runs' question files into a small evidence file, and the table docs/RESULTS.md prints from it.

Each generation of a run-iteration (``iter_<t>/questions.jsonl.gz``: the parse verdict
``valid``, the raw ``text`` and vLLM's ``finish_reason``) falls in the first class that fits
(:func:`classify`): valid; ``truncated`` (ran to the token limit); ``no closed question``
(stopped, but no ``<question> ... </question>`` block); ``no answer`` (a block, but no
``\\boxed{}`` after it); ``other``. :func:`count_invalid` pools the counts over the seeds of each
arm and iteration (the question files are in the experiment's archive,
``docs/results/archives/<experiment>.zip``; ``docs/results/invalid_questions.json`` holds the
counts), and :func:`invalid_table` prints the percentages from that file alone.

>>> classify({"valid": False, "text": "<question>2+2?</question> no box", "finish_reason": "stop"})
'no answer'
"""

from __future__ import annotations

import collections
import gzip
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from vdlib.config import layout
from vdlib.config.names import name_problem
from vdlib.report.results_file import ResultsFileError

__all__ = ["CLASSES", "KIND", "classify", "run_question_files", "count_invalid", "check_invalid",
           "invalid_table"]

#: the failure classes, in the order :func:`classify` tries them (the table's columns)
CLASSES = ("valid", "truncated", "no closed question", "no answer", "other")
#: the ``kind`` of an evidence file of these counts
KIND = "invalid_questions"
#: each iteration's generations, as the committed run records keep them (gzipped)
QUESTIONS_GZ = layout.QUESTIONS_FILE + ".gz"


def classify(rec: Mapping[str, Any]) -> str:
    """The first of :data:`CLASSES` that fits one generation's record (untrusted text: only
    substring tests)."""
    if rec.get("valid"):
        return "valid"
    text = rec.get("text") if isinstance(rec.get("text"), str) else ""
    if rec.get("finish_reason") == "length":
        return "truncated"
    if "<question>" not in text or "</question>" not in text:
        return "no closed question"
    if "\\boxed" not in text.split("</question>")[-1]:
        return "no answer"
    return "other"


def _read_generations(path: Any) -> Iterable[dict[str, Any]]:
    with path.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as src:
        for n, line in enumerate(src, 1):
            if not line.strip():
                continue
            rec = json.loads(line)
            if not isinstance(rec, dict):
                raise ResultsFileError(f"{path}: line {n} is not a JSON object")
            yield rec


def run_question_files(run_dir: str | Path) -> list[tuple[int, Path]]:
    """``(t, iter_<t>/questions.jsonl.gz)`` of every iteration of a run folder that has one."""
    return [(t, folder / QUESTIONS_GZ)
            for t, folder in layout.iteration_dirs(run_dir, QUESTIONS_GZ)]


def count_invalid(runs: Iterable[tuple[str, str, Iterable[tuple[int, Any]]]],
                  experiment: str) -> dict[str, Any]:
    """The evidence file's value: for each run ``(run_id, arm, [(t, questions file), ...])``
    (arms in first-seen order; a file is a path or an archive member,
    :func:`vdlib.utils.archive.resolve`, each a gzipped ``questions.jsonl``; a run folder's:
    :func:`run_question_files`), every generation classified (:func:`classify`) and counted,
    pooled over the runs of an arm at each iteration: ``{"kind", "experiment", "classes",
    "runs" (sorted), "counts": [{"arm", "iteration", "generations", <class>: count, ...}]}``."""
    counts: dict[tuple[str, int], collections.Counter] = {}
    names = []
    for run_id, arm, files in runs:
        names.append(run_id)
        for t, f in files:
            c = counts.setdefault((arm, t), collections.Counter())
            c.update(classify(rec) for rec in _read_generations(f))
    arms = list(dict.fromkeys(arm for arm, _ in counts))
    rows = [{"arm": arm, "iteration": t, "generations": sum(counts[(arm, t)].values()),
             **{k: counts[(arm, t)][k] for k in CLASSES}}
            for arm in arms for t in sorted(t for a, t in counts if a == arm)]
    return {"kind": KIND, "experiment": experiment, "classes": list(CLASSES),
            "runs": sorted(names), "counts": rows}


def check_invalid(path: Any, data: Any) -> dict[str, Any]:
    """``data`` if it is a :func:`count_invalid` value (its counts non-negative integers that
    sum to ``generations``), else a one-line :class:`ResultsFileError` naming the row and key."""
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise ResultsFileError(f"{path}: not an invalid-questions file (kind is not {KIND!r})")
    if data.get("classes") != list(CLASSES):
        raise ResultsFileError(f"{path}: 'classes' is not {list(CLASSES)}")
    rows = data.get("counts")
    if not isinstance(rows, list) or not rows:
        raise ResultsFileError(f"{path}: no 'counts' list")
    for i, r in enumerate(rows):
        where = f"{path}: counts[{i}]"
        if not isinstance(r, dict) or not isinstance(r.get("arm"), str) or name_problem(r["arm"]):
            raise ResultsFileError(f"{where}: 'arm' is not a name")
        for key in ("iteration", "generations", *CLASSES):
            v = r.get(key)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ResultsFileError(f"{where}: {key!r} is not a non-negative integer")
        if r["generations"] == 0 or sum(r[k] for k in CLASSES) != r["generations"]:
            raise ResultsFileError(f"{where}: the class counts do not sum to 'generations' "
                                   "(or it is 0)")
    return data


def invalid_table(data: Mapping[str, Any]) -> str:
    """Markdown: per arm and iteration, the generations and each class's share (%)."""
    lines = ["| arm | it. | generations | " + " | ".join(CLASSES) + " |",
             "|---|---|---|" + "---|" * len(CLASSES)]
    for r in data["counts"]:
        n = r["generations"]
        lines.append(f"| {r['arm']} | {r['iteration']} | {n:,} | "
                     + " | ".join(f"{100 * r[k] / n:.1f} %" for k in CLASSES) + " |")
    return "\n".join(lines)
