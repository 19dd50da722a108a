#!/bin/bash
# call 4: ZeRO-2 again with the fp32-master save (C2), and one process on one GPU (D);
# prints the dtypes stored in every saved checkpoint.
set -u
export HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=warning PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
R=$OUT
G=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -o 'H[0-9]00' | tr A-Z a-z)
nvidia-smi --query-gpu=index,name,memory.total --format=csv
python3 -c "import pydantic" 2>/dev/null || python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu_carry/pyd/*.whl
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu_carry/ds/*.whl 2>&1 | grep -v WARNING
python3 benchmarks/gpu_throughput.py build --tokenizer .gpu_carry/tokenizer --model-dir /tmp/q \
  --shape qwen3-0.6b-shape --layers 2 --hidden 256 2>&1 | grep -v Warning
inject() {
  mkdir -p $1/mp/seed0/iter_1
  python3 -c "
import json
for a in range(1, 5):
    print(json.dumps({'question': f'What is {a} + {a}?', 'answer': str(2 * a), 'acc': 0.5,
                      'proposer_answer': str(2 * a), 'majority': str(2 * a), 'mask_seed': None}))
" > $1/mp/seed0/iter_1/curriculum.jsonl
}
dtypes() {
  python3 -c "
import collections, glob
from safetensors import safe_open
for f in sorted(glob.glob('$1/mp/seed0/iter_1/*_model/model.safetensors')):
    with safe_open(f, 'pt') as h:
        c = collections.Counter(str(h.get_slice(k).get_dtype()) for k in h.keys())
    print(f, dict(c))"
}
inject /tmp/runC2; sed "s#OUTDIR#/tmp/runC2#" benchmarks/results/coevolution_2gpu_params.yaml > /tmp/c2.yaml
echo "=== C2: ZeRO-2, 2 processes ==="
timeout 120 accelerate launch --config_file configs/accelerate_2gpu_zero2.yaml -m vdlib run /tmp/c2.yaml > $R/coevolution_2gpu_zero2_fp32save_$G.log 2>&1
echo "rc=$?" | tee -a $R/coevolution_2gpu_zero2_fp32save_$G.log
grep -E "vdlib|Error|rc=|artifacts" $R/coevolution_2gpu_zero2_fp32save_$G.log | grep -v -i warn | tail -14
dtypes /tmp/runC2 | tee -a $R/coevolution_2gpu_zero2_fp32save_$G.log
inject /tmp/runD; sed "s#OUTDIR#/tmp/runD#" benchmarks/results/coevolution_2gpu_params.yaml > /tmp/d.yaml
echo "=== D: one process, one GPU ==="
CUDA_VISIBLE_DEVICES=0 timeout 100 python3 -m vdlib run /tmp/d.yaml > $R/coevolution_1gpu_$G.log 2>&1
echo "rc=$?" | tee -a $R/coevolution_1gpu_$G.log
grep -E "vdlib|Error|rc=|artifacts" $R/coevolution_1gpu_$G.log | grep -v -i warn | tail -14
dtypes /tmp/runD | tee -a $R/coevolution_1gpu_$G.log
