// RUN: xfmr-opt %s --convert-xfmr-to-gpu-kernels --split-input-file | FileCheck %s
// RUN: xfmr-opt %s --convert-xfmr-to-gpu-kernels=emulate-threads --split-input-file | FileCheck %s --check-prefix=EMU
// RUN: xfmr-opt %s --convert-xfmr-to-gpu-kernels="emulate-threads reverse-threads" --split-input-file | FileCheck %s --check-prefix=REV
// RUN: not xfmr-opt %s --convert-xfmr-to-gpu-kernels=reverse-threads --split-input-file 2>&1 | FileCheck %s --check-prefix=BAD-OPTION
// RUN: xfmr-opt %s --convert-xfmr-to-gpu-kernels=warpgroup-mma --split-input-file | FileCheck %s --check-prefix=WGMMA
// RUN: xfmr-opt %s --convert-xfmr-to-gpu-kernels="emulate-threads warpgroup-mma" --split-input-file | FileCheck %s --check-prefix=WGMMA-EMU
// BAD-OPTION: error: reverse-threads needs emulate-threads

// Causal self-attention, 40 rows, 2 heads of 16: one launch of 1 x 2 x 1
// blocks of 64 threads (rows rounded up to a warp multiple); the 40 keys
// and values go through two 40 x 16 shared-memory tiles; per thread the
// scaled query and the accumulator are private, indexed by constants only
// (the head-dim loops unrolled); the key-tile loop stops at the block's
// causal limit; a tile's keys in 5 chunks of 8 (scores as values: 8 x 16
// fma), each updating the accumulator once; a barrier after the
// cooperative tile load and after the row update.
// CHECK-DAG: memref.global "private" @__xfmr_shared : memref<40x16xf32, #gpu.address_space<workgroup>> {alignment = 16 : i64}
// CHECK-DAG: memref.global "private" @__xfmr_shared_0 : memref<40x16xf32, #gpu.address_space<workgroup>> {alignment = 16 : i64}
// CHECK-LABEL: func.func @causal
// CHECK: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x40x2x16xf32>
// CHECK: gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c1, %{{.*}} = %c2, %{{.*}} = %c1) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c64, %{{.*}} = %c1, %{{.*}} = %c1)
// CHECK-DAG: %[[KEYS:.*]] = memref.get_global @__xfmr_shared : memref<40x16xf32, #gpu.address_space<workgroup>>
// CHECK-DAG: %[[VALUES:.*]] = memref.get_global @__xfmr_shared_0 : memref<40x16xf32, #gpu.address_space<workgroup>>
// CHECK-DAG: %[[QUERY:.*]] = memref.alloca() : memref<16xf32>
// CHECK-DAG: %[[ACC:.*]] = memref.alloca() : memref<16xf32>
// CHECK: memref.store %{{.*}}, %[[QUERY]][%c15]
// CHECK: gpu.barrier
// CHECK: %[[TILES:.*]] = arith.ceildivsi
// CHECK: scf.for %{{.*}} = %c0 to %[[TILES]] step %c1
// CHECK: scf.for %{{.*}} = %[[TX]] to %c640 step %c64
// CHECK: memref.store %{{.*}}, %[[KEYS]]
// CHECK: memref.store %{{.*}}, %[[VALUES]]
// CHECK: gpu.barrier
// CHECK: scf.if
// CHECK-NEXT: scf.for %{{.*}} = %c0 to %c40 step %c8
// CHECK-COUNT-128: math.fma
// CHECK: scf.if
// CHECK: math.exp
// CHECK: memref.load %[[ACC]][%c0]
// CHECK-COUNT-8: math.fma
// CHECK: memref.store %{{.*}}, %[[ACC]][%c0]
// CHECK: memref.store %{{.*}}, %[[ACC]][%c15]
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
// EMU-COUNT-2: memref.alloc() {alignment = 64 : i64} : memref<64x16xf32>
// EMU-NOT: memref<64x40xf32>
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

// -----

