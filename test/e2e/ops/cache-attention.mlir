// fused_attention over a KV cache (query_offset, key_length: runtime values per sequence)
// against softmax(q k^T * scale, masked) v in float64: a prefill chunk at three offsets,
// decode steps of eight sequences (whose heads the CPU kernel splits between tasks) with key
// lengths of 1 and 0 (a fully masked row gives 0), and non-causal attention over a partially
// filled cache; caches of several key blocks.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %testlib/ops.py generate cache_attention %t/inputs.safetensors
// RUN: xfmrc %s -o %t/model
// RUN: %t/model --inputs=%t/inputs.safetensors --output=%t/outputs.safetensors
// RUN: %python %testlib/ops.py check cache_attention %t/inputs.safetensors %t/outputs.safetensors | FileCheck %s
// The AVX-512 code shape (16 lanes).
// RUN: xfmrc %s --vector-lanes=16 -o %t/model16
// RUN: %t/model16 --inputs=%t/inputs.safetensors --output=%t/outputs16.safetensors
// RUN: %python %testlib/ops.py check cache_attention %t/inputs.safetensors %t/outputs16.safetensors | FileCheck %s
// The reference lowering (convert-xfmr-to-linalg, for the element types no
// kernel takes): the same attentions in f64, within 1e-12.
// RUN: sed 's/xf32>/xf64>/g' %s > %t/f64.mlir
// RUN: %python %testlib/ops.py generate cache_attention %t/inputs64.safetensors --f64
// RUN: xfmrc %t/f64.mlir -o %t/model64
// RUN: %t/model64 --inputs=%t/inputs64.safetensors --output=%t/outputs64.safetensors
// RUN: %python %testlib/ops.py check cache_attention %t/inputs64.safetensors %t/outputs64.safetensors | FileCheck %s
// The GPU build's f32 kernel, emulated (the tensor-core ones: cache-attention-bf16.mlir).
// RUN: xfmrc %s --emulate-gpu-kernels -o %t/gpu-emulated
// RUN: %t/gpu-emulated --inputs=%t/inputs.safetensors --output=%t/outputs-gpu.safetensors
// RUN: %python %testlib/ops.py check cache_attention %t/inputs.safetensors %t/outputs-gpu.safetensors | FileCheck %s
// CHECK: PASS: prefill
// CHECK: PASS: decode
// CHECK: PASS: cross

func.func @forward(
    %pq: tensor<3x5x2x16xf32> {xfmr.input = "pq"}, %pk: tensor<3x200x2x16xf32> {xfmr.input = "pk"},
    %pv: tensor<3x200x2x16xf32> {xfmr.input = "pv"}, %poff: tensor<3xi32> {xfmr.input = "poff"},
    %plen: tensor<3xi32> {xfmr.input = "plen"},
    %dq: tensor<8x1x4x16xf32> {xfmr.input = "dq"}, %dk: tensor<8x200x4x16xf32> {xfmr.input = "dk"},
    %dv: tensor<8x200x4x16xf32> {xfmr.input = "dv"}, %doff: tensor<8xi32> {xfmr.input = "doff"},
    %dlen: tensor<8xi32> {xfmr.input = "dlen"},
    %xq: tensor<2x2x6x8xf32> {xfmr.input = "xq"}, %xk: tensor<2x2x70x8xf32> {xfmr.input = "xk"},
    %xv: tensor<2x2x70x8xf32> {xfmr.input = "xv"}, %xlen: tensor<2xi32> {xfmr.input = "xlen"})
    -> (tensor<3x5x2x16xf32> {xfmr.output = "prefill"},
        tensor<8x1x4x16xf32> {xfmr.output = "decode"},
        tensor<2x2x6x8xf32> {xfmr.output = "cross"}) {
  %p = xfmr.fused_attention %pq, %pk, %pv query_offset(%poff) key_length(%plen) {causal, scale = 0.25 : f64}
       : (tensor<3x5x2x16xf32>, tensor<3x200x2x16xf32>, tensor<3x200x2x16xf32>, tensor<3xi32>, tensor<3xi32>) -> tensor<3x5x2x16xf32>
  %d = xfmr.fused_attention %dq, %dk, %dv query_offset(%doff) key_length(%dlen) {causal, scale = 0.25 : f64}
       : (tensor<8x1x4x16xf32>, tensor<8x200x4x16xf32>, tensor<8x200x4x16xf32>, tensor<8xi32>, tensor<8xi32>) -> tensor<8x1x4x16xf32>
  %x = xfmr.fused_attention %xq, %xk, %xv key_length(%xlen) {scale = 0.35355339 : f64, layout = #xfmr.layout<bhsd>}
       : (tensor<2x2x6x8xf32>, tensor<2x2x70x8xf32>, tensor<2x2x70x8xf32>, tensor<2xi32>) -> tensor<2x2x6x8xf32>
  return %p, %d, %x : tensor<3x5x2x16xf32>, tensor<8x1x4x16xf32>, tensor<2x2x6x8xf32>
}
