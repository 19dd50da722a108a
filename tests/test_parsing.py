r"""Tests for vdlib.method.parsing: hand-written cases plus hypothesis fuzzing.

The extractors read untrusted model output: they must never raise, must return None on
failure, and must handle nested / escaped braces, several blocks, truncation and unicode.
"""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vdlib.method.parsing import (
    COT_SUFFIX,
    Proposal,
    extract_boxed,
    extract_proposal,
    extract_question,
    strip_cot_suffix,
)

NON_STR_INPUTS = [None, b"<question>q</question> \\boxed{1}", 42, 3.5, ["\\boxed{1}"], {"a": 1}]

# ---------------------------------------------------------------- extract_boxed


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"\boxed{42}", "42"),
        (r"The answer is \boxed{\frac{a}{b}}.", r"\frac{a}{b}"),
        (r"\boxed{12\text{cm}}", r"12\text{cm}"),
        (r"\boxed{\sqrt{\frac{1}{2}}}", r"\sqrt{\frac{1}{2}}"),
        (r"\boxed{1} wait, no: \boxed{2} final \boxed{3}", "3"),
        (r"\boxed{\{1,2\}}", r"\{1,2\}"),
        (r"\boxed{\left\{ x \right\}}", r"\left\{ x \right\}"),
        (r"\boxed{x\} y}", r"x\} y"),  # an escaped closing brace does not close the box
        (r"\boxed{\{1,2}", r"\{1,2"),  # an escaped opening brace does not need closing
        (r"\boxed{a\\{b}}", r"a\\{b}"),  # "\\" is a line break, so the next brace counts
        (r"\boxed{  7  }", "7"),
        (r"\boxed {x}", "x"),
        (r"\boxed   {x}", "x"),
        ("\\boxed\n{x}", "x"),
        (r"\boxed{π/2}", "π/2"),
        (r"答案是 \boxed{五}", "五"),
        (r"\boxed{🎉 2}", "🎉 2"),
        ("line1\r\nline2\r\n\\boxed{\r\n5\r\n}\r\n", "5"),
        (r"\boxed{1} and \boxed 5", "1"),  # brace-less form is not a box
        (r"\boxed{1} \boxedx{2}", "1"),  # \boxedx is not followed by a brace
        (r"\boxed{\boxed{1}}", "1"),  # the last \boxed{ is the inner one
        (r"\boxed{a}}}}", "a"),  # extra closing braces after the box are ignored
    ],
)
def test_extract_boxed_cases(text, expected):
    assert extract_boxed(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "no box here",
        r"\boxed{}",
        r"\boxed{   }",
        r"\boxed{\frac{1}{2}",  # truncated
        r"\boxed{1} then \boxed{\frac{1}{",  # last box truncated: no fallback to the first
        r"\boxed{\}",  # the only closing brace is escaped
        r"\boxed",
        r"\boxed 5",
        r"\fbox{5}",
        "\\boxed{1\\",  # trailing lone backslash
    ],
)
def test_extract_boxed_none(text):
    assert extract_boxed(text) is None


@pytest.mark.parametrize("value", NON_STR_INPUTS)
def test_extractors_return_none_on_non_str(value):
    assert extract_boxed(value) is None
    assert extract_question(value) is None
    assert extract_proposal(value) is None


# ---------------------------------------------------------------- extract_question


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<question>What is 2+2?</question>", "What is 2+2?"),
        ("<question>\n  multi\nline  \n</question>", "multi\nline"),
        ("<question>first</question> text <question>second</question>", "second"),
        ("<question>first</question><question>second", "first"),  # last COMPLETE block
        ("<question>a<question>b</question>", "a<question>b"),  # R-Zero's findall semantics
        ("<question>a</question></question>", "a"),
        ("<question>Find \\boxed{x}.</question>", "Find \\boxed{x}."),
        ("<question>求 x 的值 🤔</question>", "求 x 的值 🤔"),
        ("<question>\r\nCRLF question\r\n</question>\r\n", "CRLF question"),
    ],
)
def test_extract_question_cases(text, expected):
    assert extract_question(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "no tags",
        "<question>unclosed",
        "closed only</question>",
        "</question>reversed<question>",
        "<question></question>",
        "<question> \n\t </question>",
        "<question>good</question> <question>  </question>",  # last block empty
        "<QUESTION>upper case</QUESTION>",
    ],
)
def test_extract_question_none(text):
    assert extract_question(text) is None


# ---------------------------------------------------------------- extract_proposal


def test_extract_proposal_paper_format():
    text = "<question>\nLet $x^2 = 4$, $x>0$. Find $x$.\n</question>\n\n\\boxed{2}"
    assert extract_proposal(text) == Proposal(
        question="Let $x^2 = 4$, $x>0$. Find $x$.", answer="2"
    )


def test_extract_proposal_keeps_whole_answer_not_last_char():
    # R-Zero kept only the last character of the boxed answer; we keep all of it.
    text = r"<question>q</question> \boxed{\frac{3}{4}}"
    assert extract_proposal(text).answer == r"\frac{3}{4}"


def test_extract_proposal_box_inside_question_is_not_the_answer():
    assert extract_proposal(r"<question>Simplify \boxed{5}.</question>") is None
    text = r"<question>Simplify \boxed{5}.</question> \boxed{6}"
    assert extract_proposal(text) == Proposal(question=r"Simplify \boxed{5}.", answer="6")


