//===- GpuMmaGemmKernel.cpp - bf16/f16 GEMM on tensor cores -----*- C++ -*-===//
//
// C = epilogue(A B) for bf16 or f16 A and B, accumulated in f32 by the
// warp-wide `mma.sync.m16n8k16` of sm_80 and later. A block computes a
// square tile of C with 2 x 2 warps: 128 x 128 (warps of 64 x 64) where the
// problem has enough such tiles to occupy a GPU, else 64 x 64 (32 x 32).
// Per 16 of K a 64 x 64 warp tile reads 8 ldmatrix.x4 for 32 MMAs: 32
// cycles of an SM's shared memory (128 bytes a cycle) for about as many of
// its tensor cores, with the copies into shared memory on top - 64 x 32
// warps (8 a block) read 6 for 16 MMAs and would leave the products waiting
// for shared memory.
// A and B flow through kStages shared buffers, stage s (32 of K) in buffer
// s % kStages, copied kStages - 1 stages ahead of the products:
//
//   copy stages 0 .. kStages - 2
//   for each stage s:
//     wait for stage s's copies; barrier
//     copy stage s + kStages - 1 into the buffer of stage s - 1
//     2 steps of 16 along K: A and B fragments by ldmatrix from buffer
//     s % kStages, an MMA per 16 x 8 accumulator tile
//   C = activation(acc + bias) + residual   where inside C
//
// The barrier of stage s also ends the reads of stage s - 1 that the copy
// after it overwrites: one barrier a stage.
//
// Each factor is staged as it lies in memory - rows of its contiguous
// dimension, 8 elements (16 bytes) of padding a row so that the 8 rows an
// ldmatrix reads hit 32 distinct banks. Where both factors' contiguous
// extents are multiples of 8 and their addresses and strides are aligned
// (checked at run time) they are copied 16 bytes at a time without passing
// through registers (cp.async, zero-filled outside the matrix), else loaded
// and stored element by element; the loop is built once for each, so that
// the common one carries nothing of the other. A factor whose rows run
// along K (A transposed, B not) gives its fragments by ldmatrix.trans.
//
// With warpgroup MMAs (sm_90a), the block's 4 warps are one warpgroup, which
// multiplies each 64-row half of A's block tile by B's whole per 16 of K
// (wgmma.mma_async, m64n128k16 or m64n64k16, A and B read by the
// tensor cores from shared memory through matrix descriptors): the factors
// are staged as 8 x 8 core matrices (element (row, col) of a buffer at
// [row / 8][col / 8][row % 8][col % 8]), K-major where their rows are M or N,
// MN-major where they are K. A stage's MMAs run while the next stage's are
// issued: copies run kStages - 2 stages ahead, into the buffer of stage
// s - 2, whose MMAs are done once at most one group (stage s - 1's) is in
// flight - what each stage waits for after issuing its MMAs and the copies.
// Warp w's accumulators are rows 16 w to 16 w + 15 of each half, laid out
// per 8 columns as those of mma.sync.
//
// When emulated, each thread computes its accumulators' dot products from
// the shared tiles itself and copies at once: the tiling, staging, epilogue
// and the order of the copies, MMAs and barriers (AsyncOrderChecker) are
// checked on the CPU, the ldmatrix and MMA fragment layouts only on a GPU.
// Emulating warpgroup MMAs, it reads the tiles through the MMAs' matrix
// descriptors (MmaBuilder::describedElement): the descriptors are checked
// on the CPU too.
//
//===----------------------------------------------------------------------===//

#include "AsyncOrderChecker.h"
#include "GpuKernels.h"
#include "GpuMma.h"
#include "ThreadBlockBuilder.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace xfmr;
using namespace xfmr::kernels;
using namespace xfmr::gpu;

