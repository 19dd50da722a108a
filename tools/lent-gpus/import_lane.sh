#!/bin/bash
# One lane of a GPU hold (tools/lent-gpus/gpu_pair.sh) into a committed export folder, as the phase
# and annealing parts are: the last command's bundle holds the lane's export JSON, status, run
# folders and the run logs (they grow over the hold's commands, so the last is whole); each
# command's bundle adds its launcher log. A detached hold (gpu_pair.sh start / wait) brings
# each lane back as <lane>.tgz (its folder and log): give its last wait's folder alone, as
# its grid ran once. Run at the repository root:
#   bash tools/lent-gpus/import_lane.sh LANE DEST /work/.device/N1 /work/.device/N2 ...
# (the hold's commands' files_at folders in order; DEST e.g.
# /tmp/import/h200x2_2026-12-01/entropy_s0; then archive_session.py). Writes DEST/: <experiment>.json,
# gpu_small_status.txt, runs/ (no logs), <run>.log.gz, eval.log.gz, grid_cmd<k>.log,
# prepare.log (a single-policy lane, SCRIPT=gpu_single_policy.sh: the export, train_<run>.log.gz
# and eval_<run>.log.gz, and each run's last step instead of stage seconds); then write DEST/README.md (what ran, the commands, the stage seconds it prints).
set -eo pipefail
[ $# -ge 3 ] || { echo "usage: import_lane.sh LANE DEST DEVICE_DIR..."; exit 2; }
lane=$1 dest=$2
shift 2
[ -e "$dest" ] && { echo "import_lane: $dest exists; move it aside first"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
k=0
for d in "$@"; do
    k=$((k + 1))
    b=$d/$lane/bundle.tgz
    if [ -f "$d/$lane.tgz" ]; then  # a detached hold's wait packs the lane's folder and log
        mkdir -p "$tmp/pack$k"
        tar xzf "$d/$lane.tgz" -C "$tmp/pack$k"
        b=$tmp/pack$k/$lane/bundle.tgz
    fi
    [ -f "$b" ] || { echo "import_lane: no $lane/bundle.tgz in $d"; exit 1; }
    mkdir -p "$tmp/$k"
    tar xzf "$b" -C "$tmp/$k"
done
last=$tmp/$k
ls "$last"/gpu_small_*.json > /dev/null 2>&1 || { echo "import_lane: no export in the last bundle"; exit 1; }
mkdir -p "$dest"
cp "$last"/gpu_small_*.json "$dest/"
[ -f "$last/gpu_small_status.txt" ] && cp "$last/gpu_small_status.txt" "$dest/"
if [ -d "$last/runs" ]; then  # a co-evolution lane (gpu_small.sh); a single-policy lane has none
    (cd "$last/runs" && find . -type f ! -name '*.log' -print0) | while IFS= read -r -d '' f; do
        mkdir -p "$dest/runs/$(dirname "$f")"
        cp "$last/runs/$f" "$dest/runs/$f"
    done
fi
for f in "$last"/runs/*.log "$last"/train_*.log "$last"/eval_*.log; do  # run logs; single policy's
    [ -f "$f" ] && gzip -9c "$f" > "$dest/$(basename "$f").gz"
done
ls "$last"/gpu_small_eval_*.log > /dev/null 2>&1 && cat "$last"/gpu_small_eval_*.log | gzip -9 > "$dest/eval.log.gz"
for i in $(seq 1 "$k"); do
    [ -f "$tmp/$i/gpu_small_grid.log" ] && cp "$tmp/$i/gpu_small_grid.log" "$dest/grid_cmd$i.log"
done
for i in $(seq 1 "$k"); do  # the shared warm-start's log, from the command that built it
    [ -f "$tmp/$i/gpu_small_prepare.log" ] && { cp "$tmp/$i/gpu_small_prepare.log" "$dest/prepare.log"; break; }
done
if [ ! -d "$dest/runs" ]; then  # single policy: each run's last step and its pace (tqdm's line)
    echo "import_lane: $lane -> $dest ($(du -sh "$dest" | cut -f1)); steps:"
    for f in "$last"/train_*.log; do
        [ -f "$f" ] && echo "$(basename "$f" .log): $(tr '\r' '\n' < "$f" | grep -E '[0-9]+/[0-9]+ \[' | tail -1)"
    done
    exit 0
fi
echo "import_lane: $lane -> $dest ($(du -sh "$dest" | cut -f1)); stage seconds:"
python3 - "$dest" <<'EOF'
import json, sys
from pathlib import Path
print("| run | iteration | proposer | generate | score | solver | all |")
print("|---|---|---|---|---|---|---|")
for t in sorted(Path(sys.argv[1], "runs").glob("*/iter_*/timing.json"),
                key=lambda p: (p.parent.parent.name, int(p.parent.name.split("_")[1]))):
    d = json.loads(t.read_text())
    cells = " | ".join(f"{d.get(k, 0):.0f}" for k in ("proposer", "generate", "score", "solver"))
    print(f"| {t.parent.parent.name} | {t.parent.name.split('_')[1]} | {cells} | "
          f"{sum(d.values()):.0f} |")
EOF
