// The ops of the Llama-style decoders against float64 PyTorch: rotary embeddings (partial,
// scaled, at run-time start positions up to 131000, past Llama 3.1's 128K context, and the
// transposed rotation), RMS norm, grouped-query / multi-query attention (key/value heads read
// in place by their query heads) over a padded batch, over a KV cache and in the bhsd layout;
// sliding windows of 5 and 20 keys (over a batch; over 200 cached keys, the window past the
// first key blocks) and soft-capped scores.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %testlib/ops.py generate decoder %t/inputs.safetensors
// RUN: xfmrc %s -o %t/model
// RUN: %t/model --inputs=%t/inputs.safetensors --output=%t/outputs.safetensors
// RUN: %python %testlib/ops.py check decoder %t/inputs.safetensors %t/outputs.safetensors | FileCheck %s
// The AVX-512 code shape (16 lanes).
// RUN: xfmrc %s --vector-lanes=16 -o %t/model16
// RUN: %t/model16 --inputs=%t/inputs.safetensors --output=%t/outputs16.safetensors
// RUN: %python %testlib/ops.py check decoder %t/inputs.safetensors %t/outputs16.safetensors | FileCheck %s
// The reference lowering (convert-xfmr-to-linalg, for the element types no kernel takes): the
// same ops in f64, within 1e-12.
// RUN: sed 's/xf32>/xf64>/g' %s > %t/f64.mlir
// RUN: %python %testlib/ops.py generate decoder %t/inputs64.safetensors --f64
// RUN: xfmrc %t/f64.mlir -o %t/model64
// RUN: %t/model64 --inputs=%t/inputs64.safetensors --output=%t/outputs64.safetensors
// RUN: %python %testlib/ops.py check decoder %t/inputs64.safetensors %t/outputs64.safetensors | FileCheck %s
// The GPU build's kernels, their thread blocks run as loops on the CPU.
// RUN: xfmrc %s --emulate-gpu-kernels -o %t/gpu-emulated
// RUN: %t/gpu-emulated --inputs=%t/inputs.safetensors --output=%t/outputs-gpu.safetensors
// RUN: %python %testlib/ops.py check decoder %t/inputs.safetensors %t/outputs-gpu.safetensors | FileCheck %s
// CHECK-DAG: PASS: rotary_partial
// CHECK-DAG: PASS: rotary_positions
// CHECK-DAG: PASS: rotary_transposed
// CHECK-DAG: PASS: rms
// CHECK-DAG: PASS: gqa_padded
// CHECK-DAG: PASS: gqa_cache
// CHECK-DAG: PASS: mqa_decode
// CHECK-DAG: PASS: gqa_bhsd
// CHECK-DAG: PASS: window_padded
// CHECK-DAG: PASS: window_cache
// CHECK-DAG: PASS: softcap
// CHECK-NOT: FAIL