namespace {

constexpr int64_t kDepth = 32;
/// Shared buffers of each factor: copies run kStages - 1 stages ahead
/// (kStages - 2 with warpgroup MMAs, which read a buffer a stage longer).
constexpr int64_t kStages = 4;
constexpr int64_t kPadding = 8;
constexpr int64_t kVector = MmaBuilder::kVector;
constexpr int64_t kWarpSize = MmaBuilder::kWarpSize;
constexpr int64_t kMmaM = MmaBuilder::kM, kMmaN = MmaBuilder::kN, kMmaK = MmaBuilder::kK;
constexpr int64_t kAccumulators = MmaBuilder::kAccumulators;
/// Warps along each of M and N.
constexpr int64_t kWarps = 2;
constexpr int64_t kWarpgroupRows = MmaBuilder::kWarpgroupRows;

/// One factor as a block stages it: rows of `cols` elements of its
/// contiguous (last) dimension, the rows along K (`kRows`) or along M (A)
/// or N (B).
struct Factor {
  Factor(Value matrix, bool kRows, int64_t tile, bool coreMatrices)
      : matrix(matrix), kRows(kRows), coreMatrices(coreMatrices), rows(kRows ? kDepth : tile),
        cols(kRows ? tile : kDepth) {
    auto shape = cast<MemRefType>(matrix.getType()).getShape();
    outerExtent = shape[0];
    innerExtent = shape[1];
  }

  SmallVector<int64_t> sharedShape() const {
    if (coreMatrices)
      return {kStages, rows / kVector, cols / kVector, kVector, kVector};
    return {kStages, rows, cols + kPadding};
  }
  /// Tile indices of element (row, col) of buffer `buffer`.
  SmallVector<Value> at(MmaBuilder &mma, Value buffer, Value row, Value col) const {
    if (!coreMatrices)
      return {buffer, row, col};
    SmallVector<Value> indices = {buffer};
    llvm::append_range(indices, mma.coreMatrixIndices(row, col));
    return indices;
  }
  /// ... of element (mn, k).
  SmallVector<Value> atMnK(MmaBuilder &mma, Value buffer, Value mn, Value k) const {
    return kRows ? at(mma, buffer, k, mn) : at(mma, buffer, mn, k);
  }
  /// A warpgroup MMA's operand of the 16 of K from k0 and the MN from mn0
  /// of buffer `buffer`: K-major (K along the columns) or MN-major.
  MmaBuilder::SharedOperand operand(KernelBuilder &kb, MmaBuilder &mma, Value tiles, Value buffer,
                                    int64_t mn0, int64_t k0) const {
    auto [row0, col0] = kRows ? std::pair(k0, mn0) : std::pair(mn0, k0);
    SmallVector<Value> start = {buffer, kb.index(0), kb.index(0), kb.index(0), kb.index(0)};
    return mma.matrixDescriptor(tiles, start, MmaBuilder::coreMatrixOffset(row0, col0, cols), cols,
                                /*kAlongRows=*/kRows);
  }

  Value matrix;
  bool kRows, coreMatrices;
  int64_t rows, cols, outerExtent, innerExtent;
};

class MmaGemmKernel {
public:
  MmaGemmKernel(KernelBuilder &kb, Emulation emulate, const GemmProblem &p, bool warpgroupMma)
      : kb(kb), b(kb.builder()), loc(kb.location()), emulate(emulate), warpgroupMma(warpgroupMma),
        tile(p.tile()), warpRows(warpgroupMma ? tile : tile / kWarps),
        tilesM(warpgroupMma ? tile / kWarpgroupRows : warpRows / kMmaM), tilesN(warpRows / kMmaN),
        rowTileStride(warpgroupMma ? kWarpgroupRows : kMmaM), threads(kWarps * kWarps * kWarpSize),
        lookahead(warpgroupMma ? kStages - 2 : kStages - 1), block(kb, emulate, threads), p(p),
        mma(kb, cast<MemRefType>(p.lhs.getType()).getElementType(), emulate != Emulation::None),
        lhs(p.lhs, p.transposeA, tile, warpgroupMma), rhs(p.rhs, !p.transposeB, tile, warpgroupMma),
        asyncOrder(kb, block, /*enabled=*/emulate != Emulation::None) {
    assert(slots(lhs) * threads * kVector == lhs.rows * lhs.cols && "whole vectors per thread");
  }

  Value emit() {
    block.forEachBlock({llvm::divideCeilSigned(p.n, tile), llvm::divideCeilSigned(p.m, tile), 1},
                       {lhs.sharedShape(), rhs.sharedShape()},
                       [&](std::array<Value, 3> ids, ArrayRef<Value> shared) {
                         asyncOrder.track(shared, kStages);
                         emitBlock(kb.muli(ids[1], tile), kb.muli(ids[0], tile), shared[0],
                                   shared[1]);
                       },
                       {tileElementType(), tileElementType()});
    return kb.asTensor(p.out);
  }

private:
  int64_t slots(const Factor &f) const { return f.rows * f.cols / kVector / threads; }

