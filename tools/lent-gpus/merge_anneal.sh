#!/bin/bash
# How docs/results/gpu_small_anneal.json (issue 30's annealed-alpha ablation) is made (run at
# the repository root; tests/test_results_experiments.py checks that it gives the committed file):
#   the baseline and VD75 runs are the main table's (docs/results/gpu_small_main.json, every
#   seed: the same params as the anneal arm's except `arms`; they ran under `engine.lifetime:
#   stage` with eager engines, the anneal runs under `run` with CUDA graphs: same distribution,
#   other samples), with its base checkpoint's evaluation;
#   anneal part 1 (2 x H200, 2026-11-28, beside the phase ablation's seed 2 on the other GPU):
#   seeds 0 and 1, iterations 1-3 and their final solvers' evaluation (h200x2_part1/);
#   anneal part 2 (4 x H200, 2026-11-28, a detached hold beside the entropy baselines and
#   fail_neg): seed 2, iterations 1-3 and its final solver's evaluation
#   (h200x4_2026-11-28/anneal_s2/).
set -e
G=docs/results/archives/gpu_small_anneal.zip  # read in place (vdlib.utils.archive)
OUTFILE=${1:-docs/results/gpu_small_anneal.json}
. "$(dirname "$0")/shared_main_runs.sh"  # merge_ablation (with SHARED_PART, SHARED_NOTE)
merge_ablation params/gpu-small/annealing.yaml gpu_small_anneal 2026-11-28 \
    "anneal: every seed, iterations 1-3 (seeds 0 and 1 on 2 x H200, seed 2 on 4 x H200; CUDA graphs)" \
    "pass@1 at T = 0.7, 3 runs, GSM8K and MATH500: the final (iteration-3) solvers of the anneal runs; the shared runs' as in the main table" \
    "$OUTFILE" $G/h200x2_part1/gpu_small_anneal.json \
    $G/h200x4_2026-11-28/anneal_s2/gpu_small_anneal.json
