// RUN: xfmr-opt %s --xfmr-cpu-pipeline | FileCheck %s
// RUN: xfmr-opt %s --xfmr-cpu-pipeline=openmp=false | FileCheck %s --check-prefix=SEQ

// The whole CPU pipeline: xfmr on tensors in, the LLVM dialect out, with the
// bare-pointer entry, its packed wrapper and OpenMP-parallel attention; the
// entry keeps the size of its arena of temporaries (xfmr-plan-buffers).
// CHECK-NOT: xfmr.
// CHECK-NOT: func.func
// CHECK-LABEL: llvm.func @attention(
// CHECK-SAME: %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr) attributes {xfmr.arena_bytes = {{[0-9]+}} : i64, xfmr.entry}
// CHECK: omp.parallel
// CHECK: omp.wsloop
// CHECK-LABEL: llvm.func @attention_packed(
// SEQ-NOT: omp.
// SEQ-LABEL: llvm.func @attention_packed(
func.func @attention(%q: tensor<1x16x2x8xf32> {xfmr.input = "q"}, %m: tensor<1x16xi1> {xfmr.input = "m"})
    -> (tensor<1x16x2x8xf32> {xfmr.output = "o"}) {
  %o = xfmr.fused_attention %q, %q, %q padding_mask(%m) {causal, scale = 0.35 : f64}
       : (tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>, tensor<1x16xi1>) -> tensor<1x16x2x8xf32>
  return %o : tensor<1x16x2x8xf32>
}
