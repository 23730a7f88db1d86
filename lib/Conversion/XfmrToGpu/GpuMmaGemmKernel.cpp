//===- GpuMmaGemmKernel.cpp - bf16/f16 GEMM on tensor cores -----*- C++ -*-===//
//
// C = epilogue(A B) for bf16 or f16 A and B, accumulated in f32 by the
// warp-wide `mma.sync.m16n8k16` of sm_80 and later. A block computes a
// 64 x 64 tile of C with 4 warps, each a 32 x 32 quarter: 2 x 4 MMA tiles
// of 16 x 8, 32 f32 accumulators per thread.
//
//   acc = 0
//   for each stage of 32 along K:
//     A[64 x 32], B^T[64 x 32] -> shared, as 32-bit words that each hold two
//                                 consecutive K elements (the MMA operand
//                                 registers), 0 past the edges
//     barrier
//     2 steps of 16 along K: each warp loads its A and B fragments from
//     shared memory and issues 2 x 4 MMAs
//     barrier
//   C = activation(acc + bias) + residual   where inside C
//
// Shared rows are 20 words (16 + 4 of padding), so that the fragment loads
// of a warp - 8 rows at 4 consecutive words - hit 32 distinct banks. The
// fragment layouts are those of GpuMma.h.
//
// When emulated, each thread computes its accumulators' dot products from
// the same shared words itself: the tiling, staging and epilogue are
// checked on the CPU, the fragment layouts only on a GPU.
//
//===----------------------------------------------------------------------===//

#include "GpuKernels.h"
#include "GpuMma.h"
#include "ThreadBlockBuilder.h"

using namespace mlir;
using namespace xfmr;
using namespace xfmr::cpu;
using namespace xfmr::gpu;

namespace {

constexpr int64_t kTile = 64;
constexpr int64_t kDepth = 32;
constexpr int64_t kWords = kDepth / 2;
constexpr int64_t kSharedRow = kWords + 4;
constexpr int64_t kWarpSize = 32;
constexpr int64_t kThreads = 4 * kWarpSize;
constexpr int64_t kWarpTile = 32;
constexpr int64_t kMmaM = MmaBuilder::kM, kMmaN = MmaBuilder::kN, kMmaK = MmaBuilder::kK;
constexpr int64_t kTilesM = kWarpTile / kMmaM;
constexpr int64_t kTilesN = kWarpTile / kMmaN;
constexpr int64_t kAccumulators = MmaBuilder::kAccumulators;

class MmaGemmKernel {
public:
  MmaGemmKernel(KernelBuilder &kb, Emulation emulate, const GemmProblem &p)
      : kb(kb), b(kb.builder()), loc(kb.location()), emulate(emulate), block(kb, emulate, kThreads),
        p(p), mma(kb, cast<MemRefType>(p.lhs.getType()).getElementType()) {}

  Value emit() {
    SmallVector<int64_t> stageShape = {kTile, kSharedRow};
    Type i32 = b.getI32Type();
    block.forEachBlock({llvm::divideCeilSigned(p.n, kTile), llvm::divideCeilSigned(p.m, kTile), 1},
                       {stageShape, stageShape},
                       [&](std::array<Value, 3> ids, ArrayRef<Value> shared) {
                         emitBlock(kb.muli(ids[1], kTile), kb.muli(ids[0], kTile), shared[0],
                                   shared[1]);
                       },
                       {i32, i32});
    return kb.asTensor(p.out);
  }

private:
  /// matrix[i][j] of a [rows, cols] matrix as its 16 bits, 0 outside it.
  Value bitsOrZero(Value matrix, Value i, Value j, int64_t rows, int64_t cols) {
    Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(mma.narrowType()));
    return mma.bits(loadInside(kb, matrix, i, j, rows, cols, zero));
  }

