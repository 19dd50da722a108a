r"""Parse model outputs: the last ``<question>`` block and the last balanced ``\boxed{}``.

Model output is untrusted text. Every function here is pure, never evaluates anything, never
raises (non-``str`` input included) and returns ``None`` on failure, so a caller tells "no
parse" apart from a value with a plain ``is None`` check.

Semantics (R-Zero, github.com/Chengsong-Huang/R-Zero, as its code runs, unless noted):

- :func:`extract_question`: the last ``<question>(.*?)</question>`` match (DOTALL, non-greedy,
  case-sensitive tags), stripped. Implemented with ``str.find`` so it gives exactly the blocks
  ``re.findall`` would, but in linear time (the regex is quadratic on many unclosed tags).
- :func:`extract_boxed`: the content of the LAST ``\boxed{`` (``\boxed {`` with whitespace
  before the brace is accepted too; ``\fbox``, ``\boxed 5`` and other forms are not), read up
  to its matching brace. A backslash escapes the next character, so ``\{`` and ``\}`` do not
  count towards balancing while ``\\{`` (a LaTeX line break, then a brace) does. If the last
  box is not closed (a truncated generation) the result is ``None``: a truncated final box means
  the model gave no final answer, and we do not fall back to an earlier box.
- :func:`extract_proposal`: the proposer's format from the paper's appendix, a question block
  followed by ``\boxed{final_answer}``. The answer is the last box AFTER the closing tag of the
  last question block; a box inside the question is part of the question, never the answer.

R-Zero bug we do NOT reproduce: when reading the proposer's answer, R-Zero's code kept only the
last character of the boxed content (``\boxed{42}`` gave ``"2"``). Here the whole content is
returned: ``extract_proposal("<question>q</question> \boxed{42}").answer == "42"``.

All scans are linear in the input length (``str.find``/``str.rfind`` and a single forward pass
over braces); there is no backtracking regex, so megabyte-long outputs are safe.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

__all__ = [
    "COT_SUFFIX",
    "Proposal",
    "extract_boxed",
    "extract_proposal",
    "extract_question",
    "strip_cot_suffix",
]

logger = logging.getLogger(__name__)

QUESTION_OPEN = "<question>"
QUESTION_CLOSE = "</question>"
BOXED = "\\boxed"
COT_SUFFIX = "\nPlease reason step by step, and put your final answer within \\boxed{}."

# One token of the brace scan: an escape pair (backslash + any char) or a bare brace.
_BRACE_TOKEN = re.compile(r"\\.|[{}]", re.DOTALL)


@dataclass(frozen=True)
class Proposal:
    """A parsed proposer output: the question text and the proposer's own (boxed) answer."""

    question: str
    answer: str


def _last_question_span(text: str) -> tuple[int, int, int] | None:
    """(content_start, content_end, close_end) of the last complete question block, or None.

    Mirrors ``re.findall(r"<question>(.*?)</question>", text, re.DOTALL)[-1]``: blocks are
    matched left to right, each from the next opening tag to the first closing tag after it.
    """
    span = None
    pos = 0
    while True:
        start = text.find(QUESTION_OPEN, pos)
        if start < 0:
            break
        content_start = start + len(QUESTION_OPEN)
        end = text.find(QUESTION_CLOSE, content_start)
        if end < 0:
            break
        pos = end + len(QUESTION_CLOSE)
        span = (content_start, end, pos)
    return span


def extract_question(text: object) -> str | None:
    """Return the stripped content of the last complete ``<question>...</question>`` block.

    None when there is no complete block, when the last block is empty or whitespace only,
    or when ``text`` is not a ``str``.

    >>> extract_question("<question>old</question> <question>\\n What is 2+2? \\n</question>")
    'What is 2+2?'
    >>> extract_question("<question>truncated generation") is None
    True
    >>> extract_question("<question>  </question>") is None
    True
    >>> extract_question(None) is None
    True
    """
    if not isinstance(text, str):
        logger.debug("extract_question: non-str input of type %s", type(text).__name__)
        return None
    span = _last_question_span(text)
    if span is None:
        return None
    question = text[span[0] : span[1]].strip()
    return question or None


