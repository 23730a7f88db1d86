// bf16 attentions over several key tiles of every kind the sm_90a forward's
// software pipeline builds apart: the first tile, then tiles without masks
// (at least two, so that the loop runs), then tiles with masks; 16-byte
// copies (head dim 64) and element-by-element staging (36); not causal
// (a last tile cut by seq_k = 600), and causal with seq_k > seq_q (520 of
// 600: each row sees 80 keys more), whose query blocks split their tiles at
// different places. The products accumulate in f32, the results are
// stored in bf16: against float64 PyTorch storing the same roundings,
// within two units in the last place (8e-3 relative to the largest value),
// on the CPU, and with the GPU kernels emulated on the CPU: the mma.sync
// ones (sm_90) and the warpgroup-MMA ones (sm_90a), their threads last to
// first.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %testlib/ops.py generate long_attention %t/inputs.safetensors
// RUN: xfmrc %s -o %t/model
// RUN: %t/model --inputs=%t/inputs.safetensors --output=%t/outputs.safetensors
// RUN: %python %testlib/ops.py check long_attention %t/inputs.safetensors %t/outputs.safetensors | FileCheck %s
// RUN: xfmrc %s --emulate-gpu-kernels -o %t/gpu-emulated
// RUN: %t/gpu-emulated --inputs=%t/inputs.safetensors --output=%t/outputs-gpu.safetensors
// RUN: %python %testlib/ops.py check long_attention %t/inputs.safetensors %t/outputs-gpu.safetensors | FileCheck %s
// RUN: xfmrc %s --emulate-gpu-kernels --reverse-gpu-threads --gpu-arch=sm_90a -o %t/gpu-emulated-sm90a
// RUN: %t/gpu-emulated-sm90a --inputs=%t/inputs.safetensors --output=%t/outputs-sm90a.safetensors
// RUN: %python %testlib/ops.py check long_attention %t/inputs.safetensors %t/outputs-sm90a.safetensors | FileCheck %s
// CHECK: PASS: long
// CHECK: PASS: long_causal
// CHECK: PASS: long_causal_elements

func.func @forward(
    %q: tensor<1x600x2x64xbf16> {xfmr.input = "q"}, %k: tensor<1x600x2x64xbf16> {xfmr.input = "k"},
    %v: tensor<1x600x2x64xbf16> {xfmr.input = "v"},
    %cq: tensor<1x520x1x64xbf16> {xfmr.input = "cq"}, %ck: tensor<1x600x1x64xbf16> {xfmr.input = "ck"},
    %cv: tensor<1x600x1x64xbf16> {xfmr.input = "cv"},
    %eq: tensor<1x400x1x36xbf16> {xfmr.input = "eq"}, %ek: tensor<1x400x1x36xbf16> {xfmr.input = "ek"},
    %ev: tensor<1x400x1x36xbf16> {xfmr.input = "ev"})
    -> (tensor<1x600x2x64xbf16> {xfmr.output = "long"}, tensor<1x520x1x64xbf16> {xfmr.output = "long_causal"},
        tensor<1x400x1x36xbf16> {xfmr.output = "long_causal_elements"}) {
  %long = xfmr.fused_attention %q, %k, %v {scale = 0.125 : f64}
      : (tensor<1x600x2x64xbf16>, tensor<1x600x2x64xbf16>, tensor<1x600x2x64xbf16>) -> tensor<1x600x2x64xbf16>
  %causal = xfmr.fused_attention %cq, %ck, %cv {causal, scale = 0.125 : f64}
      : (tensor<1x520x1x64xbf16>, tensor<1x600x1x64xbf16>, tensor<1x600x1x64xbf16>) -> tensor<1x520x1x64xbf16>
  %elements = xfmr.fused_attention %eq, %ek, %ev {causal, scale = 0.16666666666666666 : f64}
      : (tensor<1x400x1x36xbf16>, tensor<1x400x1x36xbf16>, tensor<1x400x1x36xbf16>) -> tensor<1x400x1x36xbf16>
  return %long, %causal, %elements : tensor<1x600x2x64xbf16>, tensor<1x520x1x64xbf16>, tensor<1x400x1x36xbf16>
}