  /// Thread t's place: the first row and column of its warp's part of the
  /// block tile (with warpgroup MMAs: of each half), its lane, and the
  /// lane's group g and index q in the group.
  struct Lane {
    Value warpRow, warpCol, lane, group, inGroup;
  };
  Lane laneOf(Value t) {
    Value warp = kb.divui(t, kWarpSize), lane = kb.remui(t, kWarpSize);
    auto [group, inGroup] = mma.laneCoordinates(lane);
    if (warpgroupMma)
      return {kb.muli(warp, kMmaM), kb.index(0), lane, group, inGroup};
    return {kb.muli(kb.divui(warp, kWarps), warpRows), kb.muli(kb.remui(warp, kWarps), warpRows),
            lane, group, inGroup};
  }
  /// Row and column of the block tile of accumulator r of MMA tile (mi, ni).
  Value accumulatorRow(const Lane &lane, int64_t mi, int64_t r) {
    return kb.addi(lane.warpRow,
                   kb.addi(mma.accumulatorRow(lane.group, r), kb.index(mi * rowTileStride)));
  }
  Value accumulatorCol(const Lane &lane, int64_t ni, int64_t r) {
    return kb.addi(lane.warpCol,
                   kb.addi(mma.accumulatorCol(lane.inGroup, r), kb.index(ni * kMmaN)));
  }
  void forEachAccumulator(function_ref<void(int64_t, int64_t, int64_t)> body) {
    for (int64_t mi = 0; mi < tilesM; ++mi)
      for (int64_t ni = 0; ni < tilesN; ++ni)
        for (int64_t r = 0; r < kAccumulators; ++r)
          body(mi, ni, r);
  }

