// RUN: xfmr-opt %s --xfmr-overlap-all-reduce --split-input-file | FileCheck %s

// Each reduction starts right after its gradient's producer, so it travels
// while the rest of the backward runs, and is waited for where it was.
// CHECK-LABEL: func.func @overlapped
// CHECK: %[[DW2:.*]] = xfmr.matmul %{{.*}}, %{{.*}} {transpose_lhs}
// CHECK-NEXT: %[[S2:.*]] = xfmr.all_reduce_start %[[DW2]], %[[W:.*]] : tensor<16x16xf32>, tensor<f32>
// CHECK-NEXT: %[[DX:.*]] = xfmr.matmul
// CHECK-NEXT: %[[DW1:.*]] = xfmr.matmul %{{.*}}, %[[DX]] {transpose_lhs}
// CHECK-NEXT: %[[S1:.*]] = xfmr.all_reduce_start %[[DW1]], %[[W]]
// CHECK-NEXT: %[[N:.*]] = xfmr.global_norm %[[DX]]
// CHECK-NEXT: %[[R2:.*]] = xfmr.all_reduce_wait %[[S2]] : tensor<16x16xf32>
// CHECK-NEXT: %[[R1:.*]] = xfmr.all_reduce_wait %[[S1]] : tensor<16x16xf32>
// CHECK-NEXT: return %[[R2]], %[[R1]], %[[N]]
func.func @overlapped(%x: tensor<8x16xf32>, %h: tensor<8x16xf32>, %dy: tensor<8x16xf32>,
                      %w2: tensor<16x16xf32>, %weight: tensor<f32>)
    -> (tensor<16x16xf32>, tensor<16x16xf32>, tensor<f32>) {
  %dw2 = xfmr.matmul %h, %dy {transpose_lhs} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
  %dx = xfmr.matmul %dy, %w2 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %dw1 = xfmr.matmul %x, %dx {transpose_lhs} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
  %n = xfmr.global_norm %dx : (tensor<8x16xf32>) -> tensor<f32>
  %r2 = xfmr.all_reduce %dw2, %weight : tensor<16x16xf32>, tensor<f32>
  %r1 = xfmr.all_reduce %dw1, %weight : tensor<16x16xf32>, tensor<f32>
  return %r2, %r1, %n : tensor<16x16xf32>, tensor<16x16xf32>, tensor<f32>
}

// -----

// A start follows the gradient's other readers (a start before them would
// make bufferization copy the gradient for them), and a weight computed
// later than the gradient.
// CHECK-LABEL: func.func @after_readers
// CHECK: %[[G:.*]] = xfmr.matmul
// CHECK-NEXT: %[[N:.*]] = xfmr.global_norm %[[G]]
// CHECK-NEXT: %[[W:.*]] = xfmr.div
// CHECK-NEXT: %[[S:.*]] = xfmr.all_reduce_start %[[G]], %[[W]]
// CHECK-NEXT: xfmr.matmul
// CHECK-NEXT: xfmr.all_reduce_wait %[[S]]
func.func @after_readers(%x: tensor<8x16xf32>, %dy: tensor<8x16xf32>, %w: tensor<16x16xf32>,
                         %weight: tensor<f32>) -> (tensor<16x16xf32>, tensor<8x16xf32>, tensor<f32>) {
  %g = xfmr.matmul %x, %dy {transpose_lhs} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
  %n = xfmr.global_norm %g : (tensor<16x16xf32>) -> tensor<f32>
  %scaled = xfmr.div %weight, %n : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %dx = xfmr.matmul %dy, %w : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %r = xfmr.all_reduce %g, %scaled : tensor<16x16xf32>, tensor<f32>
  return %r, %dx, %n : tensor<16x16xf32>, tensor<8x16xf32>, tensor<f32>
}

// -----

// Negative: a gradient computed right before its reduction has nothing to
// overlap with. A block argument's reduction starts at the block's start.
// CHECK-LABEL: func.func @nothing_between
// CHECK-NOT: all_reduce_start
// CHECK: xfmr.matmul
// CHECK-NEXT: xfmr.all_reduce %{{.*}}, %{{.*}} : tensor<16x16xf32>, tensor<f32>
// CHECK-NOT: all_reduce_wait
func.func @nothing_between(%x: tensor<8x16xf32>, %dy: tensor<8x16xf32>, %weight: tensor<f32>)
    -> tensor<16x16xf32> {
  %g = xfmr.matmul %x, %dy {transpose_lhs} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
  %r = xfmr.all_reduce %g, %weight : tensor<16x16xf32>, tensor<f32>
  return %r : tensor<16x16xf32>
}

// CHECK-LABEL: func.func @argument
// CHECK-NEXT: %[[S:.*]] = xfmr.all_reduce_start %arg0, %arg3
// CHECK-NEXT: xfmr.matmul
// CHECK-NEXT: xfmr.all_reduce_wait %[[S]]
func.func @argument(%g: tensor<16x16xf32>, %x: tensor<8x16xf32>, %w: tensor<16x16xf32>,
                    %weight: tensor<f32>) -> (tensor<16x16xf32>, tensor<8x16xf32>) {
  %y = xfmr.matmul %x, %w : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %r = xfmr.all_reduce %g, %weight : tensor<16x16xf32>, tensor<f32>
  return %r, %y : tensor<16x16xf32>, tensor<8x16xf32>
}
