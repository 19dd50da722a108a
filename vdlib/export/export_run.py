"""``vdlib export RUN_DIR --to DIR``: one run folder into a shareable export folder.

``DIR`` receives::

    README.md                       the dataset card (YAML metadata: the run's provenance)
    data/iter_<t>.parquet           one split per finished iteration
    arrow/                          the same DatasetDict as save_to_disk wrote it (not with
                                    --no-arrow, e.g. for an export committed as evidence)
    checkpoints/iter_<t>/<role>_model/README.md   with --checkpoints: each checkpoint and
                                                  its model card

It is written whole or not at all: into a hidden folder beside ``DIR``, renamed onto ``DIR``
at the end (an existing empty ``DIR`` is replaced; a non-empty one is refused). Checkpoints are
copied after their files are checked against the run's stage records (when the run has them).
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from vdlib.config import layout
from vdlib.export.cards import dataset_card, model_card
from vdlib.export.curricula import build_dataset, write_dataset
from vdlib.export.read_back import CARD_FILE
from vdlib.export.run_folder import ExportError, RunFolder, read_run_folder

__all__ = ["Export", "export_run", "check_destination", "CHECKPOINTS_DIR"]

logger = logging.getLogger(__name__)

#: the checkpoints' folder inside an export
CHECKPOINTS_DIR = "checkpoints"


@dataclass
class Export:
    """What :func:`export_run` wrote: the folder, its splits and rows, the checkpoints."""

    folder: Path
    splits: dict[str, int]
    checkpoints: list[Path]


def check_destination(to: str | os.PathLike) -> Path:
    """``to`` as a Path if an export may be written there (absent, or an empty folder); an
    :class:`ExportError` otherwise."""
    to = Path(to)
    if os.path.lexists(to):
        if to.is_symlink() or not to.is_dir():
            raise ExportError(f"--to {to} exists and is not a folder; give a new folder")
        if any(to.iterdir()):
            raise ExportError(f"--to {to} exists and is not empty; give a new folder (an "
                              "export never writes over another)")
    return to


def _previous(run: RunFolder, t: int, role: str) -> str:
    if t > 1:
        return layout.role_model_dir("", t - 1, role).as_posix() + " of this run"
    model = ((run.config or {}).get("model") or {})
    base = model.get(role) or model.get("proposer")
    warm = ((run.config or {}).get("warm_start") or {}).get("mode")
    if base is None:
        return "the run's starting checkpoint (not recorded in the run folder)"
    return f"the run's starting {role}: {base} (warm_start.mode: {warm})"


def _check_checkpoint(run: RunFolder, records: dict, folder: Path) -> None:
    if "file_records" in run.not_recorded:
        return
    from vdlib.runs.run_state import check_record

    prefix = folder.name + "/"
    mine = {k: v for k, v in records.items() if k.startswith(prefix)}
    if not mine:
        raise ExportError(f"{folder} has no record in the run's manifest: its stage did not "
                          "finish; resume the run (vdlib run), then export")
    why = check_record(folder.parent, mine)
    if why is not None:
        raise ExportError(f"{why}; the checkpoint differs from its record, refused")


def _copy_checkpoints(run: RunFolder, tmp: Path) -> list[Path]:
    out = []
    for it in run.iterations:
        for role, src in sorted(it.checkpoints.items()):
            _check_checkpoint(run, it.records, src)
            rel = layout.role_model_dir(CHECKPOINTS_DIR, it.t, role)
            dest = tmp / rel
            shutil.copytree(src, dest, symlinks=False)
            (dest / CARD_FILE).write_text(model_card(run, it, role, _previous(run, it.t, role)),
                                          encoding="utf-8")
            out.append(rel)
    return out


def export_run(run_dir: str | os.PathLike, to: str | os.PathLike, *, checkpoints: bool = False,
               iterations: list[int] | None = None, arrow: bool = True) -> Export:
    """Export the run folder ``run_dir`` into ``to`` (see the module docstring; ``arrow``:
    write the ``load_from_disk`` copy too). Raises :class:`ExportError` (one line) for a bad
    run folder or destination, before anything is written."""
    to = check_destination(to)
    run = read_run_folder(run_dir, iterations)
    if checkpoints and not any(it.checkpoints for it in run.iterations):
        raise ExportError(f"--checkpoints: {run.path} holds no checkpoint (iter_<t>/<role>_model/"
                          "); an extract keeps none. Export without --checkpoints")
    dataset = build_dataset(run)
    to.parent.mkdir(parents=True, exist_ok=True)
    tmp = to.parent / f".{to.name}.exporting-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        write_dataset(dataset, tmp, arrow)
        (tmp / CARD_FILE).write_text(dataset_card(run, dataset, arrow), encoding="utf-8")
        copied = _copy_checkpoints(run, tmp) if checkpoints else []
        if to.is_dir():
            to.rmdir()  # empty (check_destination); a file appearing since fails here
        os.replace(tmp, to)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    splits = {name: len(ds) for name, ds in dataset.items()}
    logger.info("exported %s: %s -> %s", run.name, splits, to)
    return Export(to, splits, [to / p for p in copied])
