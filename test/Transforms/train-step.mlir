// RUN: xfmr-opt %s --xfmr-autodiff=function=loss --xfmr-train-step='function=loss lr=0.01 warmup-steps=10 decay-steps=100 min-lr-ratio=0.1 weight-decay=0.01 max-grad-norm=1.0' | FileCheck %s
// RUN: xfmr-opt %s --xfmr-autodiff=function=loss --xfmr-train-step='function=loss optimizer=sgd momentum=0.5' | FileCheck %s --check-prefix=SGD
// RUN: not xfmr-opt %s --xfmr-train-step=function=loss 2>&1 | FileCheck %s --check-prefix=NOGRAD
// RUN: not xfmr-opt %s --xfmr-autodiff=function=loss --xfmr-train-step='function=loss optimizer=adam' 2>&1 | FileCheck %s --check-prefix=OPTIMIZER
// RUN: not xfmr-opt %s --xfmr-autodiff=function=no_weights --xfmr-train-step=function=no_weights 2>&1 | FileCheck %s --check-prefix=NOWEIGHTS
// RUN: xfmr-opt %s --xfmr-autodiff='function=loss loss-scale' --xfmr-train-step='function=loss loss-scale=1024 loss-scale-growth-interval=10' | FileCheck %s --check-prefix=SCALED
// RUN: not xfmr-opt %s --xfmr-autodiff=function=loss --xfmr-train-step='function=loss loss-scale=1024' 2>&1 | FileCheck %s --check-prefix=NOSCALEARG
// RUN: not xfmr-opt %s --xfmr-autodiff='function=loss loss-scale' --xfmr-train-step=function=loss 2>&1 | FileCheck %s --check-prefix=NOSCALE
// RUN: not xfmr-opt %s --xfmr-autodiff='function=loss loss-scale' --xfmr-train-step='function=loss loss-scale=-1' 2>&1 | FileCheck %s --check-prefix=BADSCALE
// RUN: not xfmr-opt %s --xfmr-autodiff='function=half loss-scale' --xfmr-train-step='function=half loss-scale=1024' 2>&1 | FileCheck %s --check-prefix=HALF
// RUN: xfmr-opt %s --xfmr-autodiff=function=loss --xfmr-train-step='function=loss max-grad-norm=1.0 data-parallel' | FileCheck %s --check-prefix=PARALLEL
// RUN: not xfmr-opt %s --xfmr-autodiff=function=half --xfmr-train-step='function=half data-parallel' 2>&1 | FileCheck %s --check-prefix=PARALLELHALF
// PARALLELHALF: error: xfmr-train-step: data-parallel training reduces f32 gradients, got 'f16'
// NOGRAD: error: xfmr-train-step: no function @loss_grad (run xfmr-autodiff{function=loss} first)
// NOSCALEARG: error: xfmr-train-step: loss-scale needs a gradient function that takes the loss scale (run xfmr-autodiff{function=loss loss-scale} first)
// NOSCALE: error: xfmr-train-step: @loss_grad takes a loss_scale, so loss-scale must be set
// BADSCALE: error: xfmr-train-step: loss-scale must be positive and finite (or 0: none) and loss-scale-growth-interval at least 1
// HALF: error: xfmr-train-step: loss scaling needs an f32 loss and f32 weights (a mixed-precision model's master weights)
// OPTIMIZER: error: xfmr-train-step: optimizer must be adamw or sgd, got 'adam'
// NOWEIGHTS: error: xfmr-train-step: @no_weights_grad returns no weight gradients

