// T5's relative-position bias applied inside fused_attention (the band form
// xfmr-fuse-attention makes of it) against softmax(q k^T * scale + bias,
// masked) v in float64 with transformers' buckets: bidirectional with padding
// over two key blocks, causal, and over a KV cache: prefill chunks and decode
// steps of sixteen sequences (a task holds both heads of one) at runtime query offsets, key
// lengths of 1 and 0 (a fully masked row).
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %testlib/ops.py generate position_bias %t/inputs.safetensors
// RUN: xfmr-opt %s --xfmr-fuse-attention | FileCheck %s --check-prefix=BAND
// BAND-COUNT-4: position_bias(
// BAND-NOT: attn_bias
// RUN: xfmrc %s -o %t/model
// RUN: %t/model --inputs=%t/inputs.safetensors --output=%t/outputs.safetensors
// RUN: %python %testlib/ops.py check position_bias %t/inputs.safetensors %t/outputs.safetensors | FileCheck %s
// RUN: xfmrc %s --vector-lanes=16 -o %t/model16
// RUN: %t/model16 --inputs=%t/inputs.safetensors --output=%t/outputs16.safetensors
// RUN: %python %testlib/ops.py check position_bias %t/inputs.safetensors %t/outputs16.safetensors | FileCheck %s
// The GPU kernels, emulated.
// RUN: xfmrc %s --emulate-gpu-kernels -o %t/gpu-emulated
// RUN: %t/gpu-emulated --inputs=%t/inputs.safetensors --output=%t/outputs-gpu.safetensors
// RUN: %python %testlib/ops.py check position_bias %t/inputs.safetensors %t/outputs-gpu.safetensors | FileCheck %s
// The reference lowering (convert-xfmr-to-linalg, for the element types no
// kernel takes): the same attentions in f64, within 1e-12.
// RUN: sed 's/xf32>/xf64>/g' %s > %t/f64.mlir
// RUN: %python %testlib/ops.py generate position_bias %t/inputs64.safetensors --f64
// RUN: xfmrc %t/f64.mlir -o %t/model64
// RUN: %t/model64 --inputs=%t/inputs64.safetensors --output=%t/outputs64.safetensors
// RUN: %python %testlib/ops.py check position_bias %t/inputs64.safetensors %t/outputs64.safetensors | FileCheck %s
// CHECK: PASS: encoder
// CHECK: PASS: causal
// CHECK: PASS: prefill
// CHECK: PASS: decode

func.func @forward(
    %eq: tensor<2x70x2x16xf32> {xfmr.input = "eq"}, %ek: tensor<2x70x2x16xf32> {xfmr.input = "ek"},
    %ev: tensor<2x70x2x16xf32> {xfmr.input = "ev"}, %pad: tensor<2x70xi1> {xfmr.input = "pad"},
    %et: tensor<32x2xf32> {xfmr.input = "et"}, %dt: tensor<16x2xf32> {xfmr.input = "dt"},
    %cq: tensor<1x2x40x8xf32> {xfmr.input = "cq"}, %ck: tensor<1x2x40x8xf32> {xfmr.input = "ck"},
    %cv: tensor<1x2x40x8xf32> {xfmr.input = "cv"},
    %pq: tensor<3x5x2x16xf32> {xfmr.input = "pq"}, %pk: tensor<3x200x2x16xf32> {xfmr.input = "pk"},
    %pv: tensor<3x200x2x16xf32> {xfmr.input = "pv"}, %poff: tensor<3xi32> {xfmr.input = "poff"},
    %plen: tensor<3xi32> {xfmr.input = "plen"},
    %dq: tensor<16x1x2x16xf32> {xfmr.input = "dq"}, %dk: tensor<16x200x2x16xf32> {xfmr.input = "dk"},
    %dv: tensor<16x200x2x16xf32> {xfmr.input = "dv"}, %doff: tensor<16xi32> {xfmr.input = "doff"},
    %dlen: tensor<16xi32> {xfmr.input = "dlen"})
    -> (tensor<2x70x2x16xf32> {xfmr.output = "encoder"},
        tensor<1x2x40x8xf32> {xfmr.output = "causal"},
        tensor<3x5x2x16xf32> {xfmr.output = "prefill"},
        tensor<16x1x2x16xf32> {xfmr.output = "decode"}) {
  %eb = xfmr.relative_position_bias %et {max_distance = 20 : i64, bidirectional}
        : (tensor<32x2xf32>) -> tensor<1x2x70x70xf32>
  %e = xfmr.fused_attention %eq, %ek, %ev padding_mask(%pad) attn_bias(%eb) {scale = 0.25 : f64}
       : (tensor<2x70x2x16xf32>, tensor<2x70x2x16xf32>, tensor<2x70x2x16xf32>, tensor<2x70xi1>, tensor<1x2x70x70xf32>) -> tensor<2x70x2x16xf32>
  %cb = xfmr.relative_position_bias %dt {max_distance = 24 : i64}
        : (tensor<16x2xf32>) -> tensor<1x2x40x40xf32>
  %c = xfmr.fused_attention %cq, %ck, %cv attn_bias(%cb) {causal, scale = 1.0 : f64, layout = #xfmr.layout<bhsd>}
       : (tensor<1x2x40x8xf32>, tensor<1x2x40x8xf32>, tensor<1x2x40x8xf32>, tensor<1x2x40x40xf32>) -> tensor<1x2x40x8xf32>
  %pb = xfmr.relative_position_bias %dt query_offset(%poff) {max_distance = 24 : i64}
        : (tensor<16x2xf32>, tensor<3xi32>) -> tensor<3x2x5x200xf32>
  %p = xfmr.fused_attention %pq, %pk, %pv attn_bias(%pb) query_offset(%poff) key_length(%plen) {causal, scale = 0.25 : f64}
       : (tensor<3x5x2x16xf32>, tensor<3x200x2x16xf32>, tensor<3x200x2x16xf32>, tensor<3x2x5x200xf32>, tensor<3xi32>, tensor<3xi32>) -> tensor<3x5x2x16xf32>
  %db = xfmr.relative_position_bias %dt query_offset(%doff) {max_distance = 24 : i64}
        : (tensor<16x2xf32>, tensor<16xi32>) -> tensor<16x2x1x200xf32>
  %d = xfmr.fused_attention %dq, %dk, %dv attn_bias(%db) query_offset(%doff) key_length(%dlen) {causal, scale = 0.25 : f64}
       : (tensor<16x1x2x16xf32>, tensor<16x200x2x16xf32>, tensor<16x200x2x16xf32>, tensor<16x2x1x200xf32>, tensor<16xi32>, tensor<16xi32>) -> tensor<16x1x2x16xf32>
  return %e, %c, %p, %d : tensor<2x70x2x16xf32>, tensor<1x2x40x8xf32>, tensor<3x5x2x16xf32>, tensor<16x1x2x16xf32>
}