def _box_content_start(text: str) -> int | None:
    r"""Index just after the ``{`` of the last ``\boxed{`` / ``\boxed {``, or None."""
    pos = len(text)
    while pos > 0:
        start = text.rfind(BOXED, 0, pos)
        if start < 0:
            return None
        i = start + len(BOXED)
        while i < len(text) and text[i].isspace():
            i += 1
        if i < len(text) and text[i] == "{":
            return i + 1
        pos = start  # not a box with a brace (e.g. "\boxed 5", "\boxedx"): look further back
    return None


def extract_boxed(text: object) -> str | None:
    r"""Return the stripped content of the last ``\boxed{...}``, read with balanced braces.

    None when there is no box, when the last box is never closed (truncated output), when its
    content is empty or whitespace only, or when ``text`` is not a ``str``.

    >>> extract_boxed(r"so \boxed{1} or rather \boxed{\frac{\sqrt{3}}{2}}.")
    '\\frac{\\sqrt{3}}{2}'
    >>> extract_boxed(r"\boxed{\{1,2\}}")
    '\\{1,2\\}'
    >>> extract_boxed(r"\boxed { 12 \text{cm} }")
    '12 \\text{cm}'
    >>> extract_boxed(r"\boxed{1} then \boxed{\frac{1}{") is None
    True
    >>> extract_boxed(r"\boxed{}") is None
    True
    """
    if not isinstance(text, str):
        logger.debug("extract_boxed: non-str input of type %s", type(text).__name__)
        return None
    content_start = _box_content_start(text)
    if content_start is None:
        return None
    depth = 1
    for match in _BRACE_TOKEN.finditer(text, content_start):
        token = match.group()
        if token == "{":
            depth += 1
        elif token == "}":
            depth -= 1
            if depth == 0:
                content = text[content_start : match.start()].strip()
                return content or None
    logger.debug("extract_boxed: last box is unbalanced (truncated output?)")
    return None


def extract_proposal(text: object) -> Proposal | None:
    r"""Parse a proposer output: the last question block, then a ``\boxed{}`` answer after it.

    The answer is the last box that starts after the block's ``</question>``; None when either
    part is missing, empty, or unbalanced, or when ``text`` is not a ``str``.

    >>> extract_proposal("<question>\nFind x if x+1=3.\n</question>\n\\boxed{2}")
    Proposal(question='Find x if x+1=3.', answer='2')
    >>> extract_proposal("<question>Is \\boxed{5} odd?</question>") is None
    True
    """
    if not isinstance(text, str):
        logger.debug("extract_proposal: non-str input of type %s", type(text).__name__)
        return None
    span = _last_question_span(text)
    if span is None:
        return None
    question = text[span[0] : span[1]].strip()
    answer = extract_boxed(text[span[2] :])
    if not question or answer is None:
        return None
    return Proposal(question=question, answer=answer)


def strip_cot_suffix(problem: str) -> str:
    r"""Remove the trailing solver instruction that some benchmark files append to a problem.

    The suffix is :data:`COT_SUFFIX` (``"\nPlease reason step by step, and put your final
    answer within \boxed{}."``); trailing whitespace after it is tolerated and the problem's
    own trailing whitespace is removed with it. Any other input (non-``str`` included) is
    returned unchanged.

    >>> strip_cot_suffix("What is 1+1?" + COT_SUFFIX)
    'What is 1+1?'
    >>> strip_cot_suffix("What is 1+1?")
    'What is 1+1?'
    """
    if not isinstance(problem, str):
        return problem
    trimmed = problem.rstrip()
    if trimmed.endswith(COT_SUFFIX):
        return trimmed[: -len(COT_SUFFIX)].rstrip()
    return problem
