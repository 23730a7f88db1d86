// The tiling of xfmr-gpu-map-parallel-loops keeps the loop nest's meaning:
// with the tile and thread loops run sequentially on the CPU, a matmul, two
// elementwise ops and a reduction over ragged sizes (partial tiles, guarded)
// compute what the untiled loops compute.
// RUN: xfmr-opt %s --pass-pipeline="builtin.module(func.func(convert-linalg-to-parallel-loops,canonicalize),convert-scf-to-cf,expand-strided-metadata,lower-affine,finalize-memref-to-llvm,convert-func-to-llvm,convert-arith-to-llvm,convert-cf-to-llvm,convert-index-to-llvm,reconcile-unrealized-casts)" | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_lib_dir/libmlir_runner_utils.so,%mlir_lib_dir/libmlir_c_runner_utils.so > %t.loops
// RUN: xfmr-opt %s --pass-pipeline="builtin.module(func.func(convert-linalg-to-parallel-loops,xfmr-gpu-map-parallel-loops{block-size=64},canonicalize),convert-scf-to-cf,expand-strided-metadata,lower-affine,finalize-memref-to-llvm,convert-func-to-llvm,convert-arith-to-llvm,convert-cf-to-llvm,convert-index-to-llvm,reconcile-unrealized-casts)" | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_lib_dir/libmlir_runner_utils.so,%mlir_lib_dir/libmlir_c_runner_utils.so > %t.mapped
// RUN: FileCheck %s < %t.loops
// RUN: FileCheck %s < %t.mapped
// Both print the sum of C[i][j] * (31 i + j) over C = A B, A[i][k] = (i k)
// mod 7, B[k][j] = (k + j) mod 5: 162884760, computed exactly with Python
// integers (f32 accumulation rounds it; 6 digits are printed).
// CHECK: [1.62885e+08]

func.func private @printMemrefF32(memref<*xf32>)
func.func @main() {
  %a = memref.alloc() : memref<37x53xf32>
  %b = memref.alloc() : memref<53x29xf32>
  %c = memref.alloc() : memref<37x29xf32>
  %z = arith.constant 0.0 : f32
  %c7 = arith.constant 7 : i32
  %c5 = arith.constant 5 : i32
  %c31 = arith.constant 31 : i32
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} outs(%a : memref<37x53xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %ii = arith.index_cast %i : index to i32
    %jj = arith.index_cast %j : index to i32
    %s = arith.muli %ii, %jj : i32
    %t = arith.remsi %s, %c7 : i32
    %f = arith.sitofp %t : i32 to f32
    linalg.yield %f : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} outs(%b : memref<53x29xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %ii = arith.index_cast %i : index to i32
    %jj = arith.index_cast %j : index to i32
    %s = arith.addi %ii, %jj : i32
    %t = arith.remsi %s, %c5 : i32
    %f = arith.sitofp %t : i32 to f32
    linalg.yield %f : f32
  }
  linalg.fill ins(%z : f32) outs(%c : memref<37x29xf32>)
  linalg.matmul ins(%a, %b : memref<37x53xf32>, memref<53x29xf32>) outs(%c : memref<37x29xf32>)
  %sum = memref.alloc() : memref<f32>
  memref.store %z, %sum[] : memref<f32>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>], iterator_types = ["reduction", "reduction"]} ins(%c : memref<37x29xf32>) outs(%sum : memref<f32>) {
  ^bb0(%x: f32, %acc: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %ii = arith.index_cast %i : index to i32
    %jj = arith.index_cast %j : index to i32
    %w0 = arith.muli %ii, %c31 : i32
    %w1 = arith.addi %w0, %jj : i32
    %w = arith.sitofp %w1 : i32 to f32
    %p = arith.mulf %x, %w : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  }
  %u = memref.cast %sum : memref<f32> to memref<*xf32>
  call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  return
}
