// RUN: xfmr-opt %s --split-input-file --xfmr-plan-buffers | FileCheck %s
// RUN: xfmr-opt %s --split-input-file --xfmr-plan-buffers="global-arena=true" | FileCheck %s --check-prefix=GLOBAL
// RUN: xfmr-opt %s --split-input-file --xfmr-plan-buffers="parallel-loop-scopes=true" | FileCheck %s --check-prefix=STACK
// RUN: xfmr-opt %s --split-input-file --xfmr-plan-buffers="parallel-loop-scopes=true max-stack-bytes=128" | FileCheck %s --check-prefix=SMALL
// RUN: not xfmr-opt %s --split-input-file --xfmr-plan-buffers="max-stack-bytes=-1" 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: error: xfmr-plan-buffers: max-stack-bytes must not be negative

// Two 4 KiB temporaries live one after the other share the arena's first
// bytes; the small one live across both goes after them. The arena is one
// allocation per call, or a module global.
// CHECK-LABEL: func @sequence
// CHECK-SAME: attributes {xfmr.arena_bytes = 4160 : i64}
// CHECK: %[[ARENA:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4160xi8>
// CHECK-NOT: memref.alloc()
// CHECK: %[[C0:.*]] = arith.constant 0 : index
// CHECK: %[[A:.*]] = memref.view %[[ARENA]][%[[C0]]][] : memref<4160xi8> to memref<1024xf32>
// CHECK: %[[C4096:.*]] = arith.constant 4096 : index
// CHECK: %[[S:.*]] = memref.view %[[ARENA]][%[[C4096]]][] : memref<4160xi8> to memref<16xf32>
// CHECK: linalg.fill {{.*}} outs(%[[A]]
// CHECK: memref.copy %[[A]], %arg0
// CHECK: %[[C0B:.*]] = arith.constant 0 : index
// CHECK: %[[B:.*]] = memref.view %[[ARENA]][%[[C0B]]][] : memref<4160xi8> to memref<1024xf32>
// CHECK: linalg.fill {{.*}} outs(%[[B]]
// CHECK: memref.copy %[[B]], %arg1
// CHECK: memref.copy %[[S]], %arg2
// CHECK-NOT: memref.dealloc %[[A]]
// CHECK-NOT: memref.dealloc %[[B]]
// CHECK: memref.dealloc %[[ARENA]]
// CHECK-NEXT: return
// GLOBAL: memref.global "private" @__xfmr_arena_sequence : memref<4160xi8> = uninitialized {alignment = 64 : i64}
// GLOBAL-LABEL: func @sequence
// GLOBAL-SAME: attributes {xfmr.arena_bytes = 4160 : i64}
// GLOBAL: %[[ARENA:.*]] = memref.get_global @__xfmr_arena_sequence : memref<4160xi8>
// GLOBAL-NOT: memref.alloc
// GLOBAL-NOT: memref.dealloc
// GLOBAL: return
func.func @sequence(%out0: memref<1024xf32>, %out1: memref<1024xf32>, %out2: memref<16xf32>) {
  %one = arith.constant 1.0 : f32
  %a = memref.alloc() {alignment = 64 : i64} : memref<1024xf32>
  %s = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
  linalg.fill ins(%one : f32) outs(%s : memref<16xf32>)
  linalg.fill ins(%one : f32) outs(%a : memref<1024xf32>)
  memref.copy %a, %out0 : memref<1024xf32> to memref<1024xf32>
  %b = memref.alloc() {alignment = 64 : i64} : memref<1024xf32>
  linalg.fill ins(%one : f32) outs(%b : memref<1024xf32>)
  memref.copy %b, %out1 : memref<1024xf32> to memref<1024xf32>
  memref.copy %s, %out2 : memref<16xf32> to memref<16xf32>
  memref.dealloc %a : memref<1024xf32>
  memref.dealloc %b : memref<1024xf32>
  memref.dealloc %s : memref<16xf32>
  return
}

// -----

// A temporary read through an alias (a reshaped view) inside a loop lives
// until that loop: the next one may not take its bytes before.
// CHECK-LABEL: func @alias_in_loop
// CHECK: %[[ARENA:.*]] = memref.alloc() {alignment = 64 : i64} : memref<512xi8>
// CHECK: memref.view %[[ARENA]][%{{.*}}][] : memref<512xi8> to memref<8x8xf32>
// CHECK: memref.view %[[ARENA]][%{{.*}}][] : memref<512xi8> to memref<64xf32>
func.func @alias_in_loop(%out: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1.0 : f32
  %a = memref.alloc() {alignment = 64 : i64} : memref<8x8xf32>
  linalg.fill ins(%one : f32) outs(%a : memref<8x8xf32>)
  %flat = memref.collapse_shape %a [[0, 1]] : memref<8x8xf32> into memref<64xf32>
  %b = memref.alloc() {alignment = 64 : i64} : memref<64xf32>
  linalg.fill ins(%one : f32) outs(%b : memref<64xf32>)
  scf.for %i = %c0 to %c64 step %c1 {
    %x = memref.load %flat[%i] : memref<64xf32>
    %y = memref.load %b[%i] : memref<64xf32>
    %z = arith.addf %x, %y : f32
    memref.store %z, %out[%i] : memref<64xf32>
  }
  memref.dealloc %a : memref<8x8xf32>
  memref.dealloc %b : memref<64xf32>
  return
}

// -----

