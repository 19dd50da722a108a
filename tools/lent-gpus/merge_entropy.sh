#!/bin/bash
# How docs/results/gpu_small_entropy.json (the entropy baselines, KL-Cov and Clip-Cov; issues 30
# and 51) is made (run at the repository root; tests/test_results_experiments.py checks that it
# gives the committed file):
#   the baseline and VD75 runs are the main table's (docs/results/gpu_small_main.json, every
#   seed: the same params as the entropy arms' except `arms`; they ran under `engine.lifetime:
#   stage` with eager engines, the entropy arms under `run` with CUDA graphs: same
#   distribution, other samples), with its base checkpoint's evaluation;
#   clip_cov and kl_cov_inert (4 x H200, 2026-11-28, one detached session, a lane a seed, two
#   runs a GPU; params/gpu-small/entropy_baselines.yaml): every seed, iterations 1-3 and their
#   final solvers' evaluation (h200x4_2026-11-28/entropy_s{0,1,2}/). Those KL-Cov runs
#   recomputed the old log-probs padded (now cov_old_logprobs: recompute) and their penalty
#   never acted, so they enter as the arm kl_cov_inert; their records, exported before the
#   activity fields existed, get them from their runs' proposer_train.json (--cov-from-runs);
#   kl_cov, the acting arm (1 x H200, 2026-12-02, a lane a seed, three runs on the GPU;
#   params/gpu-small/entropy_kl_cov.yaml, cov_old_logprobs: packed): every seed, iterations
#   1-3 and their final solvers' evaluation (h200x1_2026-12-02/kl_cov_s{0,1,2}/).
set -e
G=docs/results/archives/gpu_small_entropy.zip  # read in place (vdlib.utils.archive)
OUTFILE=${1:-docs/results/gpu_small_entropy.json}
. "$(dirname "$0")/shared_main_runs.sh"  # merge_ablation (with SHARED_PART, SHARED_NOTE)
OLD=$G/h200x4_2026-11-28
NEW=$G/h200x1_2026-12-02
MERGE_OPTS="--cov-from-runs"
for s in 0 1 2; do
    MERGE_OPTS="$MERGE_OPTS --rename-arm $OLD/entropy_s$s/gpu_small_entropy.json kl_cov kl_cov_inert"
done
merge_ablation params/gpu-small/entropy_baselines.yaml gpu_small_entropy 2026-12-02 \
    "clip_cov and kl_cov_inert: every seed, iterations 1-3 (4 x H200, 2026-11-28, two runs a GPU, CUDA graphs); kl_cov (acting, params/gpu-small/entropy_kl_cov.yaml): every seed, iterations 1-3 (1 x H200, 2026-12-02, three runs on the GPU, CUDA graphs)" \
    "pass@1 at T = 0.7, 3 runs, GSM8K and MATH500: the final (iteration-3) solvers of every entropy run; the shared runs' as in the main table" \
    "$OUTFILE" $OLD/entropy_s0/gpu_small_entropy.json \
    $OLD/entropy_s1/gpu_small_entropy.json \
    $OLD/entropy_s2/gpu_small_entropy.json \
    $NEW/kl_cov_s0/gpu_small_entropy_kl_cov.json \
    $NEW/kl_cov_s1/gpu_small_entropy_kl_cov.json \
    $NEW/kl_cov_s2/gpu_small_entropy_kl_cov.json
