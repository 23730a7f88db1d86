#!/usr/bin/env python3
"""Small GGUF files written byte by byte (docs/gguf.md of ggml), valid or
broken in one named way, for the reader's error tests. Needs only NumPy.

  gguf_files.py DIRECTORY    writes DIRECTORY/<case>.gguf for every case
"""

import os
import struct
import sys

import numpy as np

STRING, ARRAY, U32, I32, F32 = 8, 9, 4, 5, 6
T_F32, T_Q5_1, T_Q8_0, T_Q2_K = 0, 7, 8, 10


def string(text):
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def value(kind, item):
    if kind == STRING:
        return string(item)
    if kind == U32:
        return struct.pack("<I", item)
    if kind == I32:
        return struct.pack("<i", item)
    if kind == F32:
        return struct.pack("<f", item)
    return b""  # a type GGUF does not have


def llama_metadata(arch="llama"):
    return [("general.architecture", STRING, arch),
            (f"{arch}.block_count", U32, 1), (f"{arch}.context_length", U32, 16),
            (f"{arch}.embedding_length", U32, 32), (f"{arch}.feed_forward_length", U32, 32),
            (f"{arch}.attention.head_count", U32, 2), (f"{arch}.attention.head_count_kv", U32, 1),
            (f"{arch}.attention.layer_norm_rms_epsilon", F32, 1e-5)]


def llama_tensors():
    """A 1-layer Llama with a width of 32 and 4 tokens, all f32."""
    shapes = {"token_embd.weight": (4, 32), "output_norm.weight": (32,),
              "blk.0.attn_norm.weight": (32,), "blk.0.attn_q.weight": (32, 32),
              "blk.0.attn_k.weight": (16, 32), "blk.0.attn_v.weight": (16, 32),
              "blk.0.attn_output.weight": (32, 32), "blk.0.ffn_norm.weight": (32,),
              "blk.0.ffn_gate.weight": (32, 32), "blk.0.ffn_up.weight": (32, 32),
              "blk.0.ffn_down.weight": (32, 32)}
    rng = np.random.default_rng(0)
    return [(name, shape, T_F32, rng.standard_normal(shape).astype(np.float32).tobytes())
            for name, shape in shapes.items()]


def gguf(metadata, tensors, magic=b"GGUF", version=3, alignment=32, offsets=None):
    """The file's bytes; `offsets` overrides the tensors' data offsets."""
    out = magic + struct.pack("<IQQ", version, len(tensors), len(metadata))
    for key, kind, item in metadata:
        out += string(key) + struct.pack("<I", kind) + value(kind, item)
    data, placed = b"", []
    for name, shape, ggml_type, payload in tensors:
        data += b"\0" * (-len(data) % alignment)
        placed.append(len(data))
        data += payload
    for i, (name, shape, ggml_type, payload) in enumerate(tensors):
        out += string(name) + struct.pack("<I", len(shape))
        out += b"".join(struct.pack("<Q", d) for d in reversed(shape))
        offset = offsets[i] if offsets and i in offsets else placed[i]
        out += struct.pack("<IQ", ggml_type, offset)
    out += b"\0" * (-len(out) % alignment)
    return out + data


def cases():
    meta, tensors = llama_metadata(), llama_tensors()
    q2k = list(tensors)
    q2k[3] = ("blk.0.attn_q.weight", (1, 256), T_Q2_K, b"\0" * 84)
    odd = list(tensors)
    odd[3] = ("blk.0.attn_q.weight", (2, 16), T_Q8_0, b"\0" * 68)
    gemma_norm = list(tensors)
    gemma_norm[2] = ("blk.0.attn_norm.weight", (32,), T_Q8_0, b"\0" * 34)
    gemma = llama_metadata("gemma")
    # One weight as Q5_1 (int8 groups with minimums) or Q8_0 blocks of zeros.
    q5_1, q8_0 = list(tensors), list(tensors)
    q5_1[3] = ("blk.0.attn_q.weight", (32, 32), T_Q5_1, b"\0" * 24 * 32)
    q8_0[3] = ("blk.0.attn_q.weight", (32, 32), T_Q8_0, b"\0" * 34 * 32)
    valid = gguf(meta, tensors)
    return {
        "valid": valid,
        "magic": gguf(meta, tensors, magic=b"GGML"),
        "version1": gguf(meta, tensors, version=1),
        "truncated": valid[:600],
        "short-data": valid[:-64],
        "q2k": gguf(meta, q2k),
        "odd-blocks": gguf(meta, odd),
        "misaligned": gguf(meta, tensors, offsets={1: 4}),
        "overlap": gguf(meta, tensors, offsets={1: 0}),
        "arch": gguf(llama_metadata("mamba"), tensors),
        "no-heads": gguf([m for m in meta if not m[0].endswith("head_count")], tensors),
        "duplicate-key": gguf(meta + [meta[1]], tensors),
        "bad-type": gguf(meta + [("general.name", 13, 0)], tensors),
        "unknown-tensor": gguf(meta, tensors + [("blk.0.ffn_extra.weight", (32,), T_F32,
                                                  b"\0" * 128)]),
        "rope-freqs": gguf(meta, tensors + [("rope_freqs.weight", (8,), T_F32, b"\0" * 32)]),
        "alignment": gguf(meta + [("general.alignment", U32, 24)], tensors),
        "gemma-norm": gguf(gemma, gemma_norm),
        "rope-pair": gguf(llama_metadata("phi3"),
                          tensors + [("rope_factors_long.weight", (8,), T_F32,
                                      np.ones(8, np.float32).tobytes())]),
        "window": gguf(meta + [("llama.attention.sliding_window", I32, -4)], tensors),
        "rope-dims": gguf(meta + [("llama.rope.dimension_count", U32, 15)], tensors),
        "q5_1": gguf(meta, q5_1),
        "q8_0": gguf(meta, q8_0),
    }


def main():
    directory = sys.argv[1]
    os.makedirs(directory, exist_ok=True)
    for name, data in cases().items():
        with open(os.path.join(directory, name + ".gguf"), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