  void emitBlock(Value row0, Value col0, Value aTiles, Value bTiles) {
    Value acc = block.privateArray({tilesM, tilesN, kAccumulators});
    auto accIndices = [&](Value t, int64_t mi, int64_t ni, int64_t r) {
      return block.at(t, {kb.index(mi), kb.index(ni), kb.index(r)});
    };
    // Thread t's accumulators, in forEachAccumulator's order.
    auto loadSums = [&](Value t) {
      SmallVector<Value> sums;
      forEachAccumulator([&](int64_t mi, int64_t ni, int64_t r) {
        sums.push_back(kb.load(acc, accIndices(t, mi, ni, r)));
      });
      return sums;
    };
    auto storeSums = [&](Value t, ArrayRef<Value> sums) {
      int64_t i = 0;
      forEachAccumulator([&](int64_t mi, int64_t ni, int64_t r) {
        kb.store(sums[i++], acc, accIndices(t, mi, ni, r));
      });
    };
    bool onWarpgroup = warpgroupMma && emulate == Emulation::None;
    int64_t stages = llvm::divideCeilSigned(p.k, kDepth);
    // Thread t's part of copying stage `stage` (none past the last) into
    // its buffer, by vectors or element by element.
    auto copyStage = [&](Value t, Value stage, bool vectors) {
      kb.ifThen(kb.below(stage, stages), [&] {
        Value buffer = kb.remui(stage, kStages), k0 = kb.muli(stage, kDepth);
        for (Value tiles : {aTiles, bTiles})
          asyncOrder.noteWrite(t, tiles, /*copy=*/vectors, buffer);
        auto copies = [&](bool clamped) {
          for (auto [f, mn0, tiles] :
               {std::tuple(&lhs, row0, aTiles), std::tuple(&rhs, col0, bTiles)})
            vectors ? copyVectors(t, *f, mn0, k0, tiles, buffer, clamped)
                    : copyElements(t, *f, mn0, k0, tiles, buffer);
        };
        if (!vectors)
          return copies(/*clamped=*/true);
        // Stages wholly inside both factors copy without clamping.
        Value inside = kb.below(kb.addi(row0, kb.index(tile - 1)), p.m);
        inside =
            arith::AndIOp::create(b, loc, inside, kb.below(kb.addi(col0, kb.index(tile - 1)), p.n));
        inside =
            arith::AndIOp::create(b, loc, inside, kb.below(kb.addi(k0, kb.index(kDepth - 1)), p.k));
        kb.ifThenElse(
            inside, [&] { copies(/*clamped=*/false); }, [&] { copies(/*clamped=*/true); });
      });
      // A group a stage, empty or not, so that stage s's copies are done
      // when at most lookahead - 1 groups are in flight at stage s.
      if (vectors && emulate == Emulation::None)
        mma.commitCopies();
      else if (vectors)
        asyncOrder.commitCopies(t);
    };
    auto pipeline = [&](bool vectors) {
      block.phase(
          [&](Value t) {
            forEachAccumulator([&](int64_t mi, int64_t ni, int64_t r) {
              kb.store(kb.f32(0.0), acc, accIndices(t, mi, ni, r));
            });
            for (int64_t stage = 0; stage < lookahead; ++stage)
              copyStage(t, kb.index(stage), vectors);
          },
          /*barrier=*/false);
      kb.forLoop(kb.index(0), kb.index(stages), 1, [&](Value stage) {
        block.phase([&](Value t) {
          // The copies of the stages after this one stay in flight.
          int64_t copiesInFlight = lookahead - 1;
          if (vectors && emulate == Emulation::None)
            mma.waitForCopies(copiesInFlight);
          else if (vectors)
            asyncOrder.waitForCopies(t, copiesInFlight);
          if (onWarpgroup)
            mma.fenceSharedForWarpgroupMma();
        });
        block.phase(
            [&](Value t) {
              auto copyNext = [&] { copyStage(t, kb.addi(stage, kb.index(lookahead)), vectors); };
              SmallVector<Value> sums = loadSums(t);
              Lane lane = laneOf(t);
              Value buffer = kb.remui(stage, kStages);
              SmallVector<Value> updated;
              if (warpgroupMma) {
                updated = multiplyOnWarpgroup(t, lane, aTiles, bTiles, buffer, sums, copyNext);
              } else {
                copyNext();
                if (emulate == Emulation::None) {
                  updated = multiplyOnTensorCores(lane, aTiles, bTiles, buffer, sums);
                } else {
                  updated = multiplyEmulated(t, lane, aTiles, bTiles, buffer, sums);
                  asyncOrder.waitForMmas(t, /*pending=*/0);
                }
              }
              storeSums(t, updated);
            },
            /*barrier=*/false);
      });
      // The last stage's MMAs, waited for: the accumulators readable.
      if (onWarpgroup)
        block.phase([&](Value t) { storeSums(t, mma.waitForWarpgroupMma(loadSums(t))); },
                    /*barrier=*/false);
      else if (warpgroupMma)
        block.phase([&](Value t) { asyncOrder.waitForMmas(t, /*pending=*/0); },
                    /*barrier=*/false);
    };
    if (readsVectors(lhs) && readsVectors(rhs))
      kb.ifThenElse(
          arith::AndIOp::create(b, loc, mma.vectorsAligned(lhs.matrix, 1),
                                mma.vectorsAligned(rhs.matrix, 1)),
          [&] { pipeline(/*vectors=*/true); }, [&] { pipeline(/*vectors=*/false); });
    else
      pipeline(/*vectors=*/false);

    block.phase(
        [&](Value t) {
          Lane lane = laneOf(t);
          // Accumulators r and r + 1 are neighbours in a row.
          forEachAccumulator([&](int64_t mi, int64_t ni, int64_t r) {
            if (r % 2 != 0)
              return;
            Value row = kb.addi(row0, accumulatorRow(lane, mi, r));
            Value col = kb.addi(col0, accumulatorCol(lane, ni, r));
            p.storePair(kb, kb.load(acc, accIndices(t, mi, ni, r)),
                        kb.load(acc, accIndices(t, mi, ni, r + 1)), row, col);
          });
        },
        /*barrier=*/false);
  }

  /// Whether a factor's rows are whole 16-byte vectors of the MMA's type.
  bool readsVectors(const Factor &f) const {
    return f.innerExtent % kVector == 0 &&
           cast<MemRefType>(f.matrix.getType()).getElementType() == mma.narrowType();
  }

