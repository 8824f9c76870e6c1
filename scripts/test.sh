#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Set up, build, and run every test: the formatting check, then Debug builds with
# AddressSanitizer + UndefinedBehaviorSanitizer and invariant checks under gcc and under clang
# (each finds what the other misses), all tests run on both; and, for the warnings only the
# optimiser finds, a clang RelWithDebInfo and a gcc Release build (built, not tested: the
# sanitizer runs already test the same code).  All with warnings as errors.  This is what CI
# runs.  The labelled tests that start outside programs (slurm: a Slurm cluster and GNU
# parallel; browser: chromium) run once, in the gcc pass; they skip where the machine cannot
# run them, unless CI=true or FRAGSIM_REQUIRE_LABELLED=1 (.ci/run) makes that a failure.
# Usage: scripts/test.sh   (from anywhere)
# Tests that use the real PyTorch snapshots read FRAGSIM_SHARED_TRACES (a directory); when it
# is unset and ../shared/traces exists beside the project, that one is used.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh --tests
jobs=$(nproc)

if [[ -z ${FRAGSIM_SHARED_TRACES:-} && -d ../shared/traces ]]; then
  FRAGSIM_SHARED_TRACES=$(cd ../shared/traces && pwd)
  export FRAGSIM_SHARED_TRACES
fi

echo "== format"
files=$(git ls-files '*.c' '*.h' 2>/dev/null || find src include tests bench -name '*.[ch]')
clang-format --dry-run --Werror $files

echo "== gcc, Debug, ASan + UBSan"
export ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
CC=gcc cmake -S . -B build/asan -DCMAKE_BUILD_TYPE=Debug -DFRAGSIM_WERROR=ON \
  -DFRAGSIM_SANITIZE=address,undefined >/dev/null
cmake --build build/asan -j"$jobs"
ctest --test-dir build/asan --output-on-failure -j"$jobs"

echo "== clang, Debug, ASan + UBSan"
CC=clang cmake -S . -B build/clang-asan -DCMAKE_BUILD_TYPE=Debug -DFRAGSIM_WERROR=ON \
  -DFRAGSIM_SANITIZE=address,undefined >/dev/null
cmake --build build/clang-asan -j"$jobs"
ctest --test-dir build/clang-asan --output-on-failure -j"$jobs" -LE 'slurm|browser'

echo "== clang, RelWithDebInfo (optimiser warnings only; no tests)"
CC=clang cmake -S . -B build/clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFRAGSIM_WERROR=ON >/dev/null
cmake --build build/clang -j"$jobs"

echo "== gcc, RelWithDebInfo, the default build type (optimiser warnings only; no tests)"
CC=gcc cmake -S . -B build/gcc -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFRAGSIM_WERROR=ON >/dev/null
cmake --build build/gcc -j"$jobs"

echo "== gcc, Release (optimiser warnings only; no tests)"
CC=gcc cmake -S . -B build/gcc-release -DCMAKE_BUILD_TYPE=Release -DFRAGSIM_WERROR=ON >/dev/null
cmake --build build/gcc-release -j"$jobs"

echo "== all tests passed"