func.func @forward(
    %x: tensor<2x7x3x8xf32> {xfmr.input = "x"}, %pos: tensor<2xi32> {xfmr.input = "pos"},
    %g: tensor<8xf32> {xfmr.input = "g"},
    %q: tensor<2x9x4x8xf32> {xfmr.input = "q"}, %k: tensor<2x9x2x8xf32> {xfmr.input = "k"},
    %v: tensor<2x9x2x8xf32> {xfmr.input = "v"}, %mask: tensor<2x9xi1> {xfmr.input = "mask"},
    %cq: tensor<3x5x6x8xf32> {xfmr.input = "cq"}, %ck: tensor<3x40x2x8xf32> {xfmr.input = "ck"},
    %cv: tensor<3x40x2x8xf32> {xfmr.input = "cv"}, %coff: tensor<3xi32> {xfmr.input = "coff"},
    %clen: tensor<3xi32> {xfmr.input = "clen"},
    %dq: tensor<2x1x4x16xf32> {xfmr.input = "dq"}, %dk: tensor<2x40x1x16xf32> {xfmr.input = "dk"},
    %dv: tensor<2x40x1x16xf32> {xfmr.input = "dv"}, %doff: tensor<2xi32> {xfmr.input = "doff"},
    %dlen: tensor<2xi32> {xfmr.input = "dlen"},
    %bq: tensor<2x4x6x8xf32> {xfmr.input = "bq"}, %bk: tensor<2x2x70x8xf32> {xfmr.input = "bk"},
    %bv: tensor<2x2x70x8xf32> {xfmr.input = "bv"},
    %wk: tensor<3x200x2x8xf32> {xfmr.input = "wk"},
    %woff: tensor<3xi32> {xfmr.input = "woff"}, %wlen: tensor<3xi32> {xfmr.input = "wlen"})
    -> (tensor<2x7x3x8xf32> {xfmr.output = "rotary_partial"},
        tensor<2x7x3x8xf32> {xfmr.output = "rotary_positions"},
        tensor<2x7x3x8xf32> {xfmr.output = "rotary_transposed"},
        tensor<2x7x3x8xf32> {xfmr.output = "rms"},
        tensor<2x9x4x8xf32> {xfmr.output = "gqa_padded"},
        tensor<3x5x6x8xf32> {xfmr.output = "gqa_cache"},
        tensor<2x1x4x16xf32> {xfmr.output = "mqa_decode"},
        tensor<2x4x6x8xf32> {xfmr.output = "gqa_bhsd"},
        tensor<2x9x4x8xf32> {xfmr.output = "window_padded"},
        tensor<3x5x6x8xf32> {xfmr.output = "window_cache"},
        tensor<2x9x4x8xf32> {xfmr.output = "softcap"}) {
  %r1 = xfmr.rotary_embedding %x {inv_freq = array<f64: 1.0, 0.3, 0.01>, attention_scaling = 1.25 : f64}
        : tensor<2x7x3x8xf32>
  %r2 = xfmr.rotary_embedding %x positions(%pos : tensor<2xi32>)
        {inv_freq = array<f64: 1.0, 0.5, 0.1, 0.001>} : tensor<2x7x3x8xf32>
  %r3 = xfmr.rotary_embedding %x positions(%pos : tensor<2xi32>)
        {inv_freq = array<f64: 1.0, 0.5, 0.1, 0.001>, transpose} : tensor<2x7x3x8xf32>
  %n = xfmr.rms_norm %x, %g {epsilon = 1.0e-05 : f64} : (tensor<2x7x3x8xf32>, tensor<8xf32>) -> tensor<2x7x3x8xf32>
  %a = xfmr.fused_attention %q, %k, %v padding_mask(%mask) {causal, scale = 0.35355339 : f64}
       : (tensor<2x9x4x8xf32>, tensor<2x9x2x8xf32>, tensor<2x9x2x8xf32>, tensor<2x9xi1>) -> tensor<2x9x4x8xf32>
  %c = xfmr.fused_attention %cq, %ck, %cv query_offset(%coff) key_length(%clen) {causal, scale = 0.35355339 : f64}
       : (tensor<3x5x6x8xf32>, tensor<3x40x2x8xf32>, tensor<3x40x2x8xf32>, tensor<3xi32>, tensor<3xi32>) -> tensor<3x5x6x8xf32>
  %d = xfmr.fused_attention %dq, %dk, %dv query_offset(%doff) key_length(%dlen) {causal, scale = 0.25 : f64}
       : (tensor<2x1x4x16xf32>, tensor<2x40x1x16xf32>, tensor<2x40x1x16xf32>, tensor<2xi32>, tensor<2xi32>) -> tensor<2x1x4x16xf32>
  %b = xfmr.fused_attention %bq, %bk, %bv {scale = 0.35355339 : f64, layout = #xfmr.layout<bhsd>}
       : (tensor<2x4x6x8xf32>, tensor<2x2x70x8xf32>, tensor<2x2x70x8xf32>) -> tensor<2x4x6x8xf32>
  %w = xfmr.fused_attention %q, %k, %v padding_mask(%mask) {causal, window = 5 : i64, scale = 0.35355339 : f64}
       : (tensor<2x9x4x8xf32>, tensor<2x9x2x8xf32>, tensor<2x9x2x8xf32>, tensor<2x9xi1>) -> tensor<2x9x4x8xf32>
  %wc = xfmr.fused_attention %cq, %wk, %wk query_offset(%woff) key_length(%wlen) {causal, window = 20 : i64, scale = 0.35355339 : f64}
       : (tensor<3x5x6x8xf32>, tensor<3x200x2x8xf32>, tensor<3x200x2x8xf32>, tensor<3xi32>, tensor<3xi32>) -> tensor<3x5x6x8xf32>
  %s = xfmr.fused_attention %q, %k, %v padding_mask(%mask) {causal, softcap = 2.0 : f64, scale = 0.35355339 : f64}
       : (tensor<2x9x4x8xf32>, tensor<2x9x2x8xf32>, tensor<2x9x2x8xf32>, tensor<2x9xi1>) -> tensor<2x9x4x8xf32>
  return %r1, %r2, %r3, %n, %a, %c, %d, %b, %w, %wc, %s : tensor<2x7x3x8xf32>, tensor<2x7x3x8xf32>, tensor<2x7x3x8xf32>,
      tensor<2x7x3x8xf32>, tensor<2x9x4x8xf32>, tensor<3x5x6x8xf32>, tensor<2x1x4x16xf32>, tensor<2x4x6x8xf32>,
      tensor<2x9x4x8xf32>, tensor<3x5x6x8xf32>, tensor<2x9x4x8xf32>
}
