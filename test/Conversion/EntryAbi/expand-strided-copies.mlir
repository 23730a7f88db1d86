// RUN: xfmr-opt %s --xfmr-expand-strided-copies | FileCheck %s

// CHECK-LABEL: func @strided
// CHECK-NOT: memref.copy
// CHECK: linalg.copy ins(%{{.*}} : memref<2x3xf32, strided<[8, 1], offset: 1>>) outs(%{{.*}} : memref<2x3xf32>)
func.func @strided(%a: memref<2x8xf32>, %b: memref<2x3xf32>) {
  %s = memref.subview %a[0, 1] [2, 3] [1, 1] : memref<2x8xf32> to memref<2x3xf32, strided<[8, 1], offset: 1>>
  memref.copy %s, %b : memref<2x3xf32, strided<[8, 1], offset: 1>> to memref<2x3xf32>
  return
}

// Negative: contiguous copies stay memref.copy (they become a memcpy).
// CHECK-LABEL: func @contiguous
// CHECK-NEXT: memref.copy
// CHECK-NOT: linalg.copy
func.func @contiguous(%a: memref<2x8xf32>, %b: memref<2x8xf32>) {
  memref.copy %a, %b : memref<2x8xf32> to memref<2x8xf32>
  return
}
