#!/bin/bash
# How docs/results/gpu_small_main.json was made from the three exports in this folder (run at
# the repository root; tests/test_results.py checks that it gives the committed file):
#   part 1 (4 x H100): seeds 0 and 1, iteration 1, and the base checkpoint's evaluation;
#   part 2 (1 x H100): seed 2, iterations 1-3 and its final solvers' evaluation; then seed 0,
#   iterations 1-3 (superseding part 1's seed 0), whose evaluation the end of the GPU time cut
#   after GSM8K (pass@1 read from the evaluation logs).
set -e
G=benchmarks/results/gpu_small
OUTFILE=${1:-docs/results/gpu_small_main.json}
python benchmarks/gpu_small.py merge params/gpu-small/main_table.yaml \
    --parts $G/h100x4/export.json $G/h100x1/export_seed2.json $G/h100x1/export_seed0.json \
    --eval-log baseline 0 $G/h100x1/eval_seed0_baseline.log \
    --eval-log vd85 0 $G/h100x1/eval_seed0_vd85.log \
    --eval-log vd75 0 $G/h100x1/eval_seed0_vd75.log \
    --note completed "seeds 0 and 2: iterations 1-3 of every arm (one H100, the three arms of a seed sharing it); seed 1: iteration 1 only (4 x H100, the first machine hold; its checkpoints were lost with that machine)" \
    --note solver_eval "pass@1 at T = 0.7, 3 runs: the base checkpoint (iteration 0); the final (iteration-3) solvers of seed 2 on GSM8K and MATH500; the final solvers of seed 0 on GSM8K only (MATH500 was cut by the end of the session's GPU time; read from the evaluation logs); seed 1 none" \
    --note date 2026-11-26 --out "$OUTFILE"
