#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Draw the gallery of docs/plots.md: each kind of plot from a real PyTorch snapshot (the 3-GPU
# one of the shared snapshots, its second GPU, which ran out of memory) and from a sample trace
# (traces/small-device-oom.trace on a 16 GB T4), as SVG under docs/gallery/.
#
# Usage: scripts/gallery.sh [FRAGSIM]   (from anywhere; FRAGSIM defaults to build/release/fragsim)
# The shared snapshots are read from FRAGSIM_SHARED_TRACES (default: ../shared/traces).  Only the
# images are kept: titles, axes and legends, never a snapshot's stack frames.
set -euo pipefail
cd "$(dirname "$0")/.."

fragsim=${1:-build/release/fragsim}
shared=${FRAGSIM_SHARED_TRACES:-../shared/traces}
snapshot=$shared/Constructor-Sun__code_location__memory_snapshot.pickle
out=docs/gallery
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

[ -x "$fragsim" ] || { echo "gallery: no fragsim at $fragsim (build it, or name it)" >&2; exit 1; }
[ -f "$snapshot" ] || { echo "gallery: $snapshot not found (set FRAGSIM_SHARED_TRACES)" >&2; exit 1; }

"$fragsim" replay "$snapshot" --trace-device 1 -p caching,expandable,bestfit \
    --db "$work/snapshot.db" >/dev/null
"$fragsim" replay traces/small-device-oom.trace -d t4-16gb -p caching,expandable,bestfit,paged \
    --db "$work/sample.db" >/dev/null
"$fragsim" plot --db "$work/snapshot.db" -o "$work/snapshot" --format svg >/dev/null
"$fragsim" plot --db "$work/sample.db" -o "$work/sample" --format svg >/dev/null

rm -rf "$out"
mkdir -p "$out"
# name in the gallery <- file written by plot (runs: 1 caching, 2 expandable, 3 bestfit, 4 paged)
for pair in \
    snapshot-compare:compare snapshot-timeline:timeline snapshot-fragmentation:fragmentation \
    snapshot-sizes:sizes snapshot-map-peak:address-map-run1-peak \
    snapshot-map-oom:address-map-run2-oom-1 \
    sample-compare:compare sample-timeline:timeline sample-fragmentation:fragmentation \
    sample-sizes:sizes sample-map-peak:address-map-run2-peak sample-map-oom:address-map-run3-oom-1; do
  name=${pair%%:*}
  file=${pair#*:}.svg
  cp "$work/${name%%-*}/$file" "$out/$name.svg"
done
du -ch "$out"/*.svg | tail -1
