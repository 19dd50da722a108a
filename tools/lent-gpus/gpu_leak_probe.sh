#!/bin/bash
# What a finished GRPO stage leaves on the GPU (issue 28): the paper's main-table params with a
# Qwen3-0.6B-shaped random-init model (Qwen3's tokenizer), one solver step through TRL's
# colocated vLLM engine on 2 GPUs (`vdlib plan --measure --skip proposer,generate,score,evaluate`:
# the other stages write their outputs without their work), then the metrics stage. After each
# stage vdlib.engines.setting.release_cuda_memory logs a warning naming the module classes that
# still hold CUDA memory; none after the solver means its trainer and rollout engine were freed.
# About 3 minutes after the wheels (gpu_small.sh install), carrying [".bench", ".q3tok"]:
#   bash tools/lent-gpus/gpu_leak_probe.sh     # $OUT/leak_probe.log, $OUT/leak_probe.json
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
. "$(dirname "$0")/gpu_env.sh"  # the wheels' site, offline, gpu_card
sed 's#proposer: Qwen/Qwen3-4B-Base#proposer: Qwen/Qwen3-0.6B-Base#' params/paper/main_table.yaml \
    > /tmp/leak_probe.yaml
card=$(gpu_card)
rm -rf /tmp/leak_probe_work
CUDA_VISIBLE_DEVICES=0 timeout ${LIMIT:-300} python3 -m vdlib.app.cli plan /tmp/leak_probe.yaml \
    --measure --dummy-weights --tokenizer .q3tok --bench-dir .bench --gpus-per-run 2 \
    --card "$card" --steps 1 --questions 16 --skip proposer,generate,score,evaluate \
    --work /tmp/leak_probe_work --out "$OUT/leak_probe.json" > "$OUT/leak_probe.log" 2>&1
rc=$?
grep -a "still allocated\|iteration 1 \|after the stage:\|vLLM shutdown" "$OUT/leak_probe.log" | cut -c1-600
exit $rc
