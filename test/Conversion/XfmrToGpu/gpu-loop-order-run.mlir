// xfmr-gpu-reductions-innermost and xfmr-gpu-hoist-parallel-loops keep the
// loops' meaning: run on the CPU with the GPU mapping's loops sequential, a
// column sum and an embedding gradient (tokens sharing table rows) compute
// what the loops in their original order compute.
// RUN: xfmr-opt %s --pass-pipeline="builtin.module(func.func(convert-linalg-to-parallel-loops,canonicalize),convert-scf-to-cf,expand-strided-metadata,lower-affine,finalize-memref-to-llvm,convert-func-to-llvm,convert-arith-to-llvm,convert-cf-to-llvm,convert-index-to-llvm,reconcile-unrealized-casts)" | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_lib_dir/libmlir_runner_utils.so,%mlir_lib_dir/libmlir_c_runner_utils.so > %t.loops
// RUN: xfmr-opt %s --pass-pipeline="builtin.module(func.func(xfmr-gpu-reductions-innermost,convert-linalg-to-parallel-loops,canonicalize,xfmr-gpu-hoist-parallel-loops,xfmr-gpu-map-parallel-loops{block-size=16},canonicalize),convert-scf-to-cf,expand-strided-metadata,lower-affine,finalize-memref-to-llvm,convert-func-to-llvm,convert-arith-to-llvm,convert-cf-to-llvm,convert-index-to-llvm,reconcile-unrealized-casts)" | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_lib_dir/libmlir_runner_utils.so,%mlir_lib_dir/libmlir_c_runner_utils.so > %t.moved
// RUN: FileCheck %s < %t.loops
// RUN: FileCheck %s < %t.moved
// x[i][j] = (3 i + j) mod 11 summed over 512 rows, checksum
// sum_j s[j] (j mod 7 + 1); table[ids[t]] += g[t] with ids[t] = 7 t mod 10,
// g[t][j] = (t + 2 j) mod 13, checksum sum_vj T[v][j] ((32 v + j) mod 7 + 1):
// 312362 and 391549 by Python integers (every partial sum is exact in f32).
// CHECK: [312362]
// CHECK: [391549]

#rows = affine_map<(i, j) -> (i, j)>
#row = affine_map<(j) -> (j)>
func.func private @printMemrefF32(memref<*xf32>)

func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c7 = arith.constant 7 : index
  %c10 = arith.constant 10 : index
  %c32 = arith.constant 32 : index
  %c512 = arith.constant 512 : index
  %x = memref.alloc() : memref<512x32xf32>
  %g = memref.alloc() : memref<512x32xf32>
  %ids = memref.alloc() : memref<512xi32>
  %sums = memref.alloc() : memref<32xf32>
  %table = memref.alloc() : memref<10x32xf32>
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%sums : memref<32xf32>)
  linalg.fill ins(%zero : f32) outs(%table : memref<10x32xf32>)
  scf.for %i = %c0 to %c512 step %c1 {
    %id = arith.muli %i, %c7 : index
    %idm = arith.remui %id, %c10 : index
    %idi = arith.index_cast %idm : index to i32
    memref.store %idi, %ids[%i] : memref<512xi32>
    scf.for %j = %c0 to %c32 step %c1 {
      %c3 = arith.constant 3 : index
      %c2 = arith.constant 2 : index
      %c11 = arith.constant 11 : index
      %c13 = arith.constant 13 : index
      %a = arith.muli %i, %c3 : index
      %b = arith.addi %a, %j : index
      %xv = arith.remui %b, %c11 : index
      %j2 = arith.muli %j, %c2 : index
      %d = arith.addi %i, %j2 : index
      %gv = arith.remui %d, %c13 : index
      %xi = arith.index_cast %xv : index to i32
      %gi = arith.index_cast %gv : index to i32
      %xf = arith.sitofp %xi : i32 to f32
      %gf = arith.sitofp %gi : i32 to f32
      memref.store %xf, %x[%i, %j] : memref<512x32xf32>
      memref.store %gf, %g[%i, %j] : memref<512x32xf32>
    }
  }

  // The column sum, as bufferization leaves a bias gradient.
  linalg.reduce ins(%x : memref<512x32xf32>) outs(%sums : memref<32xf32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  // The embedding gradient, as xfmr's lowering leaves it.
  scf.for %t = %c0 to %c512 step %c1 {
    %id = memref.load %ids[%t] : memref<512xi32>
    %r = arith.index_cast %id : i32 to index
    %to = memref.subview %table[%r, 0] [1, 32] [1, 1] : memref<10x32xf32> to memref<32xf32, strided<[1], offset: ?>>
    %from = memref.subview %g[%t, 0] [1, 32] [1, 1] : memref<512x32xf32> to memref<32xf32, strided<[1], offset: ?>>
    linalg.generic {indexing_maps = [#row, #row], iterator_types = ["parallel"]}
        ins(%from : memref<32xf32, strided<[1], offset: ?>>) outs(%to : memref<32xf32, strided<[1], offset: ?>>) {
    ^bb0(%in: f32, %out: f32):
      %s = arith.addf %out, %in : f32
      linalg.yield %s : f32
    }
  }

  %check = memref.alloc() : memref<1xf32>
  %sumCheck = scf.for %j = %c0 to %c32 step %c1 iter_args(%acc = %zero) -> f32 {
    %v = memref.load %sums[%j] : memref<32xf32>
    %w = arith.remui %j, %c7 : index
    %w1 = arith.addi %w, %c1 : index
    %wi = arith.index_cast %w1 : index to i32
    %wf = arith.sitofp %wi : i32 to f32
    %p = arith.mulf %v, %wf : f32
    %n = arith.addf %acc, %p : f32
    scf.yield %n : f32
  }
  memref.store %sumCheck, %check[%c0] : memref<1xf32>
  %printed = memref.cast %check : memref<1xf32> to memref<*xf32>
  call @printMemrefF32(%printed) : (memref<*xf32>) -> ()
  %tableCheck = scf.for %v = %c0 to %c10 step %c1 iter_args(%acc = %zero) -> f32 {
    %inner = scf.for %j = %c0 to %c32 step %c1 iter_args(%acc2 = %acc) -> f32 {
      %e = memref.load %table[%v, %j] : memref<10x32xf32>
      %k = arith.muli %v, %c32 : index
      %kj = arith.addi %k, %j : index
      %w = arith.remui %kj, %c7 : index
      %w1 = arith.addi %w, %c1 : index
      %wi = arith.index_cast %w1 : index to i32
      %wf = arith.sitofp %wi : i32 to f32
      %p = arith.mulf %e, %wf : f32
      %n = arith.addf %acc2, %p : f32
      scf.yield %n : f32
    }
    scf.yield %inner : f32
  }
  memref.store %tableCheck, %check[%c0] : memref<1xf32>
  call @printMemrefF32(%printed) : (memref<*xf32>) -> ()
  return
}
