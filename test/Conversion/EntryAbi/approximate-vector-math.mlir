// RUN: xfmr-opt %s --xfmr-approximate-vector-math | FileCheck %s

// Vector exp and tanh become polynomials (no libm call per lane).
// CHECK-LABEL: func @vectors
// CHECK-NOT: math.exp
// CHECK-NOT: math.tanh
// CHECK: math.fma
// CHECK: return
func.func @vectors(%v: vector<8xf32>) -> vector<8xf32> {
  %e = math.exp %v : vector<8xf32>
  %t = math.tanh %e : vector<8xf32>
  return %t : vector<8xf32>
}

// Scalar tanh and erf (GELU in linalg loops) become polynomials too, so
// that LLVM can vectorize their loops.
// CHECK-LABEL: func @gelu_scalars
// CHECK-NOT: math.tanh
// CHECK-NOT: math.erf
// CHECK: return
func.func @gelu_scalars(%x: f32) -> f32 {
  %t = math.tanh %x : f32
  %e = math.erf %t : f32
  return %e : f32
}

// Negative: scalar exp and log, and f64 tanh, are left to libm (exact at
// the infinities masked scores produce).
// CHECK-LABEL: func @scalars
// CHECK-NEXT: math.exp
// CHECK-NEXT: math.log
// CHECK-NEXT: math.tanh
func.func @scalars(%x: f32, %d: f64) -> (f32, f64) {
  %e = math.exp %x : f32
  %l = math.log %e : f32
  %t = math.tanh %d : f64
  return %l, %t : f32, f64
}
