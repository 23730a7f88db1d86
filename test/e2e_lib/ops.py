#!/usr/bin/env python3
"""Inputs and float64 PyTorch references for the per-op tests in test/e2e/ops.

  ops.py generate CASE inputs.safetensors [--f64]
  ops.py check CASE inputs.safetensors outputs.safetensors

Each case matches one .mlir file: `generate` writes random inputs under the
argument names the file uses (float32, or with --f64 the same values as
float64), `check` recomputes every output from them and
prints one PASS/FAIL line per output: max |xfmr - torch| <= tol * max(1, max |torch|).
"""

import math
import sys

import numpy as np
import torch

import safetensors_io

torch.set_num_threads(2)
F64 = torch.float64
RNG = np.random.default_rng(1234)


def randn(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def t(array):
    return torch.tensor(np.asarray(array)).to(F64) if np.asarray(array).dtype.kind == "f" \
        else torch.tensor(np.asarray(array))


def attention_reference(q, k, v, scale, keep=None, bias=None, layout="bshd"):
    """softmax(q k^T * scale + bias, masked) v in [B, H, S, D]; rows with no
    visible key are 0."""
    if layout == "bshd":
        q, k, v = (x.transpose(1, 2) for x in (q, k, v))
    scores = q @ k.transpose(-1, -2) * scale
    if bias is not None:
        scores = scores + bias
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    visible = torch.isfinite(scores).any(dim=-1, keepdim=True)
    probs = torch.softmax(torch.where(visible, scores, torch.zeros_like(scores)), dim=-1)
    out = torch.where(visible, probs, torch.zeros_like(probs)) @ v
    return out.transpose(1, 2) if layout == "bshd" else out


def causal_keep(sq, sk):
    i = torch.arange(sq)[:, None]
    j = torch.arange(sk)[None, :]
    return j <= i + (sk - sq)


# --------------------------------------------------------------------------

def gen_attention():
    pad = np.ones((2, 96), dtype=np.bool_)
    pad[1, 70:] = False
    dead = np.ones((1, 64), dtype=np.bool_)
    dead[0, :] = False
    return dict(q=randn(2, 96, 3, 16), k=randn(2, 96, 3, 16), v=randn(2, 96, 3, 16), pad=pad,
                cq=randn(2, 3, 40, 8), ck=randn(2, 3, 72, 8), cv=randn(2, 3, 72, 8),
                cbias=randn(2, 1, 40, 72),
                oq=randn(1, 2, 24, 8), ok=randn(1, 2, 64, 8), ov=randn(1, 2, 64, 8), dead=dead,
                lq=randn(1, 16, 1, 8, scale=30.0),
                # Head dims past 64: 96 and 128 with the head-dim loops of the
                # GPU kernel unrolled (128: key tiles of 32, chunks of 16; 96:
                # tiles of 42, chunks of 2), 136 with them as loops.
                wq=randn(1, 70, 2, 96, scale=0.2), wk=randn(1, 70, 2, 96), wv=randn(1, 70, 2, 96),
                hq=randn(1, 70, 2, 128, scale=0.2), hk=randn(1, 70, 2, 128),
                hv=randn(1, 70, 2, 128),
                xq=randn(1, 50, 2, 136, scale=0.2), xk=randn(1, 50, 2, 136),
                xv=randn(1, 50, 2, 136))


def ref_attention(x):
    keep = t(x["pad"])[:, None, None, :] & causal_keep(96, 96)
    return dict(
        causal_padding=attention_reference(t(x["q"]), t(x["k"]), t(x["v"]), 0.25, keep=keep),
        cross_bias=attention_reference(t(x["cq"]), t(x["ck"]), t(x["cv"]), 0.35355339,
                                       bias=t(x["cbias"]), layout="bhsd"),
        causal_offset=attention_reference(t(x["oq"]), t(x["ok"]), t(x["ov"]), 0.35355339,
                                          keep=causal_keep(24, 64), layout="bhsd"),
        fully_masked=attention_reference(t(x["oq"]), t(x["ok"]), t(x["ov"]), 0.35355339,
                                         keep=t(x["dead"])[:, None, None, :], layout="bhsd"),
        large_scores=attention_reference(t(x["lq"]), t(x["lq"]), t(x["lq"]), 1.0,
                                         keep=causal_keep(16, 16)),
        head_dim_96=attention_reference(t(x["wq"]), t(x["wk"]), t(x["wv"]), 0.5,
                                        keep=causal_keep(70, 70)),
        head_dim_128=attention_reference(t(x["hq"]), t(x["hk"]), t(x["hv"]), 0.5),
        head_dim_136=attention_reference(t(x["xq"]), t(x["xk"]), t(x["xv"]), 0.5,
                                         keep=causal_keep(50, 50)))


def gen_cache_attention():
    """Attention over a KV cache: per-sequence query offsets and key lengths
    (runtime values), a prefill chunk, decode steps, a key length of 1 and
    of 0 (the row is fully masked), several key blocks."""
    i32 = lambda values: np.asarray(values, dtype=np.int32)
    return dict(pq=randn(3, 5, 2, 16), pk=randn(3, 200, 2, 16), pv=randn(3, 200, 2, 16),
                poff=i32([0, 61, 195]), plen=i32([5, 66, 200]),
                dq=randn(8, 1, 4, 16), dk=randn(8, 200, 4, 16), dv=randn(8, 200, 4, 16),
                doff=i32([7, 0, 199, 0, 63, 64, 120, 150]), dlen=i32([8, 1, 200, 0, 64, 65, 121, 200]),
                xq=randn(2, 2, 6, 8), xk=randn(2, 2, 70, 8), xv=randn(2, 2, 70, 8),
                xlen=i32([70, 33]))


def cache_keep(offsets, lengths, seq_q, seq_k, causal):
    """[B, 1, Sq, Sk]: key j is visible from query i of sequence b iff
    j < length[b] and, when causal, j <= offset[b] + i."""
    i = torch.arange(seq_q)[None, :, None]
    j = torch.arange(seq_k)[None, None, :]
    keep = j < torch.tensor(lengths.astype(np.int64))[:, None, None]
    if causal:
        keep = keep & (j <= torch.tensor(offsets.astype(np.int64))[:, None, None] + i)
    return keep[:, None]


def ref_cache_attention(x, dtype=F64):
    """In `dtype` (bf16: inputs and results stored in it, computed in float64)."""
    def stored(value):
        return value.to(dtype).to(F64)

    def tensor(name):
        return stored(t(x[name]))

    return {name: stored(value) for name, value in dict(
        prefill=attention_reference(tensor("pq"), tensor("pk"), tensor("pv"), 0.25,
                                    keep=cache_keep(x["poff"], x["plen"], 5, 200, True)),
        decode=attention_reference(tensor("dq"), tensor("dk"), tensor("dv"), 0.25,
                                   keep=cache_keep(x["doff"], x["dlen"], 1, 200, True)),
        cross=attention_reference(tensor("xq"), tensor("xk"), tensor("xv"), 0.35355339,
                                  keep=cache_keep(None, x["xlen"], 6, 70, False),
                                  layout="bhsd")).items()}


def gen_decoder():
    """Rotary embeddings, RMS norm and grouped-query attention."""
    i32 = lambda values: np.asarray(values, dtype=np.int32)
    mask = np.ones((2, 9), dtype=np.bool_)
    mask[1, 6:] = False
    return dict(x=randn(2, 7, 3, 8), pos=i32([3, 131000]), g=1.0 + randn(8, scale=0.1),
                q=randn(2, 9, 4, 8), k=randn(2, 9, 2, 8), v=randn(2, 9, 2, 8), mask=mask,
                cq=randn(3, 5, 6, 8), ck=randn(3, 40, 2, 8), cv=randn(3, 40, 2, 8),
                coff=i32([0, 17, 35]), clen=i32([5, 22, 40]),
                dq=randn(2, 1, 4, 16), dk=randn(2, 40, 1, 16), dv=randn(2, 40, 1, 16),
                doff=i32([9, 39]), dlen=i32([10, 40]),
                bq=randn(2, 4, 6, 8), bk=randn(2, 2, 70, 8), bv=randn(2, 2, 70, 8),
                wk=randn(3, 200, 2, 8), woff=i32([0, 30, 190]), wlen=i32([5, 35, 195]))


def rotary_reference(x, inv_freq, scaling=1.0, starts=None, transpose=False):
    """transformers' apply_rotary_pos_emb on [B, S, H, D] (the first 2n
    features rotated), angles formed in f32 as transformers does."""
    b, s = x.shape[:2]
    n = len(inv_freq)
    positions = torch.arange(s)[None, :].repeat(b, 1)
    if starts is not None:
        positions = positions + torch.tensor(starts.astype(np.int64))[:, None]
    angle = (positions.to(torch.float32)[..., None] *
             torch.tensor(inv_freq, dtype=torch.float32)).to(F64)
    cos, sin = torch.cos(angle) * scaling, torch.sin(angle) * scaling
    if transpose:
        sin = -sin
    cos, sin = cos[:, :, None, :], sin[:, :, None, :]
    x1, x2, rest = x[..., :n], x[..., n:2 * n], x[..., 2 * n:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], dim=-1)


