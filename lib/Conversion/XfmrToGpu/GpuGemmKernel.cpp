//===- GpuGemmKernel.cpp - shared-memory tiled GEMM for GPUs ------*- C++ -*-===//
//
// C = epilogue(A B), f32 on CUDA cores. A block computes a 64 x 64 tile of
// C with 16 x 16 threads, each a 4 x 4 register tile whose rows and columns
// are 16 apart (so that a warp's stores of C are contiguous and its reads
// of B from shared memory hit distinct banks):
//
//   acc = 0
//   for each stage of 16 along K:
//     A[64 x 16], B[16 x 64] -> shared (4 elements per thread, coalesced
//                                       along whichever dimension is
//                                       contiguous, 0 past the edges)
//     barrier
//     acc += A_stage B_stage       16 rank-1 updates from shared memory
//     barrier
//   C = activation(acc + bias) + residual   where inside C
//
//===----------------------------------------------------------------------===//

#include "GpuKernels.h"
#include "ThreadBlockBuilder.h"

#include "../LoweringUtils.h"

using namespace mlir;
using namespace xfmr;
using namespace xfmr::cpu;
using namespace xfmr::gpu;

namespace {

constexpr int64_t kTile = 64;
constexpr int64_t kDepth = 16;
constexpr int64_t kThreadsPerSide = 16;
constexpr int64_t kThreads = kThreadsPerSide * kThreadsPerSide;
constexpr int64_t kPerThread = kTile / kThreadsPerSide;
/// Shared rows are one longer than a tile: a warp's transposing stores
/// (16 depths of one row) then fall in 16 different banks.
constexpr int64_t kSharedRow = kTile + 1;

class GemmKernel {
public:
  GemmKernel(KernelBuilder &kb, Emulation emulate, const GemmProblem &p)
      : kb(kb), b(kb.builder()), loc(kb.location()), block(kb, emulate, kThreads), p(p) {}

  Value emit() {
    SmallVector<int64_t> stageShape = {kDepth, kSharedRow};
    block.forEachBlock(
        {llvm::divideCeilSigned(p.n, kTile), llvm::divideCeilSigned(p.m, kTile), 1},
        {stageShape, stageShape}, [&](std::array<Value, 3> ids, ArrayRef<Value> shared) {
          emitBlock(kb.muli(ids[1], kTile), kb.muli(ids[0], kTile), shared[0], shared[1]);
        });
    return kb.asTensor(p.out);
  }

private:
  /// matrix[i][j] of a [rows, cols] matrix, 0 outside it.
  Value loadOrZero(Value matrix, Value i, Value j, int64_t rows, int64_t cols) {
    return loadInside(kb, matrix, i, j, rows, cols, kb.f32(0.0));
  }

  void emitBlock(Value row0, Value col0, Value aStage, Value bStage) {
    Value acc = block.privateArray({kPerThread, kPerThread});
    auto forEachOutput = [&](function_ref<void(int64_t, int64_t)> body) {
      for (int64_t i = 0; i < kPerThread; ++i)
        for (int64_t j = 0; j < kPerThread; ++j)
          body(i, j);
    };
    // Each thread writes only its own accumulators: no barrier.
    block.phase(
        [&](Value t) {
          forEachOutput([&](int64_t i, int64_t j) {
            kb.store(kb.f32(0.0), acc, block.at(t, {kb.index(i), kb.index(j)}));
          });
        },
        /*barrier=*/false);

    kb.forLoop(kb.index(0), kb.index(llvm::divideCeilSigned(p.k, kDepth)), 1, [&](Value stage) {
      Value k0 = kb.muli(stage, kDepth);
      block.phase([&](Value t) { emitStageLoad(t, row0, col0, k0, aStage, bStage); });
      block.phase([&](Value t) {
        Value threadRow = kb.divui(t, kThreadsPerSide), threadCol = kb.remui(t, kThreadsPerSide);
        SmallVector<Value> sums;
        forEachOutput([&](int64_t i, int64_t j) {
          sums.push_back(kb.load(acc, block.at(t, {kb.index(i), kb.index(j)})));
        });
        ValueRange updated =
            kb.forLoop(kb.index(0), kb.index(kDepth), 1, sums,
                       [&](Value depth, ValueRange carried) -> SmallVector<Value> {
                         SmallVector<Value> as, bs, next;
                         for (int64_t i = 0; i < kPerThread; ++i) {
                           Value offset = kb.index(i * kThreadsPerSide);
                           as.push_back(kb.load(aStage, {depth, kb.addi(threadRow, offset)}));
                           bs.push_back(kb.load(bStage, {depth, kb.addi(threadCol, offset)}));
                         }
                         forEachOutput([&](int64_t i, int64_t j) {
                           next.push_back(kb.fma(as[i], bs[j], carried[i * kPerThread + j]));
                         });
                         return next;
                       });
        forEachOutput([&](int64_t i, int64_t j) {
          kb.store(updated[i * kPerThread + j], acc, block.at(t, {kb.index(i), kb.index(j)}));
        });
      });
    });

    block.phase(
        [&](Value t) {
          Value threadRow = kb.divui(t, kThreadsPerSide), threadCol = kb.remui(t, kThreadsPerSide);
          forEachOutput([&](int64_t i, int64_t j) {
            Value row = kb.addi(row0, kb.addi(threadRow, kb.index(i * kThreadsPerSide)));
            Value col = kb.addi(col0, kb.addi(threadCol, kb.index(j * kThreadsPerSide)));
            p.store(kb, kb.load(acc, block.at(t, {kb.index(i), kb.index(j)})), row, col);
          });
        },
        /*barrier=*/false);
  }

