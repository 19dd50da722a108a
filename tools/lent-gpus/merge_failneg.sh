#!/bin/bash
# How docs/results/gpu_small_fail_neg.json (issue 30's reward-ordering question: the proposer's
# parse-failure reward at R-Zero's -1 instead of the paper's 0) is made (run at the repository
# root; tests/test_results_experiments.py checks that it gives the committed file):
#   the baseline and VD75 runs at the paper's 0 are the main table's
#   (docs/results/gpu_small_main.json, every seed: the same params as the fail_neg arms' except
#   `arms`; they ran under `engine.lifetime: stage` with eager engines, the fail_neg arms under
#   `run` with CUDA graphs: same distribution, other samples), with its base checkpoint's
#   evaluation;
#   baseline_fail_neg and vd75_fail_neg (4 x H200, 2026-11-28, one detached hold, a lane a
#   seed, four runs on one GPU beside the annealing run): seeds 0 and 1, iterations 1-3 and
#   their final solvers' evaluation (h200x4_2026-11-28/failneg_s{0,1}/); seed 2 the same in
#   the next detached hold (2 x H200, two runs on one GPU beside two single-policy runs,
#   h200x2_2026-11-28/failneg_s2/).
set -e
G=docs/results/archives/gpu_small_fail_neg.zip  # read in place (vdlib.utils.archive)
OUTFILE=${1:-docs/results/gpu_small_fail_neg.json}
. "$(dirname "$0")/shared_main_runs.sh"  # merge_ablation (with SHARED_PART, SHARED_NOTE)
merge_ablation params/gpu-small/fail_neg.yaml gpu_small_fail_neg 2026-11-28 \
    "baseline_fail_neg and vd75_fail_neg: every seed, iterations 1-3 (seeds 0 and 1 on 4 x H200, seed 2 on 2 x H200; CUDA graphs)" \
    "pass@1 at T = 0.7, 3 runs, GSM8K and MATH500: the final (iteration-3) solvers of the fail_neg runs; the shared runs' as in the main table" \
    "$OUTFILE" $G/h200x4_2026-11-28/failneg_s0/gpu_small_fail_neg.json \
    $G/h200x4_2026-11-28/failneg_s1/gpu_small_fail_neg.json \
    $G/h200x2_2026-11-28/failneg_s2/gpu_small_fail_neg.json
