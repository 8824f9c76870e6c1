#!/bin/sh
# SPDX-License-Identifier: MIT
# Benchmarks the safe unpickler against CPython's pickle.load: on the largest shared real
# snapshot (../shared/traces, when present beside the project) and on a ~100 MB synthetic
# snapshot generated into bench/data/ (git-ignored).  Builds a Release tree in build/bench.
#
# usage: bench/bench-pickle.sh [--runs N] [FILE...]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build/bench"
runs=5
if [ "${1:-}" = "--runs" ]; then
    runs=$2
    shift 2
fi

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target bench-pickle >/dev/null

if [ "$#" -eq 0 ]; then
    real="$root/../shared/traces/Constructor-Sun__code_location__memory_snapshot.pickle"
    if [ -f "$real" ]; then
        set -- "$real"
    else
        echo "note: $real not found; real snapshot skipped"
    fi
    big="$root/bench/data/big-snapshot.pickle"
    if [ ! -f "$big" ]; then
        mkdir -p "$root/bench/data"
        echo "generating $big ..."
        python3 "$root/bench/gen-big-snapshot.py" "$big"
    fi
    set -- "$@" "$big"
fi
exec "$build/bench-pickle" --runs "$runs" "$@"
