# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# Shared by the scale-out tests (sourced, not run): how they skip, fail, wait and clean up.
#
# A labelled test may skip only where its machine cannot run it (a package missing, not root, a
# daemon that refuses to start): it then says exactly why and exits 77, which CTest shows as
# "Not Run" (SKIP_RETURN_CODE).  Where CI=true or FRAGSIM_REQUIRE_LABELLED=1 a skip is a
# failure instead: CI must run these tests.
# The caller sets FRAGSIM (the binary), COMPARE_DBS (tests/scale-out/compare-dbs) and SOURCE_DIR
# (the repository) from the environment CTest gives it; see require_inputs.

SKIP_CODE=77

# skip REASON...: cannot run here; exit 77, or 1 where the labelled tests are required.
skip() {
  if [[ ${CI:-} == true || ${FRAGSIM_REQUIRE_LABELLED:-} == 1 ]]; then
    echo "FAIL (a labelled test may not skip here: CI=${CI:-} FRAGSIM_REQUIRE_LABELLED=${FRAGSIM_REQUIRE_LABELLED:-}): $*" >&2
    exit 1
  fi
  echo "SKIP: $*" >&2
  exit "$SKIP_CODE"
}

# fail REASON...: the test ran and found something wrong.
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# require_commands CMD...: skip naming every missing command and the package that brings it.
require_commands() {
  local missing=() c
  for c in "$@"; do
    command -v "$c" >/dev/null 2>&1 || missing+=("$c")
  done
  if ((${#missing[@]} > 0)); then
    skip "missing ${missing[*]} (Debian packages slurm-wlm, munge, parallel; scripts/setup.sh --tests installs them)"
  fi
}

# require_inputs: the paths CTest passes, checked (a wrong path is a failure, not a skip).
require_inputs() {
  [[ -n ${FRAGSIM_BINARY:-} && -x $FRAGSIM_BINARY ]] || fail "FRAGSIM_BINARY is not an executable: '${FRAGSIM_BINARY:-}'"
  [[ -n ${FRAGSIM_COMPARE_DBS:-} && -x $FRAGSIM_COMPARE_DBS ]] || fail "FRAGSIM_COMPARE_DBS is not an executable: '${FRAGSIM_COMPARE_DBS:-}'"
  [[ -n ${FRAGSIM_SOURCE_DIR:-} && -d $FRAGSIM_SOURCE_DIR ]] || fail "FRAGSIM_SOURCE_DIR is not a directory: '${FRAGSIM_SOURCE_DIR:-}'"
  # shellcheck disable=SC2034 # for the scripts that source this file
  FRAGSIM=$FRAGSIM_BINARY COMPARE_DBS=$FRAGSIM_COMPARE_DBS SOURCE_DIR=$FRAGSIM_SOURCE_DIR
}

# make_workdir: a fresh directory in $WORK, readable by all (munged wants its socket's
# directories searchable by everyone), removed at exit unless FRAGSIM_KEEP_TMP=1.
make_workdir() {
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/fragsim-scale-out.XXXXXX")
  chmod 755 "$WORK"
}

remove_workdir() {
  if [[ ${FRAGSIM_KEEP_TMP:-} == 1 ]]; then
    echo "kept $WORK" >&2
  elif [[ -n ${WORK:-} ]]; then
    rm -rf "$WORK"
  fi
}

# wait_until SECONDS DESCRIPTION COMMAND...: poll COMMAND every 0.2 s until it succeeds;
# returns 1 (after saying what it waited for) when SECONDS pass first.
wait_until() {
  local limit=$1 what=$2 deadline
  shift 2
  deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      echo "timed out after ${limit} s waiting for $what" >&2
      return 1
    fi
    sleep 0.2
  done
}

# free_port: a TCP port on which nothing listens on this machine now.
free_port() {
  local port tries
  for ((tries = 0; tries < 200; tries++)); do
    port=$((20000 + RANDOM % 30000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return 0
    fi
  done
  fail "no free TCP port found"
}

# show_file FILE [LINES]: the tail of a log, under a header, to stderr.
show_file() {
  if [[ -f $1 ]]; then
    echo "---- ${1#"$WORK"/} (last ${2:-30} lines)" >&2
    tail -n "${2:-30}" "$1" >&2
  fi
}

# elapsed START: seconds since START (an $EPOCHREALTIME), to a tenth.
elapsed() {
  local us=$((${EPOCHREALTIME/./} - ${1/./}))
  printf '%d.%d\n' $((us / 1000000)) $((us % 1000000 / 100000))
}
