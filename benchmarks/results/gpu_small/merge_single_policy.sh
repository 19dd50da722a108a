#!/bin/bash
# How docs/results/gpu_small_single_policy.json (issue 30's single-policy GRPO, notebook 04:
# baseline and vd95, 3 seeds, 100 steps from the format warm-start) is made (run at the
# repository root; tests/test_results_experiments.py checks that it gives the committed file):
# each (arm, seed) from the lane that finished it, the starting checkpoint's evaluation from
# sp0 (benchmarks/gpu_single_policy.py merge; the parts must agree on the params' settings,
# warm_start included). The lanes: one detached 1 x H200 hold, a lane a seed
# (hold_h200_sp/sp{0,1,2}/, docs/experiments.md). Stop 46's raw-model lane
# (hold_h200x2_detached/sp0/, no warm-start) is the record of why the warm-start, merged nowhere.
set -e
G=benchmarks/results/gpu_small
OUTFILE=${1:-docs/results/gpu_small_single_policy.json}
python benchmarks/gpu_single_policy.py merge params/gpu-small/single_policy.yaml \
    --parts $G/hold_h200_sp/sp0/gpu_small_single_policy.json \
    $G/hold_h200_sp/sp1/gpu_small_single_policy.json \
    $G/hold_h200_sp/sp2/gpu_small_single_policy.json --out "$OUTFILE"
