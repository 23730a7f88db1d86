// RUN: xfmr-opt %s --convert-xfmr-to-cpu-kernels --split-input-file | FileCheck %s
// RUN: xfmr-opt %s --convert-xfmr-to-cpu-kernels="lanes=16 registers=32" --split-input-file | FileCheck %s --check-prefix=WIDE
// RUN: xfmr-opt %s --convert-xfmr-to-cpu-kernels="lanes=16 registers=32 int8-dot=vnni" --split-input-file | FileCheck %s --check-prefix=DOT
// RUN: xfmr-opt %s --convert-xfmr-to-cpu-kernels="int8-dot=madd" --split-input-file | FileCheck %s --check-prefix=MADD
// RUN: xfmr-opt %s --convert-xfmr-to-cpu-kernels="lanes=16 registers=32 int8-dot=madd" --split-input-file | FileCheck %s --check-prefix=MADD16
// RUN: xfmr-opt %s --convert-xfmr-to-cpu-kernels="int8-dot=vnni" --split-input-file | FileCheck %s --check-prefix=VNNI8
// RUN: xfmr-opt %s --convert-xfmr-to-cpu-kernels="lanes=16 registers=32 int8-dot=portable" --split-input-file | FileCheck %s --check-prefix=PORTABLE
// RUN: not xfmr-opt %s --convert-xfmr-to-cpu-kernels="int8-dot=vpdpbusd" --split-input-file 2>&1 | FileCheck %s --check-prefix=BADDOT
// BADDOT: error: int8-dot must be none, madd, vnni or portable, got 'vpdpbusd'
// RUN: xfmr-opt %s --convert-xfmr-to-cpu-kernels="lanes=16 registers=32 bf16-dot=1" --split-input-file | FileCheck %s --check-prefix=BF16
// RUN: not xfmr-opt %s --convert-xfmr-to-cpu-kernels="bf16-dot=1" --split-input-file 2>&1 | FileCheck %s --check-prefix=BF16LANES
// BF16LANES: error: bf16-dot needs 16 lanes, got 8

