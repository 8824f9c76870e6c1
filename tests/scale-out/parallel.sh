#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# shellcheck source-path=SCRIPTDIR
# Scale-out with GNU parallel, for real: run scripts/parallel-sweep.sh on sweep.ini with the
# sshlogin "2/:" (this machine, two job slots, no ssh needed): 3 shards, each `fragsim sweep
# --shard I/3` into its own database, then merged and reported; and check that the merged
# database holds exactly the runs (every metric, every stored row) of the same sweep run here
# in one piece.  CTest runs it (label slurm) with FRAGSIM_BINARY, FRAGSIM_COMPARE_DBS and
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

spec=$SOURCE_DIR/tests/scale-out/sweep.ini
shards=3
cd "$WORK"
start=$EPOCHREALTIME
"$FRAGSIM" sweep "$spec" --db "$WORK/local.db" -j 2 >/dev/null || fail "the local sweep failed"
echo "local sweep: $(elapsed "$start") s" >&2

start=$EPOCHREALTIME
if ! "$SOURCE_DIR/scripts/parallel-sweep.sh" -n "$shards" -S 2/: --fragsim "$FRAGSIM" "$spec" \
  "$WORK/out" </dev/null; then
  for f in "$WORK"/out/logs/*.out; do show_file "$f"; done
  fail "scripts/parallel-sweep.sh failed"
fi
echo "$shards shards on 2 slots, then merge and report: $(elapsed "$start") s" >&2

[[ -s $WORK/out/report/index.html ]] || fail "parallel-sweep.sh wrote no report"
# One shard alone is not the whole sweep: the comparison can fail.
if "$COMPARE_DBS" "$WORK/local.db" -- "$WORK/out/part-1.db" >/dev/null; then
  fail "compare-dbs found one shard equal to the whole sweep"
fi
"$COMPARE_DBS" "$WORK/local.db" -- "$WORK/out/results.db" ||
  fail "the merged shards differ from the sweep run in one piece"
