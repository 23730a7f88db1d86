"""Writes the f32 weights a file of `xfmrc --quantize` stands for: each W:values times its
W:scales (the grouped axis and group size read off the shapes), each W:values.T times its
W:scales.T transposed back, each W:bf16 widened (W:bf16.T transposed back), the other tensors
as they are. With --bits=4 the values are 4-bit, two a byte (docs/quantization.md#int4):
(q - 8) * scale, or q * scale + min with W:mins. An f32 executable over them is the reference
of the narrowed one.

  dequantize_weights.py SOURCE TARGET [--bits=4]"""
import sys

import numpy as np

import safetensors_io


def four_bit_levels(values, mins):
    """The levels of 4-bit values [rows, cols / 2]: byte j of each block of 32
    holds values j and j + 16; offset by 8 unless the groups have mins."""
    blocks = values.view(np.uint8).reshape(values.shape[0], -1, 16)
    levels = np.concatenate([blocks & 0xF, blocks >> 4], axis=2).reshape(values.shape[0], -1)
    return levels.astype(np.float32) - (0 if mins is not None else 8)


def main(source, target, *flags):
    bits = 4 if "--bits=4" in flags else 8
    tensors = safetensors_io.read(source)
    weights = {}
    for name, array in tensors.items():
        base, _, part = name.partition(":")
        part, _, transposed = part.partition(".")
        if part in ("scales", "mins"):
            continue
        if part == "values":
            scales = tensors[name.replace(":values", ":scales")]
            mins = tensors.get(name.replace(":values", ":mins"))
            if bits == 4:
                array = four_bit_levels(array, mins)
            axes = [d for d in range(2) if scales.shape[d] != array.shape[d]]
            assert len(axes) == 1, (name, array.shape, scales.shape)
            group = array.shape[axes[0]] // scales.shape[axes[0]]
            array = array.astype(np.float32) * np.repeat(scales, group, axis=axes[0])
            if mins is not None:
                array = array + np.repeat(mins, group, axis=axes[0])
        if transposed:
            array = array.T
        assert base not in weights, "%s is there twice" % base
        weights[base] = np.asarray(array, np.float32)
    safetensors_io.write(target, weights)


if __name__ == "__main__":
    main(*sys.argv[1:])
