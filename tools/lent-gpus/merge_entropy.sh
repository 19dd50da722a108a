#!/bin/bash
# How docs/results/gpu_small_entropy.json (issue 30's entropy baselines, KL-Cov and Clip-Cov)
# is made (run at the repository root; tests/test_results_experiments.py checks that it gives
# the committed file):
#   the baseline and VD75 runs are the main table's (docs/results/gpu_small_main.json, every
#   seed: the same params as the entropy arms' except `arms`; they ran under `engine.lifetime:
#   stage` with eager engines, the entropy arms under `run` with CUDA graphs: same
#   distribution, other samples), with its base checkpoint's evaluation;
#   kl_cov and clip_cov (4 x H200, 2026-11-28, one detached hold, a lane a seed, two runs a
#   GPU): every seed, iterations 1-3 and their final solvers' evaluation
#   (h200x4_2026-11-28/entropy_s{0,1,2}/).
set -e
G=docs/results/archives/gpu_small_entropy.zip  # read in place (vdlib.utils.archive)
OUTFILE=${1:-docs/results/gpu_small_entropy.json}
. "$(dirname "$0")/shared_main_runs.sh"  # merge_ablation (with SHARED_PART, SHARED_NOTE)
merge_ablation params/gpu-small/entropy_baselines.yaml gpu_small_entropy 2026-11-28 \
    "kl_cov and clip_cov: every seed, iterations 1-3 (4 x H200, two runs a GPU, CUDA graphs)" \
    "pass@1 at T = 0.7, 3 runs, GSM8K and MATH500: the final (iteration-3) solvers of every entropy run; the shared runs' as in the main table" \
    "$OUTFILE" $G/h200x4_2026-11-28/entropy_s0/gpu_small_entropy.json \
    $G/h200x4_2026-11-28/entropy_s1/gpu_small_entropy.json \
    $G/h200x4_2026-11-28/entropy_s2/gpu_small_entropy.json
