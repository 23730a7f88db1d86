// RUN: xfmr-opt %s --xfmr-autodiff=function=loss | FileCheck %s
// RUN: xfmr-opt %s --xfmr-autodiff='function=loss wrt-inputs=x' | FileCheck %s --check-prefix=WRT
// RUN: xfmr-opt %s --xfmr-autodiff=function=attention | FileCheck %s --check-prefix=ATTN
// RUN: xfmr-opt %s --xfmr-autodiff=function=mixed | FileCheck %s --check-prefix=MIXED
// RUN: xfmr-opt %s --xfmr-autodiff='function=mixed loss-scale' | FileCheck %s --check-prefix=SCALED
// RUN: xfmr-opt %s --xfmr-autodiff=function=slices | FileCheck %s --check-prefix=SLICES
// RUN: xfmr-opt %s --xfmr-autodiff=function=layers | FileCheck %s --check-prefix=LAYERS
// RUN: not xfmr-opt %s --xfmr-autodiff='function=has_loss_scale loss-scale' 2>&1 | FileCheck %s --check-prefix=SCALENAME
// RUN: not xfmr-opt %s --xfmr-autodiff=function=nope 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not xfmr-opt %s --xfmr-autodiff=function=scores 2>&1 | FileCheck %s --check-prefix=NOTSCALAR
// RUN: not xfmr-opt %s --xfmr-autodiff='function=loss wrt-inputs=y' 2>&1 | FileCheck %s --check-prefix=NOINPUT
// RUN: not xfmr-opt %s --xfmr-autodiff='function=loss wrt-inputs=t' 2>&1 | FileCheck %s --check-prefix=INTINPUT
// MISSING: error: xfmr-autodiff: no function @nope with a body
// NOTSCALAR: error: xfmr-autodiff: @scores must be one block returning a rank-0 float loss first
// NOINPUT: error: xfmr-autodiff: @loss has no input named 'y'
// INTINPUT: error: xfmr-autodiff: argument 1 of @loss is not a float tensor

// The reverse sweep of linear -> relu -> layer_norm -> softmax ->
// cross_entropy: each op's adjoint, in reverse order; a linear's weight
// gradient is x^T dy over the flattened rows, its bias gradient the sum of dy.
// CHECK-LABEL: func.func @loss_grad
// CHECK-SAME: -> (tensor<f32> {xfmr.output = "loss"}, tensor<8x16xf32> {xfmr.output = "grad:w"}, tensor<16xf32> {xfmr.output = "grad:b"}, tensor<16xf32> {xfmr.output = "grad:g"}, tensor<16xf32> {xfmr.output = "grad:beta"})
// CHECK: %[[PRE:.*]] = xfmr.add
// CHECK: %[[ACT:.*]] = xfmr.relu %[[PRE]]
// CHECK: %[[PROBS:.*]] = xfmr.softmax
// CHECK: %[[LOSS:.*]] = xfmr.cross_entropy %[[PROBS]]
// CHECK: %[[SEED:.*]] = arith.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DPROBS:.*]] = xfmr.cross_entropy_backward %[[PROBS]], %{{.*}}, %[[SEED]]
// CHECK: %[[DNORM:.*]] = xfmr.softmax_backward %[[PROBS]], %[[DPROBS]]
// CHECK: %[[DACT:.*]], %[[DG:.*]], %[[DBETA:.*]] = xfmr.layer_norm_backward %[[ACT]], %[[DNORM]] gamma(%{{.*}})
// CHECK: %[[DPRE:.*]] = xfmr.activation_backward %[[PRE]], %[[DACT]] {activation = #xfmr.activation<relu>}
// The bias's gradient: the broadcast batch and sequence dims summed as one.
// CHECK: %[[ROWS:.*]] = xfmr.reshape %[[DPRE]] : (tensor<2x4x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT: %[[SUM:.*]] = xfmr.reduce %[[ROWS]] {axis = 0 : i64, kind = #xfmr.reduce_kind<sum>} : (tensor<8x16xf32>) -> tensor<1x16xf32>
// CHECK-NEXT: %[[DB:.*]] = xfmr.reshape %[[SUM]] : (tensor<1x16xf32>) -> tensor<16xf32>
// CHECK: %[[X2:.*]] = xfmr.reshape %arg0 : (tensor<2x4x8xf32>) -> tensor<8x8xf32>
// CHECK: %[[DY2:.*]] = xfmr.reshape %[[DPRE]] : (tensor<2x4x16xf32>) -> tensor<8x16xf32>
// CHECK: %[[DW:.*]] = xfmr.matmul %[[X2]], %[[DY2]] {transpose_lhs}
// CHECK: return %[[LOSS]], %[[DW]], %[[DB]], %[[DG]], %[[DBETA]]

