#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Mutation testing: apply each mutation of a list, one at a time, to a scratch copy of the
# source tree (never to the tree itself), build it, run the test suite, and report the mutations
# the tests did not catch (the survivors) and the kill rate.
#
# Usage: scripts/mutate.sh [-l LIST] [-k] [-j N] [PATTERN]
#   -l LIST   the mutations (default scripts/mutations.txt; its header describes the format)
#   -k        keep the scratch tree (its path is printed)
#   -j N      parallel build and test jobs (default: the number of processors)
#   PATTERN   only the mutations whose description contains PATTERN (case-insensitive)
# Environment: the tests' own (FRAGSIM_SHARED_TRACES...), and ccache when it is installed.
# Exit status: 0 when every mutation was killed, 1 when one survived or could not be applied,
# 2 for a usage error or a tree that does not pass its tests unmutated.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
list=$root/scripts/mutations.txt
keep=0
jobs=$(nproc)
while getopts "l:kj:" opt; do
  case $opt in
    l) list=$OPTARG ;;
    k) keep=1 ;;
    j) jobs=$OPTARG ;;
    *) echo "usage: scripts/mutate.sh [-l LIST] [-k] [-j N] [PATTERN]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
pattern=${1:-}
[[ -r $list ]] || { echo "mutate: cannot read $list" >&2; exit 2; }
if [[ -z ${FRAGSIM_SHARED_TRACES:-} && -d $root/../shared/traces ]]; then
  FRAGSIM_SHARED_TRACES=$(cd "$root/../shared/traces" && pwd)
  export FRAGSIM_SHARED_TRACES
fi

# ---- the list: blocks of "== description", "file: PATH", "from: TEXT", "to: TEXT" ----------
descs=() files=() froms=() tos=() hints=()
parse_list() {
  local line desc="" file="" from="" to="" hint="" n=0
  flush() {
    if [[ -n $desc ]]; then
      if [[ -z $file || -z $from ]]; then
        echo "mutate: $list: mutation '$desc' needs file: and from: lines" >&2
        exit 2
      fi
      if [[ -z $pattern || ${desc,,} == *"${pattern,,}"* ]]; then
        descs+=("$desc") files+=("$file") froms+=("$from") tos+=("$to") hints+=("$hint")
      fi
    fi
    desc="" file="" from="" to="" hint=""
  }
  while IFS= read -r line || [[ -n $line ]]; do
    n=$((n + 1))
    case $line in
      "== "*) flush; desc=${line#== } ;;
      "file: "*) file=${line#file: } ;;
      "from: "*) from=${line#from: } ;;
      "to: "*) to=${line#to: } ;;
      "to:") to="" ;;
      "tests: "*) hint=${line#tests: } ;;
      "#"* | "") ;;
      *) echo "mutate: $list:$n: cannot read '$line'" >&2; exit 2 ;;
    esac
  done <"$list"
  flush
}
parse_list
((${#descs[@]} > 0)) || { echo "mutate: no mutation matches '$pattern'" >&2; exit 2; }

# ---- a scratch copy of the tree: the files git tracks and the untracked ones it does not ignore
scratch=$(mktemp -d "${TMPDIR:-/tmp}/fragsim-mutate.XXXXXX")
if ((keep)); then
  echo "scratch tree: $scratch"
else
  trap 'rm -rf "$scratch"' EXIT
fi
tree=$scratch/tree
mkdir -p "$tree"
(cd "$root" && git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [[ -f $f ]] && printf '%s\0' "$f"; done |
  tar --null -T - -cf -) | tar -xf - -C "$tree"

launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
log=$scratch/log
echo "== configuring and building the unmutated tree"
CC=${CC:-gcc} cmake -S "$tree" -B "$tree/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DFRAGSIM_WERROR=OFF "${launcher[@]}" >"$log" 2>&1 || { cat "$log" >&2; exit 2; }

build() { cmake --build "$tree/build" -j"$jobs" >"$log" 2>&1; }
# The whole suite, stopping at the first failure; with a hint (a ctest -R regex), the tests it
# names first, which kill most mutations sooner.
run_tests() {
  if [[ -n ${1:-} ]] &&
    ! ctest --test-dir "$tree/build" -j"$jobs" -R "$1" --timeout 600 >"$log" 2>&1; then
    return 1
  fi
  ctest --test-dir "$tree/build" -j"$jobs" --stop-on-failure --timeout 600 >"$log" 2>&1
}
build || { tail -30 "$log" >&2; echo "mutate: the unmutated tree does not build" >&2; exit 2; }
echo "== testing the unmutated tree"
run_tests || { tail -30 "$log" >&2; echo "mutate: the unmutated tree fails its tests" >&2; exit 2; }

# The file that holds TEXT exactly once: PATH when it does, else the one file of src/ and
# include/ that does (the code may have moved since the list was written).
count_in() { # FILE TEXT: how many times TEXT occurs in FILE
  local content rest count=0
  content=$(<"$1")
  rest=$content
  while [[ $rest == *"$2"* ]]; do
    rest=${rest#*"$2"}
    count=$((count + 1))
  done
  echo "$count"
}
locate() {
  local path=$1 text=$2 found=() f
  if [[ -f $tree/$path && $(count_in "$tree/$path" "$text") == 1 ]]; then
    echo "$path"
    return 0
  fi
  while IFS= read -r -d '' f; do
    if [[ $(count_in "$tree/$f" "$text") == 1 ]]; then
      found+=("$f")
    fi
  done < <(cd "$tree" && grep -rlZF -- "$text" src include 2>/dev/null || true)
  if ((${#found[@]} == 1)); then
    echo "${found[0]}"
    return 0
  fi
  return 1
}

killed=0 survived=0 broken=0 missing=0
survivors=()
for i in "${!descs[@]}"; do
  desc=${descs[$i]} from=${froms[$i]} to=${tos[$i]}
  printf '%-78s ' "$desc"
  if ! file=$(locate "${files[$i]}" "$from"); then
    echo "NOT FOUND (no single place in ${files[$i]} or src/ has the text)"
    missing=$((missing + 1))
    survivors+=("$desc (not found)")
    continue
  fi
  path=$tree/$file
  cp -p "$path" "$scratch/original"
  content=$(<"$path")
  printf '%s\n' "${content/"$from"/"$to"}" >"$path"
  if ! build; then
    echo "did not build (not counted)"
    broken=$((broken + 1))
  elif run_tests "${hints[$i]}"; then
    echo "SURVIVED ($file)"
    survived=$((survived + 1))
    survivors+=("$desc ($file)")
  else
    failed=$(sed -n 's/^[[:space:]]*[0-9]* - \([^ ]*\) .*/\1/p' "$log" | sort -u | paste -sd, -)
    echo "killed by ${failed:-the tests}"
    killed=$((killed + 1))
  fi
  cp -p "$scratch/original" "$path"
  touch "$path"
done

total=$((killed + survived + missing))
echo
echo "killed $killed of $total mutations ($((total > 0 ? 100 * killed / total : 0))%);" \
  "$survived survived, $missing not found, $broken did not build"
for s in "${survivors[@]}"; do
  echo "  survivor: $s"
done
((survived + missing == 0))