  /// Calls `body(row, col, outer, inner)` for thread t's vectors of
  /// factor f's stage at k0 of the block whose first row (A) or column (B)
  /// is mn0: elements (row, col) to (row, col + 7) of the tile, (outer,
  /// inner) to (outer, inner + 7) of the matrix. Consecutive threads take
  /// consecutive vectors of a row, or, in tiles of core matrices, of a core
  /// matrix (8 threads write its 128 bytes, free of bank conflicts).
  void forEachVector(Value t, const Factor &f, Value mn0, Value k0,
                     function_ref<void(Value, Value, Value, Value)> body) {
    auto [outer0, inner0] = f.kRows ? std::pair(k0, mn0) : std::pair(mn0, k0);
    int64_t chunks = f.cols / kVector;
    for (int64_t slot = 0; slot < slots(f); ++slot) {
      Value i = kb.addi(t, kb.index(slot * threads));
      auto [row, col] = f.coreMatrices
                            ? mma.coreMatrixVector(i, chunks)
                            : std::pair(kb.divui(i, chunks), kb.muli(kb.remui(i, chunks), kVector));
      body(row, col, kb.addi(outer0, row), kb.addi(inner0, col));
    }
  }

  /// The element type of the shared tiles: the MMA's on a GPU (as its
  /// async copies require), its bits when emulated - x86 code generation
  /// lowers bf16 vectors passed between blocks through conversions (to a
  /// libgcc function ours lacks).
  Type tileElementType() { return emulate == Emulation::None ? mma.narrowType() : b.getI16Type(); }
  /// `narrowValue` (a scalar or vector of the MMA's type) as tile elements.
  Value asTileElements(Value narrowValue) {
    if (emulate == Emulation::None)
      return narrowValue;
    if (auto type = dyn_cast<VectorType>(narrowValue.getType()))
      return vector::BitCastOp::create(b, loc, type.clone(b.getI16Type()), narrowValue);
    return mma.bits(narrowValue);
  }

  /// Thread t's vectors of factor f's stage at k0 into buffer `buffer` of
  /// its shared `tiles`, 16 bytes per copy, zeros outside the matrix;
  /// unless `clamped`, the stage lies inside the matrix.
  void copyVectors(Value t, const Factor &f, Value mn0, Value k0, Value tiles, Value buffer,
                   bool clamped) {
    forEachVector(t, f, mn0, k0, [&](Value row, Value col, Value outer, Value inner) {
      SmallVector<Value> target = f.at(mma, buffer, row, col), source{outer, inner};
      Value inside;
      if (clamped) {
        // Inside or wholly outside: the inner extent is a multiple of 8.
        inside = insideMatrix(kb, outer, inner, f.outerExtent, f.innerExtent);
        source = {kb.mini(outer, kb.index(f.outerExtent - 1)),
                  kb.mini(inner, kb.index(f.innerExtent - kVector))};
      }
      if (emulate == Emulation::None) {
        mma.copyAsync(tiles, target, f.matrix, source,
                      inside ? kb.select(inside, kb.index(kVector), kb.index(0)) : Value());
        return;
      }
      auto type = VectorType::get({kVector}, mma.narrowType());
      Value value = vector::LoadOp::create(b, loc, type, f.matrix, source,
                                           /*nontemporal=*/false, llvm::Align(2 * kVector));
      value = asTileElements(value);
      if (inside)
        value = kb.select(
            inside, value,
            arith::ConstantOp::create(b, loc, b.getZeroAttr(value.getType())).getResult());
      vector::StoreOp::create(b, loc, value, tiles, target, /*nontemporal=*/false,
                              llvm::Align(2 * kVector));
    });
  }

  /// ... element by element, converted to the MMA's type.
  void copyElements(Value t, const Factor &f, Value mn0, Value k0, Value tiles, Value buffer) {
    Type elementType = cast<MemRefType>(f.matrix.getType()).getElementType();
    Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(elementType));
    forEachVector(t, f, mn0, k0, [&](Value row, Value col, Value outer, Value inner) {
      for (int64_t e = 0; e < kVector; ++e) {
        Value value = loadInside(kb, f.matrix, outer, kb.addi(inner, kb.index(e)), f.outerExtent,
                                 f.innerExtent, zero);
        if (value.getType() != mma.narrowType())
          value = arith::TruncFOp::create(b, loc, mma.narrowType(), value);
        kb.store(asTileElements(value), tiles, f.at(mma, buffer, row, kb.addi(col, kb.index(e))));
      }
    });
  }