def repeat_heads(x, groups, dim=2):
    return x.repeat_interleave(groups, dim=dim)


def window_keep(offsets, lengths, seq_q, seq_k, window):
    """[B, 1, Sq, Sk]: causal over a cache (cache_keep) and key j within the
    `window` positions up to the query's: j > offset + i - window."""
    i = torch.arange(seq_q)[None, :, None]
    j = torch.arange(seq_k)[None, None, :]
    start = torch.tensor(offsets.astype(np.int64))[:, None, None] if offsets is not None \
        else torch.zeros(1, 1, 1, dtype=torch.long) + (seq_k - seq_q)
    inside = (j > start + i - window)[:, None]
    return cache_keep(offsets if offsets is not None else np.full(1, seq_k - seq_q),
                      lengths if lengths is not None else np.full(1, seq_k), seq_q, seq_k,
                      True) & inside


def softcapped_attention(q, k, v, scale, cap, keep):
    """attention_reference with the scaled scores soft-capped first."""
    q, k, v = (x.transpose(1, 2) for x in (q, k, v))
    scores = cap * torch.tanh(q @ k.transpose(-1, -2) * scale / cap)
    probs = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
    return (probs @ v).transpose(1, 2)


def ref_decoder(x):
    xs = t(x["x"])
    rms = xs / torch.sqrt((xs * xs).mean(-1, keepdim=True) + 1e-5) * t(x["g"])
    keep = t(x["mask"])[:, None, None, :] & causal_keep(9, 9)
    return dict(
        rotary_partial=rotary_reference(xs, [1.0, 0.3, 0.01], 1.25),
        rotary_positions=rotary_reference(xs, [1.0, 0.5, 0.1, 0.001], starts=x["pos"]),
        rotary_transposed=rotary_reference(xs, [1.0, 0.5, 0.1, 0.001], starts=x["pos"],
                                           transpose=True),
        rms=rms,
        gqa_padded=attention_reference(t(x["q"]), repeat_heads(t(x["k"]), 2),
                                       repeat_heads(t(x["v"]), 2), 0.35355339, keep=keep),
        gqa_cache=attention_reference(t(x["cq"]), repeat_heads(t(x["ck"]), 3),
                                      repeat_heads(t(x["cv"]), 3), 0.35355339,
                                      keep=cache_keep(x["coff"], x["clen"], 5, 40, True)),
        mqa_decode=attention_reference(t(x["dq"]), repeat_heads(t(x["dk"]), 4),
                                       repeat_heads(t(x["dv"]), 4), 0.25,
                                       keep=cache_keep(x["doff"], x["dlen"], 1, 40, True)),
        gqa_bhsd=attention_reference(t(x["bq"]), repeat_heads(t(x["bk"]), 2, 1),
                                     repeat_heads(t(x["bv"]), 2, 1), 0.35355339, layout="bhsd"),
        window_padded=attention_reference(t(x["q"]), repeat_heads(t(x["k"]), 2),
                                          repeat_heads(t(x["v"]), 2), 0.35355339,
                                          keep=keep & window_keep(None, None, 9, 9, 5)),
        window_cache=attention_reference(t(x["cq"]), repeat_heads(t(x["wk"]), 3),
                                         repeat_heads(t(x["wk"]), 3), 0.35355339,
                                         keep=window_keep(x["woff"], x["wlen"], 5, 200, 20)),
        softcap=softcapped_attention(t(x["q"]), repeat_heads(t(x["k"]), 2),
                                     repeat_heads(t(x["v"]), 2), 0.35355339, 2.0, keep))


def relative_position_bucket(relative, bidirectional, buckets, max_distance):
    """T5's bucket of each key-minus-query position, as transformers computes it."""
    bucket = torch.zeros_like(relative)
    if bidirectional:
        buckets //= 2
        bucket = bucket + (relative > 0).long() * buckets
        relative = relative.abs()
    else:
        relative = -torch.clamp(relative, max=0)
    exact = buckets // 2
    large = exact + (torch.log(relative.float() / exact) / math.log(max_distance / exact)
                     * (buckets - exact)).long()
    large = torch.clamp(large, max=buckets - 1)
    return bucket + torch.where(relative < exact, relative, large)


def position_bias(table, offsets, seq_q, seq_k, bidirectional, max_distance):
    """[B | 1, H, Sq, Sk]: table[bucket(j - (i + offset[b])), h]; without
    offsets the queries are the last seq_q positions."""
    offsets = torch.tensor([seq_k - seq_q]) if offsets is None \
        else torch.tensor(offsets.astype(np.int64))
    i = torch.arange(seq_q)[None, :, None]
    j = torch.arange(seq_k)[None, None, :]
    buckets = relative_position_bucket(j - (i + offsets[:, None, None]), bidirectional,
                                       table.shape[0], max_distance)
    return t(table)[buckets].permute(0, 3, 1, 2)


def gen_position_bias():
    """T5's relative-position bias inside the kernel: bidirectional with
    padding over several key blocks, causal, and over a KV cache (prefill
    chunks and decode steps at runtime offsets, key lengths of 1 and 0)."""
    i32 = lambda values: np.asarray(values, dtype=np.int32)
    pad = np.ones((2, 70), dtype=np.bool_)
    pad[1, 50:] = False
    return dict(eq=randn(2, 70, 2, 16), ek=randn(2, 70, 2, 16), ev=randn(2, 70, 2, 16), pad=pad,
                et=randn(32, 2), dt=randn(16, 2),
                cq=randn(1, 2, 40, 8), ck=randn(1, 2, 40, 8), cv=randn(1, 2, 40, 8),
                pq=randn(3, 5, 2, 16), pk=randn(3, 200, 2, 16), pv=randn(3, 200, 2, 16),
                poff=i32([0, 61, 195]), plen=i32([5, 66, 200]),
                dq=randn(16, 1, 2, 16), dk=randn(16, 200, 2, 16), dv=randn(16, 200, 2, 16),
                doff=i32([7, 0, 199, 0] + list(range(40, 200, 14))),
                dlen=i32([8, 1, 200, 0] + list(range(41, 201, 14))))


