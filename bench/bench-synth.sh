#!/bin/sh
# SPDX-License-Identifier: MIT
# Synthetic trace speed: `fragsim synth train` on a ~10-million-event trace (GPT-2 small, seq
# 1024, batch 8), generating only (--dry-run), writing the text format and writing it gzip-
# compressed; then `synth serve` and `synth random`.  Reports events per second as the command
# measures them.  Builds a Release tree in build/bench-synth; traces go to bench/data/ (git
# ignores it) and are removed afterwards unless --keep.
#
# usage: bench/bench-synth.sh [--steps N] [--keep]     (default 7415 steps: 10.0 million events)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build/bench-synth"
steps=7415
keep=0
while [ "$#" -gt 0 ]; do
    case $1 in
    --steps) steps=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    *) echo "usage: $0 [--steps N] [--keep]" >&2; exit 2 ;;
    esac
done

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)" --target fragsim >/dev/null
fragsim="$build/fragsim"
data="$root/bench/data"
mkdir -p "$data"
model="--model gpt2-small --seq 1024 --batch 8 --steps $steps"

echo "$(nproc) cores; synth train $model"
# shellcheck disable=SC2086
"$fragsim" synth train $model --dry-run
# shellcheck disable=SC2086
"$fragsim" synth train $model -o "$data/synth-train.trace"
echo "  text: $(ls -l "$data/synth-train.trace" | awk '{print $5}') bytes"
# shellcheck disable=SC2086
"$fragsim" synth train $model -o "$data/synth-train.trace.gz"
echo "  gzip: $(ls -l "$data/synth-train.trace.gz" | awk '{print $5}') bytes"

echo "synth serve (Llama-2 7B, 20000 requests, paged and contiguous-grow KV)"
"$fragsim" synth serve --model llama2-7b --requests 20000 --rate 50 --max-batch 256 \
    --kv-layout paged --dry-run
"$fragsim" synth serve --model llama2-7b --requests 20000 --rate 50 --max-batch 256 \
    --kv-layout contiguous-grow --dry-run

echo "synth random (10 million events, lognormal sizes and lifetimes, 10000 live at most)"
"$fragsim" synth random --events 10000000 --max-live 10000 --dry-run
"$fragsim" synth random --events 10000000 --max-live 10000 -o "$data/synth-random.trace"

if [ "$keep" -eq 0 ]; then
    rm -f "$data/synth-train.trace" "$data/synth-train.trace.gz" "$data/synth-random.trace"
fi
