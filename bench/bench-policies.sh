#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Replay speed of every policy against the trace reader alone (for the offline planner, its time
# includes the pass that reads every lifetime first and the plan it makes from them, as
# `fragsim replay` runs it), in one run per trace (bench-replay: min and median of 5, thread CPU
# time, each policy's ratio to the reader of the same run), on two multi-million-event traces
# generated into bench/data/ (ignored by git):
#
#   random    bench-replay's seeded random trace in the binary format (as bench/run.sh);
#   snapshot  a real PyTorch snapshot converted to text and repeated until it has EVENTS events:
#             each copy shifted in time and ids, its release bursts dropped (they were PyTorch's
#             reaction to a small GPU), and whatever is still alive at its end freed, so memory
#             stays bounded.  Default: ../shared/traces/MercuryB1__SQAttn__cuda_memory_snapshot.pickle
#             (override with FRAGSIM_BENCH_SNAPSHOT; skipped when missing).
#
# The first policy is `caching` and on the random trace its run with a results database follows
# (`caching+db`, the `--db` overhead: its ratio to `caching`, min and median).
#
# Usage: bench/bench-policies.sh [EVENTS]   (default 10000000: the issue's targets are for a
# 10 M-event binary trace: caching and expandable >= 20 M events/s, the others >= 10 M, and a
# database at most 15% over the plain replay)
#
# FRAGSIM_BENCH_BASELINE=PATH (another build's bench-replay, e.g. of main) runs the random trace
# with it too, before and after this build's, in the same run: compare the ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
events=${1:-10000000}
snapshot=${FRAGSIM_BENCH_SNAPSHOT:-../shared/traces/MercuryB1__SQAttn__cuda_memory_snapshot.pickle}
policies=(caching direct bestfit paged expandable bfc buddy async gmlake planner)

cmake -S . -B build/bench -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/bench -j2 --target bench-replay fragsim >/dev/null
mkdir -p bench/data

random=bench/data/random-$events.fsb
if [[ ! -f $random ]]; then
  echo "generating $random" >&2
  build/bench/bench-replay --generate "$events" "$random"
fi

repeated=""
if [[ -f $snapshot ]]; then
  repeated=bench/data/$(basename "${snapshot%.*}")-x-$events.trace
  if [[ ! -f $repeated ]]; then
    echo "generating $repeated" >&2
    one=bench/data/$(basename "${snapshot%.*}").trace
    build/bench/fragsim convert "$snapshot" "$one"
    awk -v target="$events" '
      /^#/ || NF == 0 || $1 == "fragsim-trace" { next }
      $2 != "alloc" && $2 != "free" && $2 != "free_completed" { next }
      { n++; t[n] = $1; k[n] = $2; id[n] = $3; rest[n] = ($2 == "alloc") ? $4 " " $5 : $4
        if ($3 + 0 > maxid) maxid = $3 + 0; span = $1 }
      END {
        print "fragsim-trace v1"
        out = 0
        for (r = 0; out < target; r++) {
          shift = r * (span + 1000); base = r * (maxid + 1); last = 0
          for (i = 1; i <= n && out < target; i++) {
            if (k[i] == "alloc") { live[id[i] + base] = 1 }
            else if (k[i] == "free") { delete live[id[i] + base] }
            else if (k[i] != "free_completed") { continue }
            last = t[i] + shift
            printf "%.0f %s %.0f %s\n", last, k[i], id[i] + base, rest[i]; out++
          }
          for (x in live) { printf "%.0f free %.0f 0\n", last, x; out++; delete live[x] }
        }
      }' "$one" > "$repeated.tmp"
    mv "$repeated.tmp" "$repeated"
  fi
else
  echo "no $snapshot: the repeated real trace is skipped" >&2
fi

echo "$(nproc) cores; $(uname -m); $(date -u +%Y-%m-%d)"
baseline=${FRAGSIM_BENCH_BASELINE:-}
echo
echo "$random ($(ls -lh "$random" | awk '{print $5}'))"
if [[ -n $baseline ]]; then
  echo "baseline $baseline:"
  "$baseline" "$random" "${policies[@]}"
  echo "this build:"
fi
build/bench/bench-replay "$random" "${policies[@]}"
if [[ -n $baseline ]]; then
  echo "baseline again:"
  "$baseline" "$random" "${policies[@]}"
fi
if [[ -n $repeated ]]; then
  echo
  echo "$repeated ($(ls -lh "$repeated" | awk '{print $5}'))"
  build/bench/bench-replay --no-db "$repeated" "${policies[@]}"
fi
