// RUN: xfmr-opt %s -split-input-file -verify-diagnostics

func.func @embedding_table_rank(%ids: tensor<2x8xi32>, %t: tensor<100xf32>) {
  // expected-error @+2 {{embedding table must be rank 2 [vocab, d_model], got 'tensor<100xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %x = xfmr.embedding %ids, %t : (tensor<2x8xi32>, tensor<100xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @embedding_float_ids(%ids: tensor<2x8xf32>, %t: tensor<100x64xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of signless integer values}}
  %x = xfmr.embedding %ids, %t : (tensor<2x8xf32>, tensor<100x64xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @embedding_result(%ids: tensor<2x8xi32>, %t: tensor<100x64xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x8x64xf32>' are incompatible with return type(s) of operation 'tensor<2x8x32xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %x = xfmr.embedding %ids, %t : (tensor<2x8xi32>, tensor<100x64xf32>) -> tensor<2x8x32xf32>
  return
}

// -----

func.func @embedding_scale(%ids: tensor<2x8xi32>, %t: tensor<100x64xf32>) {
  // expected-error @+1 {{scale must be a positive finite number, got -1}}
  %x = xfmr.embedding %ids, %t {scale = -1.0 : f64} : (tensor<2x8xi32>, tensor<100x64xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @dynamic_shape(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of floating-point values}}
  %y = xfmr.relu %x : tensor<?x64xf32>
  return
}

// -----

func.func @sinusoidal_odd(%x: tensor<2x8x63xf32>) {
  // expected-error @+1 {{d_model must be even for the sinusoidal encoding, got 63}}
  %y = xfmr.sinusoidal_position_encoding %x : tensor<2x8x63xf32>
  return
}

// -----

func.func @learned_too_long(%x: tensor<2x32x64xf32>, %t: tensor<16x64xf32>) {
  // expected-error @+1 {{sequence length 32 exceeds the 16 learned positions}}
  %y = xfmr.learned_position_encoding %x, %t : tensor<2x32x64xf32>, tensor<16x64xf32>
  return
}

// -----

func.func @learned_width(%x: tensor<2x8x64xf32>, %t: tensor<16x32xf32>) {
  // expected-error @+1 {{position table width 32 differs from d_model 64}}
  %y = xfmr.learned_position_encoding %x, %t : tensor<2x8x64xf32>, tensor<16x32xf32>
  return
}

// -----

func.func @linear_mismatch(%x: tensor<2x8x64xf32>, %w: tensor<32x256xf32>) {
  // expected-error @+2 {{linear input feature size 64 does not match weight [32, 256] ([in, out] layout)}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = xfmr.linear %x, %w : (tensor<2x8x64xf32>, tensor<32x256xf32>) -> tensor<2x8x256xf32>
  return
}

// -----

func.func @linear_bias(%x: tensor<2x8x64xf32>, %w: tensor<64x256xf32>, %b: tensor<64xf32>) {
  // expected-error @+2 {{linear bias must be [256], got [64]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = xfmr.linear %x, %w, %b : (tensor<2x8x64xf32>, tensor<64x256xf32>, tensor<64xf32>) -> tensor<2x8x256xf32>
  return
}

// -----

func.func @linear_element_type(%x: tensor<2x8x64xf32>, %w: tensor<64x256xf16>) {
  // expected-error @+2 {{linear weight element type 'f16' differs from input element type 'f32'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = xfmr.linear %x, %w : (tensor<2x8x64xf32>, tensor<64x256xf16>) -> tensor<2x8x256xf32>
  return
}

// -----

func.func @mha_heads(%x: tensor<2x8x64xf32>, %w: tensor<64x192xf32>, %wo: tensor<64x64xf32>) {
  // expected-error @+1 {{the projected width 64 (the output weight's input side) is not divisible by num_heads 5}}
  %y = xfmr.multi_head_attention %x in_proj(%w) out_proj(%wo) {num_heads = 5 : i64}
       : (tensor<2x8x64xf32>, tensor<64x192xf32>, tensor<64x64xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @mha_zero_heads(%x: tensor<2x8x64xf32>, %w: tensor<64x192xf32>, %wo: tensor<64x64xf32>) {
  // expected-error @+1 {{attribute 'num_heads' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %y = xfmr.multi_head_attention %x in_proj(%w) out_proj(%wo) {num_heads = 0 : i64}
       : (tensor<2x8x64xf32>, tensor<64x192xf32>, tensor<64x64xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @mha_qkv_shape(%x: tensor<2x8x64xf32>, %w: tensor<64x128xf32>, %wo: tensor<64x64xf32>) {
  // expected-error @+1 {{fused QKV weight must be [64, 192], got [64, 128]}}
  %y = xfmr.multi_head_attention %x in_proj(%w) out_proj(%wo) {num_heads = 4 : i64}
       : (tensor<2x8x64xf32>, tensor<64x128xf32>, tensor<64x64xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @mha_two_weights(%x: tensor<2x8x64xf32>, %w: tensor<64x64xf32>) {
  // expected-error @+1 {{in_proj takes one fused QKV weight or three (Q, K, V) weights, got 2}}
  %y = xfmr.multi_head_attention %x in_proj(%w, %w) out_proj(%w) {num_heads = 4 : i64}
       : (tensor<2x8x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @mha_bias_count(%x: tensor<2x8x64xf32>, %w: tensor<64x64xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{in_bias needs one bias per in_proj weight (3), got 1}}
  %y = xfmr.multi_head_attention %x in_proj(%w, %w, %w) in_bias(%b) out_proj(%w) {num_heads = 4 : i64}
       : (tensor<2x8x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>, tensor<64xf32>, tensor<64x64xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @mha_transposed_weight(%x: tensor<2x8x64xf32>, %w: tensor<64x64xf32>, %wk: tensor<32x64xf32>, %m: tensor<2x6x32xf32>) {
  // expected-error @+1 {{key weight must be [64, 32] ([out, in] layout), got [32, 64]}}
  %y = xfmr.multi_head_attention %x kv(%m) in_proj(%w, %wk, %wk) out_proj(%w) {num_heads = 4 : i64, transpose_weights}
       : (tensor<2x8x64xf32>, tensor<2x6x32xf32>, tensor<64x64xf32>, tensor<32x64xf32>, tensor<32x64xf32>, tensor<64x64xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @mha_fused_cross(%x: tensor<2x8x64xf32>, %w: tensor<64x192xf32>, %wo: tensor<64x64xf32>) {
  // expected-error @+1 {{a fused QKV projection needs self-attention; cross-attention takes separate Q, K, V weights}}
  %y = xfmr.multi_head_attention %x kv(%x) in_proj(%w) out_proj(%wo) {num_heads = 4 : i64}
       : (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<64x192xf32>, tensor<64x64xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @mha_padding_mask(%x: tensor<2x8x64xf32>, %w: tensor<64x192xf32>, %wo: tensor<64x64xf32>, %m: tensor<2x7xi1>) {
  // expected-error @+1 {{padding_mask must be [batch, seq_k] = [2, 8], got [2, 7]}}
  %y = xfmr.multi_head_attention %x in_proj(%w) out_proj(%wo) padding_mask(%m) {num_heads = 4 : i64}
       : (tensor<2x8x64xf32>, tensor<64x192xf32>, tensor<64x64xf32>, tensor<2x7xi1>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @mha_padding_mask_type(%x: tensor<2x8x64xf32>, %w: tensor<64x192xf32>, %wo: tensor<64x64xf32>, %m: tensor<2x8xi32>) {
  // expected-error @+1 {{operand #3 must be statically shaped tensor of 1-bit signless integer values}}
  %y = xfmr.multi_head_attention %x in_proj(%w) out_proj(%wo) padding_mask(%m) {num_heads = 4 : i64}
       : (tensor<2x8x64xf32>, tensor<64x192xf32>, tensor<64x64xf32>, tensor<2x8xi32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @mha_attn_bias(%x: tensor<2x8x64xf32>, %w: tensor<64x192xf32>, %wo: tensor<64x64xf32>, %b: tensor<3x8x8xf32>) {
  // expected-error @+1 {{attn_bias of shape [3, 8, 8] does not broadcast to the scores [batch, heads, seq_q, seq_k] = [2, 4, 8, 8]}}
  %y = xfmr.multi_head_attention %x in_proj(%w) out_proj(%wo) attn_bias(%b) {num_heads = 4 : i64}
       : (tensor<2x8x64xf32>, tensor<64x192xf32>, tensor<64x64xf32>, tensor<3x8x8xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @mha_query_rank(%x: tensor<8x64xf32>, %w: tensor<64x192xf32>, %wo: tensor<64x64xf32>) {
  // expected-error @+1 {{query must be [batch, seq_q, d_model], got 'tensor<8x64xf32>'}}
  %y = xfmr.multi_head_attention %x in_proj(%w) out_proj(%wo) {num_heads = 4 : i64}
       : (tensor<8x64xf32>, tensor<64x192xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

func.func @mha_causal_short_keys(%x: tensor<2x8x64xf32>, %m: tensor<2x4x64xf32>, %w: tensor<64x64xf32>) {
  // expected-error @+1 {{causal attention needs seq_k >= seq_q, got seq_q = 8, seq_k = 4}}
  %y = xfmr.multi_head_attention %x kv(%m) in_proj(%w, %w, %w) out_proj(%w) {num_heads = 4 : i64, causal}
       : (tensor<2x8x64xf32>, tensor<2x4x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @softmax_axis(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %y = xfmr.softmax %x {axis = 2} : tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_half_affine(%x: tensor<2x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{gamma and beta must both be given (affine) or both omitted}}
  %y = "xfmr.layer_norm"(%x, %g) {operandSegmentSizes = array<i32: 1, 1, 0>} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_gamma(%x: tensor<2x8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{gamma must be [8], got [4]}}
  %y = xfmr.layer_norm %x, %g, %g : (tensor<2x8xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_eps(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{epsilon must be a positive finite number, got 0}}
  %y = xfmr.layer_norm %x {epsilon = 0.0 : f64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @add_ln_residual(%x: tensor<2x8xf32>, %r: tensor<2x4xf32>) {
  // expected-error @+1 {{residual type 'tensor<2x4xf32>' differs from input type 'tensor<2x8xf32>'}}
  %s, %y = xfmr.fused_add_layer_norm %x, %r : (tensor<2x8xf32>, tensor<2x4xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>)
  return
}

// -----

func.func @dropout_rate(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{rate must be in [0, 1), got 1}}
  %y = xfmr.dropout %x {rate = 1.0 : f64} : tensor<2x8xf32>
  return
}

// -----

func.func @cross_entropy_targets(%l: tensor<2x8x100xf32>, %t: tensor<2x7xi32>) {
  // expected-error @+1 {{targets [2, 7] must have the logits shape without the vocab dim, [2, 8]}}
  %y = xfmr.cross_entropy %l, %t : (tensor<2x8x100xf32>, tensor<2x7xi32>) -> tensor<f32>
  return
}

// -----

func.func @broadcast(%a: tensor<2x8xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{operand shapes [2, 8] and [3] do not broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = xfmr.add %a, %b : (tensor<2x8xf32>, tensor<3xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @binary_types(%a: tensor<2x8xf32>, %b: tensor<8xf16>) {
  // expected-error @+2 {{operands must share one element type, got 'tensor<2x8xf32>' and 'tensor<8xf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = xfmr.mul %a, %b : (tensor<2x8xf32>, tensor<8xf16>) -> tensor<2x8xf32>
  return
}

// -----

func.func @matmul_k(%a: tensor<2x8x16xf32>, %b: tensor<2x8x16xf32>) {
  // expected-error @+2 {{matmul contraction sizes differ: lhs [2, 8, 16] and rhs [2, 8, 16]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = xfmr.matmul %a, %b : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x8x16xf32>, %b: tensor<3x16x4xf32>) {
  // expected-error @+2 {{matmul batch dimensions [2, 8, 16] and [3, 16, 4] do not broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = xfmr.matmul %a, %b : (tensor<2x8x16xf32>, tensor<3x16x4xf32>) -> tensor<2x8x4xf32>
  return
}

// -----

func.func @transpose_perm(%a: tensor<2x8x16xf32>) {
  // expected-error @+2 {{permutation [0, 0, 1] is not a permutation of 0..2}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = xfmr.transpose %a {permutation = array<i64: 0, 0, 1>} : (tensor<2x8x16xf32>) -> tensor<2x2x8xf32>
  return
}

// -----

func.func @reshape_count(%a: tensor<2x8x16xf32>) {
  // expected-error @+1 {{cannot reshape [2, 8, 16] (256 elements) to [2, 8, 8] (128 elements)}}
  %y = xfmr.reshape %a : (tensor<2x8x16xf32>) -> tensor<2x8x8xf32>
  return
}

// -----

func.func @reduce_axis(%a: tensor<2x8xf32>) {
  // expected-error @+2 {{axis -3 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = xfmr.reduce %a {kind = #xfmr.reduce_kind<sum>, axis = -3} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @causal_mask_shape() {
  // expected-error @+1 {{causal mask needs seq_k >= seq_q, got 'tensor<8x4xi1>'}}
  %m = xfmr.causal_mask : tensor<8x4xi1>
  return
}

// -----

func.func @fused_attention_kv(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x4x8xf32>) {
  // expected-error @+1 {{key and value must both be [2, 8, 4, 16] to match query [2, 8, 4, 16], got key [2, 8, 4, 8] and value [2, 8, 4, 8]}}
  %o = xfmr.fused_attention %q, %k, %k {scale = 0.25 : f64}
       : (tensor<2x8x4x16xf32>, tensor<2x8x4x8xf32>, tensor<2x8x4x8xf32>) -> tensor<2x8x4x16xf32>
  return
}

// -----

func.func @fused_attention_rank(%q: tensor<8x4x16xf32>) {
  // expected-error @+1 {{query must be rank 4 (bshd), got 'tensor<8x4x16xf32>'}}
  %o = xfmr.fused_attention %q, %q, %q {scale = 0.25 : f64}
       : (tensor<8x4x16xf32>, tensor<8x4x16xf32>, tensor<8x4x16xf32>) -> tensor<8x4x16xf32>
  return
}

// -----

func.func @fused_attention_scale(%q: tensor<2x8x4x16xf32>) {
  // expected-error @+1 {{scale must be positive}}
  %o = xfmr.fused_attention %q, %q, %q {scale = 0.0 : f64}
       : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32>
  return
}

// -----

func.func @fused_linear_residual(%x: tensor<2x64xf32>, %w: tensor<64x32xf32>, %r: tensor<2x64xf32>) {
  // expected-error @+2 {{residual type 'tensor<2x64xf32>' differs from the result type 'tensor<2x32xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = xfmr.fused_linear %x, %w residual(%r) : (tensor<2x64xf32>, tensor<64x32xf32>, tensor<2x64xf32>) -> tensor<2x32xf32>
  return
}

// -----

func.func @gated_linear_weights(%x: tensor<2x64xf32>, %wg: tensor<32x64xf32>, %wu: tensor<16x64xf32>) {
  // expected-error @+2 {{gate type 'tensor<32x64xf32>' differs from up type 'tensor<16x64xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = xfmr.gated_linear %x, %wg, %wu {activation = #xfmr.activation<silu>, transpose_weight} : (tensor<2x64xf32>, tensor<32x64xf32>, tensor<16x64xf32>) -> tensor<2x32xf32>
  return
}

// -----

func.func @gated_linear_input(%x: tensor<2x48xf32>, %w: tensor<32x64xf32>) {
  // expected-error @+2 {{linear input feature size 48 does not match weight [32, 64] ([out, in] layout)}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = xfmr.gated_linear %x, %w, %w {activation = #xfmr.activation<silu>, transpose_weight} : (tensor<2x48xf32>, tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<2x32xf32>
  return
}

// -----

func.func @gated_linear_gate_bias(%x: tensor<2x64xf32>, %w: tensor<32x64xf32>, %b: tensor<64xf32>) {
  // expected-error @+2 {{gate_bias must be [32] of 'f32', got 'tensor<64xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = xfmr.gated_linear %x, %w, %w gate_bias(%b) {activation = #xfmr.activation<silu>, transpose_weight} : (tensor<2x64xf32>, tensor<32x64xf32>, tensor<32x64xf32>, tensor<64xf32>) -> tensor<2x32xf32>
  return
}

// -----

func.func @softmax_backward_axis(%y: tensor<4x8xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = xfmr.softmax_backward %y, %y {axis = 2 : i64} : tensor<4x8xf32>
  return
}

// -----

func.func @layer_norm_backward_gamma(%x: tensor<4x8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{gamma must be [8]}}
  %0:3 = xfmr.layer_norm_backward %x, %x gamma(%g) : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @embedding_backward_shape(%ids: tensor<2x8xi32>, %dy: tensor<2x7x64xf32>) {
  // expected-error @+1 {{grad [2, 7, 64] must be the ids shape plus d_model of the table [100, 64]}}
  %0 = xfmr.embedding_backward %ids, %dy : (tensor<2x8xi32>, tensor<2x7x64xf32>) -> tensor<100x64xf32>
  return
}

// -----

func.func @cross_entropy_backward_grad(%l: tensor<2x8x100xf32>, %t: tensor<2x8xi32>, %g: tensor<1xf32>) {
  // expected-error @+1 {{grad must be rank 0}}
  %0 = xfmr.cross_entropy_backward %l, %t, %g : (tensor<2x8x100xf32>, tensor<2x8xi32>, tensor<1xf32>) -> tensor<2x8x100xf32>
  return
}

// -----

// A bf16 attention's log-sum-exp is still f32.
func.func @attention_lse_bf16(%q: tensor<2x8x4x16xbf16>) {
  // expected-error @+1 {{result #1 must be tensor of 32-bit float values}}
  %o, %lse = xfmr.fused_attention %q, %q, %q {scale = 0.25 : f64}
             : (tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>)
             -> (tensor<2x8x4x16xbf16>, tensor<2x4x8xbf16>)
  return
}

// -----

func.func @attention_backward_lse_f16(%q: tensor<2x8x4x16xf16>, %lse: tensor<2x4x8xf16>) {
  // expected-error @+1 {{operand #4 must be tensor of 32-bit float values}}
  %0:3 = xfmr.fused_attention_backward %q, %q, %q, %q, %lse, %q {scale = 0.25 : f64}
         : (tensor<2x8x4x16xf16>, tensor<2x8x4x16xf16>, tensor<2x8x4x16xf16>, tensor<2x8x4x16xf16>,
            tensor<2x4x8xf16>, tensor<2x8x4x16xf16>)
         -> (tensor<2x8x4x16xf16>, tensor<2x8x4x16xf16>, tensor<2x8x4x16xf16>)
  return
}

// -----

func.func @attention_backward_softcap(%q: tensor<2x8x4x16xf32>, %lse: tensor<2x4x8xf32>) {
  // expected-error @+1 {{softcap must be positive and finite}}
  %0:3 = xfmr.fused_attention_backward %q, %q, %q, %q, %lse, %q {scale = 0.25 : f64, softcap = -1.0 : f64}
         : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>,
            tensor<2x4x8xf32>, tensor<2x8x4x16xf32>)
         -> (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>)
  return
}

// -----

func.func @attention_backward_lse(%q: tensor<2x8x4x16xf32>, %lse: tensor<2x8x4xf32>) {
  // expected-error @+1 {{logsumexp must be [2, 4, 8]}}
  %0:3 = xfmr.fused_attention_backward %q, %q, %q, %q, %lse, %q {scale = 0.25 : f64}
         : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>,
            tensor<2x8x4xf32>, tensor<2x8x4x16xf32>)
         -> (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>)
  return
}

// -----

func.func @learning_rate_decay(%s: tensor<i64>) {
  // expected-error @+1 {{decay_steps (50) must exceed warmup_steps (100), or be 0 for no decay}}
  %lr = xfmr.learning_rate %s {peak = 1.0e-3 : f64, warmup_steps = 100 : i64, decay_steps = 50 : i64} : tensor<i64> -> tensor<f32>
  return
}

// -----

func.func @learning_rate_ratio(%s: tensor<i64>) {
  // expected-error @+1 {{min_ratio must be in [0, 1], got 1.5}}
  %lr = xfmr.learning_rate %s {peak = 1.0e-3 : f64, min_ratio = 1.5 : f64} : tensor<i64> -> tensor<f32>
  return
}

// -----

func.func @global_norm_type(%a: tensor<4xf64>) {
  // expected-error @+1 {{inputs must have the result element type 'f32'}}
  %n = xfmr.global_norm %a : (tensor<4xf64>) -> tensor<f32>
  return
}

// -----

func.func @all_reduce_type(%a: tensor<4xf16>, %w: tensor<f32>) {
  // expected-error @+1 {{reduces f32 tensors with an f32 weight, got 'tensor<4xf16>' and 'tensor<f32>'}}
  %r = xfmr.all_reduce %a, %w : tensor<4xf16>, tensor<f32>
  return
}

// -----

func.func @all_reduce_start_type(%a: tensor<4xf64>, %w: tensor<f32>) {
  // expected-error @+1 {{reduces f32 tensors with an f32 weight, got 'tensor<4xf64>' and 'tensor<f32>'}}
  %s = xfmr.all_reduce_start %a, %w : tensor<4xf64>, tensor<f32>
  %r = xfmr.all_reduce_wait %s : tensor<4xf64>
  return
}

// -----

// The buffer is the runtime's until the wait: nothing else may read it.
func.func @all_reduce_start_read(%a: tensor<4xf32>, %w: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{result must have one use, an xfmr.all_reduce_wait in the same block}}
  %s = xfmr.all_reduce_start %a, %w : tensor<4xf32>, tensor<f32>
  %n = xfmr.global_norm %s : (tensor<4xf32>) -> tensor<f32>
  %r = xfmr.all_reduce_wait %s : tensor<4xf32>
  return %n : tensor<f32>
}

// -----

func.func @all_reduce_start_unwaited(%a: tensor<4xf32>, %w: tensor<f32>) {
  // expected-error @+1 {{result must have one use, an xfmr.all_reduce_wait in the same block}}
  %s = xfmr.all_reduce_start %a, %w : tensor<4xf32>, tensor<f32>
  return
}

// -----

func.func @all_reduce_wait_unstarted(%a: tensor<4xf32>) {
  // expected-error @+1 {{waits for the result of an xfmr.all_reduce_start}}
  %r = xfmr.all_reduce_wait %a : tensor<4xf32>
  return
}

// -----

func.func @adamw_beta(%p: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{beta2 must be in [0, 1), got 1}}
  %0:3 = xfmr.adamw_update %p, %p, %p, %p lr(%lr : tensor<f32>) step(%s : tensor<i64>) {beta2 = 1.0 : f64} : tensor<4xf32>
  return
}

// -----

func.func @adamw_lr_type(%p: tensor<4xf32>, %lr: tensor<f64>, %s: tensor<i64>) {
  // expected-error @+1 {{lr, grad_norm and loss_scale must be 'f32' like the parameter, got 'tensor<f64>'}}
  %0:3 = xfmr.adamw_update %p, %p, %p, %p lr(%lr : tensor<f64>) step(%s : tensor<i64>) : tensor<4xf32>
  return
}

// -----

func.func @sgd_clip(%p: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{max_grad_norm must be positive, got 0}}
  %0:2 = xfmr.sgd_update %p, %p, %p lr(%lr : tensor<f32>) grad_norm(%lr : tensor<f32>) {max_grad_norm = 0.0 : f64} : tensor<4xf32>
  return
}

// -----

func.func @sgd_types(%p: tensor<4xf32>, %g: tensor<5xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{all of {param, grad, momentum_buffer, new_param, new_momentum_buffer} have same type}}
  %0:2 = "xfmr.sgd_update"(%p, %g, %p, %lr) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0>}> : (tensor<4xf32>, tensor<5xf32>, tensor<4xf32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @loss_scale_initial(%e: tensor<f32>) {
  // expected-error @+1 {{initial must be positive and finite, got 0}}
  %s = xfmr.loss_scale %e {initial = 0.0 : f64} : tensor<f32> -> tensor<f32>
  return
}

// -----

func.func @loss_scale_growth(%e: tensor<f32>) {
  // expected-error @+1 {{growth_interval must be at least 1, got 0}}
  %0:2 = xfmr.loss_scale_update %e, %e, %e {growth_interval = 0 : i64} : (tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  return
}

// -----

func.func @loss_scale_state_types(%e: tensor<f32>, %n: tensor<f16>) {
  // expected-error @+1 {{all of {exponent, good_steps, new_exponent, new_good_steps} have same type}}
  %0:2 = xfmr.loss_scale_update %e, %n, %e : (tensor<f32>, tensor<f16>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  return
}

// -----

func.func @loss_scale_without_norm(%p: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{a loss_scale needs the grad_norm that tells whether the scaled gradients overflowed}}
  %0:2 = xfmr.sgd_update %p, %p, %p lr(%lr : tensor<f32>) loss_scale(%lr : tensor<f32>) : tensor<4xf32>
  return
}

// -----

func.func @loss_scale_clip(%p: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{max_grad_norm must be positive or 0, got -1}}
  %0:2 = xfmr.sgd_update %p, %p, %p lr(%lr : tensor<f32>) grad_norm(%lr : tensor<f32>) loss_scale(%lr : tensor<f32>) {max_grad_norm = -1.0 : f64} : tensor<4xf32>
  return
}

// -----

func.func @learned_position_offset(%x: tensor<2x8x64xf32>, %t: tensor<9x64xf32>) {
  // expected-error @+1 {{sequence length 8 from offset 2 exceeds the 9 learned positions}}
  %y = xfmr.learned_position_encoding %x, %t {offset = 2 : i64} : tensor<2x8x64xf32>, tensor<9x64xf32>
  return
}

// -----

func.func @learned_position_negative_offset(%x: tensor<2x8x64xf32>, %t: tensor<9x64xf32>) {
  // expected-error @+1 {{attribute 'offset' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  %y = xfmr.learned_position_encoding %x, %t {offset = -1 : i64} : tensor<2x8x64xf32>, tensor<9x64xf32>
  return
}

// -----

func.func @pool_mask_shape(%x: tensor<2x8x64xf32>, %m: tensor<2x7xi1>) {
  // expected-error @+1 {{mask must be [batch, seq] = [2, 8], got [2, 7]}}
  %y = xfmr.pool %x, %m {mode = #xfmr.pool_mode<mean>} : (tensor<2x8x64xf32>, tensor<2x7xi1>) -> tensor<2x64xf32>
  return
}

// -----

func.func @pool_rank(%x: tensor<8x64xf32>, %m: tensor<8xi1>) {
  // expected-error @+2 {{pooled input must be [batch, seq, d], got 'tensor<8x64xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = xfmr.pool %x, %m {mode = #xfmr.pool_mode<cls>} : (tensor<8x64xf32>, tensor<8xi1>) -> tensor<64xf32>
  return
}

// -----

func.func @l2_normalize_epsilon(%x: tensor<2x64xf32>) {
  // expected-error @+1 {{epsilon must be a positive finite number, got 0}}
  %y = xfmr.l2_normalize %x {epsilon = 0.0 : f64} : tensor<2x64xf32>
  return
}

// -----

func.func @attention_probabilities_type(%x: tensor<2x8x64xf32>, %w: tensor<64x192xf32>, %wo: tensor<64x64xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x8x64xf32>', 'tensor<2x4x8x8xf32>' are incompatible with return type(s) of operation 'tensor<2x8x64xf32>', 'tensor<2x8x8xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %a, %p = xfmr.multi_head_attention %x in_proj(%w) out_proj(%wo) {num_heads = 4 : i64, return_probabilities}
         : (tensor<2x8x64xf32>, tensor<64x192xf32>, tensor<64x64xf32>) -> (tensor<2x8x64xf32>, tensor<2x8x8xf32>)
  return
}

// -----

func.func @attention_key_length_type(%q: tensor<2x1x2x16xf32>, %k: tensor<2x8x2x16xf32>, %len: tensor<2xi64>) {
  // expected-error @+1 {{key_length must be i32 [batch] = [2], got 'tensor<2xi64>'}}
  %o = xfmr.fused_attention %q, %k, %k key_length(%len) {scale = 0.25 : f64}
       : (tensor<2x1x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2xi64>) -> tensor<2x1x2x16xf32>
  return
}

// -----

func.func @attention_query_offset_shape(%q: tensor<2x1x2x16xf32>, %k: tensor<2x8x2x16xf32>, %off: tensor<3xi32>) {
  // expected-error @+1 {{query_offset must be i32 [batch] = [2], got 'tensor<3xi32>'}}
  %o = xfmr.fused_attention %q, %k, %k query_offset(%off) {causal, scale = 0.25 : f64}
       : (tensor<2x1x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<3xi32>) -> tensor<2x1x2x16xf32>
  return
}

// -----

func.func @rms_norm_gamma(%x: tensor<2x64xf32>, %g: tensor<32xf32>) {
  // expected-error @+1 {{gamma must be [64], got 'tensor<32xf32>'}}
  %y = xfmr.rms_norm %x, %g : (tensor<2x64xf32>, tensor<32xf32>) -> tensor<2x64xf32>
  return
}

// -----

func.func @rms_norm_epsilon(%x: tensor<2x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{epsilon must be a positive finite number, got -1}}
  %y = xfmr.rms_norm %x, %g {epsilon = -1.0 : f64} : (tensor<2x64xf32>, tensor<64xf32>) -> tensor<2x64xf32>
  return
}

// -----

func.func @relative_position_bias_heads(%t: tensor<32x4xf32>) {
  // expected-error @+1 {{result has 8 heads, the table 4}}
  %b = xfmr.relative_position_bias %t {max_distance = 128 : i64} : (tensor<32x4xf32>) -> tensor<1x8x8x8xf32>
  return
}

// -----

func.func @relative_position_bias_buckets(%t: tensor<3x4xf32>) {
  // expected-error @+1 {{needs at least 4 buckets, got 3}}
  %b = xfmr.relative_position_bias %t {max_distance = 128 : i64, bidirectional} : (tensor<3x4xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @relative_position_bias_distance(%t: tensor<32x4xf32>) {
  // expected-error @+1 {{max_distance must exceed the exact buckets (8), got 8}}
  %b = xfmr.relative_position_bias %t {max_distance = 8 : i64, bidirectional} : (tensor<32x4xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @relative_position_bias_batch(%t: tensor<32x4xf32>) {
  // expected-error @+1 {{without query_offset the batch dimension must be 1, got 'tensor<2x4x8x8xf32>'}}
  %b = xfmr.relative_position_bias %t {max_distance = 128 : i64} : (tensor<32x4xf32>) -> tensor<2x4x8x8xf32>
  return
}

// -----

func.func @relative_position_bias_offset(%t: tensor<32x4xf32>, %p: tensor<3xi32>) {
  // expected-error @+1 {{query_offset must be i32 [batch] = [2], got 'tensor<3xi32>'}}
  %b = xfmr.relative_position_bias %t query_offset(%p) {max_distance = 128 : i64} : (tensor<32x4xf32>, tensor<3xi32>) -> tensor<2x4x1x8xf32>
  return
}

// -----

func.func @relative_position_bias_band(%t: tensor<32x4xf32>) {
  // expected-error @+1 {{with seq_q = 8 the result must be [batch, heads, seq_q + seq_k - 1], got 'tensor<1x4x8x8xf32>'}}
  %b = xfmr.relative_position_bias %t {max_distance = 128 : i64, seq_q = 8 : i64} : (tensor<32x4xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @position_bias_shape(%q: tensor<2x8x4x16xf32>, %b: tensor<1x4x16xf32>) {
  // expected-error @+1 {{position_bias must be [1 | batch, heads, seq_q + seq_k - 1] = [1 | 2, 4, 15], got 'tensor<1x4x16xf32>'}}
  %o = xfmr.fused_attention %q, %q, %q position_bias(%b) {scale = 0.25 : f64}
         : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<1x4x16xf32>) -> tensor<2x8x4x16xf32>
  return
}

// -----

func.func @position_bias_and_attn_bias(%q: tensor<2x8x4x16xf32>, %b: tensor<1x4x15xf32>, %a: tensor<8x8xf32>) {
  // expected-error @+1 {{takes attn_bias or position_bias, not both}}
  %o = xfmr.fused_attention %q, %q, %q attn_bias(%a) position_bias(%b) {scale = 0.25 : f64}
         : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<8x8xf32>, tensor<1x4x15xf32>) -> tensor<2x8x4x16xf32>
  return
}

// -----

func.func @dequantize_group(%q: tensor<64x96xi8>, %s: tensor<2x96xf32>) {
  // expected-error @+1 {{group_size 48 does not divide dimension 0 (64)}}
  %w = xfmr.dequantize %q, %s {axis = 0 : i64, group_size = 48 : i64} : (tensor<64x96xi8>, tensor<2x96xf32>) -> tensor<64x96xf32>
  return
}

// -----

func.func @dequantize_scales(%q: tensor<64x96xi8>, %s: tensor<96x2xf32>) {
  // expected-error @+1 {{scales must be [2, 96] (one per group of 32 along dimension 0), got [96, 2]}}
  %w = xfmr.dequantize %q, %s {axis = 0 : i64, group_size = 32 : i64} : (tensor<64x96xi8>, tensor<96x2xf32>) -> tensor<64x96xf32>
  return
}

// -----

func.func @dequantize_scale_type(%q: tensor<64x96xi8>, %s: tensor<2x96xf64>) {
  // expected-error @+1 {{scales must be f32, bf16 or f16, got 'f64'}}
  %w = xfmr.dequantize %q, %s {axis = 0 : i64, group_size = 32 : i64} : (tensor<64x96xi8>, tensor<2x96xf64>) -> tensor<64x96xf32>
  return
}

// -----

func.func @dequantize_shape(%q: tensor<64x96xi8>, %s: tensor<2x96xf32>) {
  // expected-error @+1 {{values must be [96, 64] for a result of [96, 64] (8 bits a value), got [64, 96]}}
  %w = xfmr.dequantize %q, %s {axis = 0 : i64, group_size = 32 : i64} : (tensor<64x96xi8>, tensor<2x96xf32>) -> tensor<96x64xf32>
  return
}

// -----

func.func @dequantize_int4_packed(%q: tensor<96x64xi8>, %s: tensor<96x2xf32>) {
  // expected-error @+1 {{values must be [96, 32] for a result of [96, 64] (4 bits a value), got [96, 64]}}
  %w = xfmr.dequantize %q, %s {axis = 1 : i64, group_size = 32 : i64, bits = 4 : i64} : (tensor<96x64xi8>, tensor<96x2xf32>) -> tensor<96x64xf32>
  return
}

// -----

func.func @dequantize_int4_blocks(%q: tensor<96x32xi8>, %s: tensor<96x4xf32>) {
  // expected-error @+1 {{4-bit values are grouped along dimension 1 in whole blocks of 32, got axis 1 and group_size 16}}
  %w = xfmr.dequantize %q, %s {axis = 1 : i64, group_size = 16 : i64, bits = 4 : i64} : (tensor<96x32xi8>, tensor<96x4xf32>) -> tensor<96x64xf32>
  return
}

// -----

func.func @dequantize_bits(%q: tensor<96x64xi8>, %s: tensor<96x2xf32>) {
  // expected-error @+1 {{bits must be 8 or 4, got 2}}
  %w = xfmr.dequantize %q, %s {axis = 1 : i64, group_size = 32 : i64, bits = 2 : i64} : (tensor<96x64xi8>, tensor<96x2xf32>) -> tensor<96x64xf32>
  return
}

// -----

func.func @dequantize_mins(%q: tensor<96x32xi8>, %s: tensor<96x2xf32>, %m: tensor<96x2xbf16>) {
  // expected-error @+1 {{mins must be of the scales' type 'tensor<96x2xf32>', got 'tensor<96x2xbf16>'}}
  %w = xfmr.dequantize %q, %s, %m {axis = 1 : i64, group_size = 32 : i64, bits = 4 : i64} : (tensor<96x32xi8>, tensor<96x2xf32>, tensor<96x2xbf16>) -> tensor<96x64xf32>
  return
}

// -----

func.func @dequantize_axis(%q: tensor<64x96xi8>, %s: tensor<2x96xf32>) {
  // expected-error @+1 {{attribute 'axis' failed to satisfy constraint}}
  %w = xfmr.dequantize %q, %s {axis = 2 : i64, group_size = 32 : i64} : (tensor<64x96xi8>, tensor<2x96xf32>) -> tensor<64x96xf32>
  return
}

// -----

func.func @fused_attention_groups(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x3x16xf32>) {
  // expected-error @+1 {{the query's 4 heads must be a multiple of the key's 3 (grouped-query attention)}}
  %o = xfmr.fused_attention %q, %k, %k {scale = 0.25 : f64}
       : (tensor<2x8x4x16xf32>, tensor<2x8x3x16xf32>, tensor<2x8x3x16xf32>) -> tensor<2x8x4x16xf32>
  return
}

// -----

func.func @fused_attention_group_values(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x16xf32>, %v: tensor<2x8x4x16xf32>) {
  // expected-error @+1 {{key and value must both be [2, 8, 2, 16] to match query [2, 8, 4, 16], got key [2, 8, 2, 16] and value [2, 8, 4, 16]}}
  %o = xfmr.fused_attention %q, %k, %v {scale = 0.25 : f64}
       : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32>
  return
}

// -----

func.func @rotary_rank(%x: tensor<8x4x16xf32>) {
  // expected-error @+1 {{input must be [batch, seq, heads, head_dim], got 'tensor<8x4x16xf32>'}}
  %r = xfmr.rotary_embedding %x {inv_freq = array<f64: 1.0>} : tensor<8x4x16xf32>
  return
}

// -----

func.func @rotary_too_many_frequencies(%x: tensor<2x8x4x4xf32>) {
  // expected-error @+1 {{inv_freq must hold 1 to head_dim / 2 = 2 frequencies, got 3}}
  %r = xfmr.rotary_embedding %x {inv_freq = array<f64: 1.0, 0.5, 0.25>} : tensor<2x8x4x4xf32>
  return
}

// -----

func.func @rotary_no_frequencies(%x: tensor<2x8x4x4xf32>) {
  // expected-error @+1 {{inv_freq must hold 1 to head_dim / 2 = 2 frequencies, got 0}}
  %r = xfmr.rotary_embedding %x {inv_freq = array<f64>} : tensor<2x8x4x4xf32>
  return
}

// -----

func.func @rotary_negative_frequency(%x: tensor<2x8x4x4xf32>) {
  // expected-error @+1 {{inv_freq must be finite and non-negative}}
  %r = xfmr.rotary_embedding %x {inv_freq = array<f64: -1.0>} : tensor<2x8x4x4xf32>
  return
}

// -----

func.func @rotary_scaling(%x: tensor<2x8x4x4xf32>) {
  // expected-error @+1 {{attention_scaling must be positive and finite, got 0}}
  %r = xfmr.rotary_embedding %x {inv_freq = array<f64: 1.0>, attention_scaling = 0.0 : f64} : tensor<2x8x4x4xf32>
  return
}

// -----

func.func @rotary_positions(%x: tensor<2x8x4x4xf32>, %p: tensor<3xi32>) {
  // expected-error @+1 {{positions must be i32 [batch] = [2], got 'tensor<3xi32>'}}
  %r = xfmr.rotary_embedding %x positions(%p : tensor<3xi32>) {inv_freq = array<f64: 1.0>} : tensor<2x8x4x4xf32>
  return
}

// -----

func.func @layer_yield_types(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{yields 1 values whose types differ from its 1 results}}
  %y = xfmr.layer "h.0" -> (tensor<2x4xf32>) {
    %z = arith.addf %x, %x : tensor<2x4xf32>
    %c = tensor.cast %z : tensor<2x4xf32> to tensor<?x4xf32>
    xfmr.yield %c : tensor<?x4xf32>
  }
  return %y : tensor<2x4xf32>
}

// -----

func.func @layer_name(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{needs a name}}
  xfmr.layer "" {
    xfmr.yield
  }
  return
}

// -----

func.func @yield_outside_layer() {
  // expected-error @+1 {{expects parent op 'xfmr.layer'}}
  xfmr.yield
}
