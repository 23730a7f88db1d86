// fused_attention against softmax(q k^T * scale + mask) v in float64, several
// key blocks per query block, every mask kind, and rows whose keys are all
// masked (which must give 0, not NaN).
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %testlib/ops.py generate attention %t/inputs.safetensors
// RUN: xfmrc %s -o %t/model
// RUN: %t/model --inputs=%t/inputs.safetensors --output=%t/outputs.safetensors
// RUN: %python %testlib/ops.py check attention %t/inputs.safetensors %t/outputs.safetensors | FileCheck %s
// The AVX-512 code shape (16 lanes, 32 registers), run here as split vectors.
// RUN: xfmrc %s --vector-lanes=16 -o %t/model16
// RUN: %t/model16 --inputs=%t/inputs.safetensors --output=%t/outputs16.safetensors
// RUN: %python %testlib/ops.py check attention %t/inputs.safetensors %t/outputs16.safetensors | FileCheck %s
// The GPU kernel (convert-xfmr-to-gpu-kernels), its thread blocks run as
// loops on the CPU: the same arithmetic a GPU runs.
// RUN: xfmrc %s --emulate-gpu-kernels -o %t/gpu-emulated
// RUN: %t/gpu-emulated --inputs=%t/inputs.safetensors --output=%t/outputs-gpu.safetensors
// RUN: %python %testlib/ops.py check attention %t/inputs.safetensors %t/outputs-gpu.safetensors | FileCheck %s
// Each phase's threads last to first: a race between threads of a phase
// gives different results in one of the two orders.
// RUN: xfmrc %s --emulate-gpu-kernels --reverse-gpu-threads -o %t/gpu-reversed
// RUN: %t/gpu-reversed --inputs=%t/inputs.safetensors --output=%t/outputs-reversed.safetensors
// RUN: %python %testlib/ops.py check attention %t/inputs.safetensors %t/outputs-reversed.safetensors | FileCheck %s
// The reference lowering (convert-xfmr-to-linalg, for the element types no
// kernel takes): the same attentions in f64, within 1e-12.
// RUN: sed 's/xf32>/xf64>/g' %s > %t/f64.mlir
// RUN: %python %testlib/ops.py generate attention %t/inputs64.safetensors --f64
// RUN: xfmrc %t/f64.mlir -o %t/model64
// RUN: %t/model64 --inputs=%t/inputs64.safetensors --output=%t/outputs64.safetensors
// RUN: %python %testlib/ops.py check attention %t/inputs64.safetensors %t/outputs64.safetensors | FileCheck %s
// CHECK: PASS: causal_padding
// CHECK: PASS: cross_bias
// CHECK: PASS: causal_offset
// CHECK: PASS: fully_masked
// CHECK: PASS: large_scores
// CHECK: PASS: head_dim_96
// CHECK: PASS: head_dim_128
// CHECK: PASS: head_dim_136

