#!/usr/bin/env python3
"""Writes the GPU benchmark models into DIR: fused attention forward (batch 4,
16 heads, seq 1024/4096, head dim 64/128, causal and not; in f32, and in bf16
on tensor cores up to seq 16384), its backward
(through a loss sum(attention * w); f32, and bf16 on tensor cores), a GPT-2 small block at seq 1024, and bf16
matrix products (tensor cores).

  models.py DIR
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import models  # noqa: E402  (bench/models.py)

B, H = 4, 16


def attention(s, d, causal, dtype="f32"):
    t = f"tensor<{B}x{s}x{H}x{d}x{dtype}>"
    attrs = ("causal, " if causal else "") + f"scale = {d ** -0.5!r} : f64"
    return f'''func.func @forward(%q: {t} {{xfmr.input = "q"}}, %k: {t} {{xfmr.input = "k"}}, %v: {t} {{xfmr.input = "v"}}) -> ({t} {{xfmr.output = "o"}}) {{
  %o = xfmr.fused_attention %q, %k, %v {{{attrs}}} : ({t}, {t}, {t}) -> {t}
  return %o : {t}
}}
'''


def attention_loss(s, d, dtype="f32", causal=True):
    t = f"tensor<{B}x{s}x{H}x{d}x{dtype}>"
    attrs = ("causal, " if causal else "") + f"scale = {d ** -0.5!r} : f64"
    n = B * s * H
    return f'''func.func @loss(%q: {t} {{xfmr.input = "q"}}, %k: {t} {{xfmr.input = "k"}}, %v: {t} {{xfmr.input = "v"}}, %w: {t} {{xfmr.input = "w"}}) -> (tensor<{dtype}> {{xfmr.output = "loss"}}) {{
  %o = xfmr.fused_attention %q, %k, %v {{{attrs}}} : ({t}, {t}, {t}) -> {t}
  %p = xfmr.mul %o, %w : ({t}, {t}) -> {t}
  %l = xfmr.reduce %p {{kind = #xfmr.reduce_kind<sum>, axis = -1}} : ({t}) -> tensor<{B}x{s}x{H}x1x{dtype}>
  %r = xfmr.reshape %l : (tensor<{B}x{s}x{H}x1x{dtype}>) -> tensor<{n}x{dtype}>
  %total = xfmr.reduce %r {{kind = #xfmr.reduce_kind<sum>, axis = 0}} : (tensor<{n}x{dtype}>) -> tensor<1x{dtype}>
  %loss = xfmr.reshape %total : (tensor<1x{dtype}>) -> tensor<{dtype}>
  return %loss : tensor<{dtype}>
}}
'''


BF16_ATTENTION = [(1024, 64), (4096, 64), (16384, 64), (1024, 128), (4096, 128), (16384, 128)]
# Backward models: (prefix, seq, head dim, causal).
BACKWARD = [("attnbwd", 1024, 64, True), ("attnbwd", 4096, 64, True),
            ("attnbwdbf16", 1024, 64, True), ("attnbwdbf16", 4096, 64, True),
            ("attnbwdbf16", 1024, 64, False), ("attnbwdbf16", 1024, 128, True),
            ("attnbwdbf16", 4096, 128, True)]
GEMMS = [(1024, 3072, 768), (4096, 4096, 4096)]


def gemm_bf16(m, n, k):
    return f'''func.func @forward(%a: tensor<{m}x{k}xbf16> {{xfmr.input = "a"}}, %b: tensor<{k}x{n}xbf16> {{xfmr.input = "b"}}) -> (tensor<{m}x{n}xbf16> {{xfmr.output = "c"}}) {{
  %c = xfmr.matmul %a, %b : (tensor<{m}x{k}xbf16>, tensor<{k}x{n}xbf16>) -> tensor<{m}x{n}xbf16>
  return %c : tensor<{m}x{n}xbf16>
}}
'''


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for s, d in [(1024, 64), (4096, 64), (4096, 128)]:
        for causal in (True, False):
            name = f"attn_s{s}_d{d}_{'causal' if causal else 'full'}"
            with open(os.path.join(out, name + ".mlir"), "w") as f:
                f.write(attention(s, d, causal))
    for s, d in BF16_ATTENTION:
        for causal in (True, False):
            name = f"attnbf16_s{s}_d{d}_{'causal' if causal else 'full'}"
            with open(os.path.join(out, name + ".mlir"), "w") as f:
                f.write(attention(s, d, causal, "bf16"))
    for prefix, s, d, causal in BACKWARD:
        name = f"{prefix}_s{s}_d{d}_{'causal' if causal else 'full'}"
        with open(os.path.join(out, name + ".mlir"), "w") as f:
            f.write(attention_loss(s, d, "bf16" if prefix.endswith("bf16") else "f32", causal))
    for m, n, k in GEMMS:
        with open(os.path.join(out, f"gemm_bf16_{m}x{n}x{k}.mlir"), "w") as f:
            f.write(gemm_bf16(m, n, k))
    block = models.gpt2_stack_mlir(1024, 1)[0]
    for suffix, text in (("", block), ("_bf16", block.replace("xf32>", "xbf16>"))):
        with open(os.path.join(out, f"block1024{suffix}.mlir"), "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
