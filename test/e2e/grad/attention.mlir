// Gradients of fused attention (FlashAttention-2 backward from the saved
// log-sum-exp: causal + padding over two query and key blocks, scores
// soft-capped at 1.5 (about a standard deviation of these); cross
// attention with an additive bias, seq_q != seq_k) and of multi-head
// attention (decomposed, then re-fused: fused QKV causal self-attention and
// cross-attention with key padding) against central finite differences of
// the compiled loss, in float64. The bias is an input the loss is not
// differentiated by.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t
// RUN: xfmrc %s -o %t/loss
// RUN: xfmrc %s --grad --grad-inputs=q,k,v,cq,ck,cv,x,mem,wqkv,bqkv,wo,bo,wq,wk,wv,r1 -o %t/grad
// RUN: %python %testlib/gradcheck.py attention --loss %t/loss --grad %t/grad --workdir %t | FileCheck %s
// CHECK-DAG: PASS: q:
// CHECK-DAG: PASS: k:
// CHECK-DAG: PASS: v:
// CHECK-DAG: PASS: cq:
// CHECK-DAG: PASS: ck:
// CHECK-DAG: PASS: cv:
// CHECK-DAG: PASS: x:
// CHECK-DAG: PASS: mem:
// CHECK-DAG: PASS: wqkv:
// CHECK-DAG: PASS: bqkv:
// CHECK-DAG: PASS: wo:
// CHECK-DAG: PASS: bo:
// CHECK-DAG: PASS: wq:
// CHECK-DAG: PASS: wk:
// CHECK-DAG: PASS: wv:
// CHECK-NOT: FAIL
// The unfused attention's gradient agrees too (the fused backward is not the only path).
// RUN: xfmrc %s --fuse-attention=false -o %t/loss-unfused
// RUN: xfmrc %s --fuse-attention=false --grad --grad-inputs=x,mem,wqkv,wo,wq -o %t/grad-unfused
// RUN: %python %testlib/gradcheck.py attention --loss %t/loss-unfused --grad %t/grad-unfused --workdir %t/unfused | FileCheck %s --check-prefix=UNFUSED
// UNFUSED-DAG: PASS: x:
// UNFUSED-DAG: PASS: mem:
// UNFUSED-DAG: PASS: wqkv:
// UNFUSED-DAG: PASS: wo:
// UNFUSED-DAG: PASS: wq:
// UNFUSED-NOT: FAIL

