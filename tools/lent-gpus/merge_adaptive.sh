#!/bin/bash
# How docs/results/gpu_small_adaptive.json (issue 54's adaptive alpha schedule, beyond the paper)
# is made (run at the repository root; tests/test_results_experiments.py checks that it gives the
# committed file):
#   the baseline and VD75 runs are the main table's (docs/results/gpu_small_main.json, every
#   seed, shared_main_runs.sh) and so are the VD85 runs (fixed alpha 0.85: the frontier the
#   controller moves on), the anneal runs the annealing ablation's
#   (docs/results/gpu_small_anneal.json, every seed), none rerun;
#   adaptive (1 x H200, 2026-12-02, a detached hold of three lanes, CUDA graphs): seeds 0-2,
#   iterations 1-3 and their final solvers' evaluation (h200x1_2026-12-02/adaptive_s<seed>/).
set -e
G=docs/results/archives/gpu_small_adaptive.zip/h200x1_2026-12-02  # read in place (vdlib.utils.archive)
OUTFILE=${1:-docs/results/gpu_small_adaptive.json}
. "$(dirname "$0")/shared_main_runs.sh"  # merge_ablation (with SHARED_PART, SHARED_NOTE)
merge_ablation params/gpu-small/adaptive.yaml gpu_small_adaptive 2026-12-02 \
    "adaptive: every seed, iterations 1-3 (one H200, three lanes; CUDA graphs); vd85: the main table's runs, anneal: the annealing ablation's (docs/results/gpu_small_anneal.json), not rerun" \
    "pass@1 at T = 0.7, 3 runs, GSM8K and MATH500: the final (iteration-3) solvers of the adaptive runs; the shared runs' as in their files" \
    "$OUTFILE" "docs/results/gpu_small_main.json::vd85-seed0,vd85-seed1,vd85-seed2" \
    "docs/results/gpu_small_anneal.json::anneal-seed0,anneal-seed1,anneal-seed2" \
    $G/adaptive_s0/gpu_small_adaptive.json $G/adaptive_s1/gpu_small_adaptive.json \
    $G/adaptive_s2/gpu_small_adaptive.json
