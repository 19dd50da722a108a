"""Answer equivalence (math-verify) and majority vote, safe on untrusted model output.

``is_equivalent(gold, pred)`` compares two final answers (the contents of ``\\boxed{}``, or a
benchmark's gold string) with math-verify, gold first. Both sides are normalised and wrapped in
``$...$`` before parsing, so bare LaTeX such as ``\\frac{\\sqrt{3}}{2}`` matches itself (R-Zero's
evaluation parsed bare strings and missed exactly this). It never raises and never hangs:

- cheap checks first, without sympy: identical after normalisation -> True; two plain
  integers -> equal as integers (what math-verify answers for them, in microseconds);
- everything else runs in one persistent helper process (started on first use, from any
  thread; :class:`vdlib.utils.helper_process.HelperProcess`). There math-verify's own
  ``signal.alarm`` timeouts bound each parse and comparison (``timeout`` seconds, rounded up);
  a comparison that still has not answered after ``timeout`` + 1 s (sympy inside C code that
  holds the GIL and never sees the alarm; one froze a GPU run's scoring stage for good) gets
  the helper killed and restarted, and counts as not equivalent. The helper is a plain
  subprocess, so scripts without a ``__main__`` guard and ``multiprocessing.Pool`` workers can
  use it too.

This module holds the grading itself (normalisation, math-verify, the vote); running it in
helper processes with a hard timeout is :mod:`vdlib.utils.helper_process`, which knows nothing
of what it runs.

``majority_vote(answers)`` groups answers greedily in order of first appearance: an answer joins
the first group whose first member it equals (as a string, or ``is_equivalent`` in either
direction); acc = size of the largest group / number of answers (failed extractions included:
the denominator is always M); ties go to the group that appeared first. A failed extraction
(``None``, or an empty answer) is handled by ``failed`` (:data:`FAILED_EXTRACTION`; config key
``scoring.failed_extraction``, docs/experiments.md argues the default):

- ``"never_group"`` (default): it counts in the denominator and never forms a group;
- ``"separate_group"``: the failures form one group of their own, placed where the first of
  them appeared, which can be the largest; then the majority answer is ``None`` and acc = the
  failures' share. This is R-Zero's reward server as it runs: mathruler's
  ``extract_boxed_content`` returns the string ``"None"`` for an answer without a box, and that
  string is grouped like any answer.

An answer whose comparison ran into the timeout is compared as a string only from then on, so
ten pathological answers cost about ten timeouts, not ninety.

>>> is_equivalent("\\\\frac{1}{2}", "0.5"), is_equivalent("1,000", "1000"), is_equivalent("3", "4")
(True, True, False)
>>> majority_vote(["34", "34.0", None, "92", "\\\\frac{68}{2}"])
('34', 0.6)
>>> majority_vote([None, None])
(None, 0.0)
>>> majority_vote([None, "7", None, None, "7"], failed="separate_group")
(None, 0.6)
>>> majority_vote([None, "7", None, None, "7"])
('7', 0.4)
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import re
from collections.abc import Sequence
from typing import Any

from vdlib.utils.helper_process import HelperPool, HelperProcess

__all__ = ["is_equivalent", "majority_vote", "majority_votes", "vote_workers", "normalize_answer",
           "DEFAULT_TIMEOUT", "FAILED_EXTRACTION", "check_failed_extraction"]

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 5.0
#: How a majority vote treats a failed extraction (see the module docstring); the first is the
#: default, the choices of config key ``scoring.failed_extraction``.
FAILED_EXTRACTION = ("never_group", "separate_group")


def check_failed_extraction(failed: str) -> str:
    """``failed`` when it is one of :data:`FAILED_EXTRACTION`, else a one-line ValueError.

    >>> check_failed_extraction("separate")
    Traceback (most recent call last):
    ...
    ValueError: failed_extraction = 'separate'; allowed: never_group, separate_group
    """
    if failed not in FAILED_EXTRACTION:
        raise ValueError(f"failed_extraction = {failed!r}; allowed: {', '.join(FAILED_EXTRACTION)}")
    return failed
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


#: the process's helper for :func:`is_equivalent` (started on first use, closed at exit)
_HELPER = HelperProcess(_verify_here)
atexit.register(_HELPER.close)


def _equivalent(gold: Any, pred: Any, timeout: float,
                helper: HelperProcess | None = None) -> bool | None:
    """:func:`is_equivalent`, with None for a comparison that ran out of time; ``helper``
    (default: the process's one) runs the math-verify part."""
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
    return (helper or _HELPER).compare(g, p, timeout)


def is_equivalent(gold: Any, pred: Any, timeout: float = DEFAULT_TIMEOUT) -> bool:
    """True when ``pred`` is mathematically equivalent to ``gold`` (see the module docstring).

    Non-string or empty inputs give False. Never raises; bounded by ``timeout`` + 1 s per
    comparison in any thread (plus the helper's start-up on first use).
    """
    return bool(_equivalent(gold, pred, timeout))


def majority_vote(answers: Sequence[str | None], timeout: float = DEFAULT_TIMEOUT, *,
                  failed: str = "never_group") -> tuple[str | None, float]:
    """``(majority answer, acc)`` over ``answers`` (see the module docstring).

    The majority answer is the first member of the largest group (None when that group is the
    failures', under ``failed="separate_group"``); acc is its size divided by ``len(answers)``
    (None answers included). Under ``"never_group"`` no valid answer gives ``(None, 0.0)``.
    """
    return _vote(answers, timeout, None, check_failed_extraction(failed))


def majority_votes(answer_lists: Sequence[Sequence[str | None]],
                   timeout: float = DEFAULT_TIMEOUT, *, workers: int | None = None,
                   progress: Any = None,
                   failed: str = "never_group") -> list[tuple[str | None, float]]:
    """:func:`majority_vote` of each list (with the same ``failed``), in order, the same
    results, over ``workers`` threads with a grading helper each (default:
    :func:`vote_workers`; 1 = one after another in this thread; the helpers stay for the next
    call). ``progress``: called once per finished vote (e.g. a tqdm's ``update``)."""
    from concurrent.futures import ThreadPoolExecutor
    from queue import SimpleQueue

    check_failed_extraction(failed)
    workers = vote_workers() if workers is None else workers
    if workers <= 1 or len(answer_lists) < 2:
        out = []
        for answers in answer_lists:
            out.append(majority_vote(answers, timeout, failed=failed))
            if progress:
                progress()
        return out
    helpers: SimpleQueue = SimpleQueue()
    for h in _VOTE_POOL.take(workers):
        helpers.put(h)

    def one(answers: Sequence[str | None]) -> tuple[str | None, float]:
        h = helpers.get()
        try:
            return _vote(answers, timeout, h, failed)
        finally:
            helpers.put(h)
            if progress:
                progress()

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vdlib-vote") as pool:
        return list(pool.map(one, answer_lists))


#: the vote threads' helpers, one a thread, kept for the next call (a GRPO step's reward votes
#: each step)
_VOTE_POOL = HelperPool(_verify_here)


def vote_workers() -> int:
    """Threads (each with its own grading helper process) for :func:`majority_votes`:
    ``$VDLIB_VOTE_WORKERS`` if set, else a quarter of the CPU cores, 1 to 8 (1 on a 2-core
    machine; runs that share a host share its cores)."""
    env = os.environ.get("VDLIB_VOTE_WORKERS")
    if env:
        if not env.strip().isdigit() or int(env) < 1:
            raise ValueError(f"VDLIB_VOTE_WORKERS = {env!r}; allowed: an integer >= 1")
        return int(env)
    return max(1, min(8, (os.cpu_count() or 1) // 4))


def _vote(answers: Sequence[str | None], timeout: float, helper: HelperProcess | None,
          failed: str = "never_group") -> tuple[str | None, float]:
    groups: list[list[str | None]] = []
    failures: list[str | None] | None = None  # the failures' group, under "separate_group"
    slow: set[str] = set()  # answers that ran into the timeout: compared as strings from then on

    def same(head: str, a: str) -> bool:
        if a == head:
            return True
        if head in slow or a in slow:
            return False
        for x, y in ((head, a), (a, head)):
            verdict = _equivalent(x, y, timeout, helper)
            if verdict is None:
                slow.update((head, a))
                return False
            if verdict:
                return True
        return False

    for a in answers:
        if not isinstance(a, str) or not a.strip():
            if failed == "separate_group":
                if failures is None:
                    failures = []
                    groups.append(failures)  # its place: where the first failure appeared
                failures.append(None)
            continue
        for g in groups:
            if g is not failures and same(g[0], a):  # type: ignore[arg-type]
                g.append(a)
                break
        else:
            groups.append([a])
    if not groups:
        return None, 0.0
    best = max(groups, key=len)  # max keeps the first of equal sizes: first appearance wins
    return (None if best is failures else best[0]), len(best) / len(answers)
