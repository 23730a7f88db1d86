// RUN: xfmr-opt %s | FileCheck %s
// RUN: xfmr-opt %s | xfmr-opt | FileCheck %s
// RUN: xfmr-opt %s --mlir-print-op-generic | xfmr-opt | FileCheck %s

// CHECK-LABEL: func @high_level
func.func @high_level(%ids: tensor<2x8xi32>, %wte: tensor<100x64xf32>, %wpe: tensor<16x64xf32>,
                      %w: tensor<64x256xf32>, %b: tensor<256xf32>, %wt: tensor<32x64xf32>,
                      %g: tensor<64xf32>, %beta: tensor<64xf32>, %t: tensor<2x8xi32>) -> tensor<f32> {
  // CHECK: xfmr.embedding %{{.*}}, %{{.*}} {scale = 8.000000e+00 : f64} : (tensor<2x8xi32>, tensor<100x64xf32>) -> tensor<2x8x64xf32>
  %x = xfmr.embedding %ids, %wte {scale = 8.0 : f64} : (tensor<2x8xi32>, tensor<100x64xf32>) -> tensor<2x8x64xf32>
  // CHECK: xfmr.sinusoidal_position_encoding %{{.*}} : tensor<2x8x64xf32>
  %p = xfmr.sinusoidal_position_encoding %x : tensor<2x8x64xf32>
  // CHECK: xfmr.learned_position_encoding %{{.*}}, %{{.*}} : tensor<2x8x64xf32>, tensor<16x64xf32>
  %q = xfmr.learned_position_encoding %p, %wpe : tensor<2x8x64xf32>, tensor<16x64xf32>
  // CHECK: xfmr.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x8x64xf32>, tensor<64x256xf32>, tensor<256xf32>) -> tensor<2x8x256xf32>
  %h = xfmr.linear %q, %w, %b : (tensor<2x8x64xf32>, tensor<64x256xf32>, tensor<256xf32>) -> tensor<2x8x256xf32>
  // CHECK: xfmr.linear %{{.*}}, %{{.*}} {transpose_weight} : (tensor<2x8x64xf32>, tensor<32x64xf32>) -> tensor<2x8x32xf32>
  %h2 = xfmr.linear %q, %wt {transpose_weight} : (tensor<2x8x64xf32>, tensor<32x64xf32>) -> tensor<2x8x32xf32>
  // CHECK: xfmr.gelu %{{.*}} {approximate = #xfmr.gelu_approximation<tanh>} : tensor<2x8x256xf32>
  %a = xfmr.gelu %h {approximate = #xfmr.gelu_approximation<tanh>} : tensor<2x8x256xf32>
  // CHECK: xfmr.gelu %{{.*}} : tensor<2x8x256xf32>
  %a2 = xfmr.gelu %a : tensor<2x8x256xf32>
  // CHECK: xfmr.relu
  %r = xfmr.relu %a2 : tensor<2x8x256xf32>
  // CHECK: xfmr.softmax %{{.*}} {axis = 1 : i64} : tensor<2x8x256xf32>
  %s = xfmr.softmax %r {axis = 1} : tensor<2x8x256xf32>
  // CHECK: xfmr.dropout %{{.*}} {rate = 1.000000e-01 : f64} : tensor<2x8x64xf32>
  %d = xfmr.dropout %q {rate = 0.1 : f64} : tensor<2x8x64xf32>
  // CHECK: xfmr.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-03 : f64} : (tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  %n = xfmr.layer_norm %d, %g, %beta {epsilon = 1.0e-3 : f64} : (tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  // CHECK: xfmr.layer_norm %{{.*}} : (tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  %n2 = xfmr.layer_norm %n : (tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  %logits = xfmr.linear %n2, %wte {transpose_weight} : (tensor<2x8x64xf32>, tensor<100x64xf32>) -> tensor<2x8x100xf32>
  // CHECK: xfmr.cross_entropy %{{.*}}, %{{.*}} {ignore_index = 0 : i64} : (tensor<2x8x100xf32>, tensor<2x8xi32>) -> tensor<f32>
  %l = xfmr.cross_entropy %logits, %t {ignore_index = 0} : (tensor<2x8x100xf32>, tensor<2x8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func @attention
func.func @attention(%x: tensor<2x8x64xf32>, %mem: tensor<2x6x32xf32>,
                     %wqkv: tensor<64x192xf32>, %bqkv: tensor<192xf32>,
                     %wq: tensor<64x64xf32>, %wkv: tensor<64x32xf32>, %bq: tensor<64xf32>,
                     %wo: tensor<64x64xf32>, %bo: tensor<64xf32>,
                     %pm: tensor<2x8xi1>, %pm6: tensor<2x6xi1>, %bias: tensor<8x6xf32>) -> tensor<2x8x64xf32> {
  // CHECK: xfmr.multi_head_attention %{{.*}} in_proj(%{{.*}}) in_bias(%{{.*}}) out_proj(%{{.*}}, %{{.*}}) padding_mask(%{{.*}}) {causal, num_heads = 4 : i64}
  %a = xfmr.multi_head_attention %x in_proj(%wqkv) in_bias(%bqkv) out_proj(%wo, %bo)
         padding_mask(%pm) {num_heads = 4 : i64, causal}
         : (tensor<2x8x64xf32>, tensor<64x192xf32>, tensor<192xf32>, tensor<64x64xf32>,
            tensor<64xf32>, tensor<2x8xi1>) -> tensor<2x8x64xf32>
  // CHECK: xfmr.multi_head_attention %{{.*}} kv(%{{.*}}) in_proj(%{{.*}}, %{{.*}}, %{{.*}}) in_bias(%{{.*}}, %{{.*}}, %{{.*}}) out_proj(%{{.*}}) padding_mask(%{{.*}}) attn_bias(%{{.*}}) {num_heads = 2 : i64, transpose_weights}
  %wkvt = arith.constant dense<0.5> : tensor<64x32xf32>
  %wqt = arith.constant dense<0.25> : tensor<64x64xf32>
  %c = xfmr.multi_head_attention %a kv(%mem) in_proj(%wqt, %wkvt, %wkvt) in_bias(%bq, %bq, %bq)
         out_proj(%wo) padding_mask(%pm6) attn_bias(%bias) {num_heads = 2 : i64, transpose_weights}
         : (tensor<2x8x64xf32>, tensor<2x6x32xf32>, tensor<64x64xf32>, tensor<64x32xf32>, tensor<64x32xf32>,
            tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64x64xf32>, tensor<2x6xi1>, tensor<8x6xf32>) -> tensor<2x8x64xf32>
  return %c : tensor<2x8x64xf32>
}

// CHECK-LABEL: func @primitives
func.func @primitives(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %x: tensor<2x8x64xf32>,
                      %row: tensor<64xf32>) -> tensor<2x4x8x16xf32> {
  // CHECK: xfmr.matmul %{{.*}}, %{{.*}} {transpose_rhs} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %s = xfmr.matmul %q, %k {transpose_rhs} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %scale = arith.constant dense<0.25> : tensor<f32>
  // CHECK: xfmr.mul %{{.*}}, %{{.*}} : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  %ss = xfmr.mul %s, %scale : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  // CHECK: xfmr.fused_attention %{{.*}}, %{{.*}}, %{{.*}} attn_bias(%{{.*}}) {layout = #xfmr.layout<bhsd>, scale = 1.000000e+00 : f64}
  %fa = xfmr.fused_attention %q, %k, %k attn_bias(%ss) {scale = 1.0 : f64, layout = #xfmr.layout<bhsd>}
         : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x16xf32>
  // CHECK: xfmr.causal_mask : tensor<8x8xi1>
  %m = xfmr.causal_mask : tensor<8x8xi1>
  %ninf = arith.constant dense<0xFF800000> : tensor<f32>
  // CHECK: xfmr.select %{{.*}}, %{{.*}}, %{{.*}} : (tensor<8x8xi1>, tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  %masked = xfmr.select %m, %ss, %ninf : (tensor<8x8xi1>, tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  // CHECK: xfmr.reduce %{{.*}} {kind = #xfmr.reduce_kind<max>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x1xf32>
  %mx = xfmr.reduce %masked {kind = #xfmr.reduce_kind<max>, axis = -1} : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x1xf32>
  // CHECK: xfmr.sub
  %sh = xfmr.sub %masked, %mx : (tensor<2x4x8x8xf32>, tensor<2x4x8x1xf32>) -> tensor<2x4x8x8xf32>
  %e = math.exp %sh : tensor<2x4x8x8xf32>
  // CHECK: xfmr.reduce %{{.*}} {axis = 3 : i64, kind = #xfmr.reduce_kind<sum>}
  %sum = xfmr.reduce %e {kind = #xfmr.reduce_kind<sum>, axis = 3} : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x1xf32>
  // CHECK: xfmr.div
  %p = xfmr.div %e, %sum : (tensor<2x4x8x8xf32>, tensor<2x4x8x1xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: xfmr.maximum
  %p2 = xfmr.maximum %p, %p : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: xfmr.matmul %{{.*}}, %{{.*}} : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %o = xfmr.matmul %p2, %k : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  // CHECK: xfmr.transpose %{{.*}} {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xf32>) -> tensor<2x8x4x16xf32>
  %t = xfmr.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xf32>) -> tensor<2x8x4x16xf32>
  // CHECK: xfmr.reshape %{{.*}} : (tensor<2x8x4x16xf32>) -> tensor<2x8x64xf32>
  %r = xfmr.reshape %t : (tensor<2x8x4x16xf32>) -> tensor<2x8x64xf32>
  // CHECK: xfmr.add %{{.*}}, %{{.*}} : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  %a = xfmr.add %r, %row : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  return %o : tensor<2x4x8x16xf32>
}

// CHECK-LABEL: func @fused
func.func @fused(%q: tensor<2x8x4x16xf32>, %pm: tensor<2x8xi1>, %x: tensor<2x8x64xf32>,
                 %g: tensor<64xf32>, %w: tensor<64x256xf32>, %b: tensor<256xf32>,
                 %w2: tensor<256x64xf32>) -> tensor<2x8x64xf32> {
  // CHECK: xfmr.fused_attention %{{.*}}, %{{.*}}, %{{.*}} padding_mask(%{{.*}}) {causal, scale = 2.500000e-01 : f64}
  %o = xfmr.fused_attention %q, %q, %q padding_mask(%pm) {causal, scale = 0.25 : f64, layout = #xfmr.layout<bshd>}
         : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8xi1>) -> tensor<2x8x4x16xf32>
  // CHECK: xfmr.fused_add_layer_norm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} :
  %sum, %y = xfmr.fused_add_layer_norm %x, %x, %g, %g {epsilon = 1.0e-5 : f64}
         : (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<2x8x64xf32>, tensor<2x8x64xf32>)
  // CHECK: xfmr.fused_linear %{{.*}}, %{{.*}} bias(%{{.*}}) {activation = #xfmr.activation<gelu_tanh>}
  %h = xfmr.fused_linear %y, %w bias(%b) {activation = #xfmr.activation<gelu_tanh>}
         : (tensor<2x8x64xf32>, tensor<64x256xf32>, tensor<256xf32>) -> tensor<2x8x256xf32>
  // CHECK: xfmr.fused_linear %{{.*}}, %{{.*}} residual(%{{.*}}) : (tensor<2x8x256xf32>, tensor<256x64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  %z = xfmr.fused_linear %h, %w2 residual(%sum) : (tensor<2x8x256xf32>, tensor<256x64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  return %z : tensor<2x8x64xf32>
}

// CHECK-LABEL: func @gated
func.func @gated(%x: tensor<2x8x64xf32>, %wg: tensor<256x64xf32>, %wu: tensor<256x64xf32>,
                 %b: tensor<256xf32>) -> (tensor<2x8x256xf32>, tensor<2x8x256xf32>) {
  // CHECK: xfmr.gated_linear %{{.*}}, %{{.*}}, %{{.*}} {activation = #xfmr.activation<silu>, transpose_weight} : (tensor<2x8x64xf32>, tensor<256x64xf32>, tensor<256x64xf32>) -> tensor<2x8x256xf32>
  %h = xfmr.gated_linear %x, %wg, %wu {activation = #xfmr.activation<silu>, transpose_weight}
         : (tensor<2x8x64xf32>, tensor<256x64xf32>, tensor<256x64xf32>) -> tensor<2x8x256xf32>
  // CHECK: xfmr.gated_linear %{{.*}}, %{{.*}}, %{{.*}} gate_bias(%{{.*}}) up_bias(%{{.*}}) {activation = #xfmr.activation<gelu_tanh>, transpose_weight}
  %k = xfmr.gated_linear %x, %wg, %wu gate_bias(%b) up_bias(%b) {activation = #xfmr.activation<gelu_tanh>, transpose_weight}
         : (tensor<2x8x64xf32>, tensor<256x64xf32>, tensor<256x64xf32>, tensor<256xf32>, tensor<256xf32>) -> tensor<2x8x256xf32>
  return %h, %k : tensor<2x8x256xf32>, tensor<2x8x256xf32>
}

// The backward ops that adjoints are built from.
// CHECK-LABEL: func @backward
func.func @backward(%y: tensor<4x8xf32>, %dy: tensor<4x8xf32>, %g: tensor<8xf32>,
                    %ids: tensor<2x8xi32>, %de: tensor<2x8x64xf32>, %logits: tensor<2x8x100xf32>,
                    %t: tensor<2x8xi32>, %dl: tensor<f32>, %q: tensor<2x8x4x16xf32>,
                    %lse: tensor<2x4x8xf32>, %pm: tensor<2x8xi1>) {
  // CHECK: xfmr.softmax_backward %{{.*}}, %{{.*}} {axis = 0 : i64} : tensor<4x8xf32>
  %0 = xfmr.softmax_backward %y, %dy {axis = 0 : i64} : tensor<4x8xf32>
  // CHECK: xfmr.layer_norm_backward %{{.*}}, %{{.*}} gamma(%{{.*}}) {epsilon = 1.000000e-03 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %1:3 = xfmr.layer_norm_backward %y, %dy gamma(%g) {epsilon = 1.0e-3 : f64}
         : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  // A norm without gamma.
  // CHECK: xfmr.layer_norm_backward %{{.*}}, %{{.*}} {epsilon = 1.000000e-03 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %nonaffine:3 = xfmr.layer_norm_backward %y, %dy {epsilon = 1.0e-3 : f64}
         : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  // CHECK: xfmr.activation_backward %{{.*}}, %{{.*}} {activation = #xfmr.activation<gelu_tanh>} : tensor<4x8xf32>
  %2 = xfmr.activation_backward %y, %dy {activation = #xfmr.activation<gelu_tanh>} : tensor<4x8xf32>
  // CHECK: xfmr.embedding_backward %{{.*}}, %{{.*}} {scale = 2.000000e+00 : f64} : (tensor<2x8xi32>, tensor<2x8x64xf32>) -> tensor<100x64xf32>
  %3 = xfmr.embedding_backward %ids, %de {scale = 2.0 : f64} : (tensor<2x8xi32>, tensor<2x8x64xf32>) -> tensor<100x64xf32>
  // CHECK: xfmr.cross_entropy_backward %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x8x100xf32>, tensor<2x8xi32>, tensor<f32>) -> tensor<2x8x100xf32>
  %4 = xfmr.cross_entropy_backward %logits, %t, %dl : (tensor<2x8x100xf32>, tensor<2x8xi32>, tensor<f32>) -> tensor<2x8x100xf32>
  // CHECK: xfmr.fused_attention_backward %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} padding_mask(%{{.*}}) {causal, scale = 2.500000e-01 : f64}
  %5:3 = xfmr.fused_attention_backward %q, %q, %q, %q, %lse, %q padding_mask(%pm) {causal, scale = 0.25 : f64}
         : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>,
            tensor<2x4x8xf32>, tensor<2x8x4x16xf32>, tensor<2x8xi1>)
         -> (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>)
  // CHECK: xfmr.fused_attention_backward {{.*}} {causal, scale = 2.500000e-01 : f64, softcap = 5.000000e+01 : f64, window = 4 : i64}
  %6:3 = xfmr.fused_attention_backward %q, %q, %q, %q, %lse, %q {causal, scale = 0.25 : f64, window = 4 : i64, softcap = 50.0 : f64}
         : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>,
            tensor<2x4x8xf32>, tensor<2x8x4x16xf32>)
         -> (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>)
  return
}

// The training-step ops: schedule, gradient norm, optimizer updates.
// CHECK-LABEL: func @training
func.func @training(%step: tensor<i64>, %p: tensor<64x64xf32>, %g: tensor<64x64xf32>,
                    %m: tensor<64x64xf32>, %v: tensor<64x64xf32>, %b: tensor<64xf32>) {
  // CHECK: xfmr.learning_rate %{{.*}} {decay_steps = 1000 : i64, min_ratio = 1.000000e-01 : f64, peak = 1.000000e-03 : f64, warmup_steps = 100 : i64} : tensor<i64> -> tensor<f32>
  %lr = xfmr.learning_rate %step {peak = 1.0e-3 : f64, warmup_steps = 100 : i64, decay_steps = 1000 : i64,
                                  min_ratio = 0.1 : f64} : tensor<i64> -> tensor<f32>
  // CHECK: xfmr.global_norm %{{.*}}, %{{.*}} : (tensor<64x64xf32>, tensor<64xf32>) -> tensor<f32>
  %n = xfmr.global_norm %g, %b : (tensor<64x64xf32>, tensor<64xf32>) -> tensor<f32>
  // CHECK: xfmr.all_reduce %{{.*}}, %{{.*}} : tensor<64x64xf32>, tensor<f32>
  %reduced = xfmr.all_reduce %g, %lr : tensor<64x64xf32>, tensor<f32>
  // CHECK: %[[START:.*]] = xfmr.all_reduce_start %{{.*}}, %{{.*}} : tensor<64xf32>, tensor<f32>
  %started = xfmr.all_reduce_start %b, %lr : tensor<64xf32>, tensor<f32>
  // CHECK: xfmr.all_reduce_wait %[[START]] : tensor<64xf32>
  %waited = xfmr.all_reduce_wait %started : tensor<64xf32>
  // CHECK: xfmr.adamw_update %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} lr(%{{.*}} : tensor<f32>) step(%{{.*}} : tensor<i64>) grad_norm(%{{.*}} : tensor<f32>) {weight_decay = 0.000000e+00 : f64} : tensor<64x64xf32>
  %p1:3 = xfmr.adamw_update %p, %g, %m, %v lr(%lr : tensor<f32>) step(%step : tensor<i64>)
          grad_norm(%n : tensor<f32>) {weight_decay = 0.0 : f64} : tensor<64x64xf32>
  // CHECK: xfmr.sgd_update %{{.*}}, %{{.*}}, %{{.*}} lr(%{{.*}} : tensor<f32>) {momentum = 5.000000e-01 : f64} : tensor<64x64xf32>
  %p2:2 = xfmr.sgd_update %p, %g, %m lr(%lr : tensor<f32>) {momentum = 0.5 : f64} : tensor<64x64xf32>
  return
}

// Dynamic loss scaling: the scale, its next state, and updates that unscale.
// CHECK-LABEL: func @loss_scaling
func.func @loss_scaling(%step: tensor<i64>, %p: tensor<64xf32>, %g: tensor<64xf32>, %m: tensor<64xf32>,
                        %lr: tensor<f32>, %e: tensor<f32>, %good: tensor<f32>) {
  // CHECK: %[[S:.*]] = xfmr.loss_scale %{{.*}} {initial = 6.553600e+04 : f64} : tensor<f32> -> tensor<f32>
  %s = xfmr.loss_scale %e {initial = 65536.0 : f64} : tensor<f32> -> tensor<f32>
  %n = xfmr.global_norm %g : (tensor<64xf32>) -> tensor<f32>
  // CHECK: xfmr.loss_scale_update %{{.*}}, %{{.*}}, %{{.*}} {growth_interval = 100 : i64} : (tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  %e1, %good1 = xfmr.loss_scale_update %e, %good, %n {growth_interval = 100 : i64}
      : (tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  // CHECK: xfmr.adamw_update {{.*}} grad_norm(%{{.*}} : tensor<f32>) loss_scale(%[[S]] : tensor<f32>) {max_grad_norm = 0.000000e+00 : f64} : tensor<64xf32>
  %p1:3 = xfmr.adamw_update %p, %g, %m, %m lr(%lr : tensor<f32>) step(%step : tensor<i64>)
          grad_norm(%n : tensor<f32>) loss_scale(%s : tensor<f32>) {max_grad_norm = 0.0 : f64} : tensor<64xf32>
  // CHECK: xfmr.sgd_update {{.*}} grad_norm(%{{.*}} : tensor<f32>) loss_scale(%[[S]] : tensor<f32>) : tensor<64xf32>
  %p2:2 = xfmr.sgd_update %p, %g, %m lr(%lr : tensor<f32>) grad_norm(%n : tensor<f32>) loss_scale(%s : tensor<f32>) : tensor<64xf32>
  return
}

// CHECK-LABEL: func @checkpoint_families
func.func @checkpoint_families(%x: tensor<2x8x64xf32>, %m: tensor<2x8xi1>, %wpe: tensor<18x64xf32>,
                               %wqkv: tensor<64x192xf32>, %wo: tensor<64x64xf32>) -> tensor<2x64xf32> {
  // CHECK: xfmr.silu %{{.*}} : tensor<2x8x64xf32>
  %s = xfmr.silu %x : tensor<2x8x64xf32>
  // CHECK: xfmr.tanh %{{.*}} : tensor<2x8x64xf32>
  %t = xfmr.tanh %s : tensor<2x8x64xf32>
  // CHECK: xfmr.sinusoidal_position_encoding %{{.*}} {layout = #xfmr.sinusoid_layout<halves>} : tensor<2x8x64xf32>
  %h = xfmr.sinusoidal_position_encoding %t {layout = #xfmr.sinusoid_layout<halves>} : tensor<2x8x64xf32>
  // CHECK: xfmr.learned_position_encoding %{{.*}}, %{{.*}} {offset = 2 : i64} : tensor<2x8x64xf32>, tensor<18x64xf32>
  %l = xfmr.learned_position_encoding %h, %wpe {offset = 2 : i64} : tensor<2x8x64xf32>, tensor<18x64xf32>
  // CHECK: xfmr.multi_head_attention {{.*}} {num_heads = 4 : i64, return_probabilities} : {{.*}} -> (tensor<2x8x64xf32>, tensor<2x4x8x8xf32>)
  %a, %p = xfmr.multi_head_attention %l in_proj(%wqkv) out_proj(%wo) {num_heads = 4 : i64, return_probabilities}
         : (tensor<2x8x64xf32>, tensor<64x192xf32>, tensor<64x64xf32>) -> (tensor<2x8x64xf32>, tensor<2x4x8x8xf32>)
  // CHECK: xfmr.pool %{{.*}}, %{{.*}} {mode = #xfmr.pool_mode<mean>} : (tensor<2x8x64xf32>, tensor<2x8xi1>) -> tensor<2x64xf32>
  %e = xfmr.pool %a, %m {mode = #xfmr.pool_mode<mean>} : (tensor<2x8x64xf32>, tensor<2x8xi1>) -> tensor<2x64xf32>
  // CHECK: xfmr.l2_normalize %{{.*}} {epsilon = 5.000000e-01 : f64} : tensor<2x64xf32>
  %n = xfmr.l2_normalize %e {epsilon = 0.5 : f64} : tensor<2x64xf32>
  return %n : tensor<2x64xf32>
}

// CHECK-LABEL: func @t5_ops
func.func @t5_ops(%x: tensor<2x8x64xf32>, %g: tensor<64xf32>, %t: tensor<32x4xf32>,
                  %p: tensor<2xi32>) -> (tensor<2x8x64xf32>, tensor<1x4x8x8xf32>, tensor<2x4x1x16xf32>) {
  // CHECK: xfmr.rms_norm %{{.*}}, %{{.*}} : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  %y = xfmr.rms_norm %x, %g : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  // CHECK: xfmr.relative_position_bias %{{.*}} {bidirectional, max_distance = 128 : i64} : (tensor<32x4xf32>) -> tensor<1x4x8x8xf32>
  %b = xfmr.relative_position_bias %t {max_distance = 128 : i64, bidirectional}
         : (tensor<32x4xf32>) -> tensor<1x4x8x8xf32>
  // CHECK: xfmr.relative_position_bias %{{.*}} query_offset(%{{.*}}) {max_distance = 20 : i64} : (tensor<32x4xf32>, tensor<2xi32>) -> tensor<2x4x1x16xf32>
  %c = xfmr.relative_position_bias %t query_offset(%p) {max_distance = 20 : i64}
         : (tensor<32x4xf32>, tensor<2xi32>) -> tensor<2x4x1x16xf32>
  return %y, %b, %c : tensor<2x8x64xf32>, tensor<1x4x8x8xf32>, tensor<2x4x1x16xf32>
}

// CHECK-LABEL: func @dequantize
func.func @dequantize(%q: tensor<64x96xi8>, %s: tensor<2x96xf32>, %t: tensor<96x64xi8>, %u: tensor<96x1xbf16>,
                      %h: tensor<96x2xf16>)
    -> (tensor<64x96xf32>, tensor<96x64xf32>, tensor<96x64xf32>) {
  // CHECK: xfmr.dequantize %{{.*}}, %{{.*}} {axis = 0 : i64, group_size = 32 : i64} : (tensor<64x96xi8>, tensor<2x96xf32>) -> tensor<64x96xf32>
  %a = xfmr.dequantize %q, %s {axis = 0 : i64, group_size = 32 : i64}
         : (tensor<64x96xi8>, tensor<2x96xf32>) -> tensor<64x96xf32>
  // CHECK: xfmr.dequantize %{{.*}}, %{{.*}} {axis = 1 : i64, group_size = 64 : i64} : (tensor<96x64xi8>, tensor<96x1xbf16>) -> tensor<96x64xf32>
  %b = xfmr.dequantize %t, %u {axis = 1 : i64, group_size = 64 : i64}
         : (tensor<96x64xi8>, tensor<96x1xbf16>) -> tensor<96x64xf32>
  // CHECK: xfmr.dequantize %{{.*}}, %{{.*}} {axis = 1 : i64, group_size = 32 : i64} : (tensor<96x64xi8>, tensor<96x2xf16>) -> tensor<96x64xf32>
  %c = xfmr.dequantize %t, %h {axis = 1 : i64, group_size = 32 : i64}
         : (tensor<96x64xi8>, tensor<96x2xf16>) -> tensor<96x64xf32>
  return %a, %b, %c : tensor<64x96xf32>, tensor<96x64xf32>, tensor<96x64xf32>
}

// CHECK-LABEL: func @dequantize_int4
// (and int8 with mins)
func.func @dequantize_int4(%q: tensor<96x64xi8>, %s: tensor<96x4xf32>, %m: tensor<96x4xf32>,
                           %r: tensor<96x128xi8>, %t: tensor<96x8xf32>)
    -> (tensor<96x128xf32>, tensor<96x128xf32>, tensor<96x128xf32>) {
  // CHECK: xfmr.dequantize %{{.*}}, %{{.*}} {axis = 1 : i64, bits = 4 : i64, group_size = 32 : i64} : (tensor<96x64xi8>, tensor<96x4xf32>) -> tensor<96x128xf32>
  %a = xfmr.dequantize %q, %s {axis = 1 : i64, group_size = 32 : i64, bits = 4 : i64}
         : (tensor<96x64xi8>, tensor<96x4xf32>) -> tensor<96x128xf32>
  // CHECK: xfmr.dequantize %{{.*}}, %{{.*}}, %{{.*}} {axis = 1 : i64, bits = 4 : i64, group_size = 32 : i64} : (tensor<96x64xi8>, tensor<96x4xf32>, tensor<96x4xf32>) -> tensor<96x128xf32>
  %b = xfmr.dequantize %q, %s, %m {axis = 1 : i64, group_size = 32 : i64, bits = 4 : i64}
         : (tensor<96x64xi8>, tensor<96x4xf32>, tensor<96x4xf32>) -> tensor<96x128xf32>
  // CHECK: xfmr.dequantize %{{.*}}, %{{.*}}, %{{.*}} {axis = 1 : i64, group_size = 16 : i64} : (tensor<96x128xi8>, tensor<96x8xf32>, tensor<96x8xf32>) -> tensor<96x128xf32>
  %c = xfmr.dequantize %r, %t, %t {axis = 1 : i64, group_size = 16 : i64}
         : (tensor<96x128xi8>, tensor<96x8xf32>, tensor<96x8xf32>) -> tensor<96x128xf32>
  return %a, %b, %c : tensor<96x128xf32>, tensor<96x128xf32>, tensor<96x128xf32>
}

// The band form: one bias per diagonal, read by fused_attention's kernels.
// CHECK-LABEL: func @position_bias
func.func @position_bias(%q: tensor<2x8x4x16xf32>, %k: tensor<2x12x4x16xf32>, %t: tensor<32x4xf32>)
    -> tensor<2x8x4x16xf32> {
  // CHECK: %[[BAND:.*]] = xfmr.relative_position_bias %{{.*}} {bidirectional, max_distance = 128 : i64, seq_q = 8 : i64} : (tensor<32x4xf32>) -> tensor<1x4x19xf32>
  %b = xfmr.relative_position_bias %t {max_distance = 128 : i64, bidirectional, seq_q = 8 : i64}
         : (tensor<32x4xf32>) -> tensor<1x4x19xf32>
  // CHECK: xfmr.fused_attention %{{.*}}, %{{.*}}, %{{.*}} position_bias(%[[BAND]]) {scale = 2.500000e-01 : f64}
  %o = xfmr.fused_attention %q, %k, %k position_bias(%b) {scale = 0.25 : f64}
         : (tensor<2x8x4x16xf32>, tensor<2x12x4x16xf32>, tensor<2x12x4x16xf32>, tensor<1x4x19xf32>) -> tensor<2x8x4x16xf32>
  return %o : tensor<2x8x4x16xf32>
}

// Rotary embeddings (partial, scaled, over a cache's start positions, transposed) and
// grouped-query attention: 8 query heads over 2 key/value heads.
// CHECK-LABEL: func @decoder
func.func @decoder(%q: tensor<2x8x8x16xf32>, %kv: tensor<2x8x2x16xf32>, %p: tensor<2xi32>)
    -> (tensor<2x8x8x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) {
  // CHECK: xfmr.rotary_embedding %{{.*}} {attention_scaling = 1.250000e+00 : f64, inv_freq = array<f64: 1.000000e+00, 1.000000e-01>} : tensor<2x8x8x16xf32>
  %rq = xfmr.rotary_embedding %q {inv_freq = array<f64: 1.0, 0.1>, attention_scaling = 1.25 : f64} : tensor<2x8x8x16xf32>
  // CHECK: xfmr.rotary_embedding %{{.*}} positions(%{{.*}} : tensor<2xi32>) {inv_freq = array<f64: 1.000000e+00, 5.000000e-01, 2.500000e-01, 1.250000e-01, 6.250000e-02, 3.125000e-02, 1.562500e-02, 7.812500e-03>} : tensor<2x8x2x16xf32>
  %rk = xfmr.rotary_embedding %kv positions(%p : tensor<2xi32>)
        {inv_freq = array<f64: 1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125>} : tensor<2x8x2x16xf32>
  // CHECK: xfmr.rotary_embedding %{{.*}} positions(%{{.*}} : tensor<2xi32>) {inv_freq = array<f64: 1.000000e+00>, transpose} : tensor<2x8x2x16xf32>
  %tk = xfmr.rotary_embedding %kv positions(%p : tensor<2xi32>) {inv_freq = array<f64: 1.0>, transpose} : tensor<2x8x2x16xf32>
  // CHECK: xfmr.fused_attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 2.500000e-01 : f64} : (tensor<2x8x8x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> tensor<2x8x8x16xf32>
  %o = xfmr.fused_attention %rq, %rk, %kv {causal, scale = 0.25 : f64}
       : (tensor<2x8x8x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> tensor<2x8x8x16xf32>
  return %o, %rk, %tk : tensor<2x8x8x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>
}

// CHECK-LABEL: func @layers
func.func @layers(%x: tensor<2x4xf32>, %w: tensor<4x4xf32>) -> tensor<2x4xf32> {
  // CHECK: %[[Y:.*]] = xfmr.layer "h.0" -> (tensor<2x4xf32>) {
  // CHECK-NEXT: %[[M:.*]] = xfmr.matmul
  // CHECK-NEXT: xfmr.yield %[[M]] : tensor<2x4xf32>
  // CHECK-NEXT: }
  %y = xfmr.layer "h.0" -> (tensor<2x4xf32>) {
    %m = xfmr.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    xfmr.yield %m : tensor<2x4xf32>
  }
  // CHECK: xfmr.layer "h.1" {
  // CHECK-NEXT: xfmr.yield
  xfmr.layer "h.1" {
    xfmr.yield
  }
  return %y : tensor<2x4xf32>
}
