// Gradients of layer norm (affine and not, a row with a large mean), the
// fused residual add + layer norm (both results used) and softmax against
// central finite differences of the compiled loss, in float64.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t
// RUN: xfmrc %s -o %t/loss
// RUN: xfmrc %s --grad --grad-inputs='*' -o %t/grad
// RUN: %python %testlib/gradcheck.py normalization --loss %t/loss --grad %t/grad --workdir %t | FileCheck %s
// CHECK-DAG: PASS: x:
// CHECK-DAG: PASS: y:
// CHECK-DAG: PASS: gamma:
// CHECK-DAG: PASS: beta:
// CHECK-DAG: PASS: s:
// CHECK-NOT: FAIL

func.func @loss(%x: tensor<4x6x16xf64> {xfmr.input = "x"}, %y: tensor<4x6x16xf64> {xfmr.input = "y"},
                %gamma: tensor<16xf64> {xfmr.input = "gamma"}, %beta: tensor<16xf64> {xfmr.input = "beta"},
                %s: tensor<2x5x9xf64> {xfmr.input = "s"},
                %r1: tensor<4x6x16xf64> {xfmr.input = "r1"}, %r2: tensor<4x6x16xf64> {xfmr.input = "r2"},
                %r3: tensor<4x6x16xf64> {xfmr.input = "r3"}, %r4: tensor<4x6x16xf64> {xfmr.input = "r4"},
                %r5: tensor<2x5x9xf64> {xfmr.input = "r5"}, %r6: tensor<2x5x9xf64> {xfmr.input = "r6"})
    -> (tensor<f64> {xfmr.output = "loss"}) {
  %l0 = xfmr.layer_norm %x, %gamma, %beta {epsilon = 1.0e-5 : f64} : (tensor<4x6x16xf64>, tensor<16xf64>, tensor<16xf64>) -> tensor<4x6x16xf64>
  %p1 = xfmr.mul %l0, %r1 : (tensor<4x6x16xf64>, tensor<4x6x16xf64>) -> tensor<4x6x16xf64>
  %f1 = xfmr.reshape %p1 : (tensor<4x6x16xf64>) -> tensor<384xf64>
  %s1 = xfmr.reduce %f1 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<384xf64>) -> tensor<1xf64>

  %l1 = xfmr.layer_norm %y {epsilon = 1.0e-3 : f64} : (tensor<4x6x16xf64>) -> tensor<4x6x16xf64>
  %p2 = xfmr.mul %l1, %r2 : (tensor<4x6x16xf64>, tensor<4x6x16xf64>) -> tensor<4x6x16xf64>
  %f2 = xfmr.reshape %p2 : (tensor<4x6x16xf64>) -> tensor<384xf64>
  %s2 = xfmr.reduce %f2 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<384xf64>) -> tensor<1xf64>

  %sum, %l2 = xfmr.fused_add_layer_norm %x, %y, %gamma, %beta {epsilon = 1.0e-5 : f64}
      : (tensor<4x6x16xf64>, tensor<4x6x16xf64>, tensor<16xf64>, tensor<16xf64>) -> (tensor<4x6x16xf64>, tensor<4x6x16xf64>)
  %p3 = xfmr.mul %sum, %r3 : (tensor<4x6x16xf64>, tensor<4x6x16xf64>) -> tensor<4x6x16xf64>
  %f3 = xfmr.reshape %p3 : (tensor<4x6x16xf64>) -> tensor<384xf64>
  %s3 = xfmr.reduce %f3 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<384xf64>) -> tensor<1xf64>
  %p4 = xfmr.mul %l2, %r4 : (tensor<4x6x16xf64>, tensor<4x6x16xf64>) -> tensor<4x6x16xf64>
  %f4 = xfmr.reshape %p4 : (tensor<4x6x16xf64>) -> tensor<384xf64>
  %s4 = xfmr.reduce %f4 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<384xf64>) -> tensor<1xf64>

  // Softmax over the last axis, and over the first (not a row kernel).
  %sm0 = xfmr.softmax %s : tensor<2x5x9xf64>
  %p5 = xfmr.mul %sm0, %r5 : (tensor<2x5x9xf64>, tensor<2x5x9xf64>) -> tensor<2x5x9xf64>
  %f5 = xfmr.reshape %p5 : (tensor<2x5x9xf64>) -> tensor<90xf64>
  %s5 = xfmr.reduce %f5 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<90xf64>) -> tensor<1xf64>
  %sm1 = xfmr.softmax %s {axis = 0} : tensor<2x5x9xf64>
  %p6 = xfmr.mul %sm1, %r6 : (tensor<2x5x9xf64>, tensor<2x5x9xf64>) -> tensor<2x5x9xf64>
  %f6 = xfmr.reshape %p6 : (tensor<2x5x9xf64>) -> tensor<90xf64>
  %s6 = xfmr.reduce %f6 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<90xf64>) -> tensor<1xf64>

  %a12 = xfmr.add %s1, %s2 : (tensor<1xf64>, tensor<1xf64>) -> tensor<1xf64>
  %a34 = xfmr.add %s3, %s4 : (tensor<1xf64>, tensor<1xf64>) -> tensor<1xf64>
  %a56 = xfmr.add %s5, %s6 : (tensor<1xf64>, tensor<1xf64>) -> tensor<1xf64>
  %a14 = xfmr.add %a12, %a34 : (tensor<1xf64>, tensor<1xf64>) -> tensor<1xf64>
  %total = xfmr.add %a14, %a56 : (tensor<1xf64>, tensor<1xf64>) -> tensor<1xf64>
  %loss = xfmr.reshape %total : (tensor<1xf64>) -> tensor<f64>
  return %loss : tensor<f64>
}
