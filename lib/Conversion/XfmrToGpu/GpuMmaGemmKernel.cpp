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
// The products, copies and waits of each generation, and their emulation
// on the CPU, are GemmTensorCoreOps (GpuMmaGemmKernel.h), one
// implementation a file; the tiling, staging and epilogue here are written
// once for all three.
//
//===----------------------------------------------------------------------===//

#include "GpuMmaGemmKernel.h"

using namespace mlir;
using namespace xfmr;
using namespace xfmr::kernels;
using namespace xfmr::gpu;

MmaGemmKernel::Factor::Factor(Value matrix, bool kRows, int64_t tile, bool coreMatrices)
    : matrix(matrix), kRows(kRows), coreMatrices(coreMatrices), rows(kRows ? kDepth : tile),
      cols(kRows ? tile : kDepth) {
  auto shape = cast<MemRefType>(matrix.getType()).getShape();
  outerExtent = shape[0];
  innerExtent = shape[1];
}

SmallVector<int64_t> MmaGemmKernel::Factor::sharedShape() const {
  if (coreMatrices)
    return {kStages, rows / kVector, cols / kVector, kVector, kVector};
  return {kStages, rows, cols + kPadding};
}

SmallVector<Value> MmaGemmKernel::Factor::at(MmaBuilder &mma, Value buffer, Value row,
                                             Value col) const {
  if (!coreMatrices)
    return {buffer, row, col};
  SmallVector<Value> indices = {buffer};
  llvm::append_range(indices, mma.coreMatrixIndices(row, col));
  return indices;
}

MmaBuilder::SharedOperand MmaGemmKernel::Factor::operand(KernelBuilder &kb, MmaBuilder &mma,
                                                         Value tiles, Value buffer, int64_t mn0,
                                                         int64_t k0) const {
  auto [row0, col0] = kRows ? std::pair(k0, mn0) : std::pair(mn0, k0);
  SmallVector<Value> start = {buffer, kb.index(0), kb.index(0), kb.index(0), kb.index(0)};
  return mma.matrixDescriptor(tiles, start, MmaBuilder::coreMatrixOffset(row0, col0, cols), cols,
                              /*kAlongRows=*/kRows);
}

MmaGemmKernel::MmaGemmKernel(KernelBuilder &kb, Emulation emulate, const GemmProblem &p,
                             bool warpgroupMma)
    : kb(kb), b(kb.builder()), loc(kb.location()), warpgroupMma(warpgroupMma), tile(p.tile()),
      warpRows(warpgroupMma ? tile : tile / kWarps),
      tilesM(warpgroupMma ? tile / kWarpgroupRows : warpRows / kMmaM), tilesN(warpRows / kMmaN),
      rowTileStride(warpgroupMma ? kWarpgroupRows : kMmaM), threads(kWarps * kWarps * kWarpSize),
      lookahead(warpgroupMma ? kStages - 2 : kStages - 1), block(kb, emulate, threads), p(p),
      mma(kb, cast<MemRefType>(p.lhs.getType()).getElementType(), emulate != Emulation::None),
      lhs(p.lhs, p.transposeA, tile, warpgroupMma), rhs(p.rhs, !p.transposeB, tile, warpgroupMma),
      asyncOrder(kb, block, /*enabled=*/emulate != Emulation::None),
      tensorCores(emulate != Emulation::None
                      ? createEmulatedGemmOps(kb, mma, asyncOrder, warpgroupMma)
                  : warpgroupMma ? createWarpgroupGemmOps(kb, mma)
                                 : createMmaSyncGemmOps(kb, mma)) {
  assert(slots(lhs) * threads * kVector == lhs.rows * lhs.cols && "whole vectors per thread");
}

MmaGemmKernel::~MmaGemmKernel() = default;

Value MmaGemmKernel::emit() {
  Type tileElement = tensorCores->tileElementType();
  block.forEachBlock({llvm::divideCeilSigned(p.n, tile), llvm::divideCeilSigned(p.m, tile), 1},
                     {lhs.sharedShape(), rhs.sharedShape()},
                     [&](std::array<Value, 3> ids, ArrayRef<Value> shared) {
                       asyncOrder.track(shared, kStages);
                       emitBlock(kb.muli(ids[1], tile), kb.muli(ids[0], tile), shared[0],
                                 shared[1]);
                     },
                     {tileElement, tileElement});
  return kb.asTensor(p.out);
}

