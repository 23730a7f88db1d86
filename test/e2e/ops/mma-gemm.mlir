// bf16 GEMMs large enough for the GPU's 128 x 128 tiles (12 x 12 blocks),
// with M, N and K tails: a linear with its weight stored [N, K] (factors
// staged 16 bytes at a time) and a product with a transposed left factor
// of 1500 columns (rows of the tiles along K, staged element by element:
// 1500 is not a multiple of 8). The GPU kernels run emulated on the CPU, in
// both thread orders, and as CPU kernels; against float64 PyTorch storing
// the same bf16 roundings, within two units in the last place (8e-3 of the
// largest value). A third, deep along K (11 stages of 32, through the
// kernel's 4 shared buffers), reuses each buffer: emulating sm_90a, its
// copies and warpgroup MMAs are checked to be ordered as a GPU needs them.
// test/e2e/ops/low-precision.mlir has the 64 x 64 tiles.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %testlib/ops.py generate mma_gemm %t/inputs.safetensors
// RUN: xfmrc %s -o %t/model
// RUN: %t/model --inputs=%t/inputs.safetensors --output=%t/outputs.safetensors
// The kernels for sm_90a (one warpgroup a block, wgmma.mma_async from
// tiles of core matrices), emulated, each phase's threads last to first.
// RUN: xfmrc %s --emulate-gpu-kernels --reverse-gpu-threads --gpu-arch=sm_90a -o %t/gpu-emulated-sm90a
// RUN: %t/gpu-emulated-sm90a --inputs=%t/inputs.safetensors --output=%t/outputs-sm90a.safetensors
// RUN: %python %testlib/ops.py check mma_gemm %t/inputs.safetensors %t/outputs-sm90a.safetensors | FileCheck %s
// RUN: %python %testlib/ops.py check mma_gemm %t/inputs.safetensors %t/outputs.safetensors | FileCheck %s
// RUN: xfmrc %s --emulate-gpu-kernels -o %t/gpu-emulated
// RUN: %t/gpu-emulated --inputs=%t/inputs.safetensors --output=%t/outputs-gpu.safetensors
// RUN: %python %testlib/ops.py check mma_gemm %t/inputs.safetensors %t/outputs-gpu.safetensors | FileCheck %s
// RUN: xfmrc %s --emulate-gpu-kernels --reverse-gpu-threads -o %t/gpu-reversed
// RUN: %t/gpu-reversed --inputs=%t/inputs.safetensors --output=%t/outputs-reversed.safetensors
// RUN: %python %testlib/ops.py check mma_gemm %t/inputs.safetensors %t/outputs-reversed.safetensors | FileCheck %s
// CHECK: PASS: nt_wide
// CHECK: PASS: tn_wide
// CHECK: PASS: nt_deep

func.func @forward(%x: tensor<1500x72xbf16> {xfmr.input = "x"}, %w: tensor<1480x72xbf16> {xfmr.input = "w"},
                   %b: tensor<1480xbf16> {xfmr.input = "b"}, %at: tensor<72x1500xbf16> {xfmr.input = "at"},
                   %m: tensor<72x1480xbf16> {xfmr.input = "m"},
                   %xd: tensor<200x344xbf16> {xfmr.input = "xd"}, %wd: tensor<136x344xbf16> {xfmr.input = "wd"})
    -> (tensor<1500x1480xbf16> {xfmr.output = "nt_wide"}, tensor<1500x1480xbf16> {xfmr.output = "tn_wide"},
        tensor<200x136xbf16> {xfmr.output = "nt_deep"}) {
  %y = xfmr.fused_linear %x, %w bias(%b) {transpose_weight}
      : (tensor<1500x72xbf16>, tensor<1480x72xbf16>, tensor<1480xbf16>) -> tensor<1500x1480xbf16>
  %p = xfmr.matmul %at, %m {transpose_lhs} : (tensor<72x1500xbf16>, tensor<72x1480xbf16>) -> tensor<1500x1480xbf16>
  %d = xfmr.matmul %xd, %wd {transpose_rhs} : (tensor<200x344xbf16>, tensor<136x344xbf16>) -> tensor<200x136xbf16>
  return %y, %p, %d : tensor<1500x1480xbf16>, tensor<1500x1480xbf16>, tensor<200x136xbf16>
}
