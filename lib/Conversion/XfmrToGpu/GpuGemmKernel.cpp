//===- GpuGemmKernel.cpp - shared-memory tiled GEMM for GPUs ------*- C++ -*-===//
//
// C = epilogue(A B), f32 on CUDA cores. A block of 16 x 16 threads computes
// a square tile of C: 128 x 128 where the problem has enough such tiles to
// occupy a GPU, else 64 x 64. Each thread holds an 8 x 8 (4 x 4) register
// tile: groups of 4 consecutive rows and columns, 64 apart, so that per
// step of K it reads each factor's 4 values of a group by one 16-byte
// shared-memory load (4 of them for 64 FMAs at 128 x 128):
//
//   stage 0 -> registers -> shared buffer 0; barrier
//   for each stage s of `depth` along K (8, or 16 for 64 x 64 tiles):
//     load stage s + 1 into registers (its latency hidden by the products)
//     acc += A_s B_s      `depth` rank-1 updates from shared buffer s % 2
//     store the registers into shared buffer (s + 1) % 2; barrier
//   C = activation(acc + bias) + residual   where inside C
//
// Both factors are staged with K as their rows ([depth, tile]), 4 elements
// of each a thread, consecutive threads taking consecutive elements along
// the factor's contiguous dimension (coalesced loads, 0 past the edges).
// Shared rows are 4 longer than a tile, which keeps them 16-byte aligned and
// spreads the transposing stores (of A, or of B^T) over distinct banks.
//
//===----------------------------------------------------------------------===//

#include "GpuKernels.h"
#include "ThreadBlockBuilder.h"

#include "../LoweringUtils.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace xfmr;
using namespace xfmr::kernels;
using namespace xfmr::gpu;

namespace {

constexpr int64_t kThreadsPerSide = 16;
constexpr int64_t kThreads = kThreadsPerSide * kThreadsPerSide;
/// Consecutive rows (columns) of a thread's group, read by one shared load.
constexpr int64_t kGroup = 4;
/// Elements of each factor a thread stages per stage.
constexpr int64_t kStagedPerThread = 4;
constexpr int64_t kPadding = 4;

class GemmKernel {
public:
  GemmKernel(KernelBuilder &kb, Emulation emulate, const GemmProblem &p)
      : kb(kb), b(kb.builder()), loc(kb.location()), tile(p.tile()),
        depth(kStagedPerThread * kThreads / tile), groups(tile / kThreadsPerSide / kGroup),
        block(kb, emulate, kThreads), p(p) {}

  Value emit() {
    SmallVector<int64_t> stageShape = {2, depth, tile + kPadding};
    block.forEachBlock(
        {llvm::divideCeilSigned(p.n, tile), llvm::divideCeilSigned(p.m, tile), 1},
        {stageShape, stageShape}, [&](std::array<Value, 3> ids, ArrayRef<Value> shared) {
          emitBlock(kb.muli(ids[1], tile), kb.muli(ids[0], tile), shared[0], shared[1]);
        });
    return kb.asTensor(p.out);
  }

private:
  int64_t perThread() const { return groups * kGroup; }
  /// Row (column) of the block tile of a thread's output i along it, the
  /// thread being `index` along that side.
  Value outputAt(Value index, int64_t i) {
    return kb.addi(kb.muli(index, kGroup),
                   kb.index(i / kGroup * kGroup * kThreadsPerSide + i % kGroup));
  }
  void forEachOutput(function_ref<void(int64_t, int64_t)> body) {
    for (int64_t i = 0; i < perThread(); ++i)
      for (int64_t j = 0; j < perThread(); ++j)
        body(i, j);
  }

