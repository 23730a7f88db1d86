// Embeddings, position encodings, activations, the broadcasting primitives,
// reductions, masks and cross_entropy.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %testlib/ops.py generate elementwise %t/inputs.safetensors
// RUN: xfmrc %s -o %t/model
// RUN: %t/model --inputs=%t/inputs.safetensors --output=%t/outputs.safetensors
// RUN: %python %testlib/ops.py check elementwise %t/inputs.safetensors %t/outputs.safetensors | FileCheck %s
// CHECK: PASS: embed
// CHECK: PASS: sinusoidal
// CHECK: PASS: learned
// CHECK: PASS: gelu
// CHECK: PASS: gelu_tanh
// CHECK: PASS: relu
// CHECK: PASS: dropout
// CHECK: PASS: arith
// CHECK: PASS: select_causal
// CHECK: PASS: reduce_max
// CHECK: PASS: reduce_mean
// CHECK: PASS: reduce_sum
// CHECK: PASS: transpose_reshape
// CHECK: PASS: cross_entropy
// CHECK: PASS: cross_entropy_ignored

func.func @forward(%ids: tensor<3x7xi32> {xfmr.input = "ids"}, %table: tensor<50x16xf32> {xfmr.input = "table"},
                   %pos: tensor<12x16xf32> {xfmr.input = "pos"}, %x: tensor<4x6x10xf32> {xfmr.input = "x"},
                   %y: tensor<6x1xf32> {xfmr.input = "y"}, %s: tensor<2x5x5xf32> {xfmr.input = "s"},
                   %logits: tensor<3x7x50xf32> {xfmr.input = "logits"}, %targets: tensor<3x7xi32> {xfmr.input = "targets"},
                   %none: tensor<2x3xi32> {xfmr.input = "none"})
    -> (tensor<3x7x16xf32> {xfmr.output = "embed"}, tensor<3x7x16xf32> {xfmr.output = "sinusoidal"},
        tensor<3x7x16xf32> {xfmr.output = "learned"}, tensor<4x6x10xf32> {xfmr.output = "gelu"},
        tensor<4x6x10xf32> {xfmr.output = "gelu_tanh"}, tensor<4x6x10xf32> {xfmr.output = "relu"},
        tensor<4x6x10xf32> {xfmr.output = "dropout"}, tensor<4x6x10xf32> {xfmr.output = "arith"},
        tensor<2x5x5xf32> {xfmr.output = "select_causal"}, tensor<4x1x10xf32> {xfmr.output = "reduce_max"},
        tensor<4x6x1xf32> {xfmr.output = "reduce_mean"}, tensor<1x6x10xf32> {xfmr.output = "reduce_sum"},
        tensor<6x40xf32> {xfmr.output = "transpose_reshape"}, tensor<f32> {xfmr.output = "cross_entropy"},
        tensor<f32> {xfmr.output = "cross_entropy_ignored"}) {
  %e = xfmr.embedding %ids, %table {scale = 4.0 : f64} : (tensor<3x7xi32>, tensor<50x16xf32>) -> tensor<3x7x16xf32>
  %sin = xfmr.sinusoidal_position_encoding %e : tensor<3x7x16xf32>
  %learned = xfmr.learned_position_encoding %e, %pos : tensor<3x7x16xf32>, tensor<12x16xf32>
  %g = xfmr.gelu %x : tensor<4x6x10xf32>
  %gt = xfmr.gelu %x {approximate = #xfmr.gelu_approximation<tanh>} : tensor<4x6x10xf32>
  %r = xfmr.relu %x : tensor<4x6x10xf32>
  %d = xfmr.dropout %x {rate = 0.5 : f64} : tensor<4x6x10xf32>
  // ((x - y) * x) / (|y| + 1) max x, with y broadcast along the last dim.
  %sub = xfmr.sub %x, %y : (tensor<4x6x10xf32>, tensor<6x1xf32>) -> tensor<4x6x10xf32>
  %mul = xfmr.mul %sub, %x : (tensor<4x6x10xf32>, tensor<4x6x10xf32>) -> tensor<4x6x10xf32>
  %one = arith.constant dense<1.0> : tensor<f32>
  %absy = math.absf %y : tensor<6x1xf32>
  %den = xfmr.add %absy, %one : (tensor<6x1xf32>, tensor<f32>) -> tensor<6x1xf32>
  %div = xfmr.div %mul, %den : (tensor<4x6x10xf32>, tensor<6x1xf32>) -> tensor<4x6x10xf32>
  %max = xfmr.maximum %div, %x : (tensor<4x6x10xf32>, tensor<4x6x10xf32>) -> tensor<4x6x10xf32>
  %cm = xfmr.causal_mask : tensor<5x5xi1>
  %zero = arith.constant dense<-3.0> : tensor<f32>
  %sel = xfmr.select %cm, %s, %zero : (tensor<5x5xi1>, tensor<2x5x5xf32>, tensor<f32>) -> tensor<2x5x5xf32>
  %rmax = xfmr.reduce %x {kind = #xfmr.reduce_kind<max>, axis = 1} : (tensor<4x6x10xf32>) -> tensor<4x1x10xf32>
  %rmean = xfmr.reduce %x {kind = #xfmr.reduce_kind<mean>} : (tensor<4x6x10xf32>) -> tensor<4x6x1xf32>
  %rsum = xfmr.reduce %x {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<4x6x10xf32>) -> tensor<1x6x10xf32>
  %t = xfmr.transpose %x {permutation = array<i64: 1, 0, 2>} : (tensor<4x6x10xf32>) -> tensor<6x4x10xf32>
  %rs = xfmr.reshape %t : (tensor<6x4x10xf32>) -> tensor<6x40xf32>
  %ce = xfmr.cross_entropy %logits, %targets {ignore_index = 3} : (tensor<3x7x50xf32>, tensor<3x7xi32>) -> tensor<f32>
  %none_logits = tensor.extract_slice %logits[0, 0, 0] [2, 3, 50] [1, 1, 1] : tensor<3x7x50xf32> to tensor<2x3x50xf32>
  %ce0 = xfmr.cross_entropy %none_logits, %none {ignore_index = -1} : (tensor<2x3x50xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %e, %sin, %learned, %g, %gt, %r, %d, %max, %sel, %rmax, %rmean, %rsum, %rs, %ce, %ce0
      : tensor<3x7x16xf32>, tensor<3x7x16xf32>, tensor<3x7x16xf32>, tensor<4x6x10xf32>, tensor<4x6x10xf32>, tensor<4x6x10xf32>,
        tensor<4x6x10xf32>, tensor<4x6x10xf32>, tensor<2x5x5xf32>, tensor<4x1x10xf32>, tensor<4x6x1xf32>, tensor<1x6x10xf32>,
        tensor<6x40xf32>, tensor<f32>, tensor<f32>
}
