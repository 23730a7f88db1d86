// RUN: xfmr-opt %s --xfmr-expand-strided-copies | FileCheck %s

// A static copy with contiguous rows (a slice of a fused QKV gradient): a
// loop over the outer dimensions copying a row as one vector.
// CHECK-LABEL: func @strided
// CHECK-NOT: memref.copy
// CHECK: scf.for %[[I:.*]] = %c0 to %c2 step %c1
// CHECK-NEXT: scf.for %[[J:.*]] = %c0 to %c4 step %c1
// CHECK-NEXT: %[[ROW:.*]] = vector.load %{{.*}}[%[[I]], %[[J]], %c0] : memref<2x4x3xf32, strided<[32, 8, 1], offset: 5>>, vector<3xf32>
// CHECK-NEXT: vector.store %[[ROW]], %{{.*}}[%[[I]], %[[J]], %c0] : memref<2x4x3xf32>, vector<3xf32>
func.func @strided(%a: memref<2x4x8xf32>, %b: memref<2x4x3xf32>) {
  %s = memref.subview %a[0, 0, 5] [2, 4, 3] [1, 1, 1] : memref<2x4x8xf32> to memref<2x4x3xf32, strided<[32, 8, 1], offset: 5>>
  memref.copy %s, %b : memref<2x4x3xf32, strided<[32, 8, 1], offset: 5>> to memref<2x4x3xf32>
  return
}

// Rows that are not contiguous, or dynamic shapes: linalg.copy.
// CHECK-LABEL: func @columns
// CHECK-NOT: memref.copy
// CHECK: linalg.copy ins(%{{.*}} : memref<2x3xf32, strided<[1, 8]>>) outs(%{{.*}} : memref<2x3xf32>)
// CHECK-LABEL: func @dynamic
// CHECK: linalg.copy ins(%{{.*}} : memref<?x3xf32, strided<[8, 1], offset: 1>>) outs(%{{.*}} : memref<?x3xf32>)
func.func @columns(%a: memref<2x3xf32, strided<[1, 8]>>, %b: memref<2x3xf32>) {
  memref.copy %a, %b : memref<2x3xf32, strided<[1, 8]>> to memref<2x3xf32>
  return
}
func.func @dynamic(%a: memref<?x3xf32, strided<[8, 1], offset: 1>>, %b: memref<?x3xf32>) {
  memref.copy %a, %b : memref<?x3xf32, strided<[8, 1], offset: 1>> to memref<?x3xf32>
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
