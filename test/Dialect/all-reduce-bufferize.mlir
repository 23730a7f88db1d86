// RUN: xfmr-opt %s --convert-xfmr-to-linalg | FileCheck %s --check-prefix=LEGAL
// RUN: xfmr-opt %s --convert-xfmr-to-linalg --one-shot-bufferize='bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map' | FileCheck %s
// RUN: xfmr-opt %s --convert-xfmr-to-cpu-kernels --convert-xfmr-to-linalg --one-shot-bufferize='bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map' | FileCheck %s --check-prefix=KERNEL

// convert-xfmr-to-linalg leaves it to bufferization.
// LEGAL-LABEL: func.func @reduce
// LEGAL: xfmr.all_reduce %{{.*}}, %{{.*}} : tensor<8x16xf32>, tensor<f32>

// The runtime's functions, for the master thread only
// (xfmr-merge-parallel-regions may call them inside a team), declared in
// the order of their names whatever order bufferization meets them in.
// CHECK: func.func private @xfmr_all_reduce_f32(i64, i64, f32) attributes {xfmr.main_thread_only}
// CHECK-NEXT: func.func private @xfmr_all_reduce_start_f32(i64, i64, f32) attributes {xfmr.main_thread_only}
// CHECK-NEXT: func.func private @xfmr_all_reduce_wait_f32(i64) attributes {xfmr.main_thread_only}

// xfmr.all_reduce reduces its operand's buffer in place: one call of the
// runtime with the aligned address, the element count and the weight, and
// no copy. A strided view goes through a contiguous copy and back.
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

// The split form: the start call where the start was, on the buffer
// itself, the wait on the same address where the wait was; the buffer the
// wait yields is the operand's (no copy).
// CHECK-LABEL: func.func @start_wait(
// CHECK-SAME: %[[G:.*]]: memref<8x16xf32>, %[[W:.*]]: memref<f32>, %[[X:.*]]: memref<8x16xf32>)
// CHECK-NOT: memref.copy
// CHECK: %[[P:.*]] = memref.extract_aligned_pointer_as_index %[[G]]
// CHECK: %[[A:.*]] = arith.index_cast %[[P]] : index to i64
// CHECK: call @xfmr_all_reduce_start_f32(%[[A]], %{{.*}}, %{{.*}}) : (i64, i64, f32) -> ()
// CHECK: linalg.generic
// CHECK: %[[P2:.*]] = memref.extract_aligned_pointer_as_index %[[G]]
// CHECK: %[[A2:.*]] = arith.index_cast %[[P2]] : index to i64
// CHECK: call @xfmr_all_reduce_wait_f32(%[[A2]]) : (i64) -> ()
// CHECK-NOT: memref.copy
// CHECK: return %[[G]]
func.func @start_wait(%g: tensor<8x16xf32>, %w: tensor<f32>, %x: tensor<8x16xf32>)
    -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %s = xfmr.all_reduce_start %g, %w : tensor<8x16xf32>, tensor<f32>
  %y = xfmr.relu %x : tensor<8x16xf32>
  %r = xfmr.all_reduce_wait %s : tensor<8x16xf32>
  return %r, %y : tensor<8x16xf32>, tensor<8x16xf32>
}

// A strided view is reduced at once through a contiguous copy (the
// blocking call), and its wait is no call at all.
// CHECK-LABEL: func.func @start_wait_slice(
// CHECK: %[[VIEW:.*]] = memref.subview
// CHECK: %[[TMP:.*]] = memref.alloc() : memref<4x16xf32>
// CHECK: memref.copy %[[VIEW]], %[[TMP]]
// CHECK: call @xfmr_all_reduce_f32
// CHECK: memref.copy %[[TMP]], %[[VIEW]]
// CHECK-NOT: call
// CHECK: return
func.func @start_wait_slice(%g: tensor<8x16xf32>, %w: tensor<f32>) -> tensor<8x16xf32> {
  %v = tensor.extract_slice %g[2, 0] [4, 16] [1, 1] : tensor<8x16xf32> to tensor<4x16xf32>
  %s = xfmr.all_reduce_start %v, %w : tensor<4x16xf32>, tensor<f32>
  %r = xfmr.all_reduce_wait %s : tensor<4x16xf32>
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
