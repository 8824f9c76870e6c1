#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Scale-out on Slurm, for real: start a single-node Slurm cluster (slurm-cluster.sh), submit a
# job array whose tasks each replay part of the work into their own database, and a job that
# depends on the array (afterok); wait for both; then check that the databases the array wrote
# hold exactly the runs (every metric) of the same work done locally in one process.
# CTest runs it (label slurm) with FRAGSIM_BINARY, FRAGSIM_COMPARE_DBS and FRAGSIM_SOURCE_DIR
# set; it skips (77) where Slurm cannot run, a failure where CI=true or
# FRAGSIM_REQUIRE_LABELLED=1.  FRAGSIM_KEEP_TMP=1 keeps the cluster's directory.
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
echo "cluster up in $(elapsed "$start") s" >&2

cd "$SOURCE_DIR"
traces=(traces/small-device-oom.trace traces/multi-stream.trace traces/fragmenting.trace)
policies=caching,bestfit,paged
n=${#traces[@]}
out=$WORK/out
mkdir -p "$out"

# The local reference: every trace replayed by this shell, into one database.
for t in "${traces[@]}"; do
  "$FRAGSIM" replay "$t" -p "$policies" --db "$WORK/local.db" >/dev/null
done

start=$EPOCHREALTIME
trace_list=$(printf '%q ' "${traces[@]}")
array=$(sbatch --parsable --array=1-"$n" --job-name=fragsim-shard --chdir="$SOURCE_DIR" \
  --output="$out/shard-%a.out" <<EOF
#!/bin/bash
set -eu
traces=($trace_list)
exec $(printf %q "$FRAGSIM") replay "\${traces[SLURM_ARRAY_TASK_ID - 1]}" -p $policies \
  --db $(printf %q "$out")/part-\$SLURM_ARRAY_TASK_ID.db
EOF
)
after=$(sbatch --parsable --dependency=afterok:"$array" --job-name=fragsim-merge \
  --chdir="$out" --output="$out/merge.out" --wrap 'ls part-*.db >parts-seen')
ok=1
cluster_wait "$array" 300 && cluster_wait "$after" 60 || ok=0
if ((ok == 0)); then
  for f in "$out"/*.out; do show_file "$f"; done
  cluster_show_logs
  fail "the Slurm jobs did not complete"
fi
echo "array of $n and dependent job: $(elapsed "$start") s" >&2

# The dependent job ran after every task had written its database.
expected=$(for ((i = 1; i <= n; i++)); do echo "part-$i.db"; done | sort)
[[ $(sort "$out/parts-seen") == "$expected" ]] ||
  fail "the dependent job saw $(tr '\n' ' ' <"$out/parts-seen"), not every part"

# A part alone is not the whole: the comparison can fail.
if "$COMPARE_DBS" "$WORK/local.db" -- "$out/part-1.db" >/dev/null; then
  fail "compare-dbs found one part equal to the whole"
fi
parts=()
for ((i = 1; i <= n; i++)); do parts+=("$out/part-$i.db"); done
"$COMPARE_DBS" "$WORK/local.db" -- "${parts[@]}" || fail "the array's runs differ from the local ones"
