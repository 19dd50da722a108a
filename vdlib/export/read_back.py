"""An exported run read back, for notebooks: the dataset, one pandas frame of every split, and
the card's provenance. Reads the parquet files (the layout the Hub serves), so a folder
downloaded from the Hub reads the same as one ``vdlib export`` wrote here.

    from vdlib.export import load_curricula, curricula_frame, read_card
    ds = load_curricula("exports/vd75-seed0")          # DatasetDict: iter_1, iter_2, ...
    frame = curricula_frame("exports/vd75-seed0")      # every split, one row per question
    read_card("exports/vd75-seed0")["vdlib"]["arm"]    # the provenance
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from vdlib.export.cards import front_matter
from vdlib.export.curricula import PARQUET_DIR, features
from vdlib.export.run_folder import ExportError

__all__ = ["load_curricula", "curricula_frame", "read_card", "CARD_FILE"]

CARD_FILE = "README.md"


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
