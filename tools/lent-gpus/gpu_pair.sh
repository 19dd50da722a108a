#!/bin/bash
# Experiments side by side on one lent machine, a lane each (issue 30's GPU holds; lanes may share a GPU):
# each lane is tools/lent-gpus/gpu_small.sh with its own PARAMS, OUT ($OUT/<name>), GS_DIR
# (/tmp/gs_<name>), GPU (SPARE, GRID_GPUS with one slot a run, EVAL_OFFSET) and rendezvous ports
# (VDLIB_GRID_PORT_BASE, by the lane's place in LANES, so that two lanes may share a GPU), so
# neither sees the other's files. A lane is NAME:PARAMS:GPU:SEEDS[:VAR=VALUE,...] (seeds
# comma-separated; the optional settings override gpu_small.sh's environment for this lane,
# e.g. main0:params/gpu-small/main_table.yaml:1:0:GRAPHS=,LIFETIME=stage for the main table's
# eager runs under the stage lifetime; SCRIPT=gpu_single_policy.sh runs single-policy GRPO's
# arms x seeds instead, grid training them, NO_BASE_EVAL= to evaluate the starting checkpoint
# too); the steps run in turn in every lane, the lanes at once:
#   LANES="phase:params/gpu-small/phase_ablation.yaml:0:2 anneal:params/gpu-small/annealing.yaml:1:0,1" \
#       bash tools/lent-gpus/gpu_pair.sh grid            # repeat until both grids are done
#   LANES=... bash tools/lent-gpus/gpu_pair.sh grid eval export   # the last command
# GRAPHS, NO_BASE_EVAL and END pass through to gpu_small.sh (a grid followed by eval stops
# RESERVE seconds, default 200, before END); only the last step bundles, so each lane's
# $OUT/<name>/bundle.tgz holds all of its command's files.
#
# Detached (the way to run a hold): `start STEPS...` runs the same steps in a new process
# session (setsid, through python3), which the lent machine keeps running between commands
# until it is given back, so no run is paused at a command's end and resumed (and recompiled)
# in the next;
# `wait` returns when they are done or at WAIT_END (default: LIMIT, 585, seconds from its
# start), with each lane's files packed into $OUT/<name>.tgz (its folder and <name>.txt) and
# the hold's log in $OUT/hold.log: at most 7 lanes, since 8 files a command come back. END is
# then the whole hold's deadline. One hold's batch (docs/experiments.md):
#   export WAIT_END=$(($(date +%s)+585)) END=$(($(date +%s)+1620)) LANES=...; \
#       bash tools/lent-gpus/gpu_small.sh install && bash tools/lent-gpus/gpu_pair.sh start grid eval export; \
#       bash tools/lent-gpus/gpu_pair.sh wait
#   export WAIT_END=$(($(date +%s)+585)); bash tools/lent-gpus/gpu_pair.sh wait      # as often as needed
# HOLD_DIR (default /tmp/hold) keeps the detached steps' files, their log, `done` (their rc)
# and repo/, the copy of the checkout's tools/lent-gpus/, benchmarks/, vdlib/, params/ and .bench/
# they run in
# (so the later commands need not carry .bench).
set -o pipefail
OUT=${OUT:-/tmp/out}
HOLD=${HOLD_DIR:-/tmp/hold}
mkdir -p "$OUT"
export END=${END:-$(( $(date +%s) + ${LIMIT:-560} ))}  # as gpu_small.sh: every step ends by END
. "$(dirname "$0")/gpu_env.sh"  # refuses a released machine; the wheels' site for load_params
[ $# -gt 0 ] || { echo "steps? grid, eval, export (or start STEPS..., wait)"; exit 2; }
pack() {  # each lane's folder and log as $OUT/<name>.tgz, the hold's log as $OUT/hold.log
    local name
    for name in $(lane_names); do
        [ -e "$HOLD/out/$name" ] || [ -e "$HOLD/out/$name.txt" ] || continue
        tar czf "$OUT/$name.tgz" -C "$HOLD/out" $(cd "$HOLD/out" && ls -d "$name" "$name.txt" 2>/dev/null) \
            2>/dev/null
    done
    cp "$HOLD/hold.log" "$OUT/hold.log" 2>/dev/null
}
detach() {  # the hold's steps (as `start` saved them) in a new process session, in $HOLD/out
    # (returns once the session wrote its pid, so that a `wait` right after cannot start another),
    # run in $HOLD/repo: a copy of what they read, which a later command's sync cannot touch
    # a new session through python3 (there on every lent machine; setsid(1) may not be)
    (cd "$HOLD/repo" || exit 2; python3 tools/lent-gpus/new_session.py bash -c \
        '. "$0/env"; echo $$ > "$0/pid"; OUT=$0/out bash "$1" $(cat "$0/steps"); echo $? > "$0/done"' \
        "$HOLD" "$HOLD/repo/tools/lent-gpus/$(basename "$0")" >> "$HOLD/hold.log" 2>&1 < /dev/null &)
    for _ in $(seq 150); do [ -s "$HOLD/pid" ] && break; sleep 0.2; done  # the session is up
}
lane_names() {  # this command's lanes, or those the hold started with
    local l
    if [ -z "$LANES" ] && [ -f "$HOLD/lanes" ]; then cat "$HOLD/lanes"; return; fi
    for l in $LANES; do echo "${l%%:*}"; done
}
if [ "$1" = wait ]; then  # until the detached steps are done or WAIT_END; then pack
    [ -f "$HOLD/started" ] || { echo "no hold started in $HOLD (gpu_pair.sh start STEPS...)"; exit 2; }
    wend=${WAIT_END:-$(( $(date +%s) + ${LIMIT:-585} ))}
    pid=$(cat "$HOLD/pid" 2>/dev/null)
    state=$(awk '/^State:/ {print $2}' "/proc/${pid:-none}/status" 2>/dev/null)  # Z: ended
    if [ ! -f "$HOLD/done" ] && [[ ! $state =~ ^[^ZX]$ ]]; then
        # killed (a machine that ends a command's sessions too, a crash): the grids resume
        echo "the detached steps are gone unfinished: starting them again (the runs resume)"
        rm -f "$HOLD/pid"
        detach
    fi
    while [ ! -f "$HOLD/done" ] && [ "$(date +%s)" -lt "$wend" ]; do sleep 5; done
    pack
    tail -n 40 "$HOLD/hold.log" 2>/dev/null
    if [ -f "$HOLD/done" ]; then
        echo "hold done (rc $(cat "$HOLD/done")) after $(( $(date +%s) - $(cat "$HOLD/started") )) s"
        exit 0
    fi
    echo "hold running for $(( $(date +%s) - $(cat "$HOLD/started") )) s; wait again"
    # where each lane's runs stand (read only): all lanes at once, each bounded by STATUS_S
    # (default 10) seconds, so that a busy machine cannot hold the command past WAIT_END by
    # more than that (one after another, six lanes overran a 600 s call)
    for name in $(lane_names); do
        [ -d "/tmp/gs_$name" ] && (cd "$HOLD/repo" && timeout "${STATUS_S:-10}" python3 \
            -m vdlib.app.cli status "/tmp/gs_$name" > "$HOLD/status_$name.txt" 2>/dev/null) &
    done
    wait
    for name in $(lane_names); do
        grep "^| [a-z]" "$HOLD/status_$name.txt" 2>/dev/null | grep -v "^| experiment"
    done
    exit 0
fi
[ -n "$LANES" ] || { echo "LANES is empty: NAME:PARAMS:GPU:SEEDS ..."; exit 2; }
lane() {  # INDEX NAME PARAMS GPU SEEDS(comma) SETTINGS(comma) STEPS...
    local i=$1 name=$2 p=$3 g=$4 seeds=${5//,/ } step n slots last kv script=gpu_small.sh
    local -a settings=(${6//,/ })
    shift 6
    for kv in "${settings[@]}"; do [[ $kv == SCRIPT=* ]] && script=${kv#SCRIPT=}; done
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
            bash "$(dirname "$0")/$script" "$step" $seeds >> "$OUT/$name.txt" 2>&1
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
        [[ $kv != SCRIPT=* || $kv =~ ^SCRIPT=(gpu_small.sh|gpu_single_policy.sh)$ ]] \
            || { echo "lane $name: $kv: SCRIPT is gpu_small.sh (the default) or gpu_single_policy.sh"; exit 2; }
    done
done
if [ "$1" = start ]; then  # the steps in a new process session; `wait` collects them
    shift
    [ $# -gt 0 ] || { echo "start what? grid, eval, export"; exit 2; }
    for step in "$@"; do
        [[ $step =~ ^(grid|eval|export)$ ]] || { echo "step '$step': one of grid, eval, export"; exit 2; }
    done
    [ "$(lane_names | wc -l)" -le 7 ] || { echo "at most 7 lanes: 8 files a command come back"; exit 2; }
    [ -e "$HOLD/started" ] && { echo "a hold already started in $HOLD"; exit 2; }
    mkdir -p "$HOLD/out"
    mkdir -p "$HOLD/repo/tools/lent-gpus"  # the scripts, the library, the params, the test files
    cp -a "$(dirname "$0")"/. "$HOLD/repo/tools/lent-gpus/" || exit 2
    for d in benchmarks vdlib params .bench; do [ ! -e "$d" ] || cp -a "$d" "$HOLD/repo/" || exit 2; done
    lane_names > "$HOLD/lanes"
    echo "$*" > "$HOLD/steps"
    for v in LANES END GRAPHS NO_BASE_EVAL RESERVE; do  # what a restart needs to run the same
        [ -n "${!v+x}" ] && printf 'export %s=%q\n' "$v" "${!v}"
    done > "$HOLD/env"
    date +%s > "$HOLD/started"
    detach
    echo "hold started: $(lane_names | paste -sd' ') -> $HOLD (steps: $*; END in $(( END - $(date +%s) )) s)"
    exit 0
fi
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
