// RUN: xfmr-opt %s --convert-xfmr-to-linalg --canonicalize --split-input-file | FileCheck %s

// Broadcasting binary ops become one generic whose maps encode the broadcast.
// CHECK-DAG: #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[ROW:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func @add_broadcast
// CHECK: linalg.generic {indexing_maps = [#[[ID]], #[[ROW]], #[[ID]]], iterator_types = ["parallel", "parallel"]}
// CHECK: arith.addf
// CHECK-NOT: xfmr.
func.func @add_broadcast(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  %r = xfmr.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %r : tensor<2x3xf32>
}

// -----

// A splat constant operand (the zeros autodiff broadcasts a gradient
// against) is a scalar in the body, not a tensor input: no constant as large
// as the result is materialized. A non-splat constant stays an input.
// CHECK-DAG: #[[COL:.*]] = affine_map<(d0, d1) -> (d0, 0)>
// CHECK-DAG: #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func @add_splat
// CHECK-NOT: dense<0.000000e+00>
// CHECK: %[[TABLE:.*]] = arith.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: linalg.generic {indexing_maps = [#[[COL]], #[[ID]]], iterator_types = ["parallel", "parallel"]} ins(%arg0 : tensor<4x1xf32>)
// CHECK: arith.addf %{{.*}}, %[[ZERO]] : f32
// CHECK: linalg.generic {{.*}} ins(%arg1, %[[TABLE]] : tensor<3x2xf32>, tensor<2xf32>)
func.func @add_splat(%g: tensor<4x1xf32>, %h: tensor<3x2xf32>) -> (tensor<4x64xf32>, tensor<3x2xf32>) {
  %zeros = arith.constant dense<0.0> : tensor<4x64xf32>
  %r = xfmr.add %g, %zeros : (tensor<4x1xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %table = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %s = xfmr.mul %h, %table : (tensor<3x2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
  return %r, %s : tensor<4x64xf32>, tensor<3x2xf32>
}

// -----

// A shared 2-D weight: one GEMM over all rows (batch dims collapsed).
// CHECK-LABEL: func @matmul_2d_weight
// CHECK: %[[ROWS:.*]] = tensor.collapse_shape %{{.*}} {{\[}}[0, 1], [2]] : tensor<2x5x8xf32> into tensor<10x8xf32>
// CHECK: %[[P:.*]] = linalg.matmul indexing_maps = [{{.*}}] ins(%[[ROWS]], %{{.*}} : tensor<10x8xf32>, tensor<4x8xf32>)
// CHECK: tensor.expand_shape %[[P]] {{\[}}[0, 1], [2]] output_shape [2, 5, 4]
func.func @matmul_2d_weight(%x: tensor<2x5x8xf32>, %w: tensor<4x8xf32>) -> tensor<2x5x4xf32> {
  %r = xfmr.matmul %x, %w {transpose_rhs} : (tensor<2x5x8xf32>, tensor<4x8xf32>) -> tensor<2x5x4xf32>
  return %r : tensor<2x5x4xf32>
}

// -----

// Batched with broadcast batch dims: a contraction generic.
// CHECK-DAG: #[[LHS:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, 0, d2, d4)>
// CHECK-DAG: #[[RHS:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d1, d4, d3)>
// CHECK-LABEL: func @matmul_batched
// CHECK: linalg.generic {indexing_maps = [#[[LHS]], #[[RHS]], #{{.*}}], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
func.func @matmul_batched(%a: tensor<2x1x5x4xf32>, %b: tensor<3x4x6xf32>) -> tensor<2x3x5x6xf32> {
  %r = xfmr.matmul %a, %b : (tensor<2x1x5x4xf32>, tensor<3x4x6xf32>) -> tensor<2x3x5x6xf32>
  return %r : tensor<2x3x5x6xf32>
}

// -----

// CHECK-LABEL: func @shape_ops
// CHECK: linalg.transpose ins(%{{.*}} : tensor<2x8xf32>) outs(%{{.*}} : tensor<8x2xf32>) permutation = [1, 0]
// CHECK: tensor.expand_shape %{{.*}} {{\[}}[0, 1], [2]] output_shape [4, 2, 2] : tensor<8x2xf32> into tensor<4x2x2xf32>
func.func @shape_ops(%x: tensor<2x8xf32>) -> tensor<4x2x2xf32> {
  %t = xfmr.transpose %x {permutation = array<i64: 1, 0>} : (tensor<2x8xf32>) -> tensor<8x2xf32>
  %r = xfmr.reshape %t : (tensor<8x2xf32>) -> tensor<4x2x2xf32>
  return %r : tensor<4x2x2xf32>
}

// -----

// Keepdim reductions: reduce, then reinsert the axis.
// CHECK-LABEL: func @reduce_mean
// CHECK: %[[R:.*]] = linalg.reduce ins(%{{.*}} : tensor<2x8xf32>) outs(%{{.*}} : tensor<2xf32>) dimensions = [1]
// CHECK: arith.addf
// CHECK: %[[M:.*]] = linalg.generic
// CHECK: arith.divf %{{.*}}, %{{.*}} : f32
// CHECK: tensor.expand_shape %[[M]] {{\[}}[0, 1]] output_shape [2, 1]
func.func @reduce_mean(%x: tensor<2x8xf32>) -> tensor<2x1xf32> {
  %r = xfmr.reduce %x {kind = #xfmr.reduce_kind<mean>} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  return %r : tensor<2x1xf32>
}

// -----

// CHECK-LABEL: func @causal_mask
// CHECK: linalg.generic
// CHECK: %[[I:.*]] = linalg.index 0
// CHECK: %[[J:.*]] = linalg.index 1
// CHECK: %[[LIMIT:.*]] = arith.addi %[[I]], %c2
// CHECK: arith.cmpi sle, %[[J]], %[[LIMIT]]
func.func @causal_mask() -> tensor<4x6xi1> {
  %m = xfmr.causal_mask : tensor<4x6xi1>
  return %m : tensor<4x6xi1>
}

// -----

// CHECK-LABEL: func @embedding
// CHECK: linalg.generic
// CHECK: %[[ROW:.*]] = arith.index_cast %{{.*}} : i32 to index
// CHECK: %[[COL:.*]] = linalg.index 2
// CHECK: %[[V:.*]] = tensor.extract %{{.*}}[%[[ROW]], %[[COL]]] : tensor<10x8xf32>
// CHECK: arith.mulf %[[V]], %cst
func.func @embedding(%ids: tensor<2x3xi32>, %t: tensor<10x8xf32>) -> tensor<2x3x8xf32> {
  %e = xfmr.embedding %ids, %t {scale = 2.0 : f64} : (tensor<2x3xi32>, tensor<10x8xf32>) -> tensor<2x3x8xf32>
  return %e : tensor<2x3x8xf32>
}

// -----

// A narrowed table is read a value at a time as stored (int8 times its
// group's scale, or bf16 widened), never widened whole.
// CHECK-LABEL: func @embedding_int8
// CHECK-NOT: tensor<10x8xf32>
// CHECK: linalg.generic
// CHECK: %[[ROW:.*]] = arith.index_cast %{{.*}} : i32 to index
// CHECK: %[[COL:.*]] = linalg.index 2
// CHECK-DAG: %[[Q:.*]] = tensor.extract %{{.*}}[%[[ROW]], %[[COL]]] : tensor<10x8xi8>
// CHECK-DAG: %[[GROUP:.*]] = arith.divui %[[COL]], %c4
// CHECK: %[[S:.*]] = tensor.extract %{{.*}}[%[[ROW]], %[[GROUP]]] : tensor<10x2xf32>
// CHECK: %[[F:.*]] = arith.sitofp %[[Q]] : i8 to f32
// CHECK: arith.mulf %[[F]], %[[S]]
func.func @embedding_int8(%ids: tensor<2x3xi32>, %q: tensor<10x8xi8>, %s: tensor<10x2xf32>) -> tensor<2x3x8xf32> {
  %t = xfmr.dequantize %q, %s {axis = 1 : i64, group_size = 4 : i64} : (tensor<10x8xi8>, tensor<10x2xf32>) -> tensor<10x8xf32>
  %e = xfmr.embedding %ids, %t : (tensor<2x3xi32>, tensor<10x8xf32>) -> tensor<2x3x8xf32>
  return %e : tensor<2x3x8xf32>
}

// -----

// bf16 scales are widened before they multiply.
// CHECK-LABEL: func @embedding_int8_bf16_scales
// CHECK: %[[S:.*]] = tensor.extract %{{.*}} : tensor<10x1xbf16>
// CHECK: %[[W:.*]] = arith.extf %[[S]] : bf16 to f32
// CHECK: arith.mulf %{{.*}}, %[[W]]
func.func @embedding_int8_bf16_scales(%ids: tensor<2x3xi32>, %q: tensor<10x8xi8>, %s: tensor<10x1xbf16>) -> tensor<2x3x8xf32> {
  %t = xfmr.dequantize %q, %s {axis = 1 : i64, group_size = 8 : i64} : (tensor<10x8xi8>, tensor<10x1xbf16>) -> tensor<10x8xf32>
  %e = xfmr.embedding %ids, %t : (tensor<2x3xi32>, tensor<10x8xf32>) -> tensor<2x3x8xf32>
  return %e : tensor<2x3x8xf32>
}

// -----

// CHECK-LABEL: func @embedding_bf16
// CHECK-NOT: tensor<10x8xf32>
// CHECK: %[[V:.*]] = tensor.extract %{{.*}}[%{{.*}}, %{{.*}}] : tensor<10x8xbf16>
// CHECK: arith.extf %[[V]] : bf16 to f32
func.func @embedding_bf16(%ids: tensor<2x3xi32>, %b: tensor<10x8xbf16>) -> tensor<2x3x8xf32> {
  %t = arith.extf %b : tensor<10x8xbf16> to tensor<10x8xf32>
  %e = xfmr.embedding %ids, %t : (tensor<2x3xi32>, tensor<10x8xf32>) -> tensor<2x3x8xf32>
  return %e : tensor<2x3x8xf32>
}

// -----

// CHECK-LABEL: func @positions
// CHECK: math.exp
// CHECK: math.cos
// CHECK: math.sin
// CHECK: tensor.extract_slice %{{.*}}[0, 0] [3, 8] [1, 1] : tensor<16x8xf32> to tensor<3x8xf32>
func.func @positions(%x: tensor<2x3x8xf32>, %t: tensor<16x8xf32>) -> tensor<2x3x8xf32> {
  %s = xfmr.sinusoidal_position_encoding %x : tensor<2x3x8xf32>
  %l = xfmr.learned_position_encoding %s, %t : tensor<2x3x8xf32>, tensor<16x8xf32>
  return %l : tensor<2x3x8xf32>
}

// -----

// Activations; dropout is the identity. silu is x / (1 + exp(-x)).
// CHECK-LABEL: func @activations
// CHECK: math.erf
// CHECK: math.tanh
// CHECK: arith.maximumf
// CHECK: %[[NEG:.*]] = arith.negf %[[IN:.*]] : f32
// CHECK-NEXT: %[[EXP:.*]] = math.exp %[[NEG]]
// CHECK-NEXT: %[[DEN:.*]] = arith.addf %[[EXP]], %{{.*}}
// CHECK-NEXT: %[[SIG:.*]] = arith.divf %{{.*}}, %[[DEN]]
// CHECK-NEXT: arith.mulf %[[IN]], %[[SIG]]
// CHECK: math.tanh
// CHECK-NOT: xfmr.dropout
func.func @activations(%x: tensor<8xf32>) -> tensor<8xf32> {
  %a = xfmr.gelu %x : tensor<8xf32>
  %b = xfmr.gelu %a {approximate = #xfmr.gelu_approximation<tanh>} : tensor<8xf32>
  %c = xfmr.relu %b : tensor<8xf32>
  %s = xfmr.silu %c : tensor<8xf32>
  %t = xfmr.tanh %s : tensor<8xf32>
  %d = xfmr.dropout %t {rate = 0.1 : f64} : tensor<8xf32>
  return %d : tensor<8xf32>
}

// -----

// Marian's sinusoids: a cosine where the feature is in the second half, at
// the frequency of the feature a half before it. BART's positions start at
// row 2 of their table.
// CHECK-LABEL: func @positions_of_checkpoints
// CHECK: arith.cmpi uge, %{{.*}}, %c4
// CHECK: arith.subi %{{.*}}, %c4
// CHECK: math.cos
// CHECK: math.sin
// CHECK: tensor.extract_slice %{{.*}}[2, 0] [3, 8] [1, 1] : tensor<16x8xf32> to tensor<3x8xf32>
func.func @positions_of_checkpoints(%x: tensor<2x3x8xf32>, %t: tensor<16x8xf32>) -> tensor<2x3x8xf32> {
  %s = xfmr.sinusoidal_position_encoding %x {layout = #xfmr.sinusoid_layout<halves>} : tensor<2x3x8xf32>
  %l = xfmr.learned_position_encoding %s, %t {offset = 2 : i64} : tensor<2x3x8xf32>, tensor<16x8xf32>
  return %l : tensor<2x3x8xf32>
}

// -----

// Mean pooling: a masked sum over the tokens (a reduction loop in the
// middle), divided by the clamped count of kept tokens.
// CHECK-DAG: #[[TOKENS:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[MASK:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG: #[[OUT:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-LABEL: func @pool_mean
// CHECK: linalg.generic {indexing_maps = [#[[TOKENS]], #[[MASK]], #[[OUT]]], iterator_types = ["parallel", "reduction", "parallel"]}
// CHECK: arith.select
// CHECK: arith.addf
// CHECK: linalg.reduce
// CHECK: arith.maximumf %{{.*}}, %cst
// CHECK: arith.divf
func.func @pool_mean(%x: tensor<2x5x8xf32>, %m: tensor<2x5xi1>) -> tensor<2x8xf32> {
  %p = xfmr.pool %x, %m {mode = #xfmr.pool_mode<mean>} : (tensor<2x5x8xf32>, tensor<2x5xi1>) -> tensor<2x8xf32>
  return %p : tensor<2x8xf32>
}

// -----

// CLS pooling is the first token; max pooling fills masked tokens with -inf.
// CHECK-LABEL: func @pool_cls_max
// CHECK: tensor.extract_slice %{{.*}}[0, 0, 0] [2, 1, 8] [1, 1, 1]
// CHECK: arith.select %{{.*}}, %{{.*}}, %cst
// CHECK: arith.maximumf
// CHECK-NOT: arith.divf
func.func @pool_cls_max(%x: tensor<2x5x8xf32>, %m: tensor<2x5xi1>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %c = xfmr.pool %x, %m {mode = #xfmr.pool_mode<cls>} : (tensor<2x5x8xf32>, tensor<2x5xi1>) -> tensor<2x8xf32>
  %p = xfmr.pool %x, %m {mode = #xfmr.pool_mode<max>} : (tensor<2x5x8xf32>, tensor<2x5xi1>) -> tensor<2x8xf32>
  return %c, %p : tensor<2x8xf32>, tensor<2x8xf32>
}

// -----

// L2 normalization: a sum of squares per row, then x / max(sqrt(sum), eps).
// CHECK-LABEL: func @l2_normalize
// CHECK: arith.mulf
// CHECK: linalg.reduce
// CHECK: math.sqrt
// CHECK-NEXT: arith.maximumf
// CHECK-NEXT: arith.divf
func.func @l2_normalize(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %n = xfmr.l2_normalize %x : tensor<2x8xf32>
  return %n : tensor<2x8xf32>
}

// -----

// RMS normalization of bf16 rows: squares summed in f32, x * rsqrt(mean + eps)
// rounded to bf16, then scaled by gamma.
// CHECK-LABEL: func @rms_norm
// CHECK: arith.extf
// CHECK: arith.mulf {{.*}} : f32
// CHECK: linalg.reduce
// CHECK: arith.divf
// CHECK: math.rsqrt
// CHECK: arith.truncf {{.*}} f32 to bf16
// CHECK-NEXT: arith.mulf {{.*}} : bf16
func.func @rms_norm(%x: tensor<2x8xbf16>, %g: tensor<8xbf16>) -> tensor<2x8xbf16> {
  %n = xfmr.rms_norm %x, %g : (tensor<2x8xbf16>, tensor<8xbf16>) -> tensor<2x8xbf16>
  return %n : tensor<2x8xbf16>
}

// -----

// T5's position bias: key - query position (per sequence from query_offset),
// direction and distance, the compile-time bucket of the distance (exact
// below 2, logarithmic to max_distance 8, then the last), the table's entry.
// CHECK-LABEL: func @relative_position_bias
// CHECK: %[[BUCKETS:.*]] = arith.constant dense<[0, 1, 2, 2, 3, 3, 3, 3, 3]> : tensor<9xi32>
// CHECK: linalg.generic
// CHECK: tensor.extract %{{.*}}[%{{.*}}] : tensor<2xi32>
// CHECK: arith.subi
// CHECK: arith.cmpi sgt
// CHECK: arith.minsi
// CHECK: tensor.extract %[[BUCKETS]]
// CHECK: tensor.extract %{{.*}}[%{{.*}}, %{{.*}}] : tensor<8x2xf32>
func.func @relative_position_bias(%t: tensor<8x2xf32>, %p: tensor<2xi32>) -> tensor<2x2x1x5xf32> {
  %b = xfmr.relative_position_bias %t query_offset(%p) {max_distance = 8 : i64, bidirectional}
         : (tensor<8x2xf32>, tensor<2xi32>) -> tensor<2x2x1x5xf32>
  return %b : tensor<2x2x1x5xf32>
}

// -----

// int8 weights: each value converted and times its group's scale (the
// scale's row is the value's over the group size).
// CHECK-LABEL: func @dequantize
// CHECK: linalg.generic
// CHECK: %[[ROW:.*]] = linalg.index 0 : index
// CHECK: %[[GROUP:.*]] = arith.divui %[[ROW]], %c32
// CHECK: %[[SCALE:.*]] = tensor.extract %{{.*}}[%[[GROUP]], %{{.*}}] : tensor<2x96xf32>
// CHECK: %[[VALUE:.*]] = arith.sitofp %{{.*}} : i8 to f32
// CHECK: arith.mulf %[[VALUE]], %[[SCALE]]
func.func @dequantize(%q: tensor<64x96xi8>, %s: tensor<2x96xf32>) -> tensor<64x96xf32> {
  %w = xfmr.dequantize %q, %s {axis = 0 : i64, group_size = 32 : i64}
         : (tensor<64x96xi8>, tensor<2x96xf32>) -> tensor<64x96xf32>
  return %w : tensor<64x96xf32>
}

// -----

// The band form: entry t is the diagonal j - i = t - (seq_q - 1), whose
// key-minus-query position is that less the bottom-right offset seq_k -
// seq_q: t - 4, a distance 4 - t before the query (folded); the fused
// attention adds the band's entry on each score's diagonal (j - i + 2),
// never a [seq_q, seq_k] bias.
// CHECK-LABEL: func @position_bias
// CHECK: %[[BAND:.*]] = linalg.generic
// CHECK: %[[T:.*]] = linalg.index 2 : index
// CHECK: arith.subi %c4, %[[T]]
// CHECK: } -> tensor<1x2x7xf32>
// CHECK-NOT: tensor<1x2x3x5xf32>
// CHECK: scf.forall
// CHECK: %[[KMQ:.*]] = arith.subi %{{.*}}, %{{.*}} : index
// CHECK: %[[DIAGONAL:.*]] = arith.addi %[[KMQ]], %c2 : index
// CHECK: tensor.extract %[[BAND]][%c0, %{{.*}}, %[[DIAGONAL]]] : tensor<1x2x7xf32>
func.func @position_bias(%q: tensor<1x3x2x8xf32>, %k: tensor<1x5x2x8xf32>, %t: tensor<8x2xf32>) -> tensor<1x3x2x8xf32> {
  %b = xfmr.relative_position_bias %t {max_distance = 8 : i64, seq_q = 3 : i64}
         : (tensor<8x2xf32>) -> tensor<1x2x7xf32>
  %o = xfmr.fused_attention %q, %k, %k position_bias(%b) {scale = 0.25 : f64}
       : (tensor<1x3x2x8xf32>, tensor<1x5x2x8xf32>, tensor<1x5x2x8xf32>, tensor<1x2x7xf32>) -> tensor<1x3x2x8xf32>
  return %o : tensor<1x3x2x8xf32>
}

// -----

// The fused softmax: max, exp with the -inf row guard, sum, guarded divide.
// CHECK-LABEL: func @softmax
// CHECK: linalg.reduce
// CHECK: arith.maximumf
// CHECK: linalg.generic
// CHECK: arith.cmpf oeq, %{{.*}}, %[[NINF:.*]] : f32
// CHECK: math.exp
// CHECK: linalg.reduce
// CHECK: arith.addf
// CHECK: linalg.generic
// CHECK: arith.divf
// CHECK: arith.select
func.func @softmax(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %s = xfmr.softmax %x : tensor<2x8xf32>
  return %s : tensor<2x8xf32>
}

// -----

// Add + layer norm over rows: shifted mean, centred variance, one normalize.
// CHECK-LABEL: func @add_layer_norm
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<2x8xf32>, tensor<2x8xf32>)
// CHECK: arith.addf
// CHECK: tensor.extract_slice %[[SUM]][0, 0] [2, 1] [1, 1]
// CHECK: iterator_types = ["parallel", "reduction"]
// CHECK: arith.subf
// CHECK: iterator_types = ["parallel", "reduction"]
// CHECK: arith.mulf
// CHECK: math.rsqrt
// CHECK: return %[[SUM]],
func.func @add_layer_norm(%x: tensor<2x8xf32>, %r: tensor<2x8xf32>, %g: tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %sum, %n = xfmr.fused_add_layer_norm %x, %r, %g, %g : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>)
  return %sum, %n : tensor<2x8xf32>, tensor<2x8xf32>
}

// -----

// The epilogue is one generic over the GEMM's result: bias, GELU, residual.
// CHECK-LABEL: func @fused_linear
// CHECK: %[[P:.*]] = linalg.matmul
// CHECK: linalg.generic {{.*}} ins(%[[P]], %{{.*}}, %{{.*}} : tensor<6x16xf32>, tensor<16xf32>, tensor<6x16xf32>)
// CHECK: arith.addf
// CHECK: math.tanh
// CHECK: %[[HALF:.*]] = arith.mulf
// CHECK-NEXT: %[[ACT:.*]] = arith.mulf %[[HALF]]
// CHECK-NEXT: %[[OUT:.*]] = arith.addf %[[ACT]], %{{.*}} : f32
// CHECK-NEXT: linalg.yield %[[OUT]]
func.func @fused_linear(%x: tensor<2x3x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>, %r: tensor<2x3x16xf32>) -> tensor<2x3x16xf32> {
  %y = xfmr.fused_linear %x, %w bias(%b) residual(%r) {activation = #xfmr.activation<gelu_tanh>}
       : (tensor<2x3x8xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<2x3x16xf32>) -> tensor<2x3x16xf32>
  return %y : tensor<2x3x16xf32>
}

// -----

// The reference lowering of attention (for element types no kernel takes):
// a forall over (batch, heads, query blocks), each block's scores against
// every key ([64, 256]), -inf past the query's diagonal or where padded, an
// exact softmax (row max, exponentials, row sum) and one product with V; no
// [seq_q, seq_k] tensor exists.
// CHECK-LABEL: func @attention
// CHECK-NOT: tensor<256x256xf32>
// CHECK: scf.forall (%[[B:.*]], %[[H:.*]], %[[QB:.*]]) in (2, 4, 4)
// CHECK: %[[Q0:.*]] = arith.muli %[[QB]], %c64
// CHECK: tensor.extract_slice %{{.*}}[%[[B]], %[[Q0]], %[[H]], 0] [1, 64, 1, 32]
// CHECK: linalg.matmul {{.*}} -> tensor<64x256xf32>
// CHECK: linalg.generic
// CHECK: %[[I:.*]] = arith.addi %{{.*}}, %[[Q0]]
// CHECK: %[[J:.*]] = linalg.index 1
// The query's diagonal, clamped to the keys:
// CHECK: %[[DIAGONAL:.*]] = arith.addi %[[I]], %c1
// CHECK: %[[END:.*]] = arith.minsi %[[DIAGONAL]], %c256
// CHECK: %[[VISIBLE:.*]] = arith.maxsi %[[END]], %c0
// CHECK: %[[KEEP:.*]] = arith.cmpi slt, %[[J]], %[[VISIBLE]]
// CHECK: arith.andi %[[KEEP]]
// CHECK: iterator_types = ["parallel", "reduction"]
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: iterator_types = ["parallel", "reduction"]
// CHECK: arith.addf
// CHECK: linalg.matmul {{.*}} -> tensor<64x32xf32>
// CHECK: arith.divf
// CHECK: scf.forall.in_parallel
// CHECK-NEXT: tensor.parallel_insert_slice
// CHECK-NOT: tensor<256x256xf32>
func.func @attention(%q: tensor<2x256x4x32xf32>, %m: tensor<2x256xi1>) -> tensor<2x256x4x32xf32> {
  %o = xfmr.fused_attention %q, %q, %q padding_mask(%m) {causal, scale = 0.17677669 : f64}
       : (tensor<2x256x4x32xf32>, tensor<2x256x4x32xf32>, tensor<2x256x4x32xf32>, tensor<2x256xi1>) -> tensor<2x256x4x32xf32>
  return %o : tensor<2x256x4x32xf32>
}

// -----

// CHECK-LABEL: func @cross_entropy
// CHECK: arith.cmpi ne
// CHECK: tensor.extract
// CHECK: math.log
// CHECK: arith.maximumf
// CHECK: arith.divf
func.func @cross_entropy(%l: tensor<4x10xf32>, %t: tensor<4xi32>) -> tensor<f32> {
  %c = xfmr.cross_entropy %l, %t : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32>
  return %c : tensor<f32>
}

// -----

// High-level ops without a kernel of their own go through the decomposition.
// CHECK-LABEL: func @linear
// CHECK: linalg.matmul
// CHECK: arith.addf
// CHECK-NOT: xfmr.
func.func @linear(%x: tensor<4x8xf32>, %w: tensor<8x2xf32>, %b: tensor<2xf32>) -> tensor<4x2xf32> {
  %y = xfmr.linear %x, %w, %b : (tensor<4x8xf32>, tensor<8x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// -----

// Negative: IR without xfmr ops is left as it is.
// CHECK-LABEL: func @no_xfmr
// CHECK-NEXT: arith.addf
// CHECK-NEXT: return
func.func @no_xfmr(%a: f32) -> f32 {
  %r = arith.addf %a, %a : f32
  return %r : f32
}

// -----

// The backward from the recomputed probabilities: dK and dV per block of
// keys against every query ([256, 64] tiles), dQ per block of queries
// against every key ([64, 256]); no seq x seq tensor either.
// CHECK-LABEL: func @attention_backward
// CHECK-NOT: 256x256
// CHECK: scf.forall ({{.*}}) in (2, 4) shared_outs(%{{.*}} = %[[EMPTY:.*]], %{{.*}} = %[[EMPTY]])
// CHECK: linalg.matmul {{.*}} -> tensor<256x64xf32>
// CHECK: math.exp
// CHECK: linalg.matmul {{.*}} -> tensor<64x16xf32>
// CHECK: linalg.matmul {{.*}} -> tensor<64x16xf32>
// CHECK: scf.forall ({{.*}}) in (2, 4) shared_outs
// CHECK: linalg.matmul {{.*}} -> tensor<64x256xf32>
// CHECK: math.exp
// CHECK: linalg.matmul {{.*}} -> tensor<64x16xf32>
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

// The schedule: warm-up ramp and cosine, computed in f64 from the step.
// CHECK-LABEL: func @learning_rate
// CHECK: tensor.extract
// CHECK: arith.sitofp %{{.*}} : i64 to f64
// CHECK: math.cos
// CHECK: arith.select
// CHECK: arith.truncf %{{.*}} : f64 to f32
func.func @learning_rate(%step: tensor<i64>) -> tensor<f32> {
  %lr = xfmr.learning_rate %step {peak = 1.0e-3 : f64, warmup_steps = 100 : i64, decay_steps = 1000 : i64} : tensor<i64> -> tensor<f32>
  return %lr : tensor<f32>
}

// -----

// The global norm: one reduction of squares per tensor, accumulated in f64.
// CHECK-LABEL: func @global_norm
// CHECK-COUNT-2: linalg.generic {{.*}}iterator_types = ["reduction"{{.*}}
// CHECK: math.sqrt %{{.*}} : f64
func.func @global_norm(%a: tensor<8x4xf32>, %b: tensor<4xf32>) -> tensor<f32> {
  %n = xfmr.global_norm %a, %b : (tensor<8x4xf32>, tensor<4xf32>) -> tensor<f32>
  return %n : tensor<f32>
}

// -----

// AdamW: one elementwise pass reading the gradient and overwriting the
// parameter and both moments (its outputs, so that bufferization updates
// their buffers in place).
// CHECK-LABEL: func @adamw
// CHECK: linalg.generic {{.*}} ins(%arg1 : tensor<4x8xf32>) outs(%arg0, %arg2, %arg3 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK: math.sqrt
// CHECK: linalg.yield
// CHECK-NOT: linalg.generic
func.func @adamw(%p: tensor<4x8xf32>, %g: tensor<4x8xf32>, %m: tensor<4x8xf32>, %v: tensor<4x8xf32>,
                 %lr: tensor<f32>, %step: tensor<i64>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %0:3 = xfmr.adamw_update %p, %g, %m, %v lr(%lr : tensor<f32>) step(%step : tensor<i64>) : tensor<4x8xf32>
  return %0#0, %0#1, %0#2 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// The loss scale: initial * 2^exponent.
// CHECK-LABEL: func @loss_scale
// CHECK: %[[E:.*]] = tensor.extract
// CHECK: %[[P:.*]] = math.exp2 %[[E]] : f32
// CHECK: arith.mulf %[[P]], %{{.*}} : f32
func.func @loss_scale(%e: tensor<f32>) -> tensor<f32> {
  %s = xfmr.loss_scale %e {initial = 1024.0 : f64} : tensor<f32> -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Its next state: a finite norm counts a good step (and at the growth
// interval doubles the scale); an overflow halves it.
// CHECK-LABEL: func @loss_scale_update
// CHECK-DAG: %[[INF:.*]] = arith.constant 0x7F800000 : f32
// CHECK-DAG: %[[INTERVAL:.*]] = arith.constant 1.000000e+02 : f32
// CHECK: %[[GOOD:.*]] = arith.addf
// CHECK: %[[FINITE:.*]] = arith.cmpf olt, %{{.*}}, %[[INF]] : f32
// CHECK: %[[GROWS:.*]] = arith.cmpf oge, %[[GOOD]], %[[INTERVAL]] : f32
// CHECK: arith.select %[[GROWS]]
// CHECK: arith.select %[[FINITE]]
func.func @loss_scale_update(%e: tensor<f32>, %good: tensor<f32>, %n: tensor<f32>) -> (tensor<f32>, tensor<f32>) {
  %0:2 = xfmr.loss_scale_update %e, %good, %n {growth_interval = 100 : i64} : (tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  return %0#0, %0#1 : tensor<f32>, tensor<f32>
}

// -----

// With a loss scale, the gradient is multiplied by 1 / scale (no clipping at
// max_grad_norm = 0), and every result keeps its old value unless the norm
// of the scaled gradients is finite.
// CHECK-LABEL: func @sgd_loss_scaled
// CHECK-DAG: %[[INF:.*]] = arith.constant 0x7F800000 : f32
// CHECK: %[[S:.*]] = tensor.extract %arg5[] : tensor<f32>
// CHECK: %[[UNSCALE:.*]] = arith.divf %{{.*}}, %[[S]] : f32
// CHECK: %[[FINITE:.*]] = arith.cmpf olt, %{{.*}}, %[[INF]] : f32
// CHECK-NOT: arith.minimumf
// CHECK: linalg.generic
// CHECK: ^bb0(%[[G:[a-z0-9_]+]]: f32, %[[P:[a-z0-9_]+]]: f32, %[[B:[a-z0-9_]+]]: f32):
// CHECK: arith.mulf %[[G]], %[[UNSCALE]] : f32
// CHECK: %[[NEWP:.*]] = arith.select %[[FINITE]], %{{.*}}, %[[P]] : f32
// CHECK: %[[NEWB:.*]] = arith.select %[[FINITE]], %{{.*}}, %[[B]] : f32
// CHECK: linalg.yield %[[NEWP]], %[[NEWB]]
func.func @sgd_loss_scaled(%p: tensor<4x8xf32>, %g: tensor<4x8xf32>, %b: tensor<4x8xf32>, %lr: tensor<f32>,
                           %n: tensor<f32>, %s: tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %0:2 = xfmr.sgd_update %p, %g, %b lr(%lr : tensor<f32>) grad_norm(%n : tensor<f32>) loss_scale(%s : tensor<f32>) {max_grad_norm = 0.0 : f64} : tensor<4x8xf32>
  return %0#0, %0#1 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// The reference lowering over a KV cache: a key is visible before the
// runtime key length and, causal, up to the diagonal at query_offset.
// CHECK-LABEL: func @cache_attention
// CHECK-SAME: %[[OFFSETS:[^:]*]]: tensor<2xi32>, %[[LENGTHS:[^:]*]]: tensor<2xi32>
// CHECK: scf.forall (%[[B:.*]], %{{.*}}) in (2, 2)
// CHECK: linalg.generic
// CHECK: %[[J:.*]] = linalg.index 1
// CHECK: tensor.extract %[[LENGTHS]][%[[B]]]
// CHECK: tensor.extract %[[OFFSETS]][%[[B]]]
// CHECK: %[[DIAGONAL:.*]] = arith.addi %{{.*}}, %c1
// CHECK: %[[END:.*]] = arith.minsi %{{.*}}, %[[DIAGONAL]]
// CHECK: %[[VISIBLE:.*]] = arith.maxsi %[[END]]
// CHECK: %[[KEEP:.*]] = arith.cmpi slt, %[[J]], %[[VISIBLE]]
// CHECK: arith.select %[[KEEP]]
func.func @cache_attention(%q: tensor<2x1x2x16xf32>, %k: tensor<2x256x2x16xf32>,
                           %v: tensor<2x256x2x16xf32>, %off: tensor<2xi32>,
                           %len: tensor<2xi32>) -> tensor<2x1x2x16xf32> {
  %o = xfmr.fused_attention %q, %k, %v query_offset(%off) key_length(%len) {causal, scale = 0.25 : f64}
       : (tensor<2x1x2x16xf32>, tensor<2x256x2x16xf32>, tensor<2x256x2x16xf32>, tensor<2xi32>, tensor<2xi32>) -> tensor<2x1x2x16xf32>
  return %o : tensor<2x1x2x16xf32>
}

// -----

// Rotary embedding: one generic over [batch, seq, 2] computes the cosines and
// sines of the f32 angles position * inv_freq (positions from the run-time
// start of each sequence), shared by the heads; the two rotated halves
// (features 0-1 and 2-3 of 6) are sliced out, one generic with two results
// rotates them, and they are inserted back; features 4-5 pass through.
// CHECK-DAG: #[[ID4:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[TOKEN:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-LABEL: func @rotary
// CHECK: %[[FREQ:.*]] = arith.constant dense<[1.000000e+00, 1.000000e-01]> : tensor<2xf32>
// CHECK: %[[TABLE:.*]]:2 = linalg.generic {{.*}} outs({{.*}} : tensor<2x3x2xf32>, tensor<2x3x2xf32>)
// CHECK: tensor.extract %{{.*}}[%{{.*}}] : tensor<2xi32>
// CHECK: tensor.extract %[[FREQ]]
// CHECK: math.cos
// CHECK: math.sin
// CHECK: %[[X1:.*]] = tensor.extract_slice %[[X:.*]][0, 0, 0, 0] [2, 3, 4, 2] [1, 1, 1, 1]
// CHECK: %[[X2:.*]] = tensor.extract_slice %[[X]][0, 0, 0, 2] [2, 3, 4, 2] [1, 1, 1, 1]
// CHECK: %[[ROT:.*]]:2 = linalg.generic {indexing_maps = [#[[ID4]], #[[ID4]], #[[TOKEN]], #[[TOKEN]], #[[ID4]], #[[ID4]]]
// CHECK-SAME: ins(%[[X1]], %[[X2]], %[[TABLE]]#0, %[[TABLE]]#1 : {{.*}}) outs(
// CHECK-NOT: math.cos
// CHECK: arith.subf
// CHECK: arith.addf
// CHECK: %[[FIRST:.*]] = tensor.insert_slice %[[ROT]]#0 into %[[X]][0, 0, 0, 0] [2, 3, 4, 2]
// CHECK: tensor.insert_slice %[[ROT]]#1 into %[[FIRST]][0, 0, 0, 2] [2, 3, 4, 2]
// CHECK-NOT: xfmr.rotary_embedding
func.func @rotary(%x: tensor<2x3x4x6xf32>, %p: tensor<2xi32>) -> tensor<2x3x4x6xf32> {
  %r = xfmr.rotary_embedding %x positions(%p : tensor<2xi32>) {inv_freq = array<f64: 1.0, 0.1>} : tensor<2x3x4x6xf32>
  return %r : tensor<2x3x4x6xf32>
}

// -----

// Grouped-query attention in the reference lowering: query head h's tiles of
// keys and values are those of key/value head h / 3.
// CHECK-LABEL: func @grouped_query_attention
// CHECK: scf.forall (%[[HEAD:.*]]) in (6)
// CHECK: %[[KVHEAD:.*]] = arith.divui %[[HEAD]], %c3
// CHECK: tensor.extract_slice %{{.*}}[0, 0, %[[KVHEAD]], 0] [1, 8, 1, 16] [1, 1, 1, 1] : tensor<1x8x2x16xf32>
func.func @grouped_query_attention(%q: tensor<1x8x6x16xf32>, %kv: tensor<1x8x2x16xf32>) -> tensor<1x8x6x16xf32> {
  %o = xfmr.fused_attention %q, %kv, %kv {causal, scale = 0.25 : f64}
       : (tensor<1x8x6x16xf32>, tensor<1x8x2x16xf32>, tensor<1x8x2x16xf32>) -> tensor<1x8x6x16xf32>
  return %o : tensor<1x8x6x16xf32>
}
