// Gradients of the elementwise, broadcasting, reduction, shape, matmul and
// activation ops (and seeded dropout) against central finite differences of
// the compiled loss, in float64: loss = sum_k <op_k(...), r_k>.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t
// RUN: xfmrc %s -o %t/loss
// RUN: xfmrc %s --grad --grad-inputs='*' -o %t/grad
// RUN: %python %testlib/gradcheck.py elementwise --loss %t/loss --grad %t/grad --workdir %t | FileCheck %s
// CHECK-DAG: PASS: a:
// CHECK-DAG: PASS: b:
// CHECK-DAG: PASS: c:
// CHECK-DAG: PASS: d:
// CHECK-DAG: PASS: m:
// CHECK-DAG: PASS: n:
// CHECK-DAG: PASS: k:
// CHECK-DAG: PASS: l:
// CHECK-DAG: PASS: r8:
// CHECK-NOT: FAIL

func.func @loss(%a: tensor<3x4x5xf64> {xfmr.input = "a"}, %b: tensor<4x1xf64> {xfmr.input = "b"},
                %c: tensor<3x4x5xf64> {xfmr.input = "c"}, %d: tensor<3x4x5xf64> {xfmr.input = "d"},
                %m: tensor<2x3x4x6xf64> {xfmr.input = "m"}, %n: tensor<2x3x6x5xf64> {xfmr.input = "n"},
                %k: tensor<7x4xf64> {xfmr.input = "k"}, %l: tensor<7x6xf64> {xfmr.input = "l"},
                %mask: tensor<3x4x5xi1> {xfmr.input = "mask"}, %seed: tensor<i64> {xfmr.input = "seed"},
                %r1: tensor<3x4x5xf64> {xfmr.input = "r1"}, %r2: tensor<3x4x1xf64> {xfmr.input = "r2"},
                %r3: tensor<2x3x4x5xf64> {xfmr.input = "r3"}, %r4: tensor<4x6xf64> {xfmr.input = "r4"},
                %r5: tensor<5x4x3xf64> {xfmr.input = "r5"}, %r6: tensor<3x4x5xf64> {xfmr.input = "r6"},
                %r7: tensor<3x4x5xf64> {xfmr.input = "r7"}, %r8: tensor<3x4x5xf64> {xfmr.input = "r8"})
    -> (tensor<f64> {xfmr.output = "loss"}) {
  // select(mask, max((a * b) - c, a / (d^2 + 1)), c * b), b broadcast.
  %ab = xfmr.mul %a, %b : (tensor<3x4x5xf64>, tensor<4x1xf64>) -> tensor<3x4x5xf64>
  %abc = xfmr.sub %ab, %c : (tensor<3x4x5xf64>, tensor<3x4x5xf64>) -> tensor<3x4x5xf64>
  %dd = xfmr.mul %d, %d : (tensor<3x4x5xf64>, tensor<3x4x5xf64>) -> tensor<3x4x5xf64>
  %one = arith.constant dense<1.0> : tensor<f64>
  %den = xfmr.add %dd, %one : (tensor<3x4x5xf64>, tensor<f64>) -> tensor<3x4x5xf64>
  %q = xfmr.div %a, %den : (tensor<3x4x5xf64>, tensor<3x4x5xf64>) -> tensor<3x4x5xf64>
  %mx = xfmr.maximum %abc, %q : (tensor<3x4x5xf64>, tensor<3x4x5xf64>) -> tensor<3x4x5xf64>
  %cb = xfmr.mul %c, %b : (tensor<3x4x5xf64>, tensor<4x1xf64>) -> tensor<3x4x5xf64>
  %t1 = xfmr.select %mask, %mx, %cb : (tensor<3x4x5xi1>, tensor<3x4x5xf64>, tensor<3x4x5xf64>) -> tensor<3x4x5xf64>
  %p1 = xfmr.mul %t1, %r1 : (tensor<3x4x5xf64>, tensor<3x4x5xf64>) -> tensor<3x4x5xf64>
  %f1 = xfmr.reshape %p1 : (tensor<3x4x5xf64>) -> tensor<60xf64>
  %s1 = xfmr.reduce %f1 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<60xf64>) -> tensor<1xf64>

  // max over the last axis + mean over it, of |a| (math.absf) and c.
  %absa = math.absf %a : tensor<3x4x5xf64>
  %rmax = xfmr.reduce %absa {kind = #xfmr.reduce_kind<max>} : (tensor<3x4x5xf64>) -> tensor<3x4x1xf64>
  %rmean = xfmr.reduce %c {kind = #xfmr.reduce_kind<mean>, axis = 2} : (tensor<3x4x5xf64>) -> tensor<3x4x1xf64>
  %t2 = xfmr.add %rmax, %rmean : (tensor<3x4x1xf64>, tensor<3x4x1xf64>) -> tensor<3x4x1xf64>
  %p2 = xfmr.mul %t2, %r2 : (tensor<3x4x1xf64>, tensor<3x4x1xf64>) -> tensor<3x4x1xf64>
  %f2 = xfmr.reshape %p2 : (tensor<3x4x1xf64>) -> tensor<12xf64>
  %s2 = xfmr.reduce %f2 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<12xf64>) -> tensor<1xf64>

  // A batched product and a product with the left operand transposed.
  %t3 = xfmr.matmul %m, %n : (tensor<2x3x4x6xf64>, tensor<2x3x6x5xf64>) -> tensor<2x3x4x5xf64>
  %p3 = xfmr.mul %t3, %r3 : (tensor<2x3x4x5xf64>, tensor<2x3x4x5xf64>) -> tensor<2x3x4x5xf64>
  %f3 = xfmr.reshape %p3 : (tensor<2x3x4x5xf64>) -> tensor<120xf64>
  %s3 = xfmr.reduce %f3 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<120xf64>) -> tensor<1xf64>
  %t4 = xfmr.matmul %k, %l {transpose_lhs} : (tensor<7x4xf64>, tensor<7x6xf64>) -> tensor<4x6xf64>
  %p4 = xfmr.mul %t4, %r4 : (tensor<4x6xf64>, tensor<4x6xf64>) -> tensor<4x6xf64>
  %f4 = xfmr.reshape %p4 : (tensor<4x6xf64>) -> tensor<24xf64>
  %s4 = xfmr.reduce %f4 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<24xf64>) -> tensor<1xf64>

  // Transpose of the product a * c.
  %ac = xfmr.mul %a, %c : (tensor<3x4x5xf64>, tensor<3x4x5xf64>) -> tensor<3x4x5xf64>
  %t5 = xfmr.transpose %ac {permutation = array<i64: 2, 1, 0>} : (tensor<3x4x5xf64>) -> tensor<5x4x3xf64>
  %p5 = xfmr.mul %t5, %r5 : (tensor<5x4x3xf64>, tensor<5x4x3xf64>) -> tensor<5x4x3xf64>
  %f5 = xfmr.reshape %p5 : (tensor<5x4x3xf64>) -> tensor<60xf64>
  %s5 = xfmr.reduce %f5 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<60xf64>) -> tensor<1xf64>

  // Activations and a softmax along a middle axis.
  %g = xfmr.gelu %a : tensor<3x4x5xf64>
  %gt = xfmr.gelu %c {approximate = #xfmr.gelu_approximation<tanh>} : tensor<3x4x5xf64>
  %t6 = xfmr.add %g, %gt : (tensor<3x4x5xf64>, tensor<3x4x5xf64>) -> tensor<3x4x5xf64>
  %p6 = xfmr.mul %t6, %r6 : (tensor<3x4x5xf64>, tensor<3x4x5xf64>) -> tensor<3x4x5xf64>
  %f6 = xfmr.reshape %p6 : (tensor<3x4x5xf64>) -> tensor<60xf64>
  %s6 = xfmr.reduce %f6 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<60xf64>) -> tensor<1xf64>
  %relu = xfmr.relu %d : tensor<3x4x5xf64>
  %sm = xfmr.softmax %a {axis = 1} : tensor<3x4x5xf64>
  %t7 = xfmr.add %relu, %sm : (tensor<3x4x5xf64>, tensor<3x4x5xf64>) -> tensor<3x4x5xf64>
  %p7 = xfmr.mul %t7, %r7 : (tensor<3x4x5xf64>, tensor<3x4x5xf64>) -> tensor<3x4x5xf64>
  %f7 = xfmr.reshape %p7 : (tensor<3x4x5xf64>) -> tensor<60xf64>
  %s7 = xfmr.reduce %f7 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<60xf64>) -> tensor<1xf64>

  // Seeded dropout: the backward must drop the forward's elements.
  %t8 = xfmr.dropout %c seed(%seed : tensor<i64>) {rate = 0.3 : f64} : tensor<3x4x5xf64>
  %p8 = xfmr.mul %t8, %r8 : (tensor<3x4x5xf64>, tensor<3x4x5xf64>) -> tensor<3x4x5xf64>
  %f8 = xfmr.reshape %p8 : (tensor<3x4x5xf64>) -> tensor<60xf64>
  %s8 = xfmr.reduce %f8 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<60xf64>) -> tensor<1xf64>

  %a12 = xfmr.add %s1, %s2 : (tensor<1xf64>, tensor<1xf64>) -> tensor<1xf64>
  %a34 = xfmr.add %s3, %s4 : (tensor<1xf64>, tensor<1xf64>) -> tensor<1xf64>
  %a56 = xfmr.add %s5, %s6 : (tensor<1xf64>, tensor<1xf64>) -> tensor<1xf64>
  %a78 = xfmr.add %s7, %s8 : (tensor<1xf64>, tensor<1xf64>) -> tensor<1xf64>
  %a14 = xfmr.add %a12, %a34 : (tensor<1xf64>, tensor<1xf64>) -> tensor<1xf64>
  %a58 = xfmr.add %a56, %a78 : (tensor<1xf64>, tensor<1xf64>) -> tensor<1xf64>
  %total = xfmr.add %a14, %a58 : (tensor<1xf64>, tensor<1xf64>) -> tensor<1xf64>
  %loss = xfmr.reshape %total : (tensor<1xf64>) -> tensor<f64>
  return %loss : tensor<f64>
}
