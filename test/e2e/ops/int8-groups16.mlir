// int8 weights with a scale per 16 values along the input side (GGUF's Q6_K) against float64
// products of the same values: a skinny product and a GEMM, which on a host with AVX-512 VNNI
// take their activations as int8 blocks of 32 (the _dot reference; the f32 one rejects them)
// and sum each group of 16 in i32. The skinny product's depth (96) ends in half a chunk of 64.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %testlib/ops.py generate int8_groups16 %t/inputs.safetensors
// RUN: xfmrc %s --int8-dot=false -o %t/f32
// RUN: %t/f32 --inputs=%t/inputs.safetensors --output=%t/f32.safetensors
// RUN: %python %testlib/ops.py check int8_groups16 %t/inputs.safetensors %t/f32.safetensors | FileCheck %s
// RUN: xfmrc %s -o %t/model
// RUN: %t/model --inputs=%t/inputs.safetensors --output=%t/model.safetensors
// RUN: %if avx512vnni %{ %python %testlib/ops.py check int8_groups16_dot %t/inputs.safetensors %t/model.safetensors | FileCheck %s %} %else %{ %python %testlib/ops.py check int8_groups16 %t/inputs.safetensors %t/model.safetensors | FileCheck %s %}
// RUN: %if avx512vnni %{ not %python %testlib/ops.py check int8_groups16 %t/inputs.safetensors %t/model.safetensors > /dev/null %}
// CHECK: PASS: skinny_g16
// CHECK: PASS: gemm_g16

func.func @forward(%x: tensor<3x96xf32> {xfmr.input = "x"}, %xl: tensor<70x96xf32> {xfmr.input = "xl"},
                   %q: tensor<40x96xi8> {xfmr.input = "q"}, %s: tensor<40x6xf32> {xfmr.input = "s"})
    -> (tensor<3x40xf32> {xfmr.output = "skinny_g16"}, tensor<70x40xf32> {xfmr.output = "gemm_g16"}) {
  %w = xfmr.dequantize %q, %s {axis = 1 : i64, group_size = 16 : i64} : (tensor<40x96xi8>, tensor<40x6xf32>) -> tensor<40x96xf32>
  %a = xfmr.linear %x, %w {transpose_weight} : (tensor<3x96xf32>, tensor<40x96xf32>) -> tensor<3x40xf32>
  %b = xfmr.linear %xl, %w {transpose_weight} : (tensor<70x96xf32>, tensor<40x96xf32>) -> tensor<70x40xf32>
  return %a, %b : tensor<3x40xf32>, tensor<70x40xf32>
}
