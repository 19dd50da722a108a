#!/bin/bash
# How docs/results/gpu_small_single_policy.json (issue 30's single-policy GRPO, notebook 04:
# baseline and vd95, 3 seeds, 100 steps from the format warm-start) is made (run at the
# repository root; tests/test_results_experiments.py checks that it gives the committed file):
# each (arm, seed) from the lane that finished it, the starting checkpoint's evaluation from
# sp0 (tools/lent-gpus/gpu_single_policy.py merge; the parts must agree on the params' settings,
# warm_start included). The lanes: one detached 1 x H200 hold, a lane a seed
# (h200x1_2026-11-29/sp{0,1,2}/, docs/experiments.md). Stop 46's raw-model lane
# (h200x2_2026-11-28/sp0/, no warm-start) is the record of why the warm-start, merged nowhere.
set -e
G=docs/results/archives/gpu_small_single_policy.zip  # read in place (vdlib.utils.archive)
OUTFILE=${1:-docs/results/gpu_small_single_policy.json}
python tools/lent-gpus/gpu_single_policy.py merge params/gpu-small/single_policy.yaml \
    --parts $G/h200x1_2026-11-29/sp0/gpu_small_single_policy.json \
    $G/h200x1_2026-11-29/sp1/gpu_small_single_policy.json \
    $G/h200x1_2026-11-29/sp2/gpu_small_single_policy.json --out "$OUTFILE"
