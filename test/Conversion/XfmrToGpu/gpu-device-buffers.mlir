// RUN: xfmr-opt %s --xfmr-gpu-device-buffers --split-input-file | FileCheck %s

module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @scale(%buffer: memref<32xf32>) kernel {
      gpu.return
    }
  }

  // Touched only by a kernel (through a view), the copy engine and a shape
  // query: device memory, still allocated in stream order.
  // CHECK-LABEL: func.func @kernels_only
  // CHECK: %[[S:.*]] = gpu.wait async
  // CHECK-NEXT: %[[M:.*]], %[[T:.*]] = gpu.alloc async [%[[S]]] () : memref<4x8xf32>
  // CHECK-NEXT: gpu.memcpy async [%[[T]]] %[[M]], %arg0
  // CHECK-NOT: host_shared
  // CHECK: return
  func.func @kernels_only(%host: memref<4x8xf32>) -> index {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %s = gpu.wait async
    %m, %t0 = gpu.alloc async [%s] host_shared () : memref<4x8xf32>
    %t1 = gpu.memcpy async [%t0] %m, %host : memref<4x8xf32>, memref<4x8xf32>
    %flat = memref.collapse_shape %m [[0, 1]] : memref<4x8xf32> into memref<32xf32>
    %rows = memref.dim %m, %c0 : memref<4x8xf32>
    %t2 = gpu.launch_func async [%t1] @kernels::@scale blocks in (%c1, %c1, %c1)
        threads in (%c1, %c1, %c1) args(%flat : memref<32xf32>)
    %t3 = gpu.memcpy async [%t2] %host, %m : memref<4x8xf32>, memref<4x8xf32>
    %t4 = gpu.dealloc async [%t3] %m : memref<4x8xf32>
    gpu.wait [%t4]
    return %rows : index
  }

  // Host code reads it (a reduction left on the host), through a view: it
  // stays managed, allocated after the host waits for the work before, and
  // the work after it starts a new stream.
  // CHECK-LABEL: func.func @host_reads
  // CHECK: %[[S:.*]] = gpu.wait async
  // CHECK-NEXT: %[[T:.*]] = gpu.launch_func async [%[[S]]]
  // CHECK-NEXT: gpu.wait [%[[T]]]
  // CHECK-NEXT: %[[M:.*]] = gpu.alloc host_shared () : memref<1x32xf32>
  // CHECK-NEXT: %[[S2:.*]] = gpu.wait async
  // CHECK: gpu.launch_func async [%[[S2]]]
  // CHECK: memref.load
  func.func @host_reads(%other: memref<32xf32>) -> f32 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %s = gpu.wait async
    %t0 = gpu.launch_func async [%s] @kernels::@scale blocks in (%c1, %c1, %c1)
        threads in (%c1, %c1, %c1) args(%other : memref<32xf32>)
    %m, %t1 = gpu.alloc async [%t0] host_shared () : memref<1x32xf32>
    %row = memref.collapse_shape %m [[0, 1]] : memref<1x32xf32> into memref<32xf32>
    %t2 = gpu.launch_func async [%t1] @kernels::@scale blocks in (%c1, %c1, %c1)
        threads in (%c1, %c1, %c1) args(%row : memref<32xf32>)
    gpu.wait [%t2]
    %v = memref.load %row[%c0] : memref<32xf32>
    %s2 = gpu.wait async
    %t3 = gpu.dealloc async [%s2] %m : memref<1x32xf32>
    gpu.wait [%t3]
    return %v : f32
  }

  // An argument staged where it is not in managed memory: the staging buffer
  // that an scf.if yields counts through the yielded value, which only
  // kernels touch here, and the host reads in @staged_host_reads.
  // CHECK-LABEL: func.func @staged_for_kernels
  // CHECK: scf.if
  // CHECK-NEXT: scf.yield %arg0
  // CHECK-NEXT: } else {
  // CHECK-NEXT: gpu.wait async
  // CHECK-NEXT: gpu.alloc async {{.*}} () : memref<32xf32>
  // CHECK-LABEL: func.func @staged_host_reads
  // CHECK: scf.if
  // CHECK: gpu.alloc host_shared () : memref<32xf32>
  func.func @staged_for_kernels(%host: memref<32xf32>, %managed: i1) {
    %c1 = arith.constant 1 : index
    %m = scf.if %managed -> (memref<32xf32>) {
      scf.yield %host : memref<32xf32>
    } else {
      %s = gpu.wait async
      %b, %t0 = gpu.alloc async [%s] host_shared () : memref<32xf32>
      %t1 = gpu.memcpy async [%t0] %b, %host : memref<32xf32>, memref<32xf32>
      gpu.wait [%t1]
      scf.yield %b : memref<32xf32>
    }
    %s = gpu.wait async
    %t = gpu.launch_func async [%s] @kernels::@scale blocks in (%c1, %c1, %c1)
        threads in (%c1, %c1, %c1) args(%m : memref<32xf32>)
    gpu.wait [%t]
    return
  }
  func.func @staged_host_reads(%host: memref<32xf32>, %managed: i1) -> f32 {
    %c0 = arith.constant 0 : index
    %m = scf.if %managed -> (memref<32xf32>) {
      scf.yield %host : memref<32xf32>
    } else {
      %s = gpu.wait async
      %b, %t0 = gpu.alloc async [%s] host_shared () : memref<32xf32>
      %t1 = gpu.memcpy async [%t0] %b, %host : memref<32xf32>, memref<32xf32>
      gpu.wait [%t1]
      scf.yield %b : memref<32xf32>
    }
    %v = memref.load %m[%c0] : memref<32xf32>
    return %v : f32
  }
}
