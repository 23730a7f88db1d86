#!/usr/bin/env bash
# README command 2: install dependencies, build, run the whole test suite
# (lit: dialect, passes, pipelines, frontend, runtime, end-to-end numerics
# against PyTorch and, for whole Hugging Face models, transformers).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${XFMR_BUILD_DIR:-$root/build}"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
"$root/scripts/install-oracle.sh"
"$root/scripts/fetch-nvdisasm.sh"
ninja -C "$build" check-xfmr
