"""The cost table of ``vdlib plan``: model shapes, cards and measured figures, and the lookups.

``vdlib/data/cost_table.json`` is written by ``benchmarks/cost_table.py`` from committed results
only; every figure names its source. It holds:

- ``cards``: memory of each card (GiB);
- ``shapes``: model dimensions by shape name, with the model names that resolve to each;
- ``entries``: per (shape, card, engine backend, lifetime, GPUs per run, runs per GPU), the
  figures of one co-evolution iteration: per stage the seconds per unit of work (a GRPO step at
  ``step_tokens`` generated tokens, or generated tokens per second) and the start-up seconds,
  the output lengths the measured runs produced, and measured peak memory where it was sampled;
  a stage's optional ``first_iteration_extra_s`` is what iteration 1 spends beyond a later
  iteration (added once a run); an entry's optional keys are ignored where unknown, so the
  format grows without breaking older readers;
- ``partial``: figures of a shape that are not an iteration (a transformers GRPO step, a vLLM
  throughput), which a missing-figures error names;
- ``measured``: the gpu-small run-iterations the projection is checked against.

Nothing here imports torch or loads a model: a local checkpoint's shape is read from its
``config.json``.

>>> table = load_table()
>>> resolve_shape("Qwen/Qwen3-4B-Base", table).params()
4022468096
>>> resolve_shape("Qwen/Qwen3-8B-Base", table).kv_bytes_per_token()  # 144 KiB
147456
"""

from __future__ import annotations

import json
import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vdlib.utils import safe_read

__all__ = ["DEFAULT_TABLE", "CARDS", "PlanError", "MissingFigures", "Shape", "load_table",
           "validate_table", "STAGE_FIGURES",
           "resolve_shape", "card_memory_gib", "select_figures", "measure_command"]

DEFAULT_TABLE = Path(__file__).resolve().parents[1] / "data" / "cost_table.json"
#: The cards a table may hold figures for (``vdlib plan --card``).
CARDS = ("h100", "h200")
#: The figures each stage needs from an entry.
STAGE_FIGURES = {
    "proposer": ("step_s", "step_tokens", "startup_s"),
    "generate": ("tokens_per_s", "startup_s"),
    "score": ("tokens_per_s", "startup_s"),
    "solver": ("step_s", "step_tokens", "startup_s"),
    "metrics": ("s_per_question",),
    "evaluate": ("tokens_per_s", "startup_s"),
}


class PlanError(ValueError):
    """A plan that cannot be made; the message says what is missing and what to do."""


class MissingFigures(PlanError):
    """The table has no figures for this shape, card or setup. ``memory`` holds the memory
    estimate (it needs only the shape), so a caller can still show it."""

    def __init__(self, message: str, memory: Any = None) -> None:
        super().__init__(message)
        self.memory = memory


@dataclass(frozen=True)
class Shape:
    """A decoder's dimensions (a ``config.json``'s), enough for parameter and memory counts."""

    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied: bool
    qk_norm: bool = False

    def params(self) -> int:
        """Parameters of a Llama / Qwen3 decoder of this shape (embeddings counted once when
        tied; RMSNorm weights, and Qwen3's q/k norms, included)."""
        attn = self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads)
        mlp = 3 * self.hidden * self.intermediate
        norms = 2 * self.hidden + (2 * self.head_dim if self.qk_norm else 0)
        embed = self.vocab * self.hidden * (1 if self.tied else 2)
        return self.layers * (attn + mlp + norms) + embed + self.hidden

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        """KV-cache bytes per token: K and V of every layer's KV heads."""
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes


#: Largest cost table read (the packaged one is ~60 KiB).
MAX_TABLE_BYTES = 16 * 2**20
_SHAPE_INTS = ("hidden", "layers", "heads", "kv_heads", "head_dim", "intermediate", "vocab")
_ENTRY_KEYS = {"id": str, "shape": str, "card": str, "backend": str, "lifetime": str,
               "gpus_per_run": int, "runs_per_gpu": int, "stages": dict, "lengths": dict}
_LENGTHS = ("question", "proposer_rollout", "answer", "solver_rollout", "valid_fraction",
            "reward_answers_per_rollout")


