// RUN: xfmr-opt %s --xfmr-fuse-epilogues --split-input-file | FileCheck %s

// CHECK-LABEL: func @mlp
// CHECK-SAME: (%[[X:.*]]: tensor<2x5x8xf32>, %[[W1:.*]]: tensor<8x32xf32>, %[[B1:.*]]: tensor<32xf32>, %[[W2:.*]]: tensor<32x8xf32>, %[[B2:.*]]: tensor<8xf32>)
// CHECK-NEXT: %[[H:.*]] = xfmr.fused_linear %[[X]], %[[W1]] bias(%[[B1]]) {activation = #xfmr.activation<gelu_tanh>}
// CHECK-NEXT: %[[Y:.*]] = xfmr.fused_linear %[[H]], %[[W2]] bias(%[[B2]]) residual(%[[X]])
// CHECK-NEXT: return %[[Y]]
func.func @mlp(%x: tensor<2x5x8xf32>, %w1: tensor<8x32xf32>, %b1: tensor<32xf32>, %w2: tensor<32x8xf32>, %b2: tensor<8xf32>) -> tensor<2x5x8xf32> {
  %m1 = xfmr.matmul %x, %w1 : (tensor<2x5x8xf32>, tensor<8x32xf32>) -> tensor<2x5x32xf32>
  %a1 = xfmr.add %m1, %b1 : (tensor<2x5x32xf32>, tensor<32xf32>) -> tensor<2x5x32xf32>
  %g = xfmr.gelu %a1 {approximate = #xfmr.gelu_approximation<tanh>} : tensor<2x5x32xf32>
  %m2 = xfmr.matmul %g, %w2 : (tensor<2x5x32xf32>, tensor<32x8xf32>) -> tensor<2x5x8xf32>
  %a2 = xfmr.add %b2, %m2 : (tensor<8xf32>, tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  %r = xfmr.add %x, %a2 : (tensor<2x5x8xf32>, tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  return %r : tensor<2x5x8xf32>
}

// -----

// No bias: the activation alone, with an [out, in] weight.
// CHECK-LABEL: func @relu_only
// CHECK-NEXT: xfmr.fused_linear %{{.*}}, %{{.*}} {activation = #xfmr.activation<relu>, transpose_weight}
func.func @relu_only(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) -> tensor<4x16xf32> {
  %m = xfmr.matmul %x, %w {transpose_rhs} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %r = xfmr.relu %m : tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

// Every activation fuses: Marian's silu, BERT's pooler tanh.
// CHECK-LABEL: func @silu_tanh
// CHECK-NEXT: %[[S:.*]] = xfmr.fused_linear %{{.*}}, %{{.*}} bias(%{{.*}}) {activation = #xfmr.activation<silu>}
// CHECK-NEXT: xfmr.fused_linear %[[S]], %{{.*}} {activation = #xfmr.activation<tanh>}
func.func @silu_tanh(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %m = xfmr.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a = xfmr.add %m, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %s = xfmr.silu %a : tensor<4x8xf32>
  %m2 = xfmr.matmul %s, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %t = xfmr.tanh %m2 : tensor<4x8xf32>
  return %t : tensor<4x8xf32>
}

// -----

// Negative: the matmul result is used twice; nothing fuses.
// CHECK-LABEL: func @shared_product
// CHECK-NOT: xfmr.fused_linear
func.func @shared_product(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %m = xfmr.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %a = xfmr.add %m, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return %a, %m : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Negative: a batched matmul, and a bare matmul without epilogue, stay.
// CHECK-LABEL: func @not_epilogues
// CHECK-NOT: xfmr.fused_linear
// CHECK: xfmr.matmul %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<2x8x16xf32>)
// CHECK: xfmr.matmul %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<8x16xf32>)
func.func @not_epilogues(%x: tensor<2x4x8xf32>, %w: tensor<2x8x16xf32>, %b: tensor<16xf32>, %y: tensor<4x8xf32>, %v: tensor<8x16xf32>) -> (tensor<2x4x16xf32>, tensor<4x16xf32>) {
  %m = xfmr.matmul %x, %w : (tensor<2x4x8xf32>, tensor<2x8x16xf32>) -> tensor<2x4x16xf32>
  %a = xfmr.add %m, %b : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %n = xfmr.matmul %y, %v : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return %a, %n : tensor<2x4x16xf32>, tensor<4x16xf32>
}

// -----

// Negative: a bias that is not an [out] vector is not an epilogue bias.
// CHECK-LABEL: func @column_bias
// CHECK-NOT: xfmr.fused_linear
func.func @column_bias(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<4x1xf32>) -> tensor<4x16xf32> {
  %m = xfmr.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %a = xfmr.add %m, %b : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  return %a : tensor<4x16xf32>
}

// -----

// A gated MLP (SwiGLU): gate and up products of one input, into one op.
// CHECK-LABEL: func @swiglu
// CHECK-SAME: (%[[X:.*]]: tensor<2x5x8xf32>, %[[WG:.*]]: tensor<32x8xf32>, %[[WU:.*]]: tensor<32x8xf32>)
// CHECK-NEXT: %[[H:.*]] = xfmr.gated_linear %[[X]], %[[WG]], %[[WU]] {activation = #xfmr.activation<silu>, transpose_weight}
// CHECK-NEXT: return %[[H]]
func.func @swiglu(%x: tensor<2x5x8xf32>, %wg: tensor<32x8xf32>, %wu: tensor<32x8xf32>) -> tensor<2x5x32xf32> {
  %g = xfmr.matmul %x, %wg {transpose_rhs} : (tensor<2x5x8xf32>, tensor<32x8xf32>) -> tensor<2x5x32xf32>
  %s = xfmr.silu %g : tensor<2x5x32xf32>
  %u = xfmr.matmul %x, %wu {transpose_rhs} : (tensor<2x5x8xf32>, tensor<32x8xf32>) -> tensor<2x5x32xf32>
  %h = xfmr.mul %s, %u : (tensor<2x5x32xf32>, tensor<2x5x32xf32>) -> tensor<2x5x32xf32>
  return %h : tensor<2x5x32xf32>
}

// -----

// With biases (mlp_bias), the up product first, GeGLU's activation.
// CHECK-LABEL: func @geglu_biases
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[WG:.*]]: tensor<8x16xf32>, %[[WU:.*]]: tensor<8x16xf32>, %[[BG:.*]]: tensor<16xf32>, %[[BU:.*]]: tensor<16xf32>)
// CHECK-NEXT: %[[H:.*]] = xfmr.gated_linear %[[X]], %[[WG]], %[[WU]] gate_bias(%[[BG]]) up_bias(%[[BU]]) {activation = #xfmr.activation<gelu_tanh>}
// CHECK-NEXT: return %[[H]]
func.func @geglu_biases(%x: tensor<4x8xf32>, %wg: tensor<8x16xf32>, %wu: tensor<8x16xf32>, %bg: tensor<16xf32>, %bu: tensor<16xf32>) -> tensor<4x16xf32> {
  %g = xfmr.matmul %x, %wg : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %gb = xfmr.add %g, %bg : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %a = xfmr.gelu %gb {approximate = #xfmr.gelu_approximation<tanh>} : tensor<4x16xf32>
  %u = xfmr.matmul %x, %wu : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %ub = xfmr.add %u, %bu : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %h = xfmr.mul %ub, %a : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return %h : tensor<4x16xf32>
}

// -----

// Negative: products of different inputs, and a gate that is used again,
// stay apart (each keeps its own epilogue).
// CHECK-LABEL: func @not_gated
// CHECK-NOT: xfmr.gated_linear
// CHECK: xfmr.mul
// CHECK-NOT: xfmr.gated_linear
// CHECK: xfmr.mul
// CHECK-NOT: xfmr.gated_linear
func.func @not_gated(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %w: tensor<16x8xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %g = xfmr.matmul %x, %w {transpose_rhs} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %s = xfmr.silu %g : tensor<4x16xf32>
  %u = xfmr.matmul %y, %w {transpose_rhs} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %h = xfmr.mul %s, %u : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %g2 = xfmr.matmul %x, %w {transpose_rhs} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %s2 = xfmr.silu %g2 : tensor<4x16xf32>
  %u2 = xfmr.matmul %x, %w {transpose_rhs} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %h2 = xfmr.mul %s2, %u2 : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return %h, %h2, %s2 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Negative: both products activated, weights of different layouts, a
// product times a broadcast vector, and a gate whose product adds a
// residual: each stays as it was.
// CHECK-LABEL: func @not_gated_shapes
// CHECK-NOT: xfmr.gated_linear
// CHECK-COUNT-4: xfmr.mul
// CHECK-NOT: xfmr.gated_linear
func.func @not_gated_shapes(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %wkn: tensor<8x16xf32>, %v: tensor<16xf32>, %r: tensor<4x16xf32>)
    -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %g1 = xfmr.matmul %x, %w {transpose_rhs} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %s1 = xfmr.silu %g1 : tensor<4x16xf32>
  %u1 = xfmr.matmul %x, %w {transpose_rhs} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %t1 = xfmr.relu %u1 : tensor<4x16xf32>
  %h1 = xfmr.mul %s1, %t1 : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %g2 = xfmr.matmul %x, %w {transpose_rhs} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %s2 = xfmr.silu %g2 : tensor<4x16xf32>
  %u2 = xfmr.matmul %x, %wkn : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %h2 = xfmr.mul %s2, %u2 : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %g3 = xfmr.matmul %x, %w {transpose_rhs} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %s3 = xfmr.silu %g3 : tensor<4x16xf32>
  %h3 = xfmr.mul %s3, %v : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %g4 = xfmr.matmul %x, %w {transpose_rhs} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %s4 = xfmr.silu %g4 : tensor<4x16xf32>
  %a4 = xfmr.add %s4, %r : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %u4 = xfmr.matmul %x, %w {transpose_rhs} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %h4 = xfmr.mul %a4, %u4 : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return %h1, %h2, %h3, %h4 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Quantized weights (as xfmr-quantize-weights leaves them, before fusion)
// fuse as any: the gated product reads them through their dequantize.
// CHECK-LABEL: func @gated_int8
// CHECK: %[[G:.*]] = xfmr.dequantize
// CHECK: %[[U:.*]] = xfmr.dequantize
// CHECK: xfmr.gated_linear %{{.*}}, %[[G]], %[[U]] {activation = #xfmr.activation<silu>, transpose_weight}
func.func @gated_int8(%x: tensor<4x8xf32>, %qg: tensor<16x8xi8>, %sg: tensor<16x1xf32>, %qu: tensor<16x8xi8>, %su: tensor<16x1xf32>) -> tensor<4x16xf32> {
  %wg = xfmr.dequantize %qg, %sg {axis = 1 : i64, group_size = 8 : i64} : (tensor<16x8xi8>, tensor<16x1xf32>) -> tensor<16x8xf32>
  %wu = xfmr.dequantize %qu, %su {axis = 1 : i64, group_size = 8 : i64} : (tensor<16x8xi8>, tensor<16x1xf32>) -> tensor<16x8xf32>
  %g = xfmr.matmul %x, %wg {transpose_rhs} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %s = xfmr.silu %g : tensor<4x16xf32>
  %u = xfmr.matmul %x, %wu {transpose_rhs} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %h = xfmr.mul %s, %u : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return %h : tensor<4x16xf32>
}
