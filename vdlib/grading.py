"""Answer equivalence (math-verify) and majority vote, safe on untrusted model output.

``is_equivalent(gold, pred)`` compares two final answers (the contents of ``\\boxed{}``, or a
benchmark's gold string) with math-verify, gold first. Both sides are normalised and wrapped in
``$...$`` before parsing, so bare LaTeX such as ``\\frac{\\sqrt{3}}{2}`` matches itself (R-Zero's
evaluation parsed bare strings and missed exactly this). It never raises and never hangs:

- cheap checks first, without sympy: identical after normalisation -> True; two plain
  integers -> equal as integers (what math-verify answers for them, in microseconds);
- in a process's main thread, math-verify's own ``signal.alarm`` timeouts bound each parse and
  comparison (``timeout`` seconds, rounded up);
- in any other thread, where signals cannot be used, the comparison runs in one persistent
  helper process (started on first use) and is abandoned after ``timeout`` seconds: the helper
  is then killed and restarted, and the answer counts as not equivalent.

``majority_vote(answers)`` groups answers greedily in order of first appearance: an answer joins
the first group whose first member it equals (as a string, or ``is_equivalent`` in either
direction); ``None`` (a failed extraction) counts in the denominator and never forms a group;
acc = size of the largest group / number of answers; ties go to the group that appeared first.

>>> is_equivalent("\\\\frac{1}{2}", "0.5"), is_equivalent("1,000", "1000"), is_equivalent("3", "4")
(True, True, False)
>>> majority_vote(["34", "34.0", None, "92", "\\\\frac{68}{2}"])
('34', 0.6)
>>> majority_vote([None, None])
(None, 0.0)
"""

from __future__ import annotations

import functools
import logging
import math
import multiprocessing as mp
import re
import threading
from collections.abc import Sequence
from typing import Any

__all__ = ["is_equivalent", "majority_vote", "normalize_answer", "DEFAULT_TIMEOUT"]

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 5.0
_MAX_LEN = 2000  # longer "answers" are not final answers; compare them as strings only

_INTEGER = re.compile(r"[+-]?\d{1,30}")  # plain integers: compared as integers
_TEXT_WRAPPER = re.compile(r"\\(?:text|textbf|mathrm|mbox)\{([^{}]*)\}")
_DEGREES = re.compile(r"\^\s*\{?\\circ\}?")


def normalize_answer(text: str) -> str:
    """Light, meaning-preserving clean-up before parsing.

    Drops surrounding ``$``, ``\\$`` currency signs, ``\\!`` / ``\\,`` / ``\\;`` spacing,
    ``\\left`` / ``\\right``, degree marks, ``\\displaystyle`` and ``\\dfrac`` / ``\\tfrac``
    spelling, unwraps ``\\text{...}`` and collapses whitespace.

    >>> normalize_answer("\\\\$32,\\\\!348")
    '32,348'
    >>> normalize_answer("90^\\\\circ")
    '90'
    """
    s = text.strip()
    s = s.replace("\\$", "").replace("\\!", "").replace("\\,", "").replace("\\;", "")
    s = s.replace("\\left", "").replace("\\right", "").replace("\\displaystyle", "")
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = _DEGREES.sub("", s)
    s = _TEXT_WRAPPER.sub(r"\1", s)
    for _ in range(2):  # "$x$." and "$x.$"
        s = s.strip().strip("$").strip()
        if s.endswith("."):
            s = s[:-1]
    return re.sub(r"\s+", " ", s.strip())


# ----------------------------------------------------------------------------- math-verify


@functools.lru_cache(maxsize=65536)
def _parse(text: str, timeout: int) -> tuple:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    configs = [LatexExtractionConfig(), ExprExtractionConfig()]
    parsed = parse(f"${text}$", extraction_config=configs, parsing_timeout=timeout)
    if not parsed:
        parsed = parse(text, extraction_config=configs, parsing_timeout=timeout)
    return tuple(parsed)


