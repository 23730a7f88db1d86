// RUN: xfmr-opt %s --split-input-file --xfmr-gpu-reductions-innermost | FileCheck %s
// RUN: xfmr-opt %s --split-input-file --xfmr-gpu-reductions-innermost --convert-linalg-to-parallel-loops | FileCheck %s --check-prefix=LOOPS

// A column sum as linalg.reduce: generalized, the column loop first; the
// input map follows the interchange.
// CHECK-DAG: #[[IN:.*]] = affine_map<(d0, d1) -> (d1, d0)>
// CHECK-DAG: #[[OUT:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @column_sum
// CHECK-NOT: linalg.reduce
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #[[OUT]]], iterator_types = ["parallel", "reduction"]}
// CHECK-SAME: ins(%{{.*}} : memref<512x32xf32>) outs(%{{.*}} : memref<32xf32>)
// CHECK: arith.addf
// One parallel loop over the columns, the rows summed inside it.
// LOOPS-LABEL: func.func @column_sum
// LOOPS: scf.parallel (%[[COL:.*]]) =
// LOOPS-NEXT: scf.for %[[ROW:.*]] =
// LOOPS: memref.load %{{.*}}[%[[ROW]], %[[COL]]] : memref<512x32xf32>
// LOOPS-NOT: scf.parallel
func.func @column_sum(%x: memref<512x32xf32>, %sum: memref<32xf32>) {
  linalg.reduce ins(%x : memref<512x32xf32>) outs(%sum : memref<32xf32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  return
}

// -----

// [parallel, reduction, parallel] (a sum over the middle dimension): both
// parallel loops first, in their order.
// CHECK-DAG: #[[IN3:.*]] = affine_map<(d0, d1, d2) -> (d0, d2, d1)>
// CHECK-DAG: #[[OUT3:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @middle_sum
// CHECK: linalg.generic {indexing_maps = [#[[IN3]], #[[OUT3]]], iterator_types = ["parallel", "parallel", "reduction"]}
// LOOPS-LABEL: func.func @middle_sum
// LOOPS: scf.parallel (%{{.*}}, %{{.*}}) =
// LOOPS-NEXT: scf.for
#in3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#out3 = affine_map<(d0, d1, d2) -> (d0, d2)>
func.func @middle_sum(%x: memref<4x16x32xf32>, %sum: memref<4x32xf32>) {
  linalg.generic {indexing_maps = [#in3, #out3], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x : memref<4x16x32xf32>) outs(%sum : memref<4x32xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %acc : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Negative: a row sum already has its reduction innermost, a reduction over
// everything has no parallel loop to move out, and matmul's reduction is
// last: all left as they are.
// CHECK-LABEL: func.func @left_alone
// CHECK: linalg.reduce
// CHECK-SAME: dimensions = [1]
// CHECK: linalg.reduce
// CHECK-SAME: dimensions = [0, 1]
// CHECK: linalg.matmul
// CHECK-NOT: linalg.generic
func.func @left_alone(%x: memref<512x32xf32>, %rows: memref<512xf32>, %all: memref<f32>,
                      %w: memref<32x8xf32>, %y: memref<512x8xf32>) {
  linalg.reduce ins(%x : memref<512x32xf32>) outs(%rows : memref<512xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  linalg.reduce ins(%x : memref<512x32xf32>) outs(%all : memref<f32>) dimensions = [0, 1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  linalg.matmul ins(%x, %w : memref<512x32xf32>, memref<32x8xf32>) outs(%y : memref<512x8xf32>)
  return
}