func.func @forward(
    %q: tensor<2x96x3x16xf32> {xfmr.input = "q"}, %k: tensor<2x96x3x16xf32> {xfmr.input = "k"},
    %v: tensor<2x96x3x16xf32> {xfmr.input = "v"}, %pad: tensor<2x96xi1> {xfmr.input = "pad"},
    %cq: tensor<2x3x40x8xf32> {xfmr.input = "cq"}, %ck: tensor<2x3x72x8xf32> {xfmr.input = "ck"},
    %cv: tensor<2x3x72x8xf32> {xfmr.input = "cv"}, %cbias: tensor<2x1x40x72xf32> {xfmr.input = "cbias"},
    %oq: tensor<1x2x24x8xf32> {xfmr.input = "oq"}, %ok: tensor<1x2x64x8xf32> {xfmr.input = "ok"},
    %ov: tensor<1x2x64x8xf32> {xfmr.input = "ov"}, %dead: tensor<1x64xi1> {xfmr.input = "dead"},
    %lq: tensor<1x16x1x8xf32> {xfmr.input = "lq"},
    %wq: tensor<1x70x2x96xf32> {xfmr.input = "wq"}, %wk: tensor<1x70x2x96xf32> {xfmr.input = "wk"},
    %wv: tensor<1x70x2x96xf32> {xfmr.input = "wv"},
    %hq: tensor<1x70x2x128xf32> {xfmr.input = "hq"}, %hk: tensor<1x70x2x128xf32> {xfmr.input = "hk"},
    %hv: tensor<1x70x2x128xf32> {xfmr.input = "hv"},
    %xq: tensor<1x50x2x136xf32> {xfmr.input = "xq"}, %xk: tensor<1x50x2x136xf32> {xfmr.input = "xk"},
    %xv: tensor<1x50x2x136xf32> {xfmr.input = "xv"})
    -> (tensor<2x96x3x16xf32> {xfmr.output = "causal_padding"},
        tensor<2x3x40x8xf32> {xfmr.output = "cross_bias"},
        tensor<1x2x24x8xf32> {xfmr.output = "causal_offset"},
        tensor<1x2x24x8xf32> {xfmr.output = "fully_masked"},
        tensor<1x16x1x8xf32> {xfmr.output = "large_scores"},
        tensor<1x70x2x96xf32> {xfmr.output = "head_dim_96"},
        tensor<1x70x2x128xf32> {xfmr.output = "head_dim_128"},
        tensor<1x50x2x136xf32> {xfmr.output = "head_dim_136"}) {
  %a = xfmr.fused_attention %q, %k, %v padding_mask(%pad) {causal, scale = 0.25 : f64}
       : (tensor<2x96x3x16xf32>, tensor<2x96x3x16xf32>, tensor<2x96x3x16xf32>, tensor<2x96xi1>) -> tensor<2x96x3x16xf32>
  %b = xfmr.fused_attention %cq, %ck, %cv attn_bias(%cbias) {scale = 0.35355339 : f64, layout = #xfmr.layout<bhsd>}
       : (tensor<2x3x40x8xf32>, tensor<2x3x72x8xf32>, tensor<2x3x72x8xf32>, tensor<2x1x40x72xf32>) -> tensor<2x3x40x8xf32>
  %c = xfmr.fused_attention %oq, %ok, %ov {causal, scale = 0.35355339 : f64, layout = #xfmr.layout<bhsd>}
       : (tensor<1x2x24x8xf32>, tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>) -> tensor<1x2x24x8xf32>
  %d = xfmr.fused_attention %oq, %ok, %ov padding_mask(%dead) {scale = 0.35355339 : f64, layout = #xfmr.layout<bhsd>}
       : (tensor<1x2x24x8xf32>, tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>, tensor<1x64xi1>) -> tensor<1x2x24x8xf32>
  %e = xfmr.fused_attention %lq, %lq, %lq {causal, scale = 1.0 : f64}
       : (tensor<1x16x1x8xf32>, tensor<1x16x1x8xf32>, tensor<1x16x1x8xf32>) -> tensor<1x16x1x8xf32>
  %w = xfmr.fused_attention %wq, %wk, %wv {causal, scale = 0.5 : f64}
       : (tensor<1x70x2x96xf32>, tensor<1x70x2x96xf32>, tensor<1x70x2x96xf32>) -> tensor<1x70x2x96xf32>
  %h = xfmr.fused_attention %hq, %hk, %hv {scale = 0.5 : f64}
       : (tensor<1x70x2x128xf32>, tensor<1x70x2x128xf32>, tensor<1x70x2x128xf32>) -> tensor<1x70x2x128xf32>
  %x = xfmr.fused_attention %xq, %xk, %xv {causal, scale = 0.5 : f64}
       : (tensor<1x50x2x136xf32>, tensor<1x50x2x136xf32>, tensor<1x50x2x136xf32>) -> tensor<1x50x2x136xf32>
  return %a, %b, %c, %d, %e, %w, %h, %x : tensor<2x96x3x16xf32>, tensor<2x3x40x8xf32>, tensor<1x2x24x8xf32>, tensor<1x2x24x8xf32>, tensor<1x16x1x8xf32>, tensor<1x70x2x96xf32>, tensor<1x70x2x128xf32>, tensor<1x50x2x136xf32>
}
