#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Replay speed: events per second of the text reader alone and of the reader plus each policy,
# in one run, on a multi-million-event random trace (generated once into bench/data/, which git
# ignores).  Usage: bench/run.sh [EVENTS] [POLICY...]   (default 5000000 events, every policy)
set -euo pipefail
cd "$(dirname "$0")/.."
events=${1:-5000000}
shift || true
cmake -S . -B build/bench -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/bench -j"$(nproc)" --target bench-replay >/dev/null
mkdir -p bench/data
trace=bench/data/random-$events.trace
if [[ ! -f $trace ]]; then
  echo "generating $trace" >&2
  build/bench/bench-replay --generate "$events" "$trace"
fi
echo "$(nproc) cores, $(ls -lh "$trace" | awk '{print $5}') trace of $events events"
build/bench/bench-replay "$trace" "$@"
