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
