"""The curriculum filter (paper Algorithm 1, line "keep questions in the difficulty window"):
scored questions -> the solver's training set.

A question is kept when it parsed (``valid``), the frozen solver's accuracy ``acc`` over its M
answers lies in ``[tau_min, tau_max]`` (paper: 0.3-0.7) and it has a target: the proposer's
stated answer (``target="proposer"``, the paper) or the solver's majority answer
(``"majority"``, R-Zero).

>>> qs = [{"valid": True, "acc": 0.5, "question": "q", "answer": "1", "majority": "2"},
...       {"valid": True, "acc": 0.9, "question": "r", "answer": "3", "majority": "3"}]
>>> [(k["question"], k["answer"]) for k in filter_curriculum(qs, 0.3, 0.7)]
[('q', '1')]
"""

from __future__ import annotations

from typing import Any

__all__ = ["filter_curriculum", "in_window", "WINDOW_TOLERANCE"]

#: acc = k / M is compared with the window's bounds with this tolerance (so that e.g. a sum of
#: floats that should be 0.3 still counts); the one definition of the window in vdlib: the
#: proposer reward (vdlib.method.rewards), this filter and the verifier tables use it.
WINDOW_TOLERANCE = 1e-9


def in_window(acc: float | None, tau_min: float, tau_max: float) -> bool:
    """``tau_min <= acc <= tau_max`` (with :data:`WINDOW_TOLERANCE`); None is outside.

    >>> in_window(0.3, 0.3, 0.7), in_window(0.8, 0.3, 0.7), in_window(None, 0.3, 0.7)
    (True, False, False)
    """
    return acc is not None and tau_min - WINDOW_TOLERANCE <= acc <= tau_max + WINDOW_TOLERANCE


def filter_curriculum(questions: list[dict[str, Any]], tau_min: float, tau_max: float,
                      target: str = "proposer") -> list[dict[str, Any]]:
    """Questions in the difficulty window with a target answer (see the module docstring)."""
    out = []
    for q in questions:
        acc = q.get("acc")
        if not q.get("valid") or not in_window(acc, tau_min, tau_max):
            continue
        answer = q["answer"] if target == "proposer" else q.get("majority")
        if answer is None:
            continue
        out.append({"question": q["question"], "answer": answer, "acc": acc,
                    "proposer_answer": q["answer"], "majority": q.get("majority"),
                    "mask_seed": q.get("mask_seed")})
    return out
