//===- GpuMmaSyncOps.cpp - tensor-core products by mma.sync ------*- C++ -*-===//
//
// The tensor-core operations of the attention and GEMM kernels on sm_80 and
// sm_90: each warp multiplies its 16-row tiles by mma.sync.m16n8k16, A from
// its registers or by ldmatrix from shared memory, B by ldmatrix
// (transposed for the head-dim updates and for factors staged along K). The
// MMAs complete as issued.
//
//===----------------------------------------------------------------------===//

#include "GpuMmaAttentionBase.h"
#include "GpuMmaGemmKernel.h"

using namespace mlir;
using namespace xfmr::gpu;

namespace xfmr::gpu {

class MmaSyncOps : public TensorCoreOps {
public:
  using TensorCoreOps::TensorCoreOps;

  SmallVector<Value> products(Value t, const MmaLane &lane, const RowFactor &x, Value tile,
                              function_ref<void()> whileMultiplying, Value pending) override {
    if (whileMultiplying)
      whileMultiplying();
    // B of column tile n at step s is T[8n + g][16 s + 2q, + 1] and
    // [16 s + 8 + 2q, + 1]: the 8 x 8 matrices of T's rows 8n at columns
    // 16 s and 16 s + 8, those of column tile n + 1 with them in one
    // ldmatrix (lane l addresses row l % 8 of matrix l / 8), each for every
    // row tile. One step at a time: a row tile's A fragment is live for
    // one step only.
    static_assert(kAccumulators == 4, "two column tiles per ldmatrix");
    assert(k.columnTiles % 2 == 0 && "tiles of columns in pairs");
    Value row = kb.addi(kb.remui(lane.lane, 8), kb.muli(kb.divui(lane.lane, 16), 8));
    Value colInStep = kb.muli(kb.remui(kb.divui(lane.lane, 8), 2), 8);
    SmallVector<Value> result(k.rowTiles * k.columnTiles * kAccumulators, kb.f32(0.0));
    for (int64_t s = 0; s < k.steps; ++s) {
      SmallVector<SmallVector<Value>> a;
      for (int64_t m = 0; m < k.rowTiles; ++m)
        a.push_back(rowFragment(t, lane, x, m, s));
      Value col = kb.addi(colInStep, kb.index(s * MmaBuilder::kK));
      for (int64_t n = 0; n < k.columnTiles; n += 2) {
        SmallVector<Value> bWords = mma.loadMatrices(
            tile, {kb.addi(row, kb.index(n * MmaBuilder::kN)), col}, 4, /*transposed=*/false);
        for (int64_t pair = 0; pair < 2; ++pair) {
          for (int64_t m = 0; m < k.rowTiles; ++m) {
            auto acc = MutableArrayRef<Value>(result).slice(
                k.accumulatorIndex(m, n + pair, 0, k.columnTiles), kAccumulators);
            SmallVector<Value> updated =
                mma.multiply(a[m], ArrayRef<Value>(bWords).slice(pair * 2, 2), acc);
            llvm::copy(updated, acc.begin());
          }
        }
      }
    }
    return result;
  }

  void accumulate(Value t, const MmaLane &lane, Value factors, Value tile, Value acc,
                  bool commit) override {
    SmallVector<Value> tileWords;
    for (int64_t ks = 0; ks < k.columnSteps; ++ks) {
      SmallVector<SmallVector<Value>> a;
      for (int64_t m = 0; m < k.rowTiles; ++m)
        a.push_back(k.factorFragment(t, factors, m, ks));
      // B of dim tile n is T[16 ks + 2q, + 1][8n + g] and the same 8 rows
      // on: the 8 x 8 matrices of T's rows 16 ks and 16 ks + 8 at column
      // 8n, transposed; two dim tiles per ldmatrix, each for every row
      // tile.
      Value row =
          kb.addi(kb.addi(kb.remui(lane.lane, 8), kb.muli(kb.remui(kb.divui(lane.lane, 8), 2), 8)),
                  kb.index(ks * MmaBuilder::kK));
      for (int64_t n = 0; n < k.dimTiles; ++n) {
        if (n % 2 == 0) {
          Value col = kb.addi(kb.muli(kb.divui(lane.lane, 16), 8), kb.index(n * MmaBuilder::kN));
          tileWords = mma.loadMatrices(tile, {row, col}, 4, /*transposed=*/true);
        }
        ArrayRef<Value> bWords = ArrayRef<Value>(tileWords).slice((n % 2) * 2, 2);
        for (int64_t m = 0; m < k.rowTiles; ++m) {
          int64_t i = k.tileIndex(m, n, k.dimTiles);
          SmallVector<Value> sums;
          for (int64_t r = 0; r < kAccumulators; ++r)
            sums.push_back(kb.load(acc, k.entry(t, i, r)));
          for (auto [r, updated] : llvm::enumerate(mma.multiply(a[m], bWords, sums)))
            kb.store(updated, acc, k.entry(t, i, r));
        }
      }
    }
  }

private:
  /// The A fragment of step `step` of row tile m of X.
  SmallVector<Value> rowFragment(Value t, const MmaLane &lane, const RowFactor &x, int64_t m,
                                 int64_t step) {
    if (x.shared) {
      // Lane l addresses row l % 16 of the row tile at column 16 step +
      // 8 (l / 16): the 8 x 8 matrices of rows 0-7 and 8-15 at columns
      // 0-7, then 8-15, are A registers 0-3.
      Value row =
          kb.addi(kb.addi(lane.warpRow, kb.remui(lane.lane, 16)), kb.index(m * MmaBuilder::kM));
      Value col = kb.addi(kb.muli(kb.divui(lane.lane, 16), 8), kb.index(step * MmaBuilder::kK));
      return mma.loadMatrices(x.array, {row, col}, 4, /*transposed=*/false);
    }
    SmallVector<Value> words;
    for (int64_t r = 0; r < kAccumulators; ++r)
      words.push_back(kb.load(x.array, k.entry(t, k.tileIndex(m, step, k.steps), r)));
    return words;
  }
};

class MmaSyncGemmOps : public GemmTensorCoreOps {
public:
  using GemmTensorCoreOps::GemmTensorCoreOps;