  void emitBlock(Value row0, Value col0, Value aStage, Value bStage) {
    Value acc = block.privateArray({kTilesM, kTilesN, kAccumulators});
    auto forEachAccumulator = [&](function_ref<void(int64_t, int64_t, int64_t)> body) {
      for (int64_t mi = 0; mi < kTilesM; ++mi)
        for (int64_t ni = 0; ni < kTilesN; ++ni)
          for (int64_t r = 0; r < kAccumulators; ++r)
            body(mi, ni, r);
    };
    auto accIndices = [&](Value t, int64_t mi, int64_t ni, int64_t r) {
      return block.at(t, {kb.index(mi), kb.index(ni), kb.index(r)});
    };
    // Each thread writes only its own accumulators: no barrier.
    block.phase(
        [&](Value t) {
          forEachAccumulator([&](int64_t mi, int64_t ni, int64_t r) {
            kb.store(kb.f32(0.0), acc, accIndices(t, mi, ni, r));
          });
        },
        /*barrier=*/false);

    kb.forLoop(kb.index(0), kb.index(llvm::divideCeilSigned(p.k, kDepth)), 1, [&](Value stage) {
      Value k0 = kb.muli(stage, kDepth);
      block.phase([&](Value t) { emitStageLoad(t, row0, col0, k0, aStage, bStage); });
      block.phase([&](Value t) {
        SmallVector<Value> sums;
        forEachAccumulator([&](int64_t mi, int64_t ni, int64_t r) {
          sums.push_back(kb.load(acc, accIndices(t, mi, ni, r)));
        });
        Lane lane = laneOf(t);
        SmallVector<Value> updated = emulate == Emulation::None
                                         ? multiplyOnTensorCores(lane, aStage, bStage, sums)
                                         : multiplyEmulated(lane, aStage, bStage, sums);
        int64_t i = 0;
        forEachAccumulator([&](int64_t mi, int64_t ni, int64_t r) {
          kb.store(updated[i++], acc, accIndices(t, mi, ni, r));
        });
      });
    });

    block.phase(
        [&](Value t) {
          Lane lane = laneOf(t);
          forEachAccumulator([&](int64_t mi, int64_t ni, int64_t r) {
            Value row = kb.addi(row0, accumulatorRow(lane, mi, r));
            Value col = kb.addi(col0, accumulatorCol(lane, ni, r));
            p.store(kb, kb.load(acc, accIndices(t, mi, ni, r)), row, col);
          });
        },
        /*barrier=*/false);
  }

  /// A thread's place in the block: the first row and column of its warp's
  /// 32 x 32 quarter, and its lane's group g and index q in the group.
  struct Lane {
    Value warpRow, warpCol, group, inGroup;
  };
  Lane laneOf(Value t) {
    Value warp = kb.divui(t, kWarpSize);
    auto [group, inGroup] = mma.laneCoordinates(kb.remui(t, kWarpSize));
    return {kb.muli(kb.divui(warp, 2), kWarpTile), kb.muli(kb.remui(warp, 2), kWarpTile), group,
            inGroup};
  }
  /// Row of the block tile of accumulator r of MMA tile row mi.
  Value accumulatorRow(const Lane &lane, int64_t mi, int64_t r) {
    return kb.addi(lane.warpRow, kb.addi(mma.accumulatorRow(lane.group, r), kb.index(mi * kMmaM)));
  }
  Value accumulatorCol(const Lane &lane, int64_t ni, int64_t r) {
    return kb.addi(lane.warpCol,
                   kb.addi(mma.accumulatorCol(lane.inGroup, r), kb.index(ni * kMmaN)));
  }

  SmallVector<Value> multiplyOnTensorCores(const Lane &lane, Value aStage, Value bStage,
                                           ArrayRef<Value> sums) {
    SmallVector<Value> result(sums);
    for (int64_t step = 0; step < kDepth / kMmaK; ++step) {
      auto word = [&](Value stageBuffer, Value row, int64_t offset) {
        Value column = kb.addi(lane.inGroup, kb.index(step * kMmaK / 2 + offset));
        return kb.load(stageBuffer, {row, column});
      };
      SmallVector<SmallVector<Value>> aFragments, bFragments;
      for (int64_t mi = 0; mi < kTilesM; ++mi) {
        Value top = kb.addi(lane.warpRow, kb.addi(lane.group, kb.index(mi * kMmaM)));
        Value bottom = kb.addi(top, kb.index(8));
        aFragments.push_back({word(aStage, top, 0), word(aStage, bottom, 0), word(aStage, top, 4),
                              word(aStage, bottom, 4)});
      }
      for (int64_t ni = 0; ni < kTilesN; ++ni) {
        Value col = kb.addi(lane.warpCol, kb.addi(lane.group, kb.index(ni * kMmaN)));
        bFragments.push_back({word(bStage, col, 0), word(bStage, col, 4)});
      }
      for (int64_t mi = 0; mi < kTilesM; ++mi) {
        for (int64_t ni = 0; ni < kTilesN; ++ni) {
          int64_t first = (mi * kTilesN + ni) * kAccumulators;
          SmallVector<Value> updated = mma.multiply(
              aFragments[mi], bFragments[ni], ArrayRef<Value>(result).slice(first, kAccumulators));
          llvm::copy(updated, result.begin() + first);
        }
      }
    }
    return result;
  }

