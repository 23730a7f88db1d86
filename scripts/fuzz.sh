#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, in build/fuzz with XFMR_FUZZ=ON:
# AddressSanitizer, UndefinedBehaviorSanitizer, LeakSanitizer) and runs each
# for SECONDS (default 60), two at a time, on a working copy of its
# committed seed corpus. Prints executions and crashes per target; exits
# non-zero if any target crashed, hung or leaked (the input is kept under
# build/fuzz/artifacts/).
#   scripts/fuzz.sh [SECONDS [TARGET...]]
# XFMR_FUZZ_RUNS=N stops a target after N executions (within SECONDS).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${XFMR_FUZZ_BUILD_DIR:-${XFMR_BUILD_DIR:-$root/build}/fuzz}"
seconds="${1:-60}"
shift || true
# The slowest first, so that two at a time finish together.
targets=(tokenizer chat-template config manifest tokens safetensors gguf api-request mlir)
if [ $# -gt 0 ]; then
  targets=("$@")
fi
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    -DXFMR_FUZZ=ON >/dev/null
fi
ninja -C "$build" -j "${XFMR_JOBS:-2}" xfmr-fuzzers

mkdir -p "$build/artifacts" "$build/logs"
# A smaller quarantine than ASan's 256 MB: building IR frees much memory.
export ASAN_OPTIONS="${ASAN_OPTIONS:-quarantine_size_mb=64}"
run_target() {
  local name=$1 corpus="$build/corpus/$1"
  mkdir -p "$corpus"
  cp -n "$root/fuzz/corpus/$name/"* "$corpus/" 2>/dev/null || true
  "$build/bin/xfmr-$name-fuzzer" "$corpus" -max_total_time="$seconds" \
    -runs="${XFMR_FUZZ_RUNS:--1}" -timeout=10 \
    -rss_limit_mb=4096 -max_len=16384 -dict="$root/fuzz/dicts/$name.dict" \
    -artifact_prefix="$build/artifacts/$name-" -print_final_stats=1 \
    >"$build/logs/$name.log" 2>&1
}
status=0
pids=()
for name in "${targets[@]}"; do
  run_target "$name" &
  pids+=($!)
  if [ "${#pids[@]}" -ge "${XFMR_JOBS:-2}" ]; then
    wait "${pids[0]}" || true
    pids=("${pids[@]:1}")
  fi
done
wait || true

printf '| target | seconds | executions | exec/s | corpus | result |\n|---|---|---|---|---|---|\n'
for name in "${targets[@]}"; do
  log="$build/logs/$name.log"
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  took=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
  files=$(ls "$build/corpus/$name" | wc -l)
  result=ok
  if grep -qE "^==[0-9]+==ERROR|runtime error:|ERROR: libFuzzer|SUMMARY: " "$log"; then
    result="FAILED: $(grep -m1 -E "ERROR|runtime error:" "$log" | cut -c1-80) (log: $log)"
    status=1
  fi
  printf '| %s | %s | %s | %s | %s | %s |\n' "$name" "${took:-$seconds}" "${runs:-0}" "${rate:-0}" \
    "$files" "$result"
done
exit $status
