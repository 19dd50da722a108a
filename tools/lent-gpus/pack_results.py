"""How docs/results/archives/ was made (issue 52): the raw per-run records that GPU sessions
committed under benchmarks/results/ (one folder per machine session) packed into one zip per
experiment, each session's folder renamed for the machine and date it ran on. Ran once, at the
repository root, on the tree before the move (commit 15eabdb); kept as the record of which old
folder became which member (also in docs/results/archives/README.md):

    python tools/lent-gpus/pack_results.py     # write the zips and SHA256SUMS

A session whose lanes fed several experiments (the 4 x H200 and 2 x H200 sessions of
2026-11-28) has its README.md, session log and lanes/ copied into each experiment's archive
beside the lanes that experiment took, so each archive reads alone.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from vdlib.utils.archive import write_archive, write_sums  # noqa: E402

G = "benchmarks/results/gpu_small/"
OUT = ROOT / "docs" / "results" / "archives"
H4, H4U = "h200x4_2026-11-28/", "h200x4_2026-11-28_unfinished/"
H2 = "h200x2_2026-11-28/"
H4_SHARED = [("hold_h200x4_detached/README.md", H4 + "README.md"),
             ("hold_h200x4_detached/hold.log", H4 + "session.log"),
             ("hold_h200x4_detached/lanes/", H4 + "lanes/")]
H4U_SHARED = [("lost_hold_h200x4/README.md", H4U + "README.md"),
              ("lost_hold_h200x4/lanes/", H4U + "lanes/")]
H2_SHARED = [("hold_h200x2_detached/README.md", H2 + "README.md"),
             ("hold_h200x2_detached/hold.log", H2 + "session.log")]
HOLD_A = "holdA_h100x4_partial/"

#: archive -> [(old path under benchmarks/results/gpu_small/ (a folder ends in /), member)]
GPU_SMALL: dict[str, list[tuple[str, str]]] = {
    "gpu_small_main": [
        ("h100x4/", "h100x4/"), ("h100x1/", "h100x1/"), ("h100x1_rerun/", "h100x1_rerun/"),
        ("h200x1/", "h200x1/"), ("h200x4/", "h200x4/"),
        ("hold_h200x2_detached/main_s0/", H2 + "main_s0/"), *H2_SHARED],
    "gpu_small_anneal": [
        ("anneal_h200x2_part1/", "h200x2_part1/"),
        ("hold_h200x4_detached/anneal_s2/", H4 + "anneal_s2/"), *H4_SHARED,
        ("lost_hold_h200x4/anneal_s2/", H4U + "anneal_s2/"), *H4U_SHARED],
    "gpu_small_entropy": [
        *[(f"hold_h200x4_detached/entropy_s{s}/", f"{H4}entropy_s{s}/") for s in range(3)],
        *H4_SHARED,
        ("lost_hold_h200x4/entropy_s0/", H4U + "entropy_s0/"), *H4U_SHARED,
        (HOLD_A + "README.md", "h100x4_interim/README.md"),
        (HOLD_A + "gpu_small_entropy.json", "h100x4_interim/gpu_small_entropy.json"),
        (HOLD_A + "grid_entropy.log", "h100x4_interim/grid_entropy.log"),
        *[(f"{HOLD_A}{a}-seed{s}.log.gz", f"h100x4_interim/{a}-seed{s}.log.gz")
          for a in ("kl_cov", "clip_cov") for s in range(3)],
        *[(f"{HOLD_A}runs/{a}-seed{s}/", f"h100x4_interim/runs/{a}-seed{s}/")
          for a in ("kl_cov", "clip_cov") for s in range(3)],
        ("three_a_gpu_h200x1_probe/", "h200x1_three_runs_probe/")],
    "gpu_small_fail_neg": [
        *[(f"hold_h200x4_detached/failneg_s{s}/", f"{H4}failneg_s{s}/") for s in range(2)],
        *H4_SHARED,
        ("hold_h200x2_detached/failneg_s2/", H2 + "failneg_s2/"), *H2_SHARED],
    "gpu_small_phase": [
        ("phase_h200x2_part1/", "h200x2_part1/"), ("phase_h200x2_part2/", "h200x2_part2/"),
        (HOLD_A + "README.md", "h100x4_interim/README.md"),
        (HOLD_A + "gpu_small_phase.json", "h100x4_interim/gpu_small_phase.json"),
        (HOLD_A + "grid_phase.log", "h100x4_interim/grid_phase.log"),
        *[(f"{HOLD_A}{a}-seed{s}.log.gz", f"h100x4_interim/{a}-seed{s}.log.gz")
          for a in ("train_only", "gen_only") for s in range(3)],
        *[(f"{HOLD_A}runs/{a}-seed{s}/", f"h100x4_interim/runs/{a}-seed{s}/")
          for a in ("train_only", "gen_only") for s in range(3)],
        ("lost_holds_h200x2/README.md", "h200x2_unfinished_sessions/README.md")],
    "gpu_small_single_policy": [
        ("hold_h200_sp/", "h200x1_2026-11-29/"),
        ("hold_h200_disk_full/hold_first_wait.log", "h200x1_2026-11-29_unfinished/first_wait.log"),
        ("hold_h200_disk_full/", "h200x1_2026-11-29_unfinished/"),
        ("hold_h200x2_detached/sp0/", H2 + "sp0/"), *H2_SHARED,
        ("single_policy_h200x2_attempt1/", "h200x2_2026-11-27/"),
        ("single_policy_two_a_gpu_probe/", "h200x4_two_runs_a_gpu_probe/"),
        ("single_policy_warm_start_probe/", "h200x1_warm_start_probe/")],
}
#: the folder's scripts: to tools/lent-gpus/ or to the library (compare.py and the others)
NOT_RECORDS = (".py", ".sh")


def _tracked(prefix: str) -> list[str]:
    out = subprocess.run(["git", "ls-files", prefix], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    return out.split()


def gpu_small_members() -> dict[str, dict[str, Path]]:
    """archive -> {member: file}; every record file of gpu_small/ lands in some archive."""
    out: dict[str, dict[str, Path]] = {}
    used: set[str] = set()
    files = [f for f in _tracked(G) if not f.endswith(NOT_RECORDS)]
    for name, rules in GPU_SMALL.items():
        members = out.setdefault(name, {})
        for f in files:
            rel = f[len(G):]
            for old, new in rules:  # the first rule that matches (a file before its folder)
                if rel == old or (old.endswith("/") and rel.startswith(old)):
                    members[new + rel[len(old):] if old.endswith("/") else new] = ROOT / f
                    used.add(f)
                    break
    missed = sorted(set(files) - used)
    if missed:
        raise SystemExit(f"not archived: {missed[:5]} ({len(missed)})")
    return out


def paper_shape_members() -> dict[str, Path]:
    """paper_shape/: the 4B and 8B measurement's parts (attemptN -> runN) and leak probes."""
    pre = "benchmarks/results/paper_shape/"
    return {f[len(pre):].replace("_attempt", "_run"): ROOT / f
            for f in _tracked(pre) if not f.endswith(".sh")}


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    archives = {**gpu_small_members(), "paper_shape": paper_shape_members()}
    for name, members in archives.items():
        digest = write_archive(members, OUT / f"{name}.zip")
        print(f"{name}.zip: {len(members)} members, sha256 {digest}")
    write_sums(OUT)


if __name__ == "__main__":
    main()
