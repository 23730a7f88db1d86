#!/usr/bin/env bash
# README command 1: install dependencies, build, then train a small byte-level
# GPT (examples/sonnets: 4 layers, 0.8 M parameters) on Shakespeare's Sonnets
# for about a minute with a compiled training step, and generate a sonnet's
# opening from a prompt with the trained checkpoint, streaming the text.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${XFMR_BUILD_DIR:-$root/build}"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"

xfmrc="$build/bin/xfmrc"
example="$root/examples/sonnets"
out="$build/example"
rm -rf "$out"
/usr/bin/python3 "$example/prepare.py" "$out"
"$xfmrc" --train "$example/config.json" --batch=16 --seq-len=128 --lr=5e-3 --warmup-steps=50 \
  --steps=600 -o "$out/train"
"$out/train" --train="$out/train.txt" --eval="$out/eval.txt" --log-every=100 \
  --save="$out/checkpoint/model.safetensors"
"$xfmrc" "$out/checkpoint" --generate -o "$out/generate"
"$out/generate" -p "Shall I compare thee" -n 100 --temp 0.7 -s 1
