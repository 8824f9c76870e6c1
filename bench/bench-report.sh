#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `fragsim report` and the database behind it, on real PyTorch snapshots: every snapshot of a
# directory (FRAGSIM_SHARED_TRACES, or the first argument) replayed with four policies into one
# database (about 50 runs), then the database's size per table and the report's wall time.
# Usage: bench/bench-report.sh [SNAPSHOT-DIR] [POLICIES]   (default caching,expandable,bestfit,paged)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-${FRAGSIM_SHARED_TRACES:-}}
policies=${2:-caching,expandable,bestfit,paged}
if [[ -z $dir || ! -d $dir ]]; then
  echo "usage: bench/bench-report.sh SNAPSHOT-DIR [POLICIES] (or set FRAGSIM_SHARED_TRACES)" >&2
  exit 2
fi
cmake -S . -B build/bench -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/bench -j"$(nproc)" --target fragsim >/dev/null
out=bench/data/report
rm -rf "$out"
mkdir -p "$out"
start=$(date +%s.%N)
for trace in "$dir"/*.pickle "$dir"/*.pkl; do
  [[ -f $trace ]] || continue
  build/bench/fragsim replay "$trace" -p "$policies" --db "$out/results.db" >/dev/null 2>&1 ||
    [[ $? == 3 ]] || echo "replay failed: $trace" >&2
done
replayed=$(date +%s.%N)
echo "$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "runs: $(sqlite3 "$out/results.db" 'SELECT count(*) FROM runs') (replays took" \
  "$(echo "$replayed - $start" | bc) s)"
echo "database: $(stat -c %s "$out/results.db") bytes"
sqlite3 "$out/results.db" "SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC" \
  2>/dev/null | head -8 | sed 's/^/  /; s/|/: /'
for i in 1 2 3; do
  start=$(date +%s.%N)
  build/bench/fragsim report --db "$out/results.db" -o "$out/report" >/dev/null
  echo "report $i: $(echo "$(date +%s.%N) - $start" | bc) s"
done
