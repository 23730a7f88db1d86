// RUN: xfmr-opt %s --convert-xfmr-to-linalg | FileCheck %s --check-prefix=LEGAL
// RUN: xfmr-opt %s --convert-xfmr-to-linalg --one-shot-bufferize='bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map' | FileCheck %s
// RUN: xfmr-opt %s --convert-xfmr-to-cpu-kernels --convert-xfmr-to-linalg --one-shot-bufferize='bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map' | FileCheck %s --check-prefix=KERNEL

// convert-xfmr-to-linalg leaves it to bufferization.
// LEGAL-LABEL: func.func @reduce
// LEGAL: xfmr.all_reduce %{{.*}}, %{{.*}} : tensor<8x16xf32>, tensor<f32>

// xfmr.all_reduce reduces its operand's buffer in place: one call of the
// runtime with the aligned address, the element count and the weight, and
// no copy. A strided view goes through a contiguous copy and back.
// CHECK-LABEL: func.func private @xfmr_all_reduce_f32(i64, i64, f32)
// CHECK-LABEL: func.func @reduce(
// CHECK-SAME: %[[G:.*]]: memref<8x16xf32>, %[[W:.*]]: memref<f32>)
// CHECK-NOT: memref.copy
// CHECK: %[[P:.*]] = memref.extract_aligned_pointer_as_index %[[G]]
// CHECK: %[[A:.*]] = arith.index_cast %[[P]] : index to i64
// CHECK: %[[N:.*]] = arith.constant 128 : i64
// CHECK: %[[X:.*]] = memref.load %[[W]][]
// CHECK: call @xfmr_all_reduce_f32(%[[A]], %[[N]], %[[X]]) : (i64, i64, f32) -> ()
// CHECK-NOT: memref.copy
// CHECK: return %[[G]]
func.func @reduce(%g: tensor<8x16xf32>, %w: tensor<f32>) -> tensor<8x16xf32> {
  %r = xfmr.all_reduce %g, %w : tensor<8x16xf32>, tensor<f32>
  return %r : tensor<8x16xf32>
}

// CHECK-LABEL: func.func @reduce_slice(
// CHECK: %[[VIEW:.*]] = memref.subview
// CHECK: %[[TMP:.*]] = memref.alloc() : memref<4x16xf32>
// CHECK: memref.copy %[[VIEW]], %[[TMP]]
// CHECK: memref.extract_aligned_pointer_as_index %[[TMP]]
// CHECK: arith.constant 64 : i64
// CHECK: call @xfmr_all_reduce_f32
// CHECK: memref.copy %[[TMP]], %[[VIEW]]
func.func @reduce_slice(%g: tensor<8x16xf32>, %w: tensor<f32>) -> tensor<8x16xf32> {
  %s = tensor.extract_slice %g[2, 0] [4, 16] [1, 1] : tensor<8x16xf32> to tensor<4x16xf32>
  %r = xfmr.all_reduce %s, %w : tensor<4x16xf32>, tensor<f32>
  %i = tensor.insert_slice %r into %g[2, 0] [4, 16] [1, 1] : tensor<4x16xf32> into tensor<8x16xf32>
  return %i : tensor<8x16xf32>
}

// A CPU kernel's result is reduced in the buffer the kernel wrote, without
// a copy.
// KERNEL-LABEL: func.func @reduce_kernel_result(
// KERNEL: %[[C:.*]] = memref.alloc() {alignment = 64 : i64} : memref<96x32xf32>
// KERNEL-NOT: memref.copy
// KERNEL: memref.extract_aligned_pointer_as_index %[[C]]
// KERNEL: call @xfmr_all_reduce_f32
// KERNEL-NOT: memref.copy
// KERNEL: return %[[C]]
func.func @reduce_kernel_result(%x: tensor<64x96xf32>, %dy: tensor<64x32xf32>, %w: tensor<f32>)
    -> tensor<96x32xf32> {
  %dw = xfmr.matmul %x, %dy {transpose_lhs} : (tensor<64x96xf32>, tensor<64x32xf32>) -> tensor<96x32xf32>
  %r = xfmr.all_reduce %dw, %w : tensor<96x32xf32>, tensor<f32>
  return %r : tensor<96x32xf32>
}
