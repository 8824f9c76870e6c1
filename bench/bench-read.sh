#!/bin/sh
# SPDX-License-Identifier: MIT
# Benchmarks reading PyTorch memory snapshots against CPython's pickle.load of the same file, in
# one run: fsim_trace_open + streaming every event of every device, in process, and whole
# `fragsim info FILE` processes (start-up included), each against pickle.load in process.  By
# default on the five largest shared real snapshots (FRAGSIM_SHARED_TRACES, or ../shared/traces
# beside the project); --big adds a ~150 MB synthetic snapshot generated once into bench/data/
# (git-ignored).  Prints per file and in aggregate the minimum and median CPU times of --runs
# runs and their ratios; --json prints the same as JSON.  Builds a Release tree in build/bench.
#
# usage: bench/bench-read.sh [--runs N] [--json] [--big] [FILE...]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build/bench"
runs=7
json=
big=
while [ "$#" -gt 0 ]; do
    case "$1" in
    --runs) runs=$2; shift 2 ;;
    --json) json=--json; shift ;;
    --big) big=1; shift ;;
    *) break ;;
    esac
done

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target bench-read fragsim >/dev/null

if [ "$#" -eq 0 ]; then
    shared="${FRAGSIM_SHARED_TRACES:-$root/../shared/traces}"
    # shellcheck disable=SC2046 # file names without spaces
    set -- $(ls -S "$shared"/*.pickle "$shared"/*.pkl 2>/dev/null | head -n 5)
    if [ "$#" -eq 0 ]; then
        echo "note: no shared snapshots in $shared; real snapshots skipped" >&2
    fi
    if [ -n "$big" ]; then
        data="$root/bench/data/read-snapshot.pickle"
        if [ ! -f "$data" ]; then
            mkdir -p "$root/bench/data"
            echo "generating $data ..." >&2
            python3 "$root/bench/gen-read-snapshot.py" "$data" 150 >&2
        fi
        set -- "$@" "$data"
    fi
fi
[ -n "$json" ] || echo "$(nproc) cores; $runs runs each; CPU times"
exec "$build/bench-read" --runs "$runs" --fragsim "$build/fragsim" $json "$@"
