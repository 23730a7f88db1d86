// RUN: xfmr-opt %s --xfmr-compute-in-f32 --split-input-file | FileCheck %s

// Each bf16 op runs on f32 tensors: operands extended, results rounded back
// to bf16, so a following op extends the rounded value again (the value is
// stored in bf16 between ops, as in PyTorch).
// CHECK-LABEL: func.func @linear_softmax
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xbf16>, %[[W:.*]]: tensor<8x16xbf16>, %[[B:.*]]: tensor<16xbf16>)
// CHECK: %[[XF:.*]] = arith.extf %[[X]] : tensor<4x8xbf16> to tensor<4x8xf32>
// CHECK: %[[WF:.*]] = arith.extf %[[W]] : tensor<8x16xbf16> to tensor<8x16xf32>
// CHECK: %[[BF:.*]] = arith.extf %[[B]] : tensor<16xbf16> to tensor<16xf32>
// CHECK: %[[Y:.*]] = xfmr.fused_linear %[[XF]], %[[WF]] bias(%[[BF]]) {{.*}} -> tensor<4x16xf32>
// CHECK: %[[YB:.*]] = arith.truncf %[[Y]] : tensor<4x16xf32> to tensor<4x16xbf16>
// CHECK: %[[YF:.*]] = arith.extf %[[YB]] : tensor<4x16xbf16> to tensor<4x16xf32>
// CHECK: %[[S:.*]] = xfmr.softmax %[[YF]] : tensor<4x16xf32>
// CHECK: %[[SB:.*]] = arith.truncf %[[S]] : tensor<4x16xf32> to tensor<4x16xbf16>
// CHECK: return %[[SB]]
func.func @linear_softmax(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>, %b: tensor<16xbf16>) -> tensor<4x16xbf16> {
  %y = xfmr.fused_linear %x, %w bias(%b) {activation = #xfmr.activation<gelu>}
       : (tensor<4x8xbf16>, tensor<8x16xbf16>, tensor<16xbf16>) -> tensor<4x16xbf16>
  %s = xfmr.softmax %y : tensor<4x16xbf16>
  return %s : tensor<4x16xbf16>
}

// -----

// f16 too; an operand used twice is extended once; integer operands (token
// ids) keep their type. A scaled embedding multiplies in f32.
// CHECK-LABEL: func.func @f16
// CHECK: %[[TABLE:.*]] = arith.extf %{{.*}} : tensor<10x8xf16> to tensor<10x8xf32>
// CHECK: xfmr.embedding %{{.*}}, %[[TABLE]] {scale = 2.000000e+00 : f64} : (tensor<2x3xi32>, tensor<10x8xf32>) -> tensor<2x3x8xf32>
// CHECK: %[[H:.*]] = arith.extf %{{.*}} : tensor<4x8xf16> to tensor<4x8xf32>
// CHECK-NOT: arith.extf
// CHECK: xfmr.add %[[H]], %[[H]] : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
func.func @f16(%ids: tensor<2x3xi32>, %table: tensor<10x8xf16>, %h: tensor<4x8xf16>)
    -> (tensor<2x3x8xf16>, tensor<4x8xf16>) {
  %e = xfmr.embedding %ids, %table {scale = 2.0 : f64} : (tensor<2x3xi32>, tensor<10x8xf16>) -> tensor<2x3x8xf16>
  %d = xfmr.add %h, %h : (tensor<4x8xf16>, tensor<4x8xf16>) -> tensor<4x8xf16>
  return %e, %d : tensor<2x3x8xf16>, tensor<4x8xf16>
}

// -----

// Ops that only move values stay narrow: an unscaled embedding reads the
// table a row at a time, a KV cache is updated in place.
// CHECK-LABEL: func.func @moves
// CHECK-NOT: arith.extf
// CHECK: xfmr.embedding %{{.*}}, %{{.*}} : (tensor<1x1xi32>, tensor<10x8xbf16>) -> tensor<1x1x8xbf16>
// CHECK: xfmr.cache_update %{{.*}}, %{{.*}}, %{{.*}} : (tensor<1x16x2x4xbf16>, tensor<1x1x2x4xbf16>, tensor<1xi32>) -> tensor<1x16x2x4xbf16>
// CHECK-NOT: arith.extf
// CHECK: return
func.func @moves(%ids: tensor<1x1xi32>, %table: tensor<10x8xbf16>, %cache: tensor<1x16x2x4xbf16>,
                 %k: tensor<1x1x2x4xbf16>, %p: tensor<1xi32>)
    -> (tensor<1x1x8xbf16>, tensor<1x16x2x4xbf16>) {
  %e = xfmr.embedding %ids, %table : (tensor<1x1xi32>, tensor<10x8xbf16>) -> tensor<1x1x8xbf16>
  %c = xfmr.cache_update %cache, %k, %p
       : (tensor<1x16x2x4xbf16>, tensor<1x1x2x4xbf16>, tensor<1xi32>) -> tensor<1x16x2x4xbf16>
  return %e, %c : tensor<1x1x8xbf16>, tensor<1x16x2x4xbf16>
}

// -----

// A bf16 attention's log-sum-exp is f32 already: the backward reads it as
// the forward wrote it, neither rounded nor extended.
// CHECK-LABEL: func.func @attention_lse
// CHECK: %[[Q:.*]] = arith.extf %{{.*}} : tensor<1x8x2x16xbf16> to tensor<1x8x2x16xf32>
// CHECK: %[[O:.*]], %[[LSE:.*]] = xfmr.fused_attention %[[Q]], %[[Q]], %[[Q]] {{.*}} -> (tensor<1x8x2x16xf32>, tensor<1x2x8xf32>)
// CHECK: %[[OB:.*]] = arith.truncf %[[O]] : tensor<1x8x2x16xf32> to tensor<1x8x2x16xbf16>
// CHECK-NOT: %[[LSE]] : tensor<1x2x8xf32> to
// CHECK: xfmr.fused_attention_backward %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[LSE]], %{{.*}}
func.func @attention_lse(%q: tensor<1x8x2x16xbf16>) -> (tensor<1x8x2x16xbf16>, tensor<1x8x2x16xbf16>) {
  %o, %lse = xfmr.fused_attention %q, %q, %q {causal, scale = 0.25 : f64}
             : (tensor<1x8x2x16xbf16>, tensor<1x8x2x16xbf16>, tensor<1x8x2x16xbf16>)
             -> (tensor<1x8x2x16xbf16>, tensor<1x2x8xf32>)
  %dq, %dk, %dv = xfmr.fused_attention_backward %q, %q, %q, %o, %lse, %q {causal, scale = 0.25 : f64}
      : (tensor<1x8x2x16xbf16>, tensor<1x8x2x16xbf16>, tensor<1x8x2x16xbf16>, tensor<1x8x2x16xbf16>,
         tensor<1x2x8xf32>, tensor<1x8x2x16xbf16>)
      -> (tensor<1x8x2x16xbf16>, tensor<1x8x2x16xbf16>, tensor<1x8x2x16xbf16>)
  return %dq, %dk : tensor<1x8x2x16xbf16>, tensor<1x8x2x16xbf16>
}

// -----

// An f32 dequantize reads its f16 or bf16 scales (and mins) as stored;
// one of bf16 results is computed in f32 as any other op.
// CHECK-LABEL: func.func @dequantize
// CHECK-NOT: arith.extf
// CHECK: xfmr.dequantize %{{.*}}, %{{.*}}, %{{.*}} {axis = 1 : i64, bits = 4 : i64, group_size = 32 : i64} : (tensor<8x16xi8>, tensor<8x1xf16>, tensor<8x1xf16>) -> tensor<8x32xf32>
// CHECK: %[[S:.*]] = arith.extf %{{.*}} : tensor<8x1xbf16> to tensor<8x1xf32>
// CHECK: %[[W:.*]] = xfmr.dequantize %{{.*}}, %[[S]] {axis = 1 : i64, bits = 4 : i64, group_size = 32 : i64} : (tensor<8x16xi8>, tensor<8x1xf32>) -> tensor<8x32xf32>
// CHECK: arith.truncf %[[W]] : tensor<8x32xf32> to tensor<8x32xbf16>
func.func @dequantize(%q: tensor<8x16xi8>, %s: tensor<8x1xf16>, %m: tensor<8x1xf16>,
                      %t: tensor<8x1xbf16>) -> (tensor<8x32xf32>, tensor<8x32xbf16>) {
  %w = xfmr.dequantize %q, %s, %m {axis = 1 : i64, group_size = 32 : i64, bits = 4 : i64}
       : (tensor<8x16xi8>, tensor<8x1xf16>, tensor<8x1xf16>) -> tensor<8x32xf32>
  %v = xfmr.dequantize %q, %t {axis = 1 : i64, group_size = 32 : i64, bits = 4 : i64}
       : (tensor<8x16xi8>, tensor<8x1xbf16>) -> tensor<8x32xbf16>
  return %w, %v : tensor<8x32xf32>, tensor<8x32xbf16>
}

// -----

// Negative: ops that only move data keep their low-precision types, and f32
// and f64 ops are left alone.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: arith.extf
// CHECK-NOT: arith.truncf
// CHECK: xfmr.transpose %{{.*}} : (tensor<4x8xf16>) -> tensor<8x4xf16>
// CHECK: xfmr.reshape %{{.*}} : (tensor<4x8xf16>) -> tensor<32xf16>
// CHECK: xfmr.gelu %{{.*}} : tensor<4x8xf32>
// CHECK: xfmr.softmax %{{.*}} : tensor<4x8xf64>
func.func @left_alone(%x: tensor<4x8xf16>, %f: tensor<4x8xf32>, %d: tensor<4x8xf64>)
    -> (tensor<8x4xf16>, tensor<32xf16>, tensor<4x8xf32>, tensor<4x8xf64>) {
  %t = xfmr.transpose %x {permutation = array<i64: 1, 0>} : (tensor<4x8xf16>) -> tensor<8x4xf16>
  %r = xfmr.reshape %x : (tensor<4x8xf16>) -> tensor<32xf16>
  %g = xfmr.gelu %f : tensor<4x8xf32>
  %s = xfmr.softmax %d : tensor<4x8xf64>
  return %t, %r, %g, %s : tensor<8x4xf16>, tensor<32xf16>, tensor<4x8xf32>, tensor<4x8xf64>
}