  /// The words of fragments of factor f at (mn0, k0) of a buffer, 16 x 16
  /// along (M or N, K): four 8 x 8 matrices, matrix i at (mnOffset(i),
  /// kOffset(i)) from there.
  SmallVector<Value> fragments(const Lane &lane, const Factor &f, Value tiles, Value buffer,
                               Value mn0, Value k0, function_ref<Value(Value)> mnOffset,
                               function_ref<Value(Value)> kOffset) {
    Value matrix = kb.divui(lane.lane, 8), matrixRow = kb.remui(lane.lane, 8);
    Value mn = kb.addi(mn0, mnOffset(matrix)), k = kb.addi(k0, kOffset(matrix));
    // Lane l addresses row l % 8 of its matrix: along K in a [K, M|N] tile.
    if (f.kRows)
      k = kb.addi(k, matrixRow);
    else
      mn = kb.addi(mn, matrixRow);
    return mma.loadMatrices(tiles, f.atMnK(mma, buffer, mn, k), 4, /*transposed=*/f.kRows);
  }

  SmallVector<Value> multiplyOnTensorCores(const Lane &lane, Value aTiles, Value bTiles,
                                           Value buffer, ArrayRef<Value> sums) {
    SmallVector<Value> result(sums);
    auto low = [&](Value i) { return kb.muli(kb.remui(i, 2), 8); };
    auto high = [&](Value i) { return kb.muli(kb.divui(i, 2), 8); };
    for (int64_t step = 0; step < kDepth / kMmaK; ++step) {
      Value k0 = kb.index(step * kMmaK);
      // A registers 0-3: rows 0-7 and 8-15 at K 0-7, then at K 8-15.
      SmallVector<SmallVector<Value>> aFragments, bFragments;
      for (int64_t mi = 0; mi < tilesM; ++mi)
        aFragments.push_back(fragments(lane, lhs, aTiles, buffer,
                                       kb.addi(lane.warpRow, kb.index(mi * kMmaM)), k0, low, high));
      // B registers 0-1 of a column tile: K 0-7, 8-15; two tiles per load.
      for (int64_t ni = 0; ni < tilesN; ni += 2) {
        SmallVector<Value> words = fragments(
            lane, rhs, bTiles, buffer, kb.addi(lane.warpCol, kb.index(ni * kMmaN)), k0, high, low);
        bFragments.push_back({words[0], words[1]});
        bFragments.push_back({words[2], words[3]});
      }
      for (int64_t mi = 0; mi < tilesM; ++mi) {
        for (int64_t ni = 0; ni < tilesN; ++ni) {
          int64_t first = (mi * tilesN + ni) * kAccumulators;
          SmallVector<Value> updated = mma.multiply(
              aFragments[mi], bFragments[ni], ArrayRef<Value>(result).slice(first, kAccumulators));
          llvm::copy(updated, result.begin() + first);
        }
      }
    }
    return result;
  }

  /// The stage's products by warpgroup MMAs, one per half of the block tile
  /// and 16 of K; `whileMultiplying` builds code that runs meanwhile. The
  /// accumulators it returns are those of MMAs still in flight. Emulated,
  /// multiplyEmulated's, in the same order, checked (AsyncOrderChecker).
  SmallVector<Value> multiplyOnWarpgroup(Value t, const Lane &lane, Value aTiles, Value bTiles,
                                         Value buffer, ArrayRef<Value> sums,
                                         function_ref<void()> whileMultiplying) {
    SmallVector<Value> result;
    if (emulate == Emulation::None) {
      result = mma.fenceForWarpgroupMma(sums);
      int64_t half = tilesN * kAccumulators;
      for (int64_t step = 0; step < kDepth / kMmaK; ++step) {
        MmaBuilder::SharedOperand bOperand = rhs.operand(kb, mma, bTiles, buffer, 0, step * kMmaK);
        for (int64_t mi = 0; mi < tilesM; ++mi) {
          SmallVector<Value> updated = mma.warpgroupMultiply(
              lhs.operand(kb, mma, aTiles, buffer, mi * kWarpgroupRows, step * kMmaK), bOperand,
              ArrayRef<Value>(result).slice(mi * half, half), tile);
          llvm::copy(updated, result.begin() + mi * half);
        }
      }
      mma.commitWarpgroupMma();
    } else {
      result = multiplyEmulated(t, lane, aTiles, bTiles, buffer, sums);
    }
    whileMultiplying();
    // At most this stage's MMAs in flight: the buffer of the one before
    // is free after the next barrier.
    constexpr int64_t kPending = 1;
    if (emulate == Emulation::None)
      mma.waitForWarpgroupMma(kPending);
    else
      asyncOrder.waitForMmas(t, kPending);
    return result;
  }

