"""One GPU session's imported folder into its experiment's evidence archive.

After ``import_lane.sh`` laid a lane out (its export, ``runs/``, logs), the session's folder
joins ``docs/results/archives/<experiment>.zip`` under a name that says the machine and the
date (``h200x2_2026-12-01``), the archive is packed again reproducibly and
``docs/results/archives/SHA256SUMS`` rewritten (tests/test_archive.py checks both). Run at the
repository root:

    python tools/lent-gpus/archive_session.py gpu_small_adaptive /tmp/import/h200x2_2026-12-01 \\
        --as h200x2_2026-12-01

then name the part in the experiment's merge script as
``docs/results/archives/gpu_small_adaptive.zip/h200x2_2026-12-01/<lane>/<experiment>.json``.
A name already in the archive is refused (the committed evidence is never overwritten), and so
is one named after a hold or an attempt (say the machine and date instead).
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from vdlib.utils.archive import Member, write_archive, write_sums  # noqa: E402

ARCHIVES = ROOT / "docs" / "results" / "archives"
BAD_NAME = re.compile(r"hold|attempt|disk_full", re.IGNORECASE)
logger = logging.getLogger("archive_session")


def add_session(experiment: str, folder: Path, name: str, archives: Path = ARCHIVES) -> str:
    """``folder``'s files as ``name/...`` in ``archives/<experiment>.zip``; its new SHA-256."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name) or BAD_NAME.search(name):
        raise SystemExit(f"--as {name!r}: one folder name of letters, digits, '_', '.', '-', "
                         "saying the machine and date (e.g. h200x2_2026-12-01), not a hold")
    if not folder.is_dir():
        raise SystemExit(f"{folder}: not a folder")
    dest = archives / f"{experiment}.zip"
    members: dict[str, Path | bytes] = {}
    if dest.exists():
        members = {m.member: m.read_bytes() for m in Member(dest).walk()}
        if (Member(dest) / name).exists():
            raise SystemExit(f"{dest.name} already has {name}/; choose another name")
    new = {f"{name}/{p.relative_to(folder).as_posix()}": p
           for p in sorted(folder.rglob("*")) if p.is_file()}
    bad = [n for n in new if BAD_NAME.search(n)]
    if bad:
        raise SystemExit(f"rename before archiving (no hold or attempt names): {bad[:3]}")
    digest = write_archive({**members, **new}, dest)
    write_sums(archives)
    logger.info("%s: %d files added as %s/ (%d members), sha256 %s", dest.name, len(new), name,
                len(members) + len(new), digest)
    return digest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("experiment", help="the archive's name, e.g. gpu_small_adaptive")
    p.add_argument("folder", type=Path, help="the session's imported folder")
    p.add_argument("--as", dest="name", required=True, help="its folder name in the archive")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    add_session(args.experiment, args.folder, args.name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