// Inputs on request: dx = dy w^T.
// WRT-LABEL: func.func @loss_grad
// WRT-SAME: tensor<2x4x8xf32> {xfmr.output = "grad:x"}
// WRT: %[[DX:.*]] = xfmr.matmul %{{.*}}, %arg2 {transpose_rhs} : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
// WRT: return %{{.*}}, %[[DX]],
func.func @loss(%x: tensor<2x4x8xf32> {xfmr.input = "x"}, %t: tensor<2x4xi32> {xfmr.input = "t"},
                %w: tensor<8x16xf32> {xfmr.param = "w"}, %b: tensor<16xf32> {xfmr.param = "b"},
                %g: tensor<16xf32> {xfmr.param = "g"}, %beta: tensor<16xf32> {xfmr.param = "beta"})
    -> (tensor<f32> {xfmr.output = "loss"}) {
  %h = xfmr.linear %x, %w, %b : (tensor<2x4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %a = xfmr.relu %h : tensor<2x4x16xf32>
  %n = xfmr.layer_norm %a, %g, %beta : (tensor<2x4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %s = xfmr.softmax %n {axis = -1 : i64} : tensor<2x4x16xf32>
  %l = xfmr.cross_entropy %s, %t : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// Fused attention: the forward also returns the per-row logsumexp, which
// the FlashAttention-2 backward takes instead of a probability matrix; it
// keeps the forward's window and soft cap.
// ATTN-LABEL: func.func @attention_grad
// ATTN: %[[O:.*]], %[[LSE:.*]] = xfmr.fused_attention %arg0, %arg1, %arg2 {causal, scale = 2.500000e-01 : f64, softcap = 2.000000e+01 : f64, window = 4 : i64} {{.*}} -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
// ATTN: xfmr.fused_attention_backward %arg0, %arg1, %arg2, %[[O]], %[[LSE]], %{{.*}} {causal, scale = 2.500000e-01 : f64, softcap = 2.000000e+01 : f64, window = 4 : i64}
// ATTN-NOT: tensor<2x4x8x8xf32>
// ATTN: return
func.func @attention(%q: tensor<2x8x4x16xf32> {xfmr.param = "q"}, %k: tensor<2x8x4x16xf32> {xfmr.param = "k"},
                     %v: tensor<2x8x4x16xf32> {xfmr.param = "v"}, %r: tensor<2x8x4x16xf32> {xfmr.input = "r"})
    -> (tensor<f32> {xfmr.output = "loss"}) {
  %o = xfmr.fused_attention %q, %k, %v {causal, scale = 0.25 : f64, window = 4 : i64, softcap = 20.0 : f64}
       : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32>
  %p = xfmr.mul %o, %r : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x8x4x16xf32>
  %f = xfmr.reshape %p : (tensor<2x8x4x16xf32>) -> tensor<1024xf32>
  %s = xfmr.reduce %f {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<1024xf32>) -> tensor<1xf32>
  %l = xfmr.reshape %s : (tensor<1xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// Mixed precision: an f32 master weight rounded to bf16 for a bf16 op, the
// loss taken from logits widened to f32. A rounding's adjoint widens the
// gradient back (the weight's gradient is f32), a widening's adjoint rounds.
// MIXED-LABEL: func.func @mixed_grad
// MIXED-SAME: -> (tensor<f32> {xfmr.output = "loss"}, tensor<8x16xf32> {xfmr.output = "grad:w"})
// MIXED: %[[DWIDE:.*]] = xfmr.cross_entropy_backward %{{.*}} -> tensor<2x4x16xf32>
// MIXED: %[[DNARROW:.*]] = arith.truncf %[[DWIDE]] : tensor<2x4x16xf32> to tensor<2x4x16xbf16>
// MIXED: %[[DW:.*]] = xfmr.matmul %{{.*}}, %{{.*}} {transpose_lhs} : (tensor<8x8xbf16>, tensor<8x16xbf16>) -> tensor<8x16xbf16>
// MIXED: %[[DMASTER:.*]] = arith.extf %[[DW]] : tensor<8x16xbf16> to tensor<8x16xf32>
// MIXED: return %{{.*}}, %[[DMASTER]] : tensor<f32>, tensor<8x16xf32>
func.func @mixed(%x: tensor<2x4x8xbf16> {xfmr.input = "x"}, %t: tensor<2x4xi32> {xfmr.input = "t"},
                 %w: tensor<8x16xf32> {xfmr.param = "w"}) -> (tensor<f32> {xfmr.output = "loss"}) {
  %wn = arith.truncf %w : tensor<8x16xf32> to tensor<8x16xbf16>
  %h = xfmr.matmul %x, %wn : (tensor<2x4x8xbf16>, tensor<8x16xbf16>) -> tensor<2x4x16xbf16>
  %hw = arith.extf %h : tensor<2x4x16xbf16> to tensor<2x4x16xf32>
  %l = xfmr.cross_entropy %hw, %t : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// With loss-scale, the gradient function takes the scale last, and the
// backward starts from it instead of from 1: the bf16 part runs on scaled
// gradients, the loss stays unscaled.
// SCALED-LABEL: func.func @mixed_grad
// SCALED-SAME: %[[W:[a-z0-9]+]]: tensor<8x16xf32> {xfmr.param = "w"}, %[[SCALE:[a-z0-9]+]]: tensor<f32> {xfmr.input = "loss_scale"})
// SCALED: %[[LOSS:.*]] = xfmr.cross_entropy
// SCALED-NOT: arith.constant
// SCALED: xfmr.cross_entropy_backward %{{.*}}, %{{.*}}, %[[SCALE]] :
// SCALED: return %[[LOSS]], %{{.*}} : tensor<f32>, tensor<8x16xf32>
// SCALENAME: error: xfmr-autodiff: @has_loss_scale already has an input named 'loss_scale'
func.func @has_loss_scale(%w: tensor<4xf32> {xfmr.param = "w"}, %s: tensor<4xf32> {xfmr.input = "loss_scale"})
    -> tensor<f32> {
  %p = xfmr.mul %w, %s : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %r = xfmr.reduce %p {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<4xf32>) -> tensor<1xf32>
  %l = xfmr.reshape %r : (tensor<1xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

func.func @scores(%x: tensor<4xf32> {xfmr.param = "x"}) -> tensor<4xf32> {
  %y = xfmr.relu %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// Slices of one tensor (a fused QKV projection's): the gradients of disjoint
// slices are inserted into one another instead of added, and once they
// cover the tensor nothing is under them (no zeros to fill); overlapping
// slices' gradients are added.
// SLICES-LABEL: func.func @slices_grad
// SLICES: %[[DQ:.*]] = tensor.insert_slice %{{.*}} into %{{.*}}[0, 1] [4, 3] [1, 1]
// SLICES: %[[DP:.*]] = tensor.insert_slice %{{.*}} into %{{.*}}[0, 0] [4, 3] [1, 1]
// SLICES: %[[DV:.*]] = xfmr.add %[[DQ]], %[[DP]]
// SLICES: %[[EMPTY:.*]] = tensor.empty() : tensor<4x6xf32>
// SLICES-NEXT: %[[DC:.*]] = tensor.insert_slice %{{.*}} into %[[EMPTY]][0, 4] [4, 2] [1, 1]
// SLICES-NOT: xfmr.add
// SLICES: %[[DB:.*]] = tensor.insert_slice %{{.*}} into %[[DC]][0, 2] [4, 2] [1, 1]
// SLICES-NOT: xfmr.add
// SLICES: %[[DW:.*]] = tensor.insert_slice %{{.*}} into %[[DB]][0, 0] [4, 2] [1, 1]
// SLICES-NEXT: return %{{.*}}, %[[DW]], %[[DV]]
func.func @slices(%w: tensor<4x6xf32> {xfmr.param = "w"}, %v: tensor<4x4xf32> {xfmr.param = "v"})
    -> tensor<f32> {
  %a = tensor.extract_slice %w[0, 0] [4, 2] [1, 1] : tensor<4x6xf32> to tensor<4x2xf32>
  %b = tensor.extract_slice %w[0, 2] [4, 2] [1, 1] : tensor<4x6xf32> to tensor<4x2xf32>
  %c = tensor.extract_slice %w[0, 4] [4, 2] [1, 1] : tensor<4x6xf32> to tensor<4x2xf32>
  %p = tensor.extract_slice %v[0, 0] [4, 3] [1, 1] : tensor<4x4xf32> to tensor<4x3xf32>
  %q = tensor.extract_slice %v[0, 1] [4, 3] [1, 1] : tensor<4x4xf32> to tensor<4x3xf32>
  %ab = xfmr.add %a, %b : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
  %abc = xfmr.mul %ab, %c : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
  %pq = xfmr.mul %p, %q : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %f1 = xfmr.reshape %abc : (tensor<4x2xf32>) -> tensor<8xf32>
  %s1 = xfmr.reduce %f1 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<8xf32>) -> tensor<1xf32>
  %f2 = xfmr.reshape %pq : (tensor<4x3xf32>) -> tensor<12xf32>
  %s2 = xfmr.reduce %f2 {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<12xf32>) -> tensor<1xf32>
  %s = xfmr.add %s1, %s2 : (tensor<1xf32>, tensor<1xf32>) -> tensor<1xf32>
  %loss = xfmr.reshape %s : (tensor<1xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// Layers: each layer's backward is a layer of its own (`<name>.grad`), in
// reverse order, yielding the gradients of what the layer reads from above
// (its input, where that is active, and its weight); the forward layer yields, besides its result,
// what its backward reads of its inside (the relu's input), so identical
// layers stay identical, forward and backward.
// LAYERS-LABEL: func.func @layers_grad
// LAYERS: %[[L0:.*]]:2 = xfmr.layer "l.0" -> (tensor<4x8xf32>, tensor<4x8xf32>) {
// LAYERS: %[[P0:.*]] = xfmr.matmul %arg0, %arg1
// LAYERS: %[[R0:.*]] = xfmr.relu %[[P0]]
// LAYERS: xfmr.yield %[[R0]], %[[P0]]
// LAYERS: %[[L1:.*]]:2 = xfmr.layer "l.1" -> (tensor<4x8xf32>, tensor<4x8xf32>) {
// LAYERS: xfmr.matmul %[[L0]]#0, %arg2
// LAYERS: %[[G1:.*]]:2 = xfmr.layer "l.1.grad" -> (tensor<4x8xf32>, tensor<8x8xf32>) {
// LAYERS: xfmr.activation_backward %[[L1]]#1
// LAYERS: %[[G0:.*]] = xfmr.layer "l.0.grad" -> (tensor<8x8xf32>) {
// LAYERS: xfmr.activation_backward %[[L0]]#1, %[[G1]]#0
// LAYERS: return %{{.*}}, %[[G0]], %[[G1]]#1
func.func @layers(%x: tensor<4x8xf32> {xfmr.input = "x"}, %w0: tensor<8x8xf32> {xfmr.param = "l.0.w"},
                  %w1: tensor<8x8xf32> {xfmr.param = "l.1.w"}) -> tensor<f32> {
  %h0 = xfmr.layer "l.0" -> (tensor<4x8xf32>) {
    %p = xfmr.matmul %x, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %r = xfmr.relu %p : tensor<4x8xf32>
    xfmr.yield %r : tensor<4x8xf32>
  }
  %h1 = xfmr.layer "l.1" -> (tensor<4x8xf32>) {
    %p = xfmr.matmul %h0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %r = xfmr.relu %p : tensor<4x8xf32>
    xfmr.yield %r : tensor<4x8xf32>
  }
  %s = xfmr.reduce %h1 {axis = 1 : i64, kind = #xfmr.reduce_kind<sum>} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %t = xfmr.reduce %s {axis = 0 : i64, kind = #xfmr.reduce_kind<sum>} : (tensor<4x1xf32>) -> tensor<1x1xf32>
  %l = xfmr.reshape %t : (tensor<1x1xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
