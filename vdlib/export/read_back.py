"""An exported run read back, for notebooks: the dataset, one pandas frame of every split, and
the card's provenance. Reads the parquet files (the layout the Hub serves), so a folder
downloaded from the Hub reads the same as one ``vdlib export`` wrote here.

    from vdlib.export import load_curricula, curricula_frame, read_card
    ds = load_curricula("exports/vd75-seed0")          # DatasetDict: iter_1, iter_2, ...
    frame = curricula_frame("exports/vd75-seed0")      # every split, one row per question
    read_card("exports/vd75-seed0")["vdlib"]["arm"]    # the provenance

A folder of exports, one ``<arm>-seed<seed>/`` each (the committed gpu-small main table:
:data:`COMMITTED_CURRICULA`), reads as one frame (:func:`curricula_runs_frame`), summarised per
arm and iteration (:func:`curricula_summary`) with a few questions beside
(:func:`example_questions`); notebook 01 shows the folder its ``curricula_dir`` names
(:func:`curricula_folder`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from vdlib.config.folder_keys import COMMITTED_CURRICULA_DIR
from vdlib.export.cards import front_matter
from vdlib.export.curricula import PARQUET_DIR, features
from vdlib.export.run_folder import ExportError

__all__ = ["load_curricula", "curricula_frame", "read_card", "CARD_FILE", "COMMITTED_CURRICULA",
           "committed_curricula", "curricula_folder", "curricula_runs", "curricula_runs_frame",
           "curricula_summary", "example_questions"]

CARD_FILE = "README.md"
#: the committed exports of the gpu-small main table (9 runs), relative to the repository root
COMMITTED_CURRICULA = "docs/results/curricula/gpu_small_main"
#: the repository root of a source checkout (vdlib/export/read_back.py -> ../..)
_REPO_ROOT = Path(__file__).resolve().parents[2]


def _iteration_of_split(name: str) -> int:
    return int(name.rpartition("_")[2]) if name.rpartition("_")[2].isdigit() else 1 << 30


def _splits(folder: Path) -> dict[str, str]:
    data = folder / PARQUET_DIR
    files = sorted(data.glob("*.parquet"), key=lambda p: _iteration_of_split(p.stem)) \
        if data.is_dir() else []
    if not files:
        raise ExportError(f"{folder} holds no {PARQUET_DIR}/*.parquet: not a vdlib export "
                          "(vdlib export RUN_DIR --to DIR writes one)")
    return {p.stem: str(p) for p in files}


def load_curricula(folder: str | os.PathLike, splits: list[str] | None = None,
                   cache_dir: str | None = None) -> Any:
    """The export's ``datasets.DatasetDict`` (every split, or those of ``splits``), read from its
    parquet files with the export's column types (``cache_dir``: ``datasets``' cache, default
    its own)."""
    from datasets import load_dataset

    found = _splits(Path(folder))
    if splits is not None:
        unknown = [s for s in splits if s not in found]
        if unknown:
            raise ExportError(f"split {unknown[0]!r} is not in {folder}; allowed: "
                              f"{', '.join(found)}")
        found = {s: found[s] for s in splits}
    return load_dataset("parquet", data_files=found, features=features(), cache_dir=cache_dir)


def curricula_frame(folder: str | os.PathLike, splits: list[str] | None = None,
                    cache_dir: str | None = None):
    """Every split of the export as one pandas frame (the ``iteration`` column tells them
    apart), in split order."""
    import pandas as pd

    ds = load_curricula(folder, splits, cache_dir)
    return pd.concat([ds[s].to_pandas() for s in ds], ignore_index=True)


def read_card(folder: str | os.PathLike) -> dict[str, Any]:
    """The export card's YAML metadata (``README.md``'s front matter; its ``vdlib`` block is the
    run's provenance)."""
    path = Path(folder) / CARD_FILE
    if not path.is_file():
        raise ExportError(f"{path} is missing: not a vdlib export")
    return front_matter(path.read_text(encoding="utf-8"))


def committed_curricula(root: str | os.PathLike | None = None) -> Path | None:
    """The folder of the committed gpu-small main-table exports (:data:`COMMITTED_CURRICULA`
    under ``root``, default the checkout vdlib runs from), or None where it is absent (vdlib
    installed without the repository).

    >>> committed_curricula("/nonexistent") is None
    True
    """
    folder = Path(_REPO_ROOT if root is None else root) / COMMITTED_CURRICULA
    return folder if folder.is_dir() else None


def curricula_folder(value: str | os.PathLike, root: str | os.PathLike | None = None
                     ) -> Path | None:
    """The folder of exports that the config key ``curricula_dir`` names: ``"committed"`` ->
    :func:`committed_curricula` (None without the repository), ``""`` -> None (skip), else the
    folder itself, which must hold at least one export (:func:`curricula_runs`, an
    :class:`ExportError` naming the key otherwise).

    >>> curricula_folder("") is None
    True
    >>> curricula_folder("committed", root="/nonexistent") is None
    True
    """
    if str(value) == COMMITTED_CURRICULA_DIR:
        return committed_curricula(root)
    if str(value) == "":
        return None
    try:
        curricula_runs(value)
    except ExportError as e:
        raise ExportError(f"curricula_dir = {str(value)!r}: {e}") from None
    return Path(value)


