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
// of a warp - 8 rows at 4 consecutive words - hit 32 distinct banks.
//
// Fragment layouts (PTX ISA, mma.m16n8k16 with .bf16/.f16 operands): lane l
// has g = l / 4 and q = l % 4; A registers 0-3 hold rows g, g+8, g, g+8 at
// K words q, q, q+4, q+4; B registers 0-1 hold column g at K words q, q+4;
// accumulators 0-3 are (g, 2q), (g, 2q+1), (g+8, 2q), (g+8, 2q+1).
//
// When emulated, each thread computes its accumulators' dot products from
// the same shared words itself: the tiling, staging and epilogue are
// checked on the CPU, the fragment layouts only on a GPU.
//
//===----------------------------------------------------------------------===//

#include "GpuKernels.h"
#include "ThreadBlockBuilder.h"

#include "../LoweringUtils.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

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
constexpr int64_t kMmaM = 16, kMmaN = 8, kMmaK = 16;
constexpr int64_t kTilesM = kWarpTile / kMmaM;
constexpr int64_t kTilesN = kWarpTile / kMmaN;
constexpr int64_t kAccumulators = 4;

class MmaGemmKernel {
public:
  MmaGemmKernel(KernelBuilder &kb, Emulation emulate, const GemmProblem &p)
      : kb(kb), b(kb.builder()), loc(kb.location()), emulate(emulate), block(kb, emulate, kThreads),
        p(p), narrow(cast<MemRefType>(p.lhs.getType()).getElementType()) {}

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
  Value i32(int64_t value) { return arith::ConstantIntOp::create(b, loc, b.getI32Type(), value); }

  /// matrix[i][j] of a [rows, cols] matrix as its 16 bits, 0 outside it.
  Value bitsOrZero(Value matrix, Value i, Value j, int64_t rows, int64_t cols) {
    Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(narrow));
    Value value = loadInside(kb, matrix, i, j, rows, cols, zero);
    return arith::BitcastOp::create(b, loc, b.getI16Type(), value);
  }

  /// The word holding `low` in bits 0-15 and `high` in bits 16-31.
  Value pack(Value low, Value high) {
    Value lowWord = arith::ExtUIOp::create(b, loc, b.getI32Type(), low);
    Value highWord = arith::ExtUIOp::create(b, loc, b.getI32Type(), high);
    highWord = arith::ShLIOp::create(b, loc, highWord, i32(16));
    return arith::OrIOp::create(b, loc, lowWord, highWord);
  }

  /// The two elements of a word, widened to f32.
  std::pair<Value, Value> unpack(Value word) {
    auto half = [&](Value bits) {
      Value narrowBits = arith::TruncIOp::create(b, loc, b.getI16Type(), bits);
      Value value = arith::BitcastOp::create(b, loc, narrow, narrowBits);
      return arith::ExtFOp::create(b, loc, b.getF32Type(), value).getResult();
    };
    return {half(word), half(arith::ShRUIOp::create(b, loc, word, i32(16)))};
  }

  /// An MMA operand register from a shared word: bf16 pairs are i32,
  /// f16 pairs vector<2xf16>.
  Value operandRegister(Value word) {
    if (narrow.isBF16())
      return word;
    return LLVM::BitcastOp::create(b, loc, VectorType::get({2}, narrow), word);
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
    Value warp = kb.divui(t, kWarpSize), lane = kb.remui(t, kWarpSize);
    return {kb.muli(kb.divui(warp, 2), kWarpTile), kb.muli(kb.remui(warp, 2), kWarpTile),
            kb.divui(lane, 4), kb.remui(lane, 4)};
  }
  /// Row of the block tile of accumulator r of MMA tile row mi.
  Value accumulatorRow(const Lane &lane, int64_t mi, int64_t r) {
    return kb.addi(lane.warpRow, kb.addi(lane.group, kb.index(mi * kMmaM + (r / 2) * 8)));
  }
  Value accumulatorCol(const Lane &lane, int64_t ni, int64_t r) {
    return kb.addi(lane.warpCol, kb.addi(kb.muli(lane.inGroup, 2), kb.index(ni * kMmaN + r % 2)));
  }

  SmallVector<Value> multiplyOnTensorCores(const Lane &lane, Value aStage, Value bStage,
                                           ArrayRef<Value> sums) {
    SmallVector<Value> result(sums);
    Type f32 = b.getF32Type();
    auto resultType = LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
    NVVM::MMATypes type = narrow.isBF16() ? NVVM::MMATypes::bf16 : NVVM::MMATypes::f16;
    for (int64_t step = 0; step < kDepth / kMmaK; ++step) {
      auto word = [&](Value stageBuffer, Value row, int64_t offset) {
        Value column = kb.addi(lane.inGroup, kb.index(step * kMmaK / 2 + offset));
        return operandRegister(kb.load(stageBuffer, {row, column}));
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
          auto mma = NVVM::MmaOp::create(
              b, loc, resultType, aFragments[mi], bFragments[ni],
              ArrayRef<Value>(result).slice(first, kAccumulators),
              ArrayRef<int64_t>{kMmaM, kMmaN, kMmaK}, std::nullopt, std::nullopt,
              std::array<NVVM::MMATypes, 2>{type, type},
              std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row, NVVM::MMALayout::col});
          for (int64_t r = 0; r < kAccumulators; ++r)
            result[first + r] = LLVM::ExtractValueOp::create(b, loc, mma.getRes(), r);
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
                       auto [aLow, aHigh] = unpack(kb.load(aStage, {rows[i], w}));
                       auto [bLow, bHigh] = unpack(kb.load(bStage, {cols[i], w}));
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
          return pack(bitsOrZero(matrix, depth, i, p.k, extent),
                      bitsOrZero(matrix, next, i, p.k, extent));
        return pack(bitsOrZero(matrix, i, depth, extent, p.k),
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
  /// bf16 or f16.
  Type narrow;
};

} // namespace

Value xfmr::gpu::emitMmaGemm(KernelBuilder &kb, const GemmProblem &problem, Emulation emulate) {
  return MmaGemmKernel(kb, emulate, problem).emit();
}
