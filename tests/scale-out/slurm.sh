#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# shellcheck source-path=SCRIPTDIR
# Scale-out on Slurm, for real: start a single-node Slurm cluster (slurm-cluster.sh), run
# scripts/slurm-sweep.sh on sweep.ini (a job array of 3 shards, each `fragsim sweep --shard
# I/3` into its own database, and a job depending on the array, afterok, that merges the parts
# and writes the report), wait for both jobs, and check that the merged database holds exactly
# the runs (every metric, every stored row) of the same sweep run here in one piece; then that
# an array whose shards fail never starts its merge job.
# CTest runs it (label slurm) with FRAGSIM_BINARY, FRAGSIM_COMPARE_DBS and FRAGSIM_SOURCE_DIR
# set; it skips (77) where Slurm cannot run, a failure where CI=true or
# FRAGSIM_REQUIRE_LABELLED=1.  FRAGSIM_KEEP_TMP=1 keeps the cluster's directory and logs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
. "$here/slurm-cluster.sh"

require_inputs
make_workdir
trap 'cluster_stop; remove_workdir' EXIT
trap 'exit 1' INT TERM

start=$EPOCHREALTIME
cluster_start "$WORK/cluster"
echo "cluster up: $(elapsed "$start") s" >&2

spec=$SOURCE_DIR/tests/scale-out/sweep.ini
shards=3
cd "$WORK"
start=$EPOCHREALTIME
"$FRAGSIM" sweep "$spec" --db "$WORK/local.db" -j 2 >/dev/null || fail "the local sweep failed"
echo "local sweep: $(elapsed "$start") s" >&2

start=$EPOCHREALTIME
ids=$("$SOURCE_DIR/scripts/slurm-sweep.sh" -n "$shards" --fragsim "$FRAGSIM" "$spec" "$WORK/out") ||
  fail "scripts/slurm-sweep.sh could not submit the jobs"
read -r array merge <<<"$ids"
if ! cluster_wait "$array" 300 || ! cluster_wait "$merge" 120; then
  for f in "$WORK"/out/logs/*.out; do show_file "$f"; done
  cluster_show_logs
  fail "the Slurm jobs did not complete"
fi
echo "array of $shards shards, then merge and report: $(elapsed "$start") s" >&2

[[ -s $WORK/out/report/index.html ]] || fail "the merge job wrote no report"
# One shard alone is not the whole sweep: the comparison can fail.
if "$COMPARE_DBS" "$WORK/local.db" -- "$WORK/out/part-1.db" >/dev/null; then
  fail "compare-dbs found one shard equal to the whole sweep"
fi
"$COMPARE_DBS" "$WORK/local.db" -- "$WORK/out/results.db" ||
  fail "the merged shards differ from the sweep run in one piece"

# A shard that fails stops the merge (afterok): shards of a binary that always fails.
ids=$("$SOURCE_DIR/scripts/slurm-sweep.sh" -n 2 --fragsim /bin/false "$spec" "$WORK/failing") ||
  fail "scripts/slurm-sweep.sh could not submit the failing jobs"
read -r array merge <<<"$ids"
if cluster_wait "$array" 120 2>/dev/null; then
  fail "an array of failing shards completed"
fi
wait_until 60 "the merge job to end" cluster_job_done "$merge" ||
  fail "the merge job of a failed array did not end"
state=$(cluster_job_state "$merge")
[[ $state == CANCELLED && ! -e $WORK/failing/results.db ]] ||
  fail "the merge job of a failed array ended as $state, results.db: $(ls "$WORK/failing")"