def curricula_runs(folder: str | os.PathLike) -> dict[str, Path]:
    """The exports in ``folder`` (each a subfolder with a card and ``data/``), by name, sorted;
    an :class:`ExportError` if there is none."""
    found = {p.name: p for p in sorted(Path(folder).iterdir())
             if p.is_dir() and (p / CARD_FILE).is_file() and (p / PARQUET_DIR).is_dir()} \
        if Path(folder).is_dir() else {}
    if not found:
        raise ExportError(f"{folder} holds no export (<run>/{CARD_FILE} and <run>/{PARQUET_DIR}/)")
    return found


def curricula_runs_frame(folder: str | os.PathLike, cache_dir: str | None = None):
    """Every split of every export in ``folder`` (:func:`curricula_runs`) as one pandas frame,
    run by run (the ``arm`` and ``run_seed`` columns tell them apart)."""
    import pandas as pd

    return pd.concat([curricula_frame(p, cache_dir=cache_dir)
                      for p in curricula_runs(folder).values()], ignore_index=True)


def _sort_arms(frame):
    """Rows by alpha (baseline first), then arm and iteration."""
    return frame.sort_values(["alpha", "arm", "iteration"], ascending=[False, True, True],
                             kind="stable").reset_index(drop=True)


def curricula_summary(frame):
    """Per arm and iteration of a curricula frame (:func:`curricula_runs_frame`): ``runs``
    (seeds), ``questions`` (all seeds), ``valid_fraction`` (of them) and ``mean_acc`` (each
    run's mean self-consistency over its valid, scored questions, as ``metrics.json``'s
    ``mean_acc``, then the mean over seeds), baseline first.

    >>> import pandas as pd
    >>> f = pd.DataFrame({"arm": ["vd75"] * 3 + ["baseline"] * 2, "alpha": [.75] * 3 + [1.] * 2,
    ...                   "iteration": [1] * 5, "run_seed": [0, 0, 1, 0, 0],
    ...                   "valid": [True, False, True, True, True],
    ...                   "acc": [0.5, None, 1.0, 0.25, 0.75]})
    >>> curricula_summary(f).to_dict("records")  # doctest: +NORMALIZE_WHITESPACE
    [{'arm': 'baseline', 'alpha': 1.0, 'iteration': 1, 'runs': 1, 'questions': 2,
      'valid_fraction': 1.0, 'mean_acc': 0.5},
     {'arm': 'vd75', 'alpha': 0.75, 'iteration': 1, 'runs': 2, 'questions': 3,
      'valid_fraction': 0.666667, 'mean_acc': 0.75}]
    """
    import pandas as pd

    keys = ["arm", "alpha", "iteration"]
    scored = frame[frame["valid"].astype(bool) & frame["acc"].notna()]
    per_run = scored.groupby([*keys, "run_seed"])["acc"].mean().groupby(keys).mean()
    out = frame.groupby(keys).agg(runs=("run_seed", "nunique"), questions=("valid", "size"),
                                  valid_fraction=("valid", "mean"))
    out = pd.concat([out, per_run.rename("mean_acc")], axis=1).reset_index()
    out["valid_fraction"] = out["valid_fraction"].astype(float).round(6)
    out["mean_acc"] = out["mean_acc"].astype(float).round(6)
    return _sort_arms(out)


def example_questions(frame, seed: int, n: int = 2, iteration: int | None = None,
                      width: int = 200):
    """``n`` valid questions of each arm of run seed ``seed`` at ``iteration`` (default the
    last), in generation order: ``arm``, ``iteration``, ``index``, ``question`` (cut to
    ``width`` characters), ``answer``, ``acc``.

    >>> import pandas as pd
    >>> f = pd.DataFrame({"arm": ["vd75"] * 3, "alpha": [.75] * 3, "iteration": [1, 2, 2],
    ...                   "run_seed": [0] * 3, "index": [0, 0, 1], "valid": [True, False, True],
    ...                   "question": ["What is 1+1?", None, "What is " + "2*" * 20 + "2?"],
    ...                   "answer": ["2", None, "x"], "acc": [1.0, None, 0.5]})
    >>> example_questions(f, seed=0, width=12)[["iteration", "index", "question"]].values.tolist()
    [[2, 1, 'What is 2*2…']]
    """
    rows = frame[(frame["run_seed"] == seed) & frame["valid"].astype(bool)]
    t = int(frame["iteration"].max()) if iteration is None else iteration
    rows = _sort_arms(rows[rows["iteration"] == t].sort_values("index", kind="stable"))
    rows = rows.groupby("arm", sort=False).head(n).copy()
    rows["question"] = [q if len(q) <= width else q[:width - 1].rstrip() + "…"
                        for q in rows["question"]]
    return rows[["arm", "iteration", "index", "question", "answer", "acc"]].reset_index(drop=True)
