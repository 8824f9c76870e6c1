#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Run a fragsim sweep with GNU parallel over this machine or several hosts: job I of N runs the
# I-th shard of the sweep into OUT/part-I.db; once all have succeeded the parts are merged into
# OUT/results.db and the report written to OUT/report/, here.  See docs/scale-out.md.
#
# usage: scripts/parallel-sweep.sh [-n SHARDS] [-j JOBS] [-S SSHLOGINS] [--fragsim PATH] SPEC OUT [PARALLEL-OPTION...]
#   -n SHARDS      shards, one parallel job each (default 4)
#   -j JOBS        the sweep's -j inside each shard (default 1)
#   -S SSHLOGINS   where the shards run, parallel's --sshlogin (default ":", this machine);
#                  e.g. "8/node1,8/node2": 8 shards at a time on each host, over ssh
#   --fragsim PATH the fragsim binary (default: the one on PATH); every host must see it, the
#                  spec, the traces and OUT at the same paths (a shared file system)
#   PARALLEL-OPTION passed to parallel (--retries 2, --joblog FILE, ...)
# The shards run in the current directory (cd'd into on each host), so that the spec's relative
# paths mean what they mean here.  A shard whose sweep recorded some failed jobs as error runs
# (exit status 6) counts as a success: the report shows those runs.
set -euo pipefail

usage() {
  sed -n 's/^# \{0,1\}//; 7,14p' "$0" >&2
  exit 2
}

shards=4
jobs=1
sshlogins=:
fragsim=
while (($# > 0)); do
  case $1 in
  -n) shards=${2:?}; shift 2 ;;
  -j) jobs=${2:?}; shift 2 ;;
  -S) sshlogins=${2:?}; shift 2 ;;
  --fragsim) fragsim=${2:?}; shift 2 ;;
  -h | --help) usage ;;
  -*) echo "parallel-sweep: unknown option $1" >&2; usage ;;
  *) break ;;
  esac
done
(($# >= 2)) || usage
spec=$1 out=$2
shift 2
[[ $shards =~ ^[1-9][0-9]*$ ]] || { echo "parallel-sweep: -n wants a positive number, not '$shards'" >&2; exit 2; }
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "parallel-sweep: -j wants a positive number, not '$jobs'" >&2; exit 2; }
[[ -r $spec ]] || { echo "parallel-sweep: $spec: cannot read the sweep spec" >&2; exit 1; }
fragsim=${fragsim:-$(command -v fragsim || true)}
[[ -n $fragsim && -x $fragsim ]] || { echo "parallel-sweep: fragsim not found: put it on PATH or give --fragsim" >&2; exit 1; }
fragsim=$(realpath "$fragsim")
spec=$(realpath "$spec")
mkdir -p "$out/logs"
out=$(realpath "$out")

q() { printf '%q' "$1"; }

# One shard per job; parallel replaces {} by the shard's number.  Its output goes to a log per
# shard, as with Slurm.
seq 1 "$shards" | parallel --sshlogin "$sshlogins" --halt now,fail=1 "$@" \
  "cd $(q "$PWD") && { $(q "$fragsim") sweep $(q "$spec") --db $(q "$out")/part-{}.db" \
  "--shard {}/$shards -j $jobs || test \$? -eq 6; } >$(q "$out")/logs/shard-{}.out 2>&1"

parts=()
for ((i = 1; i <= shards; i++)); do parts+=("$out/part-$i.db"); done
"$fragsim" merge "$out/results.db" "${parts[@]}"
"$fragsim" report --db "$out/results.db" -o "$out/report"
echo "parallel-sweep: $shards shards merged into $out/results.db; report in $out/report" >&2