  /// The same products, each accumulator a dot product of the shared tiles'
  /// row and column, as a group of MMAs issued (AsyncOrderChecker).
  /// Emulating warpgroup MMAs, a step (16 of K) at a time, the factors read
  /// through the step's descriptors (describedElement) - so that the
  /// descriptors are checked on the CPU too.
  SmallVector<Value> multiplyEmulated(Value t, const Lane &lane, Value aTiles, Value bTiles,
                                      Value buffer, ArrayRef<Value> sums) {
    for (Value tiles : {aTiles, bTiles})
      asyncOrder.noteMmaRead(t, tiles, buffer);
    asyncOrder.commitMmas(t);
    SmallVector<int64_t> rowTiles;
    SmallVector<Value> rows, cols;
    forEachAccumulator([&](int64_t mi, int64_t ni, int64_t r) {
      rowTiles.push_back(mi);
      rows.push_back(accumulatorRow(lane, warpgroupMma ? 0 : mi, r));
      cols.push_back(accumulatorCol(lane, ni, r));
    });
    auto widen = [&](Value bits) {
      Value x = arith::BitcastOp::create(b, loc, mma.narrowType(), bits);
      return arith::ExtFOp::create(b, loc, b.getF32Type(), x);
    };
    SmallVector<Value> result(sums);
    int64_t stepDepth = warpgroupMma ? kMmaK : kDepth;
    for (int64_t k0 = 0; k0 < kDepth; k0 += stepDepth) {
      SmallVector<MmaBuilder::DescribedTile> aDescribed;
      std::optional<MmaBuilder::DescribedTile> bDescribed;
      if (warpgroupMma) {
        for (int64_t mi = 0; mi < tilesM; ++mi)
          aDescribed.push_back(mma.describedTile(
              aTiles, lhs.operand(kb, mma, aTiles, buffer, mi * kWarpgroupRows, k0)));
        bDescribed = mma.describedTile(bTiles, rhs.operand(kb, mma, bTiles, buffer, 0, k0));
      }
      ValueRange updated =
          kb.forLoop(kb.index(0), kb.index(stepDepth), 1, result, [&](Value k, ValueRange carried) {
            SmallVector<Value> next;
            for (auto [i, sum] : llvm::enumerate(carried)) {
              Value x =
                  widen(warpgroupMma ? mma.describedElement(aDescribed[rowTiles[i]], rows[i], k)
                                     : kb.load(aTiles, lhs.atMnK(mma, buffer, rows[i], k)));
              Value y = widen(warpgroupMma ? mma.describedElement(*bDescribed, cols[i], k)
                                           : kb.load(bTiles, rhs.atMnK(mma, buffer, cols[i], k)));
              next.push_back(kb.fma(x, y, sum));
            }
            return next;
          });
      result.assign(updated.begin(), updated.end());
    }
    return result;
  }

  KernelBuilder &kb;
  OpBuilder &b;
  Location loc;
  Emulation emulate;
  /// Products by warpgroup MMAs from tiles of core matrices (sm_90a).
  bool warpgroupMma;
  /// The block tile's rows (and columns), a warp's rows and columns (with
  /// warpgroup MMAs: its columns), its MMA tiles along M and N, the rows
  /// between its MMA tiles along M, the block's threads, and the stages
  /// copies run ahead.
  int64_t tile, warpRows, tilesM, tilesN, rowTileStride, threads, lookahead;
  ThreadBlockBuilder block;
  const GemmProblem &p;
  MmaBuilder mma;
  Factor lhs, rhs;
  AsyncOrderChecker asyncOrder;
};

} // namespace

Value xfmr::gpu::emitMmaGemm(KernelBuilder &kb, const GemmProblem &problem, Emulation emulate,
                             bool warpgroupMma) {
  return MmaGemmKernel(kb, emulate, problem, warpgroupMma).emit();
}
