#!/bin/bash
# The engine-lifetime GPU session (issue 26), one step per `device` call, on a machine that
# received the wheel parts (gpu_vllm_session.sh install), with .bench/ (GSM8K test file) carried:
#   bash tools/lent-gpus/gpu_lifetime.sh prepare        # the format warm-start, cached per machine
#   bash tools/lent-gpus/gpu_lifetime.sh profile run    # benchmarks/iteration_profile.py, new lifetime
#   bash tools/lent-gpus/gpu_lifetime.sh profile stage  # the old lifetime (resume: the same command)
#   bash tools/lent-gpus/gpu_lifetime.sh profile run graphs  # the run lifetime with CUDA graphs
#   bash tools/lent-gpus/gpu_lifetime.sh fresh          # tests/test_engine_lifetime_gpu.py + gpu tests
#   bash tools/lent-gpus/gpu_lifetime.sh questions stage  # iteration 1's questions (lifetime_questions.py)
#   bash tools/lent-gpus/gpu_lifetime.sh questions run    # the same, new lifetime; then on CPU:
#     python benchmarks/lifetime_questions.py compare Q/stage Q/run --out ....json
# Every step copies benchmarks/results/iteration_profile_<card>.json and its logs into $OUT.
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
. "$(dirname "$0")/gpu_env.sh"  # the wheels' site, offline, gpu_card
card=$(gpu_card)
P=params/gpu-small/main_table.yaml
J=/tmp/iteration_profile_$card.json
case $1 in
prepare)
    python3 -c "
from vdlib.config.experiment import load_params
from vdlib.loop.model_store import ModelStore
cfg = load_params('$P', {'output_dir': '/tmp/prep'})
print(ModelStore(cfg).base(cfg.solver_model, 'base'))" > "$OUT/prepare_$card.log" 2>&1
    rc=$?; tail -2 "$OUT/prepare_$card.log"; exit $rc
    ;;
profile)
    timeout ${LIMIT:-540} python3 benchmarks/iteration_profile.py $P --lifetime "$2" \
        ${3:+--graphs} --work /tmp/ip --out "$J" > "$OUT/iteration_profile_${2}${3:+_$3}_$card.log" 2>&1
    rc=$?
    cp "$J" "$OUT/iteration_profile_$card.json" 2>/dev/null
    cp /tmp/ip/$2${3:++graphs}/profile_partial.json "$OUT/profile_partial_$2${3:+_$3}.json" 2>/dev/null
    grep -v "INFO 1[01]-\|WARNING 1[01]-\|Processed prompts\|it/s\]" "$OUT/iteration_profile_${2}${3:+_$3}_$card.log" | tail -25
    exit $rc
    ;;
questions)
    timeout ${LIMIT:-560} python3 benchmarks/lifetime_questions.py run $P --lifetime "$2" \
        --work /tmp/lq --out "$OUT/lifetime_questions" > "$OUT/lifetime_questions_${2}_$card.log" 2>&1
    rc=$?
    grep -v "INFO 1[01]-\|WARNING 1[01]-\|Processed prompts\|it/s\]" "$OUT/lifetime_questions_${2}_$card.log" | tail -8
    exit $rc
    ;;
fresh)
    export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
    python3 -m pytest -m gpu -p no:cacheprovider -o addopts="" -rA -x \
        tests/test_engine_lifetime_gpu.py ${MORE_TESTS} 2>&1 | tee "$OUT/engine_lifetime_gpu_tests_$card.log" \
        | grep -v "INFO 1[01]-\|WARNING 1[01]-\|Processed prompts" | tail -30
    ;;
esac
