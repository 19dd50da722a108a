"""What ``scoring.failed_extraction: separate_group`` (R-Zero's reward server) would change in
the committed gpu-small evidence, against ``never_group`` (vdlib's default, with which every
committed run was scored). Issue 51, item 5.

For every valid, scored question of the committed runs (:mod:`committed_questions`: the runs
behind docs/results/*.json, each once) the stored solver answers are voted on again:

- never_group: the stored ``acc`` (the runs voted so); checked to equal the largest
  non-failure group / M where the groups can be counted without math-verify;
- separate_group: acc = max(largest non-failure group, failures) / M. The failures never join
  an answer group under either rule, so the answer groups are the same and only the failures'
  own group is added: exact, with no new comparison. A sample of questions with failures is
  also voted by :func:`vdlib.method.grading.majority_vote` itself as a check (``--check N``).

Per arm it prints and writes (``--out``, Markdown, and the same as JSON beside it): the
questions, the share with a failed extraction, the share whose acc changes, whose membership
of the difficulty window [0.3, 0.7] changes (entering / leaving), whose majority becomes the
failures' group (strictly larger, or tied), and the mean paper proposer reward
min(acc, 1 - acc) inside the window, else 0 (no repetition penalty: it does not depend on the
vote), under each rule. These are the curriculum-generation questions of the trained proposer,
scored by the frozen solver exactly as its GRPO rollouts are (the rollouts themselves are not
committed).

    .venv/bin/python benchmarks/failed_extraction_effect.py \\
        --out docs/results/gpu_small/failed_extraction_effect.md
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from committed_questions import RUN_DIRS, iterations, read_questions, runs  # noqa: E402

from vdlib.method.curriculum import in_window  # noqa: E402
from vdlib.method.rewards import proposer_reward  # noqa: E402

logger = logging.getLogger("failed_extraction_effect")
TAU_MIN, TAU_MAX = 0.3, 0.7


def separate_group_acc(answers: list, acc: float) -> tuple[float, str]:
    """acc under separate_group from the never_group acc of the same answers, and where the
    majority goes: ``"answer"``, ``"failures"`` (the failures' group is larger than every
    answer group) or ``"tie"`` (as large as the largest: the first to appear wins)."""
    m = len(answers)
    largest = round(acc * m)
    failures = sum(1 for a in answers if not isinstance(a, str) or not a.strip())
    where = ("failures" if failures > largest else
             "tie" if failures == largest and failures > 0 else "answer")
    return max(largest, failures) / m, where


def reward(acc: float) -> float:
    return proposer_reward([acc], TAU_MIN, TAU_MAX, "paper", 0.0)[0]


def measure(check: int, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """One row per arm (and one for all arms), and the check's disagreements."""
    stats: dict[str, Counter] = defaultdict(Counter)
    sums: dict[str, defaultdict] = defaultdict(lambda: defaultdict(float))
    sample: list[tuple[list, float]] = []
    for _experiment, arm, _seed, run_dir in runs():
        for _t, path in iterations(run_dir):
            for r in read_questions(path):
                if not r.get("valid") or r.get("acc") is None:
                    continue
                answers, acc = r["solver_answers"], float(r["acc"])
                new, where = separate_group_acc(answers, acc)
                for key in (arm, "all"):
                    c, s = stats[key], sums[key]
                    c["questions"] += 1
                    c["with_failure"] += any(not isinstance(a, str) for a in answers)
                    c["acc_changes"] += abs(new - acc) > 1e-9
                    was, now = in_window(acc, TAU_MIN, TAU_MAX), in_window(new, TAU_MIN, TAU_MAX)
                    c["enters_window"] += now and not was
                    c["leaves_window"] += was and not now
                    c["in_window_never"] += was
                    c["in_window_separate"] += now
                    c["majority_failures"] += where == "failures"
                    c["majority_tie"] += where == "tie"
                    s["reward_never"] += reward(acc)
                    s["reward_separate"] += reward(new)
                    c["reward_changes"] += abs(reward(new) - reward(acc)) > 1e-9
                if any(not isinstance(a, str) for a in answers):
                    sample.append((answers, acc))
    rows = []
    order = [a for e in RUN_DIRS for a in dict.fromkeys(
        arm for ex, arm, _, _ in runs([e]))] + ["all"]
    for arm in dict.fromkeys(order):
        c, s, n = stats[arm], sums[arm], stats[arm]["questions"]
        if not n:
            continue
        rows.append({
            "arm": arm, "questions": n,
            "with_failure": c["with_failure"] / n,
            "acc_changes": c["acc_changes"] / n,
            "window_changes": (c["enters_window"] + c["leaves_window"]) / n,
            "enters_window": c["enters_window"] / n, "leaves_window": c["leaves_window"] / n,
            "in_window_never": c["in_window_never"] / n,
            "in_window_separate": c["in_window_separate"] / n,
            "majority_failures": c["majority_failures"] / n,
            "majority_tie": c["majority_tie"] / n,
            "reward_changes": c["reward_changes"] / n,
            "mean_reward_never": s["reward_never"] / n,
            "mean_reward_separate": s["reward_separate"] / n,
        })
    bad = []
    if check:
        from vdlib.method.grading import majority_vote

        random.Random(seed).shuffle(sample)
        for answers, acc in sample[:check]:
            never = majority_vote(answers)[1]
            sep = majority_vote(answers, failed="separate_group")[1]
            want = separate_group_acc(answers, acc)[0]
            if abs(never - acc) > 1e-9 or abs(sep - want) > 1e-9:
                bad.append({"answers": answers, "stored_acc": acc, "never_group": never,
                            "separate_group": sep, "expected_separate": want})
    return rows, bad


