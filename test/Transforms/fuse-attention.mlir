// RUN: xfmr-opt %s --xfmr-fuse-attention --split-input-file | FileCheck %s

// The graph xfmr-decompose makes of multi_head_attention: heads split by
// reshape + transpose, scale, causal and padding selects, softmax, merge.
// CHECK-LABEL: func @frontend_form
// CHECK-SAME: (%[[Q:.*]]: tensor<2x8x2x4xf32>, %[[K:.*]]: tensor<2x8x2x4xf32>, %[[V:.*]]: tensor<2x8x2x4xf32>, %[[PAD:.*]]: tensor<2x8xi1>)
// CHECK: %[[O:.*]] = xfmr.fused_attention %[[Q]], %[[K]], %[[V]] padding_mask(%[[PAD]]) {causal, scale = 5.000000e-01 : f64}
// CHECK-SAME: -> tensor<2x8x2x4xf32>
// CHECK-NOT: xfmr.transpose
// CHECK-NOT: xfmr.matmul
// CHECK: return %[[O]]
func.func @frontend_form(%q0: tensor<2x8x2x4xf32>, %k0: tensor<2x8x2x4xf32>, %v0: tensor<2x8x2x4xf32>, %pad: tensor<2x8xi1>) -> tensor<2x8x2x4xf32> {
  %q = xfmr.transpose %q0 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x4xf32>) -> tensor<2x2x8x4xf32>
  %k = xfmr.transpose %k0 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x4xf32>) -> tensor<2x2x8x4xf32>
  %v = xfmr.transpose %v0 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x4xf32>) -> tensor<2x2x8x4xf32>
  %s = xfmr.matmul %q, %k {transpose_rhs} : (tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x8x8xf32>
  %scale = arith.constant dense<0.5> : tensor<f32>
  %ss = xfmr.mul %s, %scale : (tensor<2x2x8x8xf32>, tensor<f32>) -> tensor<2x2x8x8xf32>
  %ninf = arith.constant dense<0xFF800000> : tensor<f32>
  %cm = xfmr.causal_mask : tensor<8x8xi1>
  %s1 = xfmr.select %cm, %ss, %ninf : (tensor<8x8xi1>, tensor<2x2x8x8xf32>, tensor<f32>) -> tensor<2x2x8x8xf32>
  %pm = xfmr.reshape %pad : (tensor<2x8xi1>) -> tensor<2x1x1x8xi1>
  %s2 = xfmr.select %pm, %s1, %ninf : (tensor<2x1x1x8xi1>, tensor<2x2x8x8xf32>, tensor<f32>) -> tensor<2x2x8x8xf32>
  %p = xfmr.softmax %s2 {axis = 3} : tensor<2x2x8x8xf32>
  %o = xfmr.matmul %p, %v : (tensor<2x2x8x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x8x4xf32>
  %t = xfmr.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x2x8x4xf32>) -> tensor<2x8x2x4xf32>
  return %t : tensor<2x8x2x4xf32>
}

// -----

