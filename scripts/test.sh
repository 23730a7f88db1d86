#!/usr/bin/env bash
# README command 2: install dependencies, build, run the whole test suite
# (lit: dialect, passes, pipelines, frontend, runtime, end-to-end numerics
# against PyTorch and, for whole Hugging Face models, transformers), then
# every fuzz target for a short while (scripts/fuzz.sh).
#   scripts/test.sh              the suite in build/, then 60 s of each fuzz target
#   scripts/test.sh --sanitize   the suite built with AddressSanitizer and
#                                UndefinedBehaviorSanitizer, in build/sanitize
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${XFMR_BUILD_DIR:-$root/build}"
"$root/scripts/install-deps.sh"
mkdir -p "$build"
"$root/scripts/install-oracle.sh"
"$root/scripts/fetch-nvdisasm.sh"
if [ "${1:-}" = "--sanitize" ]; then
  sanitize="$build/sanitize"
  if [ ! -f "$sanitize/build.ninja" ]; then
    cmake -S "$root" -B "$sanitize" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
      -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
      -DXFMR_SANITIZE=ON
  fi
  # The oracles and tools fetched into build/ serve both builds.
  for shared in oracle-venv tools/nvdisasm; do
    if [ -e "$build/$shared" ]; then
      mkdir -p "$(dirname "$sanitize/$shared")"
      ln -sfn "$build/$shared" "$sanitize/$shared"
    fi
  done
  ninja -C "$sanitize" -j "${XFMR_JOBS:-2}" check-xfmr
  exit
fi
"$root/scripts/build.sh"
ninja -C "$build" check-xfmr
"$root/scripts/fuzz.sh" "${XFMR_FUZZ_SECONDS:-60}"