// An OpenMP loop's temporaries come from the stack of the thread running the
// iteration (its body is an allocation scope), up to max-stack-bytes per
// body; the one inside a nested loop stays on the heap. Without
// parallel-loop-scopes, all stay.
// STACK-LABEL: func @loop_temporary
// STACK: scf.forall
// STACK-NEXT: %[[T:.*]] = memref.alloca() {alignment = 64 : i64} : memref<32xf32>
// STACK-NEXT: %[[U:.*]] = memref.alloca() {alignment = 64 : i64} : memref<32xf32>
// STACK: linalg.fill {{.*}} outs(%[[T]]
// STACK: memref.copy %[[T]]
// STACK: scf.for
// STACK: memref.alloc() {alignment = 64 : i64} : memref<4xf32>
// STACK: memref.dealloc
// STACK-NOT: memref.dealloc
// STACK: return
// SMALL-LABEL: func @loop_temporary
// SMALL: memref.alloca() {alignment = 64 : i64} : memref<32xf32>
// SMALL: memref.alloc() {alignment = 64 : i64} : memref<32xf32>
// CHECK-LABEL: func @loop_temporary
// CHECK-NOT: memref.alloca
func.func @loop_temporary(%out: memref<8x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %one = arith.constant 1.0 : f32
  scf.forall (%i) in (8) {
    %t = memref.alloc() {alignment = 64 : i64} : memref<32xf32>
    %u = memref.alloc() {alignment = 64 : i64} : memref<32xf32>
    linalg.fill ins(%one : f32) outs(%t : memref<32xf32>)
    linalg.fill ins(%one : f32) outs(%u : memref<32xf32>)
    %row = memref.subview %out[%i, 0] [1, 32] [1, 1] : memref<8x32xf32> to memref<32xf32, strided<[1], offset: ?>>
    memref.copy %t, %row : memref<32xf32> to memref<32xf32, strided<[1], offset: ?>>
    scf.for %j = %c0 to %c4 step %c1 {
      %v = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
      linalg.fill ins(%one : f32) outs(%v : memref<4xf32>)
      memref.dealloc %v : memref<4xf32>
    }
    memref.dealloc %t : memref<32xf32>
    memref.dealloc %u : memref<32xf32>
  }
  return
}

// -----

// A gradient handed to a (synchronous) call by address lives until the call:
// the temporary allocated before it cannot take its bytes.
// CHECK-LABEL: func @address_to_call
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<128xi8>
// CHECK: memref.extract_aligned_pointer_as_index
// CHECK: call @all_reduce
func.func private @all_reduce(i64, i64)
func.func @address_to_call(%out: memref<16xf32>) {
  %c16 = arith.constant 16 : i64
  %one = arith.constant 1.0 : f32
  %g = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
  linalg.fill ins(%one : f32) outs(%g : memref<16xf32>)
  %p = memref.extract_aligned_pointer_as_index %g : memref<16xf32> -> index
  %i = arith.index_cast %p : index to i64
  %h = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
  linalg.fill ins(%one : f32) outs(%h : memref<16xf32>)
  func.call @all_reduce(%i, %c16) : (i64, i64) -> ()
  memref.copy %h, %out : memref<16xf32> to memref<16xf32>
  memref.dealloc %g : memref<16xf32>
  memref.dealloc %h : memref<16xf32>
  return
}

// -----

// A reduction started on a gradient's address runs until its wait: the
// temporary used in between cannot take the gradient's bytes.
// CHECK-LABEL: func @started_reduction
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<128xi8>
// CHECK: call @reduce_start
// CHECK: call @reduce_wait
func.func private @reduce_start(i64, i64)
func.func private @reduce_wait(i64)
func.func @started_reduction(%out: memref<16xf32>) {
  %c16 = arith.constant 16 : i64
  %one = arith.constant 1.0 : f32
  %g = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
  linalg.fill ins(%one : f32) outs(%g : memref<16xf32>)
  %p = memref.extract_aligned_pointer_as_index %g : memref<16xf32> -> index
  %i = arith.index_cast %p : index to i64
  func.call @reduce_start(%i, %c16) : (i64, i64) -> ()
  %h = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
  linalg.fill ins(%one : f32) outs(%h : memref<16xf32>)
  memref.copy %h, %out : memref<16xf32> to memref<16xf32>
  memref.dealloc %h : memref<16xf32>
  func.call @reduce_wait(%i) : (i64) -> ()
  memref.dealloc %g : memref<16xf32>
  return
}

// -----

// Left alone: a returned buffer, one passed to a call, one whose address is
// returned, and one of dynamic shape: no arena.
// CHECK-LABEL: func @escaping
// CHECK-NOT: xfmr.arena_bytes
// CHECK-NOT: memref.view
// CHECK-NOT: memref.alloca
// CHECK-COUNT-4: memref.alloc
// CHECK-NOT: memref.view
func.func private @consume(memref<16xf32>)
func.func @escaping(%n: index) -> (memref<16xf32>, index) {
  %one = arith.constant 1.0 : f32
  %r = memref.alloc() : memref<16xf32>
  linalg.fill ins(%one : f32) outs(%r : memref<16xf32>)
  %c = memref.alloc() : memref<16xf32>
  func.call @consume(%c) : (memref<16xf32>) -> ()
  %p = memref.alloc() : memref<16xf32>
  %address = memref.extract_aligned_pointer_as_index %p : memref<16xf32> -> index
  %d = memref.alloc(%n) : memref<?xf32>
  linalg.fill ins(%one : f32) outs(%d : memref<?xf32>)
  memref.dealloc %c : memref<16xf32>
  memref.dealloc %p : memref<16xf32>
  memref.dealloc %d : memref<?xf32>
  return %r, %address : memref<16xf32>, index
}
