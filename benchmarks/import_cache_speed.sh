#!/bin/bash
# What Python's byte-code caches save a process of the quickstart: the wall and CPU seconds of
# importing the stack an arm's worker imports (torch, transformers, TRL, vdlib's loop,
# math-verify), in a copy of .venv without any cache, three times with PYTHONDONTWRITEBYTECODE=1
# (every run compiles from source, as on machines that set it) and three times without it (the
# first run writes the caches, the next two read them). The Makefile unexports the variable.
#   bash benchmarks/import_cache_speed.sh [VENV]    (default .venv; the copy goes to /tmp)
set -u
SRC=${1:-.venv}
COPY=$(mktemp -d /tmp/import_cache.XXXX)/venv
cp -r "$SRC" "$COPY" && find "$COPY" "$(dirname "$0")/../vdlib" -name __pycache__ -prune -exec rm -rf {} +
STACK="import torch, transformers, trl, math_verify, vdlib.loop.coevolution, vdlib.loop.stages, vdlib.loop.trainer"
for mode in nocache nocache nocache cache cache cache; do
    if [ $mode = nocache ]; then env=(env PYTHONDONTWRITEBYTECODE=1); else env=(env -u PYTHONDONTWRITEBYTECODE); fi
    "${env[@]}" /usr/bin/time -f "$mode wall_s=%e cpu_s=%U" "$COPY/bin/python" -c "$STACK"
done 2>&1 | grep wall_s
rm -rf "$(dirname "$COPY")"