def ref_position_bias(x):
    keep = t(x["pad"])[:, None, None, :]
    return dict(
        encoder=attention_reference(t(x["eq"]), t(x["ek"]), t(x["ev"]), 0.25, keep=keep,
                                    bias=position_bias(x["et"], None, 70, 70, True, 20)),
        causal=attention_reference(t(x["cq"]), t(x["ck"]), t(x["cv"]), 1.0,
                                   keep=causal_keep(40, 40), layout="bhsd",
                                   bias=position_bias(x["dt"], None, 40, 40, False, 24)),
        prefill=attention_reference(t(x["pq"]), t(x["pk"]), t(x["pv"]), 0.25,
                                    keep=cache_keep(x["poff"], x["plen"], 5, 200, True),
                                    bias=position_bias(x["dt"], x["poff"], 5, 200, False, 24)),
        decode=attention_reference(t(x["dq"]), t(x["dk"]), t(x["dv"]), 0.25,
                                   keep=cache_keep(x["doff"], x["dlen"], 1, 200, True),
                                   bias=position_bias(x["dt"], x["doff"], 1, 200, False, 24)))


def gen_int8_weights():
    """Products whose weights the runtime stores as int8: skinny (decode)
    and full GEMMs, both weight layouts, column tails."""
    # xt: a skinny product whose K (160) ends in a partial vector of int8
    # (64 lanes), one of whose rows is zeros.
    xt = randn(2, 160)
    xt[1] = 0
    # xs16: a skinny product of 16 rows, which the kernels take in groups of
    # rows; xlt: the smallest GEMM, with xt's depth tail.
    return dict(x=randn(3, 64), xl=randn(70, 64), xt=xt, xs16=randn(16, 160),
                xlt=randn(17, 160),
                w_kn=randn(64, 96, scale=0.2), w_nk=randn(100, 64, scale=0.2),
                w_tail=randn(40, 160, scale=0.2),
                b=randn(100, scale=0.1),
                # A hand-written square weight whose scales are per input
                # row (groups along its output side): not per channel.
                sq=RNG.integers(-127, 128, size=(64, 64)).astype(np.int8),
                ss=randn(64, 1, scale=0.01))


def rounded_scales(values, scales_dtype):
    """f32 `values` rounded to the torch dtype `scales_dtype` (None: f32)."""
    if scales_dtype is None:
        return values
    return torch.tensor(values).to(scales_dtype).to(torch.float32).numpy()


