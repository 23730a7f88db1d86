#!/usr/bin/env python3
"""Writes damaged variants of a good .safetensors file for the runner's
bad-input tests: corrupt.py GOOD.safetensors OUTDIR"""

import json
import os
import struct
import sys

import numpy as np


def split(path):
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + length]), data[8 + length:]


def join(header, body, pad=True):
    text = json.dumps(header).encode()
    if pad:
        text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + body


def main():
    good, outdir = sys.argv[1], sys.argv[2]
    header, body = split(good)
    names = [n for n in header if n != "__metadata__"]
    first = names[0]
    with open(good, "rb") as f:
        raw = f.read()

    def write(name, data):
        with open(os.path.join(outdir, name), "wb") as f:
            f.write(data)

    write("too-short.safetensors", raw[:5])
    write("truncated.safetensors", raw[: len(raw) - 100])
    write("huge-header.safetensors", struct.pack("<Q", 1 << 40) + raw[8:])
    write("bad-json.safetensors", struct.pack("<Q", 12) + b'{"a": [1, 2' + b" " + body)
    write("not-object.safetensors", join([1, 2, 3], body))
    h = json.loads(json.dumps(header)); h[first]["dtype"] = "F128"
    write("bad-dtype.safetensors", join(h, body))
    h = json.loads(json.dumps(header)); h[first]["data_offsets"][1] += 4
    write("bad-span.safetensors", join(h, body))
    h = json.loads(json.dumps(header)); h[names[1]]["data_offsets"] = h[first]["data_offsets"]
    h[names[1]]["shape"] = h[first]["shape"]; h[names[1]]["dtype"] = h[first]["dtype"]
    write("overlap.safetensors", join(h, body))
    h = json.loads(json.dumps(header)); del h[first]
    write("missing.safetensors", join(h, body))
    h = json.loads(json.dumps(header))
    shape = h[first]["shape"]; h[first]["shape"] = [shape[1], shape[0]] if len(shape) == 2 else shape + [1]
    write("misshaped.safetensors", join(h, body))
    h = json.loads(json.dumps(header)); h[first]["dtype"] = "I32"
    write("int-weights.safetensors", join(h, body))
    begin = header[first]["data_offsets"][0]
    nan_body = bytearray(body); nan_body[begin:begin + 4] = struct.pack("<f", float("nan"))
    write("nan.safetensors", join(header, bytes(nan_body)))
    h = json.loads(json.dumps(header)); h[first]["shape"] = [-1] + h[first]["shape"][1:]
    write("negative-shape.safetensors", join(h, body))


if __name__ == "__main__":
    main()
