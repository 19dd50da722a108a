#!/bin/bash
# A cold `make demo`, as a newcomer gets it: a fresh clone of this repository at a commit, empty
# caches (VDLIB_CACHE_DIR: the converted model and the format warm-start; MPLCONFIGDIR), a new
# .venv (pip's own download cache is kept), and the machine's load every 30 s beside it.
#
#   benchmarks/demo_timing.sh NAME COMMIT [OUT_DIR]   e.g. demo_timing.sh new HEAD /tmp/demo_timing
#
# Writes OUT_DIR/demo_NAME.log (make demo's output, then `time`), OUT_DIR/load_NAME.log and
# OUT_DIR/result_NAME.txt (exit status, wall seconds, start and end). Compare two commits back
# to back on an otherwise idle machine (issue 31: the quickstart's before/after).
set -u
NAME=$1; COMMIT=$2; OUT=${3:-/tmp/demo_timing}
REPO=$(cd "$(dirname "$0")/.." && pwd)
DIR=/tmp/demo_$NAME CACHE=/tmp/demo_cache_$NAME MPL=/tmp/demo_mpl_$NAME
mkdir -p "$OUT"
rm -rf "$DIR" "$CACHE" "$MPL"
mkdir -p "$CACHE" "$MPL"
SHA=$(git -C "$REPO" rev-parse "$COMMIT") || exit 1
git clone -q "$REPO" "$DIR" && git -C "$DIR" checkout -q "$SHA" || exit 1
export VDLIB_CACHE_DIR=$CACHE MPLCONFIGDIR=$MPL
(while true; do echo "$(date +%T) $(cat /proc/loadavg)"; sleep 30; done) > "$OUT/load_$NAME.log" &
SAMPLER=$!
START=$(date +%s)
(cd "$DIR" && time make demo) > "$OUT/demo_$NAME.log" 2>&1
RC=$?
END=$(date +%s)
kill "$SAMPLER"
echo "commit=$SHA rc=$RC wall_s=$((END - START)) start=$(date -d "@$START" +%T) end=$(date -d "@$END" +%T) cpus=$(nproc) cpu='$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)'" \
  > "$OUT/result_$NAME.txt"
cat "$OUT/result_$NAME.txt"
