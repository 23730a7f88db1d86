// Seeded dropout (counter-based hash of seed and element index): the kept
// fraction is 1 - rate overall and per row, kept values are scaled by
// 1 / (1 - rate), the same seed gives the same mask, another seed an
// independent one, and the backward (xfmrc --grad) drops exactly the
// elements the forward dropped.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %testlib/dropout_stats.py generate %t/inputs.safetensors
// RUN: xfmrc %s --grad --grad-inputs=x -o %t/dropout
// RUN: %t/dropout --inputs=%t/inputs.safetensors --output=%t/outputs.safetensors
// RUN: %python %testlib/dropout_stats.py check %t/inputs.safetensors %t/outputs.safetensors | FileCheck %s
// CHECK: PASS: dropped fraction
// CHECK: PASS: dropped fraction per row
// CHECK: PASS: kept values scaled
// CHECK: PASS: same seed, same mask
// CHECK: PASS: other seed, independent mask
// CHECK: PASS: backward mask
// CHECK-NOT: FAIL

func.func @loss(%x: tensor<200x500xf32> {xfmr.input = "x"}, %r: tensor<200x500xf32> {xfmr.input = "r"},
                %seed_a: tensor<i64> {xfmr.input = "seed_a"}, %seed_b: tensor<i64> {xfmr.input = "seed_b"})
    -> (tensor<f32> {xfmr.output = "loss"}, tensor<200x500xf32> {xfmr.output = "a"},
        tensor<200x500xf32> {xfmr.output = "a_again"}, tensor<200x500xf32> {xfmr.output = "b"}) {
  %a = xfmr.dropout %x seed(%seed_a : tensor<i64>) {rate = 0.3 : f64} : tensor<200x500xf32>
  %a2 = xfmr.dropout %x seed(%seed_a : tensor<i64>) {rate = 0.3 : f64} : tensor<200x500xf32>
  %b = xfmr.dropout %x seed(%seed_b : tensor<i64>) {rate = 0.3 : f64} : tensor<200x500xf32>
  %p = xfmr.mul %a, %r : (tensor<200x500xf32>, tensor<200x500xf32>) -> tensor<200x500xf32>
  %f = xfmr.reshape %p : (tensor<200x500xf32>) -> tensor<100000xf32>
  %s = xfmr.reduce %f {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<100000xf32>) -> tensor<1xf32>
  %l = xfmr.reshape %s : (tensor<1xf32>) -> tensor<f32>
  return %l, %a, %a2, %b : tensor<f32>, tensor<200x500xf32>, tensor<200x500xf32>, tensor<200x500xf32>
}
