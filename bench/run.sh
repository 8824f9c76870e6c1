#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Replay speed (bench-replay, see bench/README.md): the memory bandwidth baseline, the reader
# alone, the reader plus each policy, and the --db overhead, in one run per trace, on a seeded
# random trace generated once into bench/data/ (which git ignores) in both native formats.
# Then the memory of a large live set (bench/bench-live.sh: LIVE allocations alive at once,
# bytes per live allocation against a 1,000-allocation baseline; LIVE=0 skips it).
# Usage: bench/run.sh [EVENTS] [POLICY...]   (default 10000000 events, every policy;
#        LIVE=10000000)
set -euo pipefail
cd "$(dirname "$0")/.."
events=${1:-10000000}
shift || true
cmake -S . -B build/bench -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/bench -j"$(nproc)" --target bench-replay >/dev/null
mkdir -p bench/data
for ext in fsb trace; do
  trace=bench/data/random-$events.$ext
  if [[ ! -f $trace ]]; then
    echo "generating $trace" >&2
    build/bench/bench-replay --generate "$events" "$trace"
  fi
done
echo "$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
build/bench/bench-replay "bench/data/random-$events.fsb" "$@"
echo
build/bench/bench-replay --no-db "bench/data/random-$events.trace" "${@:-caching}"
live=${LIVE:-10000000}
if [[ $live != 0 ]]; then
  echo
  bench/bench-live.sh "$live" direct caching
fi