// GEMM with its whole epilogue: C [140, 136] in 3 x 3 blocks of 256
// threads, 64 x 64 tiles; A and B staged as [K, tile] (rows padded to 68)
// in two buffers of 16 of K each; the first stage loaded and stored before
// the loop. K = 40 in 3 stages, each loading the next one's 4 elements of
// A and B a thread into private registers, then 16 rank-1 updates of a 4 x
// 4 private accumulator by fma, each step reading its 4 A and 4 B values by
// one 16-byte load each, then storing the registers into the other buffer
// and one barrier; then bias, GELU and residual on the accumulator before
// the only store of C.
// CHECK-DAG: memref.global "private" @__xfmr_shared : memref<2x16x68xf32, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.global "private" @__xfmr_shared_0 : memref<2x16x68xf32, #gpu.address_space<workgroup>>
// CHECK-LABEL: func.func @gemm
// CHECK: %[[C:.*]] = memref.alloc() {alignment = 64 : i64} : memref<140x136xf32>
// CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c3, %{{.*}} = %c3, %{{.*}} = %c1) threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c256, %{{.*}} = %c1, %{{.*}} = %c1)
// CHECK: %[[ACC:.*]] = memref.alloca() : memref<4x4xf32>
// CHECK: %[[AHEAD:.*]] = memref.alloca() : memref<4xf32>
// CHECK: %[[A:.*]] = memref.get_global @__xfmr_shared :
// CHECK: memref.store %{{.*}}, %[[AHEAD]]
// CHECK: memref.store %{{.*}}, %[[A]][%c0, %{{.*}}, %{{.*}}] : memref<2x16x68xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: scf.for %{{.*}} = %c0 to %c3 step %c1
// CHECK: scf.if
// CHECK: memref.store %{{.*}}, %[[AHEAD]]
// CHECK: vector.load %[[A]][%{{.*}}, %c0, %{{.*}}] {alignment = 16 : i64} : memref<2x16x68xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK-COUNT-16: math.fma
// CHECK: vector.load %[[A]][%{{.*}}, %c1, %{{.*}}]
// CHECK-COUNT-240: math.fma
// CHECK-NOT: math.fma
// CHECK: memref.store %{{.*}}, %[[ACC]]
// CHECK: scf.if
// CHECK: memref.store %{{.*}}, %[[A]]
// CHECK: gpu.barrier
// CHECK-NEXT: }
// CHECK-NOT: gpu.barrier
// CHECK: scf.if
// CHECK: memref.load %[[ACC]]
// CHECK: math.erf
// CHECK: memref.store %{{.*}}, %[[C]]
// CHECK: gpu.terminator
// CHECK: bufferization.to_tensor %[[C]]
//
// Emulated: each thread's accumulator is its row of a [256, 4, 4] array.
// EMU-LABEL: func.func @gemm
// EMU-NOT: gpu.
// EMU: memref.alloc() {alignment = 64 : i64} : memref<256x4x4xf32>
// EMU: scf.for %{{.*}} = %c0 to %c256 step %c1
// EMU-NOT: gpu.
// EMU: return
//
// Reversed: thread 255 - i runs i-th.
// REV-LABEL: func.func @gemm
// REV: scf.for %[[I:.*]] = %c0 to %c256 step %c1
// REV-NEXT: %[[T:.*]] = arith.subi %c255, %[[I]] : index
// REV: memref.store %{{.*}}, %{{.*}}[%[[T]], %c0, %c0] : memref<256x4x4xf32>
func.func @gemm(%x: tensor<2x70x40xf32>, %w: tensor<40x136xf32>, %b: tensor<136xf32>,
                %r: tensor<2x70x136xf32>) -> tensor<2x70x136xf32> {
  %y = xfmr.fused_linear %x, %w bias(%b) residual(%r) {activation = #xfmr.activation<gelu>}
       : (tensor<2x70x40xf32>, tensor<40x136xf32>, tensor<136xf32>, tensor<2x70x136xf32>) -> tensor<2x70x136xf32>
  return %y : tensor<2x70x136xf32>
}

// -----

// With at least 132 tiles of 128 x 128 (12 x 12 here), those: stages of 8
// of K, an 8 x 8 accumulator a thread whose rows and columns are two groups
// of 4, 64 apart, read by two 16-byte loads per factor and step.
// CHECK-DAG: memref.global "private" @__xfmr_shared : memref<2x8x132xf32, #gpu.address_space<workgroup>>
// CHECK-LABEL: func.func @gemm_large
// CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c12, %{{.*}} = %c12, %{{.*}} = %c1) threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c256, %{{.*}} = %c1, %{{.*}} = %c1)
// CHECK: memref.alloca() : memref<8x8xf32>
// CHECK: scf.for %{{.*}} = %c0 to %c6 step %c1
// CHECK-COUNT-4: vector.load %{{.*}}[%{{.*}}, %c0, %{{.*}}] {alignment = 16 : i64} : memref<2x8x132xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK-COUNT-64: math.fma
// CHECK-NOT: vector.load %{{.*}}[%{{.*}}, %c0, %{{.*}}]
// CHECK: vector.load %{{.*}}[%{{.*}}, %c1, %{{.*}}]
// CHECK-COUNT-448: math.fma
// CHECK-NOT: math.fma
// CHECK: gpu.barrier
func.func @gemm_large(%a: tensor<44x1500xf32>, %m: tensor<44x1480xf32>) -> tensor<1500x1480xf32> {
  %p = xfmr.matmul %a, %m {transpose_lhs} : (tensor<44x1500xf32>, tensor<44x1480xf32>) -> tensor<1500x1480xf32>
  return %p : tensor<1500x1480xf32>
}

// -----

// One query row a sequence (a decode step) against 200 keys: a warp per
// row (2 heads x 2 sequences), lane l taking keys l, l + 32, ... of each
// 64-key tile, read where they are (no shared tiles, no barrier); the
// lanes' max, then their rescaled sums and 16 accumulators, merged by 5
// shuffles each.
// CHECK-LABEL: func.func @decode_attention
// CHECK-NOT: memref.get_global
// CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c1, %{{.*}} = %c2, %{{.*}} = %c2) threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c32, %{{.*}} = %c1, %{{.*}} = %c1)
// CHECK-NOT: gpu.barrier
// CHECK: scf.for %{{.*}} = %c0 to %c64 step %c64
// CHECK: memref.load %{{.*}} : memref<2x200x2x16xf32
// CHECK-NOT: gpu.barrier
// CHECK-COUNT-90: gpu.shuffle  xor
// CHECK-NOT: gpu.barrier
// CHECK: gpu.terminator
func.func @decode_attention(%q: tensor<2x1x2x16xf32>, %k: tensor<2x200x2x16xf32>,
                            %v: tensor<2x200x2x16xf32>) -> tensor<2x1x2x16xf32> {
  %a = xfmr.fused_attention %q, %k, %v {scale = 0.25 : f64}
      : (tensor<2x1x2x16xf32>, tensor<2x200x2x16xf32>, tensor<2x200x2x16xf32>) -> tensor<2x1x2x16xf32>
  return %a : tensor<2x1x2x16xf32>
}

// -----

// A product of 3 rows (a decode step) whose weight is int8 stored [N, K]
// with a scale per 32 of K: a warp per column of C (13 blocks of 8 warps),
// the int8 values read as stored, 16 at a time where the runtime's
// addresses and strides allow (else one by one), four chunks of a lane in
// flight, a scale per chunk; no dequantized copy of the weight. Each row's
// lane sums meet by 5 shuffles, and lane 0 stores the outputs.
// CHECK-LABEL: func.func @skinny_int8
// CHECK-NOT: linalg.generic
// CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c13, %{{.*}} = %c1, %{{.*}} = %c1) threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c256, %{{.*}} = %c1, %{{.*}} = %c1)
// CHECK: memref.alloca() : memref<3xf32>
// CHECK: scf.if
// CHECK: scf.for %{{.*}} = %{{.*}} to %c64 step %c2048 iter_args(%{{.*}} = %cst, %{{.*}} = %cst, %{{.*}} = %cst) -> (f32, f32, f32)
// CHECK-COUNT-4: vector.load %{{.*}} {alignment = 16 : i64} : memref<100x64xi8, strided<[?, 1], offset: ?>>, vector<16xi8>
// CHECK-COUNT-48: vector.load %{{.*}} {alignment = 16 : i64} : memref<3x64xf32, strided<[?, 1], offset: ?>>, vector<4xf32>
// CHECK-COUNT-15: gpu.shuffle  xor
// CHECK: } else {
// CHECK: scf.for
// CHECK-NOT: vector.load
// CHECK: memref.load %{{.*}} : memref<100x64xi8, strided<[?, 1], offset: ?>>
// CHECK-NOT: xfmr.dequantize
// EMU-LABEL: func.func @skinny_int8
// EMU-NOT: gpu.launch
// EMU-NOT: gpu.shuffle
func.func @skinny_int8(%x: tensor<3x64xf32>, %q: tensor<100x64xi8>, %s: tensor<100x2xf32>,
                       %b: tensor<100xf32>) -> tensor<3x100xf32> {
  %w = xfmr.dequantize %q, %s {axis = 1 : i64, group_size = 32 : i64} : (tensor<100x64xi8>, tensor<100x2xf32>) -> tensor<100x64xf32>
  %y = xfmr.fused_linear %x, %w bias(%b) {transpose_weight} : (tensor<3x64xf32>, tensor<100x64xf32>, tensor<100xf32>) -> tensor<3x100xf32>
  return %y : tensor<3x100xf32>
}

// -----

// One row against a weight stored [K, N] (GPT-2's Conv1D): a block per 16
// columns (4 threads of 4 columns a row: 8 would leave fewer blocks than an
// H100's SMs), its 64 slices of threads taking rows k, k + 64, ..., four in
// flight; their sums meet in shared memory after one barrier. The same
// weight read as [N, K] takes a warp per column.
// CHECK: memref.global "private" @__xfmr_shared : memref<64x1x16xf32, #gpu.address_space<workgroup>>
// CHECK-LABEL: func.func @skinny_columns
// CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c144, %{{.*}} = %c1, %{{.*}} = %c1) threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c256, %{{.*}} = %c1, %{{.*}} = %c1)
// CHECK: scf.if
// CHECK: scf.for %{{.*}} = %{{.*}} to %c768 step %c256 iter_args(%{{.*}} = %cst, %{{.*}} = %cst, %{{.*}} = %cst, %{{.*}} = %cst) -> (f32, f32, f32, f32)
// CHECK-COUNT-4: vector.load %{{.*}} {alignment = 16 : i64} : memref<768x2304xf32, strided<[?, 1], offset: ?>>, vector<4xf32>
// CHECK: gpu.barrier
// CHECK: } else {
// CHECK: gpu.barrier
// CHECK: scf.for %{{.*}} = %c0 to %c64 step %c1 iter_args
// CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c96, %{{.*}} = %c1, %{{.*}} = %c1) threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c256, %{{.*}} = %c1, %{{.*}} = %c1)
// CHECK: scf.for %{{.*}} = %{{.*}} to %c2304 step %c512
func.func @skinny_columns(%x: tensor<1x768xf32>, %w: tensor<768x2304xf32>, %b: tensor<2304xf32>) -> tensor<1x768xf32> {
  %y = xfmr.fused_linear %x, %w bias(%b) : (tensor<1x768xf32>, tensor<768x2304xf32>, tensor<2304xf32>) -> tensor<1x2304xf32>
  %z = xfmr.matmul %y, %w {transpose_rhs} : (tensor<1x2304xf32>, tensor<768x2304xf32>) -> tensor<1x768xf32>
  return %z : tensor<1x768xf32>
}

// -----

// Nine rows are no skinny product: the tiled GEMM, which reads the int8
// weight dequantized (by the linalg lowering, later).
// CHECK-LABEL: func.func @nine_rows
// CHECK: xfmr.dequantize
// CHECK: gpu.launch
// CHECK-NOT: gpu.shuffle
// CHECK: memref.alloca() : memref<4x4xf32>
func.func @nine_rows(%x: tensor<9x64xf32>, %q: tensor<100x64xi8>, %s: tensor<100x2xf32>) -> tensor<9x100xf32> {
  %w = xfmr.dequantize %q, %s {axis = 1 : i64, group_size = 32 : i64} : (tensor<100x64xi8>, tensor<100x2xf32>) -> tensor<100x64xf32>
  %y = xfmr.matmul %x, %w {transpose_rhs} : (tensor<9x64xf32>, tensor<100x64xf32>) -> tensor<9x100xf32>
  return %y : tensor<9x100xf32>
}

// -----

// Softmax rows of 600: a block of 256 threads per row, each an online max
// and sum over columns t, t + 256, ...; a tree of 8 halving steps through
// two shared arrays; then the outputs.
// CHECK-DAG: memref.global "private" @__xfmr_shared : memref<256xf32, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.global "private" @__xfmr_shared_0 : memref<256xf32, #gpu.address_space<workgroup>>
// CHECK-LABEL: func.func @softmax
// CHECK: gpu.launch blocks(%[[ROW:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c6, %{{.*}} = %c1, %{{.*}} = %c1) threads(%[[T:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c256, %{{.*}} = %c1, %{{.*}} = %c1)
// CHECK: scf.for %{{.*}} = %[[T]] to %c600 step %c256 iter_args
// CHECK: math.exp
// CHECK: gpu.barrier
// CHECK: arith.cmpi ult, %[[T]], %c128
// CHECK-COUNT-7: gpu.barrier
// CHECK: arith.cmpi ult, %[[T]], %c1 :
// CHECK: gpu.barrier
// CHECK: scf.for %{{.*}} = %[[T]] to %c600 step %c256 {
// CHECK: memref.store
// CHECK-NOT: gpu.barrier
// CHECK: gpu.terminator
func.func @softmax(%x: tensor<2x3x600xf32>) -> tensor<2x3x600xf32> {
  %y = xfmr.softmax %x : tensor<2x3x600xf32>
  return %y : tensor<2x3x600xf32>
}

// -----

// Residual add + layer norm, rows of 40: blocks of 64 threads (the fewest,
// 32, rounded up to a power of 2 covering the row); the sum is written
// while its mean is reduced, the centred second moment reduced next, then
// the normalised row.
// CHECK-LABEL: func.func @add_layer_norm
// CHECK: %[[SUM:.*]] = memref.alloc() {alignment = 64 : i64} : memref<36x40xf32>
// CHECK: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<36x40xf32>
// CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c36, %{{.*}} = %c1, %{{.*}} = %c1) threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c64,
// CHECK: memref.store %{{.*}}, %[[SUM]]
// CHECK: gpu.barrier
// CHECK: math.fma
// CHECK: gpu.barrier
// CHECK: math.rsqrt
// CHECK: memref.store %{{.*}}, %[[OUT]]
// CHECK: gpu.terminator
func.func @add_layer_norm(%x: tensor<4x9x40xf32>, %r: tensor<4x9x40xf32>, %g: tensor<40xf32>,
                          %b: tensor<40xf32>) -> (tensor<4x9x40xf32>, tensor<4x9x40xf32>) {
  %sum, %y = xfmr.fused_add_layer_norm %x, %r, %g, %b {epsilon = 1.0e-5 : f64}
      : (tensor<4x9x40xf32>, tensor<4x9x40xf32>, tensor<40xf32>, tensor<40xf32>) -> (tensor<4x9x40xf32>, tensor<4x9x40xf32>)
  return %sum, %y : tensor<4x9x40xf32>, tensor<4x9x40xf32>
}

// -----

// Attention backward, causal, 150 rows of head dim 32: two launches of
// 2 x 2 blocks of 128 threads. First dK and dV, a thread per key row: its
// key, value and their gradients private; the query tiles from the first
// one the block's keys are visible to, each with scale * Q, dO (64 x 32),
// lse and rowsum(dO * O) (64) in shared memory; probabilities recomputed
// as exp(s - lse). Then dQ, a thread per query row, streaming key and
// value tiles; written times the scale.
// CHECK-DAG: memref.global "private" @__xfmr_shared_1 : memref<64xf32, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.global "private" @__xfmr_shared_3 : memref<64x32xf32, #gpu.address_space<workgroup>>
// CHECK-LABEL: func.func @backward
// CHECK: %[[DQ:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x150x2x32xf32>
// CHECK: %[[DK:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x150x2x32xf32>
// CHECK: %[[DV:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x150x2x32xf32>
// CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c2, %{{.*}} = %c2, %{{.*}} = %c1) threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c128,
// CHECK-COUNT-4: memref.alloca() : memref<32xf32>
// CHECK: %[[FIRST:.*]] = arith.divui
// CHECK: scf.for %{{.*}} = %[[FIRST]] to %c3 step %c1
// CHECK: gpu.barrier
// CHECK: math.exp
// CHECK: gpu.barrier
// CHECK: memref.store %{{.*}}, %[[DK]]
// CHECK: memref.store %{{.*}}, %[[DV]]
// CHECK: gpu.terminator
// CHECK: gpu.launch
// CHECK: arith.ceildivsi
// CHECK: gpu.barrier
// CHECK: math.exp
// CHECK: gpu.barrier
// CHECK: memref.store %{{.*}}, %[[DQ]]
// CHECK: gpu.terminator
// CHECK-NOT: memref<1x2x150x150xf32>
// CHECK: return
func.func @backward(%q: tensor<1x150x2x32xf32>, %o: tensor<1x150x2x32xf32>, %lse: tensor<1x2x150xf32>)
    -> (tensor<1x150x2x32xf32>, tensor<1x150x2x32xf32>, tensor<1x150x2x32xf32>) {
  %dq, %dk, %dv = xfmr.fused_attention_backward %q, %q, %q, %o, %lse, %o {causal, scale = 0.25 : f64}
      : (tensor<1x150x2x32xf32>, tensor<1x150x2x32xf32>, tensor<1x150x2x32xf32>, tensor<1x150x2x32xf32>,
         tensor<1x2x150xf32>, tensor<1x150x2x32xf32>)
      -> (tensor<1x150x2x32xf32>, tensor<1x150x2x32xf32>, tensor<1x150x2x32xf32>)
  return %dq, %dk, %dv : tensor<1x150x2x32xf32>, tensor<1x150x2x32xf32>, tensor<1x150x2x32xf32>
}

// -----

// A product of widened bf16 values (what xfmr-compute-in-f32 makes of a bf16
// linear) reads the bf16 factors and multiplies on tensor cores: C [80, 130]
// in 3 x 2 blocks of 64 x 64, 4 warps of 32 x 32; A and B^T staged as they
// lie (rows along M / N of 32 K elements, plus 8 of padding) in four
// buffers each; K = 70 (not whole 16-byte vectors) element by element,
// through no registers ahead and no async copy. Stages 0-2 staged before the
// loop (each only if it exists); per stage one barrier, then stage + 3
// staged into the buffer the last stage was read from, then per 16 of K the
// A fragments (2) and B fragments (2 x 2 tiles) by ldmatrix and 2 x 4 MMAs
// on 32 private accumulators; the f32 bias after.
// CHECK-DAG: memref.global "private" @__xfmr_shared : memref<4x64x40xbf16, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.global "private" @__xfmr_shared_0 : memref<4x64x40xbf16, #gpu.address_space<workgroup>>
// CHECK-LABEL: func.func @mma
// CHECK-SAME: (%[[X:.*]]: tensor<80x70xbf16>, %[[W:.*]]: tensor<130x70xbf16>, %[[B:.*]]: tensor<130xf32>)
// CHECK-NOT: arith.extf %[[X]]
// CHECK: %[[BIAS:.*]] = bufferization.to_buffer %[[B]]
// CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c3, %{{.*}} = %c2, %{{.*}} = %c1) threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c128, %{{.*}} = %c1, %{{.*}} = %c1)
// CHECK: memref.alloca() : memref<2x4x4xf32>
// CHECK: %[[ATILES:.*]] = memref.get_global @__xfmr_shared :
// CHECK-NOT: vector.load
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: scf.if
// CHECK: memref.load %{{.*}} : memref<80x70xbf16, strided<[?, 1], offset: ?>>
// CHECK: memref.store %{{.*}}, %[[ATILES]][%{{.*}}, %{{.*}}, %{{.*}}] : memref<4x64x40xbf16, #gpu.address_space<workgroup>>
// CHECK-NOT: gpu.barrier
// CHECK: scf.for %{{.*}} = %c0 to %c3 step %c1
// CHECK-NEXT: gpu.barrier
// CHECK: scf.if
// CHECK: memref.store %{{.*}}, %[[ATILES]]
// CHECK-COUNT-4: nvvm.ldmatrix %{{.*}} {eltType = #nvvm.ld_st_matrix_elt_type<b16>, layout = #nvvm.mma_layout<row>, num = 4 : i32, shape = #nvvm.ld_st_matrix_shape<m = 8, n = 8>} : (!llvm.ptr<3>) -> !llvm.struct<(i32, i32, i32, i32)>
// CHECK-COUNT-8: nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK-COUNT-4: nvvm.ldmatrix
// CHECK-COUNT-8: nvvm.mma.sync
// CHECK-NOT: nvvm.mma.sync
// CHECK-NOT: gpu.barrier
// CHECK: memref.load %[[BIAS]]
// CHECK: gpu.terminator
//
// Emulated: the same staging, into tiles of the elements' bits; each
// thread's accumulators are dot products over K of the tiles' elements.
// EMU-LABEL: func.func @mma
// EMU-NOT: nvvm.
// EMU: %[[ATILES:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4x64x40xi16>
// EMU: memref.alloc() {alignment = 64 : i64} : memref<128x2x4x4xf32>
// EMU: %[[A:.*]] = memref.load %[[ATILES]][%{{.*}}, %{{.*}}, %{{.*}}] : memref<4x64x40xi16>
// EMU-NEXT: %[[ABF16:.*]] = arith.bitcast %[[A]] : i16 to bf16
// EMU-NEXT: %[[AWIDE:.*]] = arith.extf %[[ABF16]] : bf16 to f32
// EMU: math.fma %[[AWIDE]], %{{.*}}, %{{.*}} : f32
// EMU-DAG: cf.assert %{{.*}}, "emulated MMA: a shared tile written before the MMAs reading it were waited for and a barrier passed"
// EMU-DAG: cf.assert %{{.*}}, "emulated MMA: a shared tile read before the copies into it were waited for and a barrier passed"
// EMU-NOT: nvvm.
// EMU: return
func.func @mma(%x: tensor<80x70xbf16>, %w: tensor<130x70xbf16>, %b: tensor<130xf32>) -> tensor<80x130xf32> {
  %xf = arith.extf %x : tensor<80x70xbf16> to tensor<80x70xf32>
  %wf = arith.extf %w : tensor<130x70xbf16> to tensor<130x70xf32>
  %y = xfmr.fused_linear %xf, %wf bias(%b) {transpose_weight}
       : (tensor<80x70xf32>, tensor<130x70xf32>, tensor<130xf32>) -> tensor<80x130xf32>
  return %y : tensor<80x130xf32>
}

// -----

// f16 operands are f16x2 vectors. A transposed ([K, M]) and B ([K, N]) are
// staged with their rows along K and give their fragments by
// ldmatrix.trans. Where a run-time check finds both aligned, their stages are
// copied 16 bytes at a time by cp.async, one group a stage: stages inside
// both factors without clamping, others with the rows and columns clamped
// and the copy zero-filled outside; before the products of a stage, the
// wait for all but the 2 newest groups (the stage's copies done) and a
// barrier. Else the same loop, element by element.
// CHECK-DAG: memref.global "private" @__xfmr_shared : memref<4x32x72xf16, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.global "private" @__xfmr_shared_0 : memref<4x32x72xf16, #gpu.address_space<workgroup>>
// CHECK-LABEL: func.func @mma_f16_transposed
// CHECK: gpu.launch
// CHECK: memref.extract_aligned_pointer_as_index
// CHECK: scf.if %{{.*}} {
// CHECK: scf.if %{{.*}} {
// CHECK: scf.if %{{.*}} {
// CHECK: nvgpu.device_async_copy %{{.*}}[%{{.*}}, %{{.*}}], %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}], 8 {bypassL1} : memref<32x48xf16, strided<[?, 1], offset: ?>> to memref<4x32x72xf16, #gpu.address_space<workgroup>>
// CHECK: } else {
// CHECK: %[[READ:.*]] = arith.select %{{.*}}, %c8, %c0 : index
// CHECK: nvgpu.device_async_copy %{{.*}}[%{{.*}}, %{{.*}}], %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}], 8, %[[READ]] {bypassL1}
// CHECK: llvm.inline_asm has_side_effects "cp.async.commit_group;"
// CHECK: llvm.inline_asm has_side_effects "cp.async.commit_group;"
// CHECK: llvm.inline_asm has_side_effects "cp.async.commit_group;"
// CHECK-NOT: gpu.barrier
// CHECK: scf.for
// CHECK-NEXT: llvm.inline_asm has_side_effects "cp.async.wait_group 2;"
// CHECK-NEXT: gpu.barrier
// CHECK: nvgpu.device_async_copy
// CHECK: llvm.inline_asm has_side_effects "cp.async.commit_group;"
// CHECK: nvvm.ldmatrix %{{.*}} {{{.*}}layout = #nvvm.mma_layout<col>, num = 4 : i32{{.*}}}
// CHECK: llvm.bitcast %{{.*}} : i32 to vector<2xf16>
// CHECK: nvvm.mma.sync {{.*}}shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (vector<2xf16>, vector<2xf16>, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK: } else {
// CHECK-NOT: nvgpu.device_async_copy
// CHECK-NOT: llvm.inline_asm
// CHECK: scf.for
// CHECK-NEXT: gpu.barrier
// CHECK: memref.load %{{.*}} : memref<32x48xf16, strided<[?, 1], offset: ?>>
// CHECK: nvvm.mma.sync
// CHECK: gpu.terminator
// With warpgroup-mma (sm_90a): the block's 4 warps are one warpgroup;
// both factors staged as 8 x 8 core matrices (4 buffers of [4][8][8][8]: 32
// rows along K of 64 columns), so both are MN-major (trans-a and trans-b
// 1): leading byte offset 1024 (the next 8 rows, K), stride 128 (the next 8
// columns): (64 << 16) | (8 << 32). Copies run 2 stages ahead (not 3: a
// stage's MMAs still read its buffer during the next stage). Per stage: its
// copies waited for and fenced for the async proxy, the barrier;
// wgmma.fence, 2 MMAs of m64n64k16 (16 of K each, the second 2048 bytes =
// 128 units on), committed, the copies of stage + 2 issued while they run,
// then a wait that leaves them in flight (at most 1 group); after the
// loop, the wait for all.
// WGMMA-LABEL: func.func @mma_f16_transposed
// WGMMA-DAG: %[[LAYOUT:.*]] = arith.constant 34363932672 : i64
// WGMMA: gpu.launch {{.*}} threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c128,
// WGMMA: memref.get_global @__xfmr_shared : memref<4x4x8x8x8xf16, #gpu.address_space<workgroup>>
// WGMMA: nvgpu.device_async_copy %{{.*}}[%{{.*}}, %{{.*}}], %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}], 8 {bypassL1}
// WGMMA: scf.for
// WGMMA-NEXT: "cp.async.wait_group 1;"
// WGMMA-NEXT: "fence.proxy.async.shared::cta;"
// WGMMA-NEXT: gpu.barrier
// WGMMA: "wgmma.fence.sync.aligned;"
// WGMMA: arith.addi %{{.*}}, %c0_i64 : i64
// WGMMA-NEXT: arith.ori %{{.*}}, %[[LAYOUT]] : i64
// WGMMA: arith.addi %{{.*}}, %c0_i64 : i64
// WGMMA-NEXT: arith.ori %{{.*}}, %[[LAYOUT]] : i64
// WGMMA-NEXT: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, $64, $65, p, 1, 1, 1, 1;
// WGMMA: arith.addi %{{.*}}, %c128_i64 : i64
// WGMMA-NEXT: arith.ori %{{.*}}, %[[LAYOUT]] : i64
// WGMMA: arith.addi %{{.*}}, %c128_i64 : i64
// WGMMA-NEXT: arith.ori %{{.*}}, %[[LAYOUT]] : i64
// WGMMA-NEXT: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, $64, $65, p, 1, 1, 1, 1;
// WGMMA-NOT: wgmma.mma_async
// WGMMA: "wgmma.commit_group.sync.aligned;"
// WGMMA: nvgpu.device_async_copy
// WGMMA: "wgmma.wait_group.sync.aligned 1;"
// WGMMA-NOT: wgmma.mma_async
// WGMMA: "wgmma.wait_group.sync.aligned 0;"
// WGMMA-NOT: nvvm.mma.sync
// WGMMA-NOT: nvvm.ldmatrix
// WGMMA: gpu.terminator
// WGMMA-EMU-LABEL: func.func @mma_f16_transposed
// WGMMA-EMU-COUNT-2: memref.alloc() {alignment = 64 : i64} : memref<4x4x8x8x8xi16>
// WGMMA-EMU-DAG: cf.assert %{{.*}}, "emulated MMA: a shared tile written before the MMAs reading it were waited for and a barrier passed"
// WGMMA-EMU-DAG: cf.assert %{{.*}}, "emulated MMA: a shared tile read before a barrier after the stores into it"
// WGMMA-EMU-NOT: wgmma
// WGMMA-EMU: return
func.func @mma_f16_transposed(%a: tensor<32x48xf16>, %m: tensor<32x16xf16>) -> tensor<48x16xf32> {
  %af = arith.extf %a : tensor<32x48xf16> to tensor<32x48xf32>
  %mf = arith.extf %m : tensor<32x16xf16> to tensor<32x16xf32>
  %p = xfmr.matmul %af, %mf {transpose_lhs} : (tensor<32x48xf32>, tensor<32x16xf32>) -> tensor<48x16xf32>
  return %p : tensor<48x16xf32>
}

// -----

// A product, attention or row kernel whose one use rounds it to bf16 (what
// xfmr-compute-in-f32 makes of a bf16 op) writes the rounded values itself:
// no f32 result, no truncf after; a row kernel (and a product's bias and
// residual) reads bf16 operands widened as it loads them. The product
// stores each pair of neighbouring outputs (one row, columns 2q and 2q + 1
// of an accumulator tile) at once.
// CHECK-LABEL: func.func @rounded
// CHECK-SAME: %[[R:[a-z0-9]+]]: tensor<80x130xbf16>, %[[G:[a-z0-9]+]]: tensor<130xbf16>
// CHECK: gpu.launch
// CHECK: arith.truncf %{{.*}} : vector<2xf32> to vector<2xbf16>
// CHECK: vector.store %{{.*}} {alignment = 4 : i64} : memref<80x130xbf16>, vector<2xbf16>
// CHECK: gpu.launch
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: memref.store %{{.*}} : memref<1x64x2x32xbf16>
// CHECK: %[[RB:.*]] = bufferization.to_buffer %[[R]]
// CHECK: %[[GB:.*]] = bufferization.to_buffer %[[G]]
// CHECK: gpu.launch
// CHECK: memref.load %[[RB]]
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: memref.store %{{.*}} : memref<80x130xbf16>
// CHECK: memref.load %[[GB]]
// CHECK: memref.store %{{.*}} : memref<80x130xbf16>
// CHECK-NOT: arith.truncf %{{.*}} : tensor
// CHECK-NOT: arith.extf %{{.*}} : tensor
// CHECK: return
func.func @rounded(%x: tensor<80x64xbf16>, %w: tensor<130x64xbf16>, %q: tensor<1x64x2x32xbf16>,
                   %r: tensor<80x130xbf16>, %g: tensor<130xbf16>)
    -> (tensor<80x130xbf16>, tensor<1x64x2x32xbf16>, tensor<80x130xbf16>, tensor<80x130xbf16>) {
  %xf = arith.extf %x : tensor<80x64xbf16> to tensor<80x64xf32>
  %wf = arith.extf %w : tensor<130x64xbf16> to tensor<130x64xf32>
  %y = xfmr.fused_linear %xf, %wf {transpose_weight} : (tensor<80x64xf32>, tensor<130x64xf32>) -> tensor<80x130xf32>
  %yr = arith.truncf %y : tensor<80x130xf32> to tensor<80x130xbf16>
  %qf = arith.extf %q : tensor<1x64x2x32xbf16> to tensor<1x64x2x32xf32>
  %a = xfmr.fused_attention %qf, %qf, %qf {causal, scale = 0.125 : f64}
       : (tensor<1x64x2x32xf32>, tensor<1x64x2x32xf32>, tensor<1x64x2x32xf32>) -> tensor<1x64x2x32xf32>
  %ar = arith.truncf %a : tensor<1x64x2x32xf32> to tensor<1x64x2x32xbf16>
  %rf = arith.extf %r : tensor<80x130xbf16> to tensor<80x130xf32>
  %gf = arith.extf %g : tensor<130xbf16> to tensor<130xf32>
  %s, %n = xfmr.fused_add_layer_norm %rf, %rf, %gf, %gf {epsilon = 1.0e-5 : f64}
      : (tensor<80x130xf32>, tensor<80x130xf32>, tensor<130xf32>, tensor<130xf32>) -> (tensor<80x130xf32>, tensor<80x130xf32>)
  %sr = arith.truncf %s : tensor<80x130xf32> to tensor<80x130xbf16>
  %nr = arith.truncf %n : tensor<80x130xf32> to tensor<80x130xbf16>
  return %yr, %ar, %sr, %nr : tensor<80x130xbf16>, tensor<1x64x2x32xbf16>, tensor<80x130xbf16>, tensor<80x130xbf16>
}

// -----

// A product with another use keeps its f32 result, rounded after.
// CHECK-LABEL: func.func @rounded_and_wide
// CHECK: vector.store %{{.*}} {alignment = 8 : i64} : memref<80x130xf32>, vector<2xf32>
// CHECK: arith.truncf %{{.*}} : tensor<80x130xf32> to tensor<80x130xbf16>
func.func @rounded_and_wide(%x: tensor<80x64xbf16>, %w: tensor<130x64xbf16>)
    -> (tensor<80x130xbf16>, tensor<80x130xf32>) {
  %xf = arith.extf %x : tensor<80x64xbf16> to tensor<80x64xf32>
  %wf = arith.extf %w : tensor<130x64xbf16> to tensor<130x64xf32>
  %y = xfmr.fused_linear %xf, %wf {transpose_weight} : (tensor<80x64xf32>, tensor<130x64xf32>) -> tensor<80x130xf32>
  %yr = arith.truncf %y : tensor<80x130xf32> to tensor<80x130xbf16>
  return %yr, %y : tensor<80x130xbf16>, tensor<80x130xf32>
}

// -----

// Negative: with an odd number of columns, a pair may straddle C's edge or
// lie unaligned: each output is stored alone.
// CHECK-LABEL: func.func @odd_columns
// CHECK: gpu.launch
// CHECK-NOT: vector.store
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK-NEXT: memref.store %{{.*}} : memref<80x129xbf16>
// CHECK-NOT: vector.store
// CHECK: gpu.terminator
func.func @odd_columns(%x: tensor<80x64xbf16>, %w: tensor<129x64xbf16>) -> tensor<80x129xbf16> {
  %xf = arith.extf %x : tensor<80x64xbf16> to tensor<80x64xf32>
  %wf = arith.extf %w : tensor<129x64xbf16> to tensor<129x64xf32>
  %y = xfmr.fused_linear %xf, %wf {transpose_weight} : (tensor<80x64xf32>, tensor<129x64xf32>) -> tensor<80x129xf32>
  %yr = arith.truncf %y : tensor<80x129xf32> to tensor<80x129xbf16>
  return %yr : tensor<80x129xbf16>
}

// -----

// So do an attention backward's gradients, each on its own: dq and dk
// rounded to bf16 by the kernels, dv (used wide) f32.
// CHECK-LABEL: func.func @rounded_gradients
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<1x100x2x40xbf16>
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<1x100x2x40xbf16>
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<1x100x2x40xf32>
// CHECK: gpu.launch
// CHECK: memref.store %{{.*}} : memref<1x100x2x40xbf16>
// CHECK: gpu.launch
// CHECK-NOT: arith.truncf %{{.*}} : tensor
// CHECK: return
func.func @rounded_gradients(%q: tensor<1x100x2x40xbf16>, %o: tensor<1x100x2x40xbf16>, %lse: tensor<1x2x100xf32>)
    -> (tensor<1x100x2x40xbf16>, tensor<1x100x2x40xbf16>, tensor<1x100x2x40xf32>) {
  %qf = arith.extf %q : tensor<1x100x2x40xbf16> to tensor<1x100x2x40xf32>
  %of = arith.extf %o : tensor<1x100x2x40xbf16> to tensor<1x100x2x40xf32>
  %dq, %dk, %dv = xfmr.fused_attention_backward %qf, %qf, %qf, %of, %lse, %of {causal, scale = 0.25 : f64}
      : (tensor<1x100x2x40xf32>, tensor<1x100x2x40xf32>, tensor<1x100x2x40xf32>, tensor<1x100x2x40xf32>,
         tensor<1x2x100xf32>, tensor<1x100x2x40xf32>)
      -> (tensor<1x100x2x40xf32>, tensor<1x100x2x40xf32>, tensor<1x100x2x40xf32>)
  %dqr = arith.truncf %dq : tensor<1x100x2x40xf32> to tensor<1x100x2x40xbf16>
  %dkr = arith.truncf %dk : tensor<1x100x2x40xf32> to tensor<1x100x2x40xbf16>
  return %dqr, %dkr, %dv : tensor<1x100x2x40xbf16>, tensor<1x100x2x40xbf16>, tensor<1x100x2x40xf32>
}
// -----

// bf16 attention on tensor cores (FlashAttention-2): q, k and v read narrow;
// a block per 128 query rows and head, 4 warps of two 16-row tiles; K and V tiles staged
// row-major in bf16, head dim 40 padded to 48 (3 MMA steps) plus 8 (banks),
// 16 bytes per copy when the run-time alignment check passes (cp.async into
// the other stage before the current tile's products: zero-filled past the
// head dim, and past the keys in the tile the sequence ends in, where rows
// are clamped; one group a tile, waited for before the barrier),
// else element by element; Q fragments in a private [row tiles * steps, 4]
// i32 array (a head dim up to 64). Per key tile and step: K fragments of two
// column tiles by one ldmatrix.x4, each for both row tiles (4 MMAs; 48 for
// the scores), the row max over a row's 4 lanes by 2 xor shuffles
// per row, the probabilities rounded to bf16 as A fragments, V fragments by
// ldmatrix.trans, 2 x 4 x 6 MMAs; the row sums shuffled once after the loop.
// The causal mask only on tiles that may hide a key from a row of the warp.
// Two stages of K and V tiles (static shared memory, 28 KB), tile j in
// stage j % 2: one barrier a tile.
// CHECK-DAG: memref.global "private" @__xfmr_shared : memref<64x56xbf16, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.global "private" @__xfmr_shared_0 : memref<64x56xbf16, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.global "private" @__xfmr_shared_1 : memref<64x56xbf16, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.global "private" @__xfmr_shared_2 : memref<64x56xbf16, #gpu.address_space<workgroup>>
// CHECK-LABEL: func.func @mma_attention
// CHECK-NOT: arith.extf
// CHECK: bufferization.to_buffer %{{.*}} read_only : tensor<1x100x2x40xbf16>
// CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c1, %{{.*}} = %c2, %{{.*}} = %c1) threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c128, %{{.*}} = %c1, %{{.*}} = %c1)
// CHECK: memref.alloca() : memref<6x4xi32>
// CHECK: memref.extract_aligned_pointer_as_index
// CHECK-NOT: vector<8xbf16>
// CHECK: %[[NONEMPTY:.*]] = arith.cmpi ult, %c0, %{{.*}} : index
// CHECK-NEXT: %[[COPY_FIRST:.*]] = arith.andi %[[ALIGNED:.*]], %[[NONEMPTY]] : i1
// CHECK-NEXT: scf.if %[[COPY_FIRST]] {
// CHECK: %[[ZFILL:.*]] = arith.select %{{.*}}, %c8, %c0 : index
// CHECK: nvgpu.device_async_copy %{{.*}}[{{.*}}], %{{.*}}[{{.*}}], 8, %[[ZFILL]] {bypassL1} : memref<1x100x2x40xbf16, strided<[?, ?, ?, 1], offset: ?>> to memref<64x56xbf16, #gpu.address_space<workgroup>>
// CHECK-COUNT-5: nvgpu.device_async_copy
// CHECK-NEXT: } else {
// CHECK-COUNT-6: nvgpu.device_async_copy
// CHECK-NEXT: {{^ *}}}{{$}}
// CHECK-NEXT: llvm.inline_asm has_side_effects "cp.async.commit_group;"
// CHECK: scf.for %[[TILE:.*]] = %c0 to %[[TILES:.*]] step %c1 {
// CHECK: %[[PARITY:.*]] = arith.remui %[[TILE]], %c2 : index
// CHECK: %[[ODD:.*]] = arith.cmpi eq, %[[PARITY]], %c1 : index
// CHECK: arith.select %[[ODD]], %{{.*}}, %{{.*}} : memref<64x56xbf16, #gpu.address_space<workgroup>>
// CHECK: scf.if %[[ALIGNED]] {
// CHECK-NEXT: llvm.inline_asm has_side_effects "cp.async.wait_group 0;"
// CHECK-NEXT: } else {
// CHECK: memref.store %{{.*}} : memref<64x56xbf16, #gpu.address_space<workgroup>>
// CHECK: memref.store %{{.*}} : memref<64x56xbf16, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: %[[NEXT:.*]] = arith.addi %[[TILE]], %c1 : index
// CHECK: arith.cmpi ult, %[[NEXT]], %[[TILES]] : index
// CHECK: scf.if
// CHECK-COUNT-6: nvgpu.device_async_copy
// CHECK: } else {
// CHECK-COUNT-6: nvgpu.device_async_copy
// CHECK-NEXT: {{^ *}}}{{$}}
// CHECK-NEXT: llvm.inline_asm has_side_effects "cp.async.commit_group;"
// The first K fragments serve the first (A fragment registers 0-3) and the
// second row tile (4-7).
// CHECK: %[[KWORDS:.*]] = nvvm.ldmatrix %{{.*}} {eltType = #nvvm.ld_st_matrix_elt_type<b16>, layout = #nvvm.mma_layout<row>, num = 4 : i32, shape = #nvvm.ld_st_matrix_shape<m = 8, n = 8>} : (!llvm.ptr<3>) -> !llvm.struct<(i32, i32, i32, i32)>
// CHECK-NEXT: %[[B0:.*]] = llvm.extractvalue %[[KWORDS]][0]
// CHECK-NEXT: %[[B1:.*]] = llvm.extractvalue %[[KWORDS]][1]
// CHECK: nvvm.mma.sync A[%{{.*}}]  B[%[[B0]], %[[B1]]] {{.*}}multiplicandAPtxType = #nvvm.mma_type<bf16>
// CHECK-NEXT: llvm.extractvalue
// CHECK-NEXT: llvm.extractvalue
// CHECK-NEXT: llvm.extractvalue
// CHECK-NEXT: llvm.extractvalue
// CHECK-NEXT: nvvm.mma.sync A[%{{.*}}]  B[%[[B0]], %[[B1]]]
// CHECK-COUNT-46: nvvm.mma.sync {{.*}}multiplicandAPtxType = #nvvm.mma_type<bf16>
// CHECK-NOT: nvvm.mma.sync
// A tile is masked where its last key is past the warp's first row's
// visible end.
// CHECK: %[[MASKED:.*]] = arith.cmpi sge
// CHECK-NEXT: scf.if %[[MASKED]] {
// CHECK: } else {
// A tile without masks keeps its products: their row max (one max.f32
// each), times scale log2(e) once per row.
// CHECK-COUNT-64: arith.maxnumf
// CHECK-COUNT-4: arith.mulf %{{.*}}, %[[FACTOR:.*]] : f32
// CHECK: }
// CHECK-COUNT-8: gpu.shuffle  xor %{{.*}}, %c{{[12]}}_i32, %c32_i32 : f32
// CHECK: scf.if
// CHECK: math.exp2 %{{.*}} fastmath<afn> : f32
// CHECK: } else {
// ... and its probabilities 2^(product scale log2(e) - max): an FFMA, no
// select for masked keys.
// CHECK: %[[NEGATED:.*]] = arith.negf
// CHECK-NEXT: %[[EXPONENT:.*]] = math.fma %{{.*}}, %[[FACTOR]], %[[NEGATED]] : f32
// CHECK-NEXT: %[[P:.*]] = math.exp2 %[[EXPONENT]] fastmath<afn> : f32
// CHECK-NEXT: memref.store %[[P]]
// A row's accumulators are rescaled only where its max grew.
// CHECK: %[[GREW:.*]] = arith.cmpf une
// CHECK: scf.if %[[GREW]] {
// CHECK-COUNT-6: arith.mulf
// CHECK: }
// The probabilities rounded and packed in pairs (cvt.rn.bf16x2.f32).
// CHECK: %[[PAIR:.*]] = vector.from_elements %{{.*}}, %{{.*}} : vector<2xf32>
// CHECK: %[[ROUNDED:.*]] = arith.truncf %[[PAIR]] : vector<2xf32> to vector<2xbf16>
// CHECK: llvm.bitcast %[[ROUNDED]] : vector<2xbf16> to i32
// CHECK: nvvm.ldmatrix %{{.*}} {{{.*}}layout = #nvvm.mma_layout<col>, num = 4 : i32{{.*}}}
// CHECK-COUNT-48: nvvm.mma.sync
// CHECK-NOT: nvvm.mma.sync
// CHECK-NOT: gpu.barrier
// CHECK-COUNT-8: gpu.shuffle  xor
// CHECK: arith.divf
// CHECK: gpu.terminator
//
// Emulated: no ldmatrix, MMA or shuffle; the Q fragments of all 128
// threads in one array (a thread's products read its lanes' words); the
// row max and sum combined over lanes through scratch copies.
// EMU-LABEL: func.func @mma_attention
// EMU-NOT: nvvm.
// EMU-NOT: gpu.shuffle
// EMU: memref.alloc() {alignment = 64 : i64} : memref<128x6x4xi32>
// EMU-DAG: cf.assert %{{.*}}, "emulated MMA: a shared tile written before the MMAs reading it were waited for and a barrier passed"
// EMU-DAG: cf.assert %{{.*}}, "emulated MMA: a shared tile read before a barrier after the stores into it"
// EMU: arith.xori
// EMU: arith.truncf %{{.*}} : f32 to bf16
// EMU-NOT: nvvm.
// EMU-NOT: gpu.shuffle
// EMU: return
func.func @mma_attention(%q: tensor<1x100x2x40xbf16>, %k: tensor<1x100x2x40xbf16>) -> tensor<1x100x2x40xf32> {
  %qf = arith.extf %q : tensor<1x100x2x40xbf16> to tensor<1x100x2x40xf32>
  %kf = arith.extf %k : tensor<1x100x2x40xbf16> to tensor<1x100x2x40xf32>
  %o = xfmr.fused_attention %qf, %kf, %kf {causal, scale = 0.25 : f64}
       : (tensor<1x100x2x40xf32>, tensor<1x100x2x40xf32>, tensor<1x100x2x40xf32>) -> tensor<1x100x2x40xf32>
  return %o : tensor<1x100x2x40xf32>
}

// -----

// Head dim 128: Q's 128 rows in shared memory rather than in registers
// (with 32 rows a warp, a thread holds 128 accumulators and 64 scores),
// copied asynchronously with the first tile (rows clamped only where the
// sequence ends inside the block; element by element where the copies
// cannot be); its A fragments by ldmatrix.x4, per step and row tile. With
// the two stages of K and V tiles (4 x 17 KB + 34 KB) past static shared
// memory: views of one dynamic shared array, whose size the launch gives.
// CHECK: memref.global "private" @__xfmr_dynamic_shared : memref<0xi8, #gpu.address_space<workgroup>>
// CHECK-NOT: @__xfmr_shared
// CHECK-LABEL: func.func @mma_attention_dynamic_shared
// CHECK: %[[BYTES:.*]] = arith.constant 104448 : i32
// CHECK: gpu.launch {{.*}} threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c128, %{{.*}} = %c1, %{{.*}} = %c1) dynamic_shared_memory_size %[[BYTES]]
// CHECK: %[[MEMORY:.*]] = memref.get_global @__xfmr_dynamic_shared : memref<0xi8, #gpu.address_space<workgroup>>
// CHECK: memref.view %[[MEMORY]][%c0][] : memref<0xi8, #gpu.address_space<workgroup>> to memref<64x136xbf16, #gpu.address_space<workgroup>>
// CHECK: memref.view %[[MEMORY]][%c17408][]
// CHECK: memref.view %[[MEMORY]][%c34816][]
// CHECK: memref.view %[[MEMORY]][%c52224][]
// CHECK: %[[QUERIES:.*]] = memref.view %[[MEMORY]][%c69632][] : memref<0xi8, #gpu.address_space<workgroup>> to memref<128x136xbf16, #gpu.address_space<workgroup>>
// CHECK-NOT: memref.alloca() : memref<{{.*}}xi32>
// CHECK: scf.if
// CHECK-COUNT-16: nvgpu.device_async_copy %{{.*}}[{{.*}}], %[[QUERIES]][{{.*}}], 8 {bypassL1}
// CHECK-NEXT: } else {
// CHECK-COUNT-16: nvgpu.device_async_copy %{{.*}}[{{.*}}], %[[QUERIES]][{{.*}}], 8, %{{.*}} {bypassL1}
// CHECK-NEXT: {{^ *}}}{{$}}
// CHECK-NEXT: llvm.inline_asm has_side_effects "cp.async.commit_group;"
// CHECK-NEXT: } else {
// CHECK: memref.store %{{.*}}, %[[QUERIES]]
// CHECK: scf.for
// CHECK: gpu.barrier
// CHECK: memref.extract_aligned_pointer_as_index %[[QUERIES]]
// CHECK: nvvm.ldmatrix %{{.*}} {{{.*}}layout = #nvvm.mma_layout<row>, num = 4 : i32{{.*}}}
// CHECK: memref.extract_aligned_pointer_as_index %[[QUERIES]]
// CHECK: nvvm.ldmatrix %{{.*}} {{{.*}}layout = #nvvm.mma_layout<row>, num = 4 : i32{{.*}}}
// CHECK-COUNT-4: nvvm.mma.sync
// No copy left in flight where the block had no key tile.
// CHECK: llvm.inline_asm has_side_effects "cp.async.wait_group 0;"
// CHECK-NOT: nvvm.mma.sync
// CHECK: gpu.terminator
// EMU-LABEL: func.func @mma_attention_dynamic_shared
// EMU-NOT: memref.view
// EMU-COUNT-4: memref.alloc() {alignment = 64 : i64} : memref<64x136xbf16>
// EMU: memref.alloc() {alignment = 64 : i64} : memref<128x136xbf16>
func.func @mma_attention_dynamic_shared(%q: tensor<1x70x2x128xbf16>) -> tensor<1x70x2x128xf32> {
  %qf = arith.extf %q : tensor<1x70x2x128xbf16> to tensor<1x70x2x128xf32>
  %o = xfmr.fused_attention %qf, %qf, %qf {scale = 0.08838834764831845 : f64}
       : (tensor<1x70x2x128xf32>, tensor<1x70x2x128xf32>, tensor<1x70x2x128xf32>) -> tensor<1x70x2x128xf32>
  return %o : tensor<1x70x2x128xf32>
}

// -----

// With warpgroup-mma (sm_90a), the bf16 attention forward multiplies by
// wgmma.mma_async: a block of 2 warpgroups (256 threads) per 128 query
// rows; K and V tiles of 128 keys staged as 8 x 8 core matrices
// ([16][16][8][8]: 128 rows of head dim 128, 32 KB each, three stages),
// and the block's Q rows the same way (32 KB more: 224 KB of dynamic shared
// memory), copied by cp.async, then fenced for the async proxy before the
// tile's barrier. Per tile, S = Q K^T: wgmma.fence, then 8 MMAs of
// m64n128k16 (one per 16 of the head dim, 256 bytes = 16 units apart along
// K), both factors by descriptor - Q from the warpgroup's 64 rows (t / 128
// * 64, lane 0's: a shuffle tells ptxas it is uniform, so the descriptors
// stay in uniform registers), K-major (trans-a 0), K K-major (trans-b 0);
// the first without reading D -, committed; from the second tile on, the
// last tile's O += P V behind them: 8 MMAs of m64n128k16 (one per 16 keys,
// 4 KB = 256 units apart), P from registers, V N-major (trans-b 1),
// committed; then S alone waited for, and P V after the softmax. The
// descriptors: Q's and K's leading
// byte offset 128 (the next 8 columns, K) and stride 2048 (the next 8
// rows, M or N): (8 << 16) | (128 << 32); V's leading 2048 (the next 8 key
// rows, K) and stride 128 (the next 8 columns, N): (128 << 16) | (8 << 32).
// WGMMA-LABEL: func.func @warpgroup_mma_attention
// WGMMA-DAG: %[[K_LAYOUT:.*]] = arith.constant 549756338176 : i64
// WGMMA-DAG: %[[V_LAYOUT:.*]] = arith.constant 34368126976 : i64
// WGMMA: gpu.launch {{.*}} threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c256, %{{.*}} = %c1, %{{.*}} = %c1) dynamic_shared_memory_size %c229376_i32
// WGMMA-COUNT-6: memref.view {{.*}} to memref<16x16x8x8xbf16, #gpu.address_space<workgroup>>
// WGMMA-NEXT: %[[Q_ROWS:.*]] = memref.view %{{.*}}[%c196608][] : {{.*}} to memref<16x16x8x8xbf16, #gpu.address_space<workgroup>>
// WGMMA: nvgpu.device_async_copy %{{.*}}[{{.*}}], %[[Q_ROWS]][%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}], 8 {bypassL1}
// WGMMA: scf.for
// The pipeline's first copies, branch-free, a group each: K's tiles 0 and
// 1, V's tile 0 (read one tile late, by P V). Each tile then waits for
// the copies issued two tiles before (its K, the last tile's V), leaving
// the last tile's two groups in flight.
// WGMMA: nvgpu.device_async_copy %[[K:[0-9]+]][%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}], %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}], 8, %{{.*}} {bypassL1}
// WGMMA-COUNT-7: nvgpu.device_async_copy %[[K]][
// WGMMA-NEXT: "cp.async.commit_group;"
// WGMMA-COUNT-8: nvgpu.device_async_copy %[[K]][
// WGMMA-NEXT: "cp.async.commit_group;"
// WGMMA: nvgpu.device_async_copy %[[V:[0-9]+]][
// WGMMA-NOT: %[[K]][
// WGMMA-COUNT-7: nvgpu.device_async_copy %[[V]][
// WGMMA-NEXT: "cp.async.commit_group;"
// WGMMA-NOT: nvgpu.device_async_copy
// WGMMA: "cp.async.wait_group 2;"
// WGMMA: "fence.proxy.async.shared::cta;"
// WGMMA-NEXT: gpu.barrier
// The first tile, built apart: S's MMAs, waited for at once.
// WGMMA: "wgmma.fence.sync.aligned;"
// WGMMA: arith.addi %{{.*}}, %c0_i64 : i64
// WGMMA-NEXT: arith.ori %{{.*}}, %[[K_LAYOUT]] : i64
// WGMMA-NEXT: %[[WARPGROUP:.*]] = arith.divui %{{.*}}, %c128 : index
// WGMMA-NEXT: %[[WORD:.*]] = arith.index_castui %[[WARPGROUP]] : index to i32
// WGMMA-NEXT: %[[LANE0:.*]], %{{.*}} = gpu.shuffle  idx %[[WORD]], %c0_i32, %c32_i32 : i32
// WGMMA-NEXT: %[[UNIFORM:.*]] = arith.index_castui %[[LANE0]] : i32 to index
// WGMMA-NEXT: arith.muli %[[UNIFORM]], %c64 : index
// WGMMA: memref.extract_aligned_pointer_as_index %[[Q_ROWS]]
// WGMMA: arith.addi %{{.*}}, %c0_i64 : i64
// WGMMA-NEXT: arith.ori %{{.*}}, %[[K_LAYOUT]] : i64
// WGMMA-NEXT: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, $64, $65, p, 1, 1, 0, 0;
// WGMMA: arith.addi %{{.*}}, %c16_i64 : i64
// WGMMA-NEXT: arith.ori %{{.*}}, %[[K_LAYOUT]] : i64
// WGMMA: arith.addi %{{.*}}, %c16_i64 : i64
// WGMMA-NEXT: arith.ori %{{.*}}, %[[K_LAYOUT]] : i64
// WGMMA-NEXT: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, $128, $129, p, 1, 1, 0, 0;
// WGMMA-COUNT-6: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0, 0;
// WGMMA-NOT: wgmma.mma_async
// WGMMA: "wgmma.commit_group.sync.aligned;"
// WGMMA-NOT: wgmma
// WGMMA: "wgmma.wait_group.sync.aligned 0;", "{{(=f,){64}0,}}
// WGMMA: nvgpu.device_async_copy
// WGMMA: gpu.shuffle xor
// WGMMA: math.exp2
// WGMMA: "wgmma.wait_group.sync.aligned 0;"
// Then the tiles without masks: S's MMAs, then the last tile's P V behind
// them, S waited for alone (one group left in flight), the next tile's
// copies (branch-free) and the softmax while P V runs - no branch in
// between, where ptxas would wait for both -, then P V waited for, and O
// rescaled where a row's max grew.
// WGMMA: scf.for
// WGMMA: "cp.async.wait_group 2;"
// WGMMA: gpu.barrier
// WGMMA: "wgmma.fence.sync.aligned;"
// WGMMA-COUNT-8: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0, 0;
// WGMMA-NOT: wgmma.mma_async
// WGMMA: "wgmma.commit_group.sync.aligned;"
// WGMMA: "wgmma.fence.sync.aligned;"
// WGMMA: arith.addi %{{.*}}, %c0_i64 : i64
// WGMMA-NEXT: arith.ori %{{.*}}, %[[V_LAYOUT]] : i64
// WGMMA-NEXT: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, {$128, $129, $130, $131}, $132, p, 1, 1, 1;
// WGMMA: arith.addi %{{.*}}, %c256_i64 : i64
// WGMMA-NEXT: arith.ori %{{.*}}, %[[V_LAYOUT]] : i64
// WGMMA-NEXT: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// WGMMA-COUNT-6: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1;
// WGMMA-NOT: wgmma.mma_async
// WGMMA: "wgmma.commit_group.sync.aligned;"
// WGMMA-NOT: wgmma
// WGMMA: "wgmma.wait_group.sync.aligned 1;", "{{(=f,){64}0,}}
// WGMMA-NOT: scf.if
// WGMMA: nvgpu.device_async_copy
// WGMMA-NOT: scf.if
// WGMMA: gpu.shuffle xor
// WGMMA-NOT: scf.if
// WGMMA: math.exp2
// WGMMA-NOT: scf.if
// WGMMA: "wgmma.wait_group.sync.aligned 0;", "{{(=f,){64}0,}}
// WGMMA-NEXT: llvm.extractvalue
// WGMMA: scf.if
// WGMMA-COUNT-32: arith.mulf
// Then the tiles with masks and the same loops built for element-by-element
// staging; after them, the last tile's V (copied two tiles before) waited
// for, fenced and published, and the last tile's P V (the emulated
// end-to-end tests check its place).
// WGMMA: "cp.async.wait_group 0;"
// WGMMA-NEXT: "fence.proxy.async.shared::cta;"
// WGMMA-NEXT: gpu.barrier
// WGMMA: "wgmma.fence.sync.aligned;"
// WGMMA-COUNT-8: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1;
// WGMMA-NOT: nvvm.mma.sync
// WGMMA-NOT: nvvm.ldmatrix
// WGMMA: gpu.terminator
// Emulated, the same tiles of core matrices, on the CPU, with the order of
// the asynchronous copies and MMAs checked as they are issued: a tile
// written before the MMAs that read it were waited for (and a barrier
// passed), or read before the copies into it were, stops the kernel.
// WGMMA-EMU-LABEL: func.func @warpgroup_mma_attention
// WGMMA-EMU-COUNT-6: memref.alloc() {alignment = 64 : i64} : memref<16x16x8x8xbf16>
// WGMMA-EMU-DAG: cf.assert %{{.*}}, "emulated MMA: a shared tile written before the MMAs reading it were waited for and a barrier passed"
// WGMMA-EMU-DAG: cf.assert %{{.*}}, "emulated MMA: a shared tile read before the copies into it were waited for and a barrier passed"
// WGMMA-EMU-DAG: cf.assert %{{.*}}, "emulated MMA: a shared tile read before a barrier after the stores into it"
// WGMMA-EMU-NOT: wgmma
// WGMMA-EMU: return
func.func @warpgroup_mma_attention(%q: tensor<1x70x2x128xbf16>) -> tensor<1x70x2x128xf32> {
  %qf = arith.extf %q : tensor<1x70x2x128xbf16> to tensor<1x70x2x128xf32>
  %o = xfmr.fused_attention %qf, %qf, %qf {scale = 0.08838834764831845 : f64, causal}
       : (tensor<1x70x2x128xf32>, tensor<1x70x2x128xf32>, tensor<1x70x2x128xf32>) -> tensor<1x70x2x128xf32>
  return %o : tensor<1x70x2x128xf32>
}

// -----

// Negative: a head dim whose tiles do not fit the tensor-core kernel's
// shared memory (256) goes to the f32 kernel, which widens its bf16 loads.
// CHECK-LABEL: func.func @wide_bf16_attention
// CHECK-NOT: nvvm.mma.sync
// CHECK: gpu.launch
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK-NOT: nvvm.mma.sync
// CHECK: return
func.func @wide_bf16_attention(%q: tensor<1x20x1x256xbf16>) -> tensor<1x20x1x256xf32> {
  %qf = arith.extf %q : tensor<1x20x1x256xbf16> to tensor<1x20x1x256xf32>
  %o = xfmr.fused_attention %qf, %qf, %qf {scale = 0.0625 : f64}
       : (tensor<1x20x1x256xf32>, tensor<1x20x1x256xf32>, tensor<1x20x1x256xf32>) -> tensor<1x20x1x256xf32>
  return %o : tensor<1x20x1x256xf32>
}

// -----

// bf16 attention backward on tensor cores: q, k, v, the output and its
// gradient read narrow (all widened bf16), lse f32. First dQ: a block per 64
// query rows and head, 4 warps; Q and dO fragments in registers; D =
// rowsum(dO * O) of the lane's rows, written once per row for the second
// kernel; per key tile (K and V staged in bf16, up to the causal limit) S =
// Q K^T and dP = dO V^T (2 x 8 x 3 MMAs, ldmatrix), dS = P (dP - D) with P
// = 2^(S - lse2) (one FFMA and ex2 on tiles without masks), then dQ += dS K (dS rounded to bf16, K by ldmatrix.trans:
// 4 x 6 MMAs); dQ written times the scale. Then dK and dV: a block per 64
// key rows; K and V fragments in registers; per query tile from the first
// that sees the block's keys, Q and dO staged with lse2 and D; S^T = K Q^T
// and dP^T = V dO^T, then dV += P^T dO and dK += dS^T Q (2 x 4 x 6 MMAs).
// Both kernels stream their tiles through two shared stages, one barrier a
// tile, the next tile copied asynchronously while the current one is
// computed.
// With warpgroup-mma (sm_90a), each kernel's 4 warps are one warpgroup
// and every product a wgmma.mma_async: the tiles staged as core matrices
// ([8][6][8][8]: 64 rows of the head dim padded to 48) in four stages, a
// group of copies per operand and tile, two tiles ahead (the streamed
// operands' tiles 0 and 1 before the loop, after the block's rows (Q and
// dO; K and V); per tile those of tile j + 2 after waiting for tile j's,
// the last tile's two groups left in flight). Each kernel is
// software-pipelined: the first tile is built apart (S = Q K^T and dP = dO
// V^T, 3 MMAs m64n64k16 each, one per 16 of the head dim, both factors by
// descriptor, K-major: trans-a 0, trans-b 0, each committed, then both
// waited for), the others in two loops, without masks and with (causal:
// the dQ kernel's masked key tiles last, the dK/dV kernel's query tiles
// first). A tile issues S and dP, then the tile before's head-dim updates
// behind them - dQ += dS K, 4 MMAs m64n48k16, one per 16 keys, N-major:
// trans-b 1; dV += P^T dO and dK += dS^T Q, one group of 8 - and waits for
// S and dP only (64 accumulators tied; wait_group 1): the updates run while
// the tile's probabilities (an FFMA and ex2 each without masks) and dS are
// computed, then its copies issued. The last tile's updates are issued
// after the loops and waited for with the accumulators (dQ: 24; dK and dV:
// 48). One group is in flight across each loop's back edge: with two,
// ptxas serializes every MMA of the kernel. Descriptors: K-major leading
// byte offset 128 and stride 768 (8 rows of 48): (8 << 16) | (48 << 32);
// N-major (48 << 16) | (8 << 32).
// WGMMA-LABEL: func.func @mma_attention_backward
// WGMMA-DAG: %[[N_MAJOR:.*]] = arith.constant 34362884096 : i64
// WGMMA-DAG: %[[K_MAJOR:.*]] = arith.constant 206158954496 : i64
// The dQ kernel's 12 tiles (five stages of K and V, Q and dO) take 73728
// bytes.
// WGMMA: gpu.launch {{.*}} threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c128, %{{.*}} = %c1, %{{.*}} = %c1) dynamic_shared_memory_size %c73728_i32
// WGMMA-COUNT-12: memref.view {{.*}} to memref<8x6x8x8xbf16, #gpu.address_space<workgroup>>
// WGMMA-COUNT-6: "cp.async.commit_group;"
// WGMMA-NOT: "cp.async.commit_group;"
// WGMMA: "cp.async.wait_group 2;"
// WGMMA: "fence.proxy.async.shared::cta;"
// WGMMA-NEXT: gpu.barrier
// WGMMA: arith.ori %{{.*}}, %[[K_MAJOR]] : i64
// WGMMA-NEXT: %[[WARPGROUP:.*]] = arith.divui %{{.*}}, %c128 : index
// WGMMA-NEXT: %[[WORD:.*]] = arith.index_castui %[[WARPGROUP]] : index to i32
// WGMMA-NEXT: %[[LANE0:.*]], %{{.*}} = gpu.shuffle  idx %[[WORD]], %c0_i32, %c32_i32 : i32
// WGMMA-NEXT: %[[UNIFORM:.*]] = arith.index_castui %[[LANE0]] : i32 to index
// WGMMA-NEXT: arith.muli %[[UNIFORM]], %c64 : index
// WGMMA: arith.ori %{{.*}}, %[[K_MAJOR]] : i64
// WGMMA-NEXT: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, $32, $33, p, 1, 1, 0, 0;
// WGMMA-COUNT-2: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0, 0;
// WGMMA-NOT: wgmma.mma_async
// WGMMA: "wgmma.commit_group.sync.aligned;"
// WGMMA-NOT: wgmma.wait_group
// WGMMA-COUNT-3: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0, 0;
// WGMMA: "wgmma.commit_group.sync.aligned;"
// WGMMA-NOT: wgmma
// WGMMA: "wgmma.wait_group.sync.aligned 0;", "{{(=f,){64}0,}}
// WGMMA-NOT: wgmma
// WGMMA: nvgpu.device_async_copy
// WGMMA: math.exp2
// The key tiles without masks.
// WGMMA-NOT: wgmma
// WGMMA: scf.for
// WGMMA: "cp.async.wait_group 2;"
// WGMMA: gpu.barrier
// WGMMA-COUNT-3: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0, 0;
// WGMMA: "wgmma.commit_group.sync.aligned;"
// WGMMA-COUNT-3: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0, 0;
// WGMMA: "wgmma.commit_group.sync.aligned;"
// WGMMA-NOT: wgmma.wait_group
// WGMMA: arith.ori %{{.*}}, %[[N_MAJOR]] : i64
// WGMMA-NEXT: wgmma.mma_async.sync.aligned.m64n48k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1;
// WGMMA-COUNT-3: wgmma.mma_async.sync.aligned.m64n48k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1;
// WGMMA-NOT: wgmma.mma_async
// WGMMA: "wgmma.commit_group.sync.aligned;"
// WGMMA-NOT: wgmma
// WGMMA: "wgmma.wait_group.sync.aligned 1;", "{{(=f,){64}0,}}
// WGMMA-NOT: wgmma
// WGMMA: nvgpu.device_async_copy
// WGMMA-NOT: arith.cmpf
// WGMMA: math.fma
// WGMMA-NEXT: math.exp2
// WGMMA-NOT: arith.cmpf
// The key tiles with masks.
// WGMMA: scf.for
// WGMMA-COUNT-6: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0, 0;
// WGMMA-COUNT-4: wgmma.mma_async.sync.aligned.m64n48k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1;
// WGMMA: "wgmma.wait_group.sync.aligned 1;", "{{(=f,){64}0,}}
// WGMMA-NOT: wgmma
// WGMMA: arith.cmpf
// WGMMA: math.exp2
// The last tile's update, after the loops built again for element-wise
// copies.
// WGMMA: "cp.async.wait_group 0;"
// WGMMA-COUNT-4: wgmma.mma_async.sync.aligned.m64n48k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1;
// WGMMA: "wgmma.commit_group.sync.aligned;"
// WGMMA-NOT: wgmma
// WGMMA: "wgmma.wait_group.sync.aligned 0;", "{{(=f,){24}0,}}
// WGMMA-NOT: wgmma
// WGMMA: gpu.terminator
// The dK/dV kernel's 12 tiles and 10 arrays of 64 f32 take 76288 bytes.
// WGMMA: gpu.launch {{.*}} threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c128, %{{.*}} = %c1, %{{.*}} = %c1) dynamic_shared_memory_size %c76288_i32
// WGMMA-COUNT-12: memref.view {{.*}} to memref<8x6x8x8xbf16, #gpu.address_space<workgroup>>
// WGMMA-COUNT-10: memref.view {{.*}} to memref<64xf32, #gpu.address_space<workgroup>>
// WGMMA-COUNT-6: "cp.async.commit_group;"
// WGMMA-NOT: "cp.async.commit_group;"
// WGMMA: "cp.async.wait_group 2;"
// WGMMA-COUNT-6: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0, 0;
// WGMMA-NOT: wgmma.mma_async
// WGMMA: "wgmma.wait_group.sync.aligned 0;", "{{(=f,){64}0,}}
// WGMMA: math.exp2
// The query tiles with masks: dV's and dK's updates one group.
// WGMMA-NOT: wgmma
// WGMMA: scf.for
// WGMMA: "cp.async.wait_group 2;"
// WGMMA-COUNT-3: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0, 0;
// WGMMA: "wgmma.commit_group.sync.aligned;"
// WGMMA-COUNT-3: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0, 0;
// WGMMA: "wgmma.commit_group.sync.aligned;"
// WGMMA-NOT: wgmma.wait_group
// WGMMA-COUNT-8: wgmma.mma_async.sync.aligned.m64n48k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1;
// WGMMA-NOT: wgmma.mma_async
// WGMMA: "wgmma.commit_group.sync.aligned;"
// WGMMA-NOT: wgmma
// WGMMA: "wgmma.wait_group.sync.aligned 1;", "{{(=f,){64}0,}}
// WGMMA-NOT: wgmma
// WGMMA: arith.cmpf
// WGMMA: math.exp2
// The query tiles without masks.
// WGMMA-NOT: wgmma
// WGMMA: scf.for
// WGMMA-COUNT-6: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0, 0;
// WGMMA-COUNT-8: wgmma.mma_async.sync.aligned.m64n48k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1;
// WGMMA: "wgmma.wait_group.sync.aligned 1;", "{{(=f,){64}0,}}
// WGMMA-NOT: arith.cmpf
// WGMMA: math.fma
// WGMMA-NEXT: math.exp2
// WGMMA-NOT: arith.cmpf
// WGMMA: } else {
// The last tile's updates.
// WGMMA: "cp.async.wait_group 0;"
// WGMMA-NOT: wgmma
// WGMMA: scf.if
// WGMMA-COUNT-8: wgmma.mma_async.sync.aligned.m64n48k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1;
// WGMMA: "wgmma.commit_group.sync.aligned;"
// WGMMA-NOT: wgmma
// WGMMA: "wgmma.wait_group.sync.aligned 0;", "{{(=f,){48}0,}}
// WGMMA-NOT: nvvm.mma.sync
// WGMMA-NOT: nvvm.ldmatrix
// WGMMA: return
// Emulated, the products read the tiles through the MMAs' descriptors, as
// flat arrays.
// WGMMA-EMU-LABEL: func.func @mma_attention_backward
// WGMMA-EMU-COUNT-6: memref.alloc() {alignment = 64 : i64} : memref<8x6x8x8xbf16>
// WGMMA-EMU: memref.collapse_shape %{{.*}} {{\[\[}}0, 1, 2, 3]] : memref<8x6x8x8xbf16> into memref<3072xbf16>
// WGMMA-EMU-DAG: cf.assert %{{.*}}, "emulated MMA: a shared tile written before
// WGMMA-EMU-DAG: cf.assert %{{.*}}, "emulated MMA: a shared tile read before
// WGMMA-EMU-NOT: wgmma
// WGMMA-EMU: return
// CHECK-LABEL: func.func @mma_attention_backward
// CHECK-NOT: arith.extf
// CHECK: %[[DQ:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x100x2x40xf32>
// CHECK: %[[DK:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x100x2x40xf32>
// CHECK: %[[DV:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x100x2x40xf32>
// CHECK: %[[D:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x2x100xf32>
// CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c2, %{{.*}} = %c2, %{{.*}} = %c1) threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c128, %{{.*}} = %c1, %{{.*}} = %c1)
// CHECK-COUNT-2: memref.alloca() : memref<3x4xi32>
// CHECK: memref.alloca() : memref<8x4xf32>
// CHECK: memref.alloca() : memref<6x4xf32>
// CHECK: memref.store %{{.*}}, %[[D]]
// CHECK: scf.for %[[KTILE:.*]] = %c0 to
// CHECK: arith.remui %[[KTILE]], %c2 : index
// CHECK-COUNT-2: arith.select %{{.*}} : memref<64x56xbf16, #gpu.address_space<workgroup>>
// CHECK: llvm.inline_asm has_side_effects "cp.async.wait_group 0;"
// CHECK: gpu.barrier
// CHECK: nvgpu.device_async_copy
// CHECK: llvm.inline_asm has_side_effects "cp.async.commit_group;"
// CHECK-COUNT-48: nvvm.mma.sync {{.*}}multiplicandAPtxType = #nvvm.mma_type<bf16>
// CHECK: scf.if
// CHECK: math.exp2 %{{.*}} fastmath<afn> : f32
// CHECK: } else {
// CHECK: math.fma
// CHECK-NEXT: math.exp2 %{{.*}} fastmath<afn> : f32
// CHECK: arith.truncf %{{.*}} : vector<2xf32> to vector<2xbf16>
// CHECK: nvvm.ldmatrix %{{.*}} {{{.*}}layout = #nvvm.mma_layout<col>, num = 4 : i32{{.*}}}
// CHECK-COUNT-24: nvvm.mma.sync
// CHECK-NOT: nvvm.mma.sync
// CHECK-NOT: gpu.barrier
// CHECK: memref.store %{{.*}}, %[[DQ]]
// CHECK: gpu.terminator
// CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c2, %{{.*}} = %c2, %{{.*}} = %c1) threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c128, %{{.*}} = %c1, %{{.*}} = %c1)
// CHECK-COUNT-2: memref.alloca() : memref<3x4xi32>
// CHECK-COUNT-2: memref.alloca() : memref<8x4xf32>
// CHECK-COUNT-2: memref.alloca() : memref<6x4xf32>
// CHECK: %[[FIRST:.*]] = arith.divui %{{.*}}, %c64 : index
// CHECK: scf.for %[[QTILE:.*]] = %[[FIRST]] to %c2 step %c1
// CHECK: arith.remui %[[QTILE]], %c2 : index
// CHECK-COUNT-4: arith.select %{{.*}} : memref<64x{{56xbf16|f32}}, #gpu.address_space<workgroup>>
// CHECK: memref.load %[[D]]
// CHECK: gpu.barrier
// CHECK: nvgpu.device_async_copy
// CHECK: llvm.inline_asm has_side_effects "cp.async.commit_group;"
// CHECK-COUNT-48: nvvm.mma.sync
// CHECK: math.exp2 %{{.*}} fastmath<afn> : f32
// CHECK-COUNT-48: nvvm.mma.sync
// CHECK-NOT: nvvm.mma.sync
// CHECK-NOT: gpu.barrier
// CHECK: memref.store %{{.*}}, %[[DK]]
// CHECK: memref.store %{{.*}}, %[[DV]]
// CHECK: gpu.terminator
//
// Emulated: the same kernels without ldmatrix or MMA.
// EMU-LABEL: func.func @mma_attention_backward
// EMU-NOT: nvvm.
// EMU: memref.alloc() {alignment = 64 : i64} : memref<128x3x4xi32>
// EMU: arith.truncf %{{.*}} : f32 to bf16
// EMU-NOT: nvvm.
// EMU: return
func.func @mma_attention_backward(%q: tensor<1x100x2x40xbf16>, %o: tensor<1x100x2x40xbf16>, %lse: tensor<1x2x100xf32>)
    -> (tensor<1x100x2x40xf32>, tensor<1x100x2x40xf32>, tensor<1x100x2x40xf32>) {
  %qf = arith.extf %q : tensor<1x100x2x40xbf16> to tensor<1x100x2x40xf32>
  %of = arith.extf %o : tensor<1x100x2x40xbf16> to tensor<1x100x2x40xf32>
  %dq, %dk, %dv = xfmr.fused_attention_backward %qf, %qf, %qf, %of, %lse, %of {causal, scale = 0.25 : f64}
      : (tensor<1x100x2x40xf32>, tensor<1x100x2x40xf32>, tensor<1x100x2x40xf32>, tensor<1x100x2x40xf32>,
         tensor<1x2x100xf32>, tensor<1x100x2x40xf32>)
      -> (tensor<1x100x2x40xf32>, tensor<1x100x2x40xf32>, tensor<1x100x2x40xf32>)
  return %dq, %dk, %dv : tensor<1x100x2x40xf32>, tensor<1x100x2x40xf32>, tensor<1x100x2x40xf32>
}

// -----

// Head dim 128: both backward kernels stage their block's 64 rows of two
// operands (Q and dO; K and V) in shared memory, next to the two stages of
// 32-row tiles (dynamic shared memory), and read those rows' A fragments
// by ldmatrix instead of holding them in registers; the rows are copied
// asynchronously with the first tile, and waited for at the end where
// there was none.
// CHECK-LABEL: func.func @mma_attention_backward_shared_rows
// CHECK: gpu.launch {{.*}} threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c128, %{{.*}} = %c1, %{{.*}} = %c1) dynamic_shared_memory_size %c69632_i32
// CHECK-COUNT-4: memref.view {{.*}} to memref<32x136xbf16, #gpu.address_space<workgroup>>
// CHECK: %[[QROWS:.*]] = memref.view {{.*}} to memref<64x136xbf16, #gpu.address_space<workgroup>>
// CHECK: %[[DOROWS:.*]] = memref.view {{.*}} to memref<64x136xbf16, #gpu.address_space<workgroup>>
// CHECK-NOT: memref.alloca() : memref<{{.*}}xi32>
// CHECK: nvgpu.device_async_copy %{{.*}}, %[[QROWS]][{{.*}}], 8 {bypassL1}
// CHECK: nvgpu.device_async_copy %{{.*}}, %[[DOROWS]][{{.*}}], 8 {bypassL1}
// CHECK: scf.for
// CHECK: gpu.barrier
// CHECK: memref.extract_aligned_pointer_as_index %[[QROWS]]
// CHECK: nvvm.ldmatrix
// CHECK: nvvm.mma.sync
// CHECK: llvm.inline_asm has_side_effects "cp.async.wait_group 0;"
// CHECK: gpu.terminator
// CHECK: gpu.launch {{.*}} dynamic_shared_memory_size %c70144_i32
// CHECK-COUNT-4: memref.view {{.*}} to memref<32x136xbf16, #gpu.address_space<workgroup>>
// CHECK: %[[KROWS:.*]] = memref.view {{.*}} to memref<64x136xbf16, #gpu.address_space<workgroup>>
// CHECK: %[[VROWS:.*]] = memref.view {{.*}} to memref<64x136xbf16, #gpu.address_space<workgroup>>
// CHECK-COUNT-4: memref.view {{.*}} to memref<32xf32, #gpu.address_space<workgroup>>
// CHECK-NOT: memref.alloca() : memref<{{.*}}xi32>
// CHECK: nvgpu.device_async_copy %{{.*}}, %[[KROWS]][{{.*}}], 8 {bypassL1}
// CHECK: nvgpu.device_async_copy %{{.*}}, %[[VROWS]][{{.*}}], 8 {bypassL1}
// CHECK: memref.extract_aligned_pointer_as_index %[[KROWS]]
// CHECK: nvvm.ldmatrix
// CHECK: memref.extract_aligned_pointer_as_index %[[VROWS]]
// CHECK: llvm.inline_asm has_side_effects "cp.async.wait_group 0;"
// CHECK: gpu.terminator
// With warpgroup-mma, the block's rows are core matrices too, and S = Q K^T
// reads Q's from shared memory by descriptor (A K-major, trans-a 0:
// m64n32k16, 8 per tile after a wgmma.fence without registers); the first
// tile's barrier follows the async-proxy fence, which covers the rows as
// well.
// WGMMA-LABEL: func.func @mma_attention_backward_shared_rows
// WGMMA: gpu.launch {{.*}} threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c128, %{{.*}} = %c1, %{{.*}} = %c1) dynamic_shared_memory_size
// WGMMA-COUNT-10: memref.view {{.*}} to memref<4x16x8x8xbf16, #gpu.address_space<workgroup>>
// WGMMA-NOT: memref<4x16x8x8xbf16
// WGMMA: %[[QROWS:.*]] = memref.view {{.*}} to memref<8x16x8x8xbf16, #gpu.address_space<workgroup>>
// WGMMA: nvgpu.device_async_copy %{{.*}}, %[[QROWS]][{{.*}}], 8 {bypassL1}
// WGMMA: scf.for
// WGMMA: "fence.proxy.async.shared::cta;"
// WGMMA-NEXT: gpu.barrier
// WGMMA: "wgmma.fence.sync.aligned;", ""
// WGMMA: memref.extract_aligned_pointer_as_index %[[QROWS]]
// WGMMA: wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {{.*}}, $16, $17, p, 1, 1, 0, 0;
// WGMMA-COUNT-7: wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0, 0;
// WGMMA-NOT: nvvm.ldmatrix
// WGMMA: gpu.terminator
// Below head dim 128 (the case above, 40) the fragments stay in registers.
// EMU-LABEL: func.func @mma_attention_backward_shared_rows
// EMU-COUNT-2: memref.alloc() {alignment = 64 : i64} : memref<64x136xbf16>
// EMU-NOT: xi32>
// EMU: return
func.func @mma_attention_backward_shared_rows(%q: tensor<1x100x2x128xbf16>, %o: tensor<1x100x2x128xbf16>, %lse: tensor<1x2x100xf32>)
    -> (tensor<1x100x2x128xf32>, tensor<1x100x2x128xf32>, tensor<1x100x2x128xf32>) {
  %qf = arith.extf %q : tensor<1x100x2x128xbf16> to tensor<1x100x2x128xf32>
  %of = arith.extf %o : tensor<1x100x2x128xbf16> to tensor<1x100x2x128xf32>
  %dq, %dk, %dv = xfmr.fused_attention_backward %qf, %qf, %qf, %of, %lse, %of {causal, scale = 0.0883883 : f64}
      : (tensor<1x100x2x128xf32>, tensor<1x100x2x128xf32>, tensor<1x100x2x128xf32>, tensor<1x100x2x128xf32>,
         tensor<1x2x100xf32>, tensor<1x100x2x128xf32>)
      -> (tensor<1x100x2x128xf32>, tensor<1x100x2x128xf32>, tensor<1x100x2x128xf32>)
  return %dq, %dk, %dv : tensor<1x100x2x128xf32>, tensor<1x100x2x128xf32>, tensor<1x100x2x128xf32>
}

// -----

// Negative: a bf16 backward of head dim 256 goes to the f32 kernels, which
// widen the bf16 loads (of q, k, v and, read narrow as well, the output and
// its gradient).
// CHECK-LABEL: func.func @wide_bf16_attention_backward
// CHECK-NOT: nvvm.mma.sync
// CHECK: gpu.launch
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK-NOT: nvvm.mma.sync
// CHECK: return
func.func @wide_bf16_attention_backward(%q: tensor<1x20x1x256xbf16>, %lse: tensor<1x1x20xf32>)
    -> (tensor<1x20x1x256xf32>, tensor<1x20x1x256xf32>, tensor<1x20x1x256xf32>) {
  %qf = arith.extf %q : tensor<1x20x1x256xbf16> to tensor<1x20x1x256xf32>
  %dq, %dk, %dv = xfmr.fused_attention_backward %qf, %qf, %qf, %qf, %lse, %qf {scale = 0.0625 : f64}
      : (tensor<1x20x1x256xf32>, tensor<1x20x1x256xf32>, tensor<1x20x1x256xf32>, tensor<1x20x1x256xf32>,
         tensor<1x1x20xf32>, tensor<1x20x1x256xf32>)
      -> (tensor<1x20x1x256xf32>, tensor<1x20x1x256xf32>, tensor<1x20x1x256xf32>)
  return %dq, %dk, %dv : tensor<1x20x1x256xf32>, tensor<1x20x1x256xf32>, tensor<1x20x1x256xf32>
}

// -----

// Negative: factors widened from different types (or only one widened) go
// to the f32 kernel.
// CHECK-LABEL: func.func @mixed_factors
// CHECK-NOT: nvvm.mma.sync
// CHECK: math.fma
// CHECK-NOT: nvvm.mma.sync
// CHECK: return
func.func @mixed_factors(%x: tensor<8x16xbf16>, %w: tensor<16x8xf16>) -> tensor<8x8xf32> {
  %xf = arith.extf %x : tensor<8x16xbf16> to tensor<8x16xf32>
  %wf = arith.extf %w : tensor<16x8xf16> to tensor<16x8xf32>
  %y = xfmr.matmul %xf, %wf : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}

// -----

// Attention over a KV cache (a decode step: one query, runtime query
// offsets and key lengths): the f32 kernel's key-tile loop ends at the last
// tile the block's rows see, min(key_length, query_offset + row + 1), each
// clamped to [0, 256]: tiles past the key length are never loaded.
// CHECK-LABEL: func.func @cache_attention
// CHECK: %[[OFF:.*]] = bufferization.to_buffer %{{.*}} : tensor<2xi32>
// CHECK: %[[LEN:.*]] = bufferization.to_buffer %{{.*}} : tensor<2xi32>
// CHECK: gpu.launch
// CHECK: memref.load %[[LEN]]
// CHECK: %[[CLAMPED:.*]] = arith.minsi %{{.*}}, %c256
// CHECK: %[[KEYS:.*]] = arith.maxsi %[[CLAMPED]], %c0
// CHECK: memref.load %[[OFF]]
// CHECK: %[[END:.*]] = arith.minsi %[[KEYS]], %{{[0-9]+}} : index
// CHECK-NEXT: %[[VISIBLE:.*]] = arith.maxsi %[[END]], %c0
// CHECK-NEXT: %[[TILES:.*]] = arith.ceildivsi %[[VISIBLE]], %c64
// CHECK-NEXT: scf.for %{{.*}} = %c0 to %[[TILES]] step %c1
func.func @cache_attention(%q: tensor<2x1x2x16xf32>, %k: tensor<2x256x2x16xf32>,
                           %v: tensor<2x256x2x16xf32>, %off: tensor<2xi32>,
                           %len: tensor<2xi32>) -> tensor<2x1x2x16xf32> {
  %o = xfmr.fused_attention %q, %k, %v query_offset(%off) key_length(%len) {causal, scale = 0.25 : f64}
       : (tensor<2x1x2x16xf32>, tensor<2x256x2x16xf32>, tensor<2x256x2x16xf32>, tensor<2xi32>, tensor<2xi32>) -> tensor<2x1x2x16xf32>
  return %o : tensor<2x1x2x16xf32>
}

// -----

// The same on tensor cores (bf16, a runtime key length): the key tiles of
// 64 (mma.sync) or 128 (wgmma) run to ceil(key_length / tile); with wgmma
// the loop splits at the first tile that needs masks, key_length / 128,
// and both parts end at that count.
// CHECK-LABEL: func.func @mma_cache_attention
// CHECK: %[[LEN:.*]] = bufferization.to_buffer %{{.*}} : tensor<1xi32>
// CHECK: gpu.launch
// CHECK: %[[LOADED:.*]] = memref.load %[[LEN]]
// CHECK-NEXT: %[[LENGTH:.*]] = arith.index_cast %[[LOADED]]
// CHECK-NEXT: %[[CLAMPED:.*]] = arith.minsi %[[LENGTH]], %c256
// CHECK-NEXT: %[[KEYS:.*]] = arith.maxsi %[[CLAMPED]], %c0
// CHECK-NEXT: %[[TILES:.*]] = arith.ceildivsi %[[KEYS]], %c64
// CHECK: scf.for %{{.*}} = %c0 to %[[TILES]] step %c1
// WGMMA-LABEL: func.func @mma_cache_attention
// WGMMA: %[[LEN:.*]] = bufferization.to_buffer %{{.*}} : tensor<1xi32>
// WGMMA: memref.load %[[LEN]]
// WGMMA: %[[KEYS:.*]] = arith.maxsi %{{.*}}, %c0
// WGMMA-NEXT: %[[TILES:.*]] = arith.ceildivsi %[[KEYS]], %c128
// WGMMA: %[[UNMASKED:.*]] = arith.divsi %{{.*}}, %c128
// WGMMA: %[[SPLIT:.*]] = arith.maxsi %[[UNMASKED]], %{{.*}}
// WGMMA-NEXT: %[[SPLIT_END:.*]] = arith.minsi %[[SPLIT]], %[[TILES]]
// WGMMA-NEXT: scf.for %{{.*}} = %{{.*}} to %[[SPLIT_END]] step %c1
// WGMMA: scf.for %{{.*}} = %{{.*}} to %[[TILES]] step %c1
func.func @mma_cache_attention(%q: tensor<1x2x1x64xbf16>, %k: tensor<1x2x256x64xbf16>,
                               %len: tensor<1xi32>) -> tensor<1x2x1x64xf32> {
  %qf = arith.extf %q : tensor<1x2x1x64xbf16> to tensor<1x2x1x64xf32>
  %kf = arith.extf %k : tensor<1x2x256x64xbf16> to tensor<1x2x256x64xf32>
  %o = xfmr.fused_attention %qf, %kf, %kf key_length(%len) {scale = 0.125 : f64, layout = #xfmr.layout<bhsd>}
       : (tensor<1x2x1x64xf32>, tensor<1x2x256x64xf32>, tensor<1x2x256x64xf32>, tensor<1xi32>) -> tensor<1x2x1x64xf32>
  return %o : tensor<1x2x1x64xf32>
}

// -----

// Negative: softmax over another axis than the last and a product with a
// batched right operand have no GPU kernel and stay for the linalg
// lowering.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: gpu.launch
// CHECK: xfmr.softmax
// CHECK: xfmr.matmul
func.func @left_alone(%x: tensor<5x3x7xf32>, %a: tensor<2x5x4xf32>, %m: tensor<2x4x6xf32>)
    -> (tensor<5x3x7xf32>, tensor<2x5x6xf32>) {
  %s = xfmr.softmax %x {axis = 0} : tensor<5x3x7xf32>
  %p = xfmr.matmul %a, %m : (tensor<2x5x4xf32>, tensor<2x4x6xf32>) -> tensor<2x5x6xf32>
  return %s, %p : tensor<5x3x7xf32>, tensor<2x5x6xf32>
}