def _verify_here(gold: str, pred: str, timeout: int) -> bool:
    """math-verify in the current thread (timeouts only if this is the main thread)."""
    from math_verify import verify

    g, p = _parse(gold, timeout), _parse(pred, timeout)
    if not g or not p:
        return False
    return bool(verify(list(g), list(p), timeout_seconds=timeout))


def _worker_loop(conn: Any) -> None:  # runs in the helper process's main thread
    while True:
        try:
            gold, pred, timeout = conn.recv()
        except (EOFError, OSError):
            return
        try:
            result = _verify_here(gold, pred, timeout)
        except Exception:  # noqa: BLE001 - untrusted input: any failure is "not equivalent"
            result = False
        conn.send(result)


class _HelperProcess:
    """One persistent process that runs comparisons for non-main threads, with a hard timeout."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: Any = None
        self._conn: Any = None

    def _start(self) -> None:
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_worker_loop, args=(child,), daemon=True,
                                 name="vdlib-grading")
        self._proc.start()
        child.close()

    def _kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.join(timeout=5)
        self._proc = self._conn = None

    def compare(self, gold: str, pred: str, timeout: float) -> bool:
        with self._lock:
            if self._proc is None or not self._proc.is_alive():
                self._start()
            # the first call also pays the helper's start-up and imports
            budget = timeout + (30.0 if not getattr(self._proc, "_vd_warm", False) else 0.0)
            try:
                self._conn.send((gold, pred, max(1, math.ceil(timeout))))
                if self._conn.poll(budget):
                    result = bool(self._conn.recv())
                    self._proc._vd_warm = True
                    return result
            except (EOFError, OSError, BrokenPipeError):
                pass
            logger.warning("answer comparison exceeded %.1f s; restarting the grading helper",
                           timeout)
            self._kill()
            return False


_HELPER = _HelperProcess()


def is_equivalent(gold: Any, pred: Any, timeout: float = DEFAULT_TIMEOUT) -> bool:
    """True when ``pred`` is mathematically equivalent to ``gold`` (see the module docstring).

    Non-string or empty inputs give False. Never raises; bounded by ``timeout`` seconds per
    comparison in any thread (see the module docstring for how).
    """
    if not isinstance(gold, str) or not isinstance(pred, str):
        return False
    g, p = normalize_answer(gold), normalize_answer(pred)
    if not g or not p:
        return False
    if g == p:
        return True
    if _INTEGER.fullmatch(g) and _INTEGER.fullmatch(p):  # math-verify's verdict, without sympy
        return int(g) == int(p)
    if len(g) > _MAX_LEN or len(p) > _MAX_LEN:
        return False
    if threading.current_thread() is not threading.main_thread():
        return _HELPER.compare(g, p, timeout)
    try:
        return _verify_here(g, p, max(1, math.ceil(timeout)))
    except Exception as err:  # noqa: BLE001 - untrusted input
        logger.debug("math-verify failed on %r vs %r: %s", g, p, err)
        return False


def majority_vote(answers: Sequence[str | None],
                  timeout: float = DEFAULT_TIMEOUT) -> tuple[str | None, float]:
    """``(majority answer, acc)`` over ``answers`` (see the module docstring).

    The majority answer is the first member of the largest group; acc is its size divided by
    ``len(answers)`` (None answers included). No valid answer gives ``(None, 0.0)``.
    """
    groups: list[list[str]] = []
    for a in answers:
        if not isinstance(a, str) or not a.strip():
            continue
        for g in groups:
            head = g[0]
            if a == head or is_equivalent(head, a, timeout) or is_equivalent(a, head, timeout):
                g.append(a)
                break
        else:
            groups.append([a])
    if not groups:
        return None, 0.0
    best = max(groups, key=len)  # max keeps the first of equal sizes: first appearance wins
    return best[0], len(best) / len(answers)
