// RUN: xfmr-opt %s --xfmr-emit-packed-entry --split-input-file --verify-diagnostics | FileCheck %s

// CHECK-LABEL: llvm.func @model_forward(
// CHECK-SAME: %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr)
// CHECK-LABEL: llvm.func @model_forward_packed(
// CHECK-SAME: %[[ARGS:.*]]: !llvm.ptr)
// CHECK: %[[S0:.*]] = llvm.getelementptr %[[ARGS]][0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK: %[[P0:.*]] = llvm.load %[[S0]] : !llvm.ptr -> !llvm.ptr
// CHECK: %[[S1:.*]] = llvm.getelementptr %[[ARGS]][1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK: %[[P1:.*]] = llvm.load %[[S1]] : !llvm.ptr -> !llvm.ptr
// CHECK: llvm.call @model_forward(%[[P0]], %[[P1]]) : (!llvm.ptr, !llvm.ptr) -> ()
// CHECK: llvm.return
llvm.func @model_forward(%in: !llvm.ptr {xfmr.input = "x"}, %out: !llvm.ptr {xfmr.output = "y"}) attributes {xfmr.entry} {
  llvm.return
}

// Negative: functions not marked as entries get no wrapper.
// CHECK-NOT: @other_packed
llvm.func @other(%in: !llvm.ptr) {
  llvm.return
}

// -----

// expected-error @+1 {{packed entry needs a void function of pointers}}
llvm.func @descriptor_convention(%ptr: !llvm.ptr, %offset: i64) attributes {xfmr.entry} {
  llvm.return
}
