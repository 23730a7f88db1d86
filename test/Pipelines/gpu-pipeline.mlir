// RUN: xfmr-opt %s --xfmr-gpu-pipeline | FileCheck %s
// RUN: xfmr-opt %s --xfmr-gpu-pipeline=chip=sm_80 | FileCheck %s --check-prefix=SM80
// RUN: xfmrc %s --entry=block --target=nvptx --emit=ptx -o %t.sm90.ptx
// RUN: xfmrc %s --entry=block --target=nvptx --gpu-arch=sm_80 --emit=ptx -o %t.sm80.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.sm90.ptx
// RUN: %if ptxas %{ %ptxas -arch=sm_90 %t.sm90.ptx -o %t.sm90.cubin %}
// RUN: %if ptxas %{ %ptxas -arch=sm_80 %t.sm80.ptx -o %t.sm80.cubin %}

// The whole GPU pipeline: xfmr on tensors in; host code in the LLVM dialect
// that uses each argument in place where it is CUDA managed memory and else
// copies it into device memory (a stream of its own, waited for), launches
// kernels from one embedded PTX module, all ordered on one stream that the
// host waits for once, at the end, then copies the written output back and
// frees what it staged.
// CHECK-NOT: xfmr.
// CHECK-NOT: func.func
// CHECK-LABEL: llvm.func @block(
// CHECK-SAME: %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr) attributes {xfmr.entry}
// CHECK: %[[FALSE:.*]] = llvm.mlir.constant(0 : i8) : i8
// CHECK: %[[MANAGED:.*]] = llvm.call @xfmrGpuIsManaged(
// CHECK-NEXT: llvm.cond_br %[[MANAGED]], ^{{.*}}, ^[[STAGE:bb[0-9]+]]
// CHECK: ^[[STAGE]]:
// CHECK-NEXT: %[[COPY:.*]] = llvm.call @mgpuStreamCreate()
// CHECK: llvm.call @mgpuMemAlloc(%{{.*}}, %[[COPY]], %[[FALSE]])
// CHECK: llvm.call @mgpuMemcpy(%{{.*}}, %arg0, %{{.*}}, %[[COPY]])
// CHECK-NEXT: llvm.call @mgpuStreamSynchronize(%[[COPY]])
// CHECK: llvm.call @mgpuMemcpy(%{{.*}}, %arg5, %{{.*}}, %{{.*}})
// CHECK: %[[STREAM:.*]] = llvm.call @mgpuStreamCreate()
// CHECK-NOT: mgpuStreamSynchronize
// CHECK: gpu.launch_func <%[[STREAM]] : !llvm.ptr> @xfmr_kernels::
// CHECK-NOT: mgpuStreamSynchronize
// CHECK: llvm.call @mgpuMemFree(%{{.*}}, %[[STREAM]])
// CHECK: llvm.call @mgpuStreamSynchronize(%[[STREAM]])
// CHECK-NEXT: llvm.call @mgpuStreamDestroy(%[[STREAM]])
// CHECK-NOT: gpu.launch_func
// CHECK: llvm.call @mgpuMemcpy(%arg5, %{{.*}}, %{{.*}}, %{{.*}})
// CHECK: llvm.return
// CHECK: gpu.binary @xfmr_kernels
// CHECK-SAME: #gpu.object<#nvvm.target<O = 3, chip = "sm_90", features = "+ptx80">
// CHECK-NOT: gpu.binary
// CHECK-LABEL: llvm.func @block_packed(
// SM80: #nvvm.target<O = 3, chip = "sm_80", features = "+ptx80">

// PTX: .target sm_90
// PTX: .visible .entry gpu_pipeline_forward_kernel(
// PTX-NOT: __nv_
// PTX-NOT: .extern .func

func.func @block(%x: tensor<1x16x32xf32> {xfmr.input = "x"}, %m: tensor<1x16xi1> {xfmr.input = "m"},
                 %g: tensor<32xf32> {xfmr.param = "g"}, %b: tensor<32xf32> {xfmr.param = "b"},
                 %w: tensor<32x32xf32> {xfmr.param = "w"})
    -> (tensor<1x16x32xf32> {xfmr.output = "y"}) {
  %n = xfmr.layer_norm %x, %g, %b : (tensor<1x16x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<1x16x32xf32>
  %h = xfmr.linear %n, %w, %b : (tensor<1x16x32xf32>, tensor<32x32xf32>, tensor<32xf32>) -> tensor<1x16x32xf32>
  %a = xfmr.gelu %h {approximate = #xfmr.gelu_approximation<tanh>} : tensor<1x16x32xf32>
  %q = tensor.expand_shape %a [[0], [1], [2, 3]] output_shape [1, 16, 4, 8] : tensor<1x16x32xf32> into tensor<1x16x4x8xf32>
  %o = xfmr.fused_attention %q, %q, %q padding_mask(%m) {causal, scale = 0.35 : f64}
       : (tensor<1x16x4x8xf32>, tensor<1x16x4x8xf32>, tensor<1x16x4x8xf32>, tensor<1x16xi1>) -> tensor<1x16x4x8xf32>
  %y = tensor.collapse_shape %o [[0], [1], [2, 3]] : tensor<1x16x4x8xf32> into tensor<1x16x32xf32>
  %r = xfmr.add %x, %y : (tensor<1x16x32xf32>, tensor<1x16x32xf32>) -> tensor<1x16x32xf32>
  return %r : tensor<1x16x32xf32>
}
