#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Scale-out with GNU parallel, for real: run parts of the work as parallel jobs on the sshlogin
# ":" (this machine, two job slots, no ssh needed), each into its own database, and check that
# together they hold exactly the runs (every metric) of the same work done locally in one
# process.  CTest runs it (label slurm) with FRAGSIM_BINARY, FRAGSIM_COMPARE_DBS and
# FRAGSIM_SOURCE_DIR set; it skips (77) without GNU parallel, a failure where CI=true or
# FRAGSIM_REQUIRE_LABELLED=1.  FRAGSIM_KEEP_TMP=1 keeps its directory.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

require_inputs
require_commands parallel
parallel --version 2>/dev/null | grep -q '^GNU parallel' ||
  skip "'parallel' is not GNU parallel (moreutils has another): install Debian's parallel"
make_workdir
trap remove_workdir EXIT
trap 'exit 1' INT TERM

cd "$SOURCE_DIR"
traces=(traces/small-device-oom.trace traces/multi-stream.trace traces/fragmenting.trace)
policies=caching,bestfit,paged
n=${#traces[@]}
out=$WORK/out
mkdir -p "$out"

for t in "${traces[@]}"; do
  "$FRAGSIM" replay "$t" -p "$policies" --db "$WORK/local.db" >/dev/null
done

start=$EPOCHREALTIME
parallel --sshlogin 2/: --halt now,fail=1 "$FRAGSIM" replay {} -p "$policies" \
  --db "$out/part-{#}.db" '>/dev/null' ::: "${traces[@]}" || fail "a parallel job failed"
echo "$n jobs on 2 slots: $(elapsed "$start") s" >&2

if "$COMPARE_DBS" "$WORK/local.db" -- "$out/part-1.db" >/dev/null; then
  fail "compare-dbs found one part equal to the whole"
fi
parts=()
for ((i = 1; i <= n; i++)); do parts+=("$out/part-$i.db"); done
"$COMPARE_DBS" "$WORK/local.db" -- "${parts[@]}" || fail "the parallel runs differ from the local ones"
