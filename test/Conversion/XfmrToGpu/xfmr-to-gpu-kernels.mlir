// RUN: xfmr-opt %s --convert-xfmr-to-gpu-kernels --split-input-file | FileCheck %s
// RUN: xfmr-opt %s --convert-xfmr-to-gpu-kernels=emulate-threads --split-input-file | FileCheck %s --check-prefix=EMU

// Causal self-attention, 40 rows, 2 heads of 16: one launch of 1 x 2 x 1
// blocks of 64 threads (rows rounded up to a warp multiple); the 40 keys
// and values go through two 40 x 16 shared-memory tiles; per thread the
// scaled query, the accumulator and the scores are private; the key-tile
// loop stops at the block's causal limit; a barrier after the cooperative
// tile load and after the row update.
// CHECK-DAG: memref.global "private" @__xfmr_shared : memref<40x16xf32, #gpu.address_space<workgroup>> {alignment = 16 : i64}
// CHECK-DAG: memref.global "private" @__xfmr_shared_0 : memref<40x16xf32, #gpu.address_space<workgroup>> {alignment = 16 : i64}
// CHECK-LABEL: func.func @causal
// CHECK: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x40x2x16xf32>
// CHECK: gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c1, %{{.*}} = %c2, %{{.*}} = %c1) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c64, %{{.*}} = %c1, %{{.*}} = %c1)
// CHECK-DAG: %[[KEYS:.*]] = memref.get_global @__xfmr_shared : memref<40x16xf32, #gpu.address_space<workgroup>>
// CHECK-DAG: %[[VALUES:.*]] = memref.get_global @__xfmr_shared_0 : memref<40x16xf32, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.alloca() : memref<16xf32>
// CHECK-DAG: memref.alloca() : memref<40xf32>
// CHECK: gpu.barrier
// CHECK: %[[TILES:.*]] = arith.ceildivsi
// CHECK: scf.for %{{.*}} = %c0 to %[[TILES]] step %c1
// CHECK: scf.for %{{.*}} = %[[TX]] to %c640 step %c64
// CHECK: memref.store %{{.*}}, %[[KEYS]]
// CHECK: memref.store %{{.*}}, %[[VALUES]]
// CHECK: gpu.barrier
// CHECK: math.exp
// CHECK: gpu.barrier
// CHECK: memref.store %{{.*}}, %[[OUT]]
// CHECK: gpu.terminator
// CHECK-NOT: memref<1x2x40x40xf32>
// CHECK: bufferization.to_tensor %[[OUT]]
//
// Emulated: no launch and no barrier; blocks and threads are loops, private
// state is one row per thread.
// EMU-LABEL: func.func @causal
// EMU-NOT: gpu.
// EMU: scf.for %{{.*}} = %c0 to %c1 step %c1
// EMU: scf.for %{{.*}} = %c0 to %c2 step %c1
// EMU: memref.alloc() {alignment = 64 : i64} : memref<40x16xf32>
// EMU: memref.alloc() {alignment = 64 : i64} : memref<64x16xf32>
// EMU: memref.alloc() {alignment = 64 : i64} : memref<64x40xf32>
// EMU: scf.for %[[T:.*]] = %c0 to %c64 step %c1
// EMU-NOT: gpu.
// EMU: return
func.func @causal(%q: tensor<1x40x2x16xf32>) -> tensor<1x40x2x16xf32> {
  %o = xfmr.fused_attention %q, %q, %q {causal, scale = 0.25 : f64}
       : (tensor<1x40x2x16xf32>, tensor<1x40x2x16xf32>, tensor<1x40x2x16xf32>) -> tensor<1x40x2x16xf32>
  return %o : tensor<1x40x2x16xf32>
}

// -----

// Head dim 128: 32 keys per tile keep the two tiles at 32 KiB; 300 query
// rows take 3 blocks of 128 threads; the log-sum-exp is written too.
// CHECK: memref.global "private" @__xfmr_shared : memref<32x128xf32, #gpu.address_space<workgroup>>
// CHECK-LABEL: func.func @wide_heads
// CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c3, %{{.*}} = %c4, %{{.*}} = %c2) threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c128,
// CHECK: math.log
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : memref<2x4x300xf32>
func.func @wide_heads(%q: tensor<2x300x4x128xf32>, %k: tensor<2x300x4x128xf32>)
    -> (tensor<2x300x4x128xf32>, tensor<2x4x300xf32>) {
  %o, %lse = xfmr.fused_attention %q, %k, %k {scale = 0.088 : f64}
       : (tensor<2x300x4x128xf32>, tensor<2x300x4x128xf32>, tensor<2x300x4x128xf32>) -> (tensor<2x300x4x128xf32>, tensor<2x4x300xf32>)
  return %o, %lse : tensor<2x300x4x128xf32>, tensor<2x4x300xf32>
}

// -----

// Negative: the kernel is f32; other element types stay for the linalg
// lowering.
// CHECK-LABEL: func.func @half
// CHECK-NOT: gpu.launch
// CHECK: xfmr.fused_attention
func.func @half(%q: tensor<1x8x1x16xf16>) -> tensor<1x8x1x16xf16> {
  %o = xfmr.fused_attention %q, %q, %q {scale = 0.25 : f64}
       : (tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>) -> tensor<1x8x1x16xf16>
  return %o : tensor<1x8x1x16xf16>
}