  void emitBlock(Value row0, Value col0, Value aStages, Value bStages) {
    Value acc = block.privateArray({perThread(), perThread()});
    auto accAt = [&](Value t, int64_t i, int64_t j) {
      return block.at(t, {kb.index(i), kb.index(j)});
    };
    Value aAhead = block.privateArray({kStagedPerThread});
    Value bAhead = block.privateArray({kStagedPerThread});
    auto loadAhead = [&](Value t, Value k0) {
      loadStage(t, /*lhs=*/true, row0, k0, aAhead);
      loadStage(t, /*lhs=*/false, col0, k0, bAhead);
    };
    auto storeAhead = [&](Value t, Value buffer) {
      storeStage(t, /*lhs=*/true, aAhead, aStages, buffer);
      storeStage(t, /*lhs=*/false, bAhead, bStages, buffer);
    };
    block.phase([&](Value t) {
      forEachOutput([&](int64_t i, int64_t j) { kb.store(kb.f32(0.0), acc, accAt(t, i, j)); });
      loadAhead(t, kb.index(0));
      storeAhead(t, kb.index(0));
    });

    int64_t stages = llvm::divideCeilSigned(p.k, depth);
    kb.forLoop(kb.index(0), kb.index(stages), 1, [&](Value stage) {
      Value next = kb.addi(stage, kb.index(1));
      Value hasNext = kb.below(next, stages);
      block.phase([&](Value t) {
        kb.ifThen(hasNext, [&] { loadAhead(t, kb.muli(next, depth)); });
        Value threadRow = kb.divui(t, kThreadsPerSide), threadCol = kb.remui(t, kThreadsPerSide);
        Value buffer = kb.remui(stage, 2);
        SmallVector<Value> sums;
        forEachOutput([&](int64_t i, int64_t j) { sums.push_back(kb.load(acc, accAt(t, i, j))); });
        // Unrolled: each step's shared loads can be issued during the
        // previous step's FMAs.
        for (int64_t k = 0; k < depth; ++k) {
          SmallVector<Value> as = groupValues(aStages, buffer, kb.index(k), threadRow);
          SmallVector<Value> bs = groupValues(bStages, buffer, kb.index(k), threadCol);
          forEachOutput([&](int64_t i, int64_t j) {
            Value &sum = sums[i * perThread() + j];
            sum = kb.fma(as[i], bs[j], sum);
          });
        }
        forEachOutput([&](int64_t i, int64_t j) {
          kb.store(sums[i * perThread() + j], acc, accAt(t, i, j));
        });
        kb.ifThen(hasNext, [&] { storeAhead(t, kb.remui(next, 2)); });
      });
    });

    block.phase(
        [&](Value t) {
          Value threadRow = kb.divui(t, kThreadsPerSide), threadCol = kb.remui(t, kThreadsPerSide);
          forEachOutput([&](int64_t i, int64_t j) {
            Value row = kb.addi(row0, outputAt(threadRow, i));
            Value col = kb.addi(col0, outputAt(threadCol, j));
            p.store(kb, kb.load(acc, accAt(t, i, j)), row, col);
          });
        },
        /*barrier=*/false);
  }

  /// The values at step k of the stage in buffer `buffer` of a thread
  /// `index` along the stage's side: one 16-byte load per group.
  SmallVector<Value> groupValues(Value stages, Value buffer, Value k, Value index) {
    auto type = VectorType::get({kGroup}, b.getF32Type());
    SmallVector<Value> values;
    for (int64_t g = 0; g < groups; ++g) {
      Value group = vector::LoadOp::create(b, loc, type, stages,
                                           ValueRange{buffer, k, outputAt(index, g * kGroup)},
                                           /*nontemporal=*/false, llvm::Align(4 * kGroup));
      for (int64_t e = 0; e < kGroup; ++e)
        values.push_back(vector::ExtractOp::create(b, loc, group, e));
    }
    return values;
  }

  /// Calls `body(slot, mn, k)` for thread t's staged elements of the lhs
  /// (A) or rhs (B) factor: element (mn, k) of its stage, mn along M (A)
  /// or N (B). Consecutive threads take consecutive elements along the
  /// factor's contiguous dimension.
  void forEachStaged(Value t, bool lhs, function_ref<void(int64_t, Value, Value)> body) {
    for (int64_t slot = 0; slot < kStagedPerThread; ++slot) {
      Value element = kb.addi(t, kb.index(slot * kThreads));
      if (kOuter(lhs))
        body(slot, kb.remui(element, tile), kb.divui(element, tile));
      else
        body(slot, kb.divui(element, depth), kb.remui(element, depth));
    }
  }

  /// Whether K is the outer dimension of the lhs (A) or rhs (B) factor as
  /// it lies in memory: [K, M] or [K, N] rather than [M, K] or [N, K].
  bool kOuter(bool lhs) const { return lhs ? p.transposeA : !p.transposeB; }

  /// Thread t's elements of a factor's stage at k0 (0 outside the matrix)
  /// into its private `ahead`.
  void loadStage(Value t, bool lhs, Value mn0, Value k0, Value ahead) {
    forEachStaged(t, lhs, [&](int64_t slot, Value mn, Value k) {
      Value i = kb.addi(mn0, mn), depthIndex = kb.addi(k0, k);
      Value matrix = lhs ? p.lhs : p.rhs, zero = kb.f32(0.0);
      int64_t extent = lhs ? p.m : p.n;
      Value value = kOuter(lhs) ? loadInside(kb, matrix, depthIndex, i, p.k, extent, zero)
                                : loadInside(kb, matrix, i, depthIndex, extent, p.k, zero);
      kb.store(value, ahead, block.at(t, {kb.index(slot)}));
    });
  }

