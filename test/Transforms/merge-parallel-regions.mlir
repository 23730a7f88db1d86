// RUN: xfmr-opt %s --xfmr-merge-parallel-regions --split-input-file | FileCheck %s

// Three regions become one: the index computed between them is hoisted
// before it, the serial store runs in an omp.single (whose barrier, like
// each loop's, orders it), and each loop keeps its own barrier (no nowait).
// A serial sum, the arithmetic on it and the store of the result run in
// one omp.single together: no other thread reads the sum.
// CHECK-LABEL: func.func @merged
// CHECK: %[[TWICE:.*]] = arith.muli
// CHECK-NEXT: omp.parallel {
// CHECK: omp.wsloop {
// CHECK: memref.store %{{.*}}, %arg0
// CHECK: omp.single {
// CHECK-NEXT: memref.store %{{.*}}, %arg1[%[[TWICE]]]
// CHECK-NEXT: omp.terminator
// CHECK: omp.wsloop {
// CHECK: memref.load %arg1
// CHECK: omp.single {
// CHECK-NEXT: %[[SUM:.*]] = scf.for
// CHECK: %[[TWICE_SUM:.*]] = arith.addf %[[SUM]], %[[SUM]]
// CHECK-NEXT: memref.store %[[TWICE_SUM]], %arg1[%c0]
// CHECK-NEXT: omp.terminator
// CHECK: omp.wsloop {
// CHECK: omp.terminator
// CHECK-NOT: omp.parallel
// CHECK: return
func.func @merged(%a: memref<8xf32>, %b: memref<8xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %one = arith.constant 1.0 : f32
  omp.parallel {
    omp.wsloop {
      omp.loop_nest (%i) : index = (%c0) to (%c8) step (%c1) {
        memref.store %one, %a[%i] : memref<8xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  %twice = arith.muli %n, %c1 : index
  memref.store %one, %b[%twice] : memref<8xf32>
  omp.parallel {
    omp.wsloop {
      omp.loop_nest (%i) : index = (%c0) to (%c8) step (%c1) {
        %v = memref.load %b[%i] : memref<8xf32>
        memref.store %v, %a[%i] : memref<8xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  %sum = scf.for %i = %c0 to %c8 step %c1 iter_args(%acc = %one) -> (f32) {
    %v = memref.load %a[%i] : memref<8xf32>
    %next = arith.addf %acc, %v : f32
    scf.yield %next : f32
  }
  %twice_sum = arith.addf %sum, %sum : f32
  memref.store %twice_sum, %b[%c0] : memref<8xf32>
  omp.parallel {
    omp.wsloop {
      omp.loop_nest (%i) : index = (%c0) to (%c8) step (%c1) {
        memref.store %one, %b[%i] : memref<8xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  return
}

// -----

// A call of a function the master thread may call inside a team (the
// runtime's gradient reductions) runs in an omp.master, and the barrier
// after it orders it as omp.single's would.
// CHECK-LABEL: func.func @main_thread_call
// CHECK: omp.parallel {
// CHECK: omp.wsloop {
// CHECK: omp.master {
// CHECK-NEXT: %[[W:.*]] = memref.load
// CHECK-NEXT: func.call @reduce_start(%{{.*}}, %[[W]])
// CHECK-NEXT: omp.terminator
// CHECK-NEXT: }
// CHECK-NEXT: omp.barrier
// CHECK-NEXT: omp.wsloop {
// CHECK-NOT: omp.parallel
// CHECK-NOT: omp.single
// CHECK: return
func.func private @reduce_start(i64, f32) attributes {xfmr.main_thread_only}
func.func @main_thread_call(%a: memref<8xf32>, %b: memref<8xf32>, %weight: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %one = arith.constant 1.0 : f32
  omp.parallel {
    omp.wsloop {
      omp.loop_nest (%i) : index = (%c0) to (%c8) step (%c1) {
        memref.store %one, %a[%i] : memref<8xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  %p = memref.extract_aligned_pointer_as_index %a : memref<8xf32> -> index
  %address = arith.index_cast %p : index to i64
  %w = memref.load %weight[] : memref<f32>
  func.call @reduce_start(%address, %w) : (i64, f32) -> ()
  omp.parallel {
    omp.wsloop {
      omp.loop_nest (%i) : index = (%c0) to (%c8) step (%c1) {
        memref.store %one, %b[%i] : memref<8xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  return
}

// -----

// A load whose value the host uses, a call, a loop without its barrier
// and a region with a clause each keep the regions around them apart.
// CHECK-LABEL: func.func @kept_apart
// CHECK-COUNT-5: omp.parallel
// CHECK-NOT: omp.parallel
// CHECK-NOT: omp.single
func.func private @all_reduce(memref<8xf32>)
func.func @kept_apart(%a: memref<8xf32>, %threads: i32) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %one = arith.constant 1.0 : f32
  omp.parallel {
    omp.wsloop {
      omp.loop_nest (%i) : index = (%c0) to (%c8) step (%c1) {
        memref.store %one, %a[%i] : memref<8xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  %first = memref.load %a[%c0] : memref<8xf32>
  omp.parallel {
    omp.wsloop {
      omp.loop_nest (%i) : index = (%c0) to (%c8) step (%c1) {
        memref.store %first, %a[%i] : memref<8xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  func.call @all_reduce(%a) : (memref<8xf32>) -> ()
  omp.parallel {
    omp.wsloop nowait {
      omp.loop_nest (%i) : index = (%c0) to (%c8) step (%c1) {
        memref.store %one, %a[%i] : memref<8xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  omp.parallel num_threads(%threads : i32) {
    omp.wsloop {
      omp.loop_nest (%i) : index = (%c0) to (%c8) step (%c1) {
        memref.store %one, %a[%i] : memref<8xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  omp.parallel {
    omp.wsloop {
      omp.loop_nest (%i) : index = (%c0) to (%c8) step (%c1) {
        memref.store %one, %a[%i] : memref<8xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  return %first : f32
}
