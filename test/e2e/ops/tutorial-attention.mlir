// Attention as tutorial code writes it (einsum, masked_fill(mask == 0, -inf),
// softmax written out, einsum) is fused into one kernel and still computes
// what PyTorch computes.
// REQUIRES: torch
// RUN: xfmr-opt %s --xfmr-fuse-softmax --xfmr-fuse-attention | FileCheck %s --check-prefix=FUSED
// FUSED: xfmr.fused_attention
// FUSED-NOT: xfmr.matmul
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %testlib/ops.py generate tutorial %t/inputs.safetensors
// RUN: xfmrc %s -o %t/model
// RUN: %t/model --inputs=%t/inputs.safetensors --output=%t/outputs.safetensors
// RUN: %python %testlib/ops.py check tutorial %t/inputs.safetensors %t/outputs.safetensors | FileCheck %s
// CHECK: PASS: o

func.func @forward(%q: tensor<2x3x20x16xf32> {xfmr.input = "q"}, %k: tensor<2x3x20x16xf32> {xfmr.input = "k"},
                   %v: tensor<2x3x20x16xf32> {xfmr.input = "v"}, %mask: tensor<2x1x20x20xi32> {xfmr.input = "mask"})
    -> (tensor<2x3x20x16xf32> {xfmr.output = "o"}) {
  %kt = xfmr.transpose %k {permutation = array<i64: 0, 1, 3, 2>} : (tensor<2x3x20x16xf32>) -> tensor<2x3x16x20xf32>
  %s = xfmr.matmul %q, %kt : (tensor<2x3x20x16xf32>, tensor<2x3x16x20xf32>) -> tensor<2x3x20x20xf32>
  %d = arith.constant dense<4.0> : tensor<f32>
  %ss = xfmr.div %s, %d : (tensor<2x3x20x20xf32>, tensor<f32>) -> tensor<2x3x20x20xf32>
  %zero = arith.constant dense<0> : tensor<2x1x20x20xi32>
  %drop = arith.cmpi eq, %mask, %zero : tensor<2x1x20x20xi32>
  %ninf = arith.constant dense<0xFF800000> : tensor<f32>
  %masked = xfmr.select %drop, %ninf, %ss : (tensor<2x1x20x20xi1>, tensor<f32>, tensor<2x3x20x20xf32>) -> tensor<2x3x20x20xf32>
  %mx = xfmr.reduce %masked {kind = #xfmr.reduce_kind<max>, axis = -1} : (tensor<2x3x20x20xf32>) -> tensor<2x3x20x1xf32>
  %sh = xfmr.sub %masked, %mx : (tensor<2x3x20x20xf32>, tensor<2x3x20x1xf32>) -> tensor<2x3x20x20xf32>
  %e = math.exp %sh : tensor<2x3x20x20xf32>
  %z = xfmr.reduce %e {kind = #xfmr.reduce_kind<sum>, axis = -1} : (tensor<2x3x20x20xf32>) -> tensor<2x3x20x1xf32>
  %p = xfmr.div %e, %z : (tensor<2x3x20x20xf32>, tensor<2x3x20x1xf32>) -> tensor<2x3x20x20xf32>
  %o = xfmr.matmul %p, %v : (tensor<2x3x20x20xf32>, tensor<2x3x20x16xf32>) -> tensor<2x3x20x16xf32>
  return %o : tensor<2x3x20x16xf32>
}