// The step: the gradient function's arguments, then the optimizer state of
// each weight and the step number; the loss, the learning rate, the global
// gradient norm (for clipping), then each weight's and state's new value,
// marked as updating its argument.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<8x16xf32> {xfmr.param = "w"}, %[[B:[a-z0-9]+]]: tensor<16xf32> {xfmr.param = "b"}
// CHECK-SAME: %[[M:[a-z0-9]+]]: tensor<8x16xf32> {xfmr.state = "w.exp_avg"}, %[[V:[a-z0-9]+]]: tensor<8x16xf32> {xfmr.state = "w.exp_avg_sq"}
// CHECK-SAME: {xfmr.state = "b.exp_avg_sq"}, %[[STEP:[a-z0-9]+]]: tensor<i64> {xfmr.input = "step"})
// CHECK-SAME: -> (tensor<f32> {xfmr.output = "loss"}, tensor<f32> {xfmr.output = "lr"}, tensor<f32> {xfmr.output = "grad_norm"},
// CHECK-SAME: tensor<8x16xf32> {xfmr.output = "new:w", xfmr.updates = "w"}, tensor<8x16xf32> {xfmr.output = "new:w.exp_avg", xfmr.updates = "w.exp_avg"}
// CHECK: %[[LOSS:.*]] = xfmr.cross_entropy
// CHECK: %[[DW:.*]] = xfmr.matmul %{{.*}}, %{{.*}} {transpose_lhs}
// CHECK: %[[LR:.*]] = xfmr.learning_rate %[[STEP]] {decay_steps = 100 : i64, min_ratio = 1.000000e-01 : f64, peak = 1.000000e-02 : f64, warmup_steps = 10 : i64}
// CHECK: %[[NORM:.*]] = xfmr.global_norm %[[DW]], %[[DB:.*]] : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<f32>
// CHECK: %[[NW:.*]], %[[NM:.*]], %[[NV:.*]] = xfmr.adamw_update %[[W]], %[[DW]], %[[M]], %[[V]] lr(%[[LR]] : tensor<f32>) step(%[[STEP]] : tensor<i64>) grad_norm(%[[NORM]] : tensor<f32>) : tensor<8x16xf32>
// CHECK: xfmr.adamw_update %[[B]], %[[DB]]
// CHECK: return %[[LOSS]], %[[LR]], %[[NORM]], %[[NW]], %[[NM]], %[[NV]],