  /// ... and from it into shared buffer `buffer` of the factor's `stages`.
  void storeStage(Value t, bool lhs, Value ahead, Value stages, Value buffer) {
    forEachStaged(t, lhs, [&](int64_t slot, Value mn, Value k) {
      kb.store(kb.load(ahead, block.at(t, {kb.index(slot)})), stages, {buffer, k, mn});
    });
  }

  KernelBuilder &kb;
  OpBuilder &b;
  Location loc;
  /// The block tile's rows (and columns), the stages' depth along K, and
  /// the groups of a thread's outputs along each side.
  int64_t tile, depth, groups;
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

/// activation(sum + bias[col]) + residual[row][col].
static Value epilogue(KernelBuilder &kb, const GemmProblem &p, Value sum, Value row, Value col) {
  Value value = p.bias ? kb.add(sum, kb.loadWidened(p.bias, {col})) : sum;
  value = lowering::buildActivation(kb.builder(), kb.location(), p.activation, value);
  if (p.residual)
    value = kb.add(value, kb.loadWidened(p.residual, {row, col}));
  return value;
}

void GemmProblem::store(KernelBuilder &kb, Value sum, Value row, Value col) const {
  kb.ifThen(insideMatrix(kb, row, col, m, n), [&] {
    kb.storeRounded(epilogue(kb, *this, sum, row, col), out, {row, col});
  });
}

void GemmProblem::storePair(KernelBuilder &kb, Value sum, Value nextSum, Value row,
                            Value col) const {
  Value nextCol = kb.addi(col, kb.index(1));
  if (n % 2 != 0) {
    store(kb, sum, row, col);
    store(kb, nextSum, row, nextCol);
    return;
  }
  kb.ifThen(insideMatrix(kb, row, col, m, n), [&] {
    OpBuilder &b = kb.builder();
    Location loc = kb.location();
    Type type = cast<MemRefType>(out.getType()).getElementType();
    auto pairType = VectorType::get({2}, b.getF32Type());
    Value pair = vector::FromElementsOp::create(
        b, loc, pairType,
        ValueRange{epilogue(kb, *this, sum, row, col), epilogue(kb, *this, nextSum, row, nextCol)});
    if (!type.isF32())
      pair = arith::TruncFOp::create(b, loc, pairType.clone(type), pair);
    vector::StoreOp::create(b, loc, pair, out, ValueRange{row, col}, /*nontemporal=*/false,
                            llvm::Align(2 * type.getIntOrFloatBitWidth() / 8));
  });
}

int64_t GemmProblem::tile() const {
  int64_t large = llvm::divideCeilSigned(m, 128) * llvm::divideCeilSigned(n, 128);
  return large >= kLargeTileMinBlocks ? 128 : 64;
}

Value xfmr::gpu::insideMatrix(KernelBuilder &kb, Value i, Value j, int64_t rows, int64_t cols) {
  return arith::AndIOp::create(kb.builder(), kb.location(), kb.below(i, rows), kb.below(j, cols));
}

Value xfmr::gpu::vectorsAligned(KernelBuilder &kb, Value buffer, int64_t elements,
                                int64_t contiguousDim) {
  OpBuilder &b = kb.builder();
  Location loc = kb.location();
  auto multipleOf = [&](Value x, int64_t factor) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, kb.remui(x, factor),
                                 kb.index(0));
  };
  int64_t bytes =
      elements * llvm::divideCeil(cast<MemRefType>(buffer.getType()).getElementTypeBitWidth(), 8);
  auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, buffer);
  Value pointer = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buffer);
  Value aligned = arith::AndIOp::create(b, loc, multipleOf(pointer, bytes),
                                        multipleOf(metadata.getOffset(), elements));
  for (auto [dim, stride] : llvm::enumerate(metadata.getStrides()))
    if (static_cast<int64_t>(dim) != contiguousDim)
      aligned = arith::AndIOp::create(b, loc, aligned, multipleOf(stride, elements));
  return aligned;
}

Value xfmr::gpu::loadInside(KernelBuilder &kb, Value matrix, Value i, Value j, int64_t rows,
                            int64_t cols, Value outside) {
  Value value = kb.load(matrix, {kb.mini(i, kb.index(rows - 1)), kb.mini(j, kb.index(cols - 1))});
  return kb.select(insideMatrix(kb, i, j, rows, cols), value, outside);
}

Value xfmr::gpu::emitGemm(KernelBuilder &kb, const GemmProblem &problem, Emulation emulate) {
  return GemmKernel(kb, emulate, problem).emit();
}
