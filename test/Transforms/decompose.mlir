// RUN: xfmr-opt %s --xfmr-decompose --split-input-file | FileCheck %s

// CHECK-LABEL: func @linear
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x16xf32>, %[[W:.*]]: tensor<32x16xf32>, %[[B:.*]]: tensor<32xf32>)
// CHECK: %[[M:.*]] = xfmr.matmul %[[X]], %[[W]] {transpose_rhs} : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
// CHECK: %[[R:.*]] = xfmr.add %[[M]], %[[B]]
// CHECK: return %[[R]]
func.func @linear(%x: tensor<2x8x16xf32>, %w: tensor<32x16xf32>, %b: tensor<32xf32>) -> tensor<2x8x32xf32> {
  %y = xfmr.linear %x, %w, %b {transpose_weight} : (tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  return %y : tensor<2x8x32xf32>
}

// -----

// Self-attention with a fused QKV weight, causal and padding masks: the graph
// an importer of tutorial code would produce.
// CHECK-LABEL: func @self_attention
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x16xf32>, %[[W:.*]]: tensor<16x48xf32>, %[[WO:.*]]: tensor<16x16xf32>, %[[PAD:.*]]: tensor<2x8xi1>)
// CHECK-DAG: %[[NINF:.*]] = arith.constant dense<0xFF800000> : tensor<f32>
// CHECK-DAG: %[[SCALE:.*]] = arith.constant dense<0.353553385> : tensor<f32>
// CHECK: %[[QKV:.*]] = xfmr.matmul %[[X]], %[[W]] : (tensor<2x8x16xf32>, tensor<16x48xf32>) -> tensor<2x8x48xf32>
// CHECK: %[[Q:.*]] = tensor.extract_slice %[[QKV]][0, 0, 0] [2, 8, 16] [1, 1, 1]
// CHECK: %[[K:.*]] = tensor.extract_slice %[[QKV]][0, 0, 16] [2, 8, 16] [1, 1, 1]
// CHECK: %[[V:.*]] = tensor.extract_slice %[[QKV]][0, 0, 32] [2, 8, 16] [1, 1, 1]
// CHECK: %[[QR:.*]] = xfmr.reshape %[[Q]] : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
// CHECK: %[[QH:.*]] = xfmr.transpose %[[QR]] {permutation = array<i64: 0, 2, 1, 3>}
// CHECK: %[[KH:.*]] = xfmr.transpose
// CHECK: %[[VH:.*]] = xfmr.transpose
// CHECK: %[[S:.*]] = xfmr.matmul %[[QH]], %[[KH]] {transpose_rhs} : (tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) -> tensor<2x2x8x8xf32>
// CHECK: %[[SS:.*]] = xfmr.mul %[[S]], %[[SCALE]]
// CHECK: %[[CM:.*]] = xfmr.causal_mask : tensor<8x8xi1>
// CHECK: %[[S1:.*]] = xfmr.select %[[CM]], %[[SS]], %[[NINF]]
// CHECK: %[[PM:.*]] = xfmr.reshape %[[PAD]] : (tensor<2x8xi1>) -> tensor<2x1x1x8xi1>
// CHECK: %[[S2:.*]] = xfmr.select %[[PM]], %[[S1]], %[[NINF]]
// CHECK: %[[P:.*]] = xfmr.softmax %[[S2]] {axis = 3 : i64} : tensor<2x2x8x8xf32>
// CHECK: %[[O:.*]] = xfmr.matmul %[[P]], %[[VH]] : (tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) -> tensor<2x2x8x8xf32>
// CHECK: %[[OT:.*]] = xfmr.transpose %[[O]] {permutation = array<i64: 0, 2, 1, 3>}
// CHECK: %[[OM:.*]] = xfmr.reshape %[[OT]] : (tensor<2x8x2x8xf32>) -> tensor<2x8x16xf32>
// CHECK: %[[Y:.*]] = xfmr.matmul %[[OM]], %[[WO]]
// CHECK: return %[[Y]]
func.func @self_attention(%x: tensor<2x8x16xf32>, %w: tensor<16x48xf32>, %wo: tensor<16x16xf32>, %pad: tensor<2x8xi1>) -> tensor<2x8x16xf32> {
  %y = xfmr.multi_head_attention %x in_proj(%w) out_proj(%wo) padding_mask(%pad) {num_heads = 2 : i64, causal}
       : (tensor<2x8x16xf32>, tensor<16x48xf32>, tensor<16x16xf32>, tensor<2x8xi1>) -> tensor<2x8x16xf32>
  return %y : tensor<2x8x16xf32>
}

// -----

