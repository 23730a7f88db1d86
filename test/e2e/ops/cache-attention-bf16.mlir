// The attentions of cache-attention.mlir in bf16 (runtime query offsets and
// key lengths: a prefill chunk at three offsets, decode steps with key
// lengths of 1 and 0, non-causal attention over a partly filled cache),
// where the GPU runs its tensor-core kernels (mma.sync; wgmma with sm_90a):
// against float64 PyTorch over the same bf16 inputs, results stored in bf16
// (two units in the last place, 8e-3 relative).
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %testlib/ops.py generate cache_attention %t/inputs.safetensors
// RUN: xfmrc %s -o %t/model
// RUN: %t/model --inputs=%t/inputs.safetensors --output=%t/outputs.safetensors
// RUN: %python %testlib/ops.py check cache_attention_bf16 %t/inputs.safetensors %t/outputs.safetensors | FileCheck %s
// RUN: xfmrc %s --emulate-gpu-kernels -o %t/gpu-emulated
// RUN: %t/gpu-emulated --inputs=%t/inputs.safetensors --output=%t/outputs-gpu.safetensors
// RUN: %python %testlib/ops.py check cache_attention_bf16 %t/inputs.safetensors %t/outputs-gpu.safetensors | FileCheck %s
// RUN: xfmrc %s --emulate-gpu-kernels --reverse-gpu-threads --gpu-arch=sm_90a -o %t/gpu-emulated-sm90a
// RUN: %t/gpu-emulated-sm90a --inputs=%t/inputs.safetensors --output=%t/outputs-sm90a.safetensors
// RUN: %python %testlib/ops.py check cache_attention_bf16 %t/inputs.safetensors %t/outputs-sm90a.safetensors | FileCheck %s
// CHECK: PASS: prefill
// CHECK: PASS: decode
// CHECK: PASS: cross

func.func @forward(
    %pq: tensor<3x5x2x16xbf16> {xfmr.input = "pq"}, %pk: tensor<3x200x2x16xbf16> {xfmr.input = "pk"},
    %pv: tensor<3x200x2x16xbf16> {xfmr.input = "pv"}, %poff: tensor<3xi32> {xfmr.input = "poff"},
    %plen: tensor<3xi32> {xfmr.input = "plen"},
    %dq: tensor<8x1x4x16xbf16> {xfmr.input = "dq"}, %dk: tensor<8x200x4x16xbf16> {xfmr.input = "dk"},
    %dv: tensor<8x200x4x16xbf16> {xfmr.input = "dv"}, %doff: tensor<8xi32> {xfmr.input = "doff"},
    %dlen: tensor<8xi32> {xfmr.input = "dlen"},
    %xq: tensor<2x2x6x8xbf16> {xfmr.input = "xq"}, %xk: tensor<2x2x70x8xbf16> {xfmr.input = "xk"},
    %xv: tensor<2x2x70x8xbf16> {xfmr.input = "xv"}, %xlen: tensor<2xi32> {xfmr.input = "xlen"})
    -> (tensor<3x5x2x16xbf16> {xfmr.output = "prefill"},
        tensor<8x1x4x16xbf16> {xfmr.output = "decode"},
        tensor<2x2x6x8xbf16> {xfmr.output = "cross"}) {
  %p = xfmr.fused_attention %pq, %pk, %pv query_offset(%poff) key_length(%plen) {causal, scale = 0.25 : f64}
       : (tensor<3x5x2x16xbf16>, tensor<3x200x2x16xbf16>, tensor<3x200x2x16xbf16>, tensor<3xi32>, tensor<3xi32>) -> tensor<3x5x2x16xbf16>
  %d = xfmr.fused_attention %dq, %dk, %dv query_offset(%doff) key_length(%dlen) {causal, scale = 0.25 : f64}
       : (tensor<8x1x4x16xbf16>, tensor<8x200x4x16xbf16>, tensor<8x200x4x16xbf16>, tensor<8xi32>, tensor<8xi32>) -> tensor<8x1x4x16xbf16>
  %x = xfmr.fused_attention %xq, %xk, %xv key_length(%xlen) {scale = 0.35355339 : f64, layout = #xfmr.layout<bhsd>}
       : (tensor<2x2x6x8xbf16>, tensor<2x2x70x8xbf16>, tensor<2x2x70x8xbf16>, tensor<2xi32>) -> tensor<2x2x6x8xbf16>
  return %p, %d, %x : tensor<3x5x2x16xbf16>, tensor<8x1x4x16xbf16>, tensor<2x2x6x8xbf16>
}