def test_extract_proposal_uses_last_block_and_last_box_after_it():
    text = (
        r"<question>draft</question> \boxed{1} "
        r"<question>final</question> \boxed{2} \boxed{3}"
    )
    assert extract_proposal(text) == Proposal(question="final", answer="3")
    # a box only after an earlier block does not answer the last one
    assert extract_proposal(r"<question>a</question> \boxed{1} <question>b</question>") is None


@pytest.mark.parametrize(
    "text",
    [
        r"\boxed{1}",
        "<question>q</question>",
        r"<question>q</question> \boxed{}",
        r"<question>q</question> \boxed{\frac{1}{",
        r"<question> </question> \boxed{1}",
        r"<question>q \boxed{1}",
    ],
)
def test_extract_proposal_none(text):
    assert extract_proposal(text) is None


def test_proposal_is_frozen():
    p = Proposal(question="q", answer="a")
    with pytest.raises(AttributeError):
        p.answer = "b"  # type: ignore[misc]


# ---------------------------------------------------------------- strip_cot_suffix


def test_strip_cot_suffix():
    assert COT_SUFFIX == "\nPlease reason step by step, and put your final answer within \\boxed{}."
    assert strip_cot_suffix("What is 1+1?" + COT_SUFFIX) == "What is 1+1?"
    assert strip_cot_suffix("What is 1+1?" + COT_SUFFIX + "\n") == "What is 1+1?"
    assert strip_cot_suffix("What is 1+1?\r" + COT_SUFFIX) == "What is 1+1?"
    assert strip_cot_suffix("What is 1+1?") == "What is 1+1?"
    assert strip_cot_suffix("  keep my spaces  ") == "  keep my spaces  "
    middle = "A" + COT_SUFFIX + " B"
    assert strip_cot_suffix(middle) == middle
    assert strip_cot_suffix(None) is None


# ---------------------------------------------------------------- hypothesis


FRAGMENTS = [
    "\\boxed{",
    "\\boxed {",
    "\\boxed",
    "{",
    "}",
    "\\{",
    "\\}",
    "\\",
    "<question>",
    "</question>",
    "<",
    ">",
    "/",
    "question",
    " ",
    "\n",
    "x",
    "1",
    "π",
    "🎉",
]
fragment_text = st.lists(st.sampled_from(FRAGMENTS), max_size=60).map("".join)
any_text = st.one_of(st.text(), fragment_text)


@given(any_text)
@settings(max_examples=400)
def test_extractors_never_raise(text):
    box = extract_boxed(text)
    question = extract_question(text)
    proposal = extract_proposal(text)
    assert box is None or (isinstance(box, str) and box == box.strip() and box)
    assert question is None or (isinstance(question, str) and question == question.strip())
    if proposal is not None:
        assert proposal.question == question  # same (last) question block
        assert proposal.answer and proposal.answer == proposal.answer.strip()


plain = st.text(alphabet=st.characters(blacklist_characters="{}\\"), max_size=8)


def _concat_or_wrap(inner):
    """Balanced strings: concatenations of balanced pieces, each optionally wrapped in {}."""
    piece = st.one_of(inner, inner.map(lambda s: "{" + s + "}"))
    return st.lists(piece, max_size=4).map("".join)


balanced = st.recursive(plain, _concat_or_wrap, max_leaves=20)


@given(balanced)
def test_extract_boxed_round_trips_balanced_content(s):
    assert s.count("{") == s.count("}")  # the strategy really is balanced
    expected = s.strip() or None
    assert extract_boxed("\\boxed{" + s + "}") == expected
    assert extract_boxed("prefix \\boxed{0} " + "\\boxed{" + s + "} suffix") == expected


@given(st.text().filter(lambda q: "</question>" not in q))
def test_extract_question_round_trips(q):
    assert extract_question("noise <question>" + q + "</question> tail") == (q.strip() or None)


@given(
    st.text().filter(lambda q: "</question>" not in q and q.strip()),
    balanced.filter(lambda s: s.strip()),
)
def test_extract_proposal_round_trips(q, a):
    text = "<question>" + q + "</question>\n\\boxed{" + a + "}"
    assert extract_proposal(text) == Proposal(question=q.strip(), answer=a.strip())


# ---------------------------------------------------------------- linear time on large inputs

MB = 1 << 20


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{" * MB, None),
        ("\\boxed{" + "{" * MB, None),
        ("\\boxed{" * (MB // 7), None),
        ("\\boxed{" + "{" * MB + "}" * (MB + 1), "{" * MB + "}" * MB),
        ("\\{" * (MB // 2), None),
    ],
    ids=["braces", "open-box-braces", "many-open-boxes", "deep-balanced", "escaped"],
)
def test_extract_boxed_large_inputs(text, expected):
    assert extract_boxed(text) == expected


@pytest.mark.parametrize(
    "text",
    ["<question>" * (MB // 10), "<question>" + "<" * MB, "</question>" * (MB // 11)],
    ids=["many-open", "one-open", "many-close"],
)
def test_extract_question_large_inputs(text):
    assert extract_question(text) is None
    assert extract_proposal(text) is None


def test_extract_question_many_blocks_takes_last():
    text = "".join(f"<question>{i}</question>" for i in range(50_000))
    assert extract_question(text) == "49999"


@given(any_text)
@settings(max_examples=400)
def test_extract_question_matches_rzero_findall(text):
    # R-Zero: re.findall(r"<question>(.*?)</question>", text, re.DOTALL)[-1].strip()
    blocks = re.findall(r"<question>(.*?)</question>", text, re.DOTALL)
    expected = (blocks[-1].strip() or None) if blocks else None
    assert extract_question(text) == expected
