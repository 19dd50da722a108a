#!/bin/bash
# The paper's shapes on the paper's topology (issue 28): `vdlib plan --measure` of
# params/paper/main_table.yaml (Qwen3-4B shape) and main_table@8b.yaml (8B) with dummy weights
# and Qwen3's real tokenizer, on 2 GPUs (a vLLM server on each, the trainer on GPU 0), a few
# steps of every stage at the paper's batch shapes, every output at its 2,048-token limit.
# Before the session, on this machine (both folders are gitignored and travel with `carry`):
#   ../shared/tools/qwen3-tokenizer .q3tok
#   mkdir -p .bench && cp -r ../shared/benchmarks/{gsm8k,math500} .bench/
# On a 2-GPU machine that received the wheel parts (gpu_small.sh install), carrying
# [".q3tok", ".bench"] on every command:
#   bash tools/lent-gpus/gpu_paper_shape.sh 4b   # repeat the same command until it exits 0 or 1:
#   bash tools/lent-gpus/gpu_paper_shape.sh 8b   # 75 = paused at the deadline, it goes on from there
# SKIP=proposer,... measures the other stages again (their outputs written without their work,
# vdlib plan --measure --skip), e.g. to rerun a stage whose peak memory was not clean.
# Each command stops before a stage that would start after END (default: 500 s from its start)
# and leaves its entry marked `partial`; the next command resumes the run folder and the
# counters. The entries come back in $OUT (cost_entries/qwen3-<size>_<card>_2gpu.json, to commit
# under benchmarks/results/cost_entries/), with the log; then, on CPU:
#   python benchmarks/paper_shape.py benchmarks/results/cost_entries/qwen3-{4b,8b}_<card>_2gpu.json
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/cost_entries"
. "$(dirname "$0")/gpu_env.sh"  # the wheels' site, offline, gpu_card
test -f .q3tok/tokenizer.json || { echo "carry .q3tok (../shared/tools/qwen3-tokenizer .q3tok)"; exit 2; }
card=$(gpu_card)
case $1 in
4b) P=params/paper/main_table.yaml ;;
8b) P=params/paper/main_table@8b.yaml ;;
*) echo "usage: $0 4b|8b"; exit 2 ;;
esac
END=${END:-$(( $(date +%s) + ${LIMIT:-500} ))}
E=/tmp/paper_shape/qwen3-$1_${card}_2gpu.json
mkdir -p /tmp/paper_shape
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
# a stage that starts before END may run past it: SIGTERM 40 s after END (the CLI then stops
# its servers and saves the entry), SIGKILL 20 s later, still inside a 10-minute command; the
# servers die with it either way (PR_SET_PDEATHSIG), and a rerun refuses GPUs left full
VDLIB_STOP_AT=$END CUDA_VISIBLE_DEVICES=0 timeout -k 20 $(( END - $(date +%s) + 40 )) \
    python3 -m vdlib.app.cli plan $P --measure --dummy-weights --tokenizer .q3tok --bench-dir .bench \
    --gpus-per-run 2 --card "$card" --steps ${STEPS:-2} --questions ${QUESTIONS:-64} \
    --eval-limit ${EVAL_LIMIT:-32} --work /tmp/paper_shape/work_$1 --out "$E" ${SKIP:+--skip "$SKIP"} \
    >> "$OUT/paper_shape_$1_$card.log" 2>&1
rc=$?
cp "$E" "$OUT/cost_entries/" 2>/dev/null
grep -v "INFO 1[01]-\|WARNING 1[01]-\|Processed prompts\|it/s\]" "$OUT/paper_shape_$1_$card.log" | tail -15
exit $rc
