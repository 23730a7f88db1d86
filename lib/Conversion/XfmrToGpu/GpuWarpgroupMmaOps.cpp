//===- GpuWarpgroupMmaOps.cpp - tensor-core products by wgmma ----*- C++ -*-===//
//
// The tensor-core operations of the attention and GEMM kernels on sm_90a:
// the 4 warps of a warpgroup multiply their 64 rows by a whole shared tile
// per 16 of K (wgmma.mma_async), both factors of a product read by the
// tensor cores from shared memory through matrix descriptors, an attention
// update's factors from registers. The MMAs run on until waited for, in
// groups.
//
//===----------------------------------------------------------------------===//

#include "GpuMmaAttentionBase.h"
#include "GpuMmaGemmKernel.h"

using namespace mlir;
using namespace xfmr::gpu;

namespace xfmr::gpu {

class WarpgroupMmaOps : public TensorCoreOps {
public:
  using TensorCoreOps::TensorCoreOps;

  SmallVector<Value> products(Value t, const MmaLane &lane, const RowFactor &x, Value tile,
                              function_ref<void()> whileMultiplying, Value pending) override {
    SmallVector<Value> acc = issueProducts(t, lane, x, tile);
    if (whileMultiplying)
      whileMultiplying();
    // One wait for both: the head-dim accumulators' MMAs came first.
    SmallVector<Value> pendingArrays;
    if (pending)
      pendingArrays.push_back(pending);
    return waitForAccumulators(t, pendingArrays, /*pending=*/0, acc);
  }

  std::pair<SmallVector<Value>, SmallVector<Value>>
  productPair(Value t, const MmaLane &lane, const RowFactor &x, Value xTile, const RowFactor &y,
              Value yTile, function_ref<void()> whileMultiplying) override {
    SmallVector<Value> both = issueProducts(t, lane, x, xTile);
    size_t firstCount = both.size();
    llvm::append_range(both, issueProducts(t, lane, y, yTile));
    if (whileMultiplying)
      whileMultiplying();
    both = waitForAccumulators(t, {}, /*pending=*/0, both);
    ArrayRef<Value> waited(both);
    return {SmallVector<Value>(waited.take_front(firstCount)),
            SmallVector<Value>(waited.drop_front(firstCount))};
  }

  SmallVector<Value> issueProducts(Value t, const MmaLane &lane, const RowFactor &x,
                                   Value tile) override {
    assert(k.rowTiles == 1 && "a warp's 16 rows of a warpgroup's 64");
    assert(x.shared && "loop-invariant rows by descriptor (RowFactor)");
    mma.fenceForWarpgroupMma({});
    SmallVector<Value> acc;
    for (int64_t s = 0; s < k.steps; ++s) {
      MmaBuilder::SharedOperand b = k.stepOperand(tile, s, /*kAlongRows=*/false);
      acc = mma.warpgroupMultiply(k.rowsOperand(t, x.array, s), b, acc, k.columns);
    }
    mma.commitWarpgroupMma();
    return acc;
  }

  SmallVector<Value> waitForAccumulators(Value t, ArrayRef<Value> arrays, int64_t pending,
                                         ArrayRef<Value> alsoWaited) override {
    SmallVector<Value> values;
    for (Value acc : arrays)
      llvm::append_range(values, k.loadAccumulators(t, acc, k.dimTiles));
    int64_t dims = values.size();
    llvm::append_range(values, alsoWaited);
    values = mma.waitForWarpgroupMma(values, pending);
    ArrayRef<Value> waited(values);
    int64_t size = dims / std::max<int64_t>(arrays.size(), 1);
    for (auto [i, acc] : llvm::enumerate(arrays))
      k.storeAccumulators(t, acc, waited.slice(i * size, size));
    return SmallVector<Value>(waited.drop_front(dims));
  }

  void accumulate(Value t, const MmaLane &lane, Value factors, Value tile, Value acc,
                  bool commit) override {
    assert(k.rowTiles == 1 && "a warp's 16 rows of a warpgroup's 64");
    SmallVector<Value> registers;
    for (int64_t ks = 0; ks < k.columnSteps; ++ks)
      llvm::append_range(registers, k.factorFragment(t, factors, 0, ks));
    int64_t aWords = registers.size();
    llvm::append_range(registers, k.loadAccumulators(t, acc, k.dimTiles));
    registers = mma.fenceForWarpgroupMma(registers);
    ArrayRef<Value> a(registers);
    SmallVector<Value> sums(a.drop_front(aWords));
    for (int64_t ks = 0; ks < k.columnSteps; ++ks)
      sums = mma.warpgroupMultiply(a.slice(ks * kAccumulators, kAccumulators),
                                   k.stepOperand(tile, ks, /*kAlongRows=*/true), sums, k.paddedDim);
    if (commit)
      mma.commitWarpgroupMma();
    k.storeAccumulators(t, acc, sums);
  }

  void fenceShared() override { mma.fenceSharedForWarpgroupMma(); }
};

class WarpgroupGemmOps : public GemmTensorCoreOps {
public:
  using GemmTensorCoreOps::GemmTensorCoreOps;

  /// One MMA per half of the block tile and 16 of K; the accumulators
  /// returned are those of MMAs still in flight.
  SmallVector<Value> multiplyStage(Value t, const MmaGemmKernel::Stage &stage, ArrayRef<Value> sums,
                                   function_ref<void()> copyNext) override {
    SmallVector<Value> result = mma.fenceForWarpgroupMma(sums);
    int64_t half = stage.tilesN * kAccumulators;
    for (int64_t step = 0; step < MmaGemmKernel::kDepth / MmaBuilder::kK; ++step) {
      int64_t k0 = step * MmaBuilder::kK;
      MmaBuilder::SharedOperand bOperand =
          stage.rhs.operand(kb, mma, stage.bTiles, stage.buffer, 0, k0);
      for (int64_t mi = 0; mi < stage.tilesM; ++mi) {
        SmallVector<Value> updated = mma.warpgroupMultiply(
            stage.lhs.operand(kb, mma, stage.aTiles, stage.buffer, mi * MmaBuilder::kWarpgroupRows,
                              k0),
            bOperand, ArrayRef<Value>(result).slice(mi * half, half), stage.tile);
        llvm::copy(updated, result.begin() + mi * half);
      }
    }
    mma.commitWarpgroupMma();
    copyNext();
    // At most this stage's MMAs in flight: the buffer of the one before
    // is free after the next barrier.
    mma.waitForWarpgroupMma(/*pending=*/1);
    return result;
  }

  void fenceShared() override { mma.fenceSharedForWarpgroupMma(); }

  void waitForLastStage(ThreadBlockBuilder &block, function_ref<SmallVector<Value>(Value)> loadSums,
                        function_ref<void(Value, ArrayRef<Value>)> storeSums) override {
    block.phase([&](Value t) { storeSums(t, mma.waitForWarpgroupMma(loadSums(t))); },
                /*barrier=*/false);
  }
};

} // namespace xfmr::gpu

std::unique_ptr<TensorCoreOps> xfmr::gpu::createWarpgroupMmaOps(MmaAttentionKernelBase &kernel) {
  return std::make_unique<WarpgroupMmaOps>(kernel);
}

std::unique_ptr<GemmTensorCoreOps> xfmr::gpu::createWarpgroupGemmOps(kernels::KernelBuilder &kb,
                                                                     MmaBuilder &mma) {
  return std::make_unique<WarpgroupGemmOps>(kb, mma);
}
