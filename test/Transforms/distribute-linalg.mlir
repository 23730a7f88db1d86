// RUN: xfmr-opt %s --split-input-file --xfmr-distribute-linalg | FileCheck %s
// RUN: xfmr-opt %s --split-input-file --xfmr-distribute-linalg="min-points=1 tiles=3" | FileCheck %s --check-prefix=ALL
// RUN: not xfmr-opt %s --split-input-file --xfmr-distribute-linalg="tiles=0" 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: error: xfmr-distribute-linalg: tiles and min-points must be positive

#map = affine_map<(d0, d1) -> (d0, d1)>

// An elementwise op of 128 x 768 points: its rows in 8 tiles of 16 on the
// threads, each tile the same op on its slices.
// CHECK-LABEL: func @elementwise
// CHECK: %[[EMPTY:.*]] = tensor.empty() : tensor<128x768xf32>
// CHECK: %[[R:.*]] = scf.forall (%[[I:.*]]) = (0) to (128) step (16) shared_outs(%[[OUT:.*]] = %[[EMPTY]])
// CHECK: %[[A:.*]] = tensor.extract_slice %arg0[%[[I]], 0] [16, 768] [1, 1]
// CHECK: %[[B:.*]] = tensor.extract_slice %arg1[%[[I]], 0] [16, 768] [1, 1]
// CHECK: %[[O:.*]] = tensor.extract_slice %[[OUT]][%[[I]], 0] [16, 768] [1, 1]
// CHECK: %[[T:.*]] = linalg.generic {{.*}} ins(%[[A]], %[[B]] : tensor<16x768xf32>, tensor<16x768xf32>) outs(%[[O]] : tensor<16x768xf32>)
// CHECK: arith.addf
// CHECK: tensor.parallel_insert_slice %[[T]] into %[[OUT]][%[[I]], 0] [16, 768] [1, 1]
// CHECK: return %[[R]]
func.func @elementwise(%a: tensor<128x768xf32>, %b: tensor<128x768xf32>) -> tensor<128x768xf32> {
  %e = tensor.empty() : tensor<128x768xf32>
  %r = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<128x768xf32>, tensor<128x768xf32>) outs(%e : tensor<128x768xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<128x768xf32>
  return %r : tensor<128x768xf32>
}

// -----

#map = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>

// A bias gradient's column sums: the reduction over rows stays whole, the
// columns split (8 tiles of 96); the fill of 768 points stays on one thread.
// CHECK-LABEL: func @column_sums
// CHECK: %[[ZEROS:.*]] = linalg.fill
// CHECK: scf.forall (%[[J:.*]]) = (0) to (768) step (96) shared_outs(%[[OUT:.*]] = %[[ZEROS]])
// CHECK: tensor.extract_slice %arg0[0, %[[J]]] [512, 96] [1, 1]
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]
// CHECK-SAME: outs(%{{.*}} : tensor<96xf32>)
func.func @column_sums(%a: tensor<512x768xf32>) -> tensor<768xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<768xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<768xf32>) -> tensor<768xf32>
  %r = linalg.generic {indexing_maps = [#map, #col], iterator_types = ["reduction", "parallel"]}
      ins(%a : tensor<512x768xf32>) outs(%f : tensor<768xf32>) {
  ^bb0(%x: f32, %o: f32):
    %s = arith.addf %x, %o : f32
    linalg.yield %s : f32
  } -> tensor<768xf32>
  return %r : tensor<768xf32>
}

// -----

#map = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// Left alone: too few points (16 x 32), a dynamic shape, a full reduction
// (no parallel loop) and an op already inside an scf.forall. With
// min-points=1 only the first splits, into 3 tiles.
// CHECK-LABEL: func @left_alone
// CHECK-COUNT-1: scf.forall (
// CHECK-NOT: scf.forall (
// CHECK: return
// ALL-LABEL: func @left_alone
// ALL: scf.forall (%{{.*}}) = (0) to (16) step (6)
// ALL: scf.forall (%{{.*}}) in (2)
// ALL-NOT: scf.forall (
// ALL: return
func.func @left_alone(%a: tensor<16x32xf32>, %d: tensor<?x4096xf32>, %v: tensor<65536xf32>, %s: tensor<f32>,
                      %big: tensor<2x128x768xf32>)
    -> (tensor<16x32xf32>, tensor<?x4096xf32>, tensor<f32>, tensor<2x128x768xf32>) {
  %e = tensor.empty() : tensor<16x32xf32>
  %small = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<16x32xf32>) outs(%e : tensor<16x32xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.mulf %x, %x : f32
    linalg.yield %y : f32
  } -> tensor<16x32xf32>
  %dynamic = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%d : tensor<?x4096xf32>) outs(%d : tensor<?x4096xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.mulf %x, %x : f32
    linalg.yield %y : f32
  } -> tensor<?x4096xf32>
  %sum = linalg.reduce ins(%v : tensor<65536xf32>) outs(%s : tensor<f32>) dimensions = [0]
    (%x: f32, %acc: f32) {
      %y = arith.addf %x, %acc : f32
      linalg.yield %y : f32
    }
  %nested = scf.forall (%i) in (2) shared_outs(%out = %big) -> (tensor<2x128x768xf32>) {
    %slice = tensor.extract_slice %big[%i, 0, 0] [1, 128, 768] [1, 1, 1] : tensor<2x128x768xf32> to tensor<128x768xf32>
    %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
        ins(%slice : tensor<128x768xf32>) outs(%slice : tensor<128x768xf32>) {
    ^bb0(%x: f32, %o: f32):
      %y = arith.mulf %x, %x : f32
      linalg.yield %y : f32
    } -> tensor<128x768xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %r into %out[%i, 0, 0] [1, 128, 768] [1, 1, 1] : tensor<128x768xf32> into tensor<2x128x768xf32>
    }
  }
  return %small, %dynamic, %sum, %nested : tensor<16x32xf32>, tensor<?x4096xf32>, tensor<f32>, tensor<2x128x768xf32>
}
