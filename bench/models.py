"""Benchmark workloads, written once and used by both sides: xfmr IR for the
compiler and the same computation in PyTorch (as the HF model runs it).

GPT-2 small block: d 768, 12 heads, MLP 3072, GELU-tanh, pre-LN, causal,
batch 1. Causal attention on [1, 12, seq, 64]: xfmr's from the tutorial form
(matmul, scale, masked_fill -inf, softmax, matmul), PyTorch's
scaled_dot_product_attention.
"""

import math

import numpy as np
import torch

D, HEADS, INNER, EPS = 768, 12, 3072, 1e-5


def block_params(prefix):
    return [(prefix + "ln_1.weight", (D,)), (prefix + "ln_1.bias", (D,)),
            (prefix + "attn.c_attn.weight", (D, 3 * D)), (prefix + "attn.c_attn.bias", (3 * D,)),
            (prefix + "attn.c_proj.weight", (D, D)), (prefix + "attn.c_proj.bias", (D,)),
            (prefix + "ln_2.weight", (D,)), (prefix + "ln_2.bias", (D,)),
            (prefix + "mlp.c_fc.weight", (D, INNER)), (prefix + "mlp.c_fc.bias", (INNER,)),
            (prefix + "mlp.c_proj.weight", (INNER, D)), (prefix + "mlp.c_proj.bias", (D,))]


def _tensor(shape):
    return "tensor<" + "x".join(str(d) for d in shape) + "xf32>"


def gpt2_stack_mlir(seq, blocks):
    """xfmr IR of `blocks` GPT-2 blocks on hidden states [1, seq, 768]."""
    x = _tensor((1, seq, D))
    params = [p for b in range(blocks) for p in block_params(f"h.{b}.")]
    args = [f"%x: {x} {{xfmr.input = \"x\"}}"] + [
        f"%p{i}: {_tensor(shape)} {{xfmr.param = \"{name}\"}}" for i, (name, shape) in enumerate(params)]
    lines = [f"func.func @forward({', '.join(args)}) -> ({x} {{xfmr.output = \"y\"}}) {{"]
    cur = "%x"
    for b in range(blocks):
        p = [f"%p{12 * b + i}" for i in range(12)]
        n = f"b{b}"
        lines += [
            f"  %{n}ln1 = xfmr.layer_norm {cur}, {p[0]}, {p[1]} {{epsilon = 1.0e-05 : f64}} : ({x}, tensor<768xf32>, tensor<768xf32>) -> {x}",
            f"  %{n}att = xfmr.multi_head_attention %{n}ln1 in_proj({p[2]}) in_bias({p[3]}) out_proj({p[4]}, {p[5]}) {{num_heads = {HEADS} : i64, causal}}"
            f" : ({x}, tensor<768x2304xf32>, tensor<2304xf32>, tensor<768x768xf32>, tensor<768xf32>) -> {x}",
            f"  %{n}r1 = xfmr.add {cur}, %{n}att : ({x}, {x}) -> {x}",
            f"  %{n}ln2 = xfmr.layer_norm %{n}r1, {p[6]}, {p[7]} {{epsilon = 1.0e-05 : f64}} : ({x}, tensor<768xf32>, tensor<768xf32>) -> {x}",
            f"  %{n}fc = xfmr.linear %{n}ln2, {p[8]}, {p[9]} : ({x}, tensor<768x3072xf32>, tensor<3072xf32>) -> {_tensor((1, seq, INNER))}",
            f"  %{n}act = xfmr.gelu %{n}fc {{approximate = #xfmr.gelu_approximation<tanh>}} : {_tensor((1, seq, INNER))}",
            f"  %{n}proj = xfmr.linear %{n}act, {p[10]}, {p[11]} : ({_tensor((1, seq, INNER))}, tensor<3072x768xf32>, tensor<768xf32>) -> {x}",
            f"  %{n}out = xfmr.add %{n}r1, %{n}proj : ({x}, {x}) -> {x}",
        ]
        cur = f"%{n}out"
    lines += [f"  return {cur} : {x}", "}"]
    return "\n".join(lines) + "\n", params


def gpt2_block_loss_mlir(seq):
    """One GPT-2 block as a loss, sum(block(x) * r), for timing forward +
    backward (xfmrc --grad): the gradient that reaches the block is r."""
    source, params = gpt2_stack_mlir(seq, 1)
    x = _tensor((1, seq, D))
    source = source.replace("func.func @forward(%x", f"func.func @loss(%r: {x} {{xfmr.input = \"r\"}}, %x")
    source = source.replace(f"-> ({x} {{xfmr.output = \"y\"}})", "-> (tensor<f32> {xfmr.output = \"loss\"})")
    source = source.replace(f"  return %b0out : {x}\n", f"""  %prod = xfmr.mul %b0out, %r : ({x}, {x}) -> {x}
  %flat = xfmr.reshape %prod : ({x}) -> tensor<{seq * D}xf32>
  %sum = xfmr.reduce %flat {{kind = #xfmr.reduce_kind<sum>, axis = 0}} : (tensor<{seq * D}xf32>) -> tensor<1xf32>
  %loss = xfmr.reshape %sum : (tensor<1xf32>) -> tensor<f32>
  return %loss : tensor<f32>
""")
    return source, params


