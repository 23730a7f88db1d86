#!/usr/bin/env bash
# README command 1: install dependencies, build, compile the bundled example
# model (examples/gpt2-tiny) to an executable and run it on a few token
# sequences, printing the three most likely next tokens at every position.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${XFMR_BUILD_DIR:-$root/build}"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"

example="$root/examples/gpt2-tiny"
out="$build/example"
mkdir -p "$out"
"$build/bin/xfmrc" "$example/config.json" --emit=random-weights --seed=7 -o "$out/weights.safetensors"
"$build/bin/xfmrc" "$example/config.json" --batch=2 --seq-len=16 -o "$out/gpt2-tiny"
"$out/gpt2-tiny" --info
"$out/gpt2-tiny" --weights="$out/weights.safetensors" --input="$example/tokens.txt" --top=3
