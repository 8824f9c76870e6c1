#!/bin/bash
# SPDX-License-Identifier: MIT
# Benchmarks reading compressed inputs whose content costs nothing to interpret, where only the
# per-line and per-byte overheads show: a comment-only text trace (.trace.gz), an RMM log of
# blank rows (.csv.gz), and the NONE/POP pickle bomb (.pickle.gz, whose memory must stay flat).
# Reports MB/s of *decompressed* input for `fragsim info` (open, describe: every line read) and
# its peak RSS.  The goal is linear reading at 100 MB/s or more whatever the content.  Inputs are
# generated once into bench/data/ (git-ignored); a Release tree is built in build/bench.
#
# usage: [RUNS=N] bench/bench-compressed.sh [MIB]   (decompressed size of each input, default 256;
# N runs of each, default 5)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build/bench"
mib=${1:-256}
data="$root/bench/data"

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target fragsim >/dev/null
mkdir -p "$data"

python3 - "$data" "$mib" <<'PY'
import gzip, os, sys
data, mib = sys.argv[1], int(sys.argv[2])
total = mib << 20

def write(name, head, unit, tail):
    path = os.path.join(data, name)
    if os.path.exists(path):
        return
    block = unit * max(1, (1 << 20) // len(unit))
    with gzip.open(path + ".tmp", "wb", compresslevel=6) as f:
        f.write(head)
        n = len(head)
        while n < total:
            f.write(block)
            n += len(block)
        f.write(tail)
    os.rename(path + ".tmp", path)

write(f"comments-{mib}.trace.gz", b"fragsim-trace v1\n", b"# a comment\n",
      b"0 alloc 1 4096 0\n")
write(f"blank-{mib}.csv.gz",
      b"Thread,Time,Action,Pointer,Size,Stream\n"
      b"1,13:05:42.123456,allocate,0x7f8a40000000,1024,0x7f8a38001020\n",
      b"\n", b"1,13:05:42.123502,free,0x7f8a40000000,1024,0x7f8a38001020\n")
write(f"nonepop-{mib}.pickle.gz", b"\x80\x02", b"N0", b"}.")
PY

runs=${RUNS:-5}
echo "$(nproc) cores; fragsim info on each input (best and median of $runs runs)"
printf '%-28s %12s %16s %18s %12s\n' input decompressed "seconds best/med" "MB/s best/median" "peak RSS"
for f in "$data"/comments-"$mib".trace.gz "$data"/blank-"$mib".csv.gz \
    "$data"/nonepop-"$mib".pickle.gz; do
    bytes=$(gzip -dc "$f" | wc -c)
    times=()
    rss=
    for _ in $(seq "$runs"); do
        out=$( { /usr/bin/time -f '%e %M' "$build/fragsim" info "$f" >/dev/null; } 2>&1 | tail -n 1)
        times+=("${out% *}")
        rss=${out#* }
    done
    printf '%s\n' "${times[@]}" | sort -n | awk -v n="$(basename "$f")" -v b="$bytes" -v r="$rss" '
        { t[NR] = $1 }
        END {
            best = t[1]; med = t[int((NR + 1) / 2)]
            printf "%-28s %9.1f MiB %7.2f / %6.2f %8.1f / %7.1f %9.1f MiB\n", n, b / 1048576,
                best, med, (best > 0 ? b / 1e6 / best : 0), (med > 0 ? b / 1e6 / med : 0), r / 1024
        }'
done
