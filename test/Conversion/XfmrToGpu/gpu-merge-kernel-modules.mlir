// RUN: xfmr-opt %s --split-input-file --verify-diagnostics --xfmr-gpu-merge-kernel-modules | FileCheck %s
// RUN: xfmr-opt %s --split-input-file --verify-diagnostics --xfmr-gpu-merge-kernel-modules=module-name=kernels | FileCheck %s --check-prefix=NAMED

// Outlined kernels, one module each, end up in one module; launches follow.
// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK: gpu.module @xfmr_kernels {
// CHECK-NEXT: gpu.func @f_kernel(
// CHECK: gpu.func @f_kernel_0(
// CHECK-NOT: gpu.module
// CHECK: gpu.launch_func @xfmr_kernels::@f_kernel blocks
// CHECK: gpu.launch_func @xfmr_kernels::@f_kernel_0 blocks
// NAMED: gpu.module @kernels
// NAMED: gpu.launch_func @kernels::@f_kernel blocks
module attributes {gpu.container_module} {
  gpu.module @f_kernel {
    gpu.func @f_kernel(%a: memref<4xf32>) kernel {
      gpu.return
    }
  }
  gpu.module @f_kernel_0 {
    gpu.func @f_kernel_0(%a: memref<4xf32>) kernel {
      gpu.return
    }
  }
  func.func @f(%a: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @f_kernel::@f_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    gpu.launch_func @f_kernel_0::@f_kernel_0 blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    return
  }
}

// -----

// Two kernels of the same name: the second is renamed, and its launch too.
// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK: gpu.module @xfmr_kernels {
// CHECK-NEXT: gpu.func @k(
// CHECK: gpu.func @[[RENAMED:k_[0-9]+]](
// CHECK: gpu.launch_func @xfmr_kernels::@k blocks
// CHECK: gpu.launch_func @xfmr_kernels::@[[RENAMED]] blocks
module attributes {gpu.container_module} {
  gpu.module @a {
    gpu.func @k() kernel {
      gpu.return
    }
  }
  gpu.module @b {
    gpu.func @k() kernel {
      gpu.return
    }
  }
  func.func @g() {
    %c1 = arith.constant 1 : index
    gpu.launch_func @a::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    gpu.launch_func @b::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    return
  }
}

// -----

// A kernel's dynamic shared memory (zero-length, no initial value, workgroup
// memory) becomes public: an external declaration, as CUDA's `extern
// __shared__`. Static shared arrays stay private.
// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK: gpu.module @xfmr_kernels {
// CHECK-DAG: memref.global @__xfmr_dynamic_shared : memref<0xi8, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.global "private" @__xfmr_shared : memref<64xf32, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.global "private" @__xfmr_empty : memref<0xi8, #gpu.address_space<workgroup>> = uninitialized
module attributes {gpu.container_module} {
  gpu.module @a {
    memref.global "private" @__xfmr_dynamic_shared : memref<0xi8, #gpu.address_space<workgroup>> {alignment = 16 : i64}
    memref.global "private" @__xfmr_shared : memref<64xf32, #gpu.address_space<workgroup>> {alignment = 16 : i64}
    memref.global "private" @__xfmr_empty : memref<0xi8, #gpu.address_space<workgroup>> = uninitialized
    gpu.func @k() kernel {
      %0 = memref.get_global @__xfmr_dynamic_shared : memref<0xi8, #gpu.address_space<workgroup>>
      %1 = memref.get_global @__xfmr_shared : memref<64xf32, #gpu.address_space<workgroup>>
      %2 = memref.get_global @__xfmr_empty : memref<0xi8, #gpu.address_space<workgroup>>
      gpu.return
    }
  }
  func.func @g() {
    %c1 = arith.constant 1 : index
    gpu.launch_func @a::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    return
  }
}

// -----

// Modules compiled for different targets cannot share one binary.
module attributes {gpu.container_module} {
  gpu.module @a [#nvvm.target<chip = "sm_80">] {
    gpu.func @k() kernel {
      gpu.return
    }
  }
  // expected-error @+1 {{'gpu.module' op has other targets than 'a'; cannot merge them}}
  gpu.module @b [#nvvm.target<chip = "sm_90">] {
    gpu.func @k() kernel {
      gpu.return
    }
  }
}