  /// Thread t's share of the stage at k0: A[row0.., k0..] into
  /// aStage[depth][row] and B[k0.., col0..] into bStage[depth][col].
  /// Consecutive threads take consecutive elements along the contiguous
  /// dimension of each operand.
  void emitStageLoad(Value t, Value row0, Value col0, Value k0, Value aStage, Value bStage) {
    for (int64_t r = 0; r < kTile * kDepth / kThreads; ++r) {
      Value element = kb.addi(t, kb.index(r * kThreads));
      // [i, depth] of a tile x depth operand (A, or B^T), or of a
      // depth x tile one (A^T, or B).
      auto tileMajor = [&] {
        return std::pair(kb.divui(element, kDepth), kb.remui(element, kDepth));
      };
      auto depthMajor = [&] {
        return std::pair(kb.remui(element, kTile), kb.divui(element, kTile));
      };

      auto [row, aDepth] = p.transposeA ? depthMajor() : tileMajor();
      Value i = kb.addi(row0, row), depthA = kb.addi(k0, aDepth);
      Value aValue = p.transposeA ? loadOrZero(p.lhs, depthA, i, p.k, p.m)
                                  : loadOrZero(p.lhs, i, depthA, p.m, p.k);
      kb.store(aValue, aStage, {aDepth, row});

      auto [col, bDepth] = p.transposeB ? tileMajor() : depthMajor();
      Value j = kb.addi(col0, col), depthB = kb.addi(k0, bDepth);
      Value bValue = p.transposeB ? loadOrZero(p.rhs, j, depthB, p.n, p.k)
                                  : loadOrZero(p.rhs, depthB, j, p.k, p.n);
      kb.store(bValue, bStage, {bDepth, col});
    }
  }

  KernelBuilder &kb;
  OpBuilder &b;
  Location loc;
  ThreadBlockBuilder block;
  const GemmProblem &p;
};

} // namespace

GemmProblem::GemmProblem(KernelBuilder &kb, Value a, bool transposeA, Value b, bool transposeB,
                         Value bias, Value residual, Activation activation, Type resultType)
    : lhs(kb.readBuffer(a)), rhs(kb.readBuffer(b)), bias(bias ? kb.readBuffer(bias) : Value()),
      residual(residual ? kb.readBuffer(residual) : Value()), transposeA(transposeA),
      transposeB(transposeB), activation(activation) {
  auto aType = cast<RankedTensorType>(a.getType());
  m = aType.getDimSize(transposeA ? 1 : 0);
  k = aType.getDimSize(transposeA ? 0 : 1);
  n = cast<RankedTensorType>(b.getType()).getDimSize(transposeB ? 0 : 1);
  out = kb.allocate({m, n}, resultType);
}

void GemmProblem::store(KernelBuilder &kb, Value sum, Value row, Value col) const {
  kb.ifThen(insideMatrix(kb, row, col, m, n), [&] {
    Value value = bias ? kb.add(sum, kb.loadWidened(bias, {col})) : sum;
    value = lowering::buildActivation(kb.builder(), kb.location(), activation, value);
    if (residual)
      value = kb.add(value, kb.loadWidened(residual, {row, col}));
    kb.storeRounded(value, out, {row, col});
  });
}

Value xfmr::gpu::insideMatrix(KernelBuilder &kb, Value i, Value j, int64_t rows, int64_t cols) {
  return arith::AndIOp::create(kb.builder(), kb.location(), kb.below(i, rows), kb.below(j, cols));
}

Value xfmr::gpu::loadInside(KernelBuilder &kb, Value matrix, Value i, Value j, int64_t rows,
                            int64_t cols, Value outside) {
  Value value = kb.load(matrix, {kb.mini(i, kb.index(rows - 1)), kb.mini(j, kb.index(cols - 1))});
  return kb.select(insideMatrix(kb, i, j, rows, cols), value, outside);
}

Value xfmr::gpu::emitGemm(KernelBuilder &kb, const GemmProblem &problem, Emulation emulate) {
  return GemmKernel(kb, emulate, problem).emit();
}
