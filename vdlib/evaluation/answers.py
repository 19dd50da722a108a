"""Grading one completion against an item: the last ``\\boxed{}`` (maths, math-verify), letters
for multiple choice, and several-part answers.

Part of :mod:`vdlib.evaluation` (the protocol is described there)."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from vdlib.evaluation.benchmarks import strip_dollars
from vdlib.method.grading import is_equivalent
from vdlib.method.parsing import extract_boxed

__all__ = ["answers_match", "grade", "parse_choice", "split_top_level"]

logger = logging.getLogger(__name__)


_BOX_LETTER = re.compile(r"^\(?\s*([A-Z])\s*\)?(?:[.:)]|\s|$)")
_ANSWER_IS = re.compile(r"answer\s+is\s*:?\s*\(?\s*\$?(?:\\text\{)?\s*([A-Z])\b")
_STANDALONE = re.compile(r"(?<![A-Za-z0-9])([A-Z])(?![A-Za-z0-9])")
_TEXT_WRAP = re.compile(r"\\(?:text|textbf|mathrm|mathbf)\{([^{}]*)\}")


def parse_choice(text: Any, choices: str | Sequence[str]) -> str | None:
    r"""The chosen letter in ``text`` among ``choices`` (e.g. ``"ABCD"``), or None.

    Deterministic, in this order: (1) the content of the last ``\boxed{}``, when it is a valid
    letter, optionally in parentheses or followed by ``.``, ``:``, ``)`` or text
    (``\boxed{B}``, ``\boxed{(B)}``, ``\boxed{B. Paris}``, ``\boxed{\text{B}}``); (2) the last
    ``answer is (X)`` / ``answer is X``; (3) the last standalone capital letter among the valid
    choices. A last box holding something else (not a letter) falls through to (2) and (3).

    >>> parse_choice(r"I think \boxed{\text{(C)}}", "ABCD")
    'C'
    >>> parse_choice("The answer is: D", "ABCD"), parse_choice("E is wrong", "ABCD")
    ('D', None)
    >>> parse_choice("A or B? I pick B", "AB")
    'B'
    """
    if not isinstance(text, str):
        return None
    valid = set(choices)
    boxed = extract_boxed(text)
    if boxed is not None:
        inner = _TEXT_WRAP.sub(r"\1", boxed).strip()
        m = _BOX_LETTER.match(inner)
        if m and m.group(1) in valid:
            return m.group(1)
    hits = [m.group(1) for m in _ANSWER_IS.finditer(text) if m.group(1) in valid]
    if hits:
        return hits[-1]
    hits = [m.group(1) for m in _STANDALONE.finditer(text) if m.group(1) in valid]
    return hits[-1] if hits else None


def split_top_level(text: str) -> list[str]:
    """Split at commas outside ``()``, ``[]``, ``{}``; parts stripped, empty parts dropped."""
    parts, depth, cur = [], 0, []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):  # \{ \} \, are not structure
            cur.append(text[i : i + 2])
            i += 2
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def _sets_match(gold_parts: list[str], pred_parts: list[str]) -> bool:
    """Multiset match: every gold part pairs with a distinct equivalent predicted part."""
    if len(gold_parts) != len(pred_parts):
        return False
    left = list(pred_parts)
    for g in gold_parts:
        for j, p in enumerate(left):
            if is_equivalent(g, p):
                del left[j]
                break
        else:
            return False
    return True


def answers_match(gold: str, pred: str | None, multi: bool = False) -> bool:
    """``is_equivalent(gold, pred)``; with ``multi``, also a comma-separated multiset match.

    The multi-answer rule (OlympiadBench): when the plain comparison fails and the gold has a
    top-level comma, gold and prediction are split at top-level commas (commas inside
    brackets stay: ``(1,8,19), (2,7,13)`` has two parts) and they match when the parts pair up
    one to one under ``is_equivalent``, in any order. So ``69, 84`` matches ``84, 69`` but not
    ``69`` alone.
    """
    if pred is None or not isinstance(gold, str):
        return False
    if is_equivalent(gold, pred):
        return True
    if multi:
        g_parts = split_top_level(gold)
        if len(g_parts) > 1:
            return _sets_match(g_parts, split_top_level(strip_dollars(pred)))
    return False


def grade(item: Mapping[str, Any], completion: str) -> dict[str, Any]:
    """``{"extracted", "correct"}`` for one completion of ``item``.

    Maths: the last ``\\boxed{}`` (None when there is none, or the last one is unclosed),
    correct per :func:`answers_match` (multi-answer rule for OlympiadBench). Multiple choice:
    :func:`parse_choice` against ``item["choices"]``, correct when it equals the gold letter.
    BBH's free-form tasks: the last box against the target by :func:`is_equivalent`.
    """
    gold = item["answer"]
    if item.get("choices"):
        extracted = parse_choice(completion, item["choices"])
        return {"extracted": extracted, "correct": extracted is not None and extracted == gold}
    extracted = extract_boxed(completion) if isinstance(completion, str) else None
    multi = item.get("benchmark") == "olympiadbench"
    return {"extracted": extracted, "correct": answers_match(gold, extracted, multi=multi)}