// The GEMM: weights read in place; threads take column chunks (here three:
// two one-panel chunks and the 12-column tail, 44 = 2 x 16 + 12); B packed
// per chunk, a 6 x 2-vector register tile (AVX2) accumulated over all of K,
// the epilogue applied in registers, one store per vector; the tail (one
// full and one masked vector) and the 4-row tail (22 = 3 x 6 + 4) get their
// own tiles.
// CHECK-LABEL: func @gemm
// CHECK: %[[W:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<16x44xf32> to memref<16x44xf32, strided<[?, 1], offset: ?>>
// CHECK: %[[C:.*]] = memref.alloc() {alignment = 64 : i64} : memref<22x44xf32>
// CHECK: scf.forall (%{{.*}}) in (3)
// CHECK: scf.if
// CHECK: %[[PACKED:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x16x16xf32>
// CHECK: vector.load %[[W]]
// CHECK: vector.store %{{.*}}, %[[PACKED]]
// CHECK: scf.for %{{.*}} iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK: vector.load %[[PACKED]]
// CHECK: vector.broadcast
// CHECK: vector.fma
// CHECK: arith.maximumf %{{.*}}, %{{.*}} : vector<8xf32>
// CHECK: vector.store %{{.*}}, %[[C]]
// CHECK: scf.if
// CHECK: scf.for %{{.*}} iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK: vector.load %[[W]]
// CHECK: vector.maskedload %[[W]]
// CHECK: vector.maskedstore %[[C]]
// CHECK: bufferization.to_tensor %[[C]] restrict
// CHECK-NOT: xfmr.fused_linear
// WIDE-LABEL: func @gemm
// WIDE: -> (vector<16xf32>, vector<16xf32>,
func.func @gemm(%x: tensor<2x11x16xf32>, %w: tensor<16x44xf32>, %b: tensor<44xf32>) -> tensor<2x11x44xf32> {
  %y = xfmr.fused_linear %x, %w bias(%b) {activation = #xfmr.activation<relu>} : (tensor<2x11x16xf32>, tensor<16x44xf32>, tensor<44xf32>) -> tensor<2x11x44xf32>
  return %y : tensor<2x11x44xf32>
}

// -----

// A weight stored [N, K] (transpose_weight) is read in place too: each panel
// is packed transposed, 8 x 8 at a time (8 row loads, 24 shuffles, 8
// stores), the depth tail (20 = 2 x 8 + 4) element by element; the
// 4-column tail (36 = 2 x 16 + 4) is packed into a zero-padded panel.
// CHECK-LABEL: func @gemm_nk
// CHECK: %[[WT:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<36x20xf32> to memref<36x20xf32, strided<[?, 1], offset: ?>>
// CHECK-NOT: memref.alloc() {{.*}} : memref<20x36xf32>
// CHECK: %[[PACKED:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x20x16xf32>
// CHECK: scf.for %{{.*}} = %c0 to %c16 step %c8
// CHECK-COUNT-8: vector.load %[[WT]]
// CHECK-COUNT-24: vector.shuffle
// CHECK-COUNT-8: vector.store %{{.*}}, %[[PACKED]]
// CHECK: scf.for %{{.*}} = %c16 to %c20 step %c1
// CHECK: memref.load %[[WT]]
// CHECK: memref.store %{{.*}}, %[[PACKED]]
// CHECK: %[[TAIL:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x20x16xf32>
// CHECK: memref.load %[[WT]]
// CHECK: memref.store %{{.*}}, %[[TAIL]]
// CHECK: vector.load %[[TAIL]]
// CHECK: vector.maskedstore
// WIDE-LABEL: func @gemm_nk
// WIDE-COUNT-64: vector.shuffle %{{.*}} : vector<16xf32>, vector<16xf32>
func.func @gemm_nk(%x: tensor<17x20xf32>, %w: tensor<36x20xf32>) -> tensor<17x36xf32> {
  %y = xfmr.fused_linear %x, %w {transpose_weight} : (tensor<17x20xf32>, tensor<36x20xf32>) -> tensor<17x36xf32>
  return %y : tensor<17x36xf32>
}

// -----

// A product of a few rows (a decode step) reads its [K, N] weight once,
// unpacked: K is cut into 16 slabs of 4 rows, each slab's rows streamed
// into partial sums of all columns (2 full vectors and a 4-column tail),
// then the partials added up and the epilogue applied, a vector of columns
// at a time.
// CHECK-LABEL: func @skinny_kn
// CHECK: %[[W:.*]] = bufferization.to_buffer %{{.*}} : tensor<64x20xf32>
// CHECK: %[[PARTIAL:.*]] = memref.alloc() {{.*}} : memref<16x2x24xf32>
// CHECK: scf.forall (%[[SLAB:.*]]) in (16)
// CHECK: scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step %c1
// CHECK: vector.load %[[W]][%[[K]], %{{.*}}] : {{.*}}, vector<8xf32>
// CHECK: vector.fma
// CHECK: vector.maskedload %[[W]][%[[K]], %c16]
// CHECK: scf.forall (%{{.*}}) in (3)
// CHECK-COUNT-16: vector.load %[[PARTIAL]]
// CHECK: arith.maximumf
// CHECK-NOT: memref.alloc() {{.*}} : memref<1x64x16xf32>
func.func @skinny_kn(%x: tensor<2x64xf32>, %w: tensor<64x20xf32>) -> tensor<2x20xf32> {
  %y = xfmr.fused_linear %x, %w {activation = #xfmr.activation<relu>} : (tensor<2x64xf32>, tensor<64x20xf32>) -> tensor<2x20xf32>
  return %y : tensor<2x20xf32>
}

// -----

// A [N, K] weight with a few rows of A: each output a dot product along
// one contiguous row of the weight. A parallel task takes a block of 5 rows
// of the weight (AVX2: 2 x 5 accumulators, 5 of the weight's vectors and
// one of A's fit 16 registers), here 7 = 5 + 2, the 2-row tail its own
// sweep; each step loads a vector of each of the block's rows and one of
// each row of A, the depth tail (84 = 10 x 8 + 4) masked; the sums are
// reduced and finished as scalars. One group of A's rows: no prefetch.
// CHECK-LABEL: func @dot_rows_nk
// CHECK: %[[X:.*]] = bufferization.to_buffer %{{.*}} : tensor<2x84xf32>
// CHECK: %[[W:.*]] = bufferization.to_buffer %{{.*}} : tensor<7x84xf32>
// CHECK-NOT: memref.prefetch
// CHECK: scf.forall (%[[BLOCK:.*]]) in (2)
// CHECK: %[[N:.*]] = arith.muli %[[BLOCK]], %c5
// CHECK: scf.if
// CHECK: scf.for %[[K:.*]] = %c0 to %c80 step %c8 iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK-COUNT-5: vector.load %[[W]][%{{.*}}, %[[K]]]
// CHECK: vector.load %[[X]][%c0, %[[K]]]
// CHECK-COUNT-5: vector.fma
// CHECK: vector.load %[[X]][%c1, %[[K]]]
// CHECK-COUNT-5: vector.fma
// CHECK: scf.yield
// CHECK-COUNT-5: vector.maskedload %[[W]][%{{.*}}, %c80]
// CHECK: vector.extract_strided_slice %{{.*}} {offsets = [0], sizes = [4], strides = [1]} : vector<8xf32> to vector<4xf32>
// CHECK: vector.extract_strided_slice %{{.*}} {offsets = [4], sizes = [4], strides = [1]} : vector<8xf32> to vector<4xf32>
// CHECK: vector.extract_strided_slice %{{.*}} {offsets = [1], sizes = [1], strides = [1]} : vector<2xf32> to vector<1xf32>
// CHECK: memref.store %{{.*}}, %{{.*}}[%c0, %{{.*}}]
// CHECK-NOT: vector.reduction
// CHECK: memref.store %{{.*}}, %{{.*}}[%c1, %{{.*}}]
// CHECK: } else {
// CHECK: scf.for %{{.*}} = %c0 to %c80 step %c8 iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK-NOT: memref.prefetch
func.func @dot_rows_nk(%x: tensor<2x84xf32>, %w: tensor<7x84xf32>) -> tensor<2x7xf32> {
  %y = xfmr.fused_linear %x, %w {transpose_weight} : (tensor<2x84xf32>, tensor<7x84xf32>) -> tensor<2x7xf32>
  return %y : tensor<2x7xf32>
}

// -----

// 16 rows of A (three groups of 6, 5 and 5 rows; blocks of 2 weight rows, a
// block's rows at least 4 times its columns) over a depth of 610: A's rows
// are first copied to three contiguous chunks of 256 values (the last one
// 98, ending in a masked vector); then a task sweeps a band of 3 blocks
// (45 columns: 23 blocks, at least 8 bands) a chunk at a time, the
// accumulators kept in a scratch buffer of 3 x 16 x 2 vectors between
// chunks; the last chunk's sums are reduced and finished. With 32
// registers, blocks of 4 (12, in bands of 2) and vectors of 16.
// CHECK-LABEL: func @dot_rows_chunked
// CHECK: %[[X:.*]] = bufferization.to_buffer %{{.*}} : tensor<16x610xf32>
// CHECK: %[[CHUNKS:.*]] = memref.alloc() {{.*}} : memref<3x16x256xf32>
// CHECK: scf.forall (%[[ROW:.*]]) in (16)
// CHECK: scf.for %{{.*}} = %c0 to %c512 step %c256
// CHECK: vector.load %[[X]][%[[ROW]], %{{.*}}]
// CHECK: vector.store %{{.*}}, %[[CHUNKS]][%{{.*}}, %[[ROW]], %{{.*}}]
// CHECK: scf.for %{{.*}} = %c0 to %c96 step %c8
// CHECK: vector.maskedstore %[[CHUNKS]][%{{.*}}, %[[ROW]], %c96]
// CHECK: scf.forall (%{{.*}}) in (8)
// CHECK: %[[ACC:.*]] = memref.alloc() {{.*}} : memref<96x8xf32>
// CHECK: scf.for %{{.*}} = %c0 to %c96 step %c1
// CHECK: vector.store %{{.*}}, %[[ACC]]
// CHECK: scf.for %{{.*}} = %c0 to %c512 step %c256
// CHECK: scf.for %{{.*}} = %c0 to %{{.*}} step %c1
// CHECK-COUNT-12: vector.load %[[ACC]]
// CHECK: scf.for %[[K:.*]] = %c0 to %c256 step %c8 iter_args
// CHECK: memref.prefetch
// CHECK: vector.load %[[CHUNKS]][%{{.*}}, %c0, %[[K]]]
// CHECK-COUNT-12: vector.store %{{.*}}, %[[ACC]]
// CHECK-NOT: memref.store
// CHECK: scf.for %{{.*}} = %c0 to %c96 step %c8 iter_args
// CHECK: vector.maskedload %[[CHUNKS]][%{{.*}}, %c0, %c96]
// CHECK: vector.extract_strided_slice
// CHECK: memref.store %{{.*}}, %{{.*}}[%c0, %{{.*}}] : memref<16x45xf32>
// WIDE-LABEL: func @dot_rows_chunked
// WIDE: memref.alloc() {{.*}} : memref<3x16x256xf32>
// WIDE: scf.forall (%{{.*}}) in (6)
// WIDE: memref.alloc() {{.*}} : memref<128x16xf32>
// WIDE: scf.for %{{.*}} = %c0 to %c512 step %c256
// WIDE: scf.for %{{.*}} = %c0 to %c256 step %c16 iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// WIDE: scf.for %{{.*}} = %c0 to %c96 step %c16 iter_args
// WIDE: vector.maskedload
func.func @dot_rows_chunked(%x: tensor<16x610xf32>, %w: tensor<45x610xf32>) -> tensor<16x45xf32> {
  %y = xfmr.fused_linear %x, %w {transpose_weight} : (tensor<16x610xf32>, tensor<45x610xf32>) -> tensor<16x45xf32>
  return %y : tensor<16x45xf32>
}

// -----

// A gated MLP's product of one row (SwiGLU, a bias on up): the gate's dot
// products, silu in their epilogue, into a buffer; then up's, each output
// its sum plus its bias times its gate's.
// CHECK-LABEL: func @gated_rows
// CHECK: %[[WG:.*]] = bufferization.to_buffer %{{.*}} : tensor<10x64xf32>
// CHECK: %[[GATE:.*]] = memref.alloc() {{.*}} : memref<1x10xf32>
// CHECK: scf.forall
// CHECK: vector.load %[[WG]]
// CHECK: %[[G:.*]] = vector.extract %{{.*}}[0]
// CHECK: math.exp
// CHECK: %[[S:.*]] = arith.mulf %[[G]]
// CHECK: memref.store %[[S]], %[[GATE]][
// CHECK: %[[WU:.*]] = bufferization.to_buffer %{{.*}} : tensor<10x64xf32>
// CHECK: %[[B:.*]] = bufferization.to_buffer %{{.*}} : tensor<10xf32>
// CHECK: %[[OUT:.*]] = memref.alloc() {{.*}} : memref<1x10xf32>
// CHECK: scf.forall
// CHECK: vector.load %[[WU]]
// CHECK: %[[U:.*]] = vector.extract %{{.*}}[0]
// CHECK: memref.load %[[B]]
// CHECK: %[[UB:.*]] = arith.addf %[[U]]
// CHECK: %[[GN:.*]] = memref.load %[[GATE]][
// CHECK: %[[H:.*]] = arith.mulf %[[UB]], %[[GN]]
// CHECK: memref.store %[[H]], %[[OUT]][
func.func @gated_rows(%x: tensor<1x64xf32>, %wg: tensor<10x64xf32>, %wu: tensor<10x64xf32>, %b: tensor<10xf32>) -> tensor<1x10xf32> {
  %y = xfmr.gated_linear %x, %wg, %wu up_bias(%b) {activation = #xfmr.activation<silu>, transpose_weight} : (tensor<1x64xf32>, tensor<10x64xf32>, tensor<10x64xf32>, tensor<10xf32>) -> tensor<1x10xf32>
  return %y : tensor<1x10xf32>
}

// -----

// A gated GEMM: the gate's product, silu in its epilogue, into a buffer
// that up's product then multiplies its outputs by in its own.
// CHECK-LABEL: func @gated_gemm
// CHECK: %[[GATE:.*]] = memref.alloc() {{.*}} : memref<40x16xf32>
// CHECK: scf.forall
// CHECK: math.exp
// CHECK: vector.store %{{.*}}, %[[GATE]][
// CHECK: %[[OUT:.*]] = memref.alloc() {{.*}} : memref<40x16xf32>
// CHECK: scf.forall
// CHECK: %[[GN:.*]] = vector.load %[[GATE]][
// CHECK: %[[H:.*]] = arith.mulf %{{.*}}, %[[GN]]
// CHECK: vector.store %[[H]], %[[OUT]][
func.func @gated_gemm(%x: tensor<40x64xf32>, %wg: tensor<16x64xf32>, %wu: tensor<16x64xf32>) -> tensor<40x16xf32> {
  %y = xfmr.gated_linear %x, %wg, %wu {activation = #xfmr.activation<silu>, transpose_weight} : (tensor<40x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<40x16xf32>
  return %y : tensor<40x16xf32>
}

// -----

// 8 rows (two groups of 4, blocks of 3 weight rows): A's reads do not
// outweigh B's enough to pay for chunks; a task per block sweeps the whole
// depth from A's rows as they are.
// CHECK-LABEL: func @dot_rows_unchunked
// CHECK: %[[X:.*]] = bufferization.to_buffer %{{.*}} : tensor<8x610xf32>
// CHECK-NOT: memref.alloc() {{.*}} : memref<{{.*}}x8x{{.*}}xf32>
// CHECK: scf.forall (%{{.*}}) in (15)
// CHECK: scf.for %[[K:.*]] = %c0 to %c608 step %c8 iter_args
// CHECK: vector.load %[[X]][%c0, %[[K]]]
func.func @dot_rows_unchunked(%x: tensor<8x610xf32>, %w: tensor<45x610xf32>) -> tensor<8x45xf32> {
  %y = xfmr.fused_linear %x, %w {transpose_weight} : (tensor<8x610xf32>, tensor<45x610xf32>) -> tensor<8x45xf32>
  return %y : tensor<8x45xf32>
}

// -----

// More rows than a group (a batched decode step): 14 rows in groups of
// 5, 5 and 4, one after the other over the same block of the weight (AVX-512:
// 5 x 5 accumulators), which the later groups find in cache; the groups
// prefetch the next block's rows meanwhile, each its own (rows 0 and 3, 1
// and 4, 2 of the next block), into L2.
// WIDE-LABEL: func @dot_rows_groups
// WIDE: %[[W:.*]] = bufferization.to_buffer %{{.*}} : tensor<40x64xf32>
// WIDE: scf.forall (%{{.*}}) in (8)
// WIDE: scf.for %[[K:.*]] = %c0 to %c64 step %c16 iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// WIDE-COUNT-2: memref.prefetch %[[W]][%{{.*}}, %[[K]]], read, locality<2>, data
// WIDE-NOT: memref.prefetch
// WIDE-COUNT-25: vector.fma
// WIDE: memref.store %{{.*}}, %{{.*}}[%c4, %{{.*}}]
// WIDE: scf.for %[[K:.*]] = %c0 to %c64 step %c16 iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// WIDE-COUNT-2: memref.prefetch %[[W]][%{{.*}}, %[[K]]]
// WIDE-NOT: memref.prefetch
// WIDE: memref.store %{{.*}}, %{{.*}}[%c9, %{{.*}}]
// WIDE: scf.for %[[K:.*]] = %c0 to %c64 step %c16 iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// WIDE-COUNT-1: memref.prefetch %[[W]][%{{.*}}, %[[K]]]
// WIDE-NOT: memref.prefetch
// WIDE: memref.store %{{.*}}, %{{.*}}[%c13, %{{.*}}]
// WIDE: bufferization.to_tensor
// AVX2: groups of 2 x 5 accumulators.
// CHECK-LABEL: func @dot_rows_groups
// CHECK: scf.forall (%{{.*}}) in (20)
// CHECK: scf.for %{{.*}} -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK: memref.prefetch
func.func @dot_rows_groups(%x: tensor<14x64xf32>, %w: tensor<40x64xf32>) -> tensor<14x40xf32> {
  %y = xfmr.fused_linear %x, %w {transpose_weight} : (tensor<14x64xf32>, tensor<40x64xf32>) -> tensor<14x40xf32>
  return %y : tensor<14x40xf32>
}

// -----

// A [K, N] weight and a few more rows than the skinny products take: the
// register tiles read the weight's panels in place, unpacked (each panel is
// read by 2 tiles of rows, 12 = 6 + 6, too few to repay a packed copy).
// CHECK-LABEL: func @small_kn
// CHECK: %[[W:.*]] = bufferization.to_buffer %{{.*}} : tensor<64x40xf32>
// CHECK-NOT: memref.alloc() {{.*}} : memref<{{.*}}x64x16xf32>
// CHECK: scf.forall
// CHECK: scf.for %[[COL:.*]] = %{{.*}} to %{{.*}} step %c16
// CHECK: scf.for %[[K:.*]] = %c0 to %c64 step %c1 iter_args
// CHECK: %[[AT:.*]] = arith.addi %[[COL]], %c0
// CHECK: vector.load %[[W]][%[[K]], %[[AT]]]
func.func @small_kn(%x: tensor<12x64xf32>, %w: tensor<64x40xf32>) -> tensor<12x40xf32> {
  %y = xfmr.fused_linear %x, %w : (tensor<12x64xf32>, tensor<64x40xf32>) -> tensor<12x40xf32>
  return %y : tensor<12x40xf32>
}

// -----

// Too few column chunks for the threads (two panels of a 32-column product):
// the rows split into bands as well, 2 chunks x 4 bands of 128 rows.
// CHECK-LABEL: func @gemm_bands
// CHECK: scf.forall (%[[BLOCK:.*]]) in (8)
// CHECK: %[[BAND:.*]] = arith.divui %[[BLOCK]], %c2
// CHECK: arith.muli %[[BAND]], %c128
func.func @gemm_bands(%x: tensor<4x128x32xf32>, %w: tensor<32x32xf32>) -> tensor<4x128x32xf32> {
  %y = xfmr.fused_linear %x, %w : (tensor<4x128x32xf32>, tensor<32x32xf32>) -> tensor<4x128x32xf32>
  return %y : tensor<4x128x32xf32>
}

// -----

// A weight gradient's product (A^T B, 96 x 32 summed over 64 rows): with the
// 14-row tiles of 32 registers no two bands of 4 tiles fit, so the rows split
// into 6 bands of one tile and a tail rather than one block for one thread;
// B, one panel wide, is read in place (no packed copy). The 6-row tiles of
// 16 registers make 2 column chunks x 4 bands, as before.
// WIDE-LABEL: func @gemm_weight_gradient
// WIDE: %[[B:.*]] = bufferization.to_buffer %arg1
// WIDE-NEXT: memref.alloc() {alignment = 64 : i64} : memref<96x32xf32>
// WIDE-NEXT: scf.forall (%[[BLOCK:.*]]) in (6)
// WIDE-NOT: memref.alloc
// WIDE: arith.muli %{{.*}}, %c16
// WIDE: vector.load %[[B]]
// CHECK-LABEL: func @gemm_weight_gradient
// CHECK: scf.forall (%{{.*}}) in (8)
func.func @gemm_weight_gradient(%x: tensor<64x96xf32>, %dy: tensor<64x32xf32>) -> tensor<96x32xf32> {
  %dw = xfmr.matmul %x, %dy {transpose_lhs} : (tensor<64x96xf32>, tensor<64x32xf32>) -> tensor<96x32xf32>
  return %dw : tensor<96x32xf32>
}

// Rows of A 4 KiB apart (K = 1024) share L1 sets: with the 14-row tiles of
// 32 registers, more than the 8 ways of a set, A is first copied, in
// parallel, to rows one cache line longer, which the tiles read. Rows of
// 1000 values, and the 6-row tiles of 16 registers, read A in place.
// WIDE-LABEL: func @gemm_aliased_rows
// WIDE: %[[A:.*]] = bufferization.to_buffer %arg0
// WIDE: %[[PADDED:.*]] = memref.alloc() {alignment = 64 : i64} : memref<24x1040xf32>
// WIDE: scf.forall (%{{.*}}) in (8)
// WIDE: %[[ROW:.*]] = vector.load %[[A]]
// WIDE: vector.store %[[ROW]], %[[PADDED]]
// WIDE: scf.forall (%{{.*}}) in (1)
// WIDE: memref.load %[[PADDED]]
// WIDE-LABEL: func @gemm_unaliased_rows
// WIDE: %[[A:.*]] = bufferization.to_buffer %arg0
// WIDE-NOT: memref<24x1016xf32>
// WIDE: scf.forall (%{{.*}}) in (1)
// WIDE: memref.load %[[A]]
// CHECK-LABEL: func @gemm_aliased_rows
// CHECK: %[[A:.*]] = bufferization.to_buffer %arg0
// CHECK-NOT: memref<24x1040xf32>
// CHECK: scf.forall (%{{.*}}) in (2)
// CHECK: memref.load %[[A]]
func.func @gemm_aliased_rows(%x: tensor<24x1024xf32>, %w: tensor<1024x32xf32>) -> tensor<24x32xf32> {
  %y = xfmr.fused_linear %x, %w : (tensor<24x1024xf32>, tensor<1024x32xf32>) -> tensor<24x32xf32>
  return %y : tensor<24x32xf32>
}
func.func @gemm_unaliased_rows(%x: tensor<24x1000xf32>, %w: tensor<1000x32xf32>) -> tensor<24x32xf32> {
  %y = xfmr.fused_linear %x, %w : (tensor<24x1000xf32>, tensor<1000x32xf32>) -> tensor<24x32xf32>
  return %y : tensor<24x32xf32>
}

// -----

// Attention: (batch, head) pairs in parallel; keys transposed once per pair;
// key blocks up to the diagonal; masks only on the blocks that need them;
// scores in base 2 (scale 0.25 times log2 e), so probabilities are exp2 of
// shifted scores: a rounding and a polynomial, no math.exp.
// CHECK-LABEL: func @attention
// CHECK: %[[SCALE:.*]] = arith.constant 0.360673{{[0-9]*}} : f32
// CHECK: %[[Q:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<1x128x2x16xf32> to memref<1x128x2x16xf32, strided<[?, ?, ?, 1], offset: ?>>
// CHECK: scf.forall (%{{.*}}) in (2)
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<2x16x64xf32>
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<128x16xf32>
// CHECK: arith.mulf %{{.*}}, %[[SCALE]] : f32
// CHECK: arith.ceildivsi
// CHECK: scf.for
// CHECK: vector.fma
// CHECK: scf.if
// CHECK: vector.step
// CHECK-NOT: math.exp
// CHECK: math.roundeven
// CHECK: } else {
// CHECK-NOT: vector.step
// CHECK-NOT: math.exp
// CHECK: math.roundeven
// CHECK: }
// CHECK: vector.fma
// CHECK-NOT: tensor<128x128xf32>
// CHECK-NOT: memref<128x128xf32>
func.func @attention(%q: tensor<1x128x2x16xf32>) -> tensor<1x128x2x16xf32> {
  %o = xfmr.fused_attention %q, %q, %q {causal, scale = 0.25 : f64}
       : (tensor<1x128x2x16xf32>, tensor<1x128x2x16xf32>, tensor<1x128x2x16xf32>) -> tensor<1x128x2x16xf32>
  return %o : tensor<1x128x2x16xf32>
}

// -----

// Grouped-query attention: each of the 4 query heads reads key/value head
// h / 2 in place (a decode step of one sequence: a task per head, no
// packing); the K/V operands stay [.., 2, ..].
// CHECK-LABEL: func @grouped_query_attention
// CHECK: bufferization.to_buffer %{{.*}} read_only : tensor<1x32x2x16xf32>
// CHECK: scf.forall (%{{.*}}) in (4)
// CHECK: arith.remui %{{.*}}, %c4
// CHECK: %[[KVHEAD:.*]] = arith.divui %{{.*}}, %c2
// CHECK: vector.load %{{.*}}[%{{.*}}, %{{.*}}, %[[KVHEAD]], %c0] : memref<1x32x2x16xf32
// CHECK-NOT: tensor<1x32x4x16xf32>
func.func @grouped_query_attention(%q: tensor<1x1x4x16xf32>, %kv: tensor<1x32x2x16xf32>,
                                   %offset: tensor<1xi32>, %length: tensor<1xi32>) -> tensor<1x1x4x16xf32> {
  %o = xfmr.fused_attention %q, %kv, %kv query_offset(%offset) key_length(%length) {causal, scale = 0.25 : f64}
       : (tensor<1x1x4x16xf32>, tensor<1x32x2x16xf32>, tensor<1x32x2x16xf32>, tensor<1xi32>, tensor<1xi32>) -> tensor<1x1x4x16xf32>
  return %o : tensor<1x1x4x16xf32>
}

// -----

// A decode step of 16 sequences: a task per sequence walks its keys
// position by position, all 4 query heads at each (key/value head h / 2),
// for the scores and again for the values.
// CHECK-LABEL: func @grouped_query_decode
// CHECK: scf.forall (%{{.*}}) in (16)
// CHECK: scf.for %{{.*}} = %c0 to %c32 step %c1
// CHECK-NEXT: arith.addi
// CHECK-NEXT: %[[KEY:.*]] = arith.minsi
// CHECK-NEXT: scf.for %{{.*}} = %c0 to %c4 step %c1
// CHECK: %[[KVHEAD:.*]] = arith.divui %{{.*}}, %c2
// CHECK: vector.load %{{.*}}[%{{.*}}, %[[KEY]], %[[KVHEAD]], %c0] : memref<16x32x2x16xf32
// CHECK: scf.for %[[POSITION:.*]] = %{{.*}} to %{{.*}} step %c1
// CHECK: scf.for %{{.*}} = %c0 to %c4 step %c1
// CHECK: %[[VHEAD:.*]] = arith.divui %{{.*}}, %c2
// CHECK: vector.load %{{.*}}[%{{.*}}, %[[POSITION]], %[[VHEAD]], %c0] : memref<16x32x2x16xf32
func.func @grouped_query_decode(%q: tensor<16x1x4x16xf32>, %kv: tensor<16x32x2x16xf32>,
                                %offset: tensor<16xi32>, %length: tensor<16xi32>) -> tensor<16x1x4x16xf32> {
  %o = xfmr.fused_attention %q, %kv, %kv query_offset(%offset) key_length(%length) {causal, scale = 0.25 : f64}
       : (tensor<16x1x4x16xf32>, tensor<16x32x2x16xf32>, tensor<16x32x2x16xf32>, tensor<16xi32>, tensor<16xi32>) -> tensor<16x1x4x16xf32>
  return %o : tensor<16x1x4x16xf32>
}

// -----

// A position bias (one value per diagonal) is read through a view whose
// query stride is -1: score (i, j) reads band[j - i + 95] as a vector along
// the keys; no [seq_q, seq_k] bias is allocated.
// CHECK-LABEL: func @position_bias
// CHECK: %[[BAND:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<1x2x191xf32> to memref<1x2x191xf32>
// CHECK: %[[VIEW:.*]] = memref.reinterpret_cast %[[BAND]] to offset: [95], sizes: [1, 2, 96, 96], strides: [382, 191, -1, 1]
// CHECK-NOT: memref.alloc{{.*}}96x96
// CHECK: vector.transfer_read %[[VIEW]][%c0, %{{.*}}, %{{.*}}, %{{.*}}], %{{.*}} : memref<1x2x96x96xf32, strided<[382, 191, -1, 1], offset: 95>>, vector<8xf32>
// CHECK-NOT: memref.alloc{{.*}}96x96
func.func @position_bias(%q: tensor<2x96x2x16xf32>, %b: tensor<1x2x191xf32>) -> tensor<2x96x2x16xf32> {
  %o = xfmr.fused_attention %q, %q, %q position_bias(%b) {scale = 0.25 : f64}
       : (tensor<2x96x2x16xf32>, tensor<2x96x2x16xf32>, tensor<2x96x2x16xf32>, tensor<1x2x191xf32>) -> tensor<2x96x2x16xf32>
  return %o : tensor<2x96x2x16xf32>
}

// -----

// int8 weights: a decode step's product reads the int8 values as they are
// stored, converting a vector at a time in registers; scales one per
// output channel multiply the sums, not every value. No f32 weight is made.
// CHECK-LABEL: func @int8_weight
// CHECK: %[[Q:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<64x96xi8>
// CHECK: %[[S:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<1x96xf32>
// CHECK: scf.forall
// CHECK: %[[V:.*]] = vector.load %[[Q]][%{{.*}}, %{{.*}}] : memref<64x96xi8, strided<[?, 1], offset: ?>>, vector<8xi8>
// CHECK: arith.sitofp %[[V]] : vector<8xi8> to vector<8xf32>
// CHECK-NOT: vector.load %[[S]]
// CHECK: scf.forall
// CHECK: vector.load %[[S]]
// CHECK-NOT: tensor<64x96xf32>
func.func @int8_weight(%x: tensor<1x64xf32>, %q: tensor<64x96xi8>, %s: tensor<1x96xf32>) -> tensor<1x96xf32> {
  %w = xfmr.dequantize %q, %s {axis = 0 : i64, group_size = 64 : i64}
         : (tensor<64x96xi8>, tensor<1x96xf32>) -> tensor<64x96xf32>
  %y = xfmr.matmul %x, %w : (tensor<1x64xf32>, tensor<64x96xf32>) -> tensor<1x96xf32>
  return %y : tensor<1x96xf32>
}

// -----

// An int8 weight kept transposed ([out, in], xfmr-quantize-weights) is read
// as B^T: no transpose is made, each output a dot product along a row. With
// int8-dot, the activations are quantized to int8 per row (round to even)
// and each row, offset to unsigned bytes, is multiplied 64 bytes at a time
// by vpdpbusd, the call of its LLVM intrinsic, 4 vectors a step into 4 sums;
// the depth tail (352 = 256 + 64 + 32) ends in a masked load, and each sum
// less 128 times the activations' sum is scaled once.
// CHECK-LABEL: func @int8_transposed_weight
// CHECK-NOT: xfmr.transpose
// CHECK: vector.load %{{.*}} : memref<40x352xi8, strided<[?, 1], offset: ?>>, vector<8xi8>
// CHECK-NOT: vpdpbusd
// DOT: func.func private @llvm.x86.avx512.vpdpbusd.512(vector<16xi32>, vector<64xi8>, vector<64xi8>) -> vector<16xi32>
// DOT-LABEL: func @int8_transposed_weight
// DOT: math.roundeven %{{.*}} : vector<16xf32>
// DOT: arith.trunci %{{.*}} : vector<16xi32> to vector<16xi8>
// DOT: scf.forall (%[[N:.*]]) in (40)
// DOT: scf.for %{{.*}} = %c0 to %c256 step %c256
// DOT: vector.load %{{.*}}[%[[N]], %{{.*}}] : memref<40x352xi8, strided<[?, 1], offset: ?>>, vector<64xi8>
// DOT: arith.xori %{{.*}} : vector<64xi8>
// DOT: call @llvm.x86.avx512.vpdpbusd.512
// DOT-COUNT-3: vector.load %{{.*}}[%[[N]], %{{.*}}] : memref<40x352xi8, strided<[?, 1], offset: ?>>, vector<64xi8>
// DOT: scf.yield
// DOT: vector.load %{{.*}}[%[[N]], %{{.*}}] : memref<40x352xi8, strided<[?, 1], offset: ?>>, vector<64xi8>
// DOT: vector.maskedload %{{.*}}[%[[N]], %{{.*}}], %{{.*}} : memref<40x352xi8, strided<[?, 1], offset: ?>>, vector<64xi1>, vector<64xi8> into vector<64xi8>
// DOT: vector.reduction <add>, %{{.*}} : vector<16xi32> into i32
// DOT: arith.muli %{{.*}}, %c128_i32 : i32
// DOT: arith.subi
// DOT: arith.sitofp %{{.*}} : i32 to f32
// DOT-NOT: tensor<352x40xf32>
// With AVX2's vpmaddubsw (int8-dot=madd, 8 lanes), which multiplies
// unsigned bytes by signed ones and saturates sums of two products past
// 2^15, the weights stay signed (no offset, no sum of the activations):
// |b| times the activations with b's sign (vpsignb), exact as they are
// above -128, widened by vpmaddwd.
// MADD: func.func private @llvm.x86.avx2.pmadd.wd(vector<16xi16>, vector<16xi16>) -> vector<8xi32>
// MADD: func.func private @llvm.x86.avx2.pmadd.ub.sw(vector<32xi8>, vector<32xi8>) -> vector<16xi16>
// MADD: func.func private @llvm.x86.avx2.psign.b(vector<32xi8>, vector<32xi8>) -> vector<32xi8>
// MADD-LABEL: func @int8_transposed_weight
// MADD-NOT: arith.xori
// MADD: scf.forall (%[[N:.*]]) in (40)
// MADD: %[[B:.*]] = vector.load %{{.*}}[%[[N]], %{{.*}}] : memref<40x352xi8, strided<[?, 1], offset: ?>>, vector<32xi8>
// MADD-NEXT: %[[A:.*]] = vector.load %{{.*}} : memref<1x352xi8>, vector<32xi8>
// MADD-NEXT: %[[MAGNITUDES:.*]] = math.absi %[[B]] : vector<32xi8>
// MADD-NEXT: %[[SIGNED:.*]] = func.call @llvm.x86.avx2.psign.b(%[[A]], %[[B]])
// MADD-NEXT: %[[PAIRS:.*]] = func.call @llvm.x86.avx2.pmadd.ub.sw(%[[MAGNITUDES]], %[[SIGNED]])
// MADD-NEXT: func.call @llvm.x86.avx2.pmadd.wd(%[[PAIRS]],
// MADD-NOT: arith.xori
// MADD-NOT: arith.muli %{{.*}}, %c128_i32
// MADD: arith.sitofp %{{.*}} : i32 to f32
// MADD-NOT: vpdpbusd
// The same on 16 lanes (AVX-512BW, which lacks vpsignb: a select), and
// vpdpbusd on 8 (AVX-VNNI).
// MADD16-LABEL: func @int8_transposed_weight
// MADD16: %[[B:.*]] = vector.load %{{.*}} : memref<40x352xi8, strided<[?, 1], offset: ?>>, vector<64xi8>
// MADD16-NEXT: %[[A:.*]] = vector.load %{{.*}} : memref<1x352xi8>, vector<64xi8>
// MADD16-NEXT: %[[MAGNITUDES:.*]] = math.absi %[[B]] : vector<64xi8>
// MADD16-NEXT: %[[NEGATIVE:.*]] = arith.cmpi slt, %[[B]], %[[ZEROS:.*]] : vector<64xi8>
// MADD16-NEXT: %[[NEGATED:.*]] = arith.subi %[[ZEROS]], %[[A]] : vector<64xi8>
// MADD16-NEXT: %[[SIGNED:.*]] = arith.select %[[NEGATIVE]], %[[NEGATED]], %[[A]] : vector<64xi1>, vector<64xi8>
// MADD16-NEXT: %[[PAIRS:.*]] = func.call @llvm.x86.avx512.pmaddubs.w.512(%[[MAGNITUDES]], %[[SIGNED]]) : (vector<64xi8>, vector<64xi8>) -> vector<32xi16>
// MADD16-NEXT: func.call @llvm.x86.avx512.pmaddw.d.512(%[[PAIRS]], %{{.*}}) : (vector<32xi16>, vector<32xi16>) -> vector<16xi32>
// VNNI8-LABEL: func @int8_transposed_weight
// VNNI8: arith.xori %{{.*}} : vector<32xi8>
// VNNI8: func.call @llvm.x86.avx512.vpdpbusd.256(%{{.*}}, %{{.*}}, %{{.*}}) : (vector<8xi32>, vector<32xi8>, vector<32xi8>) -> vector<8xi32>
func.func @int8_transposed_weight(%x: tensor<1x352xf32>, %q: tensor<40x352xi8>, %s: tensor<40x1xf32>) -> tensor<1x40xf32> {
  %d = xfmr.dequantize %q, %s {axis = 1 : i64, group_size = 352 : i64}
         : (tensor<40x352xi8>, tensor<40x1xf32>) -> tensor<40x352xf32>
  %w = xfmr.transpose %d {permutation = array<i64: 1, 0>} : (tensor<40x352xf32>) -> tensor<352x40xf32>
  %y = xfmr.fused_linear %x, %w : (tensor<1x352xf32>, tensor<352x40xf32>) -> tensor<1x40xf32>
  return %y : tensor<1x40xf32>
}

// -----

// An int8 weight in groups of 32 along its input side (GGUF's Q8_0): with
// int8-dot, each block of 32 activations is quantized as llama.cpp's q8_0
// (the values rounded at 127 / max |x|, the scale max |x| / 127 rounded to
// f16), A's block scales are spread to the lanes of each chunk of 64 values
// once (lanes 0-7 the first block's, 8-15 the second's: a load of two and
// a shuffle; the depth tail, 160 = 128 + 32, a single block, selects), and
// each 64 bytes of a row of B, offset to unsigned bytes, are multiplied by
// vpdpbusd and scaled by B's two scales (one load and a shuffle) times A's
// spread ones; the tail ends in a masked load and selects its lanes'
// scales; the offset's share, -128 times B's scales times A's sums per
// group, is added once per output. vpmaddubsw (int8-dot=madd) takes B's
// bytes signed: neither the offset nor A's group sums. Without int8-dot the
// values are converted in registers.
// CHECK-LABEL: func @int8_grouped_weight
// CHECK-NOT: vpdpbusd
// CHECK: arith.sitofp %{{.*}} : vector<8xi8> to vector<8xf32>
// DOT-LABEL: func @int8_grouped_weight
// DOT: %[[OFFSET:.*]] = arith.constant dense<-1.280000e+02> : vector<16xf32>
// DOT: scf.for %{{.*}} = %c0 to %c160 step %c32
// DOT: vector.reduction <maximumf>
// DOT: arith.truncf %{{.*}} : f32 to f16
// DOT: math.roundeven %{{.*}} : vector<16xf32>
// DOT: %[[APAIR:.*]] = vector.load %{{.*}}[%c0, %{{.*}}] : memref<1x5xf32>, vector<2xf32>
// DOT-NEXT: %[[ALANES:.*]] = vector.shuffle %[[APAIR]], %[[APAIR]] [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1] : vector<2xf32>, vector<2xf32>
// DOT: vector.store %[[ALANES]], %[[SPREAD:[a-z0-9_]+]][%c0, %{{.*}}] : memref<1x48xf32>, vector<16xf32>
// DOT: arith.select %{{.*}} : vector<16xi1>, vector<16xf32>
// DOT: scf.forall (%[[N:.*]]) in (40)
// DOT: vector.load %{{.*}}[%[[N]], %{{.*}}] : memref<40x160xi8, strided<[?, 1], offset: ?>>, vector<64xi8>
// DOT: arith.xori %{{.*}} : vector<64xi8>
// DOT: %[[BPAIR:.*]] = vector.load %{{.*}}[%[[N]], %{{.*}}] : memref<40x5xf32, strided<[?, 1], offset: ?>>, vector<2xf32>
// DOT: vector.shuffle %[[BPAIR]], %[[BPAIR]] [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1] : vector<2xf32>, vector<2xf32>
// DOT: call @llvm.x86.avx512.vpdpbusd.512
// DOT: vector.load %[[SPREAD]][%c0, %{{.*}}] : memref<1x48xf32>, vector<16xf32>
// DOT-NOT: arith.select
// DOT: vector.maskedload %{{.*}}[%[[N]], %{{.*}}], %{{.*}} : memref<40x160xi8, strided<[?, 1], offset: ?>>, vector<64xi1>, vector<64xi8> into vector<64xi8>
// DOT: arith.select %{{.*}} : vector<16xi1>, vector<16xf32>
// DOT: arith.mulf %{{.*}}, %[[OFFSET]] : vector<16xf32>
// DOT-NOT: tensor<160x40xf32>
// MADD-LABEL: func @int8_grouped_weight
// MADD-NOT: -1.280000e+02
// MADD-NOT: memref<1x5xi32>
// MADD-NOT: arith.xori
// MADD: scf.forall
// MADD: func.call @llvm.x86.avx2.psign.b
// MADD-NOT: arith.xori
// MADD: return
func.func @int8_grouped_weight(%x: tensor<1x160xf32>, %q: tensor<40x160xi8>, %s: tensor<40x5xf32>) -> tensor<1x40xf32> {
  %d = xfmr.dequantize %q, %s {axis = 1 : i64, group_size = 32 : i64}
         : (tensor<40x160xi8>, tensor<40x5xf32>) -> tensor<40x160xf32>
  %w = xfmr.transpose %d {permutation = array<i64: 1, 0>} : (tensor<40x160xf32>) -> tensor<160x40xf32>
  %y = xfmr.fused_linear %x, %w : (tensor<1x160xf32>, tensor<160x40xf32>) -> tensor<1x40xf32>
  return %y : tensor<1x40xf32>
}

// -----

// A product of more rows (a prompt's) with a 4-bit weight: with int8-dot,
// A's rows are quantized per block of 32 in parallel (4 bytes to an i32,
// each block's sum kept); each thread packs a panel of 32 rows of B, 64
// values of 16 rows unpacked to bytes in value order and transposed so that
// each i32 lane holds 4 consecutive values of one row; a tile of 6 rows x 2
// vectors sums each block of 32 in i32 (8 vpdpbusd per accumulator from
// zero, A's 4 bytes broadcast), takes off 8 times A's block sum (the
// nibbles' offset) and adds the block to f32 sums scaled by both scales.
// The last panel's 8 columns end in a masked store. Without int8-dot, the
// f32 GEMM.
// CHECK-LABEL: func @int4_weight_gemm
// CHECK-NOT: vpdpbusd
// CHECK: vector.fma
// DOT-LABEL: func @int4_weight_gemm
// DOT: %[[ZERO:.*]] = arith.constant dense<0> : vector<16xi32>
// DOT: memref.alloc() {{.*}} : memref<20x40xi32>
// DOT: memref.alloc() {{.*}} : memref<20x5xf32>
// DOT: memref.alloc() {{.*}} : memref<20x5xi32>
// DOT: scf.forall
// DOT: math.roundeven %{{.*}} : vector<16xf32>
// DOT: vector.bitcast %{{.*}} : vector<16xi8> to vector<4xi32>
// DOT: vector.reduction <add>, %{{.*}} : vector<16xi32> into i32
// DOT: scf.forall (%{{.*}}) in (2)
// DOT: memref.alloc() {{.*}} : memref<40x32xi32>
// DOT: vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 16,
// DOT: vector.bitcast %{{.*}} : vector<64xi8> to vector<16xi32>
// DOT: vector.store %{{.*}} : memref<40x32xi32>, vector<16xi32>
// DOT: scf.for %{{.*}} = %c0 to %{{.*}} step %c6
// DOT: scf.for %{{.*}} = %c0 to %c5 step %c1 iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// DOT: vector.broadcast %{{.*}} : i32 to vector<16xi32>
// DOT: vector.bitcast %{{.*}} : vector<16xi32> to vector<64xi8>
// DOT-COUNT-12: call @llvm.x86.avx512.vpdpbusd.512(%[[ZERO]],
// DOT-COUNT-84: call @llvm.x86.avx512.vpdpbusd.512
// DOT-NOT: vpdpbusd
// DOT: arith.muli %{{.*}}, %c8_i32 : i32
// DOT: arith.subi %{{.*}} : vector<16xi32>
// DOT: arith.sitofp %{{.*}} : vector<16xi32> to vector<16xf32>
// DOT: vector.fma
// DOT: scf.yield
// DOT: vector.maskedstore %{{.*}} : memref<20x40xf32>, vector<16xi1>, vector<16xf32>
// DOT-NOT: tensor<160x40xf32>
// With vpmaddubsw on 8 lanes (int8-dot=madd), panels of 16 rows, 32 values
// (one block) unpacked at a time in value order, tiles of 3 rows; the
// nibbles take vpmaddubsw whole.
// MADD-LABEL: func @int4_weight_gemm
// MADD-NOT: dense<127> : vector<32xi8>
// MADD: memref.alloc() {{.*}} : memref<40x16xi32>
// MADD: vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31] : vector<16xi8>, vector<16xi8>
// MADD: scf.for %{{.*}} = %c0 to %{{.*}} step %c3
// MADD: scf.for %{{.*}} = %c0 to %c5 step %c1 iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// MADD-COUNT-48: func.call @llvm.x86.avx2.pmadd.ub.sw
// MADD-NOT: func.call @llvm.x86.avx2.pmadd.ub.sw
// MADD: scf.yield
func.func @int4_weight_gemm(%x: tensor<20x160xf32>, %q: tensor<40x80xi8>, %s: tensor<40x5xf32>) -> tensor<20x40xf32> {
  %d = xfmr.dequantize %q, %s {axis = 1 : i64, bits = 4 : i64, group_size = 32 : i64}
         : (tensor<40x80xi8>, tensor<40x5xf32>) -> tensor<40x160xf32>
  %w = xfmr.transpose %d {permutation = array<i64: 1, 0>} : (tensor<40x160xf32>) -> tensor<160x40xf32>
  %y = xfmr.fused_linear %x, %w : (tensor<20x160xf32>, tensor<160x40xf32>) -> tensor<20x40xf32>
  return %y : tensor<20x40xf32>
}

// -----

// A decode step's 4-bit product with f16 scales (GGUF's Q4_0), 16 lanes:
// A's block scales are spread to the lanes of each chunk of 128 values
// (four blocks: lanes 4b to 4b + 3 sum block b) once, before the rows of B:
// a load of four and a shuffle for the whole chunk, selects for the tail's
// (160 = 128 + 32). Per row of B, a chunk's 64 bytes unpack to their low
// nibbles and their high ones, two dot products summed in one vector; the
// four blocks' f16 scales are loaded at once, widened and spread likewise;
// the tail loads masked and selects. The scales stay f16 in memory: no
// widened copy of them.
// DOT-LABEL: func @int4_f16_scales_skinny
// DOT-NOT: tensor<40x5xf32>
// DOT: %[[ASCALES:.*]] = vector.load %{{.*}}[%c0, %{{.*}}] : memref<1x5xf32>, vector<4xf32>
// DOT-NEXT: %[[ALANES:.*]] = vector.shuffle %[[ASCALES]], %[[ASCALES]] [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3] : vector<4xf32>, vector<4xf32>
// DOT: vector.store %[[ALANES]], %[[SPREAD:[a-z0-9_]+]][%c0, %{{.*}}] : memref<1x32xf32>, vector<16xf32>
// DOT-COUNT-3: arith.select %{{.*}} : vector<16xi1>, vector<16xf32>
// DOT: scf.forall (%[[N:.*]]) in (40)
// DOT: %[[BYTES:.*]] = vector.load %{{.*}}[%[[N]], %{{.*}}] : memref<40x80xi8, strided<[?, 1], offset: ?>>, vector<64xi8>
// DOT-NEXT: %[[LOW:.*]] = arith.andi %[[BYTES]], %{{.*}} : vector<64xi8>
// DOT-NEXT: %[[SHIFTED:.*]] = arith.shrui %[[BYTES]], %{{.*}} : vector<64xi8>
// DOT-NEXT: %[[HIGH:.*]] = arith.andi %[[SHIFTED]], %{{.*}} : vector<64xi8>
// DOT: vector.load %{{.*}}[%[[N]], %{{.*}}] : memref<40x5xf16, strided<[?, 1], offset: ?>>, vector<4xf16>
// DOT-NEXT: arith.extf %{{.*}} : vector<4xf16> to vector<4xf32>
// DOT-NEXT: vector.shuffle %{{.*}}, %{{.*}} [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3] : vector<4xf32>, vector<4xf32>
// DOT: %[[FIRST:.*]] = func.call @llvm.x86.avx512.vpdpbusd.512(%{{.*}}, %[[LOW]], %{{.*}})
// DOT-NEXT: func.call @llvm.x86.avx512.vpdpbusd.512(%[[FIRST]], %[[HIGH]], %{{.*}})
// DOT: vector.load %[[SPREAD]][%c0, %{{.*}}] : memref<1x32xf32>, vector<16xf32>
// DOT-NOT: arith.select
// DOT: vector.maskedload %{{.*}}[%[[N]], %{{.*}}], %{{.*}} : memref<40x80xi8, strided<[?, 1], offset: ?>>, vector<64xi1>, vector<64xi8> into vector<64xi8>
// DOT: memref.load %{{.*}}[%[[N]], %{{.*}}] : memref<40x5xf16, strided<[?, 1], offset: ?>>
// DOT-COUNT-3: arith.select %{{.*}} : vector<16xi1>, vector<16xf32>
// With vpmaddubsw on 8 lanes (chunks of 64 values, two blocks), the two
// products' 16-bit pair sums are added before one vpmaddwd widens them.
// MADD-LABEL: func @int4_f16_scales_skinny
// MADD: scf.forall
// MADD: vector.load %{{.*}} : memref<40x5xf16, strided<[?, 1], offset: ?>>, vector<2xf16>
// MADD: %[[LOWSUMS:.*]] = func.call @llvm.x86.avx2.pmadd.ub.sw
// MADD-NEXT: %[[HIGHSUMS:.*]] = func.call @llvm.x86.avx2.pmadd.ub.sw
// MADD-NEXT: %[[SUMS:.*]] = arith.addi %[[LOWSUMS]], %[[HIGHSUMS]] : vector<16xi16>
// MADD-NEXT: func.call @llvm.x86.avx2.pmadd.wd(%[[SUMS]], %{{.*}}) : (vector<16xi16>, vector<16xi16>) -> vector<8xi32>
// The portable integer dot product (int8-dot=portable) widens both operands
// to i32, multiplies them and sums each lane's 4 products from strided
// shuffles: no x86 intrinsic. The high nibbles' product adds to the low
// ones' sums.
// PORTABLE-LABEL: func @int4_f16_scales_skinny
// PORTABLE-NOT: call @llvm.x86
// PORTABLE: %[[U:.*]] = arith.extui %{{.*}} : vector<64xi8> to vector<64xi32>
// PORTABLE-NEXT: %[[S:.*]] = arith.extsi %{{.*}} : vector<64xi8> to vector<64xi32>
// PORTABLE-NEXT: %[[P:.*]] = arith.muli %[[U]], %[[S]] : vector<64xi32>
// PORTABLE-NEXT: vector.shuffle %[[P]], %[[P]] [0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60] : vector<64xi32>, vector<64xi32>
// PORTABLE-COUNT-3: vector.shuffle %[[P]], %[[P]]
// PORTABLE: %[[LOWDOT:.*]] = arith.addi %{{.*}}, %{{.*}} : vector<16xi32>
// PORTABLE-NEXT: %[[U2:.*]] = arith.extui %{{.*}} : vector<64xi8> to vector<64xi32>
// PORTABLE-NEXT: %[[S2:.*]] = arith.extsi %{{.*}} : vector<64xi8> to vector<64xi32>
// PORTABLE-NEXT: %[[P2:.*]] = arith.muli %[[U2]], %[[S2]] : vector<64xi32>
// PORTABLE-NEXT: %[[Q2:.*]] = vector.shuffle %[[P2]], %[[P2]] [0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60]
// PORTABLE-NEXT: arith.addi %[[LOWDOT]], %[[Q2]] : vector<16xi32>
// PORTABLE-NOT: call @llvm.x86
func.func @int4_f16_scales_skinny(%x: tensor<1x160xf32>, %q: tensor<40x80xi8>, %s: tensor<40x5xf16>) -> tensor<1x40xf32> {
  %d = xfmr.dequantize %q, %s {axis = 1 : i64, bits = 4 : i64, group_size = 32 : i64}
         : (tensor<40x80xi8>, tensor<40x5xf16>) -> tensor<40x160xf32>
  %w = xfmr.transpose %d {permutation = array<i64: 1, 0>} : (tensor<40x160xf32>) -> tensor<160x40xf32>
  %y = xfmr.fused_linear %x, %w : (tensor<1x160xf32>, tensor<160x40xf32>) -> tensor<1x40xf32>
  return %y : tensor<1x40xf32>
}

// -----

// 4-bit groups of 64 on 16 lanes: a chunk of 128 values spans two groups,
// whose scales are loaded at once and spread by a shuffle (no selects).
// DOT-LABEL: func @int4_groups64_skinny
// DOT: scf.forall (%[[N:.*]]) in (8)
// DOT: vector.load %{{.*}}[%[[N]], %{{.*}}] : memref<8x4xf32, strided<[?, 1], offset: ?>>, vector<2xf32>
// DOT-NEXT: vector.shuffle %{{.*}}, %{{.*}} [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1] : vector<2xf32>, vector<2xf32>
// DOT-NOT: arith.select
// DOT: return
func.func @int4_groups64_skinny(%x: tensor<1x256xf32>, %q: tensor<8x128xi8>, %s: tensor<8x4xf32>) -> tensor<1x8xf32> {
  %d = xfmr.dequantize %q, %s {axis = 1 : i64, bits = 4 : i64, group_size = 64 : i64}
         : (tensor<8x128xi8>, tensor<8x4xf32>) -> tensor<8x256xf32>
  %w = xfmr.transpose %d {permutation = array<i64: 1, 0>} : (tensor<8x256xf32>) -> tensor<256x8xf32>
  %y = xfmr.fused_linear %x, %w : (tensor<1x256xf32>, tensor<256x8xf32>) -> tensor<1x8xf32>
  return %y : tensor<1x8xf32>
}

// -----

// An int8 weight in groups of 16 (GGUF's Q6_K): the integer GEMM sums spans
// of 16 values (4 vpdpbusd per accumulator from zero), A's sums kept per 16
// and B's scales packed per 16; A's scale stays one per block of 32.
// DOT-LABEL: func @int8_groups16_gemm
// DOT: %[[ZERO:.*]] = arith.constant dense<0> : vector<16xi32>
// DOT: memref.alloc() {{.*}} : memref<20x2xf32>
// DOT: memref.alloc() {{.*}} : memref<20x4xi32>
// DOT: memref.alloc() {{.*}} : memref<4x32xf32>
// DOT: scf.for %{{.*}} = %c0 to %c4 step %c1 iter_args
// DOT-COUNT-12: call @llvm.x86.avx512.vpdpbusd.512(%[[ZERO]],
// DOT-COUNT-36: call @llvm.x86.avx512.vpdpbusd.512
// DOT-NOT: call @llvm.x86.avx512.vpdpbusd.512
// DOT: arith.muli %{{.*}}, %c128_i32 : i32
// DOT: scf.yield
// With vpmaddubsw (int8-dot=madd) the same GEMM on 8 lanes, B's bytes
// packed signed: no sums of A (no offset to undo), and each product |b|
// times A's bytes with b's sign, in tiles of 3 rows.
// MADD-LABEL: func @int8_groups16_gemm
// MADD-NOT: memref<20x4xi32>
// MADD: memref.alloc() {{.*}} : memref<20x2xf32>
// MADD-NOT: memref<20x4xi32>
// MADD: scf.for %{{.*}} = %c0 to %c4 step %c1 iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// MADD: %[[MAGNITUDES:.*]] = math.absi %[[B:.*]] : vector<32xi8>
// MADD-NEXT: %[[SIGNED:.*]] = func.call @llvm.x86.avx2.psign.b(%{{.*}}, %[[B]])
// MADD-NEXT: func.call @llvm.x86.avx2.pmadd.ub.sw(%[[MAGNITUDES]], %[[SIGNED]])
// MADD-NOT: %c128_i32
// MADD: scf.yield
// MADD-LABEL: func @int8_groups16_skinny
// MADD: func.call @llvm.x86.avx2.pmadd.ub.sw
func.func @int8_groups16_gemm(%x: tensor<20x64xf32>, %q: tensor<40x64xi8>, %s: tensor<40x4xf32>) -> tensor<20x40xf32> {
  %d = xfmr.dequantize %q, %s {axis = 1 : i64, group_size = 16 : i64}
         : (tensor<40x64xi8>, tensor<40x4xf32>) -> tensor<40x64xf32>
  %w = xfmr.transpose %d {permutation = array<i64: 1, 0>} : (tensor<40x64xf32>) -> tensor<64x40xf32>
  %y = xfmr.fused_linear %x, %w : (tensor<20x64xf32>, tensor<64x40xf32>) -> tensor<20x40xf32>
  return %y : tensor<20x40xf32>
}

// -----

// A skinny product of groups of 16: each 64-byte chunk's lanes take the
// scales of its four groups, 4 lanes each.
// DOT-LABEL: func @int8_groups16_skinny
// DOT: scf.forall (%{{.*}}) in (40)
// DOT: call @llvm.x86.avx512.vpdpbusd.512
// DOT: vector.from_elements %[[G0:[0-9]+]], %[[G0]], %[[G0]], %[[G0]], %[[G1:[0-9]+]], %[[G1]], %[[G1]], %[[G1]], %[[G2:[0-9]+]], %[[G2]], %[[G2]], %[[G2]], %[[G3:[0-9]+]], %[[G3]], %[[G3]], %[[G3]] : vector<16xf32>
// DOT: call @llvm.x86.avx512.vpdpbusd.512
func.func @int8_groups16_skinny(%x: tensor<1x96xf32>, %q: tensor<40x96xi8>, %s: tensor<40x6xf32>) -> tensor<1x40xf32> {
  %d = xfmr.dequantize %q, %s {axis = 1 : i64, group_size = 16 : i64}
         : (tensor<40x96xi8>, tensor<40x6xf32>) -> tensor<40x96xf32>
  %w = xfmr.transpose %d {permutation = array<i64: 1, 0>} : (tensor<40x96xf32>) -> tensor<96x40xf32>
  %y = xfmr.fused_linear %x, %w : (tensor<1x96xf32>, tensor<96x40xf32>) -> tensor<1x40xf32>
  return %y : tensor<1x40xf32>
}

// -----

// The integer dot products take whole blocks of 32 of A: an int8 weight in
// groups of 16 whose depth (80) is not a multiple of 32 stays on the f32
// GEMM, and on the f32 skinny product for one row.
// DOT-LABEL: func @int8_groups16_uneven_depth
// DOT-NOT: vpdpbusd
// DOT: vector.fma
// DOT-NOT: vpdpbusd
// DOT: return
func.func @int8_groups16_uneven_depth(%x: tensor<20x80xf32>, %x1: tensor<1x80xf32>, %q: tensor<40x80xi8>, %s: tensor<40x5xf32>) -> (tensor<20x40xf32>, tensor<1x40xf32>) {
  %d = xfmr.dequantize %q, %s {axis = 1 : i64, group_size = 16 : i64}
         : (tensor<40x80xi8>, tensor<40x5xf32>) -> tensor<40x80xf32>
  %w = xfmr.transpose %d {permutation = array<i64: 1, 0>} : (tensor<40x80xf32>) -> tensor<80x40xf32>
  %y = xfmr.fused_linear %x, %w : (tensor<20x80xf32>, tensor<80x40xf32>) -> tensor<20x40xf32>
  %y1 = xfmr.fused_linear %x1, %w : (tensor<1x80xf32>, tensor<80x40xf32>) -> tensor<1x40xf32>
  return %y, %y1 : tensor<20x40xf32>, tensor<1x40xf32>
}

// -----

// Row kernels: softmax over the last axis, add + layer norm.
// CHECK-LABEL: func @rows
// CHECK: scf.forall
// CHECK: vector.reduction <maxnumf>, %{{.*}} fastmath<nnan>
// CHECK: vector.reduction <add>, %{{.*}} fastmath<reassoc>
// CHECK: scf.forall
// CHECK: vector.fma
// CHECK: math.rsqrt
func.func @rows(%x: tensor<4x32xf32>, %r: tensor<4x32xf32>, %g: tensor<32xf32>) -> (tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x32xf32>) {
  %s = xfmr.softmax %x : tensor<4x32xf32>
  %sum, %n = xfmr.fused_add_layer_norm %x, %r, %g, %g : (tensor<4x32xf32>, tensor<4x32xf32>, tensor<32xf32>, tensor<32xf32>) -> (tensor<4x32xf32>, tensor<4x32xf32>)
  return %s, %sum, %n : tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x32xf32>
}

// -----

// Backward row kernels. Layer norm: threads take chunks of rows; per row a
// sweep for the mean, one for the variance with the sums of g * gamma and
// g * gamma * (x - mean), one writing dx (the 4 columns past 16 masked, their
// lanes read as the mean so they add nothing), each row's mean and 1/std
// kept; then gamma's and beta's gradients, threads taking vectors of columns
// (3 of 8 lanes, 2 of 16) and sweeping the rows. Softmax: a sweep for
// sum(g * y), one for the result.
// CHECK-LABEL: func @backward_rows
// CHECK: %[[MEANS:.*]] = memref.alloc() {{.*}} : memref<12xf32>
// CHECK: %[[RSTDS:.*]] = memref.alloc() {{.*}} : memref<12xf32>
// CHECK: scf.forall
// CHECK: vector.reduction <add>
// CHECK: %[[MEAN:.*]] = vector.broadcast
// CHECK: scf.for {{.*}} -> (vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK: vector.maskedload %{{.*}}[%{{.*}}, %c16], %{{.*}}, %[[MEAN]]
// CHECK: math.rsqrt
// CHECK: vector.store
// CHECK: vector.maskedstore
// CHECK: memref.store %{{.*}}, %[[MEANS]]
// CHECK: memref.store %{{.*}}, %[[RSTDS]]
// CHECK: scf.forall (%{{.*}}) in (3)
// CHECK: memref.load %[[MEANS]]
// CHECK: memref.load %[[RSTDS]]
// CHECK: vector.fma
// CHECK: scf.forall
// CHECK: vector.reduction <add>
// CHECK: arith.subf
// CHECK: arith.mulf
// CHECK-NOT: xfmr.
// WIDE-LABEL: func @backward_rows
// WIDE: scf.forall (%{{.*}}) in (2)
func.func @backward_rows(%x: tensor<3x4x20xf32>, %gamma: tensor<20xf32>, %dy: tensor<3x4x20xf32>,
                         %y: tensor<6x20xf32>, %g: tensor<6x20xf32>)
    -> (tensor<3x4x20xf32>, tensor<20xf32>, tensor<20xf32>, tensor<6x20xf32>) {
  %dx, %dg, %db = xfmr.layer_norm_backward %x, %dy gamma(%gamma) {epsilon = 1.0e-05 : f64}
      : (tensor<3x4x20xf32>, tensor<3x4x20xf32>, tensor<20xf32>) -> (tensor<3x4x20xf32>, tensor<20xf32>, tensor<20xf32>)
  %ds = xfmr.softmax_backward %y, %g : tensor<6x20xf32>
  return %dx, %dg, %db, %ds : tensor<3x4x20xf32>, tensor<20xf32>, tensor<20xf32>, tensor<6x20xf32>
}

// -----

// A layer norm without gamma has zero gamma and beta gradients: no column
// sums.
// CHECK-LABEL: func @backward_rows_without_gamma
// CHECK: scf.forall
// CHECK: math.rsqrt
// CHECK-NOT: scf.forall
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<20xf32>)
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<20xf32>)
func.func @backward_rows_without_gamma(%x: tensor<12x20xf32>, %dy: tensor<12x20xf32>)
    -> (tensor<12x20xf32>, tensor<20xf32>, tensor<20xf32>) {
  %dx, %dg, %db = xfmr.layer_norm_backward %x, %dy {epsilon = 1.0e-05 : f64}
      : (tensor<12x20xf32>, tensor<12x20xf32>) -> (tensor<12x20xf32>, tensor<20xf32>, tensor<20xf32>)
  return %dx, %dg, %db : tensor<12x20xf32>, tensor<20xf32>, tensor<20xf32>
}

// -----

// Negative: the backward row kernels are f32 over the last axis; a softmax
// gradient over a leading axis and an f64 layer norm gradient are left for
// the linalg lowering.
// CHECK-LABEL: func @backward_left_alone
// CHECK: xfmr.layer_norm_backward
// CHECK: xfmr.softmax_backward %{{.*}}, %{{.*}} {axis = 0 : i64}
// CHECK-NOT: vector.
func.func @backward_left_alone(%x: tensor<4x8xf64>, %g: tensor<8xf64>, %dy: tensor<4x8xf64>,
                               %y: tensor<4x8xf32>, %dz: tensor<4x8xf32>)
    -> (tensor<4x8xf64>, tensor<8xf64>, tensor<8xf64>, tensor<4x8xf32>) {
  %dx, %dg, %db = xfmr.layer_norm_backward %x, %dy gamma(%g) {epsilon = 1.0e-05 : f64}
      : (tensor<4x8xf64>, tensor<4x8xf64>, tensor<8xf64>) -> (tensor<4x8xf64>, tensor<8xf64>, tensor<8xf64>)
  %ds = xfmr.softmax_backward %y, %dz {axis = 0} : tensor<4x8xf32>
  return %dx, %dg, %db, %ds : tensor<4x8xf64>, tensor<8xf64>, tensor<8xf64>, tensor<4x8xf32>
}

// -----

// Cross-entropy: threads take chunks of rows; per row one sweep for the max
// and the sum of exponentials (the 4 columns past 16 masked), the loss from
// their log, the max and the target's logit (0 where the target is
// ignored); then the rows' losses and the counted targets are summed. Its
// gradient counts the targets first (ignore_index 0 here), then per row the
// same sweep, one writing weight * softmax, and the target's entry lowered
// by the weight.
// CHECK-LABEL: func @cross_entropy_rows
// CHECK: %[[LOSSES:.*]] = memref.alloc() {{.*}} : memref<12xf32>
// CHECK: scf.forall
// CHECK: arith.cmpi ne, %{{.*}}, %c-100_i32
// CHECK: scf.for {{.*}} -> (vector<8xf32>, vector<8xf32>)
// CHECK: vector.maskedload %{{.*}}[%{{.*}}, %c16]
// CHECK: math.log
// CHECK: memref.store %{{.*}}, %[[LOSSES]]
// CHECK: scf.for {{.*}} -> (f32)
// CHECK: memref.load %[[LOSSES]]
// CHECK: scf.for {{.*}} -> (f32)
// CHECK: arith.divf
// CHECK: scf.for {{.*}} -> (f32)
// CHECK: arith.cmpi ne, %{{.*}}, %c0_i32
// CHECK: %[[WEIGHT:.*]] = arith.divf
// CHECK: scf.forall
// CHECK: scf.for {{.*}} -> (vector<8xf32>, vector<8xf32>)
// CHECK: arith.select %{{.*}}, %[[WEIGHT]]
// CHECK: vector.store
// CHECK: vector.maskedstore
// CHECK: memref.load
// CHECK: arith.subf
// CHECK: memref.store
// CHECK-NOT: xfmr.
func.func @cross_entropy_rows(%logits: tensor<3x4x20xf32>, %t: tensor<3x4xi32>, %g: tensor<f32>)
    -> (tensor<f32>, tensor<3x4x20xf32>) {
  %l = xfmr.cross_entropy %logits, %t : (tensor<3x4x20xf32>, tensor<3x4xi32>) -> tensor<f32>
  %dl = xfmr.cross_entropy_backward %logits, %t, %g {ignore_index = 0}
      : (tensor<3x4x20xf32>, tensor<3x4xi32>, tensor<f32>) -> tensor<3x4x20xf32>
  return %l, %dl : tensor<f32>, tensor<3x4x20xf32>
}

// -----

// Negative: the cross-entropy kernels are f32; f64 logits are left for the
// linalg lowering.
// CHECK-LABEL: func @cross_entropy_left_alone
// CHECK: xfmr.cross_entropy
// CHECK: xfmr.cross_entropy_backward
// CHECK-NOT: vector.
func.func @cross_entropy_left_alone(%logits: tensor<4x8xf64>, %t: tensor<4xi32>, %g: tensor<f64>)
    -> (tensor<f64>, tensor<4x8xf64>) {
  %l = xfmr.cross_entropy %logits, %t : (tensor<4x8xf64>, tensor<4xi32>) -> tensor<f64>
  %dl = xfmr.cross_entropy_backward %logits, %t, %g
      : (tensor<4x8xf64>, tensor<4xi32>, tensor<f64>) -> tensor<4x8xf64>
  return %l, %dl : tensor<f64>, tensor<4x8xf64>
}

// -----

// Negative: kernels are f32; softmax over a leading axis and batched matmuls
// are left for the linalg lowering.
// CHECK-LABEL: func @left_alone
// CHECK: xfmr.fused_linear {{.*}} -> tensor<4x8xf16>
// CHECK: xfmr.softmax %{{.*}} {axis = 0 : i64}
// CHECK: xfmr.matmul {{.*}} -> tensor<2x4x4xf32>
// CHECK-NOT: vector.
func.func @left_alone(%x: tensor<4x8xf16>, %w: tensor<8x8xf16>, %y: tensor<4x8xf32>, %b: tensor<2x4x8xf32>) -> (tensor<4x8xf16>, tensor<4x8xf32>, tensor<2x4x4xf32>) {
  %l = xfmr.fused_linear %x, %w : (tensor<4x8xf16>, tensor<8x8xf16>) -> tensor<4x8xf16>
  %s = xfmr.softmax %y {axis = 0} : tensor<4x8xf32>
  %m = xfmr.matmul %b, %b {transpose_rhs} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
  return %l, %s, %m : tensor<4x8xf16>, tensor<4x8xf32>, tensor<2x4x4xf32>
}

// -----

// FlashAttention-2 backward: probabilities are recomputed per (query block,
// key block) tile from the saved logsumexp, so no buffer is seq x seq.
// CHECK-LABEL: func @attention_backward
// CHECK: scf.forall
// CHECK-NOT: 256x256
// CHECK: return
func.func @attention_backward(%q: tensor<1x256x2x16xf32>, %o: tensor<1x256x2x16xf32>, %lse: tensor<1x2x256xf32>)
    -> (tensor<1x256x2x16xf32>, tensor<1x256x2x16xf32>, tensor<1x256x2x16xf32>) {
  %dq, %dk, %dv = xfmr.fused_attention_backward %q, %q, %q, %o, %lse, %o {causal, scale = 0.25 : f64}
      : (tensor<1x256x2x16xf32>, tensor<1x256x2x16xf32>, tensor<1x256x2x16xf32>, tensor<1x256x2x16xf32>,
         tensor<1x2x256xf32>, tensor<1x256x2x16xf32>)
      -> (tensor<1x256x2x16xf32>, tensor<1x256x2x16xf32>, tensor<1x256x2x16xf32>)
  return %dq, %dk, %dv : tensor<1x256x2x16xf32>, tensor<1x256x2x16xf32>, tensor<1x256x2x16xf32>
}

// -----

// Attention over a KV cache: the key blocks are visited only up to the
// runtime key length (and the causal diagonal at query_offset): blocks past
// it are never read. With one query (decoding) the keys and values are read
// where they are, not packed: a dot product per key of the block (its last
// rows clamped to the cache's, then masked).
// CHECK-LABEL: func @cache_attention
// CHECK-SAME: %[[OFFSETS:[^:]*]]: tensor<2xi32>, %[[LENGTHS:[^:]*]]: tensor<2xi32>
// CHECK: %[[K:.*]] = bufferization.to_buffer %{{.*}} : tensor<2x256x2x16xf32>
// CHECK: %[[OFF:.*]] = bufferization.to_buffer %[[OFFSETS]]
// CHECK: %[[LEN:.*]] = bufferization.to_buffer %[[LENGTHS]]
// CHECK: scf.forall
// CHECK-NOT: arith.ceildivui
// CHECK: memref.load %[[LEN]]
// CHECK: %[[CLAMPED:.*]] = arith.minsi %{{.*}}, %c256
// CHECK: %[[KEYS:.*]] = arith.maxsi %[[CLAMPED]], %c0
// CHECK: memref.load %[[OFF]]
// CHECK: %[[END:.*]] = arith.minsi %[[KEYS]], %{{[0-9]+}} : index
// CHECK-NEXT: %[[VISIBLE:.*]] = arith.maxsi %[[END]], %c0
// CHECK-NEXT: %[[VISITED:.*]] = arith.ceildivsi %[[VISIBLE]], %c64
// CHECK-NEXT: scf.for %{{.*}} = %c0 to %[[VISITED]]
// CHECK: scf.for %{{.*}} = %c0 to %c64
// CHECK: %[[ROW:.*]] = arith.minsi %{{.*}}, %c255
// CHECK: vector.load %[[K]][%{{.*}}, %[[ROW]], %{{.*}}, %c0]
// CHECK: vector.reduction <add>
func.func @cache_attention(%q: tensor<2x1x2x16xf32>, %k: tensor<2x256x2x16xf32>,
                           %v: tensor<2x256x2x16xf32>, %off: tensor<2xi32>,
                           %len: tensor<2xi32>) -> tensor<2x1x2x16xf32> {
  %o = xfmr.fused_attention %q, %k, %v query_offset(%off) key_length(%len) {causal, scale = 0.25 : f64}
       : (tensor<2x1x2x16xf32>, tensor<2x256x2x16xf32>, tensor<2x256x2x16xf32>, tensor<2xi32>, tensor<2xi32>) -> tensor<2x1x2x16xf32>
  return %o : tensor<2x1x2x16xf32>
}

// -----

// Narrow weights and KV caches: a product of a widened bf16 weight reads
// the bf16 weight, widening each vector in registers, and an attention
// reads its bf16 keys and values widening them in registers too (as it
// packs them, or in place for a query); the widened copies are never made.
// The f32 input stays f32.
// CHECK-LABEL: func @narrow_inputs
// CHECK-NOT: arith.extf {{.*}} : tensor<
// CHECK: %[[W:.*]] = bufferization.to_buffer %{{.*}} : tensor<64x20xbf16>
// CHECK: %[[ROW:.*]] = vector.load %[[W]][%{{.*}}, %{{.*}}] : {{.*}}, vector<8xbf16>
// CHECK: arith.extf %[[ROW]] : vector<8xbf16> to vector<8xf32>
// CHECK: %[[K:.*]] = bufferization.to_buffer %{{.*}} : tensor<1x64x2x16xbf16>
// CHECK: %[[KEY:.*]] = vector.load %[[K]]{{.*}} vector<8xbf16>
// CHECK: arith.extf %[[KEY]] : vector<8xbf16> to vector<8xf32>
func.func @narrow_inputs(%x: tensor<1x64xf32>, %w: tensor<64x20xbf16>, %q: tensor<1x1x2x16xf32>,
                         %k: tensor<1x64x2x16xbf16>, %v: tensor<1x64x2x16xbf16>)
    -> (tensor<1x20xf32>, tensor<1x1x2x16xf32>) {
  %wf = arith.extf %w : tensor<64x20xbf16> to tensor<64x20xf32>
  %y = xfmr.fused_linear %x, %wf : (tensor<1x64xf32>, tensor<64x20xf32>) -> tensor<1x20xf32>
  %kf = arith.extf %k : tensor<1x64x2x16xbf16> to tensor<1x64x2x16xf32>
  %vf = arith.extf %v : tensor<1x64x2x16xbf16> to tensor<1x64x2x16xf32>
  %o = xfmr.fused_attention %q, %kf, %vf {scale = 0.25 : f64}
       : (tensor<1x1x2x16xf32>, tensor<1x64x2x16xf32>, tensor<1x64x2x16xf32>) -> tensor<1x1x2x16xf32>
  return %y, %o : tensor<1x20xf32>, tensor<1x1x2x16xf32>
}

// -----

// Products of bf16 factors (--dtype=bf16) with bf16-dot (AVX-512 BF16): A
// and B read as stored, no widened copy. Each thread packs a panel of 32
// columns of B as pairs along K, an i32 lane each: from B [K, N], rows k and
// k + 1 interleaved; from B^T [N, K], 16 rows of 16 pairs transposed (the
// depth tail, 70 = 64 + 6, a masked load). A tile of 6 rows x 2 vectors
// accumulates on vdpbf16ps, a pair of A broadcast; the epilogue as ever.
// BF16: func.func private @llvm.x86.avx512bf16.dpbf16ps.512(vector<16xf32>, vector<32xbf16>, vector<32xbf16>) -> vector<16xf32>
// BF16-LABEL: func @bf16_gemm
// BF16-NOT: arith.extf {{.*}} : tensor<
// BF16: %[[A:.*]] = bufferization.to_buffer %{{.*}} : tensor<20x64xbf16>
// BF16: scf.forall (%{{.*}}) in (2)
// BF16: memref.alloc() {{.*}} : memref<32x32xi32>
// BF16: vector.shuffle %{{.*}}, %{{.*}} [0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39, 8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47] : vector<32xbf16>, vector<32xbf16>
// BF16: vector.bitcast %{{.*}} : vector<32xbf16> to vector<16xi32>
// BF16: scf.for %{{.*}} = %c0 to %{{.*}} step %c6
// BF16: scf.for %{{.*}} = %c0 to %c32 step %c1 iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// BF16: vector.load %[[A]][{{.*}}] : {{.*}}, vector<2xbf16>
// BF16: vector.broadcast %{{.*}} : i32 to vector<16xi32>
// BF16-COUNT-2: func.call @llvm.x86.avx512bf16.dpbf16ps.512
// BF16: math.erf
// BF16: %[[W:.*]] = bufferization.to_buffer %{{.*}} : tensor<40x70xbf16>
// BF16: memref.alloc() {{.*}} : memref<35x32xi32>
// BF16: scf.for %{{.*}} = %c0 to %c64 step %c32
// BF16: vector.load %[[W]]{{.*}} vector<32xbf16>
// BF16: vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23] : vector<16xi32>, vector<16xi32>
// BF16: vector.maskedload %[[W]]{{.*}} vector<32xi1>, vector<32xbf16> into vector<32xbf16>
// BF16: func.call @llvm.x86.avx512bf16.dpbf16ps.512
func.func @bf16_gemm(%x: tensor<20x64xbf16>, %w: tensor<64x40xbf16>, %b: tensor<40xf32>,
                     %x2: tensor<20x70xbf16>, %w2: tensor<40x70xbf16>) -> (tensor<20x40xf32>, tensor<20x40xf32>) {
  %xf = arith.extf %x : tensor<20x64xbf16> to tensor<20x64xf32>
  %wf = arith.extf %w : tensor<64x40xbf16> to tensor<64x40xf32>
  %y = xfmr.fused_linear %xf, %wf bias(%b) {activation = #xfmr.activation<gelu>}
       : (tensor<20x64xf32>, tensor<64x40xf32>, tensor<40xf32>) -> tensor<20x40xf32>
  %x2f = arith.extf %x2 : tensor<20x70xbf16> to tensor<20x70xf32>
  %w2f = arith.extf %w2 : tensor<40x70xbf16> to tensor<40x70xf32>
  %z = xfmr.fused_linear %x2f, %w2f {transpose_weight} : (tensor<20x70xf32>, tensor<40x70xf32>) -> tensor<20x40xf32>
  return %y, %z : tensor<20x40xf32>, tensor<20x40xf32>
}

// -----

// A product of few rows (decoding) with B^T [N, K], as decoding stores its
// weights, reads both as stored: blocks of 7 rows of B (3 x 7 sums carried
// through the loop over 192 of the depth of 200; the tail of 8 masked), 32
// values a step on vdpbf16ps, the lanes summed and the epilogue applied per
// output; 40 = 5 x 7 + 5, the last block its own sweep.
// BF16-LABEL: func @bf16_dot_rows
// BF16-NOT: arith.extf {{.*}} : tensor<
// BF16: scf.forall (%{{.*}}) in (6)
// BF16: scf.for %{{.*}} = %c0 to %c192 step %c32 iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// BF16-COUNT-7: vector.load %{{.*}} : memref<40x200xbf16, strided<[?, 1], offset: ?>>, vector<32xbf16>
// BF16: vector.load %{{.*}} : memref<3x200xbf16, strided<[?, 1], offset: ?>>, vector<32xbf16>
// BF16-COUNT-7: func.call @llvm.x86.avx512bf16.dpbf16ps.512
// BF16: scf.yield
// BF16: vector.maskedload %{{.*}}[%{{.*}}, %c192], %{{.*}} : memref<40x200xbf16, strided<[?, 1], offset: ?>>, vector<32xi1>, vector<32xbf16> into vector<32xbf16>
// BF16: vector.extract_strided_slice %{{.*}} {offsets = [8], sizes = [8], strides = [1]} : vector<16xf32> to vector<8xf32>
// BF16: math.tanh
func.func @bf16_dot_rows(%x: tensor<3x200xbf16>, %w: tensor<40x200xbf16>, %b: tensor<40xf32>) -> tensor<3x40xf32> {
  %xf = arith.extf %x : tensor<3x200xbf16> to tensor<3x200xf32>
  %wf = arith.extf %w : tensor<40x200xbf16> to tensor<40x200xf32>
  %y = xfmr.fused_linear %xf, %wf bias(%b) {transpose_weight, activation = #xfmr.activation<gelu_tanh>}
       : (tensor<3x200xf32>, tensor<40x200xf32>, tensor<40xf32>) -> tensor<3x40xf32>
  return %y : tensor<3x40xf32>
}

// -----

// 16 rows on vdpbf16ps: A's bf16 rows in chunks of 512 (16 KiB), three
// over a depth of 1100 (the last 76, ending in a masked vector of 32).
// BF16-LABEL: func @bf16_dot_rows_chunked
// BF16: %[[CHUNKS:.*]] = memref.alloc() {{.*}} : memref<3x16x512xbf16>
// BF16: vector.store %{{.*}}, %[[CHUNKS]]{{.*}} : memref<3x16x512xbf16>, vector<32xbf16>
// BF16: memref.alloc() {{.*}} : memref<{{.*}}x16xf32>
// BF16: scf.for %{{.*}} = %c0 to %c1024 step %c512
// BF16: scf.for %{{.*}} = %c0 to %c512 step %c32 iter_args
// BF16: vector.load %[[CHUNKS]]{{.*}} : memref<3x16x512xbf16>, vector<32xbf16>
// BF16: func.call @llvm.x86.avx512bf16.dpbf16ps.512
// BF16: scf.for %{{.*}} = %c0 to %c64 step %c32 iter_args
// BF16: vector.maskedload %[[CHUNKS]][%{{.*}}, %{{.*}}, %c64]
func.func @bf16_dot_rows_chunked(%x: tensor<16x1100xbf16>, %w: tensor<45x1100xbf16>) -> tensor<16x45xf32> {
  %xf = arith.extf %x : tensor<16x1100xbf16> to tensor<16x1100xf32>
  %wf = arith.extf %w : tensor<45x1100xbf16> to tensor<45x1100xf32>
  %y = xfmr.fused_linear %xf, %wf {transpose_weight} : (tensor<16x1100xf32>, tensor<45x1100xf32>) -> tensor<16x45xf32>
  return %y : tensor<16x45xf32>
}

// -----

// A product of few rows with B [K, N] and one with a transposed A take the
// f32 kernels, A widened first.
// BF16-LABEL: func @bf16_skinny_and_transposed
// BF16-NOT: dpbf16ps
// BF16: arith.extf %{{.*}} : tensor<3x64xbf16> to tensor<3x64xf32>
// BF16: arith.extf %{{.*}} : tensor<64x20xbf16> to tensor<64x20xf32>
// BF16-NOT: dpbf16ps
// BF16: return
func.func @bf16_skinny_and_transposed(%x: tensor<3x64xbf16>, %w: tensor<64x40xbf16>, %p: tensor<64x20xbf16>)
    -> (tensor<3x40xf32>, tensor<20x40xf32>) {
  %xf = arith.extf %x : tensor<3x64xbf16> to tensor<3x64xf32>
  %wf = arith.extf %w : tensor<64x40xbf16> to tensor<64x40xf32>
  %y = xfmr.fused_linear %xf, %wf : (tensor<3x64xf32>, tensor<64x40xf32>) -> tensor<3x40xf32>
  %pf = arith.extf %p : tensor<64x20xbf16> to tensor<64x20xf32>
  %t = xfmr.matmul %pf, %wf {transpose_lhs} : (tensor<64x20xf32>, tensor<64x40xf32>) -> tensor<20x40xf32>
  return %y, %t : tensor<3x40xf32>, tensor<20x40xf32>
}

// -----

// An odd depth is no whole number of pairs: the f32 GEMM, A widened, B
// widened in registers as it is packed.
// BF16-LABEL: func @bf16_gemm_odd_depth
// BF16: arith.extf %{{.*}} : tensor<20x63xbf16> to tensor<20x63xf32>
// BF16-NOT: dpbf16ps
// BF16: arith.extf %{{.*}} : vector<16xbf16> to vector<16xf32>
// BF16: vector.fma
// BF16-NOT: dpbf16ps
func.func @bf16_gemm_odd_depth(%x: tensor<20x63xbf16>, %w: tensor<63x40xbf16>) -> tensor<20x40xf32> {
  %xf = arith.extf %x : tensor<20x63xbf16> to tensor<20x63xf32>
  %wf = arith.extf %w : tensor<63x40xbf16> to tensor<63x40xf32>
  %y = xfmr.fused_linear %xf, %wf : (tensor<20x63xf32>, tensor<63x40xf32>) -> tensor<20x40xf32>
  return %y : tensor<20x40xf32>
}
