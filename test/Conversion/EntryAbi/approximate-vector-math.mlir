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

// Negative: scalar math is left to libm.
// CHECK-LABEL: func @scalars
// CHECK-NEXT: math.exp
// CHECK-NEXT: math.tanh
func.func @scalars(%x: f32) -> f32 {
  %e = math.exp %x : f32
  %t = math.tanh %e : f32
  return %t : f32
}
