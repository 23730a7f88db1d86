#!/usr/bin/env bash
# Installs the benchmarks' peers (bench/peers-requirements.txt) from PyPI into
# build/bench-venv; llama-cpp-python compiles llama.cpp for this CPU, which
# takes some minutes. Nothing happens when the requirements are installed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${XFMR_BUILD_DIR:-$root/build}"
venv="$build/bench-venv"
requirements="$root/bench/peers-requirements.txt"
if [ -f "$venv/.requirements" ] && cmp -s "$venv/.requirements" "$requirements"; then
  exit 0
fi
echo "xfmr: installing the benchmark peers into $venv" >&2
rm -rf "$venv"
/usr/bin/python3 -m venv "$venv"
CMAKE_BUILD_PARALLEL_LEVEL="${XFMR_JOBS:-2}" \
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
cp "$requirements" "$venv/.requirements"
