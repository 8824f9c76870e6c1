#!/bin/sh
# SPDX-License-Identifier: MIT
# Benchmarks reading PyTorch memory snapshots (fsim_trace_open + streaming every event of every
# device) against CPython's pickle.load of the same file, in one run: on the largest shared real
# snapshot (FRAGSIM_SHARED_TRACES, or ../shared/traces beside the project, when present) and on
# a ~150 MB synthetic snapshot generated once into bench/data/ (git-ignored).  Builds a Release
# tree in build/bench.
#
# usage: bench/bench-read.sh [--runs N] [FILE...]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build/bench"
runs=5
if [ "${1:-}" = "--runs" ]; then
    runs=$2
    shift 2
fi

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target bench-read >/dev/null

if [ "$#" -eq 0 ]; then
    shared="${FRAGSIM_SHARED_TRACES:-$root/../shared/traces}"
    largest=$(ls -S "$shared"/*.pickle "$shared"/*.pkl 2>/dev/null | head -n 1 || true)
    if [ -n "$largest" ]; then
        set -- "$largest"
    else
        echo "note: no shared snapshots in $shared; real snapshot skipped"
    fi
    big="$root/bench/data/read-snapshot.pickle"
    if [ ! -f "$big" ]; then
        mkdir -p "$root/bench/data"
        echo "generating $big ..."
        python3 "$root/bench/gen-read-snapshot.py" "$big" 150
    fi
    set -- "$@" "$big"
fi
echo "$(nproc) cores; best of $runs runs each"
exec "$build/bench-read" --runs "$runs" "$@"
