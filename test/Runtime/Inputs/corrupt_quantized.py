"""Writes broken variants of a file `xfmrc --quantize --weight-group-size=32` wrote for
examples/gpt2-tiny, next to the given directory."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "e2e_lib"))
import safetensors_io  # noqa: E402

source, out = sys.argv[1], sys.argv[2]
tensors = safetensors_io.read(source)
scales = "h.0.mlp.c_fc.weight:scales.T"
variants = {
    "infinite": {"h.1.mlp.c_fc.weight:scales.T":
                 tensors["h.1.mlp.c_fc.weight:scales.T"] / np.float32(0)},
    "noscales": {scales: None},
    "group16": {scales: np.ones((256, 4), np.float32)},
    "transposed": {scales: np.ascontiguousarray(tensors[scales].T)},
    "int-scales": {scales: np.ones((256, 2), np.int32)},
}
for name, changes in variants.items():
    broken = dict(tensors)
    for key, value in changes.items():
        if value is None:
            del broken[key]
        else:
            broken[key] = value
    safetensors_io.write(os.path.join(out, name + ".safetensors"), broken)
