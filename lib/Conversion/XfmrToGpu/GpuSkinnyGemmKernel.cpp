//===- GpuSkinnyGemmKernel.cpp - products of a few rows on GPUs ---*- C++ -*-===//
//
// C = epilogue(A B) for an A of at most kSkinnyGemmMaxRows rows: a decode
// step's products, one token per sequence. Such a product is bound by the
// bandwidth of reading B, so the kernel reads every element of B once, in
// 16-byte chunks of `vector` elements along B's contiguous dimension,
// several chunks in flight per thread, and keeps A's few rows and the sums
// in registers. B is f32, bf16, f16, or int8 with a scale per group (the
// values of an xfmr.dequantize), widened (and scaled) in registers, so an
// int8 weight moves a quarter of an f32 one's bytes. Two thread mappings,
// by which dimension of B is contiguous:
//
//  - B stored [N, K] (K contiguous): a warp per column of C; its lanes
//    take consecutive chunks of the column's row of B, then add their sums
//    by warp shuffles, and lane 0 stores the column's outputs.
//  - B stored [K, N] (N contiguous): a block per `lanes * vector` columns;
//    `lanes` threads read one row of B's columns of the block, the
//    block's 256 / `lanes` slices of threads take rows k, k + slices, ...;
//    the slices' sums meet in shared memory. `lanes` shrinks to 2 where B
//    has too few columns to give every SM a block.
//
// The 16-byte loads need aligned addresses and strides, which only the
// running code knows: unaligned operands take the same chunks element by
// element.
//
//===----------------------------------------------------------------------===//

#include "GpuKernels.h"
#include "ThreadBlockBuilder.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "xfmr-gpu-skinny-gemm"

using namespace mlir;
using namespace xfmr;
using namespace xfmr::kernels;
using namespace xfmr::gpu;

namespace {

constexpr int64_t kThreads = 256;
constexpr int64_t kWarp = 32;
constexpr int64_t kWarps = kThreads / kWarp;
constexpr int64_t kVectorBytes = 16;
/// Chunks a thread loads before it multiplies any of them.
constexpr int64_t kChunksInFlight = 4;
/// Chunk elements along N of a [K, N] B: more would make the slices' sums
/// outgrow shared memory (256 x rows x 4 x 4 bytes at most).
constexpr int64_t kMaxColumnChunk = 4;
/// Blocks below which a [K, N] B's blocks take fewer columns (an H100's
/// SMs).
constexpr int64_t kMinBlocks = 132;

int64_t bytesOf(Value buffer) {
  return llvm::divideCeil(cast<MemRefType>(buffer.getType()).getElementTypeBitWidth(), 8);
}

class SkinnyGemm {
public:
  SkinnyGemm(KernelBuilder &kb, Emulation emulate, const GemmProblem &p, DequantizeOp dequantize)
      : kb(kb), b(kb.builder()), loc(kb.location()), block(kb, emulate, kThreads), p(p) {
    if (dequantize) {
      scales = kb.readBuffer(dequantize.getScales());
      groupAxis = dequantize.getAxis();
      groupSize = dequantize.getGroupSize();
    }
    int64_t contiguous = p.transposeB ? p.k : p.n;
    vector = kVectorBytes / bytesOf(p.rhs);
    if (!p.transposeB)
      vector = std::min(vector, kMaxColumnChunk);
    // A chunk lies in one row, and in one group where groups run along it.
    while (vector > 1 &&
           (contiguous % vector != 0 || (scales && groupAxis == 1 && groupSize % vector != 0)))
      vector /= 2;
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] " << p.m << " x " << p.k << " x " << p.n
                            << (p.transposeB ? ", B [N, K]" : ", B [K, N]") << ", chunks of "
                            << vector << "\n");
  }

  Value emit() {
    if (p.transposeB)
      emitRowsOfB();
    else
      emitColumnsOfB();
    return kb.asTensor(p.out);
  }