def _number(value: Any, where: str, *, integer: bool = False, zero: bool = False) -> None:
    """A finite positive number (an integer with ``integer``; 0 allowed with ``zero``)."""
    ok = isinstance(value, int if integer else (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value) and (value >= 0 if zero else value > 0)
    if not ok:
        kind = "an integer" if integer else "a number"
        raise ValueError(f"{where} = {str(value)[:40]!r}: allowed: {kind} "
                         f"{'>= 0' if zero else '> 0'}, finite")


def validate_table(table: Any) -> None:
    """Raise ValueError naming the first key of ``table`` that ``vdlib plan`` could not use:
    the sections, each card's memory, each shape's dimensions, each entry's identity, lengths
    and stage figures (finite, positive)."""
    if not isinstance(table, dict):
        raise ValueError(f"the top level is a {type(table).__name__}, not an object")
    missing = {"cards", "shapes", "entries"} - set(table)
    if missing:
        raise ValueError(f"a cost table needs {', '.join(sorted(missing))}")
    for key, kind in (("cards", dict), ("shapes", dict), ("entries", list),
                      ("partial", list), ("measured", dict)):
        if key in table and not isinstance(table[key], kind):
            raise ValueError(f"{key} is a {type(table[key]).__name__}, not a "
                             f"{'list' if kind is list else 'object'}")
    for name, card in table["cards"].items():
        if not isinstance(card, dict):
            raise ValueError(f"cards.{name} is not an object")
        _number(card.get("memory_gib"), f"cards.{name}.memory_gib")
    for name, row in table["shapes"].items():
        if not isinstance(row, dict):
            raise ValueError(f"shapes.{name} is not an object")
        for k in _SHAPE_INTS:
            _number(row.get(k), f"shapes.{name}.{k}", integer=True)
        if not isinstance(row.get("names", []), list):
            raise ValueError(f"shapes.{name}.names is not a list")
    for i, e in enumerate(table["entries"]):
        if not isinstance(e, dict):
            raise ValueError(f"entries[{i}] is not an object")
        where = f"entries[{i}] ({str(e.get('id'))[:60]})"
        for k, kind in _ENTRY_KEYS.items():
            if not isinstance(e.get(k), kind) or isinstance(e.get(k), bool):
                raise ValueError(f"{where}.{k}: missing or not {kind.__name__}")
        for k in ("gpus_per_run", "runs_per_gpu"):
            _number(e[k], f"{where}.{k}", integer=True)
        for k in _LENGTHS:
            _number(e["lengths"].get(k), f"{where}.lengths.{k}", zero=True)
        for stage, fig in e["stages"].items():
            if not isinstance(fig, dict):
                raise ValueError(f"{where}.stages.{stage} is not an object")
            for k in STAGE_FIGURES.get(stage, ()):
                if k in fig:
                    _number(fig[k], f"{where}.stages.{stage}.{k}", zero=k == "startup_s")
            if "first_iteration_extra_s" in fig:
                _number(fig["first_iteration_extra_s"],
                        f"{where}.stages.{stage}.first_iteration_extra_s", zero=True)
            if "reward_tokens_per_s" in fig:
                _number(fig["reward_tokens_per_s"], f"{where}.stages.{stage}.reward_tokens_per_s")
    for i, e in enumerate(table.get("partial", [])):
        if not isinstance(e, dict) or not all(isinstance(e.get(k), str) for k in
                                              ("id", "shape", "card", "backend")) \
                or not isinstance(e.get("figures"), list):
            raise ValueError(f"partial[{i}]: needs id, shape, card, backend and figures")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a cost table may hold")


def load_table(path: str | os.PathLike | None = None) -> dict[str, Any]:
    """The cost table (default: the packaged ``vdlib/data/cost_table.json``), checked
    (:func:`validate_table`): a path that is not a regular file, a file over
    :data:`MAX_TABLE_BYTES`, bytes that are not UTF-8 JSON, NaN or Infinity, or a key plan could
    not use, raise :class:`PlanError` in one line naming the file."""
    path = Path(path) if path else DEFAULT_TABLE
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise PlanError(f"{path}: not a regular file (a cost table is a JSON file)")
        if info.st_size > MAX_TABLE_BYTES:
            raise PlanError(f"{path}: {info.st_size:,} bytes; a cost table is at most "
                            f"{MAX_TABLE_BYTES:,}")
        # vdlib's bounded reader: a FIFO swapped in after the check cannot block the read
        table = json.loads(safe_read.read_text(path, MAX_TABLE_BYTES, follow_links=True),
                           parse_constant=_no_constant)
    except PlanError:
        raise
    except safe_read.UnsafeFileError as e:  # replaced or grown after the checks above
        raise PlanError(f"{path}: not a cost table to read ({e})") from None
    except FileNotFoundError:
        raise PlanError(f"{path}: no cost table there (the packaged one is {DEFAULT_TABLE})"
                        ) from None
    except OSError as e:
        raise PlanError(f"{path}: cannot read the cost table ({e.strerror or e})") from None
    except UnicodeDecodeError:
        raise PlanError(f"{path}: not UTF-8 text (a cost table is JSON)") from None
    except (ValueError, RecursionError) as e:
        raise PlanError(f"{path}: not a JSON cost table ({str(e).splitlines()[0][:200]})"
                        ) from None
    try:
        validate_table(table)
    except ValueError as e:
        raise PlanError(f"{path}: not a usable cost table: {e}") from None
    return table


def _shape(name: str, row: dict[str, Any]) -> Shape:
    return Shape(name, **{k: row[k] for k in ("hidden", "layers", "heads", "kv_heads",
                                               "head_dim", "intermediate", "vocab", "tied")},
                 qk_norm=bool(row.get("qk_norm", False)))


def _from_config(path: Path, table: dict[str, Any]) -> Shape:
    cfg = json.loads(path.read_text(encoding="utf-8"))
    dims = {"hidden": cfg.get("hidden_size"), "layers": cfg.get("num_hidden_layers"),
            "kv_heads": cfg.get("num_key_value_heads", cfg.get("num_attention_heads")),
            "intermediate": cfg.get("intermediate_size"), "vocab": cfg.get("vocab_size")}
    for name, row in table["shapes"].items():
        if all(row[k] == v for k, v in dims.items()):
            return _shape(name, row)
    heads = cfg.get("num_attention_heads") or 1
    return Shape(f"{path.parent.name} (config.json)", dims["hidden"], dims["layers"], heads,
                 dims["kv_heads"], cfg.get("head_dim") or dims["hidden"] // heads,
                 dims["intermediate"], dims["vocab"], bool(cfg.get("tie_word_embeddings")),
                 qk_norm=cfg.get("model_type") == "qwen3")


def resolve_shape(model: str, table: dict[str, Any]) -> Shape:
    """The shape of a params file's model: a name the table lists (``names`` of a shape), or
    a local checkpoint folder whose ``config.json`` matches a shape's dimensions (an unknown
    shape is returned with the folder's name, so that memory can still be estimated)."""
    for name, row in table["shapes"].items():
        if model == name or model in row.get("names", ()):
            return _shape(name, row)
    config = Path(model) / "config.json"
    if config.is_file():
        return _from_config(config, table)
    known = sorted(n for row in table["shapes"].values() for n in row.get("names", ()))
    raise MissingFigures(
        f"model {model!r}: the cost table has no shape for it (known names: "
        f"{', '.join(known)}; or give a local checkpoint folder with a config.json). Add the "
        "shape to benchmarks/cost_table.py's SHAPES, then measure it: "
        f"{measure_command(shape=Path(model).name)}")


def card_memory_gib(card: str, table: dict[str, Any]) -> float:
    if card not in table["cards"]:
        raise MissingFigures(f"card {card!r}: the cost table knows {', '.join(table['cards'])}; "
                             f"add a card to benchmarks/cost_table.py's CARDS, then measure on "
                             f"it: {measure_command(card=card)}")
    return float(table["cards"][card]["memory_gib"])


def measure_command(params: str = "PARAMS", *, card: str = "CARD", gpus_per_run: int = 1,
                    dummy: bool = False, shape: str = "SHAPE") -> str:
    """The command that adds a shape's figures to the table, run on a machine with ``card``
    (``vdlib.app.plan_measure``), and how its entry joins the table."""
    extra = (" --dummy-weights --tokenizer TOKENIZER_DIR --bench-dir ../shared/benchmarks"
             if dummy else "")
    gpus = f" --gpus-per-run {gpus_per_run}" if gpus_per_run > 1 else ""
    return (f"`CUDA_VISIBLE_DEVICES=0 vdlib plan {params} --measure{extra}{gpus} "
            f"--card {card} --out benchmarks/results/cost_entries/{shape}_{card}"
            f"_{max(gpus_per_run, 1)}gpu.json`, then commit that file and run "
            "`python benchmarks/cost_table.py --write`")


def _describe_entries(entries: list[dict[str, Any]]) -> str:
    out = []
    for e in entries:
        if e.get("partial"):
            figs = "; ".join(f"{f['what']}: {f['value']} {f['unit']}" for f in e["figures"][:3])
            out.append(f"{e['id']} (partial: {figs}{'; ...' if len(e['figures']) > 3 else ''})")
        else:
            out.append(f"{e['id']} ({e['backend']}, lifetime {e['lifetime']}, "
                       f"{e['gpus_per_run']} GPU(s) a run, {e['runs_per_gpu']} run(s) a GPU)")
    return "; ".join(out) or "nothing"


def select_figures(table: dict[str, Any], shape: Shape, card: str, *, backend: str,
                   lifetime: str, gpus_per_run: int, runs_per_gpu: int, params: str = "PARAMS",
                   memory: Any = None, hint: str = "",
                   ) -> tuple[dict[str, dict[str, Any]], dict[str, Any], list[str]]:
    """Per stage the figures to project with, the entry that supplies most of them, and notes
    on every way they differ from the setup asked for. An entry must match the shape, the card
    and the engine backend; among those the closest in GPUs per run, lifetime and runs per GPU
    wins, and a stage it lacks comes from the next closest (a note says so); the evaluation,
    a vLLM engine of its own, may come from an entry of another backend. Raises
    :class:`MissingFigures` naming what exists for the shape and the command that adds it
    (``hint``: a sentence to add, e.g. the paper's topology)."""
    card_memory_gib(card, table)
    everything = table["entries"] + table.get("partial", [])
    of_card = [e for e in table["entries"] if e["shape"] == shape.name and e["card"] == card
               and not e.get("partial")]
    full = [e for e in of_card if e["backend"] == backend]
    cmd = measure_command(params, card=card, gpus_per_run=gpus_per_run, shape=shape.name,
                          dummy=shape.params() > 1e9)
    if not full:
        same = [e for e in everything if e["shape"] == shape.name]
        raise MissingFigures(
            f"no figures for shape {shape.name} on {card} with engine backend {backend} "
            f"({gpus_per_run} GPU(s) a run): every stage is missing (proposer, generate, score, "
            f"solver, metrics, evaluate; start-up and output lengths). What the table has for "
            f"{shape.name}: {_describe_entries(same)}. Add them on a machine with "
            f"{max(gpus_per_run, 1)} x {card.upper()}: {cmd}.{hint}", memory)

    def distance(e: dict[str, Any]) -> tuple[int, int, int, int]:
        return (e["backend"] != backend, e["gpus_per_run"] != gpus_per_run,
                e["lifetime"] != lifetime, abs(e["runs_per_gpu"] - runs_per_gpu))

    ranked = sorted(full, key=distance)
    best = ranked[0]
    notes = []
    if best["gpus_per_run"] != gpus_per_run:
        notes.append(f"figures measured with {best['gpus_per_run']} GPU(s) a run, not "
                     f"{gpus_per_run}: {cmd} adds them")
    if best["lifetime"] != lifetime:
        notes.append(f"no engine.lifetime {lifetime} figures for {shape.name} on {card}: using "
                     f"{best['lifetime']} ({best['id']})")
    if best["runs_per_gpu"] != runs_per_gpu:
        notes.append(f"figures measured with {best['runs_per_gpu']} run(s) sharing a GPU, "
                     f"projected for {runs_per_gpu} as if each run took the same time")
    figures = {}
    for stage, needed in STAGE_FIGURES.items():
        pool = ranked + sorted([e for e in of_card if e not in full], key=distance) \
            if stage == "evaluate" else ranked
        source = next((e for e in pool if stage in e["stages"]
                       and all(k in e["stages"][stage] for k in needed)), None)
        if source is None:
            raise MissingFigures(
                f"no {stage} figures for shape {shape.name} on {card} (backend {backend}) in any "
                f"entry ({_describe_entries(full)}); add them: {cmd}.{hint}", memory)
        if source is not best:
            notes.append(f"{stage}: figures of {source['id']} ({best['id']} has none)")
        figures[stage] = {**source["stages"][stage], "entry": source["id"]}
    return figures, best, notes
