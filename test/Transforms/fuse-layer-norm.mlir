// RUN: xfmr-opt %s --xfmr-fuse-layer-norm --split-input-file | FileCheck %s

// A layer norm as tutorial code writes it, with a residual add in front.
// CHECK-LABEL: func @tutorial
// CHECK-SAME: (%[[X:.*]]: tensor<2x8xf32>, %[[R:.*]]: tensor<2x8xf32>, %[[G:.*]]: tensor<8xf32>, %[[B:.*]]: tensor<8xf32>)
// CHECK-NEXT: %[[SUM:.*]], %[[Y:.*]] = xfmr.fused_add_layer_norm %[[X]], %[[R]], %[[G]], %[[B]] {epsilon = 0.0010000000474974513 : f64}
// CHECK-NEXT: return %[[Y]], %[[SUM]]
func.func @tutorial(%x0: tensor<2x8xf32>, %r: tensor<2x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %x = xfmr.add %x0, %r : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %mean = xfmr.reduce %x {kind = #xfmr.reduce_kind<mean>, axis = -1} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %c = xfmr.sub %x, %mean : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %sq = xfmr.mul %c, %c : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %var = xfmr.reduce %sq {kind = #xfmr.reduce_kind<mean>, axis = 1} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %eps = arith.constant dense<1.0e-3> : tensor<f32>
  %ve = xfmr.add %var, %eps : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  %std = math.sqrt %ve : tensor<2x1xf32>
  %n = xfmr.div %c, %std : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %s = xfmr.mul %n, %g : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %y = xfmr.add %s, %b : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %y, %x : tensor<2x8xf32>, tensor<2x8xf32>
}

// -----

// The rsqrt form without gamma and beta.
// CHECK-LABEL: func @rsqrt_plain
// CHECK-NEXT: xfmr.layer_norm %{{.*}} {epsilon = 9.9999997473787516E-6 : f64} : (tensor<3x16xf32>) -> tensor<3x16xf32>
// CHECK-NEXT: return
func.func @rsqrt_plain(%x: tensor<3x16xf32>) -> tensor<3x16xf32> {
  %mean = xfmr.reduce %x {kind = #xfmr.reduce_kind<mean>} : (tensor<3x16xf32>) -> tensor<3x1xf32>
  %c = xfmr.sub %x, %mean : (tensor<3x16xf32>, tensor<3x1xf32>) -> tensor<3x16xf32>
  %sq = xfmr.mul %c, %c : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
  %var = xfmr.reduce %sq {kind = #xfmr.reduce_kind<mean>} : (tensor<3x16xf32>) -> tensor<3x1xf32>
  %eps = arith.constant dense<1.0e-5> : tensor<f32>
  %ve = xfmr.add %eps, %var : (tensor<f32>, tensor<3x1xf32>) -> tensor<3x1xf32>
  %rstd = math.rsqrt %ve : tensor<3x1xf32>
  %n = xfmr.mul %rstd, %c : (tensor<3x1xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
  return %n : tensor<3x16xf32>
}

// -----

// The residual stream of a pre-LN block: the sum is used again after the norm.
// CHECK-LABEL: func @pre_ln_residual
// CHECK-NEXT: %[[SUM:.*]], %[[Y:.*]] = xfmr.fused_add_layer_norm
// CHECK-NEXT: %[[Z:.*]] = xfmr.add %[[SUM]], %[[Y]]
func.func @pre_ln_residual(%x: tensor<2x8xf32>, %r: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %s = xfmr.add %x, %r : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = xfmr.layer_norm %s : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %z = xfmr.add %s, %y : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %z : tensor<2x8xf32>
}

// -----

// Negative: statistics over the first axis are not a layer norm.
// CHECK-LABEL: func @batch_axis
// CHECK-NOT: xfmr.layer_norm
func.func @batch_axis(%x: tensor<3x16xf32>) -> tensor<3x16xf32> {
  %mean = xfmr.reduce %x {kind = #xfmr.reduce_kind<mean>, axis = 0} : (tensor<3x16xf32>) -> tensor<1x16xf32>
  %c = xfmr.sub %x, %mean : (tensor<3x16xf32>, tensor<1x16xf32>) -> tensor<3x16xf32>
  %sq = xfmr.mul %c, %c : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
  %var = xfmr.reduce %sq {kind = #xfmr.reduce_kind<mean>, axis = 0} : (tensor<3x16xf32>) -> tensor<1x16xf32>
  %eps = arith.constant dense<1.0e-5> : tensor<f32>
  %ve = xfmr.add %var, %eps : (tensor<1x16xf32>, tensor<f32>) -> tensor<1x16xf32>
  %rstd = math.rsqrt %ve : tensor<1x16xf32>
  %n = xfmr.mul %c, %rstd : (tensor<3x16xf32>, tensor<1x16xf32>) -> tensor<3x16xf32>
  return %n : tensor<3x16xf32>
}

// -----

// Negative: a broadcasting add is not a residual add.
// CHECK-LABEL: func @broadcast_add
// CHECK: xfmr.add
// CHECK-NEXT: xfmr.layer_norm
// CHECK-NOT: xfmr.fused_add_layer_norm
func.func @broadcast_add(%x: tensor<2x8xf32>, %b: tensor<8xf32>) -> tensor<2x8xf32> {
  %s = xfmr.add %x, %b : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %y = xfmr.layer_norm %s : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Negative: the centred values are used elsewhere.
// CHECK-LABEL: func @shared_centered
// CHECK-NOT: xfmr.layer_norm
func.func @shared_centered(%x: tensor<3x16xf32>) -> (tensor<3x16xf32>, tensor<3x16xf32>) {
  %mean = xfmr.reduce %x {kind = #xfmr.reduce_kind<mean>} : (tensor<3x16xf32>) -> tensor<3x1xf32>
  %c = xfmr.sub %x, %mean : (tensor<3x16xf32>, tensor<3x1xf32>) -> tensor<3x16xf32>
  %sq = xfmr.mul %c, %c : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
  %var = xfmr.reduce %sq {kind = #xfmr.reduce_kind<mean>} : (tensor<3x16xf32>) -> tensor<3x1xf32>
  %eps = arith.constant dense<1.0e-5> : tensor<f32>
  %ve = xfmr.add %var, %eps : (tensor<3x1xf32>, tensor<f32>) -> tensor<3x1xf32>
  %rstd = math.rsqrt %ve : tensor<3x1xf32>
  %n = xfmr.mul %c, %rstd : (tensor<3x16xf32>, tensor<3x1xf32>) -> tensor<3x16xf32>
  return %n, %c : tensor<3x16xf32>, tensor<3x16xf32>
}
