// Gradients of bf16 attentions over many tiles, so that the tensor-core
// backward kernels' shared stages wrap around several times: a causal
// cross-attention with seq_k > seq_q (520 of 600) at head dim 64 (tiles of
// 64 rows: with warpgroup MMAs the dQ kernel's three stages, one tile
// ahead, and the dK/dV kernel's four, two ahead) and a self-attention
// without masks at head dim 96 (tiles of 32 rows: both kernels' four
// stages). Against float64 PyTorch autograd on the stored inputs, each
// forward result rounded as the model stores it, within 8e-3 of the
// largest gradient (the backward's own roundings: test/e2e/grad/
// low-precision.mlir), on the CPU and with the GPU kernels emulated: the
// mma.sync ones (sm_90) and the warpgroup-MMA ones (sm_90a), their threads
// last to first.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %testlib/ops.py generate long_backward %t/inputs.safetensors
// RUN: xfmrc %s --grad --grad-inputs=q,k,v,wq,wk,wv -o %t/model
// RUN: %t/model --inputs=%t/inputs.safetensors --output=%t/outputs.safetensors
// RUN: %python %testlib/ops.py check long_backward %t/inputs.safetensors %t/outputs.safetensors | FileCheck %s
// RUN: xfmrc %s --grad --grad-inputs=q,k,v,wq,wk,wv --emulate-gpu-kernels -o %t/gpu-emulated
// RUN: %t/gpu-emulated --inputs=%t/inputs.safetensors --output=%t/outputs-gpu.safetensors
// RUN: %python %testlib/ops.py check long_backward %t/inputs.safetensors %t/outputs-gpu.safetensors | FileCheck %s
// RUN: xfmrc %s --grad --grad-inputs=q,k,v,wq,wk,wv --emulate-gpu-kernels --reverse-gpu-threads --gpu-arch=sm_90a -o %t/gpu-emulated-sm90a
// RUN: %t/gpu-emulated-sm90a --inputs=%t/inputs.safetensors --output=%t/outputs-sm90a.safetensors
// RUN: %python %testlib/ops.py check long_backward %t/inputs.safetensors %t/outputs-sm90a.safetensors | FileCheck %s
// CHECK-DAG: PASS: loss
// CHECK-DAG: PASS: grad:q
// CHECK-DAG: PASS: grad:k
// CHECK-DAG: PASS: grad:v
// CHECK-DAG: PASS: grad:wq
// CHECK-DAG: PASS: grad:wk
// CHECK-DAG: PASS: grad:wv
// CHECK-NOT: FAIL

func.func @loss(
    %q: tensor<1x520x1x64xbf16> {xfmr.input = "q"}, %k: tensor<1x600x1x64xbf16> {xfmr.input = "k"},
    %v: tensor<1x600x1x64xbf16> {xfmr.input = "v"}, %r1: tensor<1x520x1x64xbf16> {xfmr.input = "r1"},
    %wq: tensor<1x300x1x96xbf16> {xfmr.input = "wq"}, %wk: tensor<1x300x1x96xbf16> {xfmr.input = "wk"},
    %wv: tensor<1x300x1x96xbf16> {xfmr.input = "wv"}, %r2: tensor<1x300x1x96xbf16> {xfmr.input = "r2"})
    -> (tensor<bf16> {xfmr.output = "loss"}) {
  %a = xfmr.fused_attention %q, %k, %v {causal, scale = 0.125 : f64}
       : (tensor<1x520x1x64xbf16>, tensor<1x600x1x64xbf16>, tensor<1x600x1x64xbf16>) -> tensor<1x520x1x64xbf16>
  %p1 = xfmr.mul %a, %r1 : (tensor<1x520x1x64xbf16>, tensor<1x520x1x64xbf16>) -> tensor<1x520x1x64xbf16>
  %f1 = xfmr.reshape %p1 : (tensor<1x520x1x64xbf16>) -> tensor<33280xbf16>
  %s1 = xfmr.reduce %f1 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<33280xbf16>) -> tensor<1xbf16>
  %b = xfmr.fused_attention %wq, %wk, %wv {scale = 0.1 : f64}
       : (tensor<1x300x1x96xbf16>, tensor<1x300x1x96xbf16>, tensor<1x300x1x96xbf16>) -> tensor<1x300x1x96xbf16>
  %p2 = xfmr.mul %b, %r2 : (tensor<1x300x1x96xbf16>, tensor<1x300x1x96xbf16>) -> tensor<1x300x1x96xbf16>
  %f2 = xfmr.reshape %p2 : (tensor<1x300x1x96xbf16>) -> tensor<28800xbf16>
  %s2 = xfmr.reduce %f2 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<28800xbf16>) -> tensor<1xbf16>
  %total = xfmr.add %s1, %s2 : (tensor<1xbf16>, tensor<1xbf16>) -> tensor<1xbf16>
  %loss = xfmr.reshape %total : (tensor<1xbf16>) -> tensor<bf16>
  return %loss : tensor<bf16>
}