MmaGemmKernel::Lane MmaGemmKernel::laneOf(Value t) {
  Value warp = kb.divui(t, kWarpSize), lane = kb.remui(t, kWarpSize);
  auto [group, inGroup] = mma.laneCoordinates(lane);
  if (warpgroupMma)
    return {kb.muli(warp, kMmaM), kb.index(0), lane, group, inGroup};
  return {kb.muli(kb.divui(warp, kWarps), warpRows), kb.muli(kb.remui(warp, kWarps), warpRows),
          lane, group, inGroup};
}

Value MmaGemmKernel::accumulatorRow(const Lane &lane, int64_t mi, int64_t r) {
  return kb.addi(lane.warpRow,
                 kb.addi(mma.accumulatorRow(lane.group, r), kb.index(mi * rowTileStride)));
}

Value MmaGemmKernel::accumulatorCol(const Lane &lane, int64_t ni, int64_t r) {
  return kb.addi(lane.warpCol, kb.addi(mma.accumulatorCol(lane.inGroup, r), kb.index(ni * kMmaN)));
}

void MmaGemmKernel::forEachAccumulator(int64_t tilesM, int64_t tilesN,
                                       function_ref<void(int64_t, int64_t, int64_t)> body) {
  for (int64_t mi = 0; mi < tilesM; ++mi)
    for (int64_t ni = 0; ni < tilesN; ++ni)
      for (int64_t r = 0; r < kAccumulators; ++r)
        body(mi, ni, r);
}

SmallVector<Value> MmaGemmKernel::accumulatorAt(Value t, int64_t mi, int64_t ni, int64_t r) {
  return block.at(t, {kb.index(mi), kb.index(ni), kb.index(r)});
}

SmallVector<Value> MmaGemmKernel::loadSums(Value t) {
  SmallVector<Value> sums;
  forEachAccumulator(tilesM, tilesN, [&](int64_t mi, int64_t ni, int64_t r) {
    sums.push_back(kb.load(accumulators, accumulatorAt(t, mi, ni, r)));
  });
  return sums;
}

void MmaGemmKernel::storeSums(Value t, ArrayRef<Value> sums) {
  int64_t i = 0;
  forEachAccumulator(tilesM, tilesN, [&](int64_t mi, int64_t ni, int64_t r) {
    kb.store(sums[i++], accumulators, accumulatorAt(t, mi, ni, r));
  });
}

void MmaGemmKernel::emitBlock(Value row0, Value col0, Value aTiles, Value bTiles) {
  accumulators = block.privateArray({tilesM, tilesN, kAccumulators});
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
    if (vectors)
      tensorCores->commitCopies(t);
  };
  auto pipeline = [&](bool vectors) {
    block.phase(
        [&](Value t) {
          forEachAccumulator(tilesM, tilesN, [&](int64_t mi, int64_t ni, int64_t r) {
            kb.store(kb.f32(0.0), accumulators, accumulatorAt(t, mi, ni, r));
          });
          for (int64_t stage = 0; stage < lookahead; ++stage)
            copyStage(t, kb.index(stage), vectors);
        },
        /*barrier=*/false);
    kb.forLoop(kb.index(0), kb.index(stages), 1, [&](Value stage) {
      block.phase([&](Value t) {
        // The copies of the stages after this one stay in flight.
        if (vectors)
          tensorCores->waitForCopies(t, /*pending=*/lookahead - 1);
        tensorCores->fenceShared();
      });
      block.phase(
          [&](Value t) {
            auto copyNext = [&] { copyStage(t, kb.addi(stage, kb.index(lookahead)), vectors); };
            SmallVector<Value> sums = loadSums(t);
            Lane lane = laneOf(t);
            Value buffer = kb.remui(stage, kStages);
            auto row = [&](int64_t mi, int64_t r) { return accumulatorRow(lane, mi, r); };
            auto col = [&](int64_t ni, int64_t r) { return accumulatorCol(lane, ni, r); };
            Stage stageTiles{lhs,  rhs,    aTiles, bTiles, buffer, lane,
                             tile, tilesM, tilesN, row,    col};
            storeSums(t, tensorCores->multiplyStage(t, stageTiles, sums, copyNext));
          },
          /*barrier=*/false);
    });
    tensorCores->waitForLastStage(
        block, [&](Value t) { return loadSums(t); },
        [&](Value t, ArrayRef<Value> sums) { storeSums(t, sums); });
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
        forEachAccumulator(tilesM, tilesN, [&](int64_t mi, int64_t ni, int64_t r) {
          if (r % 2 != 0)
            return;
          Value row = kb.addi(row0, accumulatorRow(lane, mi, r));
          Value col = kb.addi(col0, accumulatorCol(lane, ni, r));
          p.storePair(kb, kb.load(accumulators, accumulatorAt(t, mi, ni, r)),
                      kb.load(accumulators, accumulatorAt(t, mi, ni, r + 1)), row, col);
        });
      },
      /*barrier=*/false);
}