def int8_dequantized(w, axis, group, scales_dtype=None):
    """w quantized as the runtime does (symmetric int8, a scale per group of
    `group` along `axis`, 0: the whole axis; the scales rounded first to
    `scales_dtype`, bf16 or f16, if given), back in float64."""
    w = np.asarray(w, dtype=np.float32)
    group = group or w.shape[axis]
    moved = np.moveaxis(w, axis, 0)
    grouped = moved.reshape(moved.shape[0] // group, group, -1)
    scale = (np.abs(grouped).max(axis=1, keepdims=True) / np.float32(127)).astype(np.float32)
    scale = rounded_scales(scale, scales_dtype)
    q = np.rint(np.divide(grouped, scale, out=np.zeros_like(grouped), where=scale != 0))
    q = np.clip(q, -127, 127)
    dequantized = (q.astype(np.float64) * scale.astype(np.float64)).reshape(moved.shape)
    return torch.tensor(np.moveaxis(dequantized, 0, axis))


def int4_dequantized(w, axis, group, mins=False, scales_dtype=None):
    """w quantized to 4 bits as the runtime does, in groups of `group` along
    `axis` (its transpose's rows): symmetric as llama.cpp's Q4_0 (the value
    of largest magnitude maps to -8), or with `mins` as Q4_1; scales and
    mins rounded first to `scales_dtype` if given. Back in float64."""
    w = np.asarray(w, dtype=np.float32)
    moved = np.moveaxis(w, axis, 0)
    grouped = moved.reshape(moved.shape[0] // group, group, -1)
    def round_scale(values):
        return rounded_scales(values, scales_dtype)
    if mins:
        low = grouped.min(axis=1, keepdims=True)
        scale = round_scale((grouped.max(axis=1, keepdims=True) - low) / np.float32(15))
        low = round_scale(low)
        offset, shift = low, np.float32(0)
    else:
        at = np.abs(grouped).argmax(axis=1)[:, None, :]
        scale = round_scale(np.take_along_axis(grouped, at, axis=1) / np.float32(-8))
        offset, shift = np.float32(0), np.float32(8)
    level = np.rint(np.divide(grouped - offset, scale, out=np.zeros_like(grouped),
                              where=scale != 0)) + shift
    q = np.clip(level, 0, 15)
    value = (q - shift).astype(np.float64) * scale.astype(np.float64)
    if mins:
        value += low.astype(np.float64)
    return torch.tensor(np.moveaxis(value.reshape(moved.shape), 0, axis))


def ref_int4_weights(x, group, mins=False, scales_dtype=None, int8_dot=False):
    """int8_dot: every product takes int8 activations per block of 32
    (xfmrc --int8-dot on a host with an integer dot product)."""
    activations = int8_block_activations if int8_dot else t
    return ref_narrow_weights(x, *(int4_dequantized(x[n], axis, group, mins, scales_dtype)
                                   for n, axis in (("w_kn", 0), ("w_nk", 1), ("w_tail", 1))),
                              activations, activations)


def int8_activations(x):
    """x's rows quantized as the int8 dot product's skinny products do (a
    scale per row: its largest magnitude over 127, in float32), in float64."""
    x = np.asarray(x, dtype=np.float32)
    largest = np.abs(x).max(axis=1, keepdims=True)
    inverse = np.divide(np.float32(127), largest, out=np.zeros_like(largest), where=largest != 0)
    q = np.rint(x * inverse)
    return torch.tensor(q.astype(np.float64) * (largest / np.float32(127)).astype(np.float64))


def int8_block_activations(x):
    """x's rows quantized as llama.cpp's q8_0 on x86 (and the int8 dot
    product's skinny products of weights in groups of 32): per block of 32,
    the values rounded at 127 / largest magnitude in float32, the scale
    d = largest / 127 rounded to float16; in float64."""
    x = np.asarray(x, dtype=np.float32)
    blocks = x.reshape(x.shape[0], -1, 32)
    largest = np.abs(blocks).max(axis=2, keepdims=True)
    scale = largest / np.float32(127)
    inverse = np.divide(np.float32(127), largest, out=np.zeros_like(largest), where=largest != 0)
    q = np.rint(blocks * inverse)
    out = q.astype(np.float64) * scale.astype(np.float16).astype(np.float64)
    return torch.tensor(out.reshape(x.shape))


def ref_narrow_weights(x, kn, nk, tail, skinny=t, gemm=t):
    """The int8_weights products with the stored weights kn, nk and tail;
    skinny(x) is what the skinny products multiply, gemm(x) the others."""
    square = torch.tensor(x["sq"].astype(np.float64)) * t(x["ss"])
    xs, xl = skinny(x["x"]), gemm(x["xl"])
    return dict(skinny_kn=xs @ kn, skinny_nk=xs @ nk.T + t(x["b"]),
                skinny_tail=skinny(x["xt"]) @ tail.T, skinny_rows=skinny(x["xs16"]) @ tail.T,
                square_rows=t(x["x"]) @ square,
                gemm_kn=xl @ kn, gemm_nk=torch.relu(xl @ nk.T + t(x["b"])),
                gemm_tail=gemm(x["xlt"]) @ tail.T)


def ref_int8_weights(x, group, scales_dtype=None, int8_dot=None):
    """int8_dot: the products take int8 activations (xfmrc --int8-dot on a
    host with an integer dot product): the skinny ones a scale per row where the
    weights have one per channel, the others (and all of grouped weights)
    one per block of 32."""
    skinny = (int8_block_activations if group else int8_activations) if int8_dot else t
    gemm = int8_block_activations if int8_dot else t
    return ref_narrow_weights(x, int8_dequantized(x["w_kn"], 0, group, scales_dtype),
                              int8_dequantized(x["w_nk"], 1, group, scales_dtype),
                              int8_dequantized(x["w_tail"], 1, group, scales_dtype),
                              skinny, gemm)


def gen_integer_groups():
    """Integer weights as inputs, in groups --weight-group-size does not
    make: int8 with a scale per 16 values along the input side (GGUF's
    Q6_K), and 4 bits with a scale and a min per 64 (a skinny product and a
    GEMM each; the GEMMs with a column tail). The int8 values span the
    whole range, rows of B of -128 and 127 meeting a row of A whose values
    all quantize to 127 in magnitude: the products' extremes."""
    levels = RNG.integers(0, 16, size=(40, 128))
    blocks = levels.reshape(40, -1, 2, 16)
    x = randn(3, 96)
    x[0] = np.where(RNG.random(96) < 0.5, -1.0, 1.0).astype(np.float32)
    q = RNG.integers(-128, 128, size=(40, 96)).astype(np.int8)
    q[0], q[1] = -128, 127
    return dict(x=x, xl=randn(70, 96), q=q,
                s=randn(40, 6, scale=0.01),
                x4=randn(3, 128), xl4=randn(20, 128), levels=levels.astype(np.int8),
                q4=(blocks[:, :, 0] | blocks[:, :, 1] << 4).reshape(40, 64).astype(np.uint8)
                .view(np.int8),
                s4=randn(40, 2, scale=0.01), m4=randn(40, 2, scale=0.1))


def ref_integer_groups(x, int8_dot=None):
    """int8_dot: the products take int8 activations per block of 32."""
    activations = int8_block_activations if int8_dot else t
    w = torch.tensor(x["q"].astype(np.float64)) * t(np.repeat(x["s"], 16, axis=1))
    w4 = (torch.tensor(x["levels"].astype(np.float64)) * t(np.repeat(x["s4"], 64, axis=1))
          + t(np.repeat(x["m4"], 64, axis=1)))
    return dict(skinny_g16=activations(x["x"]) @ w.T, gemm_g16=activations(x["xl"]) @ w.T,
                skinny_g64_mins=activations(x["x4"]) @ w4.T,
                gemm_g64_mins=activations(x["xl4"]) @ w4.T)


def ref_bf16_weights(x):
    """The int8_weights products with the weights rounded to bf16."""
    return ref_narrow_weights(x, *(torch.tensor(x[n]).to(torch.bfloat16).to(F64)
                                   for n in ("w_kn", "w_nk", "w_tail")))


def gen_normalization():
    x = randn(6, 50, scale=3.0)
    x[0] *= 1e4 / np.abs(x[0]).max()  # logits of +-1e4
    x[1, :] = -np.inf                 # nothing visible: 0, not NaN
    x[2, 10:] = -np.inf
    h = randn(4, 9, 40) + 1e3 * np.float32(1.0)  # large mean
    h[1] = randn(9, 40, scale=1e-2)
    # Rows wider than a GPU block of 256 threads.
    xw = randn(3, 600, scale=4.0)
    xw[1, 300:] = -np.inf
    hw = (randn(5, 520) + 1e2 * np.float32(1.0)).astype(np.float32)
    return dict(x=x, y=randn(5, 3, 7, scale=5.0), h=h.astype(np.float32), r=randn(4, 9, 40),
                g=1.0 + randn(40, scale=0.1), b=randn(40, scale=0.1), xw=xw, hw=hw,
                gw=1.0 + randn(520, scale=0.1), bw=randn(520, scale=0.1))


def ref_normalization(x):
    def softmax(v, dim):
        out = torch.softmax(v, dim=dim)
        return torch.nan_to_num(out, nan=0.0)

    h, g, b = t(x["h"]), t(x["g"]), t(x["b"])
    ln = lambda v, w, c, eps: torch.nn.functional.layer_norm(v, (40,), w, c, eps)
    s = h + t(x["r"])
    return dict(softmax_last=softmax(t(x["x"]), -1), softmax_first=softmax(t(x["y"]), 0),
                layer_norm=ln(h, g, b, 1e-5), layer_norm_plain=ln(h, None, None, 1e-3),
                add_ln_sum=s, add_ln=ln(s, g, b, 1e-5), softmax_wide=softmax(t(x["xw"]), -1),
                layer_norm_wide=torch.nn.functional.layer_norm(t(x["hw"]), (520,), t(x["gw"]),
                                                               t(x["bw"]), 1e-5))


def gen_linear():
    return dict(x=randn(3, 5, 24), w=randn(24, 36, scale=0.3), wt=randn(36, 24, scale=0.3),
                bias=randn(36, scale=0.5), res=randn(3, 5, 36), a=randn(2, 1, 5, 4),
                m=randn(3, 4, 6), n=randn(2, 3, 6, 4),
                # Several 64 x 64 GPU tiles and 16-deep stages, all with tails.
                xb=randn(2, 70, 40), wb=randn(40, 136, scale=0.2), wbt=randn(136, 40, scale=0.2),
                bb=randn(136, scale=0.5), rb=randn(2, 70, 136), pt=randn(40, 140),
                # A depth that is no multiple of the vector lanes, [N, K] weight.
                xo=randn(7, 13), wo=randn(19, 13, scale=0.3),
                # Enough rows and columns for 128 x 128 GPU tiles (12 x 12),
                # 8-deep stages, all with tails; each factor staged both ways.
                xl=randn(1500, 44), wl=randn(1480, 44, scale=0.2), bl=randn(1480, scale=0.5),
                al=randn(44, 1500), ml=randn(44, 1480, scale=0.2),
                # A few rows (a decode step): depth and columns with tails.
                xs=randn(1, 1, 200), ws=randn(200, 37, scale=0.1), bs=randn(37, scale=0.5),
                rs=randn(1, 1, 37), xm=randn(6, 200), wst=randn(37, 200, scale=0.1),
                # Rows of A 4 KiB long, which the CPU GEMM copies to padded rows.
                xd=randn(19, 1024), wd=randn(1024, 40, scale=0.05),
                # The most rows a skinny product takes, 16-byte loads of a
                # [K, N] weight (N a multiple of 4), K short of the slices.
                xk8=randn(8, 72), wk8=randn(72, 132, scale=0.1), bk8=randn(132, scale=0.5),
                # A batched decode step: 16 rows in groups over blocks of an
                # [N, K] weight, the last block of one row, K with a tail.
                xq=randn(16, 100), wq=randn(45, 100, scale=0.1), bq=randn(45, scale=0.5),
                rq=randn(16, 45))


def ref_linear(x):
    X, W, WT, B, R = (t(x[k]) for k in ("x", "w", "wt", "bias", "res"))
    gelu = torch.nn.functional.gelu
    return dict(linear_bias=X @ W + B, linear_nk=X @ WT.T, fused_relu=torch.relu(X @ W + B),
                fused_gelu=gelu(X @ W + B),
                fused_gelu_tanh_residual=gelu(X @ W + B, approximate="tanh") + R,
                fused_none_nk=X @ WT.T + R,
                matmul_broadcast=t(x["a"]) @ t(x["m"]),
                matmul_transposed=t(x["a"]) @ t(x["n"]).transpose(-1, -2),
                wide_gelu=gelu(t(x["xb"]) @ t(x["wb"]) + t(x["bb"])),
                wide_nk_residual=t(x["xb"]) @ t(x["wbt"]).T + t(x["rb"]),
                wide_tn=t(x["pt"]).T @ t(x["wb"]),
                odd_nk=t(x["xo"]) @ t(x["wo"]).T,
                large_nt=t(x["xl"]) @ t(x["wl"]).T + t(x["bl"]),
                large_tn=t(x["al"]).T @ t(x["ml"]),
                skinny_silu_residual=torch.nn.functional.silu(t(x["xs"]) @ t(x["ws"]) + t(x["bs"]))
                + t(x["rs"]),
                skinny_nk_tanh=torch.tanh(t(x["xm"]) @ t(x["wst"]).T + t(x["bs"])),
                deep_relu=torch.relu(t(x["xd"]) @ t(x["wd"])),
                skinny_kn_gelu=gelu(t(x["xk8"]) @ t(x["wk8"]) + t(x["bk8"])),
                batch_nk_gelu_residual=gelu(t(x["xq"]) @ t(x["wq"]).T + t(x["bq"]),
                                            approximate="tanh") + t(x["rq"]))


def gen_row_invariance():
    """Products of 16 rows and of one, of f32, bf16, int8 (a scale per
    channel) and 4-bit weights (a scale per 32), depths with tails and
    output columns that end in a short block; an f32 product deep enough
    to be swept in chunks of K."""
    return dict(x=randn(16, 100), w=randn(45, 100, scale=0.1), xb=randn(16, 200),
                wb=randn(45, 200, scale=0.1),
                q=RNG.integers(-127, 128, size=(45, 100)).astype(np.int8),
                s=randn(45, 1, scale=0.01), x4=randn(16, 128),
                q4=RNG.integers(-128, 128, size=(45, 64)).astype(np.int8),
                s4=randn(45, 4, scale=0.01), xc=randn(16, 610), wc=randn(45, 610, scale=0.1))


def ref_row_invariance(x):
    # The model subtracts the one-row product from the batch's row: zeros,
    # bit for bit.
    alike = {name: torch.zeros(1, 45, dtype=torch.float64)
             for name in ("f32_alike", "bf16_alike", "int8_alike", "int4_alike",
                          "chunked_alike")}
    return dict(alike, chunked=t(x["xc"]) @ t(x["wc"]).T)


def gen_gated_linear():
    """Gated products (xfmr.gated_linear): a decode step's row, a batch of
    16 rows deep enough to be swept in chunks, a GEMM of 80 rows, a skinny
    [K, N] product, int8 weights with a scale per channel, bf16 weights;
    int8 weights in groups of 32 (5 and 40 rows) and 4-bit ones."""
    def ints(*shape):
        return RNG.integers(-127, 128, size=shape).astype(np.int8)
    return dict(x1=randn(1, 200), wg1=randn(46, 200, scale=0.1), wu1=randn(46, 200, scale=0.1),
                xc=randn(16, 610), wgc=randn(46, 610, scale=0.05), wuc=randn(46, 610, scale=0.05),
                bgc=randn(46, scale=0.5), buc=randn(46, scale=0.5),
                xp=randn(2, 40, 72), wgp=randn(136, 72, scale=0.2), wup=randn(136, 72, scale=0.2),
                bgp=randn(136, scale=0.5), bup=randn(136, scale=0.5),
                xk=randn(4, 72), wgk=randn(72, 132, scale=0.2), wuk=randn(72, 132, scale=0.2),
                x8=randn(5, 100), qg=ints(46, 100), sg=randn(46, 1, scale=0.01),
                qu=ints(46, 100), su=randn(46, 1, scale=0.01),
                xb=randn(3, 200), wgb=randn(46, 200, scale=0.1), wub=randn(46, 200, scale=0.1),
                xq=randn(5, 128), xqq=randn(40, 128), qg8=ints(46, 128),
                sg8=randn(46, 4, scale=0.01), qu8=ints(46, 128), su8=randn(46, 4, scale=0.01),
                qg4=ints(46, 64), sg4=randn(46, 4, scale=0.01), qu4=ints(46, 64),
                su4=randn(46, 4, scale=0.01))


def ref_gated_linear(x):
    gelu = torch.nn.functional.gelu
    silu = torch.nn.functional.silu

    def gated(name, gate, up, act, gate_bias=None, up_bias=None):
        X = t(x[name])
        g, u = X @ t(x[gate]).T, X @ t(x[up]).T
        if gate_bias:
            g, u = g + t(x[gate_bias]), u + t(x[up_bias])
        return act(g) * u

    def tanh_gelu(v):
        return gelu(v, approximate="tanh")

    def bf16(name):
        return torch.tensor(x[name]).to(torch.bfloat16).to(F64)

    xk = t(x["xk"])
    w8g, w8u = t(x["qg"]) * t(x["sg"]), t(x["qu"]) * t(x["su"])
    return dict(one_row=gated("x1", "wg1", "wu1", silu),
                batch_chunked=gated("xc", "wgc", "wuc", tanh_gelu, "bgc", "buc"),
                batch_alike=torch.zeros(1, 46, dtype=F64),
                gemm=gated("xp", "wgp", "wup", silu, "bgp", "bup"),
                skinny_kn=gelu(xk @ t(x["wgk"])) * (xk @ t(x["wuk"])),
                int8_rows=silu(t(x["x8"]) @ w8g.T) * (t(x["x8"]) @ w8u.T),
                bf16_rows=(t(x["xb"]) @ bf16("wgb").T) * (t(x["xb"]) @ bf16("wub").T),
                # Against the unfused products of the same kernels.
                int8_groups_alike=torch.zeros(5, 46, dtype=F64),
                int8_gemm_alike=torch.zeros(40, 46, dtype=F64),
                int4_alike=torch.zeros(5, 46, dtype=F64))


def gen_elementwise():
    targets = RNG.integers(0, 50, (3, 7)).astype(np.int32)
    targets[0, :3] = 3  # ignore_index
    return dict(ids=RNG.integers(0, 50, (3, 7)).astype(np.int32), table=randn(50, 16),
                pos=randn(12, 16), x=randn(4, 6, 10, scale=2.0), y=randn(6, 1),
                s=randn(2, 5, 5), logits=randn(3, 7, 50, scale=3.0), targets=targets,
                none=np.full((2, 3), -1, dtype=np.int32))


def ref_elementwise(x):
    e = t(x["table"])[t(x["ids"]).long()] * 4.0
    position = torch.arange(7, dtype=F64)[:, None]
    div = torch.exp(torch.arange(0, 16, 2, dtype=F64) * (-math.log(10000.0) / 16))
    pe = torch.zeros(7, 16, dtype=F64)
    pe[:, 0::2] = torch.sin(position * div)
    pe[:, 1::2] = torch.cos(position * div)
    X, Y = t(x["x"]), t(x["y"])
    arith = torch.maximum((X - Y) * X / (Y.abs() + 1.0), X)
    select = torch.where(causal_keep(5, 5), t(x["s"]), torch.tensor(-3.0, dtype=F64))
    ce = torch.nn.functional.cross_entropy(t(x["logits"]).reshape(-1, 50),
                                           t(x["targets"]).long().reshape(-1), ignore_index=3)
    gelu = torch.nn.functional.gelu
    return dict(embed=e, sinusoidal=e + pe, learned=e + t(x["pos"])[:7], gelu=gelu(X),
                gelu_tanh=gelu(X, approximate="tanh"), relu=torch.relu(X), dropout=X,
                arith=arith, select_causal=select, reduce_max=X.amax(1, keepdim=True),
                reduce_mean=X.mean(2, keepdim=True), reduce_sum=X.sum(0, keepdim=True),
                transpose_reshape=X.transpose(0, 1).reshape(6, 40), cross_entropy=ce,
                cross_entropy_ignored=torch.tensor(0.0, dtype=F64))


def gen_tutorial():
    mask = (RNG.random((2, 1, 20, 20)) < 0.7).astype(np.int32)
    mask[:, :, :, 0] = 1  # every query sees at least one key
    return dict(q=randn(2, 3, 20, 16), k=randn(2, 3, 20, 16), v=randn(2, 3, 20, 16), mask=mask)


def ref_tutorial(x):
    keep = t(x["mask"]) != 0
    return dict(o=attention_reference(t(x["q"]), t(x["k"]), t(x["v"]), 0.25, keep=keep,
                                      layout="bhsd"))


def gen_backward():
    pad = np.ones((2, 150), dtype=np.bool_)
    pad[1, 100:] = False
    zt = RNG.integers(0, 37, (3, 9)).astype(np.int32)
    zt[1, 2:6] = -100  # ignore_index
    return dict(q=randn(2, 150, 2, 32), k=randn(2, 150, 2, 32), v=randn(2, 150, 2, 32), pad=pad,
                # Head dim 72: the GPU kernels' head-dim loops stay loops
                # (32: unrolled).
                cq=randn(1, 2, 40, 72), ck=randn(1, 2, 100, 72), cv=randn(1, 2, 100, 72),
                bias=randn(1, 1, 40, 100), x=randn(3, 37, 48), w1=randn(48, 80, scale=0.2),
                b1=randn(80, scale=0.1), w2=randn(48, 80, scale=0.2),
                gamma=1.0 + randn(48, scale=0.1), beta=randn(48, scale=0.1),
                r1=randn(2, 150, 2, 32), r2=randn(1, 2, 40, 72), r3=randn(3, 37, 48),
                y=randn(5, 21), gamma2=1.0 + randn(21, scale=0.1), beta2=randn(21, scale=0.1),
                r4=randn(5, 21), r5=randn(5, 21), z=randn(3, 9, 37, scale=3.0), zt=zt,
                wq=randn(1, 300, 2, 16), wk=randn(1, 300, 2, 16), wv=randn(1, 300, 2, 16),
                r6=randn(1, 300, 2, 16, scale=0.2), wq2=randn(1, 150, 2, 16),
                r7=randn(1, 150, 2, 16, scale=0.2))


def ref_backward(x):
    """The loss of test/e2e/grad/kernels.mlir and its gradients by autograd."""
    leaves = {name: t(x[name]).requires_grad_() for name in
              ("q", "k", "v", "cq", "ck", "cv", "x", "w1", "b1", "w2", "gamma", "beta", "y",
               "gamma2", "beta2", "z", "wq", "wk", "wv", "wq2")}
    p = leaves
    keep = t(x["pad"])[:, None, None, :] & causal_keep(150, 150)
    a = attention_reference(p["q"], p["k"], p["v"], 0.17677669, keep=keep)
    b = attention_reference(p["cq"], p["ck"], p["cv"], 0.25, keep=causal_keep(40, 100),
                            bias=t(x["bias"]), layout="bhsd")
    h = torch.nn.functional.gelu(p["x"] @ p["w1"] + p["b1"], approximate="tanh")
    n = torch.nn.functional.layer_norm(p["x"] + h @ p["w2"].T, (48,), p["gamma"], p["beta"], 1e-5)
    n2 = torch.nn.functional.layer_norm(p["y"], (21,), p["gamma2"], p["beta2"], 1e-5)
    n3 = torch.nn.functional.layer_norm(p["y"], (21,), eps=1e-3)
    # Soft-capped at 1 (scores of these inputs spread about 1), keys in a
    # window of 20.
    i, j = torch.arange(300)[:, None], torch.arange(300)[None, :]
    w = softcapped_attention(p["wq"], p["wk"], p["wv"], 0.25, 1.0, (j <= i) & (j > i - 20))
    # The last 150 queries (bottom-right aligned), not capped.
    i2 = i[150:]
    w2 = attention_reference(p["wq2"], p["wk"], p["wv"], 0.25, keep=(j <= i2) & (j > i2 - 20))
    loss = (w * t(x["r6"])).sum() + (w2 * t(x["r7"])).sum() + (a * t(x["r1"])).sum() + \
        (b * t(x["r2"])).sum() + \
        (torch.softmax(n, -1) * t(x["r3"])).sum() + (torch.softmax(n2, -1) * t(x["r4"])).sum() + \
        (n3 * t(x["r5"])).sum() + \
        torch.nn.functional.cross_entropy(p["z"].reshape(-1, 37), t(x["zt"]).long().reshape(-1))
    loss.backward()
    out = {"loss": loss.detach()}
    out.update({f"grad:{name}": leaf.grad for name, leaf in leaves.items()})
    return out


def gen_low_precision():
    # f32 on disk: the runner converts to the model's bf16 / f16 at load.
    x = dict(x=randn(2, 40, 64), w=randn(64, 96, scale=0.15), b=randn(96, scale=0.2),
             g=1.0 + randn(96, scale=0.1), beta=randn(96, scale=0.1), q=randn(1, 48, 2, 32),
             k=randn(1, 48, 2, 32), v=randn(1, 48, 2, 32), xk=randn(2, 40, 70),
             wnk=randn(130, 70, scale=0.12), r=randn(2, 40, 130), pt=randn(70, 80),
             wk=randn(70, 48, scale=0.12), cq=randn(2, 70, 2, 36), ck=randn(2, 130, 2, 36),
             cv=randn(2, 130, 2, 36), lq=randn(1, 2, 150, 64), lk=randn(1, 2, 150, 64),
             lv=randn(1, 2, 150, 64), cb=randn(2, 1, 70, 130), ra=randn(2, 40, 96),
             hq=randn(1, 200, 2, 128), hk=randn(1, 200, 2, 128), hv=randn(1, 200, 2, 128),
             eq=randn(1, 140, 2, 100), ek=randn(1, 140, 2, 100), ev=randn(1, 140, 2, 100),
             wq=randn(1, 90, 2, 160), wk2=randn(1, 90, 2, 160), wv=randn(1, 90, 2, 160),
             # A few rows (a decode step) against w ([K, N]) and wnk ([N, K]).
             xs=randn(3, 64), xs2=randn(3, 70),
             # ... and against a deeper [N, K] (whole steps of a skinny product and a tail).
             xs3=randn(3, 200), wdeep=randn(40, 200, scale=0.07))
    pad = np.ones((2, 130), dtype=np.bool_)
    pad[1, 100:] = False
    x["pad"] = pad
    return {name + suffix: value for name, value in x.items() for suffix in ("_bf16", "_f16")}


def ref_low_precision(x):
    """What a PyTorch model in bf16 / f16 computes: every op in (at least)
    f32 on the stored values, every result stored in the low precision."""
    result = {}
    for suffix, dtype in (("_bf16", torch.bfloat16), ("_f16", torch.float16)):
        def stored(value):
            return value.to(dtype).to(F64)

        (X, W, B, G, BETA, Q, K, V, XK, WNK, R, PT, WK, CQ, CK, CV, LQ, LK, LV, CB, RA, HQ, HK, HV,
         EQ, EK, EV, WQ, WK2, WV, XS, XS2, XS3, WDEEP) = (
            stored(t(x[n + suffix]))
            for n in ("x", "w", "b", "g", "beta", "q", "k", "v", "xk", "wnk", "r", "pt", "wk",
                      "cq", "ck", "cv", "lq", "lk", "lv", "cb", "ra", "hq", "hk", "hv",
                      "eq", "ek", "ev", "wq", "wk2", "wv", "xs", "xs2", "xs3", "wdeep"))
        h = stored(torch.nn.functional.gelu(X @ W + B))
        keep = causal_keep(48, 48)
        attention = attention_reference(Q, K, V, 1 / math.sqrt(32), keep=keep)
        result.update({"linear" + suffix: h, "softmax" + suffix: stored(torch.softmax(h, -1)),
                       "layer_norm" + suffix: stored(
                           torch.nn.functional.layer_norm(h, (96,), G, BETA, 1e-5)),
                       "attention" + suffix: stored(attention),
                       "nk_residual" + suffix: stored(XK @ WNK.T + R),
                       "tn" + suffix: stored(PT.T @ WK),
                       "cross_padding_bias" + suffix: stored(attention_reference(
                           CQ, CK, CV, 1 / 6, keep=t(x["pad" + suffix])[:, None, None, :],
                           bias=CB)),
                       "causal_long" + suffix: stored(attention_reference(
                           LQ, LK, LV, 0.125, keep=causal_keep(150, 150), layout="bhsd")),
                       "head_dim_128" + suffix: stored(attention_reference(
                           HQ, HK, HV, 1 / math.sqrt(128))),
                       "head_dim_100_causal" + suffix: stored(attention_reference(
                           EQ, EK, EV, 0.1, keep=causal_keep(140, 140))),
                       "head_dim_160_causal" + suffix: stored(attention_reference(
                           WQ, WK2, WV, 0.08, keep=causal_keep(90, 90))),
                       "sum" + suffix: stored(h + RA),
                       "add_norm" + suffix: stored(
                           torch.nn.functional.layer_norm(h + RA, (96,), G, BETA, 1e-5)),
                       "skinny_kn" + suffix: stored(torch.nn.functional.gelu(XS @ W + B)),
                       "skinny_nk" + suffix: stored(XS2 @ WNK.T),
                       "skinny_deep" + suffix: stored(XS3 @ WDEEP.T)})
    return result


def gen_long_attention():
    # f32 on disk; the model's bf16 at load.
    return dict(q=randn(1, 600, 2, 64), k=randn(1, 600, 2, 64), v=randn(1, 600, 2, 64),
                cq=randn(1, 520, 1, 64), ck=randn(1, 600, 1, 64), cv=randn(1, 600, 1, 64),
                eq=randn(1, 400, 1, 36), ek=randn(1, 400, 1, 36), ev=randn(1, 400, 1, 36))


def ref_long_attention(x):
    def stored(value):
        return value.to(torch.bfloat16).to(F64)

    q, k, v, cq, ck, cv, eq, ek, ev = (stored(t(x[n])) for n in
                                       ("q", "k", "v", "cq", "ck", "cv", "eq", "ek", "ev"))
    return {"long": stored(attention_reference(q, k, v, 0.125)),
            "long_causal": stored(attention_reference(cq, ck, cv, 0.125,
                                                      keep=causal_keep(520, 600))),
            "long_causal_elements": stored(attention_reference(eq, ek, ev, 1 / 6,
                                                               keep=causal_keep(400, 400)))}


def gen_mma_gemm():
    return dict(x=randn(1500, 72), w=randn(1480, 72, scale=0.12), b=randn(1480, scale=0.2),
                at=randn(72, 1500), m=randn(72, 1480, scale=0.12), xd=randn(200, 344),
                wd=randn(136, 344, scale=0.05))


def ref_mma_gemm(x):
    """bf16 factors, f32 products, bf16 results."""
    def stored(value):
        return value.to(torch.bfloat16).to(F64)

    X, W, B, AT, M, XD, WD = (stored(t(x[n])) for n in ("x", "w", "b", "at", "m", "xd", "wd"))
    return {"nt_wide": stored(X @ W.T + B), "tn_wide": stored(AT.T @ M), "nt_deep": stored(XD @ WD.T)}


def gen_backward_low_precision():
    pad = np.ones((2, 150), dtype=np.bool_)
    pad[1, 100:] = False
    x = dict(q=randn(2, 150, 2, 64), k=randn(2, 150, 2, 64), v=randn(2, 150, 2, 64),
             r1=randn(2, 150, 2, 64), cq=randn(1, 2, 70, 36), ck=randn(1, 2, 130, 36),
             cv=randn(1, 2, 130, 36), bias=randn(1, 1, 70, 130), r2=randn(1, 2, 70, 36), pad=pad,
             lq=randn(1, 2, 100, 80), lk=randn(1, 2, 150, 80), lv=randn(1, 2, 150, 80),
             r3=randn(1, 2, 100, 80), hq=randn(1, 2, 90, 128), hk=randn(1, 2, 90, 128),
             hv=randn(1, 2, 90, 128), r4=randn(1, 2, 90, 128))
    return {name + suffix: value for name, value in x.items() for suffix in ("_bf16", "_f16")}


def ref_backward_low_precision(x, suffix, dtype):
    """The loss of test/e2e/grad/low-precision.mlir and its gradients by
    autograd, each forward result rounded as the model stores it."""
    def stored(value):
        return value.to(dtype).to(F64)

    leaves = {name: stored(t(x[name + suffix])).requires_grad_()
              for name in ("q", "k", "v", "cq", "ck", "cv", "lq", "lk", "lv", "hq", "hk", "hv")}
    p = leaves
    keep = t(x["pad" + suffix])[:, None, None, :] & causal_keep(150, 150)
    a = stored(attention_reference(p["q"], p["k"], p["v"], 0.125, keep=keep))
    b = stored(attention_reference(p["cq"], p["ck"], p["cv"], 0.16666667,
                                   bias=stored(t(x["bias" + suffix])), layout="bhsd"))
    s1 = stored(stored(a * stored(t(x["r1" + suffix]))).sum())
    s2 = stored(stored(b * stored(t(x["r2" + suffix]))).sum())
    c = stored(attention_reference(p["lq"], p["lk"], p["lv"], 0.125, keep=causal_keep(100, 150),
                                   layout="bhsd"))
    s3 = stored(stored(c * stored(t(x["r3" + suffix]))).sum())
    d = stored(attention_reference(p["hq"], p["hk"], p["hv"], 0.09, keep=causal_keep(90, 90),
                                   layout="bhsd"))
    s4 = stored(stored(d * stored(t(x["r4" + suffix]))).sum())
    loss = stored(stored(stored(s1 + s2) + s3) + s4)
    loss.backward()
    out = {"loss": loss.detach()}
    out.update({f"grad:{name}{suffix}": leaf.grad for name, leaf in leaves.items()})
    return out


def gen_long_backward():
    # f32 on disk; the model's bf16 at load.
    return dict(q=randn(1, 520, 1, 64), k=randn(1, 600, 1, 64), v=randn(1, 600, 1, 64),
                r1=randn(1, 520, 1, 64), wq=randn(1, 300, 1, 96), wk=randn(1, 300, 1, 96),
                wv=randn(1, 300, 1, 96), r2=randn(1, 300, 1, 96))


def ref_long_backward(x):
    """The loss of test/e2e/grad/long-attention.mlir and its gradients by
    autograd, each forward result rounded to bf16 as the model stores it."""
    def stored(value):
        return value.to(torch.bfloat16).to(F64)

    p = {name: stored(t(x[name])).requires_grad_() for name in ("q", "k", "v", "wq", "wk", "wv")}
    a = stored(attention_reference(p["q"], p["k"], p["v"], 0.125, keep=causal_keep(520, 600)))
    b = stored(attention_reference(p["wq"], p["wk"], p["wv"], 0.1))
    s1 = stored(stored(a * stored(t(x["r1"]))).sum())
    s2 = stored(stored(b * stored(t(x["r2"]))).sum())
    loss = stored(s1 + s2)
    loss.backward()
    out = {"loss": loss.detach()}
    out.update({f"grad:{name}": leaf.grad for name, leaf in p.items()})
    return out


CASES = {"attention": (gen_attention, ref_attention),
         "cache_attention": (gen_cache_attention, ref_cache_attention),
         "cache_attention_bf16": (gen_cache_attention,
                                  lambda x: ref_cache_attention(x, torch.bfloat16)),
         "position_bias": (gen_position_bias, ref_position_bias),
         "int8_weights": (gen_int8_weights, lambda x: ref_int8_weights(x, 0)),
         "int8_weights_32": (gen_int8_weights, lambda x: ref_int8_weights(x, 32)),
         "int8_weights_bf16_scales": (gen_int8_weights,
                                      lambda x: ref_int8_weights(x, 0, torch.bfloat16)),
         "int8_weights_32_bf16_scales": (gen_int8_weights,
                                         lambda x: ref_int8_weights(x, 32, torch.bfloat16)),
         "int8_weights_32_f16_scales": (gen_int8_weights,
                                        lambda x: ref_int8_weights(x, 32, torch.float16)),
         "bf16_weights": (gen_int8_weights, ref_bf16_weights),
         "integer_groups": (gen_integer_groups, ref_integer_groups),
         "int4_weights_32": (gen_int8_weights, lambda x: ref_int4_weights(x, 32)),
         "int4_weights_32_mins": (gen_int8_weights, lambda x: ref_int4_weights(x, 32, True)),
         "int4_weights_32_mins_bf16": (gen_int8_weights,
                                       lambda x: ref_int4_weights(x, 32, True, torch.bfloat16)),
         "int4_weights_32_f16": (gen_int8_weights,
                                 lambda x: ref_int4_weights(x, 32, False, torch.float16)),
         "backward": (gen_backward, ref_backward),
         "backward_bf16": (gen_backward_low_precision,
                           lambda x: ref_backward_low_precision(x, "_bf16", torch.bfloat16)),
         "backward_f16": (gen_backward_low_precision,
                          lambda x: ref_backward_low_precision(x, "_f16", torch.float16)),
         "tutorial": (gen_tutorial, ref_tutorial),
         "normalization": (gen_normalization, ref_normalization),
         "linear": (gen_linear, ref_linear),
         "row_invariance": (gen_row_invariance, ref_row_invariance),
         "gated_linear": (gen_gated_linear, ref_gated_linear),
         # The GPU's products are not computed alike whatever the rows.
         "gated_linear_gpu": (gen_gated_linear, ref_gated_linear),
         # Integer dot products: only the comparisons with the unfused
         # products (the activations are rounded to int8).
         "gated_linear_dot": (gen_gated_linear,
                              lambda x: {name: value for name, value in ref_gated_linear(x).items()
                                         if name.endswith("_alike")}),
         "elementwise": (gen_elementwise, ref_elementwise),
         "low_precision": (gen_low_precision, ref_low_precision),
         "long_attention": (gen_long_attention, ref_long_attention),
         "long_backward": (gen_long_backward, ref_long_backward),
         "mma_gemm": (gen_mma_gemm, ref_mma_gemm),
         "decoder": (gen_decoder, ref_decoder)}
# The products of integer weights on integer dot products (vpdpbusd or
# vpmaddubsw: every product takes int8 activations): NAME_dot.
DOT_CASES = {
    "int8_weights": (gen_int8_weights, lambda x, dot: ref_int8_weights(x, 0, int8_dot=dot)),
    "int8_weights_bf16_scales": (
        gen_int8_weights, lambda x, dot: ref_int8_weights(x, 0, torch.bfloat16, int8_dot=dot)),
    "int8_weights_32": (gen_int8_weights, lambda x, dot: ref_int8_weights(x, 32, int8_dot=dot)),
    "int8_weights_32_bf16_scales": (
        gen_int8_weights, lambda x, dot: ref_int8_weights(x, 32, torch.bfloat16, int8_dot=dot)),
    "int8_weights_32_f16_scales": (
        gen_int8_weights, lambda x, dot: ref_int8_weights(x, 32, torch.float16, int8_dot=dot)),
    "integer_groups": (gen_integer_groups, lambda x, dot: ref_integer_groups(x, dot)),
    "int4_weights_32": (gen_int8_weights, lambda x, dot: ref_int4_weights(x, 32, int8_dot=dot)),
    "int4_weights_32_mins": (gen_int8_weights,
                             lambda x, dot: ref_int4_weights(x, 32, True, int8_dot=dot)),
    "int4_weights_32_f16": (
        gen_int8_weights, lambda x, dot: ref_int4_weights(x, 32, False, torch.float16, int8_dot=dot)),
    "int4_weights_32_mins_f16": (
        gen_int8_weights, lambda x, dot: ref_int4_weights(x, 32, True, torch.float16, int8_dot=dot)),
}
for name, (gen, ref) in DOT_CASES.items():
    CASES[name + "_dot"] = (gen, lambda x, ref=ref: ref(x, True))
TOLERANCE = 2e-5
# The reference stores the same roundings, so only values that land near a
# rounding boundary may differ, by one unit in the last place: 2^-8 relative
# for bf16 (8 significant bits), 2^-11 for f16; two units allowed.
# The gradients of the low-precision attentions too, though the reference
# cannot store the backward's own roundings (see test/e2e/grad/low-precision.mlir).
# Computed in float64 (the reference lowering, for --f64 inputs): only the
# order of the sums differs.
F64_TOLERANCE = 1e-12
CASE_TOLERANCE = {"low_precision": {"_bf16": 8e-3, "_f16": 1e-3}, "mma_gemm": {"": 8e-3},
                  "cache_attention_bf16": {"": 8e-3},
                  "long_attention": {"": 8e-3}, "long_backward": {"": 8e-3},
                  "backward_bf16": {"": 8e-3}, "backward_f16": {"": 1e-3},
                  "row_invariance": {"_alike": 0.0}, "gated_linear": {"_alike": 0.0},
                  "gated_linear_dot": {"_alike": 0.0}}


def main():
    command, case = sys.argv[1], sys.argv[2]
    generate, reference = CASES[case]
    if command == "generate":
        inputs = generate()
        if "--f64" in sys.argv[4:]:
            inputs = {name: value.astype(np.float64) if value.dtype == np.float32 else value
                      for name, value in inputs.items()}
        safetensors_io.write(sys.argv[3], inputs)
        return 0
    inputs = safetensors_io.read(sys.argv[3])
    outputs = safetensors_io.read(sys.argv[4])
    failed = False
    for name, want in reference(inputs).items():
        want = want.numpy()
        got = outputs[name]
        if got.shape != want.shape:
            print(f"FAIL: {name}: shape {got.shape}, expected {want.shape}")
            failed = True
            continue
        if not np.all(np.isfinite(got)):
            print(f"FAIL: {name}: non-finite values")
            failed = True
            continue
        error = float(np.max(np.abs(got - want))) if want.size else 0.0
        scale = max(1.0, float(np.max(np.abs(want))) if want.size else 0.0)
        tolerance = next((value for suffix, value in CASE_TOLERANCE.get(case, {}).items()
                          if name.endswith(suffix)), TOLERANCE)
        if got.dtype == np.float64:
            tolerance = min(tolerance, F64_TOLERANCE)
        ok = error <= tolerance * scale
        failed |= not ok
        print(f"{'PASS' if ok else 'FAIL'}: {name}: max error {error:.2e} "
              f"(scale {scale:.2e}, tolerance {tolerance:g})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
