#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Memory of a large live set: `bench-replay --generate-live N` writes N allocations (512 B to
# 64 KiB) all alive at once, then their N frees in a strided order.  Each policy replays it
# (`fragsim replay --no-needed` on a 1 TiB device, so that nothing fails for want of memory),
# and the peak resident memory is printed against the same replay of a 1,000-allocation live
# set in the same run: (peak - baseline peak) / N is the memory per live allocation.
# Usage: bench/bench-live.sh [N] [POLICY...]   (default 10000000; direct bestfit caching expandable)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10000000}
shift || true
if [[ $# -gt 0 ]]; then policies=("$@"); else policies=(direct bestfit caching expandable); fi
cmake -S . -B build/bench -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/bench -j"$(nproc)" --target bench-replay fragsim >/dev/null
mkdir -p bench/data
for count in 1000 "$n"; do
  trace=bench/data/live-$count.fsb
  if [[ ! -f $trace ]]; then
    echo "generating $trace" >&2
    build/bench/bench-replay --generate-live "$count" "$trace"
  fi
done
# peak RSS in KiB and user CPU seconds of one replay
measure() {
  /usr/bin/time -f '%M %U' build/bench/fragsim replay --no-needed -d 1TiB -p "$1" "$2" 2>&1 >/dev/null |
    tail -1
}
echo "$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-12s %12s %14s %12s %18s\n' policy "live" "peak RSS" "CPU s" "bytes per live"
for policy in "${policies[@]}"; do
  read -r base_kib base_s < <(measure "$policy" bench/data/live-1000.fsb)
  read -r kib s < <(measure "$policy" "bench/data/live-$n.fsb")
  printf '%-12s %12s %11s MiB %12s %18s\n' "$policy" 1000 $((base_kib / 1024)) "$base_s" "(baseline)"
  printf '%-12s %12s %11s MiB %12s %18s\n' "$policy" "$n" $((kib / 1024)) "$s" \
    "$(awk -v a="$kib" -v b="$base_kib" -v n="$n" 'BEGIN { printf "%.0f", (a - b) * 1024 / n }')"
done
