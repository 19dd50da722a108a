r"""The paper's judges: which model judges what, the well-posedness prompt and its verdict.

- proposer answer correctness (App. "Proposer answer correctness"): :data:`CORRECTNESS_MODEL`;
- well-posed / ill-posed labelling (App. "Curriculum diversity controlling for correctness"):
  :data:`WELL_POSED_MODEL` with :data:`WELL_POSED_PROMPT`, read back by
  :func:`parse_well_posed`;
- the curriculum-transfer filter (App. "Curriculum-transfer training details"):
  :data:`TRANSFER_MODEL`, greedy decoding, a single attempt.

The requests themselves go through :class:`vdlib.evaluation.verifier.Verifier`.

>>> parse_well_posed('Missing the rate. {"well_posed": false}')
False
>>> parse_well_posed(r"Verdict: \boxed{well-posed}")
True
>>> parse_well_posed("I am not sure.") is None
True
"""

from __future__ import annotations

import re

from vdlib.method.parsing import extract_boxed

__all__ = ["CORRECTNESS_MODEL", "WELL_POSED_MODEL", "TRANSFER_MODEL", "WELL_POSED_PROMPT",
           "well_posed_messages", "parse_well_posed"]

CORRECTNESS_MODEL = "gpt-4.1-mini"  # paper App. "Proposer answer correctness"
WELL_POSED_MODEL = "gpt-4.1-mini"  # paper App. "Curriculum diversity controlling for correctness"
TRANSFER_MODEL = "gpt-5-mini"  # paper App. "Curriculum-transfer training details"

WELL_POSED_PROMPT = (
    "Decide whether the following math problem is well-posed. A problem is well-posed when it "
    "states every quantity and condition needed and has exactly one determinate answer "
    "(whether or not anyone has answered it correctly). It is ill-posed when it is ambiguous, "
    "self-contradictory, missing information, or has no answer or several answers.\n\n"
    "Problem:\n{question}\n\n"
    "Reason briefly, then end with your verdict as a JSON object on its own line: "
    '{{"well_posed": true}} or {{"well_posed": false}}.'
)


def well_posed_messages(question: str) -> list[dict[str, str]]:
    """The one-message conversation that asks for the well-posedness verdict of ``question``.

    >>> well_posed_messages("1+1?")[0]["content"].splitlines()[2]
    'Problem:'
    """
    return [{"role": "user", "content": WELL_POSED_PROMPT.format(question=question)}]


_JSON_VERDICT = re.compile(r'"?well[_ -]?posed"?\s*:\s*"?(true|false|yes|no)"?', re.IGNORECASE)
_WORD_VERDICT = re.compile(r"\b(ill|well)[- ]posed\b", re.IGNORECASE)
_BOX_WORDS = {"well-posed": True, "well posed": True, "wellposed": True, "yes": True,
              "true": True, "ill-posed": False, "ill posed": False, "illposed": False,
              "no": False, "false": False}


def parse_well_posed(text: str | None) -> bool | None:
    r"""The verdict of a well-posedness reply: the last ``"well_posed": true|false`` (JSON),
    else a ``\boxed{well-posed|ill-posed|yes|no}``, else a last line naming exactly one of
    "well-posed" / "ill-posed"; None when none of these is present."""
    if not isinstance(text, str):
        return None
    hits = _JSON_VERDICT.findall(text)
    if hits:
        return hits[-1].lower() in ("true", "yes")
    boxed = extract_boxed(text)
    if boxed is not None:
        word = re.sub(r"\\text\{([^}]*)\}", r"\1", boxed).strip().lower().rstrip(".")
        if word in _BOX_WORDS:
            return _BOX_WORDS[word]
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    if lines:
        kinds = {m.lower() for m in _WORD_VERDICT.findall(lines[-1])}
        if len(kinds) == 1:
            return kinds.pop() == "well"
    return None
