// RUN: xfmrc %s --target=nvptx --emit=ptx -o %t.ptx
// RUN: FileCheck %s < %t.ptx
// RUN: %if ptxas %{ %ptxas -arch=sm_90 %t.ptx -o %t.cubin %}
// RUN: xfmrc %s --target=nvptx --emit=ptx --fuse-elementwise=false -o - | FileCheck %s --check-prefix=UNFUSED

// A chain of elementwise ops on bf16 values: xfmr-compute-in-f32 widens each
// op's operands and rounds its result, so without linalg elementwise fusion
// every widening, op and rounding is a kernel of its own (11, and the copy
// into the caller's result buffer), each storing its intermediate in memory.
// Fused, the chain is one kernel that loads the bf16 operands once and stores
// the bf16 result; the roundings between the ops stay (LLVM turns an f32 op
// on widened bf16 values whose result is rounded into the bf16 instruction,
// which rounds the same).
// CHECK: .visible .entry elementwise_fusion_forward_kernel(
// CHECK-COUNT-2: ld.global.b16
// CHECK-NOT: ld.global
// CHECK: add.rn.bf16
// CHECK: max.NaN.f32
// CHECK: cvt.rn.bf16.f32
// CHECK: mul.rn.bf16
// CHECK: st.global.b16
// CHECK: .visible .entry elementwise_fusion_forward_kernel_0(
// CHECK-NOT: .entry
// UNFUSED-COUNT-12: .entry
func.func @forward(%x: tensor<4x32xbf16> {xfmr.input = "x"}, %b: tensor<32xbf16> {xfmr.param = "b"})
    -> (tensor<4x32xbf16> {xfmr.output = "y"}) {
  %sum = xfmr.add %x, %b : (tensor<4x32xbf16>, tensor<32xbf16>) -> tensor<4x32xbf16>
  %relu = xfmr.relu %sum : tensor<4x32xbf16>
  %product = xfmr.mul %relu, %x : (tensor<4x32xbf16>, tensor<4x32xbf16>) -> tensor<4x32xbf16>
  return %product : tensor<4x32xbf16>
}
