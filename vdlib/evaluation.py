r"""Benchmark evaluation: the paper's protocol, pass@1 over k runs, mean +- standard error.

The protocol (paper, "Standard benchmarks" and the evaluation prompt in its appendix):

- zero-shot; the question followed by the evaluation instruction, in the model's chat template,
  with no system message (:func:`vdlib.prompts.evaluation_prompt`);
- temperature 0.7, top-p 1.0, a maximum context of 4096 tokens: each prompt may generate
  ``max_context - len(prompt tokens)`` new tokens (optionally capped by ``max_new_tokens``);
- the last ``\boxed{}`` of the completion is graded against the gold answer with
  :func:`vdlib.grading.is_equivalent` (math-verify, gold first);
- ``k = runs`` independent runs, run ``r`` sampled with seed ``seed + r``; pass@1 of a run is the
  mean correctness over the benchmark's items; the reported number is the mean over runs with
  the standard error across runs, ``SE = std(ddof=1) / sqrt(k)`` (None for ``k = 1``), following
  Miller (2024), "Adding error bars to evals: a statistical approach to language model
  evaluations", as the paper does.

Benchmarks (:data:`BENCHMARKS`, :func:`load_benchmark`):

- maths, from the Hub (pinned ids and splits, R-Zero's list) or from
  ``<data_dir>/<name>/test.jsonl``: ``gsm8k``, ``math500``, ``amc23``, ``olympiadbench``,
  ``aime24``, ``aime25``, ``minerva``;
- offline stand-ins: ``gsm_symbolic`` (reasoning-gym, ``limit`` items from ``seed``) and
  ``champ`` (the ``champ-dataset`` package, 270 competition problems);
- out-of-domain multiple choice, Hub only: ``bbh``, ``medqa``, ``supergpqa``, ``winogrande``;
  the answer is read by :func:`parse_choice`.

>>> [round(x, 4) for x in mean_and_se([0.5, 0.7, 0.6])]
[0.6, 0.0577]
>>> mean_and_se([0.4])
(0.4, None)
>>> parse_choice("so the answer is (B).", "ABCD")
'B'
>>> split_top_level("(1,8,19), (2,7,13)")
['(1,8,19)', '(2,7,13)']
"""

from __future__ import annotations

import json
import logging
import math
import re
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vdlib.artifacts import atomic_write_json, read_jsonl, write_jsonl
from vdlib.grading import is_equivalent
from vdlib.models import hub_offline
from vdlib.parsing import extract_boxed, strip_cot_suffix
from vdlib.prompts import evaluation_prompt
from vdlib.registry import Registry
from vdlib.seeding import derive_seed

__all__ = [
    "BENCHMARKS",
    "gsm8k_gold",
    "BenchmarkResult",
    "BenchmarkSpec",
    "BenchmarkUnavailableError",
    "EvalSummary",
    "evaluate",
    "format_table",
    "grade",
    "load_benchmark",
    "mean_and_se",
    "parse_choice",
    "split_top_level",
]

logger = logging.getLogger(__name__)

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


class BenchmarkUnavailableError(RuntimeError):
    """A benchmark cannot be loaded here (offline Hub, missing file or package)."""


# --------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class BenchmarkSpec:
    """One benchmark: where it comes from and how a raw record becomes an item.

    ``convert(row, index)`` turns one record (a Hub row, or a line of the local
    ``test.jsonl``, which uses the same fields) into ``{"id", "problem", "answer", ...}``, or
    None to skip it. ``load`` (stand-ins only) replaces the Hub / file reading.
    """

    name: str
    display: str
    kind: str  # "math" or "choice"
    hub_id: str | None = None
    hub_config: str | None = None
    split: str | None = None
    convert: Callable[[dict[str, Any], int], dict[str, Any] | None] | None = None
    load: Callable[[int | None, int], list[dict[str, Any]]] | None = None
    hub_configs: tuple[str, ...] = ()  # several configs concatenated (BBH's tasks)
    note: str = ""


BENCHMARKS: Registry[BenchmarkSpec] = Registry("benchmark")


