#!/bin/sh
# SPDX-License-Identifier: MIT
# Benchmarks `fragsim validate` against the Python reference model of PyTorch's allocator (the
# shared reference/model/replay.py beside the project, or FRAGSIM_REFERENCE_MODEL), whole
# processes, CPU time, min and median of --runs runs, per file and in aggregate: by default on the
# four largest shared CUDA snapshots without expandable segments (FRAGSIM_SHARED_TRACES, or
# ../shared/traces).  Builds a Release tree in build/bench.
#
# usage: bench/bench-validate.sh [--runs N] [--json] [FILE...]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build/bench"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target fragsim >/dev/null
exec python3 "$root/bench/bench-validate.py" --fragsim "$build/fragsim" \
    --model "${FRAGSIM_REFERENCE_MODEL:-$root/../shared/reference/model}" \
    --traces "${FRAGSIM_SHARED_TRACES:-$root/../shared/traces}" "$@"
