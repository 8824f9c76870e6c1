#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install what fragsim needs to build and test on Debian 12 (only what is missing), using
# sudo when not root.  Usage: scripts/setup.sh [--tests]
set -euo pipefail

# libisal-dev: ISA-L's inflate for gzip inputs (optional to the build, which falls back to zlib);
# libjson-glib-dev: the tests' JSON parser (fragsim itself writes its JSON without it).
packages=(gcc clang cmake make pkg-config libglib2.0-dev libsqlite3-dev zlib1g-dev libjson-glib-dev
          libisal-dev gnuplot-nox)
if [[ ${1:-} == --tests ]]; then
  # clang-format checks the style; libclang-rt provides clang's sanitizer and fuzzer runtimes;
  # python3 lets some tests cross-check fragsim's output with Python's own pickle module;
  # the labelled tests exercise fragsim with slurm-wlm and munge (a single-node cluster),
  # parallel (GNU parallel) and chromium (the report, in a headless browser).
  packages+=(clang-format libclang-rt-14-dev python3 slurm-wlm munge parallel chromium)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  sudo=sudo
fi
echo "setup: installing ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
