#!/usr/bin/env bash
# Export the 9 committed gpu-small main-table runs (baseline, vd85, vd75 x seeds 0-2, read in
# place from the evidence zips) into docs/results/curricula/gpu_small_main/<arm>-seed<s>/ with
# `vdlib export --no-arrow` (parquet + dataset card). Run from the repository root; an existing
# export is refused (vdlib export never writes over one): remove the folder first to remake it.
#   bash docs/results/curricula/export_gpu_small_main.sh [OUT]
set -euo pipefail
Z=docs/results/archives
OUT=${1:-docs/results/curricula/gpu_small_main}
VDLIB=${VDLIB:-vdlib}
for r in gpu_small_main_h100x1_rerun_h200x2.zip/h200x2_2026-11-28/main_s0/runs/{baseline,vd85,vd75}-seed0 \
         gpu_small_main_h200x1_h200x4.zip/h200x1/{baseline,vd85,vd75}-seed1 \
         gpu_small_main_h100x1_h100x4.zip/h100x1/{baseline,vd85,vd75}-seed2; do
  HF_HUB_OFFLINE=1 "$VDLIB" export "$Z/$r" --to "$OUT/$(basename "$r")" --no-arrow
done