private:
  /// Elements of `matrix` that one load of a chunk reads (at most 16
  /// bytes).
  int64_t piece(Value matrix) const { return std::min(vector, kVectorBytes / bytesOf(matrix)); }

  /// Runs `body(vectorLoads)` with vector loads where every matrix read by
  /// chunks is aligned for them, else with element loads.
  void withAlignedChunks(ArrayRef<Value> matrices, function_ref<void(bool)> body) {
    if (vector == 1)
      return body(false);
    Value aligned;
    for (Value matrix : matrices) {
      Value one = vectorsAligned(kb, matrix, piece(matrix), /*contiguousDim=*/1);
      aligned = aligned ? arith::AndIOp::create(b, loc, aligned, one).getResult() : one;
    }
    kb.ifThenElse(
        aligned, [&] { body(true); }, [&] { body(false); });
  }

  /// `vector` elements of row `row` of a matrix from column `col` on, as
  /// f32: by loads of piece(matrix) elements when `vectorLoads`, else one
  /// element at a time.
  SmallVector<Value> loadRow(Value matrix, Value row, Value col, bool vectorLoads) {
    Type type = cast<MemRefType>(matrix.getType()).getElementType();
    SmallVector<Value> values;
    int64_t perLoad = vectorLoads ? piece(matrix) : 1;
    for (int64_t start = 0; start < vector; start += perLoad) {
      Value at = kb.addi(col, kb.index(start));
      if (perLoad == 1) {
        values.push_back(widen(kb.load(matrix, {row, at})));
        continue;
      }
      Value loaded = vector::LoadOp::create(b, loc, VectorType::get({perLoad}, type), matrix,
                                            ValueRange{row, at}, /*nontemporal=*/false,
                                            llvm::Align(perLoad * bytesOf(matrix)));
      for (int64_t e = 0; e < perLoad; ++e)
        values.push_back(widen(vector::ExtractOp::create(b, loc, loaded, e)));
    }
    return values;
  }

  Value widen(Value value) {
    Type f32 = b.getF32Type();
    if (value.getType().isInteger(8))
      return arith::SIToFPOp::create(b, loc, f32, value);
    return value.getType().isF32() ? value : arith::ExtFOp::create(b, loc, f32, value).getResult();
  }

  /// The `vector` elements of the stored B from (row, col) along its
  /// contiguous dimension, as f32 and scaled where B is int8.
  SmallVector<Value> weightChunk(Value row, Value col, bool vectorLoads) {
    SmallVector<Value> values = loadRow(p.rhs, row, col, vectorLoads);
    if (!scales)
      return values;
    if (groupAxis == 1) {
      // One group holds the chunk.
      Value scale = kb.loadWidened(scales, {row, kb.divui(col, groupSize)});
      for (Value &value : values)
        value = kb.mul(value, scale);
      return values;
    }
    Value group = kb.divui(row, groupSize);
    for (auto [e, value] : llvm::enumerate(values))
      value = kb.mul(value, kb.loadWidened(scales, {group, kb.addi(col, kb.index(e))}));
    return values;
  }

  /// B [N, K]: a warp per column n of C, each lane chunks of B's row n
  /// (and of A's rows) kChunksInFlight at a time.
  void emitRowsOfB() {
    block.forEachBlock({llvm::divideCeilSigned(p.n, kWarps), 1, 1}, {},
                       [&](std::array<Value, 3> ids, ArrayRef<Value>) {
                         Value sums = block.privateArray({p.m});
                         withAlignedChunks({p.rhs, p.lhs}, [&](bool vectorLoads) {
                           rowsOfBBlock(ids[0], sums, vectorLoads);
                         });
                       });
  }

  void rowsOfBBlock(Value blockId, Value sums, bool vectorLoads) {
    auto columnOf = [&](Value t) {
      return kb.addi(kb.muli(blockId, kWarps), block.warpUniform(kb.divui(t, kWarp)));
    };
    block.phase(
        [&](Value t) {
          Value lane = kb.remui(t, kWarp);
          // Past N, a warp reads column N - 1 and stores nothing.
          Value n = kb.mini(columnOf(t), kb.index(p.n - 1));
          SmallVector<Value> zeros(p.m, kb.f32(0.0));
          ValueRange total =
              kb.forLoop(kb.muli(lane, vector), kb.index(p.k), kWarp * vector * kChunksInFlight,
                         zeros, [&](Value k0, ValueRange carried) {
                           return accumulateChunks(carried, k0, n, vectorLoads);
                         });
          for (int64_t m = 0; m < p.m; ++m)
            kb.store(total[m], sums, block.at(t, {kb.index(m)}));
        },
        /*barrier=*/false);
    block.allReduceLanes({sums}, p.m, kWarp - 1, [&](Value x, Value y) { return kb.add(x, y); });
    block.phase(
        [&](Value t) {
          Value n = columnOf(t);
          Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, kb.remui(t, kWarp),
                                              kb.index(0));
          kb.ifThen(first, [&] {
            for (int64_t m = 0; m < p.m; ++m)
              p.store(kb, kb.load(sums, block.at(t, {kb.index(m)})), kb.index(m), n);
          });
        },
        /*barrier=*/false);
  }

  /// `carried` (a sum per row of A) plus the products of B's row n and
  /// A's rows over kChunksInFlight chunks along K from k0, a warp's chunks
  /// apart: all chunks of B loaded first, those at or past K counted as 0
  /// (they are read clamped).
  SmallVector<Value> accumulateChunks(ValueRange carried, Value k0, Value n, bool vectorLoads) {
    SmallVector<SmallVector<Value>> chunks;
    SmallVector<Value> ks, inside;
    for (int64_t c = 0; c < kChunksInFlight; ++c) {
      Value k = kb.addi(k0, kb.index(c * kWarp * vector));
      inside.push_back(kb.below(k, p.k));
      ks.push_back(kb.mini(k, kb.index(p.k - vector)));
      chunks.push_back(weightChunk(n, ks.back(), vectorLoads));
    }
    SmallVector<Value> result(carried);
    for (auto [c, weights] : llvm::enumerate(chunks)) {
      for (int64_t m = 0; m < p.m; ++m) {
        SmallVector<Value> a = loadRow(p.lhs, kb.index(m), ks[c], vectorLoads);
        Value sum = kb.f32(0.0);
        for (auto [x, w] : llvm::zip_equal(a, weights))
          sum = kb.fma(x, w, sum);
        // The first chunk is always inside.
        result[m] = kb.add(result[m], c == 0 ? sum : kb.select(inside[c], sum, kb.f32(0.0)));
      }
    }
    return result;
  }

  /// B [K, N]: a block per `lanes * vector` columns of C, its slices of
  /// `lanes` threads reading rows of B.
  void emitColumnsOfB() {
    int64_t lanes = 8;
    while (lanes > 2 && llvm::divideCeilSigned(p.n, lanes * vector) < kMinBlocks)
      lanes /= 2;
    int64_t columns = lanes * vector, slices = kThreads / lanes;
    SmallVector<int64_t> partialShape = {slices, p.m, columns};
    block.forEachBlock(
        {llvm::divideCeilSigned(p.n, columns), 1, 1}, {partialShape},
        [&](std::array<Value, 3> ids, ArrayRef<Value> shared) {
          Value col0 = kb.muli(ids[0], columns);
          withAlignedChunks({p.rhs}, [&](bool vectorLoads) {
            block.phase([&](Value t) {
              Value slice = kb.divui(t, lanes);
              Value lane = kb.remui(t, lanes);
              // Past N, a thread reads B's last chunk and its sums are not
              // stored.
              Value n = kb.mini(kb.addi(col0, kb.muli(lane, vector)), kb.index(p.n - vector));
              SmallVector<Value> zeros(p.m * vector, kb.f32(0.0));
              ValueRange total =
                  kb.forLoop(slice, kb.index(p.k), slices * kChunksInFlight, zeros,
                             [&](Value k0, ValueRange carried) {
                               return accumulateRows(carried, k0, slices, n, vectorLoads);
                             });
              for (int64_t m = 0; m < p.m; ++m)
                for (int64_t e = 0; e < vector; ++e)
                  kb.store(total[m * vector + e], shared[0],
                           {slice, kb.index(m), kb.addi(kb.muli(lane, vector), kb.index(e))});
            });
          });
          block.phase(
              [&](Value t) {
                kb.ifThen(kb.below(t, p.m * columns), [&] {
                  Value m = kb.divui(t, columns), c = kb.remui(t, columns);
                  Value sum =
                      kb.forLoop(kb.index(0), kb.index(slices), 1, {kb.f32(0.0)},
                                 [&](Value s, ValueRange carried) -> SmallVector<Value> {
                                   return {kb.add(carried[0], kb.load(shared[0], {s, m, c}))};
                                 })[0];
                  p.store(kb, sum, m, kb.addi(col0, c));
                });
              },
              /*barrier=*/false);
        });
  }

  /// `carried` (a sum per row of A and column of the chunk) plus the
  /// products of B's rows k0, k0 + stride, ... (kChunksInFlight of them,
  /// those at or past K counted as 0) at columns [n, n + vector).
  SmallVector<Value> accumulateRows(ValueRange carried, Value k0, int64_t stride, Value n,
                                    bool vectorLoads) {
    SmallVector<SmallVector<Value>> rows;
    SmallVector<Value> ks, inside;
    for (int64_t c = 0; c < kChunksInFlight; ++c) {
      Value k = kb.addi(k0, kb.index(c * stride));
      inside.push_back(kb.below(k, p.k));
      ks.push_back(kb.mini(k, kb.index(p.k - 1)));
      rows.push_back(weightChunk(ks.back(), n, vectorLoads));
    }
    SmallVector<Value> result(carried);
    for (int64_t c = 0; c < kChunksInFlight; ++c)
      for (int64_t m = 0; m < p.m; ++m) {
        Value a = kb.loadWidened(p.lhs, {kb.index(m), ks[c]});
        // The first row is always inside.
        if (c != 0)
          a = kb.select(inside[c], a, kb.f32(0.0));
        for (int64_t e = 0; e < vector; ++e) {
          Value &sum = result[m * vector + e];
          sum = kb.fma(a, rows[c][e], sum);
        }
      }
    return result;
  }

  KernelBuilder &kb;
  OpBuilder &b;
  Location loc;
  ThreadBlockBuilder block;
  const GemmProblem &p;
  /// For an int8 B: its scales, one per `groupSize` elements along
  /// dimension `groupAxis` of B as stored.
  Value scales;
  int64_t groupAxis = 0, groupSize = 1;
  /// Elements of a chunk of B.
  int64_t vector;
};

} // namespace

Value xfmr::gpu::emitSkinnyGemm(KernelBuilder &kb, const GemmProblem &problem,
                                DequantizeOp dequantize, Emulation emulate) {
  assert(problem.m <= kSkinnyGemmMaxRows && !problem.transposeA && "a skinny product");
  return SkinnyGemm(kb, emulate, problem, dequantize).emit();
}
