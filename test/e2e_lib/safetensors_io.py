"""Minimal safetensors reader and writer on numpy (no dependency on the
safetensors package), used by the test oracles."""

import json
import struct

import numpy as np

_DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I32": np.int32,
           "I64": np.int64, "I8": np.int8, "BOOL": np.bool_, "U8": np.uint8}
_NAMES = {np.dtype(v): k for k, v in _DTYPES.items()}


def _bfloat16_to_float32(bits):
    """numpy has no bfloat16: BF16 tensors are read as float32."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def write(path, tensors, align=8):
    """Writes `tensors` (name: array); each starts `align` bytes aligned in
    the file (the safetensors package's files: 8)."""
    header, offset, blobs = {}, 0, []
    for name, array in tensors.items():
        # Not np.ascontiguousarray: it turns rank-0 arrays into rank 1.
        array = np.asarray(array).copy(order="C")
        padding = -offset % align
        offset += padding
        header[name] = {"dtype": _NAMES[array.dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
        blobs.append(b"\0" * padding + array.tobytes())
    text = json.dumps(header).encode()
    text += b" " * (-(8 + len(text)) % align)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    base = 8 + length
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        blob = data[base + begin:base + end]
        if entry["dtype"] == "BF16":
            array = _bfloat16_to_float32(np.frombuffer(blob, dtype=np.uint16))
        else:
            array = np.frombuffer(blob, dtype=_DTYPES[entry["dtype"]])
        tensors[name] = array.reshape(entry["shape"])
    return tensors