def markdown(rows: list[dict], checked: int, bad: list[dict]) -> str:
    pct = lambda x: f"{100 * x:.1f} %"  # noqa: E731
    lines = [
        "# Failed extractions in the majority vote: the effect on the committed gpu-small "
        "questions",
        "",
        "Made by `benchmarks/failed_extraction_effect.py` (issue 51, item 5). Every valid, "
        "scored question of the runs behind docs/results/*.json (each run once: the shared "
        "baseline and VD75 runs under the main table), M = 10 solver answers each, "
        "window [0.3, 0.7]. never_group: the committed acc (vdlib's default; every run was "
        "scored so). separate_group: the failures also form a group (R-Zero's reward "
        "server). Shares are of the arm's questions; rewards are the paper's min(acc, 1 - acc) "
        "inside the window, else 0, without the repetition penalty (the same under both).",
        "",
        "| arm | questions | with a failure | acc changes | window changes (enter / leave) "
        "| in window: never / separate | majority = failures (larger / tied) "
        "| reward changes | mean reward: never / separate |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['arm']} | {r['questions']} | {pct(r['with_failure'])} | "
            f"{pct(r['acc_changes'])} | {pct(r['window_changes'])} "
            f"({pct(r['enters_window'])} / {pct(r['leaves_window'])}) | "
            f"{pct(r['in_window_never'])} / {pct(r['in_window_separate'])} | "
            f"{pct(r['majority_failures'])} / {pct(r['majority_tie'])} | "
            f"{pct(r['reward_changes'])} | "
            f"{r['mean_reward_never']:.4f} / {r['mean_reward_separate']:.4f} |")
    lines += ["", f"Check: {checked} questions with a failure, drawn at random, voted again by "
              f"`vdlib.method.grading.majority_vote` under both rules: {len(bad)} disagree with "
              "the stored acc (never_group) or with the count above (separate_group)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="Markdown table to write (and .json beside it)")
    ap.add_argument("--check", type=int, default=300,
                    help="questions with failures voted again by majority_vote (0: none)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    rows, bad = measure(args.check)
    text = markdown(rows, args.check, bad)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
        args.out.with_suffix(".json").write_text(
            json.dumps({"rows": rows, "checked": args.check, "disagreements": bad},
                       indent=1) + "\n", encoding="utf-8")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
