// The f32 CPU kernels of the backward pass (FlashAttention-2 attention
// backward with causal + padding masks, partial query and key blocks and
// seq_k > seq_q with a bias; a sliding window of 20 over 300 positions,
// whose key blocks skip the query blocks past their window, with soft-capped
// scores, and the last 150 of those queries over the same keys; GEMMs with a transposed left operand for the
// weight gradients; layer-norm and softmax backward, rows of 48 and of 21,
// which leave a tail of lanes, with and without gamma) against PyTorch
// autograd in float64.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %testlib/ops.py generate backward %t/inputs.safetensors
// RUN: xfmrc %s --grad --grad-inputs=q,k,v,cq,ck,cv,x,y,z,wq,wk,wv,wq2 -o %t/grad
// RUN: %t/grad --inputs=%t/inputs.safetensors --weights=%t/inputs.safetensors --output=%t/outputs.safetensors
// RUN: %python %testlib/ops.py check backward %t/inputs.safetensors %t/outputs.safetensors | FileCheck %s
// The AVX-512 code shape (16 lanes, 32 registers), run here as split vectors.
// RUN: xfmrc %s --grad --grad-inputs=q,k,v,cq,ck,cv,x,y,z,wq,wk,wv,wq2 --vector-lanes=16 -o %t/grad16
// RUN: %t/grad16 --inputs=%t/inputs.safetensors --weights=%t/inputs.safetensors --output=%t/outputs16.safetensors
// RUN: %python %testlib/ops.py check backward %t/inputs.safetensors %t/outputs16.safetensors | FileCheck %s
// The GPU kernels (attention forward and its two-kernel backward, GEMMs,
// row kernels), their thread blocks run as loops on the CPU, each phase's
// threads first to last, then last to first.
// RUN: xfmrc %s --grad --grad-inputs=q,k,v,cq,ck,cv,x,y,z,wq,wk,wv,wq2 --emulate-gpu-kernels -o %t/grad-gpu
// RUN: %t/grad-gpu --inputs=%t/inputs.safetensors --weights=%t/inputs.safetensors --output=%t/outputs-gpu.safetensors
// RUN: %python %testlib/ops.py check backward %t/inputs.safetensors %t/outputs-gpu.safetensors | FileCheck %s
// RUN: xfmrc %s --grad --grad-inputs=q,k,v,cq,ck,cv,x,y,z,wq,wk,wv,wq2 --emulate-gpu-kernels --reverse-gpu-threads -o %t/grad-reversed
// RUN: %t/grad-reversed --inputs=%t/inputs.safetensors --weights=%t/inputs.safetensors --output=%t/outputs-reversed.safetensors
// RUN: %python %testlib/ops.py check backward %t/inputs.safetensors %t/outputs-reversed.safetensors | FileCheck %s
// CHECK-DAG: PASS: loss
// CHECK-DAG: PASS: grad:q
// CHECK-DAG: PASS: grad:k
// CHECK-DAG: PASS: grad:v
// CHECK-DAG: PASS: grad:cq
// CHECK-DAG: PASS: grad:ck
// CHECK-DAG: PASS: grad:cv
// CHECK-DAG: PASS: grad:x
// CHECK-DAG: PASS: grad:w1
// CHECK-DAG: PASS: grad:b1
// CHECK-DAG: PASS: grad:w2
// CHECK-DAG: PASS: grad:gamma
// CHECK-DAG: PASS: grad:beta
// CHECK-DAG: PASS: grad:y
// CHECK-DAG: PASS: grad:gamma2
// CHECK-DAG: PASS: grad:beta2
// CHECK-DAG: PASS: grad:z
// CHECK-DAG: PASS: grad:wq
// CHECK-DAG: PASS: grad:wk
// CHECK-DAG: PASS: grad:wv
// CHECK-DAG: PASS: grad:wq2
// CHECK-NOT: FAIL

