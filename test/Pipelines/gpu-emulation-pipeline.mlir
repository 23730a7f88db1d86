// RUN: xfmr-opt %s --xfmr-gpu-emulation-pipeline | FileCheck %s
// RUN: xfmr-opt %s "--xfmr-gpu-emulation-pipeline=chip=sm_90a reverse-threads=true lanes=16" --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=SM90A
// RUN: xfmr-opt %s --xfmr-gpu-emulation-pipeline=chip=sm_80 --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=SM80
// RUN: not xfmr-opt %s --xfmr-cpu-pipeline=reverse-threads=true 2>&1 | FileCheck %s --check-prefix=CPU

// The CPU pipeline through the GPU's kernels: the attention is the GPU's
// thread-block kernel, its blocks and threads run as scalar loops in turn
// (no vectors of the CPU kernels, no OpenMP), behind the CPU pipeline's
// entry ABI.
// CHECK-NOT: xfmr.
// CHECK-LABEL: llvm.func @attention(
// CHECK-SAME: %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr) attributes {xfmr.arena_bytes = {{[0-9]+}} : i64, xfmr.entry}
// CHECK-NOT: vector<
// CHECK-NOT: omp.
// CHECK-LABEL: llvm.func @attention_packed(

// The GPU's kernels for the chip first, then the CPU's (with the CPU
// options) for the ops the GPU has none of.
// SM90A: convert-xfmr-to-gpu-kernels{emulate-threads=true reverse-threads=true warpgroup-mma=true}
// SM90A: convert-xfmr-to-cpu-kernels{bf16-dot=false int8-dot=none lanes=16 registers=16}
// SM80: convert-xfmr-to-gpu-kernels{emulate-threads=true reverse-threads=false warpgroup-mma=false}
// SM80: convert-xfmr-to-cpu-kernels

// The emulation's options are not the CPU pipeline's.
// CPU: no such option reverse-threads
func.func @attention(%q: tensor<1x16x2x8xf32> {xfmr.input = "q"}, %m: tensor<1x16xi1> {xfmr.input = "m"})
    -> (tensor<1x16x2x8xf32> {xfmr.output = "o"}) {
  %o = xfmr.fused_attention %q, %q, %q padding_mask(%m) {causal, scale = 0.35 : f64}
       : (tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>, tensor<1x16x2x8xf32>, tensor<1x16xi1>) -> tensor<1x16x2x8xf32>
  return %o : tensor<1x16x2x8xf32>
}
