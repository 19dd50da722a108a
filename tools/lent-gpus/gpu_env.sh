# Sourced by the GPU scripts (tools/lent-gpus/gpu_*.sh) on a lent machine after the wheel parts were
# installed (gpu_small.sh install): refuse a released machine, put the installed packages and
# the checkout on the path, keep everything offline; `gpu_card` prints h100, h200, a100, b200
# or gpu for GPU 0; `left` / `budget N` the seconds to $END (budget: less N, at least 30);
# `bundle` packs what is in $OUT into $OUT/bundle.tgz (NO_BUNDLE=1 skips it); `graphs_copy P`
# writes a /tmp copy of params P with CUDA graphs (engine.enforce_eager: false) and prints its
# path (GRAPHS=1 in the scripts; each run's config.yaml records which mode it ran);
# `lifetime_copy P L` the same with engine.lifetime L (LIFETIME=stage in gpu_small.sh: the
# main table's committed runs ran under what is now `stage`).
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
graphs_copy() {
    local c=/tmp/graphs_$(basename "$1")
    sed 's/enforce_eager: true/enforce_eager: false/' "$1" > "$c" && grep -q "enforce_eager: false" "$c" \
        || { echo "graphs_copy: no enforce_eager in $1" >&2; return 1; }
    echo "$c"
}
lifetime_copy() {
    local c=/tmp/$2_$(basename "$1")
    python3 -c "
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
d.setdefault('engine', {})['lifetime'] = sys.argv[2]
yaml.safe_dump(d, open(sys.argv[3], 'w'), sort_keys=False)" "$1" "$2" "$c" || return 1
    echo "$c"
}
