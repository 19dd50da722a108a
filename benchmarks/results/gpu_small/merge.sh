#!/bin/bash
# How docs/results/gpu_small_main.json was made from the exports in this folder (run at
# the repository root; tests/test_results.py checks that it gives the committed file):
#   part 1 (4 x H100): seeds 0 and 1, iteration 1, and the base checkpoint's evaluation;
#   part 2 (1 x H100): seed 2, iterations 1-3 and its final solvers' evaluation; then seed 0,
#   iterations 1-3 (superseding part 1's seed 0), whose evaluation the end of the GPU time cut
#   after GSM8K (pass@1 read from the evaluation logs);
#   part 3 (4 x H200): seeds 0 and 1 again, two runs on each of GPUs 0 and 1 and one on 2 and 3;
#   the GPU time ended in iteration 3's solver phase, and vd85-seed1 froze in iteration 1's
#   scoring (a grading comparison that the alarm timeout could not stop; fixed since). Nothing
#   of it is merged any more: its seed 1 is superseded by part 4, and its seed 0 (iterations
#   1-2) repeats part 2's seed 0 on another card and is kept beside it (h200x4/export.json);
#   part 4 (1 x H200): seed 1, iterations 1-3 of every arm and its final solvers' evaluation
#   (superseding parts 1 and 3 for seed 1);
#   part 5 (1 x H100): seed 0 again, for the MATH500 evaluation that part 2 lacked; the GPU time
#   ended before iteration 3's solver phase, so it has no final solvers to evaluate. It is not
#   merged (part 2's seed 0 is complete); it reproduces part 2's seed 0 on the same card
#   (h100x1_rerun/export.json: baseline and vd85 identical, vd75 within 0.004 Self-BLEU).
set -e
G=benchmarks/results/gpu_small
OUTFILE=${1:-docs/results/gpu_small_main.json}
python benchmarks/gpu_small.py merge params/gpu-small/main_table.yaml \
    --parts $G/h100x4/export.json $G/h100x1/export_seed2.json $G/h100x1/export_seed0.json \
    $G/h200x1/export.json \
    --eval-log baseline 0 $G/h100x1/eval_seed0_baseline.log \
    --eval-log vd85 0 $G/h100x1/eval_seed0_vd85.log \
    --eval-log vd75 0 $G/h100x1/eval_seed0_vd75.log \
    --note completed "every arm and seed: iterations 1-3 (seeds 0 and 2 on one H100, seed 1 on one H200; the three arms of a seed sharing the GPU)" \
    --note solver_eval "pass@1 at T = 0.7, 3 runs: the base checkpoint (iteration 0); the final (iteration-3) solvers of seeds 1 and 2 on GSM8K and MATH500; the final solvers of seed 0 on GSM8K only (MATH500 was cut by the end of the session's GPU time; read from the evaluation logs)" \
    --note date 2026-11-27 --out "$OUTFILE"
