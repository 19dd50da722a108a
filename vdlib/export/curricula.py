"""A run's curricula as a Hugging Face ``datasets`` dataset: one split per iteration, one row
per generated question, written as parquet (``data/<split>.parquet``, what the Hub serves and
``load_dataset("parquet", ...)`` reads) and as ``save_to_disk``'s Arrow copy (``arrow/``, what
``load_from_disk`` reads).

Columns (:data:`FEATURES`; :data:`COLUMN_HELP` says where each comes from):

- from the loop's records (``iter_<t>/questions.jsonl``, :mod:`vdlib.loop.proposals` and the
  scoring stage), unchanged: ``index``, ``question``, ``answer``, ``valid``, ``text``,
  ``finish_reason``, ``num_tokens``, ``sample_seed`` (the record's ``seed``), ``mask_seed``
  (None without a mask), ``alpha`` (``alpha_gen``), ``solver_answers``, ``majority``, ``acc``,
  ``proposer_agrees``;
- derived, deterministically: ``iteration``, ``arm`` and ``run_seed`` (the run's), ``batch``
  (the generation batch: ``index // curriculum.batch_size`` as
  :func:`vdlib.loop.proposals.generate_proposals` cuts them; in an extract without a config,
  the order in which the batch's sampling seed first appears, one seed per batch), and
  ``in_curriculum`` (:func:`vdlib.method.curriculum.filter_curriculum` of the row under the
  run's ``scoring`` window and target; None without a config). Both are checked where the run
  records them: every masked row's ``mask_seed`` must be
  ``vdlib.method.vocab_dropout.mask_seed(run_seed, t, "gen", batch)``, and the rows kept must be
  ``curriculum.jsonl``'s questions, in order.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from vdlib.config import layout
from vdlib.export.run_folder import ExportError, Iteration, RunFolder, iteration_path
from vdlib.method.curriculum import filter_curriculum
from vdlib.method.vocab_dropout import mask_seed

__all__ = ["COLUMN_HELP", "features", "split_name", "iteration_rows", "build_dataset",
           "write_dataset", "PARQUET_DIR", "ARROW_DIR"]

logger = logging.getLogger(__name__)

#: the parquet files' compression (the Hub's viewer and every ``datasets`` reader read it)
PARQUET_COMPRESSION = "zstd"
#: the parquet files' folder inside an export (``data/<split>.parquet``)
PARQUET_DIR = "data"
#: ``Dataset.save_to_disk``'s copy inside an export (``load_from_disk(DIR/arrow)``)
ARROW_DIR = "arrow"

#: every column and where it comes from (the dataset card lists them)
COLUMN_HELP: dict[str, tuple[str, str]] = {
    "iteration": ("int32", "co-evolution iteration t (the split is iter_<t>)"),
    "arm": ("string", "the run's arm (None: a run of one config, not an arm of a grid)"),
    "run_seed": ("int64", "the run's seed"),
    "index": ("int32", "position of the question among the iteration's K generated questions"),
    "batch": ("int32", "the generation batch (one vocabulary mask per batch)"),
    "question": ("string", "the parsed question (None when the output did not parse)"),
    "answer": ("string", "the proposer's own boxed answer (None when it did not parse)"),
    "valid": ("bool", "the output parsed into a question and an answer"),
    "text": ("string", "the proposer's raw output"),
    "finish_reason": ("string", "why sampling stopped (stop, length)"),
    "num_tokens": ("int32", "tokens in the proposer's output"),
    "sample_seed": ("int64", "the sampling seed of the output's batch"),
    "mask_seed": ("int64", "the batch's vocabulary-mask seed (None: sampled without a mask)"),
    "alpha": ("float64", "the generation-phase keep rate alpha (1.0: no mask)"),
    "solver_answers": ("list<string>", "the frozen solver's M extracted answers (empty: the "
                                       "question did not parse; None: no answer extracted)"),
    "majority": ("string", "the solver answers' majority (None: no answer parsed)"),
    "acc": ("float64", "fraction of the M answers equal to the majority (the self-consistency)"),
    "proposer_agrees": ("bool", "the proposer's answer equals the majority"),
    "in_curriculum": ("bool", "kept for the solver's training: valid, acc in [tau_min, tau_max] "
                              "and a target answer (None: the run records no config)"),
}


def features() -> Any:
    """The ``datasets.Features`` of every split (explicit, so that a split whose column is all
    None keeps its type)."""
    from datasets import Features, List, Value

    out = {}
    for name, (kind, _) in COLUMN_HELP.items():
        out[name] = List(Value("string")) if kind == "list<string>" else Value(kind)
    return Features(out)


def split_name(t: int) -> str:
    """The split of iteration ``t``: its folder's name, ``iter_<t>``."""
    return layout.iteration_dir("", t).name


