// linear and fused_linear (every activation, bias, residual, both weight
// layouts; products of a few rows, as decoding makes, too) and the
// primitive matmul with broadcast batch dimensions.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %testlib/ops.py generate linear %t/inputs.safetensors
// RUN: xfmrc %s -o %t/model
// RUN: %t/model --inputs=%t/inputs.safetensors --output=%t/outputs.safetensors
// RUN: %python %testlib/ops.py check linear %t/inputs.safetensors %t/outputs.safetensors | FileCheck %s
// The AVX-512 code shape (16 lanes, 32 registers), run here as split vectors.
// RUN: xfmrc %s --vector-lanes=16 -o %t/model16
// RUN: %t/model16 --inputs=%t/inputs.safetensors --output=%t/outputs16.safetensors
// RUN: %python %testlib/ops.py check linear %t/inputs.safetensors %t/outputs16.safetensors | FileCheck %s
// The GPU GEMM (convert-xfmr-to-gpu-kernels), its thread blocks run as loops
// on the CPU: the same arithmetic a GPU runs.
// RUN: xfmrc %s --emulate-gpu-kernels -o %t/gpu-emulated
// RUN: %t/gpu-emulated --inputs=%t/inputs.safetensors --output=%t/outputs-gpu.safetensors
// RUN: %python %testlib/ops.py check linear %t/inputs.safetensors %t/outputs-gpu.safetensors | FileCheck %s
// Each phase's threads last to first: a race between threads of a phase
// gives different results in one of the two orders.
// RUN: xfmrc %s --emulate-gpu-kernels --reverse-gpu-threads -o %t/gpu-reversed
// RUN: %t/gpu-reversed --inputs=%t/inputs.safetensors --output=%t/outputs-reversed.safetensors
// RUN: %python %testlib/ops.py check linear %t/inputs.safetensors %t/outputs-reversed.safetensors | FileCheck %s
// CHECK: PASS: linear_bias
// CHECK: PASS: linear_nk
// CHECK: PASS: fused_relu
// CHECK: PASS: fused_gelu
// CHECK: PASS: fused_gelu_tanh_residual
// CHECK: PASS: fused_none_nk
// CHECK: PASS: matmul_broadcast
// CHECK: PASS: matmul_transposed
// CHECK: PASS: wide_gelu
// CHECK: PASS: wide_nk_residual
// CHECK: PASS: wide_tn
// CHECK: PASS: odd_nk
// CHECK: PASS: large_nt
// CHECK: PASS: large_tn
// CHECK: PASS: skinny_silu_residual
// CHECK: PASS: skinny_nk_tanh
// CHECK: PASS: deep_relu
// CHECK: PASS: skinny_kn_gelu
// CHECK: PASS: batch_nk_gelu_residual