// Tutorial code: einsum('bhqd,bhkd->bhqk') (a transpose and a matmul),
// division by sqrt(d), masked_fill(mask == 0, -inf), softmax written out,
// einsum('bhqk,bhkd->bhqd'). The mask masks where true: it is inverted, and
// being neither causal nor padding-shaped it becomes an additive bias.
// CHECK-LABEL: func @tutorial_form
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x6x8xf32>, %[[K:.*]]: tensor<1x2x6x8xf32>, %[[V:.*]]: tensor<1x2x6x8xf32>, %[[M:.*]]: tensor<6x6xi32>)
// CHECK: %[[DROP:.*]] = arith.cmpi eq, %[[M]], %{{.*}} : tensor<6x6xi32>
// CHECK: %[[KEEP:.*]] = arith.xori %[[DROP]], %{{.*}} : tensor<6x6xi1>
// CHECK: %[[BIAS:.*]] = xfmr.select %[[KEEP]], %{{.*}}, %{{.*}} : (tensor<6x6xi1>, tensor<f32>, tensor<f32>) -> tensor<6x6xf32>
// CHECK: %[[O:.*]] = xfmr.fused_attention %[[Q]], %[[K]], %[[V]] attn_bias(%[[BIAS]]) {layout = #xfmr.layout<bhsd>, scale = 0.353553{{[0-9]+}} : f64}
// CHECK: return %[[O]]
func.func @tutorial_form(%q: tensor<1x2x6x8xf32>, %k: tensor<1x2x6x8xf32>, %v: tensor<1x2x6x8xf32>, %mask: tensor<6x6xi32>) -> tensor<1x2x6x8xf32> {
  %kt = xfmr.transpose %k {permutation = array<i64: 0, 1, 3, 2>} : (tensor<1x2x6x8xf32>) -> tensor<1x2x8x6xf32>
  %s = xfmr.matmul %q, %kt : (tensor<1x2x6x8xf32>, tensor<1x2x8x6xf32>) -> tensor<1x2x6x6xf32>
  %d = arith.constant dense<2.8284271247461903> : tensor<f32>
  %ss = xfmr.div %s, %d : (tensor<1x2x6x6xf32>, tensor<f32>) -> tensor<1x2x6x6xf32>
  %zero = arith.constant dense<0> : tensor<6x6xi32>
  %drop = arith.cmpi eq, %mask, %zero : tensor<6x6xi32>
  %ninf = arith.constant dense<0xFF800000> : tensor<f32>
  %masked = xfmr.select %drop, %ninf, %ss : (tensor<6x6xi1>, tensor<f32>, tensor<1x2x6x6xf32>) -> tensor<1x2x6x6xf32>
  %mx = xfmr.reduce %masked {kind = #xfmr.reduce_kind<max>, axis = -1} : (tensor<1x2x6x6xf32>) -> tensor<1x2x6x1xf32>
  %sh = xfmr.sub %masked, %mx : (tensor<1x2x6x6xf32>, tensor<1x2x6x1xf32>) -> tensor<1x2x6x6xf32>
  %e = math.exp %sh : tensor<1x2x6x6xf32>
  %z = xfmr.reduce %e {kind = #xfmr.reduce_kind<sum>, axis = -1} : (tensor<1x2x6x6xf32>) -> tensor<1x2x6x1xf32>
  %p = xfmr.div %e, %z : (tensor<1x2x6x6xf32>, tensor<1x2x6x1xf32>) -> tensor<1x2x6x6xf32>
  %o = xfmr.matmul %p, %v : (tensor<1x2x6x6xf32>, tensor<1x2x6x8xf32>) -> tensor<1x2x6x8xf32>
  return %o : tensor<1x2x6x8xf32>
}

// -----

// Cross-attention with the scale folded into q and an HF-style additive mask.
// CHECK-LABEL: func @cross_bias
// CHECK: xfmr.fused_attention %{{.*}}, %{{.*}}, %{{.*}} attn_bias(%{{.*}}) {layout = #xfmr.layout<bhsd>, scale = 2.500000e-01 : f64}
// CHECK-SAME: (tensor<1x2x3x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>, tensor<1x1x1x5xf32>) -> tensor<1x2x3x8xf32>
func.func @cross_bias(%q: tensor<1x2x3x8xf32>, %k: tensor<1x2x5x8xf32>, %v: tensor<1x2x5x8xf32>, %b: tensor<1x1x1x5xf32>) -> tensor<1x2x3x8xf32> {
  %c = arith.constant dense<0.25> : tensor<f32>
  %qs = xfmr.mul %q, %c : (tensor<1x2x3x8xf32>, tensor<f32>) -> tensor<1x2x3x8xf32>
  %s = xfmr.matmul %qs, %k {transpose_rhs} : (tensor<1x2x3x8xf32>, tensor<1x2x5x8xf32>) -> tensor<1x2x3x5xf32>
  %sb = xfmr.add %s, %b : (tensor<1x2x3x5xf32>, tensor<1x1x1x5xf32>) -> tensor<1x2x3x5xf32>
  %p = xfmr.softmax %sb : tensor<1x2x3x5xf32>
  %o = xfmr.matmul %p, %v : (tensor<1x2x3x5xf32>, tensor<1x2x5x8xf32>) -> tensor<1x2x3x8xf32>
  return %o : tensor<1x2x3x8xf32>
}

// -----

// Negative: the probabilities are returned too (attention weights wanted).
// CHECK-LABEL: func @probabilities_used
// CHECK-NOT: xfmr.fused_attention
func.func @probabilities_used(%q: tensor<1x1x4x8xf32>, %k: tensor<1x1x4x8xf32>, %v: tensor<1x1x4x8xf32>) -> (tensor<1x1x4x8xf32>, tensor<1x1x4x4xf32>) {
  %s = xfmr.matmul %q, %k {transpose_rhs} : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x4xf32>
  %p = xfmr.softmax %s : tensor<1x1x4x4xf32>
  %o = xfmr.matmul %p, %v : (tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  return %o, %p : tensor<1x1x4x8xf32>, tensor<1x1x4x4xf32>
}

// -----

// Negative: softmax over the queries, and a scale applied after the bias.
// CHECK-LABEL: func @not_attention
// CHECK-NOT: xfmr.fused_attention
func.func @not_attention(%q: tensor<1x1x4x8xf32>, %k: tensor<1x1x4x8xf32>, %v: tensor<1x1x4x8xf32>, %b: tensor<4x4xf32>) -> (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) {
  %s = xfmr.matmul %q, %k {transpose_rhs} : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x4xf32>
  %p = xfmr.softmax %s {axis = 2} : tensor<1x1x4x4xf32>
  %o = xfmr.matmul %p, %v : (tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  %s2 = xfmr.matmul %q, %k {transpose_rhs} : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x4xf32>
  %sb = xfmr.add %s2, %b : (tensor<1x1x4x4xf32>, tensor<4x4xf32>) -> tensor<1x1x4x4xf32>
  %c = arith.constant dense<0.5> : tensor<f32>
  %ss = xfmr.mul %sb, %c : (tensor<1x1x4x4xf32>, tensor<f32>) -> tensor<1x1x4x4xf32>
  %p2 = xfmr.softmax %ss : tensor<1x1x4x4xf32>
  %o2 = xfmr.matmul %p2, %v : (tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  return %o, %o2 : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>
}

// -----

// T5's relative-position bias becomes its band form, one value per diagonal,
// read by the kernel: the [seq_q, seq_k] bias is never computed. Over a cache
// the band is per sequence (query_offset) and the runtime limits stay.
// CHECK-LABEL: func @position_bias
// CHECK-SAME: (%[[Q:.*]]: tensor<2x6x4x8xf32>, %[[T:.*]]: tensor<32x4xf32>, %[[K:.*]]: tensor<2x10x4x8xf32>, %[[OFF:.*]]: tensor<2xi32>, %[[LEN:.*]]: tensor<2xi32>)
// CHECK: %[[BAND:.*]] = xfmr.relative_position_bias %[[T]] {bidirectional, max_distance = 128 : i64, seq_q = 6 : i64} : (tensor<32x4xf32>) -> tensor<1x4x11xf32>
// CHECK: xfmr.fused_attention %[[Q]], %[[Q]], %[[Q]] position_bias(%[[BAND]]) {scale = 1.000000e+00 : f64}
// CHECK: %[[CBAND:.*]] = xfmr.relative_position_bias %[[T]] query_offset(%[[OFF]]) {max_distance = 128 : i64, seq_q = 1 : i64} : (tensor<32x4xf32>, tensor<2xi32>) -> tensor<2x4x10xf32>
// CHECK: xfmr.fused_attention %{{.*}}, %[[K]], %[[K]] position_bias(%[[CBAND]]) query_offset(%[[OFF]]) key_length(%[[LEN]]) {causal, scale = 1.000000e+00 : f64}
// CHECK-NOT: tensor<1x4x6x6xf32>
// CHECK-NOT: tensor<2x4x1x10xf32>
func.func @position_bias(%q: tensor<2x6x4x8xf32>, %t: tensor<32x4xf32>, %k: tensor<2x10x4x8xf32>,
                         %off: tensor<2xi32>, %len: tensor<2xi32>) -> (tensor<2x6x4x8xf32>, tensor<2x1x4x8xf32>) {
  %b = xfmr.relative_position_bias %t {max_distance = 128 : i64, bidirectional}
         : (tensor<32x4xf32>) -> tensor<1x4x6x6xf32>
  %o = xfmr.fused_attention %q, %q, %q attn_bias(%b) {scale = 1.0 : f64}
         : (tensor<2x6x4x8xf32>, tensor<2x6x4x8xf32>, tensor<2x6x4x8xf32>, tensor<1x4x6x6xf32>) -> tensor<2x6x4x8xf32>
  %d = tensor.extract_slice %q[0, 0, 0, 0] [2, 1, 4, 8] [1, 1, 1, 1] : tensor<2x6x4x8xf32> to tensor<2x1x4x8xf32>
  %c = xfmr.relative_position_bias %t query_offset(%off) {max_distance = 128 : i64}
         : (tensor<32x4xf32>, tensor<2xi32>) -> tensor<2x4x1x10xf32>
  %e = xfmr.fused_attention %d, %k, %k attn_bias(%c) query_offset(%off) key_length(%len) {causal, scale = 1.0 : f64}
         : (tensor<2x1x4x8xf32>, tensor<2x10x4x8xf32>, tensor<2x10x4x8xf32>, tensor<2x4x1x10xf32>, tensor<2xi32>, tensor<2xi32>) -> tensor<2x1x4x8xf32>
  return %o, %e : tensor<2x6x4x8xf32>, tensor<2x1x4x8xf32>
}

// -----

// Negative: a bias broadcast over the queries is not a band, and any other
// bias stays as it is.
// CHECK-LABEL: func @position_bias_not_folded
// CHECK-NOT: seq_q
// CHECK: xfmr.fused_attention %{{.*}} attn_bias(%{{.*}}) {scale = 1.000000e+00 : f64} : {{.*}}tensor<1x4x1x6xf32>
// CHECK: xfmr.fused_attention %{{.*}} attn_bias(%{{.*}}) {scale = 1.000000e+00 : f64} : {{.*}}tensor<1x4x6x6xf32>
func.func @position_bias_not_folded(%q: tensor<2x6x4x8xf32>, %t: tensor<32x4xf32>, %a: tensor<1x4x6x6xf32>)
    -> (tensor<2x6x4x8xf32>, tensor<2x6x4x8xf32>) {
  %b = xfmr.relative_position_bias %t {max_distance = 128 : i64, bidirectional}
         : (tensor<32x4xf32>) -> tensor<1x4x1x6xf32>
  %o = xfmr.fused_attention %q, %q, %q attn_bias(%b) {scale = 1.0 : f64}
         : (tensor<2x6x4x8xf32>, tensor<2x6x4x8xf32>, tensor<2x6x4x8xf32>, tensor<1x4x1x6xf32>) -> tensor<2x6x4x8xf32>
  %p = xfmr.fused_attention %q, %q, %q attn_bias(%a) {scale = 1.0 : f64}
         : (tensor<2x6x4x8xf32>, tensor<2x6x4x8xf32>, tensor<2x6x4x8xf32>, tensor<1x4x6x6xf32>) -> tensor<2x6x4x8xf32>
  return %o, %p : tensor<2x6x4x8xf32>, tensor<2x6x4x8xf32>
}
