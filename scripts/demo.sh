#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Set up, build, and run the demo: replay the sample traces through every policy and print
# the comparisons.  Usage: scripts/demo.sh   (from anywhere)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j"$(nproc)" >/dev/null
fragsim=build/release/fragsim

for trace in traces/fragmenting.trace traces/multi-stream.trace; do
  "$fragsim" replay "$trace"
  echo
done
echo "The same OOM-prone step on a 16 GB T4:"
"$fragsim" replay traces/small-device-oom.trace -d t4-16gb
echo
echo "fragsim is at $fragsim; try '$fragsim --help'."
