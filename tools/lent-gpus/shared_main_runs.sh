# Sourced by the merge scripts of issue 30's ablations (merge_phase.sh, merge_anneal.sh,
# merge_entropy.sh, merge_failneg.sh): the main table's baseline and VD75 runs that every
# ablation compares with (every seed, shared, not rerun) as a --parts entry, the note the merged
# file carries about them, and merge_ablation, the merge every one of those scripts runs.
SHARED_PART="docs/results/gpu_small_main.json::baseline-seed0,baseline-seed1,baseline-seed2,vd75-seed0,vd75-seed1,vd75-seed2"
SHARED_NOTE="baseline and vd75 (every seed): the main table's runs (docs/results/gpu_small_main.json; engine.lifetime stage, eager; seed 0 from the format warm-start of cache key v4 as here, seeds 1 and 2 from v3, the same recipe but for float rounding: v4 computes the same loss over a shared prompt prefix), not rerun"
# merge_ablation PARAMS EXPERIMENT DATE COMPLETED SOLVER_EVAL OUTFILE PART...: the shared runs
# and the ablation's own parts into OUTFILE, with the notes every ablation file carries
merge_ablation() {
    local params=$1 experiment=$2 date=$3 completed=$4 solver_eval=$5 out=$6
    shift 6
    # MERGE_OPTS: further merge options (e.g. --rename-arm, --cov-from-runs), word-split
    python tools/lent-gpus/gpu_small.py merge "$params" --parts "$SHARED_PART" "$@" $MERGE_OPTS \
        --note experiment "$experiment" \
        --note params "$params" \
        --note shared_runs "$SHARED_NOTE" \
        --note completed "$completed" \
        --note solver_eval "$solver_eval" \
        --note date "$date" --out "$out"
}
