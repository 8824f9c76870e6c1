#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Run a fragsim sweep as a Slurm job array: task I of N runs the I-th shard of the sweep into
# OUT/part-I.db, and a job that starts once every task has succeeded (afterok) merges the parts
# into OUT/results.db and writes the report to OUT/report/.  See docs/scale-out.md.
#
# usage: scripts/slurm-sweep.sh [-n SHARDS] [-c CPUS] [--fragsim PATH] SPEC OUT [SBATCH-OPTION...]
#   -n SHARDS      array tasks, one shard each (default 4)
#   -c CPUS        CPUs per task, the sweep's -j (default 1)
#   --fragsim PATH the fragsim binary (default: the one on PATH); every node must see it, the
#                  spec, the traces and OUT at the same paths (a shared file system)
#   SBATCH-OPTION  passed to both sbatch calls (--partition=..., --time=..., --account=...)
# The jobs run in the current directory, so that the spec's relative paths mean what they mean
# here.  Prints the two job ids, "ARRAY MERGE", on stdout.  A shard whose sweep recorded some
# failed jobs as error runs (exit status 6) counts as a success: the report shows those runs.
set -euo pipefail

usage() {
  sed -n 's/^# \{0,1\}//; 7,12p' "$0" >&2
  exit 2
}

shards=4
cpus=1
fragsim=
while (($# > 0)); do
  case $1 in
  -n) shards=${2:?}; shift 2 ;;
  -c) cpus=${2:?}; shift 2 ;;
  --fragsim) fragsim=${2:?}; shift 2 ;;
  -h | --help) usage ;;
  -*) echo "slurm-sweep: unknown option $1" >&2; usage ;;
  *) break ;;
  esac
done
(($# >= 2)) || usage
spec=$1 out=$2
shift 2
[[ $shards =~ ^[1-9][0-9]*$ ]] || { echo "slurm-sweep: -n wants a positive number, not '$shards'" >&2; exit 2; }
[[ $cpus =~ ^[1-9][0-9]*$ ]] || { echo "slurm-sweep: -c wants a positive number, not '$cpus'" >&2; exit 2; }
[[ -r $spec ]] || { echo "slurm-sweep: $spec: cannot read the sweep spec" >&2; exit 1; }
fragsim=${fragsim:-$(command -v fragsim || true)}
[[ -n $fragsim && -x $fragsim ]] || { echo "slurm-sweep: fragsim not found: put it on PATH or give --fragsim" >&2; exit 1; }
fragsim=$(realpath "$fragsim")
spec=$(realpath "$spec")
mkdir -p "$out/logs"
out=$(realpath "$out")

q() { printf '%q' "$1"; }

# The array: task I runs shard I of N.
array=$(sbatch --parsable --job-name=fragsim-sweep --array=1-"$shards" --cpus-per-task="$cpus" \
  --chdir="$PWD" --output="$out/logs/shard-%a.out" "$@" <<EOF
#!/bin/bash
set -u
i=\$SLURM_ARRAY_TASK_ID
rc=0
$(q "$fragsim") sweep $(q "$spec") --db $(q "$out")/part-\$i.db --shard \$i/$shards -j $cpus || rc=\$?
if ((rc == 6)); then
  echo "shard \$i/$shards: some jobs ended in error (recorded as error runs)" >&2
  rc=0
fi
exit \$rc
EOF
)
array=${array%%;*}

# The merge and the report, once every task has succeeded.
parts=$(for ((i = 1; i <= shards; i++)); do printf '%q ' "$out/part-$i.db"; done)
merge=$(sbatch --parsable --job-name=fragsim-merge --dependency=afterok:"$array" \
  --chdir="$PWD" --output="$out/logs/merge.out" "$@" <<EOF
#!/bin/bash
set -eu
$(q "$fragsim") merge $(q "$out/results.db") $parts
$(q "$fragsim") report --db $(q "$out/results.db") -o $(q "$out/report")
EOF
)
merge=${merge%%;*}
echo "slurm-sweep: array job $array ($shards shards), then merge and report job $merge; results in $out" >&2
echo "$array $merge"
