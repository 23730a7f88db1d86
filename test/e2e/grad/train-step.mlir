// One compiled training step (xfmr-autodiff + xfmr-train-step: loss,
// gradients, global-norm clipping, the warm-up/cosine learning rate and the
// optimizer update) against torch.optim.AdamW / SGD with
// torch.nn.utils.clip_grad_norm_ on the same weights, state and batch: in
// the warm-up, in the cosine decay, past its end, with and without clipping.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t
// RUN: xfmr-opt %s --xfmr-autodiff='function=loss' --xfmr-train-step='function=loss optimizer=adamw lr=0.02 warmup-steps=10 decay-steps=100 min-lr-ratio=0.1 weight-decay=0.01 max-grad-norm=0.05' -o %t/adamw.mlir
// RUN: xfmrc %t/adamw.mlir --entry=train_step -o %t/adamw
// RUN: %python %testlib/train_step.py generate %t/warmup.safetensors --step 3 --state adamw
// RUN: %t/adamw --inputs=%t/warmup.safetensors --weights=%t/warmup.safetensors --output=%t/warmup.out.safetensors
// RUN: %python %testlib/train_step.py check %t/warmup.safetensors %t/warmup.out.safetensors --optimizer adamw --lr 0.02 --warmup 10 --decay 100 --min-ratio 0.1 --weight-decay 0.01 --clip 0.05 | FileCheck %s --check-prefixes=CHECK,ADAMW,CLIP
// RUN: %python %testlib/train_step.py generate %t/cosine.safetensors --step 40 --state adamw
// RUN: %t/adamw --inputs=%t/cosine.safetensors --weights=%t/cosine.safetensors --output=%t/cosine.out.safetensors
// RUN: %python %testlib/train_step.py check %t/cosine.safetensors %t/cosine.out.safetensors --optimizer adamw --lr 0.02 --warmup 10 --decay 100 --min-ratio 0.1 --weight-decay 0.01 --clip 0.05 | FileCheck %s --check-prefixes=CHECK,ADAMW,CLIP
// RUN: %python %testlib/train_step.py generate %t/end.safetensors --step 150 --state adamw
// RUN: %t/adamw --inputs=%t/end.safetensors --weights=%t/end.safetensors --output=%t/end.out.safetensors
// RUN: %python %testlib/train_step.py check %t/end.safetensors %t/end.out.safetensors --optimizer adamw --lr 0.02 --warmup 10 --decay 100 --min-ratio 0.1 --weight-decay 0.01 --clip 0.05 | FileCheck %s --check-prefixes=CHECK,ADAMW,CLIP
// RUN: xfmr-opt %s --xfmr-autodiff='function=loss' --xfmr-train-step='function=loss optimizer=sgd lr=0.1 momentum=0.9 weight-decay=0.001' -o %t/sgd.mlir
// RUN: xfmrc %t/sgd.mlir --entry=train_step -o %t/sgd
// RUN: %python %testlib/train_step.py generate %t/sgd.safetensors --step 7 --state sgd
// RUN: %t/sgd --inputs=%t/sgd.safetensors --weights=%t/sgd.safetensors --output=%t/sgd.out.safetensors
// RUN: %python %testlib/train_step.py check %t/sgd.safetensors %t/sgd.out.safetensors --optimizer sgd --lr 0.1 --momentum 0.9 --weight-decay 0.001 | FileCheck %s --check-prefixes=CHECK,SGD
// Dynamic loss scaling (xfmr-autodiff{loss-scale}, xfmr-train-step{loss-scale})
// against GradScaler's algorithm: a finite step (one more good step), one that
// reaches the growth interval (the scale doubles), one that overflows (scale
// 2^128: every weight and state unchanged, the scale halves), and SGD
// without clipping (the norm computed only for the overflow check).
// RUN: xfmr-opt %s --xfmr-autodiff='function=loss loss-scale' --xfmr-train-step='function=loss optimizer=adamw lr=0.02 warmup-steps=10 decay-steps=100 min-lr-ratio=0.1 weight-decay=0.01 max-grad-norm=0.05 loss-scale=1024 loss-scale-growth-interval=4' -o %t/scaled.mlir
// RUN: xfmrc %t/scaled.mlir --entry=train_step -o %t/scaled
// RUN: %python %testlib/train_step.py generate %t/scaled.safetensors --step 40 --state adamw --scaler 3,1
// RUN: %t/scaled --inputs=%t/scaled.safetensors --weights=%t/scaled.safetensors --output=%t/scaled.out.safetensors
// RUN: %python %testlib/train_step.py check %t/scaled.safetensors %t/scaled.out.safetensors --optimizer adamw --lr 0.02 --warmup 10 --decay 100 --min-ratio 0.1 --weight-decay 0.01 --clip 0.05 --loss-scale 1024 --growth-interval 4 | FileCheck %s --check-prefixes=CHECK,ADAMW,CLIP,SCALED,APPLIED
// RUN: %python %testlib/train_step.py generate %t/growth.safetensors --step 40 --state adamw --scaler 3,3
// RUN: %t/scaled --inputs=%t/growth.safetensors --weights=%t/growth.safetensors --output=%t/growth.out.safetensors
// RUN: %python %testlib/train_step.py check %t/growth.safetensors %t/growth.out.safetensors --optimizer adamw --lr 0.02 --warmup 10 --decay 100 --min-ratio 0.1 --weight-decay 0.01 --clip 0.05 --loss-scale 1024 --growth-interval 4 | FileCheck %s --check-prefixes=CHECK,ADAMW,CLIP,SCALED,APPLIED
// RUN: %python %testlib/train_step.py generate %t/overflow.safetensors --step 40 --state adamw --scaler 118,2
// RUN: %t/scaled --inputs=%t/overflow.safetensors --weights=%t/overflow.safetensors --output=%t/overflow.out.safetensors
// RUN: %python %testlib/train_step.py check %t/overflow.safetensors %t/overflow.out.safetensors --optimizer adamw --lr 0.02 --warmup 10 --decay 100 --min-ratio 0.1 --weight-decay 0.01 --clip 0.05 --loss-scale 1024 --growth-interval 4 | FileCheck %s --check-prefixes=CHECK,ADAMW,SCALED,SKIPPED
// RUN: xfmr-opt %s --xfmr-autodiff='function=loss loss-scale' --xfmr-train-step='function=loss optimizer=sgd lr=0.1 momentum=0.9 weight-decay=0.001 loss-scale=65536' -o %t/sgd-scaled.mlir
// RUN: xfmrc %t/sgd-scaled.mlir --entry=train_step -o %t/sgd-scaled
// RUN: %python %testlib/train_step.py generate %t/sgd-scaled.safetensors --step 7 --state sgd --scaler 0,0
// RUN: %t/sgd-scaled --inputs=%t/sgd-scaled.safetensors --weights=%t/sgd-scaled.safetensors --output=%t/sgd-scaled.out.safetensors
// RUN: %python %testlib/train_step.py check %t/sgd-scaled.safetensors %t/sgd-scaled.out.safetensors --optimizer sgd --lr 0.1 --momentum 0.9 --weight-decay 0.001 --loss-scale 65536 | FileCheck %s --check-prefixes=CHECK,SGD,SCALED,APPLIED
// APPLIED: applied step
// SKIPPED: skipped step
// CHECK-DAG: PASS: loss
// CHECK-DAG: PASS: lr
// CLIP-DAG: PASS: grad_norm (clipped)
// CHECK-DAG: PASS: new:w1
// CHECK-DAG: PASS: new:b1
// CHECK-DAG: PASS: new:gamma
// CHECK-DAG: PASS: new:beta
// CHECK-DAG: PASS: new:w2
// ADAMW-DAG: PASS: new:w1.exp_avg
// ADAMW-DAG: PASS: new:w2.exp_avg_sq
// SGD-DAG: PASS: new:w1.momentum_buffer
// SGD-DAG: PASS: new:w2.momentum_buffer
// SCALED-DAG: PASS: loss_scale
// SCALED-DAG: PASS: new:loss_scale.exponent
// SCALED-DAG: PASS: new:loss_scale.good_steps
// CHECK-NOT: FAIL

func.func @loss(%x: tensor<4x8x16xf32> {xfmr.input = "x"}, %labels: tensor<4x8xi32> {xfmr.input = "labels"},
                %w1: tensor<16x32xf32> {xfmr.param = "w1"}, %b1: tensor<32xf32> {xfmr.param = "b1"},
                %gamma: tensor<32xf32> {xfmr.param = "gamma"}, %beta: tensor<32xf32> {xfmr.param = "beta"},
                %w2: tensor<10x32xf32> {xfmr.param = "w2"})
    -> (tensor<f32> {xfmr.output = "loss"}) {
  %h = xfmr.linear %x, %w1, %b1 : (tensor<4x8x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<4x8x32xf32>
  %a = xfmr.gelu %h : tensor<4x8x32xf32>
  %n = xfmr.layer_norm %a, %gamma, %beta {epsilon = 1.0e-05 : f64} : (tensor<4x8x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<4x8x32xf32>
  %logits = xfmr.linear %n, %w2 {transpose_weight} : (tensor<4x8x32xf32>, tensor<10x32xf32>) -> tensor<4x8x10xf32>
  %loss = xfmr.cross_entropy %logits, %labels : (tensor<4x8x10xf32>, tensor<4x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
