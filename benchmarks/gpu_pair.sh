#!/bin/bash
# Experiments side by side on one lent machine, a lane each (issue 30's GPU holds; lanes may share a GPU):
# each lane is benchmarks/gpu_small.sh with its own PARAMS, OUT ($OUT/<name>), GS_DIR
# (/tmp/gs_<name>), GPU (SPARE, GRID_GPUS with one slot a run, EVAL_OFFSET) and rendezvous ports
# (VDLIB_GRID_PORT_BASE, by the lane's place in LANES, so that two lanes may share a GPU), so
# neither sees the other's files. A lane is NAME:PARAMS:GPU:SEEDS[:VAR=VALUE,...] (seeds
# comma-separated; the optional settings override gpu_small.sh's environment for this lane,
# e.g. main0:params/gpu-small/main_table.yaml:1:0:GRAPHS=,LIFETIME=stage for the main table's
# eager runs under the stage lifetime); the steps run in turn in every lane, the lanes at once:
#   LANES="phase:params/gpu-small/phase_ablation.yaml:0:2 anneal:params/gpu-small/annealing.yaml:1:0,1" \
#       bash benchmarks/gpu_pair.sh grid            # repeat until both grids are done
#   LANES=... bash benchmarks/gpu_pair.sh grid eval export   # the last command
# GRAPHS, NO_BASE_EVAL and END pass through to gpu_small.sh (a grid followed by eval stops
# RESERVE seconds, default 200, before END); only the last step bundles, so each lane's
# $OUT/<name>/bundle.tgz holds all of its command's files.
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export END=${END:-$(( $(date +%s) + ${LIMIT:-560} ))}  # as gpu_small.sh: every step ends by END
. "$(dirname "$0")/gpu_env.sh"  # refuses a released machine; the wheels' site for load_params
[ -n "$LANES" ] || { echo "LANES is empty: NAME:PARAMS:GPU:SEEDS ..."; exit 2; }
[ $# -gt 0 ] || { echo "steps? grid, eval, export"; exit 2; }
lane() {  # INDEX NAME PARAMS GPU SEEDS(comma) SETTINGS(comma) STEPS...
    local i=$1 name=$2 p=$3 g=$4 seeds=${5//,/ } step n slots last
    local -a settings=(${6//,/ })
    shift 6
    n=$(python3 -c "
from vdlib.config.experiment import load_params
print(len(load_params('$p').arms) * $(echo $seeds | wc -w))") || return 2
    slots=$(yes "$g" | head -n "$n" | paste -sd,)
    last=${!#}
    for step in "$@"; do
        nb=1; [ "$step" = "$last" ] && nb=$NO_BUNDLE
        end=$END  # a grid followed by other steps leaves them RESERVE seconds (default 200)
        [ "$step" = grid ] && [ "$step" != "$last" ] && end=$((END - ${RESERVE:-200}))
        env "${settings[@]}" END=$end OUT=$OUT/$name GS_DIR=/tmp/gs_$name SPARE=$g GRID_GPUS=$slots EVAL_OFFSET=$g \
            VDLIB_GRID_PORT_BASE=$((29600 + 100 * i)) PARAMS=$p NO_BUNDLE=$nb \
            bash "$(dirname "$0")/gpu_small.sh" "$step" $seeds >> "$OUT/$name.txt" 2>&1
        echo "$name $step: rc $?" >> "$OUT/$name.txt"
    done
}
for l in $LANES; do  # every lane checked before any starts
    IFS=: read -r name p g seeds settings <<< "$l"
    [[ $g =~ ^[0-9]+$ && $seeds =~ ^[0-9]+(,[0-9]+)*$ ]] \
        || { echo "lane '$l': not NAME:PARAMS:GPU:SEEDS[:VAR=VALUE,...]"; exit 2; }
    for kv in ${settings//,/ }; do  # VAR=VALUE only, VAR a shell name
        [[ $kv =~ ^[A-Za-z_][A-Za-z_0-9]*=[^[:space:]]*$ ]] \
            || { echo "lane $name: setting '$kv' is not VAR=VALUE"; exit 2; }
    done
done
i=0
for l in $LANES; do
    IFS=: read -r name p g seeds settings <<< "$l"
    lane "$i" "$name" "$p" "$g" "$seeds" "$settings" "$@" &
    i=$((i + 1))
done
wait
for l in $LANES; do
    name=${l%%:*}
    echo "=== $name"
    grep -v "INFO [0-9][0-9]-\|WARNING [0-9][0-9]-" "$OUT/$name.txt" | tail -25
done
