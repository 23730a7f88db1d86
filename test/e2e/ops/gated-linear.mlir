// xfmr.gated_linear, activation(x Wg + bg) * (x Wu + bu), against float64: the gate's product
// with its activation, then up's multiplied by it in its epilogue: products of a few rows (one
// decode step's; a batch's, 16 rows swept in chunks of a depth of 610) with biases, output
// columns that end in a short block and depths with tails, the same row alone bit for bit;
// GEMMs (80 rows) and skinny [K, N] products; int8 weights with a scale per channel and bf16
// weights; every activation (silu, gelu_tanh, gelu, none). 8 and 16 lanes, and the GPU kernels
// emulated (two products and their product: a row there need not compute as alone). Products of
// int8 weights in groups of 32 (5 and 40 rows) and 4-bit ones, on the host's integer dot product
// where it has one, equal the unfused gate and up products and their product bit for bit
// (built with --fuse-epilogues=false, which leaves those apart).
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %testlib/ops.py generate gated_linear %t/inputs.safetensors
// RUN: xfmrc %s --int8-dot=false --fuse-epilogues=false -o %t/model
// RUN: %t/model --inputs=%t/inputs.safetensors --output=%t/outputs.safetensors
// RUN: %python %testlib/ops.py check gated_linear %t/inputs.safetensors %t/outputs.safetensors | FileCheck %s
// RUN: xfmrc %s --int8-dot=false --vector-lanes=16 -o %t/model16
// RUN: %t/model16 --inputs=%t/inputs.safetensors --output=%t/outputs16.safetensors
// RUN: %python %testlib/ops.py check gated_linear %t/inputs.safetensors %t/outputs16.safetensors | FileCheck %s
// RUN: xfmrc %s --int8-dot=false --emulate-gpu-kernels -o %t/gpu-emulated
// RUN: %t/gpu-emulated --inputs=%t/inputs.safetensors --output=%t/outputs-gpu.safetensors
// RUN: %python %testlib/ops.py check gated_linear_gpu %t/inputs.safetensors %t/outputs-gpu.safetensors | FileCheck %s --check-prefix=GPU
// RUN: %if integer-dot %{ xfmrc %s --fuse-epilogues=false -o %t/model-dot && %t/model-dot --inputs=%t/inputs.safetensors --output=%t/outputs-dot.safetensors && %python %testlib/ops.py check gated_linear_dot %t/inputs.safetensors %t/outputs-dot.safetensors | FileCheck %s --check-prefix=DOT %}
// CHECK: PASS: one_row
// CHECK: PASS: batch_chunked
// CHECK: PASS: batch_alike: max error 0.00e+00
// CHECK: PASS: gemm
// CHECK: PASS: skinny_kn
// CHECK: PASS: int8_rows
// CHECK: PASS: bf16_rows
// CHECK: PASS: int8_groups_alike: max error 0.00e+00
// CHECK: PASS: int8_gemm_alike: max error 0.00e+00
// CHECK: PASS: int4_alike: max error 0.00e+00
// DOT: PASS: int8_groups_alike: max error 0.00e+00
// DOT: PASS: int8_gemm_alike: max error 0.00e+00
// DOT: PASS: int4_alike: max error 0.00e+00
// GPU: PASS: one_row
// GPU: PASS: batch_chunked
// GPU: PASS: batch_alike
// GPU: PASS: gemm
// GPU: PASS: skinny_kn
// GPU: PASS: int8_rows
// GPU: PASS: bf16_rows
// GPU: PASS: int8_groups_alike
// GPU: PASS: int8_gemm_alike
// GPU: PASS: int4_alike

