r"""Judged scores beside math-verify's (beyond the paper; ``evaluation.judge``).

The paper scores by exact match via math-verify. R-Zero's published scores also passed through
an LLM "recheck" whose arguments were swapped (its users' reports); here a judge only ever adds
a column: each completion of an evaluation folder is shown to the judge with the problem, the
reference answer and the model's final answer, each under its own label, and the judged pass@1
sits next to the math-verify one in the tables (:func:`vdlib.report.tables.judged_table`). The exact
prompt (:data:`JUDGE_PROMPT`) and the judge's model are written with the scores
(``<eval folder>/judged/judge.json``), and every reply per record
(``<eval folder>/judged/<benchmark>/run<r>.jsonl``).

>>> parse_judgement('Both are 1/2. {"correct": true}'), parse_judgement("unsure") is None
(True, True)
>>> judge_messages("1+1?", "2", "2")[0]["content"].count("Reference answer")
1
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vdlib.evaluation.stats import BenchmarkResult, EvalSummary
from vdlib.utils.artifacts import atomic_write_json, read_jsonl, write_jsonl
from vdlib.utils.stats import SE_DDOF

__all__ = ["JUDGE_PROMPT", "JUDGED_DIR", "judge_messages", "parse_judgement",
           "judge_evaluation", "load_judge_meta"]

logger = logging.getLogger(__name__)

#: Sub-folder of an evaluation folder that holds the judged records, summary and prompt.
JUDGED_DIR = "judged"

JUDGE_PROMPT = (
    "You grade a model's answer to a problem against the reference answer.\n\n"
    "Problem:\n{problem}\n\n"
    "Reference answer (taken as correct):\n{gold}\n\n"
    "Model's final answer:\n{prediction}\n\n"
    "Is the model's final answer mathematically equivalent to the reference answer? Ignore "
    "formatting and units of presentation; an answer with extra or missing solutions is wrong. "
    'Reason briefly, then end with a JSON object on its own line: {{"correct": true}} or '
    '{{"correct": false}}.'
)

_VERDICT = re.compile(r'"?correct"?\s*:\s*"?(true|false)"?', re.IGNORECASE)
_NO_ANSWER_TAIL = 2000  # characters of a completion shown when it has no \boxed{} answer


def judge_messages(problem: str, gold: str, prediction: str) -> list[dict[str, str]]:
    """The one-message conversation asking the judge about one answer (gold and prediction
    each under its own label, never positional)."""
    return [{"role": "user", "content": JUDGE_PROMPT.format(problem=problem, gold=gold,
                                                            prediction=prediction)}]


def parse_judgement(text: str | None) -> bool | None:
    """The last ``"correct": true|false`` of a judge's reply; None when there is none."""
    if not isinstance(text, str):
        return None
    hits = _VERDICT.findall(text)
    return hits[-1].lower() == "true" if hits else None


def _prediction(record: dict[str, Any]) -> str:
    if record.get("extracted") is not None:
        return str(record["extracted"])
    tail = str(record.get("completion") or "")[-_NO_ANSWER_TAIL:]
    return f"(no \\boxed{{}} answer; the end of the model's reply follows)\n{tail}"


def judge_evaluation(eval_dir: str | Path, verifier: Any, ddof: int = SE_DDOF) -> EvalSummary:
    """Judged pass@1 of every ``<eval_dir>/<benchmark>/run<r>.jsonl``, as an
    :class:`EvalSummary` (protocol: the judge's model and prompt). ``verifier`` is a
    :class:`vdlib.evaluation.verifier.Verifier` (anything with ``model`` and ``complete``). A record
    the judge gives no verdict for counts as wrong (its verdict is stored as null). Results go to
    ``<eval_dir>/judged/`` (records with ``judge_reply`` and ``judged_correct``,
    ``summary.json``, ``judge.json``)."""
    eval_dir = Path(eval_dir)
    out = eval_dir / JUDGED_DIR
    files = sorted(p for p in eval_dir.glob("*/run*.jsonl") if p.parent.name != JUDGED_DIR)
    if not files:
        raise FileNotFoundError(f"{eval_dir} holds no evaluation records "
                                "(<benchmark>/run<r>.jsonl)")
    meta = {"model": getattr(verifier, "model", None), "prompt": JUDGE_PROMPT,
            "verdict": 'last "correct": true|false of the reply; none = wrong'}
    atomic_write_json(out / "judge.json", meta)
    per_bench: dict[str, list[tuple[int, float, int]]] = {}
    for path in files:
        records = read_jsonl(path)
        convs = [judge_messages(r["problem"], str(r["gold"]), _prediction(r)) for r in records]
        replies: Sequence[str | None] = verifier.complete(convs) if convs else []
        judged = []
        for r, reply in zip(records, replies, strict=True):
            verdict = parse_judgement(reply)
            judged.append({**r, "judge_reply": reply, "judged_correct": verdict})
        write_jsonl(out / path.parent.name / path.name, judged)
        acc = sum(bool(x["judged_correct"]) for x in judged) / len(judged) if judged else 0.0
        run = int(path.stem.removeprefix("run"))
        seed = int(records[0]["seed"]) if records else run
        per_bench.setdefault(path.parent.name, []).append((run, acc, seed))
        logger.info("judged %s: %.4f (math-verify %.4f)", path, acc,
                    sum(bool(r["correct"]) for r in records) / max(1, len(records)))
    summary = EvalSummary(protocol={"judge": meta})
    for b, runs in per_bench.items():
        runs.sort()
        n = len(read_jsonl(eval_dir / b / f"run{runs[0][0]}.jsonl"))
        summary.results[b] = BenchmarkResult(b, n, [a for _, a, _ in runs],
                                             [s for _, _, s in runs], ddof)
    atomic_write_json(out / "summary.json", summary.to_dict())
    return summary


def load_judge_meta(eval_dir: str | Path) -> dict[str, Any]:
    """The judge's model and prompt recorded in ``<eval_dir>/judged/judge.json``."""
    return json.loads((Path(eval_dir) / JUDGED_DIR / "judge.json").read_text(encoding="utf-8"))
