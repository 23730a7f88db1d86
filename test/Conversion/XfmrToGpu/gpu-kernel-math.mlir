// RUN: xfmr-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(gpu.module(xfmr-gpu-kernel-math))' | FileCheck %s

// Transcendentals become polynomials (no math op, so no libdevice call
// later); sqrt, rsqrt and floor become single PTX instructions; fma stays
// fma (convert-gpu-to-nvvm makes it one fma.rn instruction).
// CHECK-LABEL: gpu.func @kernel
// CHECK-NOT: math.exp
// CHECK-NOT: math.tanh
// CHECK-NOT: math.erf
// CHECK-NOT: math.log
// CHECK-NOT: math.powf
// CHECK: llvm.inline_asm "sqrt.rn.f32 $0, $1;", "=f,f"
// CHECK: %[[ROOT:.*]] = llvm.inline_asm "sqrt.rn.f32 $0, $1;", "=f,f"
// CHECK: arith.divf %{{.*}}, %[[ROOT]] : f32
// CHECK: llvm.inline_asm "cvt.rmi.f32.f32 $0, $1;", "=f,f"
// CHECK: llvm.inline_asm "sqrt.rn.f64 $0, $1;", "=d,d"
// CHECK: math.fma %{{.*}} : f32
// CHECK-NOT: math.{{[a-z]+}} %
// CHECK: gpu.return
gpu.module @kernels {
  gpu.func @kernel(%x: f32, %y: f32, %d: f64, %out: memref<9xf32>, %outd: memref<1xf64>) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c4 = arith.constant 4 : index
    %c5 = arith.constant 5 : index
    %c6 = arith.constant 6 : index
    %c7 = arith.constant 7 : index
    %e = math.exp %x : f32
    %t = math.tanh %x : f32
    %r = math.erf %x : f32
    %l = math.log %y : f32
    %s = math.sqrt %y : f32
    %q = math.rsqrt %y : f32
    %f = math.floor %x : f32
    %p = math.powf %y, %x : f32
    %sd = math.sqrt %d : f64
    %m = math.fma %x, %y, %x : f32
    memref.store %e, %out[%c0] : memref<9xf32>
    memref.store %t, %out[%c1] : memref<9xf32>
    memref.store %r, %out[%c2] : memref<9xf32>
    memref.store %l, %out[%c3] : memref<9xf32>
    memref.store %s, %out[%c4] : memref<9xf32>
    memref.store %q, %out[%c5] : memref<9xf32>
    memref.store %f, %out[%c6] : memref<9xf32>
    memref.store %p, %out[%c7] : memref<9xf32>
    %c8 = arith.constant 8 : index
    memref.store %m, %out[%c8] : memref<9xf32>
    memref.store %sd, %outd[%c0] : memref<1xf64>
    gpu.return
  }
}

// -----

// No polynomial for f64 exp: reported rather than left to libdevice.
gpu.module @kernels {
  gpu.func @f64_exp(%d: f64, %out: memref<1xf64>) kernel {
    %c0 = arith.constant 0 : index
    // expected-error @+1 {{'math.exp' op on 'f64' has no GPU lowering without libdevice}}
    %e = math.exp %d : f64
    memref.store %e, %out[%c0] : memref<1xf64>
    gpu.return
  }
}

// -----

// An f32 exp2 allowed to approximate (fastmath afn) is PTX's ex2.approx;
// without the flag it is a polynomial like the other transcendentals.
// CHECK-LABEL: gpu.func @exp2
// CHECK: llvm.inline_asm "ex2.approx.ftz.f32 $0, $1;", "=f,f" %{{.*}} : (f32) -> f32
// CHECK-NOT: ex2.approx
// CHECK-NOT: math.exp2
// CHECK: gpu.return
gpu.module @kernels {
  gpu.func @exp2(%x: f32, %out: memref<2xf32>) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %fast = math.exp2 %x fastmath<afn> : f32
    %exact = math.exp2 %x : f32
    memref.store %fast, %out[%c0] : memref<2xf32>
    memref.store %exact, %out[%c1] : memref<2xf32>
    gpu.return
  }
}
