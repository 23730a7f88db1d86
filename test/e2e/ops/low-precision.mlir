// bf16 and f16 models: each op computed in f32 (xfmr-compute-in-f32, so the
// f32 kernels run; the GPU's products read the bf16 / f16 factors and
// accumulate in f32 on tensor cores: with K, M and N tails, a weight stored
// [N, K] and a transposed left factor; the attentions too: head dims of
// 32 and 64 staged 16 bytes at a time, 36 element by element, several
// query blocks and key tiles, causal (tiles some rows see only in part,
// and whole ones), padding mask and bias; head dim 128, whose Q rows and
// two stages of key and value tiles are in dynamic shared memory on a GPU,
// copied 16 bytes at a time; head dim 100, causal, the same staged element
// by element; head dim 160, causal: 8 warps of 16 rows, Q in registers), an
// add + layer norm (the norm
// of the unrounded sum, as one op), each
// result stored in bf16 / f16, as in PyTorch's
// low-precision models; the f32 inputs on disk are converted at load. Against
// float64 PyTorch storing the same roundings: within two units in the last
// place (bf16 8e-3, f16 1e-3 relative to the largest value).
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %testlib/ops.py generate low_precision %t/inputs.safetensors
// RUN: xfmrc %s -o %t/model
// RUN: %t/model --inputs=%t/inputs.safetensors --output=%t/outputs.safetensors
// RUN: %python %testlib/ops.py check low_precision %t/inputs.safetensors %t/outputs.safetensors | FileCheck %s
// Where the host has AVX-512 BF16, the bf16 products of more than 8 rows (a weight stored [K, N]
// and one [N, K] with a depth tail) and the few-row one against the [N, K] weight (a decode
// step, skinny_nk_bf16 and skinny_deep_bf16, a depth of 200: whole steps and a tail) take
// vdpbf16ps on the stored factors; --bf16-dot=false keeps the f32
// kernels, which widen them.
// RUN: %if avx512bf16 %{ xfmrc %s --emit=llvm -o - | FileCheck %s --check-prefix=BF16DOT %}
// BF16DOT: call <16 x float> @llvm.x86.avx512bf16.dpbf16ps.512(<16 x float>
// RUN: %if avx512bf16 %{ xfmrc %s --bf16-dot=false -o %t/model-f32-products %}
// RUN: %if avx512bf16 %{ %t/model-f32-products --inputs=%t/inputs.safetensors --output=%t/outputs-f32-products.safetensors %}
// RUN: %if avx512bf16 %{ %python %testlib/ops.py check low_precision %t/inputs.safetensors %t/outputs-f32-products.safetensors | FileCheck %s %}
// The GPU kernels, their thread blocks run as loops on the CPU.
// RUN: xfmrc %s --emulate-gpu-kernels -o %t/gpu-emulated
// RUN: %t/gpu-emulated --inputs=%t/inputs.safetensors --output=%t/outputs-gpu.safetensors
// RUN: %python %testlib/ops.py check low_precision %t/inputs.safetensors %t/outputs-gpu.safetensors | FileCheck %s
// The kernels for sm_90a, whose attention forwards multiply by warpgroup
// MMAs (two warpgroups of 64 rows, K and V tiles as 8 x 8 core matrices,
// copied in their order), each phase's threads last to first.
// RUN: xfmrc %s --emulate-gpu-kernels --reverse-gpu-threads --gpu-arch=sm_90a -o %t/gpu-emulated-sm90a
// RUN: %t/gpu-emulated-sm90a --inputs=%t/inputs.safetensors --output=%t/outputs-sm90a.safetensors
// RUN: %python %testlib/ops.py check low_precision %t/inputs.safetensors %t/outputs-sm90a.safetensors | FileCheck %s
// The outputs are stored in the model's types.
// RUN: %python -c "import json, struct, sys; f = open(sys.argv[1], 'rb'); n = struct.unpack('<Q', f.read(8))[0]; h = json.loads(f.read(n)); print(h['linear_bf16']['dtype'], h['attention_f16']['dtype'])" %t/outputs.safetensors | FileCheck %s --check-prefix=DTYPES
// DTYPES: BF16 F16
// CHECK: PASS: linear_bf16
// CHECK: PASS: softmax_bf16
// CHECK: PASS: layer_norm_bf16
// CHECK: PASS: attention_bf16
// CHECK: PASS: nk_residual_bf16
// CHECK: PASS: tn_bf16
// CHECK: PASS: cross_padding_bias_bf16
// CHECK: PASS: causal_long_bf16
// CHECK: PASS: head_dim_128_bf16
// CHECK: PASS: head_dim_100_causal_bf16
// CHECK: PASS: head_dim_160_causal_bf16
// CHECK: PASS: sum_bf16
// CHECK: PASS: add_norm_bf16
// CHECK: PASS: skinny_kn_bf16
// CHECK: PASS: skinny_nk_bf16
// CHECK: PASS: skinny_deep_bf16
// CHECK: PASS: linear_f16
// CHECK: PASS: softmax_f16
// CHECK: PASS: layer_norm_f16
// CHECK: PASS: attention_f16
// CHECK: PASS: nk_residual_f16
// CHECK: PASS: tn_f16
// CHECK: PASS: cross_padding_bias_f16
// CHECK: PASS: causal_long_f16
// CHECK: PASS: head_dim_128_f16
// CHECK: PASS: head_dim_100_causal_f16
// CHECK: PASS: head_dim_160_causal_f16
// CHECK: PASS: sum_f16
// CHECK: PASS: add_norm_f16
// CHECK: PASS: skinny_kn_f16
// CHECK: PASS: skinny_nk_f16
// CHECK: PASS: skinny_deep_f16

