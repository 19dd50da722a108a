"""Majority voting: every math-verify comparison in the grading helper process (hard timeout)
against the same comparisons in the calling process (math-verify's alarm only, which sympy
stuck in C code never sees), measured in the same run.

    python benchmarks/grading_speed.py [--questions 300] [--m 10] [--out PATH]
    python benchmarks/grading_speed.py --votes-from \
        docs/results/archives/gpu_small_main_h100x1_h100x4.zip/h100x1/vd75-seed2/iter_3/questions.jsonl.gz

``--votes-from``: instead of synthetic answers, the extracted solver answers of a GPU run's
``questions.jsonl(.gz)`` (every valid question's ``solver_answers``); the votes must then also
equal the majority and acc that the run recorded.

Each question gets ``--m`` synthetic solver answers drawn from a few spellings of two or three
values (``\\frac{1}{2}``, ``0.5``, ``\\dfrac12``, ``2\\sqrt{3}``, ``\\sqrt{12}``, integers with
thousands separators, ...), so that the vote needs real sympy comparisons, not only the string
and integer fast paths. Both paths must give identical votes. Prints the ratio helper /
in-process (> 1: the helper is slower).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import report  # noqa: E402

from vdlib.method import grading  # noqa: E402
from vdlib.utils.helper_process import HelperProcess  # noqa: E402

SPELLINGS = [
    ["\\frac{1}{2}", "0.5", "\\dfrac{1}{2}", "1/2"],
    ["2\\sqrt{3}", "\\sqrt{12}", "2 \\sqrt 3"],
    ["1,000", "1000", "1000.0"],
    ["\\frac{3}{4}", "0.75", "\\frac{6}{8}"],
    ["\\pi", "\\pi r^2", "3.14159"],
    ["x^2+1", "1+x^2", "(x+i)(x-i)"],
    ["12", "\\boxed{12}", "12.0", "13"],
]


def synthetic_votes(n: int, m: int, seed: int = 0) -> list[list[str]]:
    """``n`` answer lists of length ``m``, each mixing the spellings of 2-3 value groups."""
    rng = random.Random(seed)
    votes = []
    for _ in range(n):
        groups = rng.sample(SPELLINGS, rng.choice([2, 3]))
        votes.append([rng.choice(rng.choice(groups)) for _ in range(m)])
    return votes


class _InProcess:
    """The comparison in the calling thread (the code path before the helper took every one)."""

    timeouts = 0

    def compare(self, gold: str, pred: str, timeout: float) -> bool:
        try:
            return grading._verify_here(gold, pred, max(1, int(timeout + 0.999)))
        except Exception:  # noqa: BLE001
            return False


def _run(votes: list[list[str]], helper) -> tuple[float, list]:
    grading._HELPER = helper
    grading._parse.cache_clear()
    t = time.perf_counter()
    out = [grading.majority_vote(v) for v in votes]
    return time.perf_counter() - t, out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--questions", type=int, default=300)
    p.add_argument("--m", type=int, default=10)
    p.add_argument("--votes-from", help="a run's questions.jsonl(.gz): its solver answers")
    p.add_argument("--workers", type=int, default=1,
                   help="also time majority_votes over this many threads (> 1)")
    p.add_argument("--out", help="append the JSON result to this file")
    args = p.parse_args()
    recorded = None
    if args.votes_from:
        import gzip
        import io
        import json

        from vdlib.utils.archive import resolve

        where = resolve(args.votes_from)  # a file, or a member of a committed archive
        with where.open("rb") as raw:
            src = (gzip.open(raw, "rt", encoding="utf-8") if args.votes_from.endswith(".gz")
                   else io.TextIOWrapper(raw, encoding="utf-8"))
            rows = [r for r in map(json.loads, src) if r.get("valid") and r.get("solver_answers")]
        votes = [r["solver_answers"] for r in rows]
        recorded = [(r["majority"], r["acc"]) for r in rows]
        args.questions, args.m = len(votes), max(map(len, votes), default=0)
    else:
        votes = synthetic_votes(args.questions, args.m)
    helper = HelperProcess(grading._verify_here)
    helper.compare("1", "2", 5)  # start-up and imports outside the timing
    grading.is_equivalent("\\frac{1}{2}", "0.5")  # in-process imports too
    t_here, here = _run(votes, _InProcess())
    t_helper, via_helper = _run(votes, helper)
    if here != via_helper:
        raise SystemExit("the helper's votes differ from the in-process votes")
    if recorded is not None and [(m, round(a, 9)) for m, a in via_helper] != \
            [(m, round(a, 9)) for m, a in recorded]:
        raise SystemExit(f"the votes differ from those recorded in {args.votes_from}")
    t_par = None
    if args.workers > 1:  # majority_votes over threads, a helper each (what the score stage uses)
        grading._HELPER = helper
        t = time.perf_counter()
        parallel = grading.majority_votes(votes, workers=args.workers)
        t_par = time.perf_counter() - t
        if parallel != via_helper:
            raise SystemExit("majority_votes differs from one majority_vote at a time")
    helper.kill()
    result = {"benchmark": "grading_speed", "votes_from": args.votes_from or "synthetic",
              "questions": args.questions, "m": args.m,
              "in_process_s": round(t_here, 3), "helper_s": round(t_helper, 3),
              "ratio_helper_over_in_process": round(t_helper / t_here, 3),
              "workers": args.workers, "majority_votes_s": None if t_par is None
              else round(t_par, 3), "speedup_workers_over_one_helper": None if t_par is None
              else round(t_helper / t_par, 3), "cpu_count": os.cpu_count(),
              "python": platform.python_version(), "machine": platform.machine()}
    report(result, f"majority vote over {args.questions} x {args.m} answers: helper "
                   f"{t_helper:.2f} s, in-process {t_here:.2f} s "
                   f"(ratio {t_helper / t_here:.2f}, identical votes)"
                   + (f"; majority_votes, {args.workers} workers: {t_par:.2f} s "
                      f"(x{t_helper / t_par:.2f})" if t_par else ""), args.out)


if __name__ == "__main__":
    main()