// SGD keeps one momentum buffer per weight; without max-grad-norm there is
// no norm to compute.
// SGD-LABEL: func.func @train_step
// SGD-SAME: {xfmr.state = "w.momentum_buffer"}
// SGD-SAME: -> (tensor<f32> {xfmr.output = "loss"}, tensor<f32> {xfmr.output = "lr"}, tensor<8x16xf32> {xfmr.output = "new:w", xfmr.updates = "w"}
// SGD-NOT: xfmr.global_norm
// SGD: xfmr.sgd_update %{{.*}}, %{{.*}}, %{{.*}} lr(%{{.*}} : tensor<f32>) {momentum = 5.000000e-01 : f64} : tensor<8x16xf32>
// Dynamic loss scaling: the gradient function's loss_scale argument becomes
// the scale of the state's exponent; the norm is computed (for the overflow
// check) without clipping, reported unscaled, and the scaler state updated.
// SCALED-LABEL: func.func @train_step
// SCALED-SAME: %[[B:[a-z0-9]+]]: tensor<16xf32> {xfmr.param = "b"},
// SCALED-NOT: "loss_scale"}
// SCALED-SAME: {xfmr.state = "b.exp_avg_sq"}, %[[EXP:[a-z0-9]+]]: tensor<f32> {xfmr.state = "loss_scale.exponent"}, %[[GOOD:[a-z0-9]+]]: tensor<f32> {xfmr.state = "loss_scale.good_steps"}, %{{.*}}: tensor<i64> {xfmr.input = "step"})
// SCALED-SAME: {xfmr.output = "grad_norm"}, tensor<f32> {xfmr.output = "loss_scale"}
// SCALED-SAME: tensor<f32> {xfmr.output = "new:loss_scale.exponent", xfmr.updates = "loss_scale.exponent"}, tensor<f32> {xfmr.output = "new:loss_scale.good_steps", xfmr.updates = "loss_scale.good_steps"})
// SCALED: %[[SCALE:.*]] = xfmr.loss_scale %[[EXP]] {initial = 1.024000e+03 : f64}
// SCALED: xfmr.cross_entropy_backward %{{.*}}, %{{.*}}, %[[SCALE]]
// SCALED: %[[NORM:.*]] = xfmr.global_norm
// SCALED: %[[REPORTED:.*]] = arith.divf %[[NORM]], %[[SCALE]] : tensor<f32>
// SCALED: xfmr.adamw_update {{.*}} grad_norm(%[[NORM]] : tensor<f32>) loss_scale(%[[SCALE]] : tensor<f32>) {max_grad_norm = 0.000000e+00 : f64
// SCALED: xfmr.adamw_update %[[B]], {{.*}} loss_scale(%[[SCALE]] : tensor<f32>)
// SCALED: %[[NEXP:.*]], %[[NGOOD:.*]] = xfmr.loss_scale_update %[[EXP]], %[[GOOD]], %[[NORM]] {growth_interval = 10 : i64}
// SCALED: return %{{.*}}, %{{.*}}, %[[REPORTED]], %[[SCALE]], {{.*}}, %[[NEXP]], %[[NGOOD]] :
// Data-parallel: the gradients are reduced over the job, weighted by this
// process's share of the batch, before the norm and the updates read them.
// PARALLEL-LABEL: func.func @train_step
// PARALLEL-SAME: {xfmr.state = "b.exp_avg_sq"}, %[[WEIGHT:[a-z0-9]+]]: tensor<f32> {xfmr.input = "gradient_weight"}, %{{.*}}: tensor<i64> {xfmr.input = "step"})
// PARALLEL: %[[DW:.*]] = xfmr.matmul %{{.*}}, %{{.*}} {transpose_lhs}
// PARALLEL: %[[RW:.*]] = xfmr.all_reduce %[[DW]], %[[WEIGHT]] : tensor<8x16xf32>, tensor<f32>
// PARALLEL: %[[RB:.*]] = xfmr.all_reduce %{{.*}}, %[[WEIGHT]] : tensor<16xf32>, tensor<f32>
// PARALLEL: xfmr.global_norm %[[RW]], %[[RB]]
// PARALLEL: xfmr.adamw_update %{{.*}}, %[[RW]],
// PARALLEL: xfmr.adamw_update %{{.*}}, %[[RB]],
func.func @loss(%x: tensor<2x4x8xf32> {xfmr.input = "x"}, %t: tensor<2x4xi32> {xfmr.input = "t"},
                %w: tensor<8x16xf32> {xfmr.param = "w"}, %b: tensor<16xf32> {xfmr.param = "b"})
    -> (tensor<f32> {xfmr.output = "loss"}) {
  %h = xfmr.linear %x, %w, %b : (tensor<2x4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %l = xfmr.cross_entropy %h, %t : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

func.func @no_weights(%x: tensor<4xf32> {xfmr.input = "x"}) -> (tensor<f32> {xfmr.output = "loss"}) {
  %y = xfmr.reshape %x : (tensor<4xf32>) -> tensor<2x2xf32>
  %s = xfmr.reduce %x {kind = #xfmr.reduce_kind<sum>, axis = 0} : (tensor<4xf32>) -> tensor<1xf32>
  %l = xfmr.reshape %s : (tensor<1xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

func.func @half(%x: tensor<2x4x8xf16> {xfmr.input = "x"}, %t: tensor<2x4xi32> {xfmr.input = "t"},
                %w: tensor<8x16xf16> {xfmr.param = "w"}) -> (tensor<f16> {xfmr.output = "loss"}) {
  %h = xfmr.matmul %x, %w : (tensor<2x4x8xf16>, tensor<8x16xf16>) -> tensor<2x4x16xf16>
  %l = xfmr.cross_entropy %h, %t : (tensor<2x4x16xf16>, tensor<2x4xi32>) -> tensor<f16>
  return %l : tensor<f16>
}
