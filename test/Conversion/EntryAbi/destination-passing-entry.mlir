// RUN: xfmr-opt %s --xfmr-destination-passing-entry --split-input-file --verify-diagnostics | FileCheck %s

// Tensors in, memrefs out: results become trailing caller-owned buffers and
// keep their attributes.
// CHECK-LABEL: func @forward
// CHECK-SAME: (%[[X:.*]]: memref<2x4xf32> {xfmr.input = "x"}, %[[W:.*]]: memref<4xf32> {xfmr.param = "w"},
// CHECK-SAME: %[[OUT:.*]]: memref<2x4xf32> {xfmr.output = "y"})
// CHECK-SAME: attributes {xfmr.entry}
// CHECK-DAG: %[[XT:.*]] = bufferization.to_tensor %[[X]] restrict : memref<2x4xf32> to tensor<2x4xf32>
// CHECK-DAG: %[[WT:.*]] = bufferization.to_tensor %[[W]] restrict : memref<4xf32> to tensor<4xf32>
// CHECK: %[[Y:.*]] = xfmr.add %[[XT]], %[[WT]]
// CHECK: bufferization.materialize_in_destination %[[Y]] in restrict writable %[[OUT]] : (tensor<2x4xf32>, memref<2x4xf32>) -> ()
// CHECK-NEXT: return{{$}}
func.func @forward(%x: tensor<2x4xf32> {xfmr.input = "x"}, %w: tensor<4xf32> {xfmr.param = "w"})
    -> (tensor<2x4xf32> {xfmr.output = "y"}) {
  %y = xfmr.add %x, %w : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// Negative: private functions keep their signature.
// CHECK-LABEL: func private @helper
// CHECK-SAME: (%{{.*}}: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NOT: xfmr.entry
func.func private @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// A result that updates an argument (a KV cache) is computed in its output
// buffer, which receives a copy of the argument unless it is the argument's
// own buffer (a call of one private function per buffer type, which
// compares the addresses); the cache is then read through the output,
// writable, so that the update can happen in place.
// CHECK-LABEL: func @decode
// CHECK-SAME: (%{{[^:]*}}: memref<1x1xi32> {xfmr.input = "ids"}, %[[CACHE:[^:]*]]: memref<1x8x4xf32> {xfmr.state = "cache"},
// CHECK-SAME: %[[OUT:[^:]*]]: memref<1x8x4xf32> {xfmr.output = "cache_out", xfmr.updates = "cache"})
// CHECK: call @xfmr_copy_unless_same(%[[CACHE]], %[[OUT]])
// CHECK: %[[CT:.*]] = bufferization.to_tensor %[[OUT]] restrict writable
// CHECK: xfmr.cache_update %[[CT]]
// CHECK: bufferization.materialize_in_destination %{{.*}} in restrict writable %[[OUT]]
// CHECK-LABEL: func.func private @xfmr_copy_unless_same
// CHECK-SAME: (%[[A:[^:]*]]: memref<1x8x4xf32>, %[[B:[^:]*]]: memref<1x8x4xf32>)
// CHECK-SAME: llvm.linkage = #llvm.linkage<internal>
// CHECK-SAME: passthrough = ["noinline"]
// CHECK-DAG: %[[FROM:.*]] = memref.extract_aligned_pointer_as_index %[[A]]
// CHECK-DAG: %[[TO:.*]] = memref.extract_aligned_pointer_as_index %[[B]]
// CHECK: %[[DISTINCT:.*]] = arith.cmpi ne, %[[FROM]], %[[TO]] : index
// CHECK: scf.if %[[DISTINCT]] {
// CHECK-NEXT: memref.copy %[[A]], %[[B]]
func.func @decode(%ids: tensor<1x1xi32> {xfmr.input = "ids"}, %cache: tensor<1x8x4xf32> {xfmr.state = "cache"},
                  %pos: tensor<1xi32>, %new: tensor<1x1x4xf32>)
    -> (tensor<1x8x4xf32> {xfmr.output = "cache_out", xfmr.updates = "cache"}) {
  %c = xfmr.cache_update %cache, %new, %pos : (tensor<1x8x4xf32>, tensor<1x1x4xf32>, tensor<1xi32>) -> tensor<1x8x4xf32>
  return %c : tensor<1x8x4xf32>
}

// -----

// Negative: dynamic shapes have no fixed C ABI.
// expected-error @+1 {{entry function arguments and results must be statically shaped tensors, got 'tensor<?xf32>'}}
func.func @dynamic(%x: tensor<?xf32>) -> tensor<?xf32> {
  return %x : tensor<?xf32>
}
