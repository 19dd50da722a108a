"""Benchmarks: the registry of the paper's (and out-of-domain) test sets, their converters to
``{id, problem, answer, ...}`` items, and loading from the Hub, a local folder or an offline
stand-in.

The names come from one place, :data:`vdlib.config.experiment.KNOWN_BENCHMARKS` (what a config may
list, checked before any model loads): registering a name not declared there is an error, and so is
a declared name left without a spec (both when this module is imported).

Part of :mod:`vdlib.evaluation` (the protocol is described there)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vdlib.config import layout
from vdlib.config.experiment import KNOWN_BENCHMARKS
from vdlib.engines.models import hub_offline
from vdlib.method.parsing import strip_cot_suffix
from vdlib.utils.registry import Registry

__all__ = ["BENCHMARKS", "BenchmarkSpec", "BenchmarkUnavailableError", "load_benchmark",
           "gsm8k_gold", "strip_dollars", "format_choices", "LETTERS", "BBH_TASKS",
           "OLYMPIADBENCH_SUBSETS", "OLYMPIADBENCH_910", "OLYMPIADBENCH_PHYSICS_FILE",
           "write_stand_in_copy"]

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


def _register(spec: BenchmarkSpec) -> None:
    """Add ``spec`` to :data:`BENCHMARKS`; its name must be declared in ``KNOWN_BENCHMARKS``."""
    if spec.name not in KNOWN_BENCHMARKS:
        raise ValueError(f"benchmark {spec.name!r} is not declared in "
                         "vdlib.config.experiment.KNOWN_BENCHMARKS (the single list of "
                         "benchmark names); add it there")
    BENCHMARKS.add(spec.name, spec)


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
    _register(BenchmarkSpec(name, display, "math", hub_id, config, split,
                            convert=_math_converter(name, **conv)))


# Pinned Hub ids and splits: R-Zero's evaluation list (MATH-500 is the prm800k 500-problem test
# subset, here through its HuggingFaceH4 mirror).
_register_math("gsm8k", "GSM8K", "openai/gsm8k", "test", "main", gsm8k=True)
_register_math("math500", "MATH500", "HuggingFaceH4/MATH-500", "test")
_register_math("amc23", "AMC", "zwhe99/amc23", "test")
_register_math("olympiadbench", "Olympiad", "zwhe99/simplerl-OlympiadBench", "test",
               dollars=True)
_register_math("aime24", "AIME'24", "HuggingFaceH4/aime_2024", "train")
#: OlympiadBench's subsets (``evaluation.olympiadbench_subset``). The registered spec above is
#: ``maths_en`` (R-Zero's list: 675 English text-only open-ended maths problems; the common
#: FiRe-OPD copy has 674). The paper's tab:benchmarks counts 910 = OE_TO_maths_en_COMP (674) +
#: OE_TO_physics_en_COMP (236) of Hothan/OlympiadBench, and its single-evaluation OlympiadBench
#: cells (tab:curriculum_transfer, tab:vanilla_grpo) are all multiples of 1/910, which 27.8 and
#: 24.1 are not of 1/674 nor 28.2 of 1/675. Locally the physics part is read from
#: ``<data_dir>/olympiadbench/physics_en.jsonl`` (same fields as the Hub rows).
OLYMPIADBENCH_SUBSETS = ("maths_physics_en", "maths_en")
OLYMPIADBENCH_PHYSICS_FILE = "physics_en.jsonl"
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


_register(BenchmarkSpec(
    "gsm_symbolic", "GSM-Symbolic (rg)", "math", load=_load_gsm_symbolic,
    note=f"reasoning-gym gsm_symbolic, limit items (default {GSM_SYMBOLIC_DEFAULT_SIZE}) "
         "from seed"))
_register(BenchmarkSpec("champ", "CHAMP", "math", load=_load_champ,
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

_register(BenchmarkSpec("bbh", "BBH", "choice", "lukaemon/bbh", None, "test",
                        convert=_convert_bbh, hub_configs=BBH_TASKS,
                        note="27 tasks concatenated; non-letter targets graded as strings"))
_register(BenchmarkSpec("medqa", "MedQA-USMLE", "choice", "GBaker/MedQA-USMLE-4-options", None,
                        "test", convert=_convert_medqa))
_register(BenchmarkSpec("supergpqa", "SuperGPQA", "choice", "m-a-p/SuperGPQA", None, "train",
                        convert=_convert_supergpqa))
_register(BenchmarkSpec("winogrande", "WinoGrande", "choice", "allenai/winogrande",
                        "winogrande_xl", "validation", convert=_convert_winogrande))


def _convert_olympiad_physics(row: dict[str, Any], index: int) -> dict[str, Any]:
    """An OE_TO_physics_en_COMP row (Hothan/OlympiadBench fields: ``context``, ``question``,
    ``final_answer`` list, ``unit``): the context before the question, ids kept apart from the
    maths items'."""
    row = dict(row)
    context = str(row.get("context") or "").strip()
    if context and "question" in row:
        row["question"] = f"{context}\n\n{row['question']}"
    item = _math_converter("olympiadbench", dollars=True)(row, index)
    item["id"] = f"olympiadbench-physics-{row.get('id', index)}"
    item["subject"] = "physics"
    return item


