"""Writes the f32 weights a file of `xfmrc --quantize` stands for: each W:values times its
W:scales (the grouped axis and group size read off the shapes), each W:values.T times its
W:scales.T transposed back, each W:bf16 widened (W:bf16.T transposed back), the other tensors
as they are. An f32 executable over them is the reference of the narrowed one."""
import sys

import numpy as np

import safetensors_io


def main(source, target):
    tensors = safetensors_io.read(source)
    weights = {}
    for name, array in tensors.items():
        base, _, part = name.partition(":")
        part, _, transposed = part.partition(".")
        if part == "scales":
            continue
        if part == "values":
            scales = tensors[name.replace(":values", ":scales")]
            axes = [d for d in range(2) if scales.shape[d] != array.shape[d]]
            assert len(axes) == 1, (name, array.shape, scales.shape)
            group = array.shape[axes[0]] // scales.shape[axes[0]]
            array = array.astype(np.float32) * np.repeat(scales, group, axis=axes[0])
        if transposed:
            array = array.T
        assert base not in weights, "%s is there twice" % base
        weights[base] = np.asarray(array, np.float32)
    safetensors_io.write(target, weights)


if __name__ == "__main__":
    main(*sys.argv[1:])