func.func @forward(%x1: tensor<1x200xf32> {xfmr.input = "x1"}, %wg1: tensor<46x200xf32> {xfmr.input = "wg1"},
                   %wu1: tensor<46x200xf32> {xfmr.input = "wu1"},
                   %xc: tensor<16x610xf32> {xfmr.input = "xc"}, %wgc: tensor<46x610xf32> {xfmr.input = "wgc"},
                   %wuc: tensor<46x610xf32> {xfmr.input = "wuc"}, %bgc: tensor<46xf32> {xfmr.input = "bgc"},
                   %buc: tensor<46xf32> {xfmr.input = "buc"},
                   %xp: tensor<2x40x72xf32> {xfmr.input = "xp"}, %wgp: tensor<136x72xf32> {xfmr.input = "wgp"},
                   %wup: tensor<136x72xf32> {xfmr.input = "wup"}, %bgp: tensor<136xf32> {xfmr.input = "bgp"},
                   %bup: tensor<136xf32> {xfmr.input = "bup"},
                   %xk: tensor<4x72xf32> {xfmr.input = "xk"}, %wgk: tensor<72x132xf32> {xfmr.input = "wgk"},
                   %wuk: tensor<72x132xf32> {xfmr.input = "wuk"},
                   %x8: tensor<5x100xf32> {xfmr.input = "x8"}, %qg: tensor<46x100xi8> {xfmr.input = "qg"},
                   %sg: tensor<46x1xf32> {xfmr.input = "sg"}, %qu: tensor<46x100xi8> {xfmr.input = "qu"},
                   %su: tensor<46x1xf32> {xfmr.input = "su"},
                   %xb: tensor<3x200xf32> {xfmr.input = "xb"}, %wgb: tensor<46x200xf32> {xfmr.input = "wgb"},
                   %wub: tensor<46x200xf32> {xfmr.input = "wub"},
                   %xq: tensor<5x128xf32> {xfmr.input = "xq"}, %xqq: tensor<40x128xf32> {xfmr.input = "xqq"},
                   %qg8: tensor<46x128xi8> {xfmr.input = "qg8"}, %sg8: tensor<46x4xf32> {xfmr.input = "sg8"},
                   %qu8: tensor<46x128xi8> {xfmr.input = "qu8"}, %su8: tensor<46x4xf32> {xfmr.input = "su8"},
                   %qg4: tensor<46x64xi8> {xfmr.input = "qg4"}, %sg4: tensor<46x4xf32> {xfmr.input = "sg4"},
                   %qu4: tensor<46x64xi8> {xfmr.input = "qu4"}, %su4: tensor<46x4xf32> {xfmr.input = "su4"})
    -> (tensor<1x46xf32> {xfmr.output = "one_row"}, tensor<16x46xf32> {xfmr.output = "batch_chunked"},
        tensor<1x46xf32> {xfmr.output = "batch_alike"}, tensor<2x40x136xf32> {xfmr.output = "gemm"},
        tensor<4x132xf32> {xfmr.output = "skinny_kn"}, tensor<5x46xf32> {xfmr.output = "int8_rows"},
        tensor<3x46xf32> {xfmr.output = "bf16_rows"}, tensor<5x46xf32> {xfmr.output = "int8_groups_alike"},
        tensor<40x46xf32> {xfmr.output = "int8_gemm_alike"}, tensor<5x46xf32> {xfmr.output = "int4_alike"}) {
  %one = xfmr.gated_linear %x1, %wg1, %wu1 {activation = #xfmr.activation<silu>, transpose_weight}
       : (tensor<1x200xf32>, tensor<46x200xf32>, tensor<46x200xf32>) -> tensor<1x46xf32>
  %batch = xfmr.gated_linear %xc, %wgc, %wuc gate_bias(%bgc) up_bias(%buc) {activation = #xfmr.activation<gelu_tanh>, transpose_weight}
       : (tensor<16x610xf32>, tensor<46x610xf32>, tensor<46x610xf32>, tensor<46xf32>, tensor<46xf32>) -> tensor<16x46xf32>
  %row = tensor.extract_slice %xc[15, 0] [1, 610] [1, 1] : tensor<16x610xf32> to tensor<1x610xf32>
  %alone = xfmr.gated_linear %row, %wgc, %wuc gate_bias(%bgc) up_bias(%buc) {activation = #xfmr.activation<gelu_tanh>, transpose_weight}
       : (tensor<1x610xf32>, tensor<46x610xf32>, tensor<46x610xf32>, tensor<46xf32>, tensor<46xf32>) -> tensor<1x46xf32>
  %last = tensor.extract_slice %batch[15, 0] [1, 46] [1, 1] : tensor<16x46xf32> to tensor<1x46xf32>
  %alike = xfmr.sub %alone, %last : (tensor<1x46xf32>, tensor<1x46xf32>) -> tensor<1x46xf32>
  %gemm = xfmr.gated_linear %xp, %wgp, %wup gate_bias(%bgp) up_bias(%bup) {activation = #xfmr.activation<silu>, transpose_weight}
       : (tensor<2x40x72xf32>, tensor<136x72xf32>, tensor<136x72xf32>, tensor<136xf32>, tensor<136xf32>) -> tensor<2x40x136xf32>
  %kn = xfmr.gated_linear %xk, %wgk, %wuk {activation = #xfmr.activation<gelu>}
       : (tensor<4x72xf32>, tensor<72x132xf32>, tensor<72x132xf32>) -> tensor<4x132xf32>
  %w8g = xfmr.dequantize %qg, %sg {axis = 1 : i64, group_size = 100 : i64} : (tensor<46x100xi8>, tensor<46x1xf32>) -> tensor<46x100xf32>
  %w8u = xfmr.dequantize %qu, %su {axis = 1 : i64, group_size = 100 : i64} : (tensor<46x100xi8>, tensor<46x1xf32>) -> tensor<46x100xf32>
  %int8 = xfmr.gated_linear %x8, %w8g, %w8u {activation = #xfmr.activation<silu>, transpose_weight}
       : (tensor<5x100xf32>, tensor<46x100xf32>, tensor<46x100xf32>) -> tensor<5x46xf32>
  %wgbn = arith.truncf %wgb : tensor<46x200xf32> to tensor<46x200xbf16>
  %wubn = arith.truncf %wub : tensor<46x200xf32> to tensor<46x200xbf16>
  %wgbw = arith.extf %wgbn : tensor<46x200xbf16> to tensor<46x200xf32>
  %wubw = arith.extf %wubn : tensor<46x200xbf16> to tensor<46x200xf32>
  %bf16 = xfmr.gated_linear %xb, %wgbw, %wubw {activation = #xfmr.activation<none>, transpose_weight}
       : (tensor<3x200xf32>, tensor<46x200xf32>, tensor<46x200xf32>) -> tensor<3x46xf32>
  %g8g = xfmr.dequantize %qg8, %sg8 {axis = 1 : i64, group_size = 32 : i64} : (tensor<46x128xi8>, tensor<46x4xf32>) -> tensor<46x128xf32>
  %g8u = xfmr.dequantize %qu8, %su8 {axis = 1 : i64, group_size = 32 : i64} : (tensor<46x128xi8>, tensor<46x4xf32>) -> tensor<46x128xf32>
  %groups = xfmr.gated_linear %xq, %g8g, %g8u {activation = #xfmr.activation<silu>, transpose_weight}
       : (tensor<5x128xf32>, tensor<46x128xf32>, tensor<46x128xf32>) -> tensor<5x46xf32>
  %groups_g = xfmr.fused_linear %xq, %g8g {activation = #xfmr.activation<silu>, transpose_weight} : (tensor<5x128xf32>, tensor<46x128xf32>) -> tensor<5x46xf32>
  %groups_u = xfmr.fused_linear %xq, %g8u {transpose_weight} : (tensor<5x128xf32>, tensor<46x128xf32>) -> tensor<5x46xf32>
  %groups_h = xfmr.mul %groups_g, %groups_u : (tensor<5x46xf32>, tensor<5x46xf32>) -> tensor<5x46xf32>
  %groups_alike = xfmr.sub %groups, %groups_h : (tensor<5x46xf32>, tensor<5x46xf32>) -> tensor<5x46xf32>
  %gemm8 = xfmr.gated_linear %xqq, %g8g, %g8u {activation = #xfmr.activation<gelu_tanh>, transpose_weight}
       : (tensor<40x128xf32>, tensor<46x128xf32>, tensor<46x128xf32>) -> tensor<40x46xf32>
  %gemm8_g = xfmr.fused_linear %xqq, %g8g {activation = #xfmr.activation<gelu_tanh>, transpose_weight} : (tensor<40x128xf32>, tensor<46x128xf32>) -> tensor<40x46xf32>
  %gemm8_u = xfmr.fused_linear %xqq, %g8u {transpose_weight} : (tensor<40x128xf32>, tensor<46x128xf32>) -> tensor<40x46xf32>
  %gemm8_h = xfmr.mul %gemm8_g, %gemm8_u : (tensor<40x46xf32>, tensor<40x46xf32>) -> tensor<40x46xf32>
  %gemm8_alike = xfmr.sub %gemm8, %gemm8_h : (tensor<40x46xf32>, tensor<40x46xf32>) -> tensor<40x46xf32>
  %g4g = xfmr.dequantize %qg4, %sg4 {axis = 1 : i64, bits = 4 : i64, group_size = 32 : i64} : (tensor<46x64xi8>, tensor<46x4xf32>) -> tensor<46x128xf32>
  %g4u = xfmr.dequantize %qu4, %su4 {axis = 1 : i64, bits = 4 : i64, group_size = 32 : i64} : (tensor<46x64xi8>, tensor<46x4xf32>) -> tensor<46x128xf32>
  %int4 = xfmr.gated_linear %xq, %g4g, %g4u {activation = #xfmr.activation<silu>, transpose_weight}
       : (tensor<5x128xf32>, tensor<46x128xf32>, tensor<46x128xf32>) -> tensor<5x46xf32>
  %int4_g = xfmr.fused_linear %xq, %g4g {activation = #xfmr.activation<silu>, transpose_weight} : (tensor<5x128xf32>, tensor<46x128xf32>) -> tensor<5x46xf32>
  %int4_u = xfmr.fused_linear %xq, %g4u {transpose_weight} : (tensor<5x128xf32>, tensor<46x128xf32>) -> tensor<5x46xf32>
  %int4_h = xfmr.mul %int4_g, %int4_u : (tensor<5x46xf32>, tensor<5x46xf32>) -> tensor<5x46xf32>
  %int4_alike = xfmr.sub %int4, %int4_h : (tensor<5x46xf32>, tensor<5x46xf32>) -> tensor<5x46xf32>
  return %one, %batch, %alike, %gemm, %kn, %int8, %bf16, %groups_alike, %gemm8_alike, %int4_alike
       : tensor<1x46xf32>, tensor<16x46xf32>, tensor<1x46xf32>, tensor<2x40x136xf32>, tensor<4x132xf32>,
         tensor<5x46xf32>, tensor<3x46xf32>, tensor<5x46xf32>, tensor<40x46xf32>, tensor<5x46xf32>
}