  SmallVector<Value> multiplyStage(Value t, const MmaGemmKernel::Stage &stage, ArrayRef<Value> sums,
                                   function_ref<void()> copyNext) override {
    copyNext();
    const MmaGemmKernel::Lane &lane = stage.lane;
    SmallVector<Value> result(sums);
    auto low = [&](Value i) { return kb.muli(kb.remui(i, 2), 8); };
    auto high = [&](Value i) { return kb.muli(kb.divui(i, 2), 8); };
    for (int64_t step = 0; step < MmaGemmKernel::kDepth / MmaBuilder::kK; ++step) {
      Value k0 = kb.index(step * MmaBuilder::kK);
      // A registers 0-3: rows 0-7 and 8-15 at K 0-7, then at K 8-15.
      SmallVector<SmallVector<Value>> aFragments, bFragments;
      for (int64_t mi = 0; mi < stage.tilesM; ++mi)
        aFragments.push_back(fragments(lane, stage.lhs, stage.aTiles, stage.buffer,
                                       kb.addi(lane.warpRow, kb.index(mi * MmaBuilder::kM)), k0,
                                       low, high));
      // B registers 0-1 of a column tile: K 0-7, 8-15; two tiles per load.
      for (int64_t ni = 0; ni < stage.tilesN; ni += 2) {
        SmallVector<Value> words =
            fragments(lane, stage.rhs, stage.bTiles, stage.buffer,
                      kb.addi(lane.warpCol, kb.index(ni * MmaBuilder::kN)), k0, high, low);
        bFragments.push_back({words[0], words[1]});
        bFragments.push_back({words[2], words[3]});
      }
      for (int64_t mi = 0; mi < stage.tilesM; ++mi) {
        for (int64_t ni = 0; ni < stage.tilesN; ++ni) {
          int64_t first = (mi * stage.tilesN + ni) * kAccumulators;
          SmallVector<Value> updated = mma.multiply(
              aFragments[mi], bFragments[ni], ArrayRef<Value>(result).slice(first, kAccumulators));
          llvm::copy(updated, result.begin() + first);
        }
      }
    }
    return result;
  }

private:
  /// The words of fragments of factor f at (mn0, k0) of a buffer, 16 x 16
  /// along (M or N, K): four 8 x 8 matrices, matrix i at (mnOffset(i),
  /// kOffset(i)) from there.
  SmallVector<Value> fragments(const MmaGemmKernel::Lane &lane, const MmaGemmKernel::Factor &f,
                               Value tiles, Value buffer, Value mn0, Value k0,
                               function_ref<Value(Value)> mnOffset,
                               function_ref<Value(Value)> kOffset) {
    Value matrix = kb.divui(lane.lane, 8), matrixRow = kb.remui(lane.lane, 8);
    Value mn = kb.addi(mn0, mnOffset(matrix)), kIndex = kb.addi(k0, kOffset(matrix));
    // Lane l addresses row l % 8 of its matrix: along K in a [K, M|N] tile.
    if (f.kRows)
      kIndex = kb.addi(kIndex, matrixRow);
    else
      mn = kb.addi(mn, matrixRow);
    return mma.loadMatrices(tiles, f.atMnK(mma, buffer, mn, kIndex), 4, /*transposed=*/f.kRows);
  }
};

} // namespace xfmr::gpu

std::unique_ptr<TensorCoreOps> xfmr::gpu::createMmaSyncOps(MmaAttentionKernelBase &kernel) {
  return std::make_unique<MmaSyncOps>(kernel);
}

std::unique_ptr<GemmTensorCoreOps> xfmr::gpu::createMmaSyncGemmOps(kernels::KernelBuilder &kb,
                                                                   MmaBuilder &mma) {
  return std::make_unique<MmaSyncGemmOps>(kb, mma);
}
