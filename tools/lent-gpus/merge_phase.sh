#!/bin/bash
# How docs/results/gpu_small_phase.json (issue 30's phase ablation) is made (run at the
# repository root; tests/test_results_experiments.py checks that it gives the committed file):
#   the baseline and VD75 runs are the main table's (docs/results/gpu_small_main.json, every
#   seed: the same params as the phase arms' except `arms`; they ran under `engine.lifetime:
#   stage` with eager engines, the phase arms under `run` with CUDA graphs: same distribution,
#   other samples), with its base checkpoint's evaluation; each run's `source` in the JSON says
#   which file it came from;
#   phase part 1 (2 x H200, 2026-11-28): train_only and gen_only, seeds 0 and 1, iterations 1-3
#   and their final solvers' evaluation (h200x2_part1/);
#   phase part 2 (2 x H200, 2026-11-28, beside annealing on the other GPU): seed 2 of both arms,
#   iterations 1-3 and their final solvers' evaluation (h200x2_part2/).
set -e
G=docs/results/archives/gpu_small_phase.zip  # read in place (vdlib.utils.archive)
OUTFILE=${1:-docs/results/gpu_small_phase.json}
. "$(dirname "$0")/shared_main_runs.sh"  # merge_ablation (with SHARED_PART, SHARED_NOTE)
merge_ablation params/gpu-small/phase_ablation.yaml gpu_small_phase 2026-11-28 \
    "train_only and gen_only: every seed, iterations 1-3 (2 x H200, two runs a GPU, CUDA graphs)" \
    "pass@1 at T = 0.7, 3 runs, GSM8K and MATH500: the final (iteration-3) solvers of every phase run; the shared runs' as in the main table" \
    "$OUTFILE" $G/h200x2_part1/gpu_small_phase.json \
    $G/h200x2_part2/gpu_small_phase.json
