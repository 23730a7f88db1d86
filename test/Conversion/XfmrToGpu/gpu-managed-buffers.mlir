// RUN: xfmr-opt %s --xfmr-gpu-managed-buffers --split-input-file --verify-diagnostics | FileCheck %s

// Arguments in managed memory are used in place; others, and constants, are
// staged into managed memory by the copy engine, and only the written
// argument is copied back; internal buffers are managed; copies between the
// function's own buffers become linalg.copy (a kernel).
memref.global "private" constant @table : memref<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]>
// CHECK-LABEL: func.func @stage
// CHECK-SAME: (%[[IN:.*]]: memref<4xf32>, %[[OUT:.*]]: memref<4xf32>)
// CHECK: %[[PIN:.*]] = memref.extract_aligned_pointer_as_index %[[IN]]
// CHECK-NEXT: %[[MANAGED_IN:.*]] = call @xfmrGpuIsManaged(%[[PIN]]) : (index) -> i1
// CHECK-NEXT: %[[MIN:.*]] = scf.if %[[MANAGED_IN]] -> (memref<4xf32>) {
// CHECK-NEXT: scf.yield %[[IN]]
// CHECK-NEXT: } else {
// CHECK-NEXT: %[[SIN:.*]] = gpu.alloc host_shared () : memref<4xf32>
// CHECK-NEXT: gpu.memcpy %[[SIN]], %[[IN]]
// CHECK-NEXT: scf.yield %[[SIN]]
// CHECK: %[[STAGED_IN:.*]] = arith.xori %[[MANAGED_IN]], %true
// CHECK: %[[MANAGED_OUT:.*]] = call @xfmrGpuIsManaged
// CHECK-NEXT: %[[MOUT:.*]] = scf.if %[[MANAGED_OUT]] -> (memref<4xf32>) {
// CHECK-NEXT: scf.yield %[[OUT]]
// CHECK: %[[STAGED_OUT:.*]] = arith.xori %[[MANAGED_OUT]]
// CHECK-NEXT: %[[G:.*]] = memref.get_global @table
// CHECK-NEXT: %[[MG:.*]] = gpu.alloc host_shared () : memref<4xf32>
// CHECK-NEXT: gpu.memcpy %[[MG]], %[[G]]
// CHECK-NEXT: %[[TMP:.*]] = gpu.alloc host_shared () : memref<4xf32>
// CHECK-NEXT: linalg.add ins(%[[MIN]], %[[MG]] : {{.*}}) outs(%[[TMP]] :
// CHECK-NEXT: linalg.copy ins(%[[TMP]] : {{.*}}) outs(%[[MOUT]] :
// CHECK-NEXT: gpu.dealloc %[[TMP]]
// CHECK-NEXT: scf.if %[[STAGED_IN]] {
// CHECK-NEXT: gpu.dealloc %[[MIN]]
// CHECK-NEXT: }
// CHECK-NEXT: scf.if %[[STAGED_OUT]] {
// CHECK-NEXT: gpu.memcpy %[[OUT]], %[[MOUT]]
// CHECK-NEXT: gpu.dealloc %[[MOUT]]
// CHECK-NEXT: }
// CHECK-NEXT: gpu.dealloc %[[MG]]
// CHECK-NEXT: return
// CHECK: func.func private @xfmrGpuIsManaged(index) -> i1
func.func @stage(%in: memref<4xf32>, %out: memref<4xf32>) {
  %t = memref.get_global @table : memref<4xf32>
  %tmp = memref.alloc() : memref<4xf32>
  linalg.add ins(%in, %t : memref<4xf32>, memref<4xf32>) outs(%tmp : memref<4xf32>)
  memref.copy %tmp, %out : memref<4xf32> to memref<4xf32>
  memref.dealloc %tmp : memref<4xf32>
  return
}

// -----

// A write through a view of an argument counts.
// CHECK-LABEL: func.func @view_write
// CHECK: %[[M:.*]] = scf.if
// CHECK: memref.subview %[[M]]
// CHECK: scf.if
// CHECK-NEXT: gpu.memcpy %arg0, %[[M]]
func.func @view_write(%arg: memref<4x4xf32>, %v: f32) {
  %row = memref.subview %arg[1, 0] [1, 4] [1, 1] : memref<4x4xf32> to memref<4xf32, strided<[1], offset: 4>>
  linalg.fill ins(%v : f32) outs(%row : memref<4xf32, strided<[1], offset: 4>>)
  return
}

// -----

// Stack buffers on the host side cannot be reached by a kernel.
func.func @host_alloca(%arg: memref<4xf32>) {
  // expected-error @+1 {{'memref.alloca' op outside parallel loops cannot be placed in GPU-visible memory}}
  %a = memref.alloca() : memref<4xf32>
  memref.copy %a, %arg : memref<4xf32> to memref<4xf32>
  return
}

// -----

// expected-error @+1 {{argument #0 must be a statically shaped, contiguous memref}}
func.func @dynamic_argument(%arg: memref<?xf32>, %v: f32) {
  linalg.fill ins(%v : f32) outs(%arg : memref<?xf32>)
  return
}

// -----

// A hand-built kernel's private arrays (alloca) and shared memory (a
// workgroup-space global) belong to the kernel: neither is staged.
memref.global "private" @tile : memref<8xf32, #gpu.address_space<workgroup>>
// CHECK-LABEL: func.func @kernel_memory
// CHECK: gpu.launch
// CHECK-NEXT: memref.get_global @tile
// CHECK-NEXT: memref.alloca() : memref<4xf32>
// CHECK-NOT: gpu.alloc
// CHECK: gpu.terminator
func.func @kernel_memory(%out: memref<8xf32>) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %tile = memref.get_global @tile : memref<8xf32, #gpu.address_space<workgroup>>
    %private = memref.alloca() : memref<4xf32>
    %v = memref.load %private[%tx] : memref<4xf32>
    memref.store %v, %tile[%tx] : memref<8xf32, #gpu.address_space<workgroup>>
    gpu.barrier
    %w = memref.load %tile[%tx] : memref<8xf32, #gpu.address_space<workgroup>>
    memref.store %w, %out[%tx] : memref<8xf32>
    gpu.terminator
  }
  return
}
