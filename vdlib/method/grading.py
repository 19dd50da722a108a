"""Answer equivalence (math-verify) and majority vote, safe on untrusted model output.

``is_equivalent(gold, pred)`` compares two final answers (the contents of ``\\boxed{}``, or a
benchmark's gold string) with math-verify, gold first. Both sides are normalised and wrapped in
``$...$`` before parsing, so bare LaTeX such as ``\\frac{\\sqrt{3}}{2}`` matches itself (R-Zero's
evaluation parsed bare strings and missed exactly this). It never raises and never hangs:

- cheap checks first, without sympy: identical after normalisation -> True; two plain
  integers -> equal as integers (what math-verify answers for them, in microseconds);
- everything else runs in one persistent helper process (started on first use, from any
  thread). There math-verify's own ``signal.alarm`` timeouts bound each parse and comparison
  (``timeout`` seconds, rounded up); a comparison that still has not answered after
  ``timeout`` + 1 s (sympy inside C code that holds the GIL and never sees the alarm; one
  froze a GPU run's scoring stage for good) gets the helper killed and restarted, and counts
  as not equivalent. The helper is a plain subprocess, so scripts without a ``__main__``
  guard and ``multiprocessing.Pool`` workers can use it too.

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
import math
import os
import re
import threading
import time
from collections.abc import Sequence
from typing import Any

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


def _serve(compare_spec: str | None = None) -> None:
    """The helper's loop (its main thread, so math-verify's alarms work): one JSON line
    ``[gold, pred, timeout]`` in, ``1`` or ``0`` out, until stdin closes. ``compare_spec``
    (``module:function``) replaces math-verify in tests."""
    import importlib
    import json
    import signal
    import sys

    # the helper ends when its stdin closes (its owner exited) or its owner kills it; a SIGINT
    # sent to the owner's process group (a notebook cell interrupted, a kernel shut down by
    # papermill) is not for it, and would print a KeyboardInterrupt traceback
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # the answers go out on a private copy of stdout; anything else printed (by sympy, a
    # library, C code) lands on stderr and cannot shift them
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    compare = _verify_here
    if compare_spec:
        module, _, name = compare_spec.partition(":")
        compare = getattr(importlib.import_module(module), name)
    for line in sys.stdin.buffer:
        try:
            gold, pred, timeout = json.loads(line)
            result = bool(compare(gold, pred, timeout))
        except Exception:  # noqa: BLE001 - untrusted input: any failure is "not equivalent"
            result = False
        out.write(b"1\n" if result else b"0\n")


class _HelperProcess:
    """One persistent process that runs the math-verify comparisons, with a hard timeout.

    A plain subprocess (``python -c``), not ``multiprocessing``: a spawned child would re-run
    the caller's ``__main__`` script (fatal in a script without a ``__main__`` guard), and a
    daemonic process may not have multiprocessing children. ``compare`` (a module-level
    ``(gold, pred, timeout) -> bool``, importable with the caller's ``sys.path``) replaces
    math-verify in tests.
    """

    GRACE = 1.0  # seconds past ``timeout`` before the helper counts as stuck and is killed
    START_UP = 30.0  # extra budget of the first comparison: the helper's start and imports

    def __init__(self, compare: Any = None) -> None:
        self._compare = f"{compare.__module__}:{compare.__qualname__}" if compare else ""
        self._lock = threading.Lock()
        self._proc: Any = None
        self._warm = False
        self._owner = os.getpid()
        self.timeouts = 0  # comparisons that ran out of time, soft or hard

    def _start(self) -> None:
        import subprocess
        import sys

        path = os.pathsep.join(p or os.getcwd() for p in sys.path)  # what this process imports
        env = {**os.environ, "PYTHONPATH": path}
        code = f"from vdlib.method.grading import _serve; _serve({self._compare!r})"
        self._proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, env=env, bufsize=0)
        self._owner = os.getpid()
        self._warm = False

    def _kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait(timeout=5)
            for pipe in (self._proc.stdin, self._proc.stdout):
                pipe.close()
        self._proc = None

    def close(self) -> None:
        """End the helper (its input closed, so it leaves its loop; killed if it does not
        within a second), as the process exits: no helper outlives its owner, and no pipe is
        left for the interpreter to warn about. A forked child leaves its parent's alone."""
        with self._lock:
            if self._proc is None or self._owner != os.getpid():
                return
            proc, self._proc = self._proc, None
            try:
                proc.stdin.close()
                proc.wait(timeout=1)
            except Exception:  # noqa: BLE001 - stuck in a comparison or already gone
                proc.kill()
                proc.wait(timeout=5)
            proc.stdout.close()

    def _ask(self, gold: str, pred: str, timeout: float, budget: float) -> bool | None:
        """The helper's answer, or None when it gave none within ``budget`` seconds."""
        import json
        import select

        self._proc.stdin.write(json.dumps([gold, pred, max(1, math.ceil(timeout))]).encode()
                               + b"\n")
        ready, _, _ = select.select([self._proc.stdout], [], [], budget)
        if not ready:
            return None
        line = self._proc.stdout.readline()
        return None if not line else line.strip() == b"1"

    def compare(self, gold: str, pred: str, timeout: float) -> bool | None:
        """The verdict, or None when the comparison ran out of time (soft or hard)."""
        with self._lock:
            if self._owner != os.getpid():  # a forked child: its parent's helper is not its own
                self._proc = None
            if self._proc is None or self._proc.poll() is not None:
                self._start()
            warm = self._warm
            budget = timeout + self.GRACE + (0.0 if warm else self.START_UP)
            started = time.monotonic()
            try:
                result = self._ask(gold, pred, timeout, budget)
            except (OSError, ValueError):  # a helper that died meanwhile
                result = None
            if result is not None:
                self._warm = True
                # math-verify's own alarm answers False at the timeout: count it as one
                if not result and warm and time.monotonic() - started >= timeout:
                    self.timeouts += 1
                    return None
                return result
            logger.warning("answer comparison exceeded %.1f s; restarting the grading helper "
                           "(gold %r, answer %r)", timeout, gold[:200], pred[:200])
            self._kill()
            self.timeouts += 1
            return None


_HELPER = _HelperProcess()
atexit.register(_HELPER.close)


def _equivalent(gold: Any, pred: Any, timeout: float,
                helper: _HelperProcess | None = None) -> bool | None:
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
    for h in _vote_helpers(workers):
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


_VOTE_HELPERS: list[_HelperProcess] = []
_VOTE_LOCK = threading.Lock()


def _vote_helpers(n: int) -> list[_HelperProcess]:
    """The first ``n`` of the process's vote helpers, made as needed and kept for later calls
    (a GRPO step's reward votes each step): each starts on first use and exits with this
    process, when its stdin closes."""
    with _VOTE_LOCK:
        while len(_VOTE_HELPERS) < n:
            _VOTE_HELPERS.append(_HelperProcess())
        return _VOTE_HELPERS[:n]


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


def _vote(answers: Sequence[str | None], timeout: float, helper: _HelperProcess | None,
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
