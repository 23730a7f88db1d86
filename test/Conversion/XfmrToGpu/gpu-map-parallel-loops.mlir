// RUN: xfmr-opt %s --split-input-file --verify-diagnostics --xfmr-gpu-map-parallel-loops | FileCheck %s
// RUN: xfmr-opt %s --split-input-file --verify-diagnostics --xfmr-gpu-map-parallel-loops --convert-parallel-loops-to-gpu --canonicalize | FileCheck %s --check-prefix=LAUNCH
// RUN: not xfmr-opt %s --split-input-file --xfmr-gpu-map-parallel-loops=block-size=96 2>&1 | FileCheck %s --check-prefix=SIZE

// SIZE: block-size must be a power of two, got 96

// 16x16: one 16x16 block, the contiguous dimension on threadIdx.x; one
// tile per dimension, so no block ids and no bounds check.
// CHECK-LABEL: func.func @square
// CHECK: scf.parallel
// CHECK: scf.parallel
// CHECK-NOT: scf.if
// CHECK: mapping = [#gpu.loop_dim_map<processor = thread_y{{.*}}>, #gpu.loop_dim_map<processor = thread_x{{.*}}>]
// CHECK: mapping = [#gpu.loop_dim_map<processor = sequential{{.*}}>, #gpu.loop_dim_map<processor = sequential{{.*}}>]
// LAUNCH-LABEL: func.func @square
// LAUNCH-DAG: %[[ONE:.*]] = arith.constant 1 : index
// LAUNCH-DAG: %[[C16:.*]] = arith.constant 16 : index
// LAUNCH: gpu.launch blocks({{.*}}) in ({{.*}} = %[[ONE]], {{.*}} = %[[ONE]], {{.*}} = %[[ONE]]) threads({{.*}}) in ({{.*}} = %[[C16]], {{.*}} = %[[C16]], {{.*}} = %[[ONE]])
func.func @square(%a: memref<16x16xf32>, %v: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c16, %c16) step (%c1, %c1) {
    memref.store %v, %a[%i, %j] : memref<16x16xf32>
  }
  return
}

// -----

// 4x1000: 256 threads along the rows, 4 tiles of them on blockIdx.x and the
// 4 rows on blockIdx.y; the last tile is guarded.
// CHECK-LABEL: func.func @wide
// CHECK: arith.constant 256 : index
// CHECK: scf.if
// CHECK: mapping = [#gpu.loop_dim_map<processor = sequential{{.*}}>, #gpu.loop_dim_map<processor = thread_x{{.*}}>]
// CHECK: mapping = [#gpu.loop_dim_map<processor = block_y{{.*}}>, #gpu.loop_dim_map<processor = block_x{{.*}}>]
// LAUNCH-LABEL: func.func @wide
// LAUNCH-DAG: %[[ONE:.*]] = arith.constant 1 : index
// LAUNCH-DAG: %[[C4:.*]] = arith.constant 4 : index
// LAUNCH-DAG: %[[C256:.*]] = arith.constant 256 : index
// LAUNCH: gpu.launch blocks({{.*}}) in ({{.*}} = %[[C4]], {{.*}} = %[[C4]], {{.*}} = %[[ONE]]) threads({{.*}}) in ({{.*}} = %[[C256]], {{.*}} = %[[ONE]], {{.*}} = %[[ONE]])
func.func @wide(%a: memref<4x1000xf32>, %v: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c1000 = arith.constant 1000 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c4, %c1000) step (%c1, %c1) {
    memref.store %v, %a[%i, %j] : memref<4x1000xf32>
  }
  return
}

// -----

// Rank 4: the three innermost dimensions share the block (8x4x4 threads for
// 5x4x3 iterations); the outermost runs on blockIdx.x, the rest of the tile
// dimensions have one tile each.
// CHECK-LABEL: func.func @rank4
// CHECK: mapping = [#gpu.loop_dim_map<processor = sequential{{.*}}>, #gpu.loop_dim_map<processor = thread_z{{.*}}>, #gpu.loop_dim_map<processor = thread_y{{.*}}>, #gpu.loop_dim_map<processor = thread_x{{.*}}>]
// CHECK: mapping = [#gpu.loop_dim_map<processor = block_x{{.*}}>, #gpu.loop_dim_map<processor = sequential{{.*}}>, #gpu.loop_dim_map<processor = sequential{{.*}}>, #gpu.loop_dim_map<processor = sequential{{.*}}>]
func.func @rank4(%a: memref<2x3x4x5xf32>, %v: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  scf.parallel (%i, %j, %k, %l) = (%c0, %c0, %c0, %c0) to (%c2, %c3, %c4, %c5) step (%c1, %c1, %c1, %c1) {
    memref.store %v, %a[%i, %j, %k, %l] : memref<2x3x4x5xf32>
  }
  return
}

// -----

// Loops nested in a host loop are mapped; a reduction is not.
// CHECK-LABEL: func.func @in_host_loop
// CHECK: scf.for
// CHECK: mapping
// LAUNCH-LABEL: func.func @in_host_loop
// LAUNCH: scf.for
// LAUNCH-NEXT: gpu.launch
func.func @in_host_loop(%a: memref<8x64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  scf.for %i = %c0 to %c8 step %c1 {
    scf.parallel (%j) = (%c0) to (%c64) step (%c1) {
      %x = memref.load %a[%i, %j] : memref<8x64xf32>
      %y = arith.addf %x, %x : f32
      memref.store %y, %a[%i, %j] : memref<8x64xf32>
    }
  }
  return
}

// -----

func.func @reduction(%a: memref<64xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0.0 : f32
  // expected-error @+1 {{'scf.parallel' op with reductions cannot be mapped to GPU threads}}
  %sum = scf.parallel (%i) = (%c0) to (%c64) step (%c1) init (%zero) -> f32 {
    %x = memref.load %a[%i] : memref<64xf32>
    scf.reduce(%x : f32) {
    ^bb0(%l: f32, %r: f32):
      %s = arith.addf %l, %r : f32
      scf.reduce.return %s : f32
    }
  }
  return %sum : f32
}
