// Gradients of the embedding (scatter-add into the table), sinusoidal and
// learned position encodings, linear in both weight layouts, fused_linear
// with activation and residual, gated_linear (SwiGLU with both biases, a
// GeGLU of [in, out] weights with up's bias alone), and
// cross-entropy with ignored targets,
// against central finite differences of the compiled loss, in float64.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t
// RUN: xfmrc %s -o %t/loss
// RUN: xfmrc %s --grad --grad-inputs='*' -o %t/grad
// RUN: %python %testlib/gradcheck.py transformer --loss %t/loss --grad %t/grad --workdir %t | FileCheck %s
// CHECK-DAG: PASS: table:
// CHECK-DAG: PASS: pos:
// CHECK-DAG: PASS: x:
// CHECK-DAG: PASS: w:
// CHECK-DAG: PASS: wt:
// CHECK-DAG: PASS: bias:
// CHECK-DAG: PASS: res:
// CHECK-DAG: PASS: logits:
// CHECK-DAG: PASS: wg:
// CHECK-DAG: PASS: bg:
// CHECK-DAG: PASS: wg2:
// CHECK-NOT: FAIL

func.func @loss(%ids: tensor<2x6xi32> {xfmr.input = "ids"}, %table: tensor<11x8xf64> {xfmr.input = "table"},
                %pos: tensor<9x8xf64> {xfmr.input = "pos"}, %x: tensor<2x6x8xf64> {xfmr.input = "x"},
                %w: tensor<8x12xf64> {xfmr.input = "w"}, %wt: tensor<12x8xf64> {xfmr.input = "wt"},
                %bias: tensor<12xf64> {xfmr.input = "bias"}, %res: tensor<2x6x12xf64> {xfmr.input = "res"},
                %targets: tensor<2x6xi32> {xfmr.input = "targets"}, %logits: tensor<2x6x11xf64> {xfmr.input = "logits"},
                %r1: tensor<2x6x8xf64> {xfmr.input = "r1"}, %r2: tensor<2x6x8xf64> {xfmr.input = "r2"},
                %r3: tensor<2x6x12xf64> {xfmr.input = "r3"}, %r4: tensor<2x6x12xf64> {xfmr.input = "r4"},
                %r5: tensor<2x6x12xf64> {xfmr.input = "r5"}, %r6: tensor<2x6x12xf64> {xfmr.input = "r6"},
                %wg: tensor<12x8xf64> {xfmr.input = "wg"}, %bg: tensor<12xf64> {xfmr.input = "bg"},
                %r7: tensor<2x6x12xf64> {xfmr.input = "r7"}, %wg2: tensor<8x12xf64> {xfmr.input = "wg2"},
                %r8: tensor<2x6x12xf64> {xfmr.input = "r8"})
    -> (tensor<f64> {xfmr.output = "loss"}) {
  %e = xfmr.embedding %ids, %table {scale = 2.0 : f64} : (tensor<2x6xi32>, tensor<11x8xf64>) -> tensor<2x6x8xf64>
  %sin = xfmr.sinusoidal_position_encoding %e : tensor<2x6x8xf64>
  %p1 = xfmr.mul %sin, %r1 : (tensor<2x6x8xf64>, tensor<2x6x8xf64>) -> tensor<2x6x8xf64>
  %f1 = xfmr.reshape %p1 : (tensor<2x6x8xf64>) -> tensor<96xf64>
  %s1 = xfmr.reduce %f1 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<96xf64>) -> tensor<1xf64>

  %lp = xfmr.learned_position_encoding %x, %pos : tensor<2x6x8xf64>, tensor<9x8xf64>
  %p2 = xfmr.mul %lp, %r2 : (tensor<2x6x8xf64>, tensor<2x6x8xf64>) -> tensor<2x6x8xf64>
  %f2 = xfmr.reshape %p2 : (tensor<2x6x8xf64>) -> tensor<96xf64>
  %s2 = xfmr.reduce %f2 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<96xf64>) -> tensor<1xf64>

  %l0 = xfmr.linear %x, %w, %bias : (tensor<2x6x8xf64>, tensor<8x12xf64>, tensor<12xf64>) -> tensor<2x6x12xf64>
  %p3 = xfmr.mul %l0, %r3 : (tensor<2x6x12xf64>, tensor<2x6x12xf64>) -> tensor<2x6x12xf64>
  %f3 = xfmr.reshape %p3 : (tensor<2x6x12xf64>) -> tensor<144xf64>
  %s3 = xfmr.reduce %f3 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<144xf64>) -> tensor<1xf64>
  %l1 = xfmr.linear %lp, %wt {transpose_weight} : (tensor<2x6x8xf64>, tensor<12x8xf64>) -> tensor<2x6x12xf64>
  %p4 = xfmr.mul %l1, %r4 : (tensor<2x6x12xf64>, tensor<2x6x12xf64>) -> tensor<2x6x12xf64>
  %f4 = xfmr.reshape %p4 : (tensor<2x6x12xf64>) -> tensor<144xf64>
  %s4 = xfmr.reduce %f4 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<144xf64>) -> tensor<1xf64>

  %fl0 = xfmr.fused_linear %x, %w bias(%bias) residual(%res) {activation = #xfmr.activation<gelu_tanh>}
         : (tensor<2x6x8xf64>, tensor<8x12xf64>, tensor<12xf64>, tensor<2x6x12xf64>) -> tensor<2x6x12xf64>
  %p5 = xfmr.mul %fl0, %r5 : (tensor<2x6x12xf64>, tensor<2x6x12xf64>) -> tensor<2x6x12xf64>
  %f5 = xfmr.reshape %p5 : (tensor<2x6x12xf64>) -> tensor<144xf64>
  %s5 = xfmr.reduce %f5 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<144xf64>) -> tensor<1xf64>
  %fl1 = xfmr.fused_linear %sin, %wt bias(%bias) {activation = #xfmr.activation<gelu>, transpose_weight}
         : (tensor<2x6x8xf64>, tensor<12x8xf64>, tensor<12xf64>) -> tensor<2x6x12xf64>
  %p6 = xfmr.mul %fl1, %r6 : (tensor<2x6x12xf64>, tensor<2x6x12xf64>) -> tensor<2x6x12xf64>
  %f6 = xfmr.reshape %p6 : (tensor<2x6x12xf64>) -> tensor<144xf64>
  %s6 = xfmr.reduce %f6 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<144xf64>) -> tensor<1xf64>

  %gl = xfmr.gated_linear %lp, %wg, %wt gate_bias(%bg) up_bias(%bias) {activation = #xfmr.activation<silu>, transpose_weight}
         : (tensor<2x6x8xf64>, tensor<12x8xf64>, tensor<12x8xf64>, tensor<12xf64>, tensor<12xf64>) -> tensor<2x6x12xf64>
  %p7 = xfmr.mul %gl, %r7 : (tensor<2x6x12xf64>, tensor<2x6x12xf64>) -> tensor<2x6x12xf64>
  %f7 = xfmr.reshape %p7 : (tensor<2x6x12xf64>) -> tensor<144xf64>
  %s7 = xfmr.reduce %f7 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<144xf64>) -> tensor<1xf64>
  %gl2 = xfmr.gated_linear %sin, %wg2, %w up_bias(%bias) {activation = #xfmr.activation<gelu_tanh>}
         : (tensor<2x6x8xf64>, tensor<8x12xf64>, tensor<8x12xf64>, tensor<12xf64>) -> tensor<2x6x12xf64>
  %p8 = xfmr.mul %gl2, %r8 : (tensor<2x6x12xf64>, tensor<2x6x12xf64>) -> tensor<2x6x12xf64>
  %f8 = xfmr.reshape %p8 : (tensor<2x6x12xf64>) -> tensor<144xf64>
  %s8 = xfmr.reduce %f8 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<144xf64>) -> tensor<1xf64>

  %ce = xfmr.cross_entropy %logits, %targets : (tensor<2x6x11xf64>, tensor<2x6xi32>) -> tensor<f64>
  %ce1 = xfmr.reshape %ce : (tensor<f64>) -> tensor<1xf64>

  %a12 = xfmr.add %s1, %s2 : (tensor<1xf64>, tensor<1xf64>) -> tensor<1xf64>
  %a34 = xfmr.add %s3, %s4 : (tensor<1xf64>, tensor<1xf64>) -> tensor<1xf64>
  %a56 = xfmr.add %s5, %s6 : (tensor<1xf64>, tensor<1xf64>) -> tensor<1xf64>
  %a14 = xfmr.add %a12, %a34 : (tensor<1xf64>, tensor<1xf64>) -> tensor<1xf64>
  %a16 = xfmr.add %a14, %a56 : (tensor<1xf64>, tensor<1xf64>) -> tensor<1xf64>
  %a17 = xfmr.add %a16, %s7 : (tensor<1xf64>, tensor<1xf64>) -> tensor<1xf64>
  %a18 = xfmr.add %a17, %s8 : (tensor<1xf64>, tensor<1xf64>) -> tensor<1xf64>
  %total = xfmr.add %a18, %ce1 : (tensor<1xf64>, tensor<1xf64>) -> tensor<1xf64>
  %loss = xfmr.reshape %total : (tensor<1xf64>) -> tensor<f64>
  return %loss : tensor<f64>
}