func.func @loss(%q: tensor<2x70x3x8xf64> {xfmr.input = "q"}, %k: tensor<2x70x3x8xf64> {xfmr.input = "k"},
                %v: tensor<2x70x3x8xf64> {xfmr.input = "v"}, %pad: tensor<2x70xi1> {xfmr.input = "pad"},
                %cq: tensor<1x2x20x8xf64> {xfmr.input = "cq"}, %ck: tensor<1x2x36x8xf64> {xfmr.input = "ck"},
                %cv: tensor<1x2x36x8xf64> {xfmr.input = "cv"}, %bias: tensor<1x2x20x36xf64> {xfmr.input = "bias"},
                %r1: tensor<2x70x3x8xf64> {xfmr.input = "r1"}, %r2: tensor<1x2x20x8xf64> {xfmr.input = "r2"},
                %x: tensor<2x10x16xf64> {xfmr.input = "x"}, %mem: tensor<2x7x16xf64> {xfmr.input = "mem"},
                %wqkv: tensor<16x48xf64> {xfmr.input = "wqkv"}, %bqkv: tensor<48xf64> {xfmr.input = "bqkv"},
                %wo: tensor<16x16xf64> {xfmr.input = "wo"}, %bo: tensor<16xf64> {xfmr.input = "bo"},
                %wq: tensor<16x16xf64> {xfmr.input = "wq"}, %wk: tensor<16x16xf64> {xfmr.input = "wk"},
                %wv: tensor<16x16xf64> {xfmr.input = "wv"}, %xpad: tensor<2x7xi1> {xfmr.input = "xpad"},
                %r3: tensor<2x10x16xf64> {xfmr.input = "r3"}, %r4: tensor<2x10x16xf64> {xfmr.input = "r4"})
    -> (tensor<f64> {xfmr.output = "loss"}) {
  %a = xfmr.fused_attention %q, %k, %v padding_mask(%pad) {causal, scale = 0.35355339 : f64, softcap = 1.5 : f64}
       : (tensor<2x70x3x8xf64>, tensor<2x70x3x8xf64>, tensor<2x70x3x8xf64>, tensor<2x70xi1>) -> tensor<2x70x3x8xf64>
  %p1 = xfmr.mul %a, %r1 : (tensor<2x70x3x8xf64>, tensor<2x70x3x8xf64>) -> tensor<2x70x3x8xf64>
  %f1 = xfmr.reshape %p1 : (tensor<2x70x3x8xf64>) -> tensor<3360xf64>
  %s1 = xfmr.reduce %f1 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<3360xf64>) -> tensor<1xf64>

  %b = xfmr.fused_attention %cq, %ck, %cv attn_bias(%bias) {scale = 0.5 : f64, layout = #xfmr.layout<bhsd>}
       : (tensor<1x2x20x8xf64>, tensor<1x2x36x8xf64>, tensor<1x2x36x8xf64>, tensor<1x2x20x36xf64>) -> tensor<1x2x20x8xf64>
  %p2 = xfmr.mul %b, %r2 : (tensor<1x2x20x8xf64>, tensor<1x2x20x8xf64>) -> tensor<1x2x20x8xf64>
  %f2 = xfmr.reshape %p2 : (tensor<1x2x20x8xf64>) -> tensor<320xf64>
  %s2 = xfmr.reduce %f2 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<320xf64>) -> tensor<1xf64>

  %sa = xfmr.multi_head_attention %x in_proj(%wqkv) in_bias(%bqkv) out_proj(%wo, %bo) {num_heads = 2 : i64, causal}
        : (tensor<2x10x16xf64>, tensor<16x48xf64>, tensor<48xf64>, tensor<16x16xf64>, tensor<16xf64>) -> tensor<2x10x16xf64>
  %p3 = xfmr.mul %sa, %r3 : (tensor<2x10x16xf64>, tensor<2x10x16xf64>) -> tensor<2x10x16xf64>
  %f3 = xfmr.reshape %p3 : (tensor<2x10x16xf64>) -> tensor<320xf64>
  %s3 = xfmr.reduce %f3 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<320xf64>) -> tensor<1xf64>

  %ca = xfmr.multi_head_attention %sa kv(%mem) in_proj(%wq, %wk, %wv) out_proj(%wo) padding_mask(%xpad) {num_heads = 4 : i64, transpose_weights}
        : (tensor<2x10x16xf64>, tensor<2x7x16xf64>, tensor<16x16xf64>, tensor<16x16xf64>, tensor<16x16xf64>, tensor<16x16xf64>, tensor<2x7xi1>) -> tensor<2x10x16xf64>
  %p4 = xfmr.mul %ca, %r4 : (tensor<2x10x16xf64>, tensor<2x10x16xf64>) -> tensor<2x10x16xf64>
  %f4 = xfmr.reshape %p4 : (tensor<2x10x16xf64>) -> tensor<320xf64>
  %s4 = xfmr.reduce %f4 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<320xf64>) -> tensor<1xf64>

  %a12 = xfmr.add %s1, %s2 : (tensor<1xf64>, tensor<1xf64>) -> tensor<1xf64>
  %a34 = xfmr.add %s3, %s4 : (tensor<1xf64>, tensor<1xf64>) -> tensor<1xf64>
  %total = xfmr.add %a12, %a34 : (tensor<1xf64>, tensor<1xf64>) -> tensor<1xf64>
  %loss = xfmr.reshape %total : (tensor<1xf64>) -> tensor<f64>
  return %loss : tensor<f64>
}
