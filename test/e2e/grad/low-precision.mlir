// Gradients of bf16 and f16 attentions (xfmr-compute-in-f32: the backward
// reads the stored q, k, v, output and log-sum-exp): causal self-attention
// with a padding mask (head dim 64; the GPU's tensor-core kernels stage it
// 16 bytes at a time, several query blocks and key tiles, tiles some rows
// see in part), cross-attention with a bias (seq_q 70, seq_k 130, head dim
// 36: element by element), and causal cross-attention without other masks
// (seq_q 100, seq_k 150: tiles with and without the causal mask; head dim
// 80, which the tensor-core backward streams in tiles of 32 rows), and a
// causal head-dim-128 self-attention (seq 90), whose backward kernels read
// their rows' fragments (Q and dO, K and V) from shared memory. Against float64 PyTorch autograd on the
// stored inputs, each forward result rounded as the model stores it: the
// backward's own roundings (the stored gradients, and on tensor cores the
// probabilities and score gradients rounded to bf16 / f16 as factors) make
// the gradients differ by a few units in the last place (tolerances in
// test/e2e_lib/ops.py).
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %testlib/ops.py generate backward_bf16 %t/inputs.safetensors
// RUN: xfmrc %s --entry=loss_bf16 --grad --grad-inputs=q_bf16,k_bf16,v_bf16,cq_bf16,ck_bf16,cv_bf16,lq_bf16,lk_bf16,lv_bf16,hq_bf16,hk_bf16,hv_bf16 -o %t/bf16
// RUN: %t/bf16 --inputs=%t/inputs.safetensors --output=%t/bf16.safetensors
// RUN: %python %testlib/ops.py check backward_bf16 %t/inputs.safetensors %t/bf16.safetensors | FileCheck %s --check-prefix=BF16
// RUN: xfmrc %s --entry=loss_f16 --grad --grad-inputs=q_f16,k_f16,v_f16,cq_f16,ck_f16,cv_f16,lq_f16,lk_f16,lv_f16,hq_f16,hk_f16,hv_f16 -o %t/f16
// RUN: %t/f16 --inputs=%t/inputs.safetensors --output=%t/f16.safetensors
// RUN: %python %testlib/ops.py check backward_f16 %t/inputs.safetensors %t/f16.safetensors | FileCheck %s --check-prefix=F16
// The GPU kernels, their thread blocks run as loops on the CPU, in both
// thread orders.
// RUN: xfmrc %s --entry=loss_bf16 --grad --grad-inputs=q_bf16,k_bf16,v_bf16,cq_bf16,ck_bf16,cv_bf16,lq_bf16,lk_bf16,lv_bf16,hq_bf16,hk_bf16,hv_bf16 --emulate-gpu-kernels -o %t/bf16-gpu
// RUN: %t/bf16-gpu --inputs=%t/inputs.safetensors --output=%t/bf16-gpu.safetensors
// RUN: %python %testlib/ops.py check backward_bf16 %t/inputs.safetensors %t/bf16-gpu.safetensors | FileCheck %s --check-prefix=BF16
// RUN: xfmrc %s --entry=loss_f16 --grad --grad-inputs=q_f16,k_f16,v_f16,cq_f16,ck_f16,cv_f16,lq_f16,lk_f16,lv_f16,hq_f16,hk_f16,hv_f16 --emulate-gpu-kernels --reverse-gpu-threads -o %t/f16-gpu
// RUN: %t/f16-gpu --inputs=%t/inputs.safetensors --output=%t/f16-gpu.safetensors
// RUN: %python %testlib/ops.py check backward_f16 %t/inputs.safetensors %t/f16-gpu.safetensors | FileCheck %s --check-prefix=F16
// ... and built for sm_90a (every product a warpgroup MMA, which reads its
// shared operands through matrix descriptors - decoded the same way when
// emulated).
// RUN: xfmrc %s --entry=loss_bf16 --grad --grad-inputs=q_bf16,k_bf16,v_bf16,cq_bf16,ck_bf16,cv_bf16,lq_bf16,lk_bf16,lv_bf16,hq_bf16,hk_bf16,hv_bf16 --emulate-gpu-kernels --gpu-arch=sm_90a --reverse-gpu-threads -o %t/bf16-sm90a
// RUN: %t/bf16-sm90a --inputs=%t/inputs.safetensors --output=%t/bf16-sm90a.safetensors
// RUN: %python %testlib/ops.py check backward_bf16 %t/inputs.safetensors %t/bf16-sm90a.safetensors | FileCheck %s --check-prefix=BF16
// BF16-DAG: PASS: loss
// BF16-DAG: PASS: grad:q_bf16
// BF16-DAG: PASS: grad:k_bf16
// BF16-DAG: PASS: grad:v_bf16
// BF16-DAG: PASS: grad:cq_bf16
// BF16-DAG: PASS: grad:ck_bf16
// BF16-DAG: PASS: grad:cv_bf16
// BF16-DAG: PASS: grad:lq_bf16
// BF16-DAG: PASS: grad:lk_bf16
// BF16-DAG: PASS: grad:lv_bf16
// BF16-DAG: PASS: grad:hq_bf16
// BF16-DAG: PASS: grad:hk_bf16
// BF16-DAG: PASS: grad:hv_bf16
// BF16-NOT: FAIL
// F16-DAG: PASS: loss
// F16-DAG: PASS: grad:q_f16
// F16-DAG: PASS: grad:k_f16
// F16-DAG: PASS: grad:v_f16
// F16-DAG: PASS: grad:cq_f16
// F16-DAG: PASS: grad:ck_f16
// F16-DAG: PASS: grad:cv_f16
// F16-DAG: PASS: grad:lq_f16
// F16-DAG: PASS: grad:lk_f16
// F16-DAG: PASS: grad:lv_f16
// F16-DAG: PASS: grad:hq_f16
// F16-DAG: PASS: grad:hk_f16
// F16-DAG: PASS: grad:hv_f16
// F16-NOT: FAIL