def _first(row: Mapping[str, Any], keys: Sequence[str], what: str) -> Any:
    for k in keys:
        if k in row and row[k] is not None:
            return row[k]
    raise KeyError(f"record has no {what} field (tried {', '.join(keys)}); keys: {sorted(row)}")


def _answer_str(value: Any) -> str:
    """Gold answers as strings: lists joined with ", ", integral floats without ``.0``."""
    if isinstance(value, list | tuple):
        return ", ".join(_answer_str(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


_UNESCAPED_DOLLAR = re.compile(r"(?<!\\)\$")


def strip_dollars(answer: str) -> str:
    """``$x$`` -> ``x`` and ``$69$,$84$`` -> ``69,84`` (OlympiadBench's LaTeX wrapping).

    >>> strip_dollars("$\\\\frac{1}{2 n+2}$"), strip_dollars("$69$,$84$"), strip_dollars("3")
    ('\\\\frac{1}{2 n+2}', '69,84', '3')
    """
    s = answer.strip()
    if s.startswith("$") and s.endswith("$") and len(s) >= 2:
        s = _UNESCAPED_DOLLAR.sub("", s).strip()
    return s


def gsm8k_gold(solution: Any) -> str | None:
    """GSM8K's gold answer: what follows the last ``####`` of a solution, without thousands
    separators; None when there is no ``####`` line (the one parser of it in vdlib: evaluation
    and the GSM8K training problems of single-policy GRPO).

    >>> gsm8k_gold("3 + 4 = 7\\n#### 1,007"), gsm8k_gold("no gold")
    ('1007', None)
    """
    raw = str(solution)
    if "####" not in raw:
        return None
    return raw.rsplit("####", 1)[1].strip().replace(",", "")


def _math_converter(name: str, *, gsm8k: bool = False, dollars: bool = False):
    def convert(row: dict[str, Any], index: int) -> dict[str, Any]:
        problem = strip_cot_suffix(str(_first(row, ("problem", "question", "Problem"),
                                              "problem"))).strip()
        raw = _first(row, ("answer", "final_answer", "Answer", "solution"), "answer")
        if gsm8k:
            gold = gsm8k_gold(raw)
            if gold is None:
                raise ValueError(f"{name} record {index}: answer has no '#### ' gold line")
            answer = gold
        else:
            answer = _answer_str(raw)
        if dollars:
            answer = strip_dollars(answer)
        item = {"id": str(row.get("id", row.get("unique_id", f"{name}-{index}"))),
                "problem": problem, "answer": answer, "index": index}
        for key in ("subject", "level", "type", "url", "year"):
            if key in row and isinstance(row[key], str | int | float):
                item[key] = row[key]
        return item

    return convert


def _register_math(name: str, display: str, hub_id: str, split: str, config: str | None = None,
                   **conv: bool) -> None:
    BENCHMARKS.add(name, BenchmarkSpec(name, display, "math", hub_id, config, split,
                                       convert=_math_converter(name, **conv)))


# Pinned Hub ids and splits: R-Zero's evaluation list (MATH-500 is the prm800k 500-problem test
# subset, here through its HuggingFaceH4 mirror).
_register_math("gsm8k", "GSM8K", "openai/gsm8k", "test", "main", gsm8k=True)
_register_math("math500", "MATH500", "HuggingFaceH4/MATH-500", "test")
_register_math("amc23", "AMC", "zwhe99/amc23", "test")
_register_math("olympiadbench", "Olympiad", "zwhe99/simplerl-OlympiadBench", "test",
               dollars=True)
_register_math("aime24", "AIME'24", "HuggingFaceH4/aime_2024", "train")
_register_math("aime25", "AIME'25", "yentinglin/aime_2025", "train")
_register_math("minerva", "Minerva", "zwhe99/simplerl-minerva-math", "test")


# Offline stand-ins ------------------------------------------------------------------------

GSM_SYMBOLIC_DEFAULT_SIZE = 100


def _load_gsm_symbolic(limit: int | None, seed: int) -> list[dict[str, Any]]:
    import reasoning_gym

    size = limit or GSM_SYMBOLIC_DEFAULT_SIZE
    data = reasoning_gym.create_dataset("gsm_symbolic", size=size, seed=seed)
    return [{"id": f"gsm_symbolic-{seed}-{i}", "problem": str(x["question"]).strip(),
             "answer": _answer_str(x["answer"]), "index": i} for i, x in enumerate(data)]


def _load_champ(limit: int | None, seed: int) -> list[dict[str, Any]]:
    try:
        import champ_dataset
    except ImportError:
        raise BenchmarkUnavailableError(
            "benchmark 'champ' needs the champ-dataset package: install champ-dataset "
            "(pip install champ-dataset==1.0.0)") from None
    problems = champ_dataset.load("v0").problems
    return [{"id": p.identifier, "problem": p.text.strip(), "answer": _answer_str(p.answer),
             "category": p.category, "index": i} for i, p in enumerate(problems.values())]


BENCHMARKS.add("gsm_symbolic", BenchmarkSpec(
    "gsm_symbolic", "GSM-Symbolic (rg)", "math", load=_load_gsm_symbolic,
    note=f"reasoning-gym gsm_symbolic, limit items (default {GSM_SYMBOLIC_DEFAULT_SIZE}) "
         "from seed"))
BENCHMARKS.add("champ", BenchmarkSpec("champ", "CHAMP", "math", load=_load_champ,
                                      note="champ-dataset v0 (270 problems)"))


# Out-of-domain multiple choice ---------------------------------------------------------------


def format_choices(question: str, options: Sequence[str]) -> tuple[str, str]:
    """``(problem text with lettered options, valid letters)``."""
    letters = LETTERS[: len(options)]
    lines = [f"({letter}) {str(opt).strip()}" for letter, opt in zip(letters, options,
                                                                      strict=True)]
    return question.strip() + "\n\n" + "\n".join(lines), letters


def _choice_item(name: str, index: int, question: str, options: Sequence[str],
                 answer: str, **meta: Any) -> dict[str, Any]:
    problem, letters = format_choices(question, options)
    return {"id": f"{name}-{index}", "problem": problem, "answer": answer,
            "choices": letters, "index": index, **meta}


def _convert_medqa(row: dict[str, Any], index: int) -> dict[str, Any]:
    opts = row["options"]
    if isinstance(opts, Mapping):
        keys = sorted(opts)
        return _choice_item("medqa", index, row["question"], [opts[k] for k in keys],
                            str(row["answer_idx"]).strip())
    return _choice_item("medqa", index, row["question"], opts, str(row["answer_idx"]).strip())


def _convert_supergpqa(row: dict[str, Any], index: int) -> dict[str, Any]:
    return _choice_item("supergpqa", index, row["question"], row["options"],
                        str(row["answer_letter"]).strip(),
                        discipline=row.get("discipline"), difficulty=row.get("difficulty"))


def _convert_winogrande(row: dict[str, Any], index: int) -> dict[str, Any] | None:
    answer = str(row.get("answer", "")).strip()
    if answer not in ("1", "2"):
        return None  # unlabelled (test split) rows
    return _choice_item("winogrande", index,
                        row["sentence"] + "\nWhich option fills the blank (_)?",
                        [row["option1"], row["option2"]], "AB"[int(answer) - 1])


_BBH_OPTION = re.compile(r"^\(([A-R])\)", re.MULTILINE)
_BBH_TARGET = re.compile(r"^\(([A-R])\)$")


def _convert_bbh(row: dict[str, Any], index: int) -> dict[str, Any]:
    """BBH rows: lettered-option tasks are multiple choice; the rest (True/False, valid/invalid,
    numbers, words) are graded as free-form strings against the target."""
    target = str(row["target"]).strip()
    m = _BBH_TARGET.match(target)
    item = {"id": f"bbh-{row.get('task', '')}-{index}", "problem": str(row["input"]).strip(),
            "index": index, "task": row.get("task")}
    if m:
        letters = "".join(dict.fromkeys(_BBH_OPTION.findall(str(row["input"])))) or LETTERS[:4]
        item.update(answer=m.group(1), choices=letters)
    else:
        item.update(answer=target)
    return item


BBH_TASKS = (
    "boolean_expressions", "causal_judgement", "date_understanding", "disambiguation_qa",
    "dyck_languages", "formal_fallacies", "geometric_shapes", "hyperbaton",
    "logical_deduction_five_objects", "logical_deduction_seven_objects",
    "logical_deduction_three_objects", "movie_recommendation", "multistep_arithmetic_two",
    "navigate", "object_counting", "penguins_in_a_table", "reasoning_about_colored_objects",
    "ruin_names", "salient_translation_error_detection", "snarks", "sports_understanding",
    "temporal_sequences", "tracking_shuffled_objects_five_objects",
    "tracking_shuffled_objects_seven_objects", "tracking_shuffled_objects_three_objects",
    "web_of_lies", "word_sorting",
)

BENCHMARKS.add("bbh", BenchmarkSpec("bbh", "BBH", "choice", "lukaemon/bbh", None, "test",
                                    convert=_convert_bbh, hub_configs=BBH_TASKS,
                                    note="27 tasks concatenated; non-letter targets graded as "
                                         "strings"))
BENCHMARKS.add("medqa", BenchmarkSpec("medqa", "MedQA-USMLE", "choice",
                                      "GBaker/MedQA-USMLE-4-options", None, "test",
                                      convert=_convert_medqa))
BENCHMARKS.add("supergpqa", BenchmarkSpec("supergpqa", "SuperGPQA", "choice", "m-a-p/SuperGPQA",
                                          None, "train", convert=_convert_supergpqa))
BENCHMARKS.add("winogrande", BenchmarkSpec("winogrande", "WinoGrande", "choice",
                                           "allenai/winogrande", "winogrande_xl", "validation",
                                           convert=_convert_winogrande))


# --------------------------------------------------------------------------- loading


def _hub_rows(spec: BenchmarkSpec) -> Iterable[dict[str, Any]]:
    if hub_offline():
        raise BenchmarkUnavailableError(
            f"benchmark {spec.name!r} comes from the Hugging Face Hub ({spec.hub_id}, split "
            f"{spec.split}) but HF_HUB_OFFLINE is set: pass --data-dir DIR (data_dir=DIR) with "
            f"DIR/{spec.name}/test.jsonl, or unset HF_HUB_OFFLINE")
    import datasets

    configs = spec.hub_configs or (spec.hub_config,)
    for config in configs:
        ds = datasets.load_dataset(spec.hub_id, config, split=spec.split)
        for row in ds:
            row = dict(row)
            if spec.hub_configs:
                row.setdefault("task", config)
            yield row


def _file_rows(spec: BenchmarkSpec, data_dir: str | Path) -> Iterable[dict[str, Any]]:
    path = Path(data_dir) / spec.name / "test.jsonl"
    if not path.is_file():
        raise BenchmarkUnavailableError(f"benchmark {spec.name!r}: no file {path} "
                                        f"(expected <data_dir>/{spec.name}/test.jsonl)")
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def load_benchmark(name: str, data_dir: str | Path | None = None, limit: int | None = None,
                   seed: int = 0) -> list[dict[str, Any]]:
    """Items ``{"id", "problem", "answer", "index", ...metadata}`` of benchmark ``name``.

    With ``data_dir``, reads ``<data_dir>/<name>/test.jsonl`` (the layout of
    a copy of the real test files; rows carry the same fields as the Hub rows); else the pinned Hub
    dataset (an error under ``HF_HUB_OFFLINE=1``). Stand-ins ignore ``data_dir``;
    ``gsm_symbolic`` draws ``limit`` items from ``seed``. ``limit`` keeps the first N items.
    Multiple-choice items also carry ``choices`` (the valid letters).
    """
    if limit is not None and limit < 1:
        raise ValueError(f"limit = {limit}; allowed: an integer >= 1 or None")
    spec = BENCHMARKS.get(name)
    if spec.load is not None:
        items = spec.load(limit, seed)
    else:
        rows = _file_rows(spec, data_dir) if data_dir is not None else _hub_rows(spec)
        items = []
        for i, row in enumerate(rows):
            item = spec.convert(row, i)
            if item is not None:
                items.append(item)
            if limit is not None and len(items) >= limit:
                break
    for item in items:
        item["benchmark"] = name
    return items[:limit] if limit is not None else items


# --------------------------------------------------------------------------- grading

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


# --------------------------------------------------------------------------- statistics


def mean_and_se(values: Sequence[float]) -> tuple[float, float | None]:
    """``(mean, standard error)`` across runs: ``SE = stdev(ddof=1) / sqrt(k)``; k = 1 -> None.

    Miller (2024), "Adding error bars to evals". An empty sequence is an error.
    """
    if not values:
        raise ValueError("mean_and_se of no values")
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, None
    return mean, statistics.stdev(values) / math.sqrt(len(values))


@dataclass
class BenchmarkResult:
    """One benchmark's pass@1 per run (fractions in [0, 1]) and its n items."""

    benchmark: str
    n: int
    accuracies: list[float]
    seeds: list[int]

    @property
    def mean(self) -> float:
        return mean_and_se(self.accuracies)[0]

    @property
    def se(self) -> float | None:
        return mean_and_se(self.accuracies)[1]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "mean": self.mean, "se": self.se}


@dataclass
class EvalSummary:
    """Per-benchmark results of one model (or arm); ``average()`` is the table's Avg. column."""

    results: dict[str, BenchmarkResult] = field(default_factory=dict)
    protocol: dict[str, Any] = field(default_factory=dict)

    def average(self, benchmarks: Sequence[str] | None = None) -> tuple[float, float | None]:
        """Mean over benchmarks of their run-mean, and the SE across runs of the per-run
        averages (None when runs differ in number or there is one run)."""
        names = list(benchmarks) if benchmarks is not None else list(self.results)
        res = [self.results[b] for b in names]
        if not res:
            raise ValueError("average of no benchmarks")
        mean = statistics.fmean(r.mean for r in res)
        k = {len(r.accuracies) for r in res}
        if len(k) != 1 or k == {1}:
            return mean, None
        per_run = [statistics.fmean(r.accuracies[i] for r in res) for i in range(k.pop())]
        return mean, mean_and_se(per_run)[1]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EvalSummary:
        """Inverse of :meth:`to_dict` (``summary.json`` of an evaluation folder)."""
        return cls(results={b: BenchmarkResult(b, int(r["n"]), [float(a) for a in r["accuracies"]],
                                               [int(x) for x in r["seeds"]])
                            for b, r in data.get("benchmarks", {}).items()},
                   protocol=dict(data.get("protocol", {})))

    def to_dict(self) -> dict[str, Any]:
        avg, avg_se = self.average() if self.results else (None, None)
        return {"protocol": self.protocol,
                "benchmarks": {b: r.to_dict() for b, r in self.results.items()},
                "average": {"mean": avg, "se": avg_se}}


# --------------------------------------------------------------------------- evaluation


#: Tokens per generation round of the transformers engine (see HFEngine.round_tokens).
ROUND_TOKENS = 512


def _as_engine(model_or_engine: Any, tokenizer: Any, batch_size: int) -> Any:
    try:
        import torch
    except ImportError:  # pragma: no cover
        torch = None
    if torch is not None and isinstance(model_or_engine, torch.nn.Module):
        from vdlib.generation import HFEngine

        # rounds of 512 tokens: rows that ended stop decoding instead of riding along until the
        # slowest row of the batch reaches the 4096-token context (same sampling distribution)
        return HFEngine(model_or_engine, tokenizer, batch_size=batch_size, show_progress=False,
                        round_tokens=ROUND_TOKENS)
    if not callable(getattr(model_or_engine, "generate", None)):
        raise TypeError("evaluate() needs a transformers model or an engine with .generate()")
    return model_or_engine


def _prompt_lengths(tokenizer: Any, prompts: list[str]) -> list[int]:
    if tokenizer is None:
        return [0] * len(prompts)
    ids = tokenizer(prompts, add_special_tokens=False)["input_ids"]
    return [len(x) for x in ids]


def _run_benchmark(engine: Any, tokenizer: Any, name: str, items: list[dict[str, Any]],
                   run: int, run_seed: int, *, temperature: float, top_p: float,
                   max_context: int, max_new_tokens: int | None, batch_size: int,
                   template_kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
    prompts = [evaluation_prompt(tokenizer, it["problem"], **template_kwargs) for it in items]
    lengths = _prompt_lengths(tokenizer, prompts)
    completions: list[str | None] = [None] * len(items)
    n_tokens: list[int | None] = [None] * len(items)
    # Similar lengths share a generate call whose budget is max_context - its longest prompt.
    order = sorted(range(len(items)), key=lambda i: lengths[i])
    order_fit = [i for i in order if lengths[i] < max_context]
    for i in order:
        if lengths[i] >= max_context:
            logger.warning("%s item %s: prompt (%d tokens) fills max_context %d; scored wrong",
                           name, items[i]["id"], lengths[i], max_context)
            completions[i] = ""
    for c, start in enumerate(range(0, len(order_fit), batch_size)):
        chunk = order_fit[start : start + batch_size]
        budget = max_context - max(lengths[i] for i in chunk)
        if max_new_tokens is not None:
            budget = min(budget, max_new_tokens)
        logger.debug("%s run %d: batch %d (%d prompts, budget %d new tokens)", name, run, c,
                     len(chunk), budget)
        samples = engine.generate([prompts[i] for i in chunk], n=1, temperature=temperature,
                                  top_p=top_p, top_k=0, max_new_tokens=budget,
                                  seed=derive_seed(run_seed, "eval", name, c))
        for s in samples:
            i = chunk[s.prompt_index]
            completions[i] = s.text
            n_tokens[i] = len(s.token_ids)
    records = []
    for i, item in enumerate(items):
        g = grade(item, completions[i])
        records.append({"benchmark": name, "id": item["id"], "problem": item["problem"],
                        "gold": item["answer"], "completion": completions[i],
                        "extracted": g["extracted"], "correct": bool(g["correct"]),
                        "completion_tokens": n_tokens[i], "seed": run_seed, "run": run})
    return records


def evaluate(model_or_engine: Any, tokenizer: Any, benchmarks: Sequence[str], runs: int = 3, *,
             seed: int = 0, temperature: float = 0.7, top_p: float = 1.0,
             max_context: int = 4096, max_new_tokens: int | None = None,
             data_dir: str | Path | None = None, limit: int | None = None,
             out_dir: str | Path | None = None, batch_size: int = 16,
             template_kwargs: Mapping[str, Any] | None = None) -> EvalSummary:
    """Evaluate under the paper's protocol (module docstring); returns an :class:`EvalSummary`.

    ``model_or_engine``: a transformers model (wrapped in :class:`vdlib.generation.HFEngine`
    with ``batch_size``) or any engine with the ``generate`` interface (vLLM, a fake in tests).
    Run ``r`` (0-based) uses seed ``seed + r``. With ``out_dir``, each run's records go to
    ``out_dir/<benchmark>/run<r>.jsonl`` (atomic) and the summary to ``out_dir/summary.json``;
    a run whose file exists is read back instead of generated (resume). The protocol is saved
    in ``out_dir/protocol.json`` and a different protocol in the same folder is an error.
    ``template_kwargs`` go to the chat template (e.g. ``enable_thinking=False`` for Qwen3).
    """
    if runs < 1:
        raise ValueError(f"runs = {runs}; allowed: runs >= 1")
    for b in benchmarks:
        BENCHMARKS.get(b)  # unknown names fail before any model work
    protocol = {"benchmarks": list(benchmarks), "seed": seed, "temperature": temperature,
                "top_p": top_p, "max_context": max_context, "max_new_tokens": max_new_tokens,
                "data_dir": str(data_dir) if data_dir is not None else None, "limit": limit}
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        pfile = out / "protocol.json"
        if pfile.is_file():
            old = json.loads(pfile.read_text(encoding="utf-8"))
            diff = {k: (old.get(k), v) for k, v in protocol.items()
                    if k != "benchmarks" and old.get(k) != v}
            if diff:
                raise ValueError(f"{out} holds an evaluation with another protocol {diff} "
                                 "(old, new); use another output folder")
        atomic_write_json(pfile, protocol)
    engine = None
    summary = EvalSummary(protocol=protocol)
    for name in benchmarks:
        items = load_benchmark(name, data_dir=data_dir, limit=limit)
        accs, seeds = [], []
        for r in range(runs):
            run_seed = seed + r
            path = out / name / f"run{r}.jsonl" if out is not None else None
            if path is not None and path.is_file():
                records = read_jsonl(path)
                if [x["id"] for x in records] != [it["id"] for it in items]:
                    raise ValueError(f"{path} does not hold this benchmark's items; use another "
                                     "output folder")
                logger.info("%s run %d: read back %s", name, r, path)
            else:
                if engine is None:
                    engine = _as_engine(model_or_engine, tokenizer, batch_size)
                records = _run_benchmark(engine, tokenizer, name, items, r, run_seed,
                                         temperature=temperature, top_p=top_p,
                                         max_context=max_context,
                                         max_new_tokens=max_new_tokens, batch_size=batch_size,
                                         template_kwargs=template_kwargs or {})
                if path is not None:
                    write_jsonl(path, records)
            acc = sum(x["correct"] for x in records) / len(records) if records else 0.0
            logger.info("%s run %d (seed %d): pass@1 %.4f over %d items", name, r, run_seed,
                        acc, len(records))
            accs.append(acc)
            seeds.append(run_seed)
        summary.results[name] = BenchmarkResult(name, len(items), accs, seeds)
    if out is not None:
        atomic_write_json(out / "summary.json", summary.to_dict())
    return summary


# --------------------------------------------------------------------------- tables

_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                  "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                  "^": r"\textasciicircum{}"}


def latex_escape(text: str) -> str:
    r"""Escape LaTeX's special characters: ``a_b & 5%`` -> ``a\_b \& 5\%``."""
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def display_name(name: str) -> str:
    return BENCHMARKS.get(name).display if name in BENCHMARKS else name


def format_table(summaries: Mapping[str, EvalSummary], fmt: str = "markdown",
                 benchmarks: Sequence[str] | None = None, average: bool = True) -> str:
    """The paper's table: one row per model / arm (the mapping's keys, in order), one column
    per benchmark then ``Avg.``; cells ``mean ± se`` in percent with one decimal (``mean``
    alone for one run, ``–`` when missing); the best mean per column (after rounding, ties all
    bold) in bold: ``**x**`` in Markdown, ``\\textbf{x}`` in LaTeX (a ``tabular`` body).
    The average is over the benchmarks shown, only for rows that have all of them.
    """
    if fmt not in ("markdown", "latex"):
        raise ValueError(f"fmt = {fmt!r}; allowed: markdown, latex")
    if benchmarks is None:
        benchmarks = list(dict.fromkeys(b for s in summaries.values() for b in s.results))
    cols: list[tuple[str, Callable[[EvalSummary], tuple[float, float | None] | None]]] = []
    for b in benchmarks:
        cols.append((display_name(b), lambda s, b=b: (s.results[b].mean, s.results[b].se)
                     if b in s.results else None))
    if average and benchmarks:
        cols.append(("Avg.", lambda s: s.average(benchmarks)
                     if all(b in s.results for b in benchmarks) else None))
    cells = {label: [f(s) for _, f in cols] for label, s in summaries.items()}
    best = []
    for j in range(len(cols)):
        vals = [round(100 * c[j][0], 1) for c in cells.values() if c[j] is not None]
        best.append(max(vals) if vals else None)
    pm = " ± " if fmt == "markdown" else r" $\pm$ "

    def cell(v: tuple[float, float | None] | None, j: int) -> str:
        if v is None:
            return "–" if fmt == "markdown" else "--"
        mean = round(100 * v[0], 1)
        text = f"{mean:.1f}"
        if mean == best[j] and len(cells) > 1:
            text = f"**{text}**" if fmt == "markdown" else rf"\textbf{{{text}}}"
        if v[1] is not None:
            text += f"{pm}{100 * v[1]:.1f}"
        return text

    header = ["Model"] + [c[0] for c in cols]
    rows = [[label] + [cell(v, j) for j, v in enumerate(vals)] for label, vals in cells.items()]
    if fmt == "markdown":
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines) + "\n"
    spec = "l" + "c" * len(cols)
    lines = [rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
             " & ".join(latex_escape(h) for h in header) + r" \\", r"\midrule"]
    lines += [" & ".join([latex_escape(r[0])] + r[1:]) + r" \\" for r in rows]
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"
