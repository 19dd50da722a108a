#!/bin/bash
# `vdlib notebooks run` on a lent GPU machine, detached from the command that starts it (the
# machine keeps a new process session running between commands), so that one notebook run may
# outlast a 10-minute command or share the card with a gpu_pair.sh hold:
#   bash tools/lent-gpus/gpu_notebook.sh start ARGS...   # ARGS: those of `vdlib notebooks run`
#   bash tools/lent-gpus/gpu_notebook.sh wait            # until done or WAIT_END; packs $OUT/nb.tgz
# It runs in NB_DIR (default /tmp/nb): a copy of the checkout's vdlib/, params/, notebooks/,
# docs/results/ and .bench/ (a later command's sync cannot touch it), with the wheels' site on the
# path (gpu_env.sh) and `--output-dir NB_DIR/outputs`; NB_DIR/nb.log is the runner's log and
# NB_DIR/done its exit status and seconds. nb.tgz holds the log, the executed notebooks, the
# reports and the results JSON (outputs/notebooks, outputs/results, outputs/*/reports), not
# the run folders.
set -o pipefail
NB=${NB_DIR:-/tmp/nb}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
. "$(dirname "$0")/gpu_env.sh"  # refuses a released machine; the wheels' site
pack() {
    (cd "$NB" && tar czf "$OUT/nb.tgz" nb.log $(ls -d done outputs/notebooks outputs/results \
        outputs/*/reports 2>/dev/null))
}
case $1 in
start)
    shift
    [ -e "$NB/started" ] && { echo "a notebook run already started in $NB"; exit 2; }
    mkdir -p "$NB/docs" "$NB/tools"
    for d in vdlib params notebooks .bench pyproject.toml; do cp -a "$d" "$NB/" || exit 2; done
    cp -a docs/results "$NB/docs/" && cp -a "$(dirname "$0")" "$NB/tools/" || exit 2
    printf '%q ' "$@" > "$NB/args"
    date +%s > "$NB/started"
    (cd "$NB" && python3 tools/lent-gpus/new_session.py bash -c '
export PYTHONPATH=/tmp/site:$PWD:/tmp/vdsite JUPYTER_RUNTIME_DIR=/tmp/jrt
s=$(date +%s)
eval python3 -m vdlib.app.cli notebooks run $(cat args) --output-dir "$PWD/outputs" > nb.log 2>&1
echo "$? $(( $(date +%s) - s ))" > done' < /dev/null > /dev/null 2>&1 &)
    echo "notebook run started in $NB: $*"
    ;;
wait)
    [ -f "$NB/started" ] || { echo "no notebook run started in $NB"; exit 2; }
    wend=${WAIT_END:-$(( $(date +%s) + ${LIMIT:-585} ))}
    while [ ! -f "$NB/done" ] && [ "$(date +%s)" -lt "$wend" ]; do sleep 5; done
    pack
    tail -n 15 "$NB/nb.log"
    if [ -f "$NB/done" ]; then echo "notebook run done (rc, seconds): $(cat "$NB/done")"
    else echo "notebook run going for $(( $(date +%s) - $(cat "$NB/started") )) s; wait again"; fi
    ;;
*)
    echo "gpu_notebook.sh start ARGS... | wait"; exit 2 ;;
esac
