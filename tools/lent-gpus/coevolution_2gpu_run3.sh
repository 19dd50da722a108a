#!/bin/bash
# call 3: the co-evolution loop (`vdlib run`) under accelerate launch, 2 processes:
# A = DDP, clean run; B = DDP with a pre-written curriculum (so the solver GRPO runs too);
# C = DeepSpeed ZeRO-2, as B.
set -u
export HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=warning PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
R=$OUT
G=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -o 'H[0-9]00' | tr A-Z a-z)
echo "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST=$TORCH_SYMM_MEM_DISABLE_MULTICAST NVSHMEM_DISABLE_NVLS=$NVSHMEM_DISABLE_NVLS"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv
python3 -c "import torch, transformers, accelerate, trl; print('torch', torch.__version__, 'transformers', transformers.__version__, 'accelerate', accelerate.__version__, 'trl', trl.__version__)"
python3 benchmarks/gpu_throughput.py build --tokenizer .gpu_carry/tokenizer --model-dir /tmp/q \
  --shape qwen3-0.6b-shape --layers 2 --hidden 256 2>&1 | grep -v Warning
inject() {  # a 4-question curriculum, so the solver stage trains (a random model proposes none)
  mkdir -p $1/mp/seed0/iter_1
  python3 -c "
import json
for a in range(1, 5):
    print(json.dumps({'question': f'What is {a} + {a}?', 'answer': str(2 * a), 'acc': 0.5,
                      'proposer_answer': str(2 * a), 'majority': str(2 * a), 'mask_seed': None}))
" > $1/mp/seed0/iter_1/curriculum.jsonl
}
tree() {  # the artifact tree (sizes), the small JSON files, the merged rollouts' ranks
  echo "=== $1: artifact tree ==="; (cd $1 && find . -printf '%p %s\n' | sort)
  for f in timing.json metrics.json solver_train.json; do
    echo "--- iter_1/$f"; head -c 1500 $1/mp/seed0/iter_1/$f; echo; done
  echo "--- proposer_rollouts.jsonl: (call, rank, index, step) per line"
  python3 -c "
import json
for l in open('$1/mp/seed0/iter_1/proposer_rollouts.jsonl'):
    r = json.loads(l); print(r['call'], r.get('rank'), r['index'], r['step'])"
}
runloop() {  # name accelerate-config outdir timeout
  sed "s#OUTDIR#$3#" benchmarks/results/coevolution_2gpu_params.yaml > /tmp/$1.yaml
  echo "=== $1: accelerate launch --config_file configs/$2.yaml -m vdlib run ==="
  timeout $4 accelerate launch --config_file configs/$2.yaml -m vdlib run /tmp/$1.yaml > $R/$1.log 2>&1
  echo "$1 rc=$?" | tee -a $R/$1.log
  grep -E "vdlib|Error|rc=|artifacts" $R/$1.log | grep -v -i warn | tail -30
}
runloop coevolution_2gpu_$G accelerate_2gpu_ddp /tmp/runA 110
tree /tmp/runA > $R/coevolution_2gpu_${G}_tree.txt 2>&1
inject /tmp/runB
runloop coevolution_2gpu_solver_$G accelerate_2gpu_ddp /tmp/runB 110
tree /tmp/runB >> $R/coevolution_2gpu_${G}_tree.txt 2>&1
python3 -c "import pydantic" 2>/dev/null || python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu_carry/pyd/*.whl
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu_carry/ds/*.whl
inject /tmp/runC
runloop coevolution_2gpu_zero2_$G accelerate_2gpu_zero2 /tmp/runC 130
tree /tmp/runC >> $R/coevolution_2gpu_${G}_tree.txt 2>&1
grep -c . $R/coevolution_2gpu_${G}_tree.txt; ls -la $R
