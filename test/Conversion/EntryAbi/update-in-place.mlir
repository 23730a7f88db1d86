// RUN: xfmr-opt %s --convert-xfmr-to-linalg --xfmr-destination-passing-entry --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" --canonicalize | FileCheck %s

// A training step's update is computed in the caller's output buffers of
// the weight and its moments: each starts as a copy of its input (none when
// the caller passes the input's own buffer) and the update overwrites it,
// with no temporary and no copy after it.
// CHECK-LABEL: func.func @step
// CHECK-SAME: %[[P:arg0]]: memref<64xf32> {xfmr.param = "w"}, %[[G:arg1]]
// CHECK-SAME: %[[NEWP:arg6]]: memref<64xf32> {xfmr.output = "new:w"
// CHECK-SAME: %[[NEWM:arg7]]: memref<64xf32>
// CHECK-SAME: %[[NEWV:arg8]]: memref<64xf32>
// CHECK: call @xfmr_copy_unless_same(%[[P]], %[[NEWP]])
// CHECK-NOT: memref.alloc
// CHECK: linalg.generic {{.*}} ins(%[[G]] : memref<64xf32>) outs(%[[NEWP]], %[[NEWM]], %[[NEWV]] :
// CHECK-NOT: memref.copy
// CHECK: return
func.func @step(%p: tensor<64xf32> {xfmr.param = "w"}, %g: tensor<64xf32> {xfmr.input = "g"},
                %m: tensor<64xf32> {xfmr.state = "w.exp_avg"},
                %v: tensor<64xf32> {xfmr.state = "w.exp_avg_sq"},
                %lr: tensor<f32> {xfmr.input = "lr"}, %step: tensor<i64> {xfmr.input = "step"})
    -> (tensor<64xf32> {xfmr.output = "new:w", xfmr.updates = "w"},
        tensor<64xf32> {xfmr.output = "new:w.exp_avg", xfmr.updates = "w.exp_avg"},
        tensor<64xf32> {xfmr.output = "new:w.exp_avg_sq", xfmr.updates = "w.exp_avg_sq"}) {
  %0:3 = xfmr.adamw_update %p, %g, %m, %v lr(%lr : tensor<f32>) step(%step : tensor<i64>) : tensor<64xf32>
  return %0#0, %0#1, %0#2 : tensor<64xf32>, tensor<64xf32>, tensor<64xf32>
}
