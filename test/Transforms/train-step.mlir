// RUN: xfmr-opt %s --xfmr-autodiff=function=loss --xfmr-train-step='function=loss lr=0.01 warmup-steps=10 decay-steps=100 min-lr-ratio=0.1 weight-decay=0.01 max-grad-norm=1.0' | FileCheck %s
// RUN: xfmr-opt %s --xfmr-autodiff=function=loss --xfmr-train-step='function=loss optimizer=sgd momentum=0.5' | FileCheck %s --check-prefix=SGD
// RUN: not xfmr-opt %s --xfmr-train-step=function=loss 2>&1 | FileCheck %s --check-prefix=NOGRAD
// RUN: not xfmr-opt %s --xfmr-autodiff=function=loss --xfmr-train-step='function=loss optimizer=adam' 2>&1 | FileCheck %s --check-prefix=OPTIMIZER
// RUN: not xfmr-opt %s --xfmr-autodiff=function=no_weights --xfmr-train-step=function=no_weights 2>&1 | FileCheck %s --check-prefix=NOWEIGHTS
// NOGRAD: error: xfmr-train-step: no function @loss_grad (run xfmr-autodiff{function=loss} first)
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
