#!/usr/bin/env python3
"""Plots attention probabilities that a compiled model wrote (xfmrc
--output-attentions, the executable's --output=FILE.safetensors): one heat map
per head of one layer and sequence, queries down, keys across, as the
attention figures of the transformer tutorials draw them.

usage: plot_attention.py OUTPUTS.safetensors PNG [--layer NAME] [--sequence N]
                         [--tokens "w1 w2 ..."]

NAME is an output such as attentions.0 (encoder-decoder models:
encoder_attentions.0, decoder_attentions.0, cross_attentions.0); default:
the first. Only the sequence's own positions are drawn.
"""
import argparse
import json
import struct
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

DTYPES = {"F32": np.float32, "I32": np.int32}


def read_safetensors(path):
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
        data = f.read()
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__" or entry["dtype"] not in DTYPES:
            continue
        begin, end = entry["data_offsets"]
        tensors[name] = np.frombuffer(data[begin:end], dtype=DTYPES[entry["dtype"]]).reshape(
            entry["shape"])
    return tensors


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outputs")
    parser.add_argument("png")
    parser.add_argument("--layer")
    parser.add_argument("--sequence", type=int, default=0)
    parser.add_argument("--tokens", help="labels of the sequence's positions")
    args = parser.parse_args()
    tensors = read_safetensors(args.outputs)
    layers = sorted(name for name in tensors if "attentions." in name)
    if not layers:
        sys.exit(f"{args.outputs}: no attention probabilities (compile with "
                 "xfmrc --output-attentions)")
    layer = args.layer or layers[0]
    if layer not in tensors:
        sys.exit(f"{args.outputs}: no output '{layer}' (there are: {', '.join(layers)})")
    probabilities = tensors[layer]
    if not 0 <= args.sequence < probabilities.shape[0]:
        sys.exit(f"--sequence {args.sequence}: the file holds {probabilities.shape[0]} sequences")
    # Self-attention over one sequence: its length bounds queries and keys.
    length = int(tensors["lengths"][args.sequence]) if "lengths" in tensors else None
    maps = probabilities[args.sequence]
    if length and not layer.startswith("cross_"):
        maps = maps[:, :length, :length]
    labels = args.tokens.split() if args.tokens else None
    heads = maps.shape[0]
    columns = min(heads, 4)
    rows = (heads + columns - 1) // columns
    figure, axes = plt.subplots(rows, columns, figsize=(3.2 * columns, 3.2 * rows),
                                squeeze=False)
    for head, axis in enumerate(axes.flat):
        if head >= heads:
            axis.axis("off")
            continue
        axis.imshow(maps[head], cmap="viridis", vmin=0.0, vmax=1.0)
        axis.set_title(f"{layer}, head {head}", fontsize=9)
        if labels and len(labels) == maps.shape[-1]:
            axis.set_xticks(range(len(labels)), labels, fontsize=6, rotation=90)
        if labels and len(labels) == maps.shape[-2]:
            axis.set_yticks(range(len(labels)), labels, fontsize=6)
    figure.supxlabel("key position")
    figure.supylabel("query position")
    figure.tight_layout()
    figure.savefig(args.png, dpi=120)
    print(f"wrote {args.png}: {heads} heads of {layer}, sequence {args.sequence}, "
          f"{maps.shape[-2]} x {maps.shape[-1]}")


if __name__ == "__main__":
    main()
