#!/bin/bash
# How docs/results/gpu_small_main.json was made from the exports in docs/results/archives/gpu_small_main_*.zip
# (run at the repository root; tests/test_results.py checks that it gives the committed file):
#   part 1 (4 x H100): seeds 0 and 1, iteration 1, and the base checkpoint's evaluation;
#   part 2 (1 x H100): seed 2, iterations 1-3 and its final solvers' evaluation; then seed 0,
#   iterations 1-3, whose evaluation the end of the GPU time cut after GSM8K (no longer merged:
#   part 6 below replaces it; export_seed0.json and the eval_seed0_*.log files stay as the record);
#   part 3 (4 x H200): seeds 0 and 1 again, two runs on each of GPUs 0 and 1 and one on 2 and 3;
#   the GPU time ended in iteration 3's solver phase, and vd85-seed1 froze in iteration 1's
#   scoring (a grading comparison that the alarm timeout could not stop; fixed since). Nothing
#   of it is merged any more: its seed 1 is superseded by part 4, and its seed 0 (iterations
#   1-2) repeats part 2's seed 0 on another card and is kept beside it (h200x4/export.json);
#   part 4 (1 x H200): seed 1, iterations 1-3 of every arm and its final solvers' evaluation
#   (superseding parts 1 and 3 for seed 1);
#   part 5 (1 x H100): seed 0 again, for the MATH500 evaluation that part 2 lacked; the GPU time
#   ended before iteration 3's solver phase, so it has no final solvers to evaluate. It is not
#   merged; it reproduced part 2's seed 0 on the same card (h100x1_rerun/export.json: baseline
#   and vd85 identical, vd75 within 0.004 Self-BLEU);
#   part 6 (2 x H200, 2026-11-28, one detached hold, h200x2_2026-11-28/main_s0/): seed 0
#   again, every arm, iterations 1-3 and its final solvers' evaluation on GSM8K and MATH500,
#   eager under engine.lifetime stage as the other seeds ran, the three arms on one GPU. It
#   replaces part 2's seed 0 whole (records and evaluation; part 2's seed 0 is no longer
#   merged): the committed seed-0 runs started from the format warm-start of cache key v3, this
#   one from v4 (the same loss computed over a shared prompt prefix; float rounding apart the
#   same checkpoint), so it does not reproduce them record for record.
set -e
# read in place (vdlib.utils.archive); parts 1-2, 3-4 and 5-6 each in one archive
A=docs/results/archives/gpu_small_main_h100x1_h100x4.zip
B=docs/results/archives/gpu_small_main_h200x1_h200x4.zip
C=docs/results/archives/gpu_small_main_h100x1_rerun_h200x2.zip
OUTFILE=${1:-docs/results/gpu_small_main.json}
python tools/lent-gpus/gpu_small.py merge params/gpu-small/main_table.yaml \
    --parts $A/h100x4/export.json $A/h100x1/export_seed2.json $B/h200x1/export.json \
    $C/h200x2_2026-11-28/main_s0/gpu_small_main.json \
    --note completed "every arm and seed: iterations 1-3 (seed 2 on one H100, seeds 1 and 0 on one H200 each; the three arms of a seed sharing the GPU; seed 0 rerun 2026-11-28 from the format warm-start of cache key v4, seeds 1 and 2 from v3)" \
    --note solver_eval "pass@1 at T = 0.7, 3 runs, GSM8K and MATH500: the base checkpoint (iteration 0) and the final (iteration-3) solvers of every arm and seed" \
    --note date 2026-11-28 --out "$OUTFILE"