func.func @loss(%q: tensor<2x150x2x32xf32> {xfmr.input = "q"}, %k: tensor<2x150x2x32xf32> {xfmr.input = "k"},
                %v: tensor<2x150x2x32xf32> {xfmr.input = "v"}, %pad: tensor<2x150xi1> {xfmr.input = "pad"},
                %cq: tensor<1x2x40x72xf32> {xfmr.input = "cq"}, %ck: tensor<1x2x100x72xf32> {xfmr.input = "ck"},
                %cv: tensor<1x2x100x72xf32> {xfmr.input = "cv"}, %bias: tensor<1x1x40x100xf32> {xfmr.input = "bias"},
                %x: tensor<3x37x48xf32> {xfmr.input = "x"}, %w1: tensor<48x80xf32> {xfmr.param = "w1"},
                %b1: tensor<80xf32> {xfmr.param = "b1"}, %w2: tensor<48x80xf32> {xfmr.param = "w2"},
                %gamma: tensor<48xf32> {xfmr.param = "gamma"}, %beta: tensor<48xf32> {xfmr.param = "beta"},
                %r1: tensor<2x150x2x32xf32> {xfmr.input = "r1"}, %r2: tensor<1x2x40x72xf32> {xfmr.input = "r2"},
                %r3: tensor<3x37x48xf32> {xfmr.input = "r3"}, %y: tensor<5x21xf32> {xfmr.input = "y"},
                %gamma2: tensor<21xf32> {xfmr.param = "gamma2"}, %beta2: tensor<21xf32> {xfmr.param = "beta2"},
                %r4: tensor<5x21xf32> {xfmr.input = "r4"}, %r5: tensor<5x21xf32> {xfmr.input = "r5"},
                %z: tensor<3x9x37xf32> {xfmr.input = "z"}, %zt: tensor<3x9xi32> {xfmr.input = "zt"},
                %wq: tensor<1x300x2x16xf32> {xfmr.input = "wq"}, %wk: tensor<1x300x2x16xf32> {xfmr.input = "wk"},
                %wv: tensor<1x300x2x16xf32> {xfmr.input = "wv"}, %r6: tensor<1x300x2x16xf32> {xfmr.input = "r6"},
                %wq2: tensor<1x150x2x16xf32> {xfmr.input = "wq2"}, %r7: tensor<1x150x2x16xf32> {xfmr.input = "r7"})
    -> (tensor<f32> {xfmr.output = "loss"}) {
  %a = xfmr.fused_attention %q, %k, %v padding_mask(%pad) {causal, scale = 0.17677669 : f64}
       : (tensor<2x150x2x32xf32>, tensor<2x150x2x32xf32>, tensor<2x150x2x32xf32>, tensor<2x150xi1>) -> tensor<2x150x2x32xf32>
  %p1 = xfmr.mul %a, %r1 : (tensor<2x150x2x32xf32>, tensor<2x150x2x32xf32>) -> tensor<2x150x2x32xf32>
  %f1 = xfmr.reshape %p1 : (tensor<2x150x2x32xf32>) -> tensor<19200xf32>
  %s1 = xfmr.reduce %f1 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<19200xf32>) -> tensor<1xf32>

  %b = xfmr.fused_attention %cq, %ck, %cv attn_bias(%bias) {causal, scale = 0.25 : f64, layout = #xfmr.layout<bhsd>}
       : (tensor<1x2x40x72xf32>, tensor<1x2x100x72xf32>, tensor<1x2x100x72xf32>, tensor<1x1x40x100xf32>) -> tensor<1x2x40x72xf32>
  %p2 = xfmr.mul %b, %r2 : (tensor<1x2x40x72xf32>, tensor<1x2x40x72xf32>) -> tensor<1x2x40x72xf32>
  %f2 = xfmr.reshape %p2 : (tensor<1x2x40x72xf32>) -> tensor<5760xf32>
  %s2 = xfmr.reduce %f2 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<5760xf32>) -> tensor<1xf32>

  // LN(x + W2 gelu_tanh(x W1 + b1)) with W2 in [out, in] layout.
  %h = xfmr.linear %x, %w1, %b1 : (tensor<3x37x48xf32>, tensor<48x80xf32>, tensor<80xf32>) -> tensor<3x37x80xf32>
  %g = xfmr.gelu %h {approximate = #xfmr.gelu_approximation<tanh>} : tensor<3x37x80xf32>
  %o = xfmr.linear %g, %w2 {transpose_weight} : (tensor<3x37x80xf32>, tensor<48x80xf32>) -> tensor<3x37x48xf32>
  %sum = xfmr.add %x, %o : (tensor<3x37x48xf32>, tensor<3x37x48xf32>) -> tensor<3x37x48xf32>
  %n = xfmr.layer_norm %sum, %gamma, %beta {epsilon = 1.0e-5 : f64} : (tensor<3x37x48xf32>, tensor<48xf32>, tensor<48xf32>) -> tensor<3x37x48xf32>
  %sm = xfmr.softmax %n : tensor<3x37x48xf32>
  %p3 = xfmr.mul %sm, %r3 : (tensor<3x37x48xf32>, tensor<3x37x48xf32>) -> tensor<3x37x48xf32>
  %f3 = xfmr.reshape %p3 : (tensor<3x37x48xf32>) -> tensor<5328xf32>
  %s3 = xfmr.reduce %f3 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<5328xf32>) -> tensor<1xf32>

  // Rows of 21: softmax(LN(y)) and a norm without gamma.
  %n2 = xfmr.layer_norm %y, %gamma2, %beta2 {epsilon = 1.0e-5 : f64} : (tensor<5x21xf32>, tensor<21xf32>, tensor<21xf32>) -> tensor<5x21xf32>
  %sm2 = xfmr.softmax %n2 : tensor<5x21xf32>
  %p4 = xfmr.mul %sm2, %r4 : (tensor<5x21xf32>, tensor<5x21xf32>) -> tensor<5x21xf32>
  %n3 = xfmr.layer_norm %y {epsilon = 1.0e-3 : f64} : (tensor<5x21xf32>) -> tensor<5x21xf32>
  %p5 = xfmr.mul %n3, %r5 : (tensor<5x21xf32>, tensor<5x21xf32>) -> tensor<5x21xf32>
  %p45 = xfmr.add %p4, %p5 : (tensor<5x21xf32>, tensor<5x21xf32>) -> tensor<5x21xf32>
  %f4 = xfmr.reshape %p45 : (tensor<5x21xf32>) -> tensor<105xf32>
  %s4 = xfmr.reduce %f4 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<105xf32>) -> tensor<1xf32>

  // Cross-entropy over rows of 37 (lane tails at 8 and 16), some targets
  // ignored.
  %ce = xfmr.cross_entropy %z, %zt : (tensor<3x9x37xf32>, tensor<3x9xi32>) -> tensor<f32>
  %s5 = xfmr.reshape %ce : (tensor<f32>) -> tensor<1xf32>

  %w = xfmr.fused_attention %wq, %wk, %wv {causal, window = 20 : i64, softcap = 1.0 : f64, scale = 0.25 : f64}
       : (tensor<1x300x2x16xf32>, tensor<1x300x2x16xf32>, tensor<1x300x2x16xf32>) -> tensor<1x300x2x16xf32>
  %p6 = xfmr.mul %w, %r6 : (tensor<1x300x2x16xf32>, tensor<1x300x2x16xf32>) -> tensor<1x300x2x16xf32>
  %f6 = xfmr.reshape %p6 : (tensor<1x300x2x16xf32>) -> tensor<9600xf32>
  %s6w = xfmr.reduce %f6 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<9600xf32>) -> tensor<1xf32>
  %wa2 = xfmr.fused_attention %wq2, %wk, %wv {causal, window = 20 : i64, scale = 0.25 : f64}
       : (tensor<1x150x2x16xf32>, tensor<1x300x2x16xf32>, tensor<1x300x2x16xf32>) -> tensor<1x150x2x16xf32>
  %p7 = xfmr.mul %wa2, %r7 : (tensor<1x150x2x16xf32>, tensor<1x150x2x16xf32>) -> tensor<1x150x2x16xf32>
  %f7 = xfmr.reshape %p7 : (tensor<1x150x2x16xf32>) -> tensor<4800xf32>
  %s7 = xfmr.reduce %f7 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<4800xf32>) -> tensor<1xf32>
  %s6 = xfmr.add %s6w, %s7 : (tensor<1xf32>, tensor<1xf32>) -> tensor<1xf32>

  %a12 = xfmr.add %s1, %s2 : (tensor<1xf32>, tensor<1xf32>) -> tensor<1xf32>
  %a34 = xfmr.add %s3, %s4 : (tensor<1xf32>, tensor<1xf32>) -> tensor<1xf32>
  %a345 = xfmr.add %a34, %s5 : (tensor<1xf32>, tensor<1xf32>) -> tensor<1xf32>
  %a3456 = xfmr.add %a345, %s6 : (tensor<1xf32>, tensor<1xf32>) -> tensor<1xf32>
  %total = xfmr.add %a12, %a3456 : (tensor<1xf32>, tensor<1xf32>) -> tensor<1xf32>
  %loss = xfmr.reshape %total : (tensor<1xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}
