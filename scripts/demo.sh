#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Set up, build, and run the demo: replay the sample traces through every policy, print the
# comparisons, ask tune for a setting, and write a results database, plots and an HTML report
# under out/.
# Usage: scripts/demo.sh   (from anywhere)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j"$(nproc)" >/dev/null
fragsim=build/release/fragsim

rm -rf out
mkdir -p out
for trace in traces/fragmenting.trace traces/multi-stream.trace; do
  "$fragsim" replay "$trace" --db out/results.db
  echo
done
echo "The same OOM-prone training step on a 16 GB T4:"
"$fragsim" replay traces/small-device-oom.trace -d t4-16gb --db out/results.db
echo
echo "Which PYTORCH_CUDA_ALLOC_CONF should the decoding sample use?"
"$fragsim" tune traces/fragmenting.trace --db out/results.db
echo
"$fragsim" plot --db out/results.db -o out/plots
"$fragsim" report --db out/results.db -o out/report
echo
echo "Results: out/results.db (SQLite; schema in docs/metrics.md)"
echo "Plots:   out/plots/ (PNG, with their data and gnuplot scripts: sh out/plots/plots.sh redraws)"
echo "Report:  out/report/index.html (open it in a browser)"
echo "fragsim is at $fragsim; try '$fragsim --help'."