def attention_mlir(seq):
    """Causal attention written as tutorial code writes it."""
    qkv = _tensor((1, HEADS, seq, 64))
    scores = _tensor((1, HEADS, seq, seq))
    return f"""func.func @forward(%q: {qkv} {{xfmr.input = "q"}}, %k: {qkv} {{xfmr.input = "k"}},
                   %v: {qkv} {{xfmr.input = "v"}}) -> ({qkv} {{xfmr.output = "o"}}) {{
  %s = xfmr.matmul %q, %k {{transpose_rhs}} : ({qkv}, {qkv}) -> {scores}
  %scale = arith.constant dense<0.125> : tensor<f32>
  %ss = xfmr.mul %s, %scale : ({scores}, tensor<f32>) -> {scores}
  %mask = xfmr.causal_mask : tensor<{seq}x{seq}xi1>
  %ninf = arith.constant dense<0xFF800000> : tensor<f32>
  %masked = xfmr.select %mask, %ss, %ninf : (tensor<{seq}x{seq}xi1>, {scores}, tensor<f32>) -> {scores}
  %max = xfmr.reduce %masked {{kind = #xfmr.reduce_kind<max>, axis = -1}} : ({scores}) -> {_tensor((1, HEADS, seq, 1))}
  %shifted = xfmr.sub %masked, %max : ({scores}, {_tensor((1, HEADS, seq, 1))}) -> {scores}
  %e = math.exp %shifted : {scores}
  %sum = xfmr.reduce %e {{kind = #xfmr.reduce_kind<sum>, axis = -1}} : ({scores}) -> {_tensor((1, HEADS, seq, 1))}
  %p = xfmr.div %e, %sum : ({scores}, {_tensor((1, HEADS, seq, 1))}) -> {scores}
  %o = xfmr.matmul %p, %v : ({scores}, {qkv}) -> {qkv}
  return %o : {qkv}
}}
"""


def random_inputs(kind, seq, blocks=1, seed=0):
    rng = np.random.default_rng(seed)
    if kind == "attention":
        return {n: rng.standard_normal((1, HEADS, seq, 64)).astype(np.float32) for n in "qkv"}
    tensors = {"x": rng.standard_normal((1, seq, D)).astype(np.float32)}
    if kind == "grad":
        tensors["r"] = rng.standard_normal((1, seq, D)).astype(np.float32)
    for b in range(blocks):
        for name, shape in block_params(f"h.{b}."):
            if name.endswith("ln_1.weight") or name.endswith("ln_2.weight"):
                value = 1.0 + 0.1 * rng.standard_normal(shape)
            elif len(shape) == 1:
                value = 0.02 * rng.standard_normal(shape)
            else:
                value = rng.standard_normal(shape) / math.sqrt(shape[0])
            tensors[name] = value.astype(np.float32)
    return tensors


# --------------------------------------------------------------------------
# PyTorch (fp32), the computation of HF's GPT2Block and its attention

def torch_attention(q, k, v):
    """What transformers' GPT-2 runs by default (attn_implementation="sdpa")."""
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


def torch_block(x, w, prefix):
    seq = x.shape[1]
    h = torch.nn.functional.layer_norm(x, (D,), w[prefix + "ln_1.weight"], w[prefix + "ln_1.bias"], EPS)
    qkv = torch.addmm(w[prefix + "attn.c_attn.bias"], h.view(-1, D), w[prefix + "attn.c_attn.weight"])
    q, k, v = (t.view(1, seq, HEADS, 64).transpose(1, 2) for t in qkv.split(D, dim=-1))
    a = torch_attention(q, k, v).transpose(1, 2).reshape(seq, D)
    x = x + torch.addmm(w[prefix + "attn.c_proj.bias"], a, w[prefix + "attn.c_proj.weight"]).view(1, seq, D)
    h = torch.nn.functional.layer_norm(x, (D,), w[prefix + "ln_2.weight"], w[prefix + "ln_2.bias"], EPS)
    h = torch.addmm(w[prefix + "mlp.c_fc.bias"], h.view(-1, D), w[prefix + "mlp.c_fc.weight"])
    h = torch.nn.functional.gelu(h, approximate="tanh")
    return x + torch.addmm(w[prefix + "mlp.c_proj.bias"], h, w[prefix + "mlp.c_proj.weight"]).view(1, seq, D)


def torch_stack(inputs, blocks):
    x = inputs["x"]
    for b in range(blocks):
        x = torch_block(x, inputs, f"h.{b}.")
    return x
