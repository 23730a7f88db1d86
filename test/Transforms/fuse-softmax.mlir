// RUN: xfmr-opt %s --xfmr-fuse-softmax --split-input-file | FileCheck %s

// CHECK-LABEL: func @safe_form
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[S:.*]] = xfmr.softmax %[[X]] {axis = 1 : i64} : tensor<4x8xf32>
// CHECK-NEXT: return %[[S]]
func.func @safe_form(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %m = xfmr.reduce %x {kind = #xfmr.reduce_kind<max>, axis = -1} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %s = xfmr.sub %x, %m : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %e = math.exp %s : tensor<4x8xf32>
  %z = xfmr.reduce %e {kind = #xfmr.reduce_kind<sum>, axis = 1} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %p = xfmr.div %e, %z : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %p : tensor<4x8xf32>
}

// -----

// The naive form (no max subtracted) becomes the same, numerically safe op.
// CHECK-LABEL: func @naive_form
// CHECK-NEXT: xfmr.softmax %{{.*}} {axis = 0 : i64} : tensor<4x8xf32>
func.func @naive_form(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = math.exp %x : tensor<4x8xf32>
  %z = xfmr.reduce %e {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<4x8xf32>) -> tensor<1x8xf32>
  %p = xfmr.div %e, %z : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  return %p : tensor<4x8xf32>
}

// -----

// Negative: the exponentials are used elsewhere.
// CHECK-LABEL: func @shared_exp
// CHECK-NOT: xfmr.softmax
// CHECK: xfmr.div
func.func @shared_exp(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %e = math.exp %x : tensor<4x8xf32>
  %z = xfmr.reduce %e {kind = #xfmr.reduce_kind<sum>, axis = 1} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %p = xfmr.div %e, %z : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %p, %e : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Negative: sum and division over different axes.
// CHECK-LABEL: func @wrong_normalizer
// CHECK-NOT: xfmr.softmax
func.func @wrong_normalizer(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = math.exp %x : tensor<4x8xf32>
  %ey = math.exp %y : tensor<4x8xf32>
  %z = xfmr.reduce %ey {kind = #xfmr.reduce_kind<sum>, axis = 1} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %p = xfmr.div %e, %z : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %p : tensor<4x8xf32>
}

// -----

// Negative: the max is taken over another axis than the sum; the exp/sum/div
// core still fuses but the max subtraction stays.
// CHECK-LABEL: func @max_other_axis
// CHECK: %[[M:.*]] = xfmr.reduce %{{.*}} {axis = 0 : i64, kind = #xfmr.reduce_kind<max>}
// CHECK: %[[S:.*]] = xfmr.sub %{{.*}}, %[[M]]
// CHECK: xfmr.softmax %[[S]] {axis = 1 : i64}
func.func @max_other_axis(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %m = xfmr.reduce %x {kind = #xfmr.reduce_kind<max>, axis = 0} : (tensor<4x8xf32>) -> tensor<1x8xf32>
  %s = xfmr.sub %x, %m : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  %e = math.exp %s : tensor<4x8xf32>
  %z = xfmr.reduce %e {kind = #xfmr.reduce_kind<sum>, axis = 1} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %p = xfmr.div %e, %z : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %p : tensor<4x8xf32>
}
