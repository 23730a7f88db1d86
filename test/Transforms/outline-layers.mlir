// RUN: xfmr-opt %s --xfmr-outline-layers --split-input-file | FileCheck %s
// RUN: xfmr-opt %s --xfmr-outline-layers=copies --split-input-file | FileCheck %s --check-prefix=COPIES

// Two layers of one body call one function; the third, whose scale
// differs, gets a function of its own. The weight's transpose moves into the
// body (the kernels read it there as a transposed operand); the mask, which
// comes from an input, stays an argument. Each result is written into a
// destination the caller passes.
// CHECK-LABEL: func.func private @forward_h_0
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x4xf32>, %[[W:[^:]*]]: tensor<4x4xf32>, %[[M:[^:]*]]: tensor<2x4xi1>, %[[OUT:[^:]*]]: tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-SAME: llvm.linkage = #llvm.linkage<internal>
// CHECK-SAME: passthrough = ["noinline"]
// CHECK: %[[WT:.*]] = xfmr.transpose %[[W]]
// CHECK: %[[C:.*]] = arith.constant dense<5.000000e-01>
// CHECK: %[[P:.*]] = xfmr.matmul %[[X]], %[[WT]]
// CHECK: %[[S:.*]] = xfmr.mul %[[P]], %[[C]]
// CHECK: %[[Z:.*]] = xfmr.select %[[M]], %[[S]]
// CHECK: %[[R:.*]] = bufferization.materialize_in_destination %[[Z]] in %[[OUT]]
// CHECK: return %[[R]]
// CHECK-LABEL: func.func private @forward_h_2
// CHECK: arith.constant dense<2.500000e-01>
// CHECK-LABEL: func.func @forward
// CHECK: %[[M0:.*]] = arith.cmpi
// CHECK: %[[E0:.*]] = tensor.empty() : tensor<2x4xf32>
// CHECK: %[[Y0:.*]] = call @forward_h_0(%{{.*}}, %{{.*}}, %[[M0]], %[[E0]]) {xfmr.layer = "h.0"}
// CHECK: %[[E1:.*]] = tensor.empty() : tensor<2x4xf32>
// CHECK: %[[Y1:.*]] = call @forward_h_0(%[[Y0]], %{{.*}}, %[[M0]], %[[E1]]) {xfmr.layer = "h.1"}
// CHECK: %[[Y2:.*]] = call @forward_h_2(%[[Y1]], %{{.*}}, %[[M0]], %{{.*}}) {xfmr.layer = "h.2"}
// CHECK: return %[[Y2]]
// CHECK-NOT: xfmr.layer "
func.func @forward(%x: tensor<2x4xf32>, %mask: tensor<2x4xi32> {xfmr.input = "attention_mask"},
                   %w0: tensor<4x4xf32> {xfmr.param = "h.0.w"},
                   %w1: tensor<4x4xf32> {xfmr.param = "h.1.w"},
                   %w2: tensor<4x4xf32> {xfmr.param = "h.2.w"}) -> tensor<2x4xf32> {
  %zero = arith.constant dense<0> : tensor<2x4xi32>
  %m = arith.cmpi ne, %mask, %zero : tensor<2x4xi32>
  %half = arith.constant dense<0.5> : tensor<f32>
  %quarter = arith.constant dense<0.25> : tensor<f32>
  %fill = arith.constant dense<0.0> : tensor<2x4xf32>
  %t0 = xfmr.transpose %w0 {permutation = array<i64: 1, 0>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %t1 = xfmr.transpose %w1 {permutation = array<i64: 1, 0>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %t2 = xfmr.transpose %w2 {permutation = array<i64: 1, 0>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %y0 = xfmr.layer "h.0" -> (tensor<2x4xf32>) {
    %p = xfmr.matmul %x, %t0 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %s = xfmr.mul %p, %half : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
    %z = xfmr.select %m, %s, %fill : (tensor<2x4xi1>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    xfmr.yield %z : tensor<2x4xf32>
  }
  %y1 = xfmr.layer "h.1" -> (tensor<2x4xf32>) {
    %p = xfmr.matmul %y0, %t1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %s = xfmr.mul %p, %half : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
    %z = xfmr.select %m, %s, %fill : (tensor<2x4xi1>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    xfmr.yield %z : tensor<2x4xf32>
  }
  %y2 = xfmr.layer "h.2" -> (tensor<2x4xf32>) {
    %p = xfmr.matmul %y1, %t2 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %s = xfmr.mul %p, %quarter : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
    %z = xfmr.select %m, %s, %fill : (tensor<2x4xi1>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    xfmr.yield %z : tensor<2x4xf32>
  }
  return %y2 : tensor<2x4xf32>
}

// -----

// An updated cache is the argument itself (no destination); the layers of
// the decode entry get a function of their own, apart from any other
// entry's.
// CHECK-LABEL: func.func private @decode_layers_0
// CHECK-SAME: (%[[CACHE:[^:]*]]: tensor<1x8x2xf32>, %[[V:[^:]*]]: tensor<1x1x2xf32>, %[[P:[^:]*]]: tensor<1xi32>) -> tensor<1x8x2xf32>
// CHECK: %[[U:.*]] = xfmr.cache_update %[[CACHE]], %[[V]], %[[P]]
// CHECK-NOT: materialize_in_destination
// CHECK: return %[[U]]
// CHECK-LABEL: func.func @decode
// CHECK: call @decode_layers_0(%arg0, %arg2, %arg3) {xfmr.layer = "layers.0"}
// CHECK: call @decode_layers_0(%arg1, %arg2, %arg3) {xfmr.layer = "layers.1"}
func.func @decode(%c0: tensor<1x8x2xf32> {xfmr.state = "cache.0"}, %c1: tensor<1x8x2xf32> {xfmr.state = "cache.1"},
                  %v: tensor<1x1x2xf32>, %p: tensor<1xi32> {xfmr.input = "positions"})
    -> (tensor<1x8x2xf32>, tensor<1x8x2xf32>) {
  %n0 = xfmr.layer "layers.0" -> (tensor<1x8x2xf32>) {
    %u = xfmr.cache_update %c0, %v, %p : (tensor<1x8x2xf32>, tensor<1x1x2xf32>, tensor<1xi32>) -> tensor<1x8x2xf32>
    xfmr.yield %u : tensor<1x8x2xf32>
  }
  %n1 = xfmr.layer "layers.1" -> (tensor<1x8x2xf32>) {
    %u = xfmr.cache_update %c1, %v, %p : (tensor<1x8x2xf32>, tensor<1x1x2xf32>, tensor<1xi32>) -> tensor<1x8x2xf32>
    xfmr.yield %u : tensor<1x8x2xf32>
  }
  return %n0, %n1 : tensor<1x8x2xf32>, tensor<1x8x2xf32>
}

// -----

// copies: every layer inlined where it stands, no function made.
// COPIES-LABEL: func.func @two
// COPIES-NOT: xfmr.layer
// COPIES-NOT: call
// COPIES: %[[A:.*]] = arith.addf %arg0, %arg0
// COPIES: %[[B:.*]] = arith.addf %[[A]], %[[A]]
// COPIES: return %[[B]]
func.func @two(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = xfmr.layer "l.0" -> (tensor<4xf32>) {
    %y = arith.addf %x, %x : tensor<4xf32>
    xfmr.yield %y : tensor<4xf32>
  }
  %b = xfmr.layer "l.1" -> (tensor<4xf32>) {
    %y = arith.addf %a, %a : tensor<4xf32>
    xfmr.yield %y : tensor<4xf32>
  }
  return %b : tensor<4xf32>
}
