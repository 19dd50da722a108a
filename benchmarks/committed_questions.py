"""The committed gpu-small question files behind docs/results/*.json, run by run.

Each experiment's merge script (``tools/lent-gpus/merge*.sh``) names the parts it merges; the
question files of those parts' runs are below, read in place from the experiment's archive
(``docs/results/archives/<experiment>.zip``, or the ``<experiment>_*.zip`` that holds the
session: :func:`vdlib.utils.archive.session_member`). The baseline and VD75
runs of the entropy, fail_neg, anneal and phase experiments are the main table's (shared, not
rerun), so each run appears once, under the experiment that ran it. Superseded runs
(``h100x4``, ``h200x4``, ``*_unfinished``, seeds 0 and 1 of ``h100x1``, ``h100x1_rerun``) are
left out: no results JSON merges them.

:func:`runs` yields ``(experiment, arm, seed, run_dir)``; :func:`iterations` the
``(iteration, questions.jsonl.gz)`` of one run; :func:`read_questions` the records.
"""

from __future__ import annotations

import gzip
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from vdlib.utils.archive import Member, session_member  # noqa: E402

ARCHIVES = ROOT / "docs/results/archives"
#: experiment -> run folders (members of docs/results/archives/<experiment>[_*].zip), as merged
RUN_DIRS: dict[str, list[str]] = {
    # merge.sh: seed 0 rerun on 2 x H200 (2026-11-28), seed 1 on one H200, seed 2 on an H100
    "gpu_small_main": [f"{where}/{arm}-seed{s}"
                       for s, where in ((0, "h200x2_2026-11-28/main_s0/runs"), (1, "h200x1"),
                                        (2, "h100x1"))
                       for arm in ("baseline", "vd75", "vd85")],
    # merge_entropy.sh (the 2026-11-28 KL-Cov runs are merged as the arm kl_cov_inert)
    "gpu_small_entropy": [f"h200x4_2026-11-28/entropy_s{s}/runs/{arm}-seed{s}"
                          for s in (0, 1, 2) for arm in ("kl_cov", "clip_cov")]
    + [f"h200x1_2026-12-02/kl_cov_s{s}/runs/kl_cov-seed{s}" for s in (0, 1, 2)],
    # merge_failneg.sh
    "gpu_small_fail_neg": [f"{where}/runs/{arm}-seed{s}"
                           for s, where in ((0, "h200x4_2026-11-28/failneg_s0"),
                                            (1, "h200x4_2026-11-28/failneg_s1"),
                                            (2, "h200x2_2026-11-28/failneg_s2"))
                           for arm in ("baseline_fail_neg", "vd75_fail_neg")],
    # merge_anneal.sh
    "gpu_small_anneal": ["h200x2_part1/runs/anneal-seed0",
                         "h200x2_part1/runs/anneal-seed1",
                         "h200x4_2026-11-28/anneal_s2/runs/anneal-seed2"],
    # merge_phase.sh
    "gpu_small_phase": [f"h200x2_part{1 if s < 2 else 2}/runs/{arm}-seed{s}"
                        for s in (0, 1, 2) for arm in ("gen_only", "train_only")],
}

_RUN = re.compile(r"(?P<arm>[a-z0-9_]+)-seed(?P<seed>\d+)")
#: run folders whose arm the merge renamed (``merge_entropy.sh --rename-arm``): folder prefix ->
#: (arm in the folder's name, arm in docs/results)
RENAMED = {("gpu_small_entropy", "h200x4_2026-11-28/"): ("kl_cov", "kl_cov_inert")}


def runs(experiments: list[str] | None = None) -> Iterator[tuple[str, str, int, Member]]:
    """``(experiment, arm, seed, run_dir)`` of every committed run (of ``experiments``)."""
    for experiment, dirs in RUN_DIRS.items():
        if experiments is not None and experiment not in experiments:
            continue
        for d in dirs:
            m = _RUN.fullmatch(Path(d).name)
            assert m, d
            path = session_member(ARCHIVES, experiment, d)
            if not path.is_dir():
                raise FileNotFoundError(f"{path}: a committed run folder is missing")
            arm = m["arm"]
            for (exp, prefix), (was, now) in RENAMED.items():
                if exp == experiment and d.startswith(prefix) and arm == was:
                    arm = now
            yield experiment, arm, int(m["seed"]), path


def iterations(run_dir: Member) -> list[tuple[int, Member]]:
    """``(t, iter_<t>/questions.jsonl.gz)`` of a run, by t."""
    out = []
    for f in run_dir.glob("iter_*/questions.jsonl.gz"):
        out.append((int(f.parent.name.removeprefix("iter_")), f))
    return sorted(out)


def read_questions(path: Path | Member) -> list[dict]:
    """The records of a gzipped ``questions.jsonl``."""
    with path.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def results_records(experiment: str) -> dict[tuple[str, int, int], dict]:
    """``(arm, seed, iteration) -> record`` of ``docs/results/<experiment>.json``."""
    data = json.loads((ROOT / "docs/results" / f"{experiment}.json").read_text())
    return {(r["arm"], r["seed"], r["iteration"]): r for r in data["records"]
            if r.get("seed") is not None}