def _batches(it: Iteration, run: RunFolder) -> list[int | None]:
    size = ((run.config or {}).get("curriculum") or {}).get("batch_size")
    if size:
        return [int(q["index"]) // int(size) for q in it.questions]
    first: dict[Any, int] = {}
    for q in it.questions:
        first.setdefault(q.get("seed"), len(first))
    return [first[q.get("seed")] if q.get("seed") is not None else None for q in it.questions]


def _check_masks(it: Iteration, run: RunFolder, batches: list[int | None]) -> None:
    if run.seed is None:
        return
    for q, b in zip(it.questions, batches, strict=True):
        if q.get("mask_seed") is not None and b is not None \
                and q["mask_seed"] != mask_seed(int(run.seed), it.t, "gen", b):
            raise ExportError(f"{iteration_path(run.path, it.t)}: question {q['index']}'s "
                              f"mask_seed is not the seed of run seed {run.seed}, batch {b}; "
                              "the records disagree with the run, refused")


def _in_curriculum(it: Iteration, run: RunFolder) -> list[bool | None]:
    scoring = (run.config or {}).get("scoring")
    if not scoring:
        return [None] * len(it.questions)
    args = (scoring["tau_min"], scoring["tau_max"], scoring.get("solver_target", "proposer"))
    kept = [bool(filter_curriculum([q], *args)) for q in it.questions]
    if it.curriculum is not None:
        ours = [q["question"] for q, k in zip(it.questions, kept, strict=True) if k]
        if ours != [c.get("question") for c in it.curriculum]:
            raise ExportError(f"{iteration_path(run.path, it.t)}: the questions the "
                              f"scoring window keeps are not {layout.CURRICULUM_FILE}'s; the "
                              "run's config and records disagree, refused")
    return kept


def iteration_rows(it: Iteration, run: RunFolder) -> dict[str, list[Any]]:
    """The split of one iteration as columns (:data:`COLUMN_HELP`'s order)."""
    batches = _batches(it, run)
    _check_masks(it, run, batches)
    kept = _in_curriculum(it, run)
    cols: dict[str, list[Any]] = {name: [] for name in COLUMN_HELP}
    for q, b, k in zip(it.questions, batches, kept, strict=True):
        answers = q.get("solver_answers")
        row = {"iteration": it.t, "arm": run.arm, "run_seed": run.seed, "index": q["index"],
               "batch": b, "question": q.get("question"), "answer": q.get("answer"),
               "valid": q.get("valid"), "text": q.get("text"),
               "finish_reason": q.get("finish_reason"), "num_tokens": q.get("num_tokens"),
               "sample_seed": q.get("seed"), "mask_seed": q.get("mask_seed"),
               "alpha": q.get("alpha_gen"),
               "solver_answers": None if answers is None else [
                   None if a is None else str(a) for a in answers],
               "majority": q.get("majority"), "acc": q.get("acc"),
               "proposer_agrees": q.get("proposer_agrees"), "in_curriculum": k}
        for name in COLUMN_HELP:
            cols[name].append(row[name])
    return cols


def build_dataset(run: RunFolder) -> Any:
    """A ``datasets.DatasetDict``: one split per finished iteration (:func:`split_name`)."""
    from datasets import Dataset, DatasetDict

    feats = features()
    return DatasetDict({split_name(it.t): Dataset.from_dict(iteration_rows(it, run),
                                                            features=feats)
                        for it in run.iterations})


def write_parquet(ds: Any, path: Path) -> None:
    """One split as zstd parquet (level 19: 0.57x the size of ``Dataset.to_parquet``'s snappy on
    the committed curricula, whose generated text dominates), its schema carrying the features
    (``huggingface`` metadata), so ``load_dataset("parquet", ...)`` reads the same types back."""
    import pyarrow.parquet as pq

    table = ds.with_format("arrow")[:]
    table = table.replace_schema_metadata(ds.features.arrow_schema.metadata)
    pq.write_table(table, str(path), compression=PARQUET_COMPRESSION, compression_level=19)


def write_dataset(dataset: Any, to: Path, arrow: bool = True) -> dict[str, list[Path]]:
    """``to/data/<split>.parquet`` and, with ``arrow``, ``to/arrow/`` (``save_to_disk``); the
    files written."""
    data = to / PARQUET_DIR
    data.mkdir(parents=True, exist_ok=True)
    parquet = []
    for split, ds in dataset.items():
        path = data / f"{split}.parquet"
        write_parquet(ds, path)
        parquet.append(path)
    if arrow:
        dataset.save_to_disk(str(to / ARROW_DIR))
    logger.debug("%d splits, %d rows -> %s", len(dataset),
                 sum(len(d) for d in dataset.values()), to)
    return {"parquet": parquet, "arrow": sorted((to / ARROW_DIR).rglob("*")) if arrow else []}
