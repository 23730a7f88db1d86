// Integer weights in groups that --weight-group-size does not make, against float64 products of
// the same values: int8 with a scale per 16 values along the input side (GGUF's Q6_K), and 4
// bits with a scale and a min per 64. A skinny product and a GEMM each, which on a host with
// an integer dot product take their activations as int8 blocks of 32 (the _dot reference; the
// f32 one rejects them). The int8 skinny product's depth (96) ends in half a chunk of 64.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %testlib/ops.py generate integer_groups %t/inputs.safetensors
// RUN: xfmrc %s --int8-dot=false -o %t/f32
// RUN: %t/f32 --inputs=%t/inputs.safetensors --output=%t/f32.safetensors
// RUN: %python %testlib/ops.py check integer_groups %t/inputs.safetensors %t/f32.safetensors | FileCheck %s
// RUN: xfmrc %s -o %t/model
// RUN: %t/model --inputs=%t/inputs.safetensors --output=%t/model.safetensors
// RUN: %if integer-dot %{ %python %testlib/ops.py check integer_groups_dot %t/inputs.safetensors %t/model.safetensors | FileCheck %s %} %else %{ %python %testlib/ops.py check integer_groups %t/inputs.safetensors %t/model.safetensors | FileCheck %s %}
// RUN: %if integer-dot %{ not %python %testlib/ops.py check integer_groups %t/inputs.safetensors %t/model.safetensors > /dev/null %}
// CHECK: PASS: skinny_g16
// CHECK: PASS: gemm_g16
// CHECK: PASS: skinny_g64_mins
// CHECK: PASS: gemm_g64_mins

func.func @forward(%x: tensor<3x96xf32> {xfmr.input = "x"}, %xl: tensor<70x96xf32> {xfmr.input = "xl"},
                   %q: tensor<40x96xi8> {xfmr.input = "q"}, %s: tensor<40x6xf32> {xfmr.input = "s"},
                   %x4: tensor<3x128xf32> {xfmr.input = "x4"}, %xl4: tensor<20x128xf32> {xfmr.input = "xl4"},
                   %q4: tensor<40x64xi8> {xfmr.input = "q4"}, %s4: tensor<40x2xf32> {xfmr.input = "s4"},
                   %m4: tensor<40x2xf32> {xfmr.input = "m4"})
    -> (tensor<3x40xf32> {xfmr.output = "skinny_g16"}, tensor<70x40xf32> {xfmr.output = "gemm_g16"},
        tensor<3x40xf32> {xfmr.output = "skinny_g64_mins"}, tensor<20x40xf32> {xfmr.output = "gemm_g64_mins"}) {
  %w = xfmr.dequantize %q, %s {axis = 1 : i64, group_size = 16 : i64} : (tensor<40x96xi8>, tensor<40x6xf32>) -> tensor<40x96xf32>
  %a = xfmr.linear %x, %w {transpose_weight} : (tensor<3x96xf32>, tensor<40x96xf32>) -> tensor<3x40xf32>
  %b = xfmr.linear %xl, %w {transpose_weight} : (tensor<70x96xf32>, tensor<40x96xf32>) -> tensor<70x40xf32>
  %w4 = xfmr.dequantize %q4, %s4, %m4 {axis = 1 : i64, bits = 4 : i64, group_size = 64 : i64} : (tensor<40x64xi8>, tensor<40x2xf32>, tensor<40x2xf32>) -> tensor<40x128xf32>
  %c = xfmr.linear %x4, %w4 {transpose_weight} : (tensor<3x128xf32>, tensor<40x128xf32>) -> tensor<3x40xf32>
  %d = xfmr.linear %xl4, %w4 {transpose_weight} : (tensor<20x128xf32>, tensor<40x128xf32>) -> tensor<20x40xf32>
  return %a, %b, %c, %d : tensor<3x40xf32>, tensor<70x40xf32>, tensor<3x40xf32>, tensor<20x40xf32>
}