func.func @loss_bf16(
    %q: tensor<2x150x2x64xbf16> {xfmr.input = "q_bf16"}, %k: tensor<2x150x2x64xbf16> {xfmr.input = "k_bf16"},
    %v: tensor<2x150x2x64xbf16> {xfmr.input = "v_bf16"}, %r1: tensor<2x150x2x64xbf16> {xfmr.input = "r1_bf16"},
    %cq: tensor<1x2x70x36xbf16> {xfmr.input = "cq_bf16"}, %ck: tensor<1x2x130x36xbf16> {xfmr.input = "ck_bf16"},
    %cv: tensor<1x2x130x36xbf16> {xfmr.input = "cv_bf16"}, %bias: tensor<1x1x70x130xbf16> {xfmr.input = "bias_bf16"},
    %r2: tensor<1x2x70x36xbf16> {xfmr.input = "r2_bf16"}, %pad: tensor<2x150xi1> {xfmr.input = "pad_bf16"},
    %lq: tensor<1x2x100x80xbf16> {xfmr.input = "lq_bf16"}, %lk: tensor<1x2x150x80xbf16> {xfmr.input = "lk_bf16"},
    %lv: tensor<1x2x150x80xbf16> {xfmr.input = "lv_bf16"}, %r3: tensor<1x2x100x80xbf16> {xfmr.input = "r3_bf16"},
    %hq: tensor<1x2x90x128xbf16> {xfmr.input = "hq_bf16"}, %hk: tensor<1x2x90x128xbf16> {xfmr.input = "hk_bf16"},
    %hv: tensor<1x2x90x128xbf16> {xfmr.input = "hv_bf16"}, %r4: tensor<1x2x90x128xbf16> {xfmr.input = "r4_bf16"})
    -> (tensor<bf16> {xfmr.output = "loss_bf16"}) {
  %a = xfmr.fused_attention %q, %k, %v padding_mask(%pad) {causal, scale = 0.125 : f64}
       : (tensor<2x150x2x64xbf16>, tensor<2x150x2x64xbf16>, tensor<2x150x2x64xbf16>, tensor<2x150xi1>) -> tensor<2x150x2x64xbf16>
  %p1 = xfmr.mul %a, %r1 : (tensor<2x150x2x64xbf16>, tensor<2x150x2x64xbf16>) -> tensor<2x150x2x64xbf16>
  %f1 = xfmr.reshape %p1 : (tensor<2x150x2x64xbf16>) -> tensor<38400xbf16>
  %s1 = xfmr.reduce %f1 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<38400xbf16>) -> tensor<1xbf16>
  %b = xfmr.fused_attention %cq, %ck, %cv attn_bias(%bias) {scale = 0.16666667 : f64, layout = #xfmr.layout<bhsd>}
       : (tensor<1x2x70x36xbf16>, tensor<1x2x130x36xbf16>, tensor<1x2x130x36xbf16>, tensor<1x1x70x130xbf16>) -> tensor<1x2x70x36xbf16>
  %p2 = xfmr.mul %b, %r2 : (tensor<1x2x70x36xbf16>, tensor<1x2x70x36xbf16>) -> tensor<1x2x70x36xbf16>
  %f2 = xfmr.reshape %p2 : (tensor<1x2x70x36xbf16>) -> tensor<5040xbf16>
  %s2 = xfmr.reduce %f2 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<5040xbf16>) -> tensor<1xbf16>
  %c = xfmr.fused_attention %lq, %lk, %lv {causal, scale = 0.125 : f64, layout = #xfmr.layout<bhsd>}
       : (tensor<1x2x100x80xbf16>, tensor<1x2x150x80xbf16>, tensor<1x2x150x80xbf16>) -> tensor<1x2x100x80xbf16>
  %p3 = xfmr.mul %c, %r3 : (tensor<1x2x100x80xbf16>, tensor<1x2x100x80xbf16>) -> tensor<1x2x100x80xbf16>
  %f3 = xfmr.reshape %p3 : (tensor<1x2x100x80xbf16>) -> tensor<16000xbf16>
  %s3 = xfmr.reduce %f3 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<16000xbf16>) -> tensor<1xbf16>
  %s12 = xfmr.add %s1, %s2 : (tensor<1xbf16>, tensor<1xbf16>) -> tensor<1xbf16>
  %d = xfmr.fused_attention %hq, %hk, %hv {causal, scale = 0.09 : f64, layout = #xfmr.layout<bhsd>}
       : (tensor<1x2x90x128xbf16>, tensor<1x2x90x128xbf16>, tensor<1x2x90x128xbf16>) -> tensor<1x2x90x128xbf16>
  %p4 = xfmr.mul %d, %r4 : (tensor<1x2x90x128xbf16>, tensor<1x2x90x128xbf16>) -> tensor<1x2x90x128xbf16>
  %f4 = xfmr.reshape %p4 : (tensor<1x2x90x128xbf16>) -> tensor<23040xbf16>
  %s4 = xfmr.reduce %f4 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<23040xbf16>) -> tensor<1xbf16>
  %s123 = xfmr.add %s12, %s3 : (tensor<1xbf16>, tensor<1xbf16>) -> tensor<1xbf16>
  %total = xfmr.add %s123, %s4 : (tensor<1xbf16>, tensor<1xbf16>) -> tensor<1xbf16>
  %loss = xfmr.reshape %total : (tensor<1xbf16>) -> tensor<bf16>
  return %loss : tensor<bf16>
}

