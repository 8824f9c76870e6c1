#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The device check of the CUDA backend (docs/cuda.md): on a machine with an NVIDIA GPU, build
# fragsim with CUDA, run the GPU tests, calibrate the device model, then replay two of the shared
# PyTorch snapshots under `caching` and `expandable` in the model and on the GPU and print the
# differences (peak reserved, driver calls, modelled versus measured time), and replay them
# through cudaMalloc and cudaMallocAsync themselves.  Exits non-zero on any failure.  Takes one
# to three minutes on one GPU, most of it the build.
#
# Run from anywhere:  scripts/gpu-check.sh
# Environment:
#   FRAGSIM_SHARED_TRACES  directory of the shared snapshots (default: ../shared/traces beside
#                          the repository)
#   FRAGSIM_GPU_BUILD      build directory (default: build/gpu-check in the repository)
#   FRAGSIM_GPU_CHECK_NO_BUILD=1  use the build directory as it is (a second run on the same
#                          machine skips the build)
#   FRAGSIM_GPU_CHECK_OUT  where the profile, logs and results database go (default:
#                          $FRAGSIM_GPU_BUILD/out)
#   FRAGSIM_GPU_POLICIES   policies to compare (default: caching,expandable)
#   FRAGSIM_GPU           CUDA device ordinal (default 0)
#   FRAGSIM_JOBS           build parallelism (default: the number of CPUs)
set -eu

root=$(CDPATH='' cd -- "$(dirname -- "$0")/.." && pwd)
build=${FRAGSIM_GPU_BUILD:-$root/build/gpu-check}
traces=${FRAGSIM_SHARED_TRACES:-$root/../shared/traces}
policies=${FRAGSIM_GPU_POLICIES:-caching,expandable}
gpu=${FRAGSIM_GPU:-0}
jobs=${FRAGSIM_JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 4)}
started=$(date +%s)

# The two snapshots and the trace device replayed from each.
set -- \
    silmont2000__assignment2-systems__mem_snapshot.pickle 0 \
    Constructor-Sun__code_location__memory_snapshot.pickle 0

step() {
    printf '\n==== [%ss] %s\n' "$(($(date +%s) - started))" "$*"
}

fail() {
    printf '\ngpu-check: FAILED: %s\n' "$*" >&2
    exit 1
}

# logged [-q] NAME COMMAND...: run COMMAND with its output in $out/NAME.log and show the log
# (with -q only the end of it, and only when it fails); fail naming NAME if COMMAND fails.
logged() {
    quiet=false
    if [ "$1" = -q ]; then
        quiet=true
        shift
    fi
    name=$1
    shift
    if "$@" >"$out/$name.log" 2>&1; then
        $quiet || cat "$out/$name.log"
    else
        status=$?
        if $quiet; then tail -n 40 "$out/$name.log"; else cat "$out/$name.log"; fi
        fail "$name (exit status $status; log: $out/$name.log)"
    fi
}

mkdir -p "$build"
out=${FRAGSIM_GPU_CHECK_OUT:-$build/out}
mkdir -p "$out"
if [ "${FRAGSIM_GPU_CHECK_NO_BUILD:-0}" = 1 ]; then
    step "using the build in $build as it is"
else
    step "configure and build ($build, Release, CUDA on)"
    logged -q configure cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
        -DFRAGSIM_WITH_CUDA=ON
    logged -q build cmake --build "$build" -j "$jobs"
    grep 'CUDA backend' "$out/configure.log" || true
fi
fragsim=$build/fragsim
[ -x "$fragsim" ] || fail "no fragsim binary in $build"

step "the GPU"
logged info "$fragsim" cuda info --gpu "$gpu"

step "GPU tests (ctest -L gpu)"
logged gpu-tests ctest --test-dir "$build" -L gpu --output-on-failure
if grep -q 'Not Run\|Skipped' "$out/gpu-tests.log"; then
    fail "the GPU tests were skipped although a GPU answered"
fi

step "calibrate"
profile=$out/gpu-profile.ini
logged calibrate "$fragsim" cuda calibrate --gpu "$gpu" -o "$profile"

step "policies and traces"
registered=$("$fragsim" policies) || fail "fragsim policies"
for policy in $(printf '%s' "$policies" | tr ',' ' '); do
    printf '%s\n' "$registered" | grep -q "^$policy " ||
        fail "policy '$policy' is not registered in this build (fragsim policies)"
done
[ -d "$traces" ] || fail "no shared traces in $traces (set FRAGSIM_SHARED_TRACES)"
rm -f "$out/results.db" "$out/results.db-wal" "$out/results.db-shm"

while [ $# -ge 2 ]; do
    trace=$traces/$1
    device=$2
    short=$(printf '%s' "$1" | cut -d_ -f1)
    shift 2
    [ -f "$trace" ] || fail "missing trace $trace"
    "$fragsim" info "$trace" >"$out/info-$short.log" 2>&1 ||
        fail "cannot read $trace (log: $out/info-$short.log)"

    step "$short, device $device: $policies in the model and on the GPU"
    logged "replay-$short" "$fragsim" cuda replay "$trace" --trace-device "$device" \
        -p "$policies" -d "$profile" --gpu "$gpu" --db "$out/results.db"

    step "$short, device $device: cudaMalloc and cudaMallocAsync"
    logged "native-$short" "$fragsim" cuda native "$trace" --trace-device "$device" --gpu "$gpu"
done

step "summary: GPU minus model, per trace and policy"
for log in "$out"/replay-*.log; do
    printf '%s\n' "$(basename "$log" .log | sed 's/^replay-//')"
    grep -E '^(policy |differences:)' "$log" | sed 's/^/  /'
done
printf '\nprofile %s, results %s, logs in %s\n' "$profile" "$out/results.db" "$out"
step "gpu-check: OK"
