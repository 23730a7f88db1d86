// RUN: xfmr-opt %s --split-input-file --xfmr-gpu-hoist-parallel-loops | FileCheck %s

// The embedding gradient after convert-linalg-to-parallel-loops: each token
// adds its gradient row into its table row. Every parallel iteration owns
// one column of both, so the column loop goes outside and each column walks
// the tokens in order.
// CHECK-LABEL: func.func @embedding_grad
// CHECK: scf.parallel (%[[COL:.*]]) = (%{{.*}}) to (%{{.*}}) step
// CHECK-NEXT: scf.for %[[TOKEN:.*]] = %{{.*}} to %{{.*}} step
// CHECK-NEXT: %[[ID:.*]] = memref.load %{{.*}}[%[[TOKEN]]] : memref<512xi32>
// CHECK-NEXT: %[[ROW:.*]] = arith.index_cast %[[ID]]
// CHECK-NEXT: %[[TABLE:.*]] = memref.subview %{{.*}}[%[[ROW]], 0] [1, 32] [1, 1]
// CHECK-NEXT: %[[GRAD:.*]] = memref.subview %{{.*}}[%[[TOKEN]], 0] [1, 32] [1, 1]
// CHECK-NEXT: %[[G:.*]] = memref.load %[[GRAD]][%[[COL]]]
// CHECK-NEXT: %[[T:.*]] = memref.load %[[TABLE]][%[[COL]]]
// CHECK-NEXT: %[[SUM:.*]] = arith.addf %[[T]], %[[G]]
// CHECK-NEXT: memref.store %[[SUM]], %[[TABLE]][%[[COL]]]
// CHECK-NOT: scf.parallel
func.func @embedding_grad(%ids: memref<512xi32>, %grad: memref<512x32xf32>, %table: memref<10x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %c512 = arith.constant 512 : index
  scf.for %t = %c0 to %c512 step %c1 {
    %id = memref.load %ids[%t] : memref<512xi32>
    %row = arith.index_cast %id : i32 to index
    %to = memref.subview %table[%row, 0] [1, 32] [1, 1] : memref<10x32xf32> to memref<32xf32, strided<[1], offset: ?>>
    %from = memref.subview %grad[%t, 0] [1, 32] [1, 1] : memref<512x32xf32> to memref<32xf32, strided<[1], offset: ?>>
    scf.parallel (%c) = (%c0) to (%c32) step (%c1) {
      %g = memref.load %from[%c] : memref<32xf32, strided<[1], offset: ?>>
      %v = memref.load %to[%c] : memref<32xf32, strided<[1], offset: ?>>
      %s = arith.addf %v, %g : f32
      memref.store %s, %to[%c] : memref<32xf32, strided<[1], offset: ?>>
      scf.reduce
    }
  }
  return
}

// -----

// Negative: half a row (iteration c of two rows could be the same element as
// iteration c + 16 of another), an index that is not the induction
// variable, a written buffer the row loop reads, and a loop carrying a value:
// all left as row loops.
// CHECK-LABEL: func.func @left_alone
// CHECK: arith.constant 512
// CHECK-NEXT: scf.for
// CHECK-COUNT-3: scf.reduce{{[[:space:]]*}}}{{[[:space:]]*}}}{{[[:space:]]*}}{{.*}}scf.for
func.func @left_alone(%grad: memref<512x32xf32>, %table: memref<512x32xf32>, %flat: memref<16384xf32>, %acc: f32) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %c512 = arith.constant 512 : index
  scf.for %t = %c0 to %c512 step %c1 {
    %to = memref.subview %table[%t, 16] [1, 16] [1, 1] : memref<512x32xf32> to memref<16xf32, strided<[1], offset: ?>>
    %from = memref.subview %grad[%t, 0] [1, 16] [1, 1] : memref<512x32xf32> to memref<16xf32, strided<[1], offset: ?>>
    scf.parallel (%c) = (%c0) to (%c16) step (%c1) {
      %g = memref.load %from[%c] : memref<16xf32, strided<[1], offset: ?>>
      memref.store %g, %to[%c] : memref<16xf32, strided<[1], offset: ?>>
      scf.reduce
    }
  }
  scf.for %t = %c0 to %c512 step %c1 {
    scf.parallel (%c) = (%c0) to (%c32) step (%c1) {
      %i = arith.addi %c, %t : index
      %g = memref.load %flat[%i] : memref<16384xf32>
      memref.store %g, %flat[%c] : memref<16384xf32>
      scf.reduce
    }
  }
  scf.for %t = %c0 to %c512 step %c1 {
    %first = memref.load %table[%t, %c0] : memref<512x32xf32>
    %row = memref.subview %table[%t, 0] [1, 32] [1, 1] : memref<512x32xf32> to memref<32xf32, strided<[1], offset: ?>>
    scf.parallel (%c) = (%c0) to (%c32) step (%c1) {
      memref.store %first, %row[%c] : memref<32xf32, strided<[1], offset: ?>>
      scf.reduce
    }
  }
  %sum = scf.for %t = %c0 to %c512 step %c1 iter_args(%s = %acc) -> f32 {
    %row = memref.subview %table[%t, 0] [1, 32] [1, 1] : memref<512x32xf32> to memref<32xf32, strided<[1], offset: ?>>
    scf.parallel (%c) = (%c0) to (%c32) step (%c1) {
      memref.store %s, %row[%c] : memref<32xf32, strided<[1], offset: ?>>
      scf.reduce
    }
    %n = arith.addf %s, %acc : f32
    scf.yield %n : f32
  }
  return %sum : f32
}