  SmallVector<Value> multiplyEmulated(const Lane &lane, Value aStage, Value bStage,
                                      ArrayRef<Value> sums) {
    SmallVector<Value> rows, cols;
    for (int64_t mi = 0; mi < kTilesM; ++mi)
      for (int64_t ni = 0; ni < kTilesN; ++ni)
        for (int64_t r = 0; r < kAccumulators; ++r) {
          rows.push_back(accumulatorRow(lane, mi, r));
          cols.push_back(accumulatorCol(lane, ni, r));
        }
    ValueRange updated =
        kb.forLoop(kb.index(0), kb.index(kWords), 1, sums,
                   [&](Value w, ValueRange carried) -> SmallVector<Value> {
                     SmallVector<Value> next;
                     for (auto [i, sum] : llvm::enumerate(carried)) {
                       auto [aLow, aHigh] = mma.unpack(kb.load(aStage, {rows[i], w}));
                       auto [bLow, bHigh] = mma.unpack(kb.load(bStage, {cols[i], w}));
                       next.push_back(kb.fma(aHigh, bHigh, kb.fma(aLow, bLow, sum)));
                     }
                     return next;
                   });
    return SmallVector<Value>(updated);
  }

  /// Thread t's share of the stage at k0: the words of A[row0.., k0..] into
  /// aStage[row][word] and of B[k0.., col0..] into bStage[col][word].
  /// Consecutive threads take consecutive words along K where K is the
  /// contiguous dimension of an operand, else consecutive rows/columns.
  void emitStageLoad(Value t, Value row0, Value col0, Value k0, Value aStage, Value bStage) {
    for (int64_t r = 0; r < kTile * kWords / kThreads; ++r) {
      Value word = kb.addi(t, kb.index(r * kThreads));
      auto alongK = [&] { return std::pair(kb.divui(word, kWords), kb.remui(word, kWords)); };
      auto acrossK = [&] { return std::pair(kb.remui(word, kTile), kb.divui(word, kTile)); };
      // Elements (i, k0 + 2w) and (i, k0 + 2w + 1) of a tile x depth
      // operand, or their transposes.
      auto load = [&](Value matrix, bool kMajor, Value i, Value w, int64_t extent) {
        Value depth = kb.addi(k0, kb.muli(w, 2));
        Value next = kb.addi(depth, kb.index(1));
        if (kMajor)
          return mma.pack(bitsOrZero(matrix, depth, i, p.k, extent),
                          bitsOrZero(matrix, next, i, p.k, extent));
        return mma.pack(bitsOrZero(matrix, i, depth, extent, p.k),
                        bitsOrZero(matrix, i, next, extent, p.k));
      };

      auto [row, aWord] = p.transposeA ? acrossK() : alongK();
      kb.store(load(p.lhs, p.transposeA, kb.addi(row0, row), aWord, p.m), aStage, {row, aWord});
      auto [col, bWord] = p.transposeB ? alongK() : acrossK();
      kb.store(load(p.rhs, !p.transposeB, kb.addi(col0, col), bWord, p.n), bStage, {col, bWord});
    }
  }

  KernelBuilder &kb;
  OpBuilder &b;
  Location loc;
  Emulation emulate;
  ThreadBlockBuilder block;
  const GemmProblem &p;
  MmaBuilder mma;
};

} // namespace

Value xfmr::gpu::emitMmaGemm(KernelBuilder &kb, const GemmProblem &problem, Emulation emulate) {
  return MmaGemmKernel(kb, emulate, problem).emit();
}