OLYMPIADBENCH_910 = BenchmarkSpec(
    "olympiadbench", "Olympiad", "math", "Hothan/OlympiadBench", None, "train",
    convert=_math_converter("olympiadbench", dollars=True),
    hub_configs=("OE_TO_maths_en_COMP", "OE_TO_physics_en_COMP"),
    note="paper tab:benchmarks: 910 = English text-only open-ended maths 674 + physics 236")


def _check_every_name_registered() -> None:
    missing = [name for name in KNOWN_BENCHMARKS if name not in BENCHMARKS]
    if missing:
        raise ImportError(f"vdlib.config.experiment.KNOWN_BENCHMARKS declares "
                          f"{', '.join(missing)} but vdlib.evaluation.benchmarks registers no "
                          "spec for them")


_check_every_name_registered()


# --------------------------------------------------------------------------- loading


def _hub_rows(spec: BenchmarkSpec) -> Iterable[tuple[str, dict[str, Any]]]:
    """(where, row) of the pinned Hub dataset."""
    if hub_offline():
        raise BenchmarkUnavailableError(
            f"benchmark {spec.name!r} comes from the Hugging Face Hub ({spec.hub_id}, split "
            f"{spec.split}) but HF_HUB_OFFLINE is set: pass --data-dir DIR (data_dir=DIR) with "
            f"DIR/{spec.name}/test.jsonl, or unset HF_HUB_OFFLINE")
    import datasets

    configs = spec.hub_configs or (spec.hub_config,)
    for config in configs:
        ds = datasets.load_dataset(spec.hub_id, config, split=spec.split)
        for i, row in enumerate(ds):
            row = dict(row)
            if spec.hub_configs:
                row.setdefault("task", config)
            yield f"{spec.hub_id} ({config}) row {i}", row


def _file_rows(spec: BenchmarkSpec, data_dir: str | Path) -> Iterable[tuple[str, dict[str, Any]]]:
    """(``<file>:<line>``, row) of ``<data_dir>/<name>/test.jsonl``; a line that is not a JSON
    object is an error naming the file and line."""
    path = Path(data_dir) / spec.name / "test.jsonl"
    if not path.is_file():
        raise BenchmarkUnavailableError(f"benchmark {spec.name!r}: no file {path} "
                                        f"(expected <data_dir>/{spec.name}/test.jsonl)")
    yield from _jsonl_rows(path)


def _jsonl_rows(path: Path) -> Iterable[tuple[str, dict[str, Any]]]:
    """(``<file>:<line>``, row) of JSONL file ``path``; a line that is not a JSON object is an
    error naming the file and line."""
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as e:
                raise BenchmarkUnavailableError(f"{path}:{n}: not valid JSON ({e})") from None
            if not isinstance(row, dict):
                raise BenchmarkUnavailableError(f"{path}:{n}: a JSON object per line expected, "
                                                f"got {type(row).__name__}")
            yield f"{path}:{n}", row


