// RUN: xfmr-opt %s --split-input-file --xfmr-collapse-linalg-dims | FileCheck %s

// An elementwise op over a 3-d tensor becomes one over a 1-d tensor: the
// operands are collapsed views, the result is expanded back.
// CHECK-LABEL: func @elementwise
// CHECK: %[[A:.*]] = tensor.collapse_shape %arg0 {{\[\[}}0, 1, 2]] : tensor<4x16x32xf32> into tensor<2048xf32>
// CHECK: %[[B:.*]] = tensor.collapse_shape %arg1 {{\[\[}}0, 1, 2]] : tensor<4x16x32xf32> into tensor<2048xf32>
// CHECK: %[[R:.*]] = linalg.generic {{.*}}iterator_types = ["parallel"]{{.*}} ins(%[[A]], %[[B]] : tensor<2048xf32>, tensor<2048xf32>)
// CHECK: tensor.expand_shape %[[R]] {{\[\[}}0, 1, 2]] output_shape [4, 16, 32] : tensor<2048xf32> into tensor<4x16x32xf32>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @elementwise(%a: tensor<4x16x32xf32>, %b: tensor<4x16x32xf32>) -> tensor<4x16x32xf32> {
  %init = tensor.empty() : tensor<4x16x32xf32>
  %r = linalg.generic {indexing_maps = [#id3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%a, %b : tensor<4x16x32xf32>, tensor<4x16x32xf32>) outs(%init : tensor<4x16x32xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %m = arith.mulf %x, %y : f32
    linalg.yield %m : f32
  } -> tensor<4x16x32xf32>
  return %r : tensor<4x16x32xf32>
}

// -----

// A bias broadcast along the last dim: the two leading (row) dims merge, the
// last stays, since the bias is indexed by it alone.
// CHECK-LABEL: func @broadcast
// CHECK: tensor.collapse_shape %arg0 {{\[\[}}0, 1], [2]] : tensor<4x16x32xf32> into tensor<64x32xf32>
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]{{.*}} ins(%{{.*}}, %arg1 : tensor<64x32xf32>, tensor<32xf32>)
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#row = affine_map<(d0, d1, d2) -> (d2)>
func.func @broadcast(%a: tensor<4x16x32xf32>, %bias: tensor<32xf32>) -> tensor<4x16x32xf32> {
  %init = tensor.empty() : tensor<4x16x32xf32>
  %r = linalg.generic {indexing_maps = [#id3, #row, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%a, %bias : tensor<4x16x32xf32>, tensor<32xf32>) outs(%init : tensor<4x16x32xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<4x16x32xf32>
  return %r : tensor<4x16x32xf32>
}

// -----

// Negative: a transposition is contiguous in no order both maps share, and
// a reduction next to a parallel dim keeps both; nothing changes.
// CHECK-LABEL: func @left_alone
// CHECK-NOT: tensor.collapse_shape
// CHECK-NOT: tensor.expand_shape
// CHECK: return
#t = affine_map<(d0, d1) -> (d1, d0)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @left_alone(%a: tensor<16x32xf32>) -> (tensor<32x16xf32>, tensor<32xf32>) {
  %init = tensor.empty() : tensor<32x16xf32>
  %t = linalg.generic {indexing_maps = [#t, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<16x32xf32>) outs(%init : tensor<32x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  } -> tensor<32x16xf32>
  %zero = arith.constant 0.0 : f32
  %acc0 = tensor.empty() : tensor<32xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%acc0 : tensor<32xf32>) -> tensor<32xf32>
  %s = linalg.generic {indexing_maps = [#id2, #col], iterator_types = ["reduction", "parallel"]}
      ins(%a : tensor<16x32xf32>) outs(%acc : tensor<32xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.addf %x, %o : f32
    linalg.yield %y : f32
  } -> tensor<32xf32>
  return %t, %s : tensor<32x16xf32>, tensor<32xf32>
}

// -----

// Negative: an operand broadcast through a unit dim (a constant in its map).
// CHECK-LABEL: func @unit_broadcast
// CHECK-NOT: tensor.collapse_shape
// CHECK: return
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#unit = affine_map<(d0, d1, d2) -> (d0, 0, d2)>
func.func @unit_broadcast(%a: tensor<4x2x8xf32>, %b: tensor<4x1x8xf32>) -> tensor<4x2x8xf32> {
  %init = tensor.empty() : tensor<4x2x8xf32>
  %r = linalg.generic {indexing_maps = [#id3, #unit, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%a, %b : tensor<4x2x8xf32>, tensor<4x1x8xf32>) outs(%init : tensor<4x2x8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<4x2x8xf32>
  return %r : tensor<4x2x8xf32>
}