func.func @forward(%x: tensor<3x5x24xf32> {xfmr.input = "x"}, %w: tensor<24x36xf32> {xfmr.input = "w"},
                   %wt: tensor<36x24xf32> {xfmr.input = "wt"}, %bias: tensor<36xf32> {xfmr.input = "bias"},
                   %res: tensor<3x5x36xf32> {xfmr.input = "res"},
                   %a: tensor<2x1x5x4xf32> {xfmr.input = "a"}, %m: tensor<3x4x6xf32> {xfmr.input = "m"},
                   %n: tensor<2x3x6x4xf32> {xfmr.input = "n"},
                   %xb: tensor<2x70x40xf32> {xfmr.input = "xb"}, %wb: tensor<40x136xf32> {xfmr.input = "wb"},
                   %wbt: tensor<136x40xf32> {xfmr.input = "wbt"}, %bb: tensor<136xf32> {xfmr.input = "bb"},
                   %rb: tensor<2x70x136xf32> {xfmr.input = "rb"}, %pt: tensor<40x140xf32> {xfmr.input = "pt"},
                   %xo: tensor<7x13xf32> {xfmr.input = "xo"}, %wo: tensor<19x13xf32> {xfmr.input = "wo"},
                   %xl: tensor<1500x44xf32> {xfmr.input = "xl"}, %wl: tensor<1480x44xf32> {xfmr.input = "wl"},
                   %bl: tensor<1480xf32> {xfmr.input = "bl"}, %al: tensor<44x1500xf32> {xfmr.input = "al"},
                   %ml: tensor<44x1480xf32> {xfmr.input = "ml"},
                   %xs: tensor<1x1x200xf32> {xfmr.input = "xs"}, %ws: tensor<200x37xf32> {xfmr.input = "ws"},
                   %bs: tensor<37xf32> {xfmr.input = "bs"}, %rs: tensor<1x1x37xf32> {xfmr.input = "rs"},
                   %xm: tensor<6x200xf32> {xfmr.input = "xm"}, %wst: tensor<37x200xf32> {xfmr.input = "wst"},
                   %xd: tensor<19x1024xf32> {xfmr.input = "xd"}, %wd: tensor<1024x40xf32> {xfmr.input = "wd"},
                   %xk8: tensor<8x72xf32> {xfmr.input = "xk8"}, %wk8: tensor<72x132xf32> {xfmr.input = "wk8"},
                   %bk8: tensor<132xf32> {xfmr.input = "bk8"},
                   %xq: tensor<16x100xf32> {xfmr.input = "xq"}, %wq: tensor<45x100xf32> {xfmr.input = "wq"},
                   %bq: tensor<45xf32> {xfmr.input = "bq"}, %rq: tensor<16x45xf32> {xfmr.input = "rq"})
    -> (tensor<3x5x36xf32> {xfmr.output = "linear_bias"}, tensor<3x5x36xf32> {xfmr.output = "linear_nk"},
        tensor<3x5x36xf32> {xfmr.output = "fused_relu"}, tensor<3x5x36xf32> {xfmr.output = "fused_gelu"},
        tensor<3x5x36xf32> {xfmr.output = "fused_gelu_tanh_residual"}, tensor<3x5x36xf32> {xfmr.output = "fused_none_nk"},
        tensor<2x3x5x6xf32> {xfmr.output = "matmul_broadcast"}, tensor<2x3x5x6xf32> {xfmr.output = "matmul_transposed"},
        tensor<2x70x136xf32> {xfmr.output = "wide_gelu"}, tensor<2x70x136xf32> {xfmr.output = "wide_nk_residual"},
        tensor<140x136xf32> {xfmr.output = "wide_tn"}, tensor<7x19xf32> {xfmr.output = "odd_nk"},
        tensor<1500x1480xf32> {xfmr.output = "large_nt"}, tensor<1500x1480xf32> {xfmr.output = "large_tn"},
        tensor<1x1x37xf32> {xfmr.output = "skinny_silu_residual"},
        tensor<6x37xf32> {xfmr.output = "skinny_nk_tanh"}, tensor<19x40xf32> {xfmr.output = "deep_relu"},
        tensor<8x132xf32> {xfmr.output = "skinny_kn_gelu"},
        tensor<16x45xf32> {xfmr.output = "batch_nk_gelu_residual"}) {
  %0 = xfmr.linear %x, %w, %bias : (tensor<3x5x24xf32>, tensor<24x36xf32>, tensor<36xf32>) -> tensor<3x5x36xf32>
  %1 = xfmr.linear %x, %wt {transpose_weight} : (tensor<3x5x24xf32>, tensor<36x24xf32>) -> tensor<3x5x36xf32>
  %2 = xfmr.fused_linear %x, %w bias(%bias) {activation = #xfmr.activation<relu>} : (tensor<3x5x24xf32>, tensor<24x36xf32>, tensor<36xf32>) -> tensor<3x5x36xf32>
  %3 = xfmr.fused_linear %x, %w bias(%bias) {activation = #xfmr.activation<gelu>} : (tensor<3x5x24xf32>, tensor<24x36xf32>, tensor<36xf32>) -> tensor<3x5x36xf32>
  %4 = xfmr.fused_linear %x, %w bias(%bias) residual(%res) {activation = #xfmr.activation<gelu_tanh>}
       : (tensor<3x5x24xf32>, tensor<24x36xf32>, tensor<36xf32>, tensor<3x5x36xf32>) -> tensor<3x5x36xf32>
  %5 = xfmr.fused_linear %x, %wt residual(%res) {transpose_weight} : (tensor<3x5x24xf32>, tensor<36x24xf32>, tensor<3x5x36xf32>) -> tensor<3x5x36xf32>
  %6 = xfmr.matmul %a, %m : (tensor<2x1x5x4xf32>, tensor<3x4x6xf32>) -> tensor<2x3x5x6xf32>
  %7 = xfmr.matmul %a, %n {transpose_rhs} : (tensor<2x1x5x4xf32>, tensor<2x3x6x4xf32>) -> tensor<2x3x5x6xf32>
  %8 = xfmr.fused_linear %xb, %wb bias(%bb) {activation = #xfmr.activation<gelu>} : (tensor<2x70x40xf32>, tensor<40x136xf32>, tensor<136xf32>) -> tensor<2x70x136xf32>
  %9 = xfmr.fused_linear %xb, %wbt residual(%rb) {transpose_weight} : (tensor<2x70x40xf32>, tensor<136x40xf32>, tensor<2x70x136xf32>) -> tensor<2x70x136xf32>
  %10 = xfmr.matmul %pt, %wb {transpose_lhs} : (tensor<40x140xf32>, tensor<40x136xf32>) -> tensor<140x136xf32>
  %11 = xfmr.linear %xo, %wo {transpose_weight} : (tensor<7x13xf32>, tensor<19x13xf32>) -> tensor<7x19xf32>
  %12 = xfmr.linear %xl, %wl, %bl {transpose_weight} : (tensor<1500x44xf32>, tensor<1480x44xf32>, tensor<1480xf32>) -> tensor<1500x1480xf32>
  %13 = xfmr.matmul %al, %ml {transpose_lhs} : (tensor<44x1500xf32>, tensor<44x1480xf32>) -> tensor<1500x1480xf32>
  %14 = xfmr.fused_linear %xs, %ws bias(%bs) residual(%rs) {activation = #xfmr.activation<silu>}
        : (tensor<1x1x200xf32>, tensor<200x37xf32>, tensor<37xf32>, tensor<1x1x37xf32>) -> tensor<1x1x37xf32>
  %15 = xfmr.fused_linear %xm, %wst bias(%bs) {activation = #xfmr.activation<tanh>, transpose_weight}
        : (tensor<6x200xf32>, tensor<37x200xf32>, tensor<37xf32>) -> tensor<6x37xf32>
  %16 = xfmr.fused_linear %xd, %wd {activation = #xfmr.activation<relu>} : (tensor<19x1024xf32>, tensor<1024x40xf32>) -> tensor<19x40xf32>
  %17 = xfmr.fused_linear %xk8, %wk8 bias(%bk8) {activation = #xfmr.activation<gelu>} : (tensor<8x72xf32>, tensor<72x132xf32>, tensor<132xf32>) -> tensor<8x132xf32>
  %18 = xfmr.fused_linear %xq, %wq bias(%bq) residual(%rq) {activation = #xfmr.activation<gelu_tanh>, transpose_weight}
        : (tensor<16x100xf32>, tensor<45x100xf32>, tensor<45xf32>, tensor<16x45xf32>) -> tensor<16x45xf32>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18 : tensor<3x5x36xf32>, tensor<3x5x36xf32>, tensor<3x5x36xf32>, tensor<3x5x36xf32>, tensor<3x5x36xf32>, tensor<3x5x36xf32>, tensor<2x3x5x6xf32>, tensor<2x3x5x6xf32>, tensor<2x70x136xf32>, tensor<2x70x136xf32>, tensor<140x136xf32>, tensor<7x19xf32>, tensor<1500x1480xf32>, tensor<1500x1480xf32>, tensor<1x1x37xf32>, tensor<6x37xf32>, tensor<19x40xf32>, tensor<8x132xf32>, tensor<16x45xf32>
}