def write_stand_in_copy(name: str, data_dir: str | Path, limit: int | None = None,
                        seed: int = 0) -> Path:
    """Generate offline stand-in ``name``'s items (e.g. ``gsm_symbolic`` from reasoning-gym) and
    write them to :func:`vdlib.config.layout.stand_in_copy_path`, for a machine without the
    generator's package: :func:`load_benchmark` with that ``data_dir`` then reads the copy
    (the same items)."""
    from vdlib.utils.artifacts import atomic_write_text

    spec = BENCHMARKS.get(name)
    if spec.load is None:
        raise ValueError(f"benchmark {name!r} is not a generated stand-in; allowed: "
                         + ", ".join(n for n in BENCHMARKS.names() if BENCHMARKS.get(n).load))
    items = spec.load(limit, seed)
    path = layout.stand_in_copy_path(data_dir, name, limit, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write_text(path, "".join(json.dumps(it, sort_keys=True) + "\n" for it in items))


def _read_stand_in_copy(spec: BenchmarkSpec, data_dir: str | Path | None, limit: int | None,
                        seed: int) -> list[dict[str, Any]] | None:
    """The items of a copy written by :func:`write_stand_in_copy`, or None when there is none."""
    if data_dir is None:
        return None
    path = layout.stand_in_copy_path(data_dir, spec.name, limit, seed)
    if not path.is_file():
        return None
    items = [row for _, row in _jsonl_rows(path)]
    logger.info("benchmark %s: %d generated items read from %s", spec.name, len(items), path)
    return items


def _samples_dir() -> Path:
    from importlib import resources

    return Path(str(resources.files("vdlib").joinpath("data", "benchmark_samples")))


def _olympiad_rows(spec: BenchmarkSpec, data_dir: str | Path | None, subset: str
                   ) -> Iterable[tuple[str, dict[str, Any], Callable[..., Any]]]:
    """(where, row, converter) of OlympiadBench's ``subset``."""
    if subset not in OLYMPIADBENCH_SUBSETS:
        raise ValueError(f"olympiadbench_subset = {subset!r}; allowed: "
                         f"{', '.join(OLYMPIADBENCH_SUBSETS)}")
    if subset == "maths_en":
        rows = _file_rows(spec, data_dir) if data_dir is not None else _hub_rows(spec)
        yield from ((w, r, spec.convert) for w, r in rows)
        return
    if data_dir is None:
        for w, r in _hub_rows(OLYMPIADBENCH_910):
            physics = "physics" in w
            yield w, r, _convert_olympiad_physics if physics else OLYMPIADBENCH_910.convert
        return
    physics = Path(data_dir) / spec.name / OLYMPIADBENCH_PHYSICS_FILE
    if not physics.is_file():
        raise BenchmarkUnavailableError(
            f"benchmark 'olympiadbench' (evaluation.olympiadbench_subset = maths_physics_en, "
            f"the paper's 910 items) needs {physics} (OE_TO_physics_en_COMP, 236 rows) beside "
            f"test.jsonl; add it, or set evaluation.olympiadbench_subset: maths_en (674/675)")
    yield from ((w, r, spec.convert) for w, r in _file_rows(spec, data_dir))
    with open(physics, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                yield f"{physics}:{n}", json.loads(line), _convert_olympiad_physics


def load_benchmark(name: str, data_dir: str | Path | None = None, limit: int | None = None,
                   seed: int = 0, olympiadbench_subset: str = "maths_physics_en"
                   ) -> list[dict[str, Any]]:
    """Items ``{"id", "problem", "answer", "index", ...metadata}`` of benchmark ``name``.

    With ``data_dir``, reads ``<data_dir>/<name>/test.jsonl`` (the layout of
    a copy of the real test files; rows carry the same fields as the Hub rows); else the pinned Hub
    dataset (an error under ``HF_HUB_OFFLINE=1``); ``data_dir="samples"`` is vdlib's packaged
    folder of a few hand-written items per out-of-domain benchmark (offline smoke runs).
    ``olympiadbench_subset`` picks OlympiadBench's items (:data:`OLYMPIADBENCH_SUBSETS`; the
    default is the paper's 910). Stand-ins read ``data_dir`` only for a generated copy
    (:func:`write_stand_in_copy`, for machines without reasoning-gym);
    ``gsm_symbolic`` draws ``limit`` items from ``seed``. ``limit`` keeps the first N items.
    Multiple-choice items also carry ``choices`` (the valid letters). A row without a field the
    benchmark needs, or a source with no items, is a :class:`BenchmarkUnavailableError` naming
    the file and line.
    """
    if limit is not None and limit < 1:
        raise ValueError(f"limit = {limit}; allowed: an integer >= 1 or None")
    spec = BENCHMARKS.get(name)
    if data_dir is not None and str(data_dir) == "samples":
        data_dir = _samples_dir()
    if spec.load is not None:
        items = _read_stand_in_copy(spec, data_dir, limit, seed)
        if items is None:
            items = spec.load(limit, seed)
    else:
        if name == "olympiadbench":
            rows = _olympiad_rows(spec, data_dir, olympiadbench_subset)
        else:
            plain = _file_rows(spec, data_dir) if data_dir is not None else _hub_rows(spec)
            rows = ((w, r, spec.convert) for w, r in plain)
        items = []
        for i, (where, row, convert) in enumerate(rows):
            try:
                item = convert(row, i)
            except (KeyError, TypeError, ValueError) as e:
                raise BenchmarkUnavailableError(f"{where}: {e}") from None
            if item is not None:
                items.append(item)
            if limit is not None and len(items) >= limit:
                break
        if not items:
            source = Path(data_dir) / spec.name / "test.jsonl" if data_dir is not None \
                else spec.hub_id
            raise BenchmarkUnavailableError(f"benchmark {name!r}: {source} holds no items")
    return items[:limit] if limit is not None else items


