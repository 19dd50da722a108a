#!/bin/bash
# How docs/results/gpu_small_main.json was made from the exports in this folder (run at
# the repository root; tests/test_results.py checks that it gives the committed file):
#   part 1 (4 x H100): seeds 0 and 1, iteration 1, and the base checkpoint's evaluation;
#   part 2 (1 x H100): seed 2, iterations 1-3 and its final solvers' evaluation; then seed 0,
#   iterations 1-3 (superseding part 1's seed 0), whose evaluation the end of the GPU time cut
#   after GSM8K (pass@1 read from the evaluation logs);
#   part 3 (4 x H200): seeds 0 and 1 again, two runs on each of GPUs 0 and 1 and one on 2 and 3;
#   the GPU time ended in iteration 3's solver phase, and vd85-seed1 froze in iteration 1's
#   scoring (a grading comparison that the alarm timeout could not stop; fixed since). Only
#   baseline-seed1 and vd75-seed1 (iterations 1-2) are taken: they supersede part 1's
#   iteration 1. Its seed 0 (iterations 1-2) repeats part 2's seed 0 on another card and is
#   kept beside it (h200x4/export.json), not merged.
set -e
G=benchmarks/results/gpu_small
OUTFILE=${1:-docs/results/gpu_small_main.json}
python benchmarks/gpu_small.py merge params/gpu-small/main_table.yaml \
    --parts $G/h100x4/export.json $G/h100x1/export_seed2.json $G/h100x1/export_seed0.json \
    "$G/h200x4/export.json::baseline-seed1,vd75-seed1" \
    --eval-log baseline 0 $G/h100x1/eval_seed0_baseline.log \
    --eval-log vd85 0 $G/h100x1/eval_seed0_vd85.log \
    --eval-log vd75 0 $G/h100x1/eval_seed0_vd75.log \
    --note completed "seeds 0 and 2: iterations 1-3 of every arm (one H100, the three arms of a seed sharing it); seed 1: iterations 1-2 of baseline and vd75 (4 x H200, the third machine hold, cut by the end of its GPU time in iteration 3), iteration 1 of vd85 (4 x H100, the first hold; its rerun in the third hold froze in iteration 1's scoring)" \
    --note solver_eval "pass@1 at T = 0.7, 3 runs: the base checkpoint (iteration 0); the final (iteration-3) solvers of seed 2 on GSM8K and MATH500; the final solvers of seed 0 on GSM8K only (MATH500 was cut by the end of the session's GPU time; read from the evaluation logs); seed 1 none" \
    --note date 2026-11-26 --out "$OUTFILE"