func.func @forward(
    %x_bf16: tensor<2x40x64xbf16> {xfmr.input = "x_bf16"}, %w_bf16: tensor<64x96xbf16> {xfmr.input = "w_bf16"},
    %b_bf16: tensor<96xbf16> {xfmr.input = "b_bf16"}, %g_bf16: tensor<96xbf16> {xfmr.input = "g_bf16"},
    %beta_bf16: tensor<96xbf16> {xfmr.input = "beta_bf16"}, %q_bf16: tensor<1x48x2x32xbf16> {xfmr.input = "q_bf16"},
    %k_bf16: tensor<1x48x2x32xbf16> {xfmr.input = "k_bf16"}, %v_bf16: tensor<1x48x2x32xbf16> {xfmr.input = "v_bf16"},
    %xk_bf16: tensor<2x40x70xbf16> {xfmr.input = "xk_bf16"}, %wnk_bf16: tensor<130x70xbf16> {xfmr.input = "wnk_bf16"},
    %r_bf16: tensor<2x40x130xbf16> {xfmr.input = "r_bf16"}, %pt_bf16: tensor<70x80xbf16> {xfmr.input = "pt_bf16"},
    %wk_bf16: tensor<70x48xbf16> {xfmr.input = "wk_bf16"},
    %cq_bf16: tensor<2x70x2x36xbf16> {xfmr.input = "cq_bf16"}, %ck_bf16: tensor<2x130x2x36xbf16> {xfmr.input = "ck_bf16"},
    %cv_bf16: tensor<2x130x2x36xbf16> {xfmr.input = "cv_bf16"}, %pad_bf16: tensor<2x130xi1> {xfmr.input = "pad_bf16"},
    %lq_bf16: tensor<1x2x150x64xbf16> {xfmr.input = "lq_bf16"}, %lk_bf16: tensor<1x2x150x64xbf16> {xfmr.input = "lk_bf16"},
    %lv_bf16: tensor<1x2x150x64xbf16> {xfmr.input = "lv_bf16"}, %cb_bf16: tensor<2x1x70x130xbf16> {xfmr.input = "cb_bf16"}, %ra_bf16: tensor<2x40x96xbf16> {xfmr.input = "ra_bf16"},
    %hq_bf16: tensor<1x200x2x128xbf16> {xfmr.input = "hq_bf16"}, %hk_bf16: tensor<1x200x2x128xbf16> {xfmr.input = "hk_bf16"}, %hv_bf16: tensor<1x200x2x128xbf16> {xfmr.input = "hv_bf16"},
    %eq_bf16: tensor<1x140x2x100xbf16> {xfmr.input = "eq_bf16"}, %ek_bf16: tensor<1x140x2x100xbf16> {xfmr.input = "ek_bf16"}, %ev_bf16: tensor<1x140x2x100xbf16> {xfmr.input = "ev_bf16"},
    %wq_bf16: tensor<1x90x2x160xbf16> {xfmr.input = "wq_bf16"}, %wk2_bf16: tensor<1x90x2x160xbf16> {xfmr.input = "wk2_bf16"}, %wv_bf16: tensor<1x90x2x160xbf16> {xfmr.input = "wv_bf16"},
    %xs_bf16: tensor<3x64xbf16> {xfmr.input = "xs_bf16"}, %xs2_bf16: tensor<3x70xbf16> {xfmr.input = "xs2_bf16"},
    %xs3_bf16: tensor<3x200xbf16> {xfmr.input = "xs3_bf16"}, %wdeep_bf16: tensor<40x200xbf16> {xfmr.input = "wdeep_bf16"},
    %x_f16: tensor<2x40x64xf16> {xfmr.input = "x_f16"}, %w_f16: tensor<64x96xf16> {xfmr.input = "w_f16"},
    %b_f16: tensor<96xf16> {xfmr.input = "b_f16"}, %g_f16: tensor<96xf16> {xfmr.input = "g_f16"},
    %beta_f16: tensor<96xf16> {xfmr.input = "beta_f16"}, %q_f16: tensor<1x48x2x32xf16> {xfmr.input = "q_f16"},
    %k_f16: tensor<1x48x2x32xf16> {xfmr.input = "k_f16"}, %v_f16: tensor<1x48x2x32xf16> {xfmr.input = "v_f16"},
    %xk_f16: tensor<2x40x70xf16> {xfmr.input = "xk_f16"}, %wnk_f16: tensor<130x70xf16> {xfmr.input = "wnk_f16"},
    %r_f16: tensor<2x40x130xf16> {xfmr.input = "r_f16"}, %pt_f16: tensor<70x80xf16> {xfmr.input = "pt_f16"},
    %wk_f16: tensor<70x48xf16> {xfmr.input = "wk_f16"},
    %cq_f16: tensor<2x70x2x36xf16> {xfmr.input = "cq_f16"}, %ck_f16: tensor<2x130x2x36xf16> {xfmr.input = "ck_f16"},
    %cv_f16: tensor<2x130x2x36xf16> {xfmr.input = "cv_f16"}, %pad_f16: tensor<2x130xi1> {xfmr.input = "pad_f16"},
    %lq_f16: tensor<1x2x150x64xf16> {xfmr.input = "lq_f16"}, %lk_f16: tensor<1x2x150x64xf16> {xfmr.input = "lk_f16"},
    %lv_f16: tensor<1x2x150x64xf16> {xfmr.input = "lv_f16"}, %cb_f16: tensor<2x1x70x130xf16> {xfmr.input = "cb_f16"}, %ra_f16: tensor<2x40x96xf16> {xfmr.input = "ra_f16"},
    %hq_f16: tensor<1x200x2x128xf16> {xfmr.input = "hq_f16"}, %hk_f16: tensor<1x200x2x128xf16> {xfmr.input = "hk_f16"}, %hv_f16: tensor<1x200x2x128xf16> {xfmr.input = "hv_f16"},
    %eq_f16: tensor<1x140x2x100xf16> {xfmr.input = "eq_f16"}, %ek_f16: tensor<1x140x2x100xf16> {xfmr.input = "ek_f16"}, %ev_f16: tensor<1x140x2x100xf16> {xfmr.input = "ev_f16"},
    %wq_f16: tensor<1x90x2x160xf16> {xfmr.input = "wq_f16"}, %wk2_f16: tensor<1x90x2x160xf16> {xfmr.input = "wk2_f16"}, %wv_f16: tensor<1x90x2x160xf16> {xfmr.input = "wv_f16"},
    %xs_f16: tensor<3x64xf16> {xfmr.input = "xs_f16"}, %xs2_f16: tensor<3x70xf16> {xfmr.input = "xs2_f16"},
    %xs3_f16: tensor<3x200xf16> {xfmr.input = "xs3_f16"}, %wdeep_f16: tensor<40x200xf16> {xfmr.input = "wdeep_f16"})
    -> (tensor<2x40x96xbf16> {xfmr.output = "linear_bf16"}, tensor<2x40x96xbf16> {xfmr.output = "softmax_bf16"},
        tensor<2x40x96xbf16> {xfmr.output = "layer_norm_bf16"}, tensor<1x48x2x32xbf16> {xfmr.output = "attention_bf16"},
        tensor<2x40x130xbf16> {xfmr.output = "nk_residual_bf16"}, tensor<80x48xbf16> {xfmr.output = "tn_bf16"},
        tensor<2x70x2x36xbf16> {xfmr.output = "cross_padding_bias_bf16"}, tensor<1x2x150x64xbf16> {xfmr.output = "causal_long_bf16"},
        tensor<2x40x96xbf16> {xfmr.output = "sum_bf16"}, tensor<2x40x96xbf16> {xfmr.output = "add_norm_bf16"},
        tensor<1x200x2x128xbf16> {xfmr.output = "head_dim_128_bf16"}, tensor<1x140x2x100xbf16> {xfmr.output = "head_dim_100_causal_bf16"},
        tensor<1x90x2x160xbf16> {xfmr.output = "head_dim_160_causal_bf16"},
        tensor<3x96xbf16> {xfmr.output = "skinny_kn_bf16"}, tensor<3x130xbf16> {xfmr.output = "skinny_nk_bf16"},
        tensor<3x40xbf16> {xfmr.output = "skinny_deep_bf16"},
        tensor<2x40x96xf16> {xfmr.output = "linear_f16"}, tensor<2x40x96xf16> {xfmr.output = "softmax_f16"},
        tensor<2x40x96xf16> {xfmr.output = "layer_norm_f16"}, tensor<1x48x2x32xf16> {xfmr.output = "attention_f16"},
        tensor<2x40x130xf16> {xfmr.output = "nk_residual_f16"}, tensor<80x48xf16> {xfmr.output = "tn_f16"},
        tensor<2x70x2x36xf16> {xfmr.output = "cross_padding_bias_f16"}, tensor<1x2x150x64xf16> {xfmr.output = "causal_long_f16"},
        tensor<2x40x96xf16> {xfmr.output = "sum_f16"}, tensor<2x40x96xf16> {xfmr.output = "add_norm_f16"},
        tensor<1x200x2x128xf16> {xfmr.output = "head_dim_128_f16"}, tensor<1x140x2x100xf16> {xfmr.output = "head_dim_100_causal_f16"},
        tensor<1x90x2x160xf16> {xfmr.output = "head_dim_160_causal_f16"},
        tensor<3x96xf16> {xfmr.output = "skinny_kn_f16"}, tensor<3x130xf16> {xfmr.output = "skinny_nk_f16"},
        tensor<3x40xf16> {xfmr.output = "skinny_deep_f16"}) {
  %h_bf16 = xfmr.fused_linear %x_bf16, %w_bf16 bias(%b_bf16) {activation = #xfmr.activation<gelu>}
      : (tensor<2x40x64xbf16>, tensor<64x96xbf16>, tensor<96xbf16>) -> tensor<2x40x96xbf16>
  %s_bf16 = xfmr.softmax %h_bf16 : tensor<2x40x96xbf16>
  %l_bf16 = xfmr.layer_norm %h_bf16, %g_bf16, %beta_bf16 {epsilon = 1.0e-5 : f64}
      : (tensor<2x40x96xbf16>, tensor<96xbf16>, tensor<96xbf16>) -> tensor<2x40x96xbf16>
  %a_bf16 = xfmr.fused_attention %q_bf16, %k_bf16, %v_bf16 {causal, scale = 0.17677669529663687 : f64}
      : (tensor<1x48x2x32xbf16>, tensor<1x48x2x32xbf16>, tensor<1x48x2x32xbf16>) -> tensor<1x48x2x32xbf16>
  %n_bf16 = xfmr.fused_linear %xk_bf16, %wnk_bf16 residual(%r_bf16) {transpose_weight}
      : (tensor<2x40x70xbf16>, tensor<130x70xbf16>, tensor<2x40x130xbf16>) -> tensor<2x40x130xbf16>
  %t_bf16 = xfmr.matmul %pt_bf16, %wk_bf16 {transpose_lhs} : (tensor<70x80xbf16>, tensor<70x48xbf16>) -> tensor<80x48xbf16>
  %c_bf16 = xfmr.fused_attention %cq_bf16, %ck_bf16, %cv_bf16 padding_mask(%pad_bf16) attn_bias(%cb_bf16) {scale = 0.16666666666666666 : f64}
      : (tensor<2x70x2x36xbf16>, tensor<2x130x2x36xbf16>, tensor<2x130x2x36xbf16>, tensor<2x130xi1>, tensor<2x1x70x130xbf16>) -> tensor<2x70x2x36xbf16>
  %lc_bf16 = xfmr.fused_attention %lq_bf16, %lk_bf16, %lv_bf16 {causal, scale = 0.125 : f64, layout = #xfmr.layout<bhsd>}
      : (tensor<1x2x150x64xbf16>, tensor<1x2x150x64xbf16>, tensor<1x2x150x64xbf16>) -> tensor<1x2x150x64xbf16>
  %hd_bf16 = xfmr.fused_attention %hq_bf16, %hk_bf16, %hv_bf16 {scale = 0.08838834764831845 : f64}
      : (tensor<1x200x2x128xbf16>, tensor<1x200x2x128xbf16>, tensor<1x200x2x128xbf16>) -> tensor<1x200x2x128xbf16>
  %ed_bf16 = xfmr.fused_attention %eq_bf16, %ek_bf16, %ev_bf16 {causal, scale = 0.1 : f64}
      : (tensor<1x140x2x100xbf16>, tensor<1x140x2x100xbf16>, tensor<1x140x2x100xbf16>) -> tensor<1x140x2x100xbf16>
  %wd_bf16 = xfmr.fused_attention %wq_bf16, %wk2_bf16, %wv_bf16 {causal, scale = 0.08 : f64}
      : (tensor<1x90x2x160xbf16>, tensor<1x90x2x160xbf16>, tensor<1x90x2x160xbf16>) -> tensor<1x90x2x160xbf16>
  %sk_bf16 = xfmr.fused_linear %xs_bf16, %w_bf16 bias(%b_bf16) {activation = #xfmr.activation<gelu>}
      : (tensor<3x64xbf16>, tensor<64x96xbf16>, tensor<96xbf16>) -> tensor<3x96xbf16>
  %sn_bf16 = xfmr.linear %xs2_bf16, %wnk_bf16 {transpose_weight} : (tensor<3x70xbf16>, tensor<130x70xbf16>) -> tensor<3x130xbf16>
  %sd_bf16 = xfmr.linear %xs3_bf16, %wdeep_bf16 {transpose_weight} : (tensor<3x200xbf16>, tensor<40x200xbf16>) -> tensor<3x40xbf16>
  %sum_bf16, %an_bf16 = xfmr.fused_add_layer_norm %h_bf16, %ra_bf16, %g_bf16, %beta_bf16 {epsilon = 1.0e-5 : f64}
      : (tensor<2x40x96xbf16>, tensor<2x40x96xbf16>, tensor<96xbf16>, tensor<96xbf16>) -> (tensor<2x40x96xbf16>, tensor<2x40x96xbf16>)
  %h_f16 = xfmr.fused_linear %x_f16, %w_f16 bias(%b_f16) {activation = #xfmr.activation<gelu>}
      : (tensor<2x40x64xf16>, tensor<64x96xf16>, tensor<96xf16>) -> tensor<2x40x96xf16>
  %s_f16 = xfmr.softmax %h_f16 : tensor<2x40x96xf16>
  %l_f16 = xfmr.layer_norm %h_f16, %g_f16, %beta_f16 {epsilon = 1.0e-5 : f64}
      : (tensor<2x40x96xf16>, tensor<96xf16>, tensor<96xf16>) -> tensor<2x40x96xf16>
  %a_f16 = xfmr.fused_attention %q_f16, %k_f16, %v_f16 {causal, scale = 0.17677669529663687 : f64}
      : (tensor<1x48x2x32xf16>, tensor<1x48x2x32xf16>, tensor<1x48x2x32xf16>) -> tensor<1x48x2x32xf16>
  %n_f16 = xfmr.fused_linear %xk_f16, %wnk_f16 residual(%r_f16) {transpose_weight}
      : (tensor<2x40x70xf16>, tensor<130x70xf16>, tensor<2x40x130xf16>) -> tensor<2x40x130xf16>
  %t_f16 = xfmr.matmul %pt_f16, %wk_f16 {transpose_lhs} : (tensor<70x80xf16>, tensor<70x48xf16>) -> tensor<80x48xf16>
  %c_f16 = xfmr.fused_attention %cq_f16, %ck_f16, %cv_f16 padding_mask(%pad_f16) attn_bias(%cb_f16) {scale = 0.16666666666666666 : f64}
      : (tensor<2x70x2x36xf16>, tensor<2x130x2x36xf16>, tensor<2x130x2x36xf16>, tensor<2x130xi1>, tensor<2x1x70x130xf16>) -> tensor<2x70x2x36xf16>
  %lc_f16 = xfmr.fused_attention %lq_f16, %lk_f16, %lv_f16 {causal, scale = 0.125 : f64, layout = #xfmr.layout<bhsd>}
      : (tensor<1x2x150x64xf16>, tensor<1x2x150x64xf16>, tensor<1x2x150x64xf16>) -> tensor<1x2x150x64xf16>
  %hd_f16 = xfmr.fused_attention %hq_f16, %hk_f16, %hv_f16 {scale = 0.08838834764831845 : f64}
      : (tensor<1x200x2x128xf16>, tensor<1x200x2x128xf16>, tensor<1x200x2x128xf16>) -> tensor<1x200x2x128xf16>
  %ed_f16 = xfmr.fused_attention %eq_f16, %ek_f16, %ev_f16 {causal, scale = 0.1 : f64}
      : (tensor<1x140x2x100xf16>, tensor<1x140x2x100xf16>, tensor<1x140x2x100xf16>) -> tensor<1x140x2x100xf16>
  %wd_f16 = xfmr.fused_attention %wq_f16, %wk2_f16, %wv_f16 {causal, scale = 0.08 : f64}
      : (tensor<1x90x2x160xf16>, tensor<1x90x2x160xf16>, tensor<1x90x2x160xf16>) -> tensor<1x90x2x160xf16>
  %sk_f16 = xfmr.fused_linear %xs_f16, %w_f16 bias(%b_f16) {activation = #xfmr.activation<gelu>}
      : (tensor<3x64xf16>, tensor<64x96xf16>, tensor<96xf16>) -> tensor<3x96xf16>
  %sn_f16 = xfmr.linear %xs2_f16, %wnk_f16 {transpose_weight} : (tensor<3x70xf16>, tensor<130x70xf16>) -> tensor<3x130xf16>
  %sd_f16 = xfmr.linear %xs3_f16, %wdeep_f16 {transpose_weight} : (tensor<3x200xf16>, tensor<40x200xf16>) -> tensor<3x40xf16>
  %sum_f16, %an_f16 = xfmr.fused_add_layer_norm %h_f16, %ra_f16, %g_f16, %beta_f16 {epsilon = 1.0e-5 : f64}
      : (tensor<2x40x96xf16>, tensor<2x40x96xf16>, tensor<96xf16>, tensor<96xf16>) -> (tensor<2x40x96xf16>, tensor<2x40x96xf16>)
  return %h_bf16, %s_bf16, %l_bf16, %a_bf16, %n_bf16, %t_bf16, %c_bf16, %lc_bf16, %sum_bf16, %an_bf16, %hd_bf16, %ed_bf16, %wd_bf16, %sk_bf16, %sn_bf16, %sd_bf16,
         %h_f16, %s_f16, %l_f16, %a_f16, %n_f16, %t_f16, %c_f16, %lc_f16, %sum_f16, %an_f16, %hd_f16, %ed_f16, %wd_f16, %sk_f16, %sn_f16, %sd_f16
      : tensor<2x40x96xbf16>, tensor<2x40x96xbf16>, tensor<2x40x96xbf16>, tensor<1x48x2x32xbf16>,
        tensor<2x40x130xbf16>, tensor<80x48xbf16>, tensor<2x70x2x36xbf16>, tensor<1x2x150x64xbf16>,
        tensor<2x40x96xbf16>, tensor<2x40x96xbf16>, tensor<1x200x2x128xbf16>, tensor<1x140x2x100xbf16>,
        tensor<1x90x2x160xbf16>, tensor<3x96xbf16>, tensor<3x130xbf16>, tensor<3x40xbf16>,
        tensor<2x40x96xf16>, tensor<2x40x96xf16>, tensor<2x40x96xf16>, tensor<1x48x2x32xf16>,
        tensor<2x40x130xf16>, tensor<80x48xf16>, tensor<2x70x2x36xf16>, tensor<1x2x150x64xf16>,
        tensor<2x40x96xf16>, tensor<2x40x96xf16>, tensor<1x200x2x128xf16>, tensor<1x140x2x100xf16>,
        tensor<1x90x2x160xf16>, tensor<3x96xf16>, tensor<3x130xf16>, tensor<3x40xf16>
}