func.func @loss_f16(
    %q: tensor<2x150x2x64xf16> {xfmr.input = "q_f16"}, %k: tensor<2x150x2x64xf16> {xfmr.input = "k_f16"},
    %v: tensor<2x150x2x64xf16> {xfmr.input = "v_f16"}, %r1: tensor<2x150x2x64xf16> {xfmr.input = "r1_f16"},
    %cq: tensor<1x2x70x36xf16> {xfmr.input = "cq_f16"}, %ck: tensor<1x2x130x36xf16> {xfmr.input = "ck_f16"},
    %cv: tensor<1x2x130x36xf16> {xfmr.input = "cv_f16"}, %bias: tensor<1x1x70x130xf16> {xfmr.input = "bias_f16"},
    %r2: tensor<1x2x70x36xf16> {xfmr.input = "r2_f16"}, %pad: tensor<2x150xi1> {xfmr.input = "pad_f16"},
    %lq: tensor<1x2x100x80xf16> {xfmr.input = "lq_f16"}, %lk: tensor<1x2x150x80xf16> {xfmr.input = "lk_f16"},
    %lv: tensor<1x2x150x80xf16> {xfmr.input = "lv_f16"}, %r3: tensor<1x2x100x80xf16> {xfmr.input = "r3_f16"},
    %hq: tensor<1x2x90x128xf16> {xfmr.input = "hq_f16"}, %hk: tensor<1x2x90x128xf16> {xfmr.input = "hk_f16"},
    %hv: tensor<1x2x90x128xf16> {xfmr.input = "hv_f16"}, %r4: tensor<1x2x90x128xf16> {xfmr.input = "r4_f16"})
    -> (tensor<f16> {xfmr.output = "loss_f16"}) {
  %a = xfmr.fused_attention %q, %k, %v padding_mask(%pad) {causal, scale = 0.125 : f64}
       : (tensor<2x150x2x64xf16>, tensor<2x150x2x64xf16>, tensor<2x150x2x64xf16>, tensor<2x150xi1>) -> tensor<2x150x2x64xf16>
  %p1 = xfmr.mul %a, %r1 : (tensor<2x150x2x64xf16>, tensor<2x150x2x64xf16>) -> tensor<2x150x2x64xf16>
  %f1 = xfmr.reshape %p1 : (tensor<2x150x2x64xf16>) -> tensor<38400xf16>
  %s1 = xfmr.reduce %f1 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<38400xf16>) -> tensor<1xf16>
  %b = xfmr.fused_attention %cq, %ck, %cv attn_bias(%bias) {scale = 0.16666667 : f64, layout = #xfmr.layout<bhsd>}
       : (tensor<1x2x70x36xf16>, tensor<1x2x130x36xf16>, tensor<1x2x130x36xf16>, tensor<1x1x70x130xf16>) -> tensor<1x2x70x36xf16>
  %p2 = xfmr.mul %b, %r2 : (tensor<1x2x70x36xf16>, tensor<1x2x70x36xf16>) -> tensor<1x2x70x36xf16>
  %f2 = xfmr.reshape %p2 : (tensor<1x2x70x36xf16>) -> tensor<5040xf16>
  %s2 = xfmr.reduce %f2 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<5040xf16>) -> tensor<1xf16>
  %c = xfmr.fused_attention %lq, %lk, %lv {causal, scale = 0.125 : f64, layout = #xfmr.layout<bhsd>}
       : (tensor<1x2x100x80xf16>, tensor<1x2x150x80xf16>, tensor<1x2x150x80xf16>) -> tensor<1x2x100x80xf16>
  %p3 = xfmr.mul %c, %r3 : (tensor<1x2x100x80xf16>, tensor<1x2x100x80xf16>) -> tensor<1x2x100x80xf16>
  %f3 = xfmr.reshape %p3 : (tensor<1x2x100x80xf16>) -> tensor<16000xf16>
  %s3 = xfmr.reduce %f3 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<16000xf16>) -> tensor<1xf16>
  %s12 = xfmr.add %s1, %s2 : (tensor<1xf16>, tensor<1xf16>) -> tensor<1xf16>
  %d = xfmr.fused_attention %hq, %hk, %hv {causal, scale = 0.09 : f64, layout = #xfmr.layout<bhsd>}
       : (tensor<1x2x90x128xf16>, tensor<1x2x90x128xf16>, tensor<1x2x90x128xf16>) -> tensor<1x2x90x128xf16>
  %p4 = xfmr.mul %d, %r4 : (tensor<1x2x90x128xf16>, tensor<1x2x90x128xf16>) -> tensor<1x2x90x128xf16>
  %f4 = xfmr.reshape %p4 : (tensor<1x2x90x128xf16>) -> tensor<23040xf16>
  %s4 = xfmr.reduce %f4 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<23040xf16>) -> tensor<1xf16>
  %s123 = xfmr.add %s12, %s3 : (tensor<1xf16>, tensor<1xf16>) -> tensor<1xf16>
  %total = xfmr.add %s123, %s4 : (tensor<1xf16>, tensor<1xf16>) -> tensor<1xf16>
  %loss = xfmr.reshape %total : (tensor<1xf16>) -> tensor<f16>
  return %loss : tensor<f16>
}
