# Sourced by the merge scripts of issue 30's ablations (merge_phase.sh, merge_anneal.sh): the
# main table's baseline and VD75 runs that every ablation compares with (every seed, shared,
# not rerun) as a --parts entry, and the note the merged file carries about them.
SHARED_PART="docs/results/gpu_small_main.json::baseline-seed0,baseline-seed1,baseline-seed2,vd75-seed0,vd75-seed1,vd75-seed2"
SHARED_NOTE="baseline and vd75 (every seed): the main table's runs (docs/results/gpu_small_main.json; engine.lifetime stage, eager; format warm-start of cache key v3, the same recipe as v4 here but for float rounding: v4 computes the same loss over a shared prompt prefix), not rerun"
