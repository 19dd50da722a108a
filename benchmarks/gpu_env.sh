# Sourced by the GPU scripts (benchmarks/gpu_*.sh) on a lent machine after the wheel parts were
# installed (gpu_small.sh install): refuse a released machine, put the installed packages and
# the checkout on the path, keep everything offline; `gpu_card` prints h100, h200, a100, b200
# or gpu for GPU 0; `left` / `budget N` the seconds to $END (budget: less N, at least 30);
# `bundle` packs what is in $OUT into $OUT/bundle.tgz (NO_BUNDLE=1 skips it).
test -d /tmp/site || { echo "machine was released: send the parts again"; exit 3; }
export PYTHONPATH=/tmp/site:$PWD:/tmp/vdsite VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
gpu_card() {
    python3 -c "import torch,re;n=torch.cuda.get_device_name().lower();m=re.search(r'h100|h200|a100|b200',n);print(m.group(0) if m else 'gpu')"
}
left() { echo $(( END - $(date +%s) )); }
budget() { local s=$(( $(left) - $1 )); [ "$s" -lt 30 ] && s=30; echo $s; }
bundle() {
    [ -n "$NO_BUNDLE" ] && return
    (cd "$OUT" && files=$(ls | grep -v '^bundle.tgz$') && [ -n "$files" ] \
        && tar czf bundle.tgz --remove-files $files)
}
