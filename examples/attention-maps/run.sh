#!/usr/bin/env bash
# Trains the reverse-sequence encoder (examples/reverse-sequence) for a
# few seconds, then plots where its heads look: an output position that must
# produce input[15 - i] attends to position 15 - i, the anti-diagonal.
#   examples/attention-maps/run.sh [OUT_DIR]      (after scripts/build.sh)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
xfmrc="${XFMRC:-$root/build/bin/xfmrc}"
out="${1:-$root/build/attention-maps}"
model="$root/examples/reverse-sequence/model.json"
mkdir -p "$out"
/usr/bin/python3 "$root/examples/reverse-sequence/make_data.py" "$out"
"$xfmrc" --train "$model" --batch=32 --lr=1e-3 --warmup-steps=100 --steps=1000 -o "$out/train"
"$out/train" --train="$out/train.txt" --eval="$out/eval.txt" --save="$out/trained.safetensors" \
  --log-every=500 --eval-every=1000
"$xfmrc" "$model" --output-attentions=all -o "$out/reverse"
sequence="3 1 4 1 5 9 2 6 5 3 5 8 9 7 9 3"
echo "$sequence" | "$out/reverse" --weights="$out/trained.safetensors" \
  --output="$out/attentions.safetensors"
for layer in 0 1; do
  /usr/bin/python3 "$root/examples/attention-maps/plot_attention.py" "$out/attentions.safetensors" \
    "$out/layer$layer.png" --layer="attentions.$layer" --tokens="$sequence"
done
