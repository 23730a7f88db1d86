// softmax, layer_norm and fused_add_layer_norm in float64 PyTorch terms, on
// rows that break naive formulas: logits of +-1e4, an all -inf row, and
// layer-norm rows with a mean of 1e3.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %testlib/ops.py generate normalization %t/inputs.safetensors
// RUN: xfmrc %s -o %t/model
// RUN: %t/model --inputs=%t/inputs.safetensors --output=%t/outputs.safetensors
// RUN: %python %testlib/ops.py check normalization %t/inputs.safetensors %t/outputs.safetensors | FileCheck %s
// The AVX-512 code shape (16 lanes, 32 registers), run here as split vectors.
// RUN: xfmrc %s --vector-lanes=16 -o %t/model16
// RUN: %t/model16 --inputs=%t/inputs.safetensors --output=%t/outputs16.safetensors
// RUN: %python %testlib/ops.py check normalization %t/inputs.safetensors %t/outputs16.safetensors | FileCheck %s
// The GPU row kernels (a block per row, tree reductions through shared
// memory), their thread blocks run as loops on the CPU.
// RUN: xfmrc %s --emulate-gpu-kernels -o %t/gpu-emulated
// RUN: %t/gpu-emulated --inputs=%t/inputs.safetensors --output=%t/outputs-gpu.safetensors
// RUN: %python %testlib/ops.py check normalization %t/inputs.safetensors %t/outputs-gpu.safetensors | FileCheck %s
// Each phase's threads last to first: a race between threads of a phase
// gives different results in one of the two orders.
// RUN: xfmrc %s --emulate-gpu-kernels --reverse-gpu-threads -o %t/gpu-reversed
// RUN: %t/gpu-reversed --inputs=%t/inputs.safetensors --output=%t/outputs-reversed.safetensors
// RUN: %python %testlib/ops.py check normalization %t/inputs.safetensors %t/outputs-reversed.safetensors | FileCheck %s
// CHECK: PASS: softmax_last
// CHECK: PASS: softmax_first
// CHECK: PASS: layer_norm
// CHECK: PASS: layer_norm_plain
// CHECK: PASS: add_ln_sum
// CHECK: PASS: add_ln
// CHECK: PASS: softmax_wide
// CHECK: PASS: layer_norm_wide

func.func @forward(%x: tensor<6x50xf32> {xfmr.input = "x"}, %y: tensor<5x3x7xf32> {xfmr.input = "y"},
                   %h: tensor<4x9x40xf32> {xfmr.input = "h"}, %r: tensor<4x9x40xf32> {xfmr.input = "r"},
                   %g: tensor<40xf32> {xfmr.input = "g"}, %b: tensor<40xf32> {xfmr.input = "b"},
                   %xw: tensor<3x600xf32> {xfmr.input = "xw"}, %hw: tensor<5x520xf32> {xfmr.input = "hw"},
                   %gw: tensor<520xf32> {xfmr.input = "gw"}, %bw: tensor<520xf32> {xfmr.input = "bw"})
    -> (tensor<6x50xf32> {xfmr.output = "softmax_last"}, tensor<5x3x7xf32> {xfmr.output = "softmax_first"},
        tensor<4x9x40xf32> {xfmr.output = "layer_norm"}, tensor<4x9x40xf32> {xfmr.output = "layer_norm_plain"},
        tensor<4x9x40xf32> {xfmr.output = "add_ln_sum"}, tensor<4x9x40xf32> {xfmr.output = "add_ln"},
        tensor<3x600xf32> {xfmr.output = "softmax_wide"}, tensor<5x520xf32> {xfmr.output = "layer_norm_wide"}) {
  %s0 = xfmr.softmax %x : tensor<6x50xf32>
  %s1 = xfmr.softmax %y {axis = 0} : tensor<5x3x7xf32>
  %l0 = xfmr.layer_norm %h, %g, %b {epsilon = 1.0e-5 : f64} : (tensor<4x9x40xf32>, tensor<40xf32>, tensor<40xf32>) -> tensor<4x9x40xf32>
  %l1 = xfmr.layer_norm %h {epsilon = 1.0e-3 : f64} : (tensor<4x9x40xf32>) -> tensor<4x9x40xf32>
  %sum, %l2 = xfmr.fused_add_layer_norm %h, %r, %g, %b {epsilon = 1.0e-5 : f64}
      : (tensor<4x9x40xf32>, tensor<4x9x40xf32>, tensor<40xf32>, tensor<40xf32>) -> (tensor<4x9x40xf32>, tensor<4x9x40xf32>)
  %s2 = xfmr.softmax %xw : tensor<3x600xf32>
  %l3 = xfmr.layer_norm %hw, %gw, %bw {epsilon = 1.0e-5 : f64} : (tensor<5x520xf32>, tensor<520xf32>, tensor<520xf32>) -> tensor<5x520xf32>
  return %s0, %s1, %l0, %l1, %sum, %l2, %s2, %l3 : tensor<6x50xf32>, tensor<5x3x7xf32>, tensor<4x9x40xf32>, tensor<4x9x40xf32>, tensor<4x9x40xf32>, tensor<4x9x40xf32>, tensor<3x600xf32>, tensor<5x520xf32>
}