// Cross-attention with separate [out, in] weights and an additive bias.
// CHECK-LABEL: func @cross_attention
// CHECK-SAME: (%[[X:.*]]: tensor<1x4x8xf32>, %[[M:.*]]: tensor<1x6x12xf32>, %[[WQ:.*]]: tensor<8x8xf32>, %[[WK:.*]]: tensor<8x12xf32>, %[[WV:.*]]: tensor<8x12xf32>, %[[WO:.*]]: tensor<8x8xf32>, %[[BIAS:.*]]: tensor<4x6xf32>)
// CHECK: xfmr.matmul %[[X]], %[[WQ]] {transpose_rhs} : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
// CHECK: xfmr.matmul %[[M]], %[[WK]] {transpose_rhs} : (tensor<1x6x12xf32>, tensor<8x12xf32>) -> tensor<1x6x8xf32>
// CHECK: xfmr.matmul %[[M]], %[[WV]] {transpose_rhs}
// CHECK: %[[S:.*]] = xfmr.matmul %{{.*}}, %{{.*}} {transpose_rhs} : (tensor<1x4x4x2xf32>, tensor<1x4x6x2xf32>) -> tensor<1x4x4x6xf32>
// CHECK: %[[SS:.*]] = xfmr.mul %[[S]], %{{.*}}
// CHECK-NOT: xfmr.causal_mask
// CHECK-NOT: xfmr.select
// CHECK: xfmr.add %[[SS]], %[[BIAS]] : (tensor<1x4x4x6xf32>, tensor<4x6xf32>) -> tensor<1x4x4x6xf32>
func.func @cross_attention(%x: tensor<1x4x8xf32>, %m: tensor<1x6x12xf32>, %wq: tensor<8x8xf32>, %wk: tensor<8x12xf32>, %wv: tensor<8x12xf32>,
                           %wo: tensor<8x8xf32>, %bias: tensor<4x6xf32>) -> tensor<1x4x8xf32> {
  %y = xfmr.multi_head_attention %x kv(%m) in_proj(%wq, %wk, %wv) out_proj(%wo) attn_bias(%bias) {num_heads = 4 : i64, transpose_weights}
       : (tensor<1x4x8xf32>, tensor<1x6x12xf32>, tensor<8x8xf32>, tensor<8x12xf32>, tensor<8x12xf32>, tensor<8x8xf32>, tensor<4x6xf32>) -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}

// -----

// With return_probabilities the softmax over the keys is the second result
// (which keeps xfmr-fuse-attention from fusing it away).
// CHECK-LABEL: func @probabilities
// CHECK: %[[P:.*]] = xfmr.softmax %{{.*}} {axis = 3 : i64} : tensor<1x2x3x3xf32>
// CHECK: xfmr.matmul %[[P]], %{{.*}}
// CHECK: return %{{.*}}, %[[P]] : tensor<1x3x4xf32>, tensor<1x2x3x3xf32>
func.func @probabilities(%x: tensor<1x3x4xf32>, %w: tensor<4x12xf32>, %wo: tensor<4x4xf32>) -> (tensor<1x3x4xf32>, tensor<1x2x3x3xf32>) {
  %y, %p = xfmr.multi_head_attention %x in_proj(%w) out_proj(%wo) {num_heads = 2 : i64, return_probabilities}
       : (tensor<1x3x4xf32>, tensor<4x12xf32>, tensor<4x4xf32>) -> (tensor<1x3x4xf32>, tensor<1x2x3x3xf32>)
  return %y, %p : tensor<1x3x4xf32>, tensor<1x2x3x3xf32>
}

// -----

// Projections to a width other than d_model (T5's num_heads * d_kv): a fused
// QKV weight of 3 x 24 splits into three slices of 24, the heads into 3 of 8,
// and the output projection takes the merged 24 back to 16.
// CHECK-LABEL: func @projected_width
// CHECK: xfmr.matmul %{{.*}}, %{{.*}} : (tensor<2x8x16xf32>, tensor<16x72xf32>) -> tensor<2x8x72xf32>
// CHECK: tensor.extract_slice %{{.*}}[0, 0, 24] [2, 8, 24] [1, 1, 1] : tensor<2x8x72xf32> to tensor<2x8x24xf32>
// CHECK: xfmr.reshape %{{.*}} : (tensor<2x8x24xf32>) -> tensor<2x8x3x8xf32>
// CHECK: xfmr.softmax %{{.*}} {axis = 3 : i64} : tensor<2x3x8x8xf32>
// CHECK: xfmr.reshape %{{.*}} : (tensor<2x8x3x8xf32>) -> tensor<2x8x24xf32>
// CHECK: xfmr.matmul %{{.*}}, %{{.*}} : (tensor<2x8x24xf32>, tensor<24x16xf32>) -> tensor<2x8x16xf32>
func.func @projected_width(%x: tensor<2x8x16xf32>, %w: tensor<16x72xf32>, %wo: tensor<24x16xf32>) -> tensor<2x8x16xf32> {
  %y = xfmr.multi_head_attention %x in_proj(%w) out_proj(%wo) {num_heads = 3 : i64}
       : (tensor<2x8x16xf32>, tensor<16x72xf32>, tensor<24x16xf32>) -> tensor<2x8x16xf32>
  return %y : tensor<2x8x16xf32>
}

// -----

// Negative: ops that have their own lowering, and fused ops, stay as they are.
// CHECK-LABEL: func @untouched
// CHECK-NEXT: xfmr.softmax
// CHECK-NEXT: xfmr.layer_norm
// CHECK-NEXT: xfmr.gelu
// CHECK-NEXT: xfmr.fused_add_layer_norm
// CHECK-NEXT: xfmr.fused_linear
// CHECK-NEXT: return
func.func @untouched(%x0: tensor<2x8xf32>, %w: tensor<8x8xf32>) -> tensor<2x8xf32> {
  %sm = xfmr.softmax %x0 : tensor<2x8xf32>
  %x = xfmr.layer_norm %sm : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %a = xfmr.gelu %x : tensor<2x8xf32>
  %s, %n = xfmr.fused_add_layer_norm %a, %x : (tensor<2x8xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>)
  %y = xfmr.fused_linear %n, %w residual(%s) : (tensor<2x8xf32>, tensor<8x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}
