"""``vdlib export RUN_DIR --to DIR [--checkpoints] [--iterations 1,2] [--push-to-hub REPO]``:
a run's curricula as a Hugging Face ``datasets`` dataset with its card (:mod:`vdlib.export`).
Bad input (no run folder, an unfinished iteration, a non-empty ``DIR``, a push without a token
or with ``HF_HUB_OFFLINE=1``) fails with one line and exit status 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["add_export_command", "EXPORT_DESCRIPTION"]

EXPORT_DESCRIPTION = (
    "Write a run's curricula as a Hugging Face datasets dataset: DIR/data/iter_<t>.parquet (one "
    "split per finished iteration: every generated question with its answer, the solver's "
    "answers, their majority and acc, validity, the batch's mask seed and alpha, curriculum "
    "membership), DIR/arrow/ (save_to_disk's copy) and DIR/README.md, the dataset card whose "
    "YAML metadata holds the run's provenance (paper, arm, alpha and schedule, seed, models, "
    "iteration metrics, vdlib version, config fingerprint). Read it back with "
    "datasets.load_dataset('parquet', data_files=...), load_dataset(DIR), "
    "load_from_disk(DIR/arrow) or vdlib.export.load_curricula(DIR). RUN_DIR may lie anywhere: "
    "a run folder (config.yaml, manifest.json: every file checked against its record) or a "
    "committed extract of one (iter_<t>/questions.jsonl.gz and metrics.json; what it does not "
    "record is left out and the card says why). docs/sharing.md.")


def _iterations(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--iterations {text!r}: give iteration numbers "
                                         "separated by commas, e.g. 1,2") from None
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError(f"--iterations {text!r}: allowed: numbers >= 1, "
                                         "e.g. 1,2")
    return out


def _cmd_export(args: argparse.Namespace) -> int:
    from vdlib.export.export_run import export_run
    from vdlib.export.hub import hub_token, push_dataset
    from vdlib.export.run_folder import ExportError

    try:
        token = hub_token(args.push_to_hub) if args.push_to_hub else None  # before any work
        done = export_run(args.run_dir, args.to, checkpoints=args.checkpoints,
                          iterations=args.iterations, arrow=not args.no_arrow)
        sys.stdout.write(f"{done.folder}: " + ", ".join(
            f"{s} {n} questions" for s, n in done.splits.items()) + "\n")
        for path in done.checkpoints:
            sys.stdout.write(f"{path} (model card: README.md)\n")
        if token is not None:
            push_dataset(done.folder, args.push_to_hub, token, private=not args.public)
            sys.stdout.write(f"pushed to https://huggingface.co/datasets/{args.push_to_hub}\n")
    except ExportError as e:
        sys.stderr.write(f"vdlib export: {e}\n")
        return 2
    return 0


def add_export_command(command: Callable[..., argparse.ArgumentParser]) -> None:
    """Add ``export`` through the CLI's ``command(name, **kwargs)`` helper."""
    ex: Any = command("export", help="a run's curricula as a Hugging Face dataset with its card",
                      description=EXPORT_DESCRIPTION)
    ex.add_argument("run_dir", metavar="RUN_DIR", help="a run folder, e.g. outputs/main/vd75-seed0")
    ex.add_argument("--to", required=True, metavar="DIR",
                    help="the export folder (new, or an empty folder)")
    ex.add_argument("--checkpoints", action="store_true",
                    help="also copy each iteration's proposer and solver checkpoints to "
                    "DIR/checkpoints/iter_<t>/<role>_model/, each with a model card (README.md)")
    ex.add_argument("--iterations", type=_iterations, metavar="T,T",
                    help="only these iterations (default: every one; each must be finished)")
    ex.add_argument("--no-arrow", action="store_true",
                    help="skip DIR/arrow/ (load_from_disk's copy, about 3x the parquet files' "
                    "size): the parquet files and the card alone, e.g. to commit as evidence")
    ex.add_argument("--push-to-hub", metavar="OWNER/NAME",
                    help="then upload README.md and data/ to this Hub dataset repository "
                    "(needs HF_TOKEN in the environment and a network; refused when "
                    "HF_HUB_OFFLINE=1; the token is never written to the export)")
    ex.add_argument("--public", action="store_true",
                    help="--push-to-hub: create the repository public (default: private)")
    ex.set_defaults(func=_cmd_export)