bool MmaGemmKernel::readsVectors(const Factor &f) const {
  return f.innerExtent % kVector == 0 &&
         cast<MemRefType>(f.matrix.getType()).getElementType() == mma.narrowType();
}

/// Calls `body(row, col, outer, inner)` for thread t's vectors of factor
/// f's stage at k0 of the block whose first row (A) or column (B) is mn0:
/// elements (row, col) to (row, col + 7) of the tile, (outer, inner) to
/// (outer, inner + 7) of the matrix. Consecutive threads take consecutive
/// vectors of a row, or, in tiles of core matrices, of a core matrix (8
/// threads write its 128 bytes, free of bank conflicts).
void MmaGemmKernel::forEachVector(Value t, const Factor &f, Value mn0, Value k0,
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

/// Thread t's vectors of factor f's stage at k0 into buffer `buffer` of its
/// shared `tiles`, 16 bytes per copy, zeros outside the matrix; unless
/// `clamped`, the stage lies inside the matrix.
void MmaGemmKernel::copyVectors(Value t, const Factor &f, Value mn0, Value k0, Value tiles,
                                Value buffer, bool clamped) {
  forEachVector(t, f, mn0, k0, [&](Value row, Value col, Value outer, Value inner) {
    SmallVector<Value> target = f.at(mma, buffer, row, col), source{outer, inner};
    Value inside;
    if (clamped) {
      // Inside or wholly outside: the inner extent is a multiple of 8.
      inside = insideMatrix(kb, outer, inner, f.outerExtent, f.innerExtent);
      source = {kb.mini(outer, kb.index(f.outerExtent - 1)),
                kb.mini(inner, kb.index(f.innerExtent - kVector))};
    }
    tensorCores->copyVector(tiles, target, f.matrix, source, inside);
  });
}

/// ... element by element, converted to the MMA's type.
void MmaGemmKernel::copyElements(Value t, const Factor &f, Value mn0, Value k0, Value tiles,
                                 Value buffer) {
  Type elementType = cast<MemRefType>(f.matrix.getType()).getElementType();
  Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(elementType));
  forEachVector(t, f, mn0, k0, [&](Value row, Value col, Value outer, Value inner) {
    for (int64_t e = 0; e < kVector; ++e) {
      Value value = loadInside(kb, f.matrix, outer, kb.addi(inner, kb.index(e)), f.outerExtent,
                               f.innerExtent, zero);
      if (value.getType() != mma.narrowType())
        value = arith::TruncFOp::create(b, loc, mma.narrowType(), value);
      kb.store(tensorCores->asTileElements(value), tiles,
               f.at(mma, buffer, row, kb.addi(col, kb.index(e))));
    }
  });
}

void GemmTensorCoreOps::copyVector(Value tiles, ArrayRef<Value> target, Value matrix,
                                   ArrayRef<Value> source, Value inside) {
  mma.copyAsync(tiles, target, matrix, source,
                inside ? kb.select(inside, kb.index(MmaBuilder::kVector), kb.index(0)) : Value());
}

Value xfmr::gpu::emitMmaGemm(KernelBuilder &kb, const GemmProblem &problem, Emulation emulate,
                             bool warpgroupMma) {
  return MmaGemmKernel(kb, emulate, problem, warpgroupMma).emit();
}
