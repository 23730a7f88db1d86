//===- GpuMmaAttentionBase.h - tensor-core attention building blocks -*- C++ -*-===//
//
// What the bf16/f16 attention kernels on tensor cores (forward, and the
// backward's dK/dV and dQ kernels) share. Each gives a warp 16 rows of one
// sequence (queries, or keys) per row tile, one or two row tiles, and
// streams tiles of `columns` rows of the other through shared memory,
// row-major in 16-bit elements, each row 16 bytes longer than its content
// (the 8 rows of 16 bytes an ldmatrix reads then hit 32 distinct banks).
// Its two kinds of products:
//
//   products(X, T)       X T^T: X the warp's rows, as A fragments in
//                        registers or by ldmatrix from a shared tile of the
//                        block's rows; T a shared tile, its B fragments by
//                        ldmatrix. 16 x columns per row tile, in
//                        accumulators.
//   accumulate(F, T, A)  A += F T: F (16 x columns per row tile, f32
//                        accumulators) rounded and repacked in registers as
//                        A fragments; T's B fragments by ldmatrix.trans.
//                        16 x head dim per row tile.
//
// Each B fragment read from shared memory serves every row tile of the
// warp: two row tiles halve the shared-memory reads per MMA.
//
// With `warpgroupMma` (sm_90a), both products are warpgroup MMAs instead
// (wgmma.mma_async, GpuMma.h): the 4 warps of a warpgroup, one row tile
// each, multiply their 64 rows by a whole shared tile per 16 of K, which the
// tensor cores read from shared memory themselves. The streamed tiles are
// then 8 x 8 core matrices (the layout the MMA's matrix descriptors
// describe): element (row, c) at [row / 8][c / 8][row % 8][c % 8], each
// core matrix 128 contiguous bytes, a tile's row groups paddedDim * 16
// bytes apart. One layout serves both products: K's tile K-major (its rows
// are the product's N), V's N-major (its rows are K).
//
// Emulated, where a GPU thread feeds its own registers to an MMA, a thread
// reads the fragments or factors of the other lanes of its warp from their
// private arrays (written in an earlier phase) and computes its
// accumulators' dot products from them and the shared tiles: the tiling,
// staging, packing and arithmetic are checked on the CPU, the ldmatrix and
// MMA fragment layouts only on a GPU. Emulating warpgroup MMAs, a thread
// reads the shared tiles through the MMAs' matrix descriptors
// (MmaBuilder::describedElement), so their layout bits and offsets are
// checked on the CPU as well.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_CONVERSION_XFMRTOGPU_GPUMMAATTENTIONBASE_H
#define XFMR_LIB_CONVERSION_XFMRTOGPU_GPUMMAATTENTIONBASE_H

#include "GpuAttentionKernelBase.h"
#include "GpuMma.h"
#include "ThreadBlockBuilder.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include "llvm/Support/MathExtras.h"

namespace xfmr::gpu {

class MmaAttentionKernelBase : protected AttentionKernelBase {
public:
  /// Elements a shared row is longer than its content, and of a 16-byte load.
  static constexpr int64_t kPadding = 8;
  static constexpr int64_t kVector = MmaBuilder::kVector;

  static int64_t headDimOf(const cpu::AttentionOperands &in) {
    return mlir::cast<mlir::MemRefType>(in.q.getType()).getDimSize(in.dims.headDim);
  }
  static int64_t dimSteps(int64_t headDim) {
    return llvm::divideCeilSigned(headDim, MmaBuilder::kK);
  }
  /// Where the tiles of a streamTiles operand are read, relative to the
  /// tile: operand tile j from tile j + first to tile j + last (products
  /// left running into the next tile, or issued there).
  struct TileReads {
    int64_t first = 0, last = 0;
  };
  /// Bytes of a shared tile of `rows` rows of 16-bit elements.
  static int64_t tileBytes(int64_t rows, int64_t headDim) {
    return 2 * rows * (dimSteps(headDim) * MmaBuilder::kK + kPadding);
  }

protected:
  static constexpr int64_t kWarpSize = MmaBuilder::kWarpSize;
  static constexpr int64_t kAccumulators = MmaBuilder::kAccumulators;
  MmaAttentionKernelBase(cpu::KernelBuilder &kb, const cpu::AttentionOperands &in,
                         Emulation emulate, int64_t warps, int64_t columns, int64_t rowTiles = 1,
                         bool warpgroupMma = false, int64_t extraStages = 0)
      : AttentionKernelBase(kb, in), emulate(emulate), warpgroupMma(warpgroupMma),
        stages(warpgroupMma ? kStages + 1 + extraStages : kStages), threads(warps * kWarpSize),
        rowTiles(rowTiles), rowsPerWarp(rowTiles * MmaBuilder::kM),
        rowsPerBlock(warps * rowsPerWarp), columns(columns), block(kb, emulate, threads),
        mma(kb, mlir::cast<mlir::MemRefType>(in.q.getType()).getElementType(),
            emulate != Emulation::None),
        steps(dimSteps(headDim)), words(steps * MmaBuilder::kWords),
        paddedDim(steps * MmaBuilder::kK), dimTiles(paddedDim / MmaBuilder::kN),
        columnTiles(columns / MmaBuilder::kN), columnSteps(columns / MmaBuilder::kK) {}

  /// Builds `body(bi, hi, first, shared)` for each block of rowsPerBlock
  /// rows (from `first`) of a sequence of `seq` rows, per head and batch;
  /// `shared` holds a tile per entry of `tileRows` (that many rows of the
  /// padded head dim), then an f32 array per entry of `arrays`.
  void forEachRowBlock(
      int64_t seq, llvm::ArrayRef<int64_t> tileRows,
      llvm::ArrayRef<llvm::SmallVector<int64_t>> arrays,
      llvm::function_ref<void(mlir::Value, mlir::Value, mlir::Value, llvm::ArrayRef<mlir::Value>)>
          body) {
    llvm::SmallVector<llvm::SmallVector<int64_t>> shapes;
    for (int64_t rows : tileRows) {
      if (warpgroupMma)
        shapes.push_back({rows / kVector, paddedDim / kVector, kVector, kVector});
      else
        shapes.push_back({rows, paddedDim + kPadding});
    }
    llvm::append_range(shapes, arrays);
    block.forEachBlock(
        {llvm::divideCeilSigned(seq, rowsPerBlock), heads, batch}, shapes,
        [&](std::array<mlir::Value, 3> ids, llvm::ArrayRef<mlir::Value> shared) {
          body(ids[2], ids[1], kb.muli(ids[0], rowsPerBlock), shared);
        },
        llvm::SmallVector<mlir::Type>(tileRows.size(), mma.narrowType()));
  }

  /// The indices of element (row, c) of a shared tile.
  llvm::SmallVector<mlir::Value> tileAt(mlir::Value row, mlir::Value c) {
    if (!warpgroupMma)
      return {row, c};
    return mma.coreMatrixIndices(row, c);
  }

  /// The rows of a kernel's shared tiles: the stages of its two streamed
  /// tiles, then the block's rows of `blockOperands` operands (RowFactors
  /// in shared memory).
  llvm::SmallVector<int64_t> sharedTileRows(int64_t blockOperands) const {
    llvm::SmallVector<int64_t> rows(2 * stages, columns);
    rows.append(blockOperands, rowsPerBlock);
    return rows;
  }

  /// Stages of the shared arrays a loop over tiles streams through: tile j
  /// in stage j % 2, so that staging it needs no barrier after the reads of
  /// tile j - 1 (the last reads of its stage, tile j - 2's, came before the
  /// barrier after staging tile j - 1): one barrier a tile. With warpgroup
  /// MMAs, a third (`stages`): tile j's second products run during tile
  /// j + 1 (the forward issues them there, behind its first), while tile
  /// j + 2 is staged, so elsewhere; the forward's software pipeline copies
  /// K's tile j + 2 and V's tile j + 1 during tile j (streamTiles). The
  /// backward's kernels take a fourth (`extraStages`) to copy their tiles
  /// two ahead too.
  static constexpr int64_t kStages = 2;
  /// The arrays of the stage, one of `stageArrays`, of the tile `later`
  /// tiles after `tile` (-stages < later < stages; the stage index is
  /// then tile's plus a select, where the tiles of a loop share tile's).
  llvm::SmallVector<mlir::Value> stageOf(mlir::Value tile,
                                         llvm::ArrayRef<llvm::SmallVector<mlir::Value>> stageArrays,
                                         int64_t later = 0) {
    int64_t count = stageArrays.size();
    assert(-count < later && later < count && "a stage index plus a select");
    mlir::Value index = kb.remui(tile, count);
    if (later != 0) {
      index = kb.addi(index, kb.index((later + count) % count));
      index = kb.select(kb.below(index, count), index,
                        mlir::arith::SubIOp::create(b, loc, index, kb.index(count)));
    }
    llvm::SmallVector<mlir::Value> arrays(stageArrays.front());
    for (auto [s, stage] : llvm::enumerate(stageArrays.drop_front())) {
      mlir::Value here = mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::eq, index,
                                                     kb.index(s + 1));
      for (auto [array, candidate] : llvm::zip_equal(arrays, stage))
        array = kb.select(here, candidate, array);
    }
    return arrays;
  }
  /// A kernel's stage arrays from its shared arrays: `perStage` arrays a
  /// stage, stage after stage.
  llvm::SmallVector<llvm::SmallVector<mlir::Value>> stagesOf(llvm::ArrayRef<mlir::Value> shared,
                                                             int64_t perStage) const {
    llvm::SmallVector<llvm::SmallVector<mlir::Value>> result;
    for (int64_t s = 0; s < stages; ++s)
      result.emplace_back(shared.slice(s * perStage, perStage));
    return result;
  }

  /// A thread's place: the first thread of its warp, its lane, the lane's
  /// group g and index q in the group, its warp's first row in the block,
  /// and its first row (the warp's row g; the others are g + 8, then the
  /// same 16 rows on per row tile).
  struct Lane {
    mlir::Value warpThread, lane, group, inGroup, warpRow, top;
  };
  /// ... in a block whose first row is `first`.
  Lane laneOf(mlir::Value t, mlir::Value first) {
    mlir::Value warp = kb.divui(t, kWarpSize), lane = kb.remui(t, kWarpSize);
    auto [group, inGroup] = mma.laneCoordinates(lane);
    mlir::Value warpRow = kb.muli(warp, rowsPerWarp);
    mlir::Value top = kb.addi(first, kb.addi(warpRow, group));
    return {kb.muli(warp, kWarpSize), lane, group, inGroup, warpRow, top};
  }

  /// Entry (i[, j]) of a private array of thread t.
  llvm::SmallVector<mlir::Value> entry(mlir::Value t, int64_t i,
                                       std::optional<int64_t> j = std::nullopt) {
    llvm::SmallVector<mlir::Value> indices = {kb.index(i)};
    if (j)
      indices.push_back(kb.index(*j));
    return block.at(t, indices);
  }
  /// The row of accumulator r of row tile m.
  mlir::Value rowOf(const Lane &lane, int64_t m, int64_t r) {
    return kb.addi(lane.top, kb.index(m * MmaBuilder::kM + (r / 2) * 8));
  }
  /// Where the accumulators of tile n of row tile m lie in an array of
  /// `tiles` accumulator tiles per row tile, and in what products() returns.
  int64_t tileIndex(int64_t m, int64_t n, int64_t tiles) const { return m * tiles + n; }
  int64_t accumulatorIndex(int64_t m, int64_t n, int64_t r, int64_t tiles) const {
    return tileIndex(m, n, tiles) * kAccumulators + r;
  }
  /// Calls `body(m, n, r)` for each accumulator r of each of `tiles` tiles
  /// of each row tile m, in the order of products().
  void forEachAccumulator(int64_t tiles,
                          llvm::function_ref<void(int64_t, int64_t, int64_t)> body) const {
    for (int64_t m = 0; m < rowTiles; ++m)
      for (int64_t n = 0; n < tiles; ++n)
        for (int64_t r = 0; r < kAccumulators; ++r)
          body(m, n, r);
  }
  /// The thread's rows: per row tile, g and g + 8 (`half` 0 and 1);
  /// statistics of row `rowSlot(m, half)` of a [2 rowTiles] private array.
  int64_t rowSlots() const { return 2 * rowTiles; }
  static int64_t rowSlot(int64_t m, int64_t half) { return 2 * m + half; }
  /// The column, in a tile of columns, of accumulator r of tile n.
  mlir::Value columnOf(const Lane &lane, int64_t n, int64_t r) {
    return kb.addi(mma.accumulatorCol(lane.inGroup, r), kb.index(n * MmaBuilder::kN));
  }

  /// Whether elements c to c + width - 1 of a row of a [batch, seq, heads,
  /// head dim] operand (in its layout) of `seq` rows lie inside it, and the
  /// indices of their load, clamped to it.
  std::pair<mlir::Value, llvm::SmallVector<mlir::Value>> clampedRow(mlir::Value bi, mlir::Value hi,
                                                                    mlir::Value row, int64_t seq,
                                                                    mlir::Value c, int64_t width) {
    mlir::Value inside =
        mlir::arith::AndIOp::create(b, loc, kb.below(row, seq), kb.below(c, headDim));
    return {inside,
            in.at(bi, kb.mini(row, kb.index(seq - 1)), hi, kb.mini(c, kb.index(headDim - width)))};
  }

  /// Element (row, c) of such an operand in the MMA's type (f32 operands
  /// rounded), 0 past its `seq` rows or the head dim.
  mlir::Value element(mlir::Value operand, mlir::Value bi, mlir::Value hi, mlir::Value row,
                      int64_t seq, mlir::Value c) {
    auto [inside, indices] = clampedRow(bi, hi, row, seq, c, 1);
    mlir::Value value = kb.load(operand, indices);
    if (value.getType() != mma.narrowType())
      value = mlir::arith::TruncFOp::create(b, loc, mma.narrowType(), value);
    mlir::Value zero = mlir::arith::ConstantOp::create(b, loc, b.getZeroAttr(mma.narrowType()));
    return kb.select(inside, value, zero);
  }

  /// The word of elements 2w and 2w + 1 along the head dim of a row.
  mlir::Value rowWord(mlir::Value operand, mlir::Value bi, mlir::Value hi, mlir::Value row,
                      int64_t seq, mlir::Value w) {
    mlir::Value c = kb.muli(w, 2);
    return mma.pack(mma.bits(element(operand, bi, hi, row, seq, c)),
                    mma.bits(element(operand, bi, hi, row, seq, kb.addi(c, kb.index(1)))));
  }

  /// The A factor of products(): the warp's rows of an operand, as A
  /// fragments in a private array (fragmentArray, loadFragments), or, where
  /// those would take too many registers, as a shared tile of the block's
  /// rows (stageRows), read by ldmatrix at each use - with warpgroup MMAs
  /// always the latter, read by descriptor: ptxas 13.0 (sm_90a) gave
  /// loop-invariant A fragments of wgmma the registers of fragments the
  /// loop writes after them (P, dS), so that every tile but the first read
  /// those (bench/gpu/sass_mix.py checks the SASS for it).
  struct RowFactor {
    mlir::Value array;
    bool shared = false;
  };
  /// A [row tiles * steps, 4] i32 private array for a thread's A fragments
  /// of its warp's rows.
  mlir::Value fragmentArray() {
    return block.privateArray({rowTiles * steps, kAccumulators}, b.getI32Type());
  }
  /// Thread t's A fragments of its warp's rows of `operand` (`seq` rows).
  void loadFragments(mlir::Value t, const Lane &lane, mlir::Value bi, mlir::Value hi,
                     mlir::Value operand, int64_t seq, mlir::Value fragments) {
    for (int64_t m = 0; m < rowTiles; ++m) {
      for (int64_t s = 0; s < steps; ++s) {
        for (int64_t r = 0; r < kAccumulators; ++r) {
          mlir::Value w = kb.addi(lane.inGroup, kb.index(s * MmaBuilder::kWords + (r / 2) * 4));
          mlir::Value row = rowOf(lane, m, (r % 2) * 2);
          kb.store(rowWord(operand, bi, hi, row, seq, w), fragments,
                   entry(t, tileIndex(m, s, steps), r));
        }
      }
    }
  }

  /// A [row tiles * head dim tiles, 4] f32 private array of accumulators,
  /// and one of [row tiles * column tiles, 4].
  mlir::Value dimAccumulators() { return block.privateArray({rowTiles * dimTiles, kAccumulators}); }
  mlir::Value columnAccumulators() {
    return block.privateArray({rowTiles * columnTiles, kAccumulators});
  }
  void zero(mlir::Value t, mlir::Value accumulators, int64_t tiles) {
    for (int64_t n = 0; n < rowTiles * tiles; ++n)
      for (int64_t r = 0; r < kAccumulators; ++r)
        kb.store(kb.f32(0.0), accumulators, entry(t, n, r));
  }

  /// Stores the head-dim accumulators `acc` of thread t into `out`, times
  /// `factor(slot, row)` (rowSlot(m, half): half 0 the lane's row g of row
  /// tile m, 1 its row g + 8), for the rows inside its `seq` rows; `factor`
  /// runs inside the row's branch and may store more of the row.
  void storeRows(mlir::Value t, const Lane &lane, mlir::Value bi, mlir::Value hi, mlir::Value acc,
                 mlir::Value out, int64_t seq,
                 llvm::function_ref<mlir::Value(int64_t, mlir::Value)> factor) {
    for (int64_t m = 0; m < rowTiles; ++m) {
      for (int64_t half = 0; half < 2; ++half) {
        mlir::Value row = rowOf(lane, m, half * 2);
        kb.ifThen(kb.below(row, seq), [&] {
          mlir::Value rowFactor = factor(rowSlot(m, half), row);
          for (int64_t n = 0; n < dimTiles; ++n) {
            for (int64_t r = half * 2; r < half * 2 + 2; ++r) {
              mlir::Value c = columnOf(lane, n, r);
              auto store = [&] {
                kb.storeRounded(
                    kb.mul(kb.load(acc, entry(t, tileIndex(m, n, dimTiles), r)), rowFactor), out,
                    in.at(bi, row, hi, c));
              };
              if ((n + 1) * MmaBuilder::kN > headDim)
                kb.ifThen(kb.below(c, headDim), store);
              else
                store();
            }
          }
        });
      }
    }
  }

  /// 2^x: one ex2.approx (math.exp2 with fastmath afn).
  mlir::Value exp2(mlir::Value x) {
    return mlir::math::Exp2Op::create(
        b, loc, x,
        mlir::arith::FastMathFlagsAttr::get(b.getContext(), mlir::arith::FastMathFlags::afn));
  }
  /// 2^(x - max), 0 where x is -inf (a masked key, or any key of a row
  /// that has seen none).
  mlir::Value probability2(mlir::Value x, mlir::Value max) {
    return kb.select(kb.equals(x, cpu::kNegInf), kb.f32(0.0), exp2(kb.sub(x, max)));
  }
  /// The same for the raw product of a key no mask hides, its base-2 logit
  /// scaled into the exponent (one FFMA, as FlashAttention-2): `max` is a
  /// base-2 logit and finite (the row sees this key).
  mlir::Value productProbability2(mlir::Value product, mlir::Value max) {
    return exp2(kb.fma(product, kb.f32(logit2Factor()), mlir::arith::NegFOp::create(b, loc, max)));
  }
  /// The factor of a product in its base-2 logit without masks: positive
  /// (the ops' verifiers require a positive scale), so the max of products
  /// times it is the max of their logits.
  double logit2Factor() const { return in.scale * llvm::numbers::log2e; }
  /// max(x, y) in one max.f32; a NaN operand is dropped, but a NaN score
  /// still reaches the output through its probability.
  mlir::Value maximum(mlir::Value x, mlir::Value y) {
    return mlir::arith::MaxNumFOp::create(b, loc, x, y);
  }

  /// The base-2 logit of the product of a query and a key row with its
  /// masks and biases: log2(e) (scale product + masks and biases).
  mlir::Value maskedLogit2(mlir::Value product, mlir::Value bi, mlir::Value hi, mlir::Value query,
                           mlir::Value key) {
    mlir::Value s = score(bi, hi, query, key, kb.mul(product, kb.f32(in.scale)));
    return kb.mul(s, kb.f32(llvm::numbers::log2e));
  }
  /// The probability 2^(logit2 - max) of that product, with the masks and
  /// biases where `masked`.
  mlir::Value probability2(mlir::Value product, mlir::Value bi, mlir::Value hi, mlir::Value query,
                           mlir::Value key, mlir::Value max, bool masked) {
    if (!masked)
      return productProbability2(product, max);
    return probability2(maskedLogit2(product, bi, hi, query, key), max);
  }

  /// Whether the key tile at k0 may hide a key from a query row of the
  /// lane's warp (rows are queries, columns keys): it runs past seq_k or,
  /// when causal, past the warp's first row's last key. Null when every
  /// tile may (with biases, which each score adds).
  mlir::Value keyTileNeedsMask(mlir::Value k0, const Lane &lane) {
    using namespace mlir;
    if (in.keyBias || in.bias)
      return Value();
    Value lastKey = kb.addi(k0, kb.index(columns - 1));
    Value masked = kb.below(kb.index(seqK - 1), lastKey);
    if (in.causal) {
      // The warp's first row is the lane's row less its group.
      Value firstRow = arith::SubIOp::create(b, loc, lane.top, lane.group);
      Value firstRowKeys = kb.addi(firstRow, kb.index(seqK - seqQ));
      // Signed: with seq_k < seq_q the first rows see no key at all.
      Value hidden =
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, firstRowKeys, lastKey);
      masked = arith::OrIOp::create(b, loc, masked, hidden);
    }
    return masked;
  }

  /// The first key tile that may hide a key from some row of the block
  /// whose first row is q0: past seq_k, or, when causal, past q0's last
  /// key; 0 with biases, which each score adds.
  mlir::Value firstMaskedTile(mlir::Value q0) {
    if (in.keyBias || in.bias)
      return kb.index(0);
    mlir::Value tile =
        mlir::arith::FloorDivSIOp::create(b, loc, visibleKeys(q0), kb.index(columns));
    return mlir::arith::MaxSIOp::create(b, loc, tile, kb.index(0));
  }

  /// Calls `body(masked)` with masked true where `needsMask` (null: always)
  /// and false elsewhere: a uniform branch per warp.
  void ifMasked(mlir::Value needsMask, llvm::function_ref<void(bool)> body) {
    if (!needsMask)
      return body(true);
    kb.ifThenElse(
        needsMask, [&] { body(true); }, [&] { body(false); });
  }

  /// Whether the rows of `operands` can be staged 16 bytes per copy, or
  /// null where they never can: null unless each has a head dim of whole
  /// 16-byte vectors with unit stride, in the MMA's type; else whether, at
  /// run time, their addresses, offsets and other strides are multiples of
  /// 16 bytes.
  mlir::Value vectorCopies(llvm::ArrayRef<mlir::Value> operands) {
    bool possible =
        headDim % kVector == 0 && llvm::all_of(operands, [&](mlir::Value operand) {
          auto type = mlir::cast<mlir::MemRefType>(operand.getType());
          auto [strides, offset] = type.getStridesAndOffset();
          return type.getElementType() == mma.narrowType() && strides[in.dims.headDim] == 1;
        });
    if (!possible)
      return mlir::Value();
    mlir::Value aligned = mlir::arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1);
    for (mlir::Value operand : operands)
      aligned = mlir::arith::AndIOp::create(b, loc, aligned,
                                            mma.vectorsAligned(operand, in.dims.headDim));
    return aligned;
  }

  /// Elements c to c + 7 of a row, 0 past the `seq` rows or the head dim.
  mlir::Value rowVector(mlir::Value operand, mlir::Value bi, mlir::Value hi, mlir::Value row,
                        int64_t seq, mlir::Value c) {
    auto type = mlir::VectorType::get({kVector}, mma.narrowType());
    auto [inside, indices] = clampedRow(bi, hi, row, seq, c, kVector);
    mlir::Value value =
        mlir::vector::LoadOp::create(b, loc, type, operand, indices,
                                     /*nontemporal=*/false, llvm::Align(2 * kVector));
    mlir::Value zero = mlir::arith::ConstantOp::create(b, loc, b.getZeroAttr(type));
    return kb.select(inside, value, zero);
  }

  /// Calls `body(row, c)` for thread t's 16-byte vectors of a tile of
  /// `rows` rows: row `row` of the tile, elements c to c + 7. Slot j of
  /// thread t holds vector t + j * threads of the tile: row-major (paddedDim
  /// / 8 a row), or, in tiles of core matrices, in their order (8 threads
  /// write one core matrix's 128 bytes, free of bank conflicts).
  void forEachVector(mlir::Value t, int64_t rows,
                     llvm::function_ref<void(mlir::Value, mlir::Value)> body) {
    int64_t chunks = paddedDim / kVector, total = rows * chunks;
    auto place = [&](mlir::Value i) -> std::pair<mlir::Value, mlir::Value> {
      if (!warpgroupMma)
        return {kb.divui(i, chunks), kb.muli(kb.remui(i, chunks), kVector)};
      return mma.coreMatrixVector(i, chunks);
    };
    for (int64_t slot = 0; slot < llvm::divideCeilSigned(total, threads); ++slot) {
      mlir::Value i = kb.addi(t, kb.index(slot * threads));
      auto atSlot = [&] {
        auto [row, c] = place(i);
        body(row, c);
      };
      if ((slot + 1) * threads > total)
        kb.ifThen(kb.below(i, total), atSlot);
      else
        atSlot();
    }
  }

  using Staged = std::pair<mlir::Value, mlir::Value>;
  /// Thread t's vectors of rows [first, first + rows) of the (operand,
  /// tile) pairs copied into the tiles without passing through registers
  /// (nvgpu.device_async_copy: cp.async.cg of 16 bytes, zero-filled past
  /// the `seq` rows and the head dim), as one group of copies, which
  /// waitForCopies waits for. Emulated, the vectors are copied at once.
  /// Where `enabled` is given, the copies are built without branches and
  /// copy only where it holds (elsewhere they zero-fill the tiles).
  void copyAsync(mlir::Value t, mlir::Value bi, mlir::Value hi, mlir::Value first, int64_t seq,
                 int64_t rows, llvm::ArrayRef<Staged> operandsAndTiles, mlir::Value enabled = {}) {
    if (emulate != Emulation::None) {
      auto copies = [&] {
        forEachVector(t, rows, [&](mlir::Value row, mlir::Value c) {
          for (auto [operand, tile] : operandsAndTiles)
            mlir::vector::StoreOp::create(b, loc,
                                          rowVector(operand, bi, hi, kb.addi(first, row), seq, c),
                                          tile, tileAt(row, c),
                                          /*nontemporal=*/false, llvm::Align(2 * kVector));
        });
      };
      return enabled ? kb.ifThen(enabled, copies) : copies();
    }
    // Rows clamped to the sequence (and the zero fill sized) only where it
    // ends inside the tile: elsewhere a copy's address is the row's, without
    // the min and select (sm_90, head-dim-128 forward: its hot loop with
    // both paths is 46 instructions shorter than with the clamped one).
    auto copies = [&](bool clampRows) {
      forEachVector(t, rows, [&](mlir::Value row, mlir::Value c) {
        mlir::Value source = kb.addi(first, row);
        for (auto [operand, tile] : operandsAndTiles) {
          mlir::Value inside;
          llvm::SmallVector<mlir::Value> indices;
          if (clampRows) {
            std::tie(inside, indices) = clampedRow(bi, hi, source, seq, c, kVector);
          } else {
            indices = in.at(bi, source, hi, kb.mini(c, kb.index(headDim - kVector)));
            if (paddedDim > headDim)
              inside = kb.below(c, headDim);
          }
          if (enabled)
            inside = inside ? mlir::arith::AndIOp::create(b, loc, inside, enabled) : enabled;
          mlir::Value readElements =
              inside ? kb.select(inside, kb.index(kVector), kb.index(0)) : mlir::Value();
          mma.copyAsync(tile, tileAt(row, c), operand, indices, readElements);
        }
      });
    };
    if (enabled) {
      // Where whole tiles fill the sequence, a tile past its end (whose
      // copies copy nothing) takes the last one's addresses: no row is
      // clamped, and a copy's address is its first's plus a constant.
      bool wholeTiles = seq % rows == 0;
      if (wholeTiles)
        first = kb.mini(first, kb.index(seq - rows));
      copies(/*clampRows=*/!wholeTiles);
      return mma.commitCopies();
    }
    kb.ifThenElse(
        kb.below(kb.addi(first, kb.index(rows - 1)), seq), [&] { copies(false); },
        [&] { copies(true); });
    mma.commitCopies();
  }
  /// Waits for the thread's groups of copies but the last `pending` (the
  /// block's copies are then visible to all its threads after a barrier).
  void waitForCopies(int64_t pending = 0) {
    if (emulate == Emulation::None)
      mma.waitForCopies(pending);
  }
  /// Thread t's share of staging rows [first, first + rows) of the
  /// (operand, tile) pairs element by element, consecutive threads along
  /// the head dim.
  void stageElements(mlir::Value t, mlir::Value bi, mlir::Value hi, mlir::Value first, int64_t seq,
                     int64_t rows, llvm::ArrayRef<Staged> operandsAndTiles) {
    kb.forLoop(t, kb.index(rows * paddedDim), threads, [&](mlir::Value i) {
      mlir::Value row = kb.divui(i, paddedDim), c = kb.remui(i, paddedDim);
      for (auto [operand, tile] : operandsAndTiles)
        kb.store(element(operand, bi, hi, kb.addi(first, row), seq, c), tile, tileAt(row, c));
    });
  }
  /// Thread t's share of staging the block's rows [first, first +
  /// rowsPerBlock) of `operand` into the shared `tile` (a RowFactor):
  /// asynchronously where `aligned` (vectorCopies; not null), as one group
  /// of copies, else element by element. streamTiles waits for the copies
  /// (at its first tile, else after its loop) if its operands' `aligned`
  /// holds where this one's does; its first barrier publishes the tile.
  void stageRows(mlir::Value t, mlir::Value bi, mlir::Value hi, mlir::Value first, int64_t seq,
                 mlir::Value operand, mlir::Value tile, mlir::Value aligned) {
    auto elements = [&] { stageElements(t, bi, hi, first, seq, rowsPerBlock, {{operand, tile}}); };
    if (!aligned)
      return elements();
    kb.ifThenElse(
        aligned,
        [&] {
          copyAsync(t, bi, hi, first, seq, rowsPerBlock, {{operand, tile}});
        },
        elements);
  }

  /// The warp's rows of each of `count` operands as RowFactors: A fragments
  /// in private arrays, or, where `inShared`, the block's rows in the
  /// shared tiles `tiles`.
  llvm::SmallVector<RowFactor> rowFactors(int64_t count, bool inShared,
                                          llvm::ArrayRef<mlir::Value> tiles) {
    llvm::SmallVector<RowFactor> factors;
    for (int64_t i = 0; i < count; ++i)
      factors.push_back(inShared ? RowFactor{tiles[i], /*shared=*/true}
                                 : RowFactor{fragmentArray()});
    return factors;
  }
  /// Thread t's part of filling `factors` with the rows of `operands` (`seq`
  /// rows, the block's from `first`): fragments loaded, or rows staged
  /// (stageRows, asynchronously where `aligned`).
  void loadRows(mlir::Value t, const Lane &lane, mlir::Value bi, mlir::Value hi, mlir::Value first,
                int64_t seq, llvm::ArrayRef<mlir::Value> operands,
                llvm::ArrayRef<RowFactor> factors, mlir::Value aligned) {
    for (auto [operand, factor] : llvm::zip_equal(operands, factors)) {
      if (factor.shared)
        stageRows(t, bi, hi, first, seq, operand, factor.array, aligned);
      else
        loadFragments(t, lane, bi, hi, operand, seq, factor.array);
    }
  }

  /// Thread t's part of copying the next tile of a streamTiles loop.
  using CopyNext = llvm::function_ref<void(mlir::Value)>;
  /// A tile of a streamTiles loop: its first row, the arrays of its stage,
  /// and copyNext(t); `peeled` and `masked` as streamTiles says.
  struct StreamedTile {
    mlir::Value first;
    llvm::ArrayRef<mlir::Value> stage;
    CopyNext copyNext;
    bool peeled = false;
    std::optional<bool> masked;
  };
  /// Where masks split a streamTiles loop: the tiles before `split` are
  /// the ones that may need masks where `maskedFirst` (the dK/dV kernel's
  /// query tiles, the causal ones first), else those from it (key tiles).
  struct MaskSplit {
    mlir::Value split;
    bool maskedFirst = false;
  };
  /// A loop over the tiles [begin, end) of `columns` rows of the
  /// `operands` (`seq` rows each) through shared stages: each of
  /// `stageArrays` holds each operand's tile, in order, then any other
  /// arrays.
  /// Where 16-byte copies are possible (readsVectors, vectorsAligned at
  /// run time), each thread copies its part of the next tile into its
  /// stage asynchronously while the current tile is computed, which hides
  /// the copies' latency; else it loads the tile element by element. Per
  /// tile, `compute(tile)` builds the phases that read the stage, after
  /// the tile's one barrier; its first phase calls tile.copyNext(t) (which
  /// copies nothing where copies are not possible) where it hides best,
  /// e.g. while the tile's first products run.
  /// `stageMore(t, first, stage)`, if given, stores the stage's other
  /// arrays (rows from `first`) before the barrier.
  ///
  /// Where `reads` is given (a TileReads per operand; warpgroup MMAs,
  /// whose products run on), the copies run as far ahead as the stages
  /// allow instead: each operand's tile is copied `distance` tiles before
  /// the one that first reads it (into the stage last read the tile
  /// before), a group per operand, so a tile waits only for the copies
  /// issued `distance` tiles before. With three stages and V read a tile
  /// late (the sm_90a forward) K is copied two tiles ahead and V one; with
  /// four and K or Q read up to a tile late (the sm_90a backward), both
  /// operands two. ptxas issues a tile's copies late in its loop (after
  /// the softmax's exponentials): copied one tile ahead, they had the
  /// rest of that tile to land.
  ///
  /// Where `masks` is given (software pipelines of warpgroup MMAs), the
  /// loop holds no branch of its own: ptxas waits for all warpgroup MMAs
  /// in flight where branches join. The first tile is built apart
  /// (`peeled`: it has no predecessor to finish), the tiles after it in
  /// two loops split at `masks.split`, their tiles with `masked` true on
  /// the masked side (MaskSplit), false on the other, for compute to build
  /// with masks, or without; the loops are built twice, for 16-byte copies
  /// and element by element, and the copies of a tile past the end copy
  /// nothing.
  void streamTiles(mlir::Value begin, mlir::Value end, mlir::Value bi, mlir::Value hi, int64_t seq,
                   llvm::ArrayRef<mlir::Value> operands,
                   llvm::ArrayRef<llvm::SmallVector<mlir::Value>> stageArrays,
                   llvm::function_ref<void(const StreamedTile &)> compute,
                   llvm::function_ref<void(mlir::Value, mlir::Value, llvm::ArrayRef<mlir::Value>)>
                       stageMore = nullptr,
                   std::optional<MaskSplit> masks = std::nullopt,
                   llvm::ArrayRef<TileReads> reads = {}) {
    auto staged = [&](llvm::ArrayRef<mlir::Value> stage) {
      return llvm::map_to_vector(llvm::zip(operands, stage), [](auto pair) {
        return Staged(std::get<0>(pair), std::get<1>(pair));
      });
    };
    mlir::Value aligned = vectorCopies(operands);
    // `vectors`: whether copies are possible - where null, decided at run
    // time by `aligned` (a branch), else statically.
    auto copyTile = [&](mlir::Value t, mlir::Value tile, std::optional<bool> vectors) {
      if (!aligned || vectors == false)
        return;
      llvm::SmallVector<mlir::Value> stage = stageOf(tile, stageArrays);
      mlir::Value first = kb.muli(tile, columns);
      if (vectors)
        return copyAsync(t, bi, hi, first, seq, columns, staged(stage), kb.below(tile, end));
      kb.ifThen(mlir::arith::AndIOp::create(b, loc, aligned, kb.below(tile, end)),
                [&] { copyAsync(t, bi, hi, first, seq, columns, staged(stage)); });
    };
    // With `reads`: the copies tile `tile` issues, or, `offset` tiles
    // before `begin`, the ones issued in its stead: operand i's tile
    // `distance - reads[i].first` later. Each tile commits a group per
    // operand, past the end too (copying nothing), so that a wait can
    // leave the groups of the `distance - 1` tiles after it in flight.
    int64_t spread = 0;
    for (const TileReads &read : reads)
      spread = std::max(spread, read.last - read.first);
    int64_t distance = stages - 1 - spread;
    assert((reads.empty() || reads.size() == operands.size()) && "a TileReads per operand");
    assert(llvm::all_of(reads,
                        [&](const TileReads &read) {
                          return 0 <= read.first && read.first < distance;
                        }) &&
           "a stage free for each tile copied ahead");
    int64_t copiesInFlight = reads.empty() ? 0 : (distance - 1) * operands.size();
    auto copyAhead = [&](mlir::Value t, mlir::Value tile, std::optional<bool> vectors,
                         int64_t offset = 0) {
      auto copies = [&] {
        for (auto [i, operand] : llvm::enumerate(operands)) {
          int64_t later = offset + distance - reads[i].first;
          if (later < 0)
            continue;
          mlir::Value copied = kb.addi(tile, kb.index(later));
          copyAsync(t, bi, hi, kb.muli(copied, columns), seq, columns,
                    {{operand, stageOf(tile, stageArrays, later)[i]}}, kb.below(copied, end));
        }
      };
      if (!aligned || vectors == false)
        return;
      if (vectors)
        return copies();
      kb.ifThen(aligned, copies);
    };
    auto step = [&](mlir::Value tile, std::optional<bool> vectors, bool peeled,
                    std::optional<bool> masked) {
      mlir::Value first = kb.muli(tile, columns);
      llvm::SmallVector<mlir::Value> stage = stageOf(tile, stageArrays);
      block.phase([&](mlir::Value t) {
        auto elements = [&] { stageElements(t, bi, hi, first, seq, columns, staged(stage)); };
        if (!aligned || vectors == false)
          elements();
        else if (vectors)
          waitForCopies(copiesInFlight);
        else
          kb.ifThenElse(
              aligned, [&] { waitForCopies(copiesInFlight); }, elements);
        if (stageMore)
          stageMore(t, first, stage);
        if (warpgroupMma && emulate == Emulation::None)
          mma.fenceSharedForWarpgroupMma();
      });
      mlir::Value next = kb.addi(tile, kb.index(1));
      compute({first, stage,
               [&](mlir::Value t) {
                 if (reads.empty())
                   copyTile(t, next, vectors);
                 else
                   copyAhead(t, tile, vectors);
               },
               peeled, masked});
    };
    // The copies before the first tile.
    auto prologue = [&](std::optional<bool> vectors) {
      if (!aligned || vectors == false)
        return;
      block.phase(
          [&](mlir::Value t) {
            if (reads.empty())
              return copyTile(t, begin, vectors);
            for (int64_t offset = -distance; offset < 0; ++offset)
              copyAhead(t, begin, vectors, offset);
          },
          /*barrier=*/false);
    };
    if (!masks) {
      prologue(std::nullopt);
      kb.forLoop(begin, end, 1, [&](mlir::Value tile) {
        step(tile, std::nullopt, /*peeled=*/false, std::nullopt);
      });
    } else {
      auto pipeline = [&](bool vectors) {
        prologue(vectors);
        kb.ifThen(kb.below(begin, end),
                  [&] { step(begin, vectors, /*peeled=*/true, std::nullopt); });
        mlir::Value second = kb.addi(begin, kb.index(1));
        mlir::Value split =
            kb.mini(mlir::arith::MaxSIOp::create(b, loc, masks->split, second), end);
        kb.forLoop(second, split, 1, [&](mlir::Value tile) {
          step(tile, vectors, /*peeled=*/false, masks->maskedFirst);
        });
        kb.forLoop(
            mlir::arith::MaxSIOp::create(b, loc, split, second), end, 1,
            [&](mlir::Value tile) { step(tile, vectors, /*peeled=*/false, !masks->maskedFirst); });
      };
      if (aligned)
        kb.ifThenElse(
            aligned, [&] { pipeline(true); }, [&] { pipeline(false); });
      else
        pipeline(false);
    }
    // No copy stays in flight past the loop: rows staged with the first
    // tile (stageRows) still are where there was no tile, and the last
    // tiles of operands first read a tile late are waited for, and
    // published, here.
    bool readAfter = llvm::any_of(reads, [](const TileReads &read) { return read.first > 0; });
    if (aligned && emulate == Emulation::None)
      block.phase(
          [&](mlir::Value) {
            waitForCopies();
            if (readAfter && warpgroupMma)
              mma.fenceSharedForWarpgroupMma();
          },
          /*barrier=*/readAfter);
  }

  /// X T^T for the rows X of thread t's warp and the shared tile T:
  /// accumulator r of column tile n of row tile m at accumulatorIndex(m, n,
  /// r, columnTiles).
  /// `whileMultiplying`, if given, builds code that runs meanwhile: after
  /// the warpgroup MMAs are issued, before they are waited for (elsewhere,
  /// before the products). The wait also makes the head-dim accumulators
  /// `pending` of an earlier accumulate() readable, if given.
  llvm::SmallVector<mlir::Value> products(mlir::Value t, const Lane &lane, const RowFactor &x,
                                          mlir::Value tile,
                                          llvm::function_ref<void()> whileMultiplying = nullptr,
                                          mlir::Value pending = {}) {
    if (emulate == Emulation::None && warpgroupMma)
      return productsOnWarpgroup(t, x, tile, whileMultiplying, pending);
    if (whileMultiplying)
      whileMultiplying();
    return emulate == Emulation::None ? productsOnTensorCores(t, lane, x, tile)
                                      : productsEmulated(t, lane, x, tile);
  }

  /// The products X T^T and Y U^T (products()), built so that the second
  /// needs no wait for the first: warpgroup MMAs issue both, then build
  /// `whileMultiplying`, then wait for both at once.
  std::pair<llvm::SmallVector<mlir::Value>, llvm::SmallVector<mlir::Value>>
  productPair(mlir::Value t, const Lane &lane, const RowFactor &x, mlir::Value xTile,
              const RowFactor &y, mlir::Value yTile,
              llvm::function_ref<void()> whileMultiplying = nullptr) {
    if (emulate != Emulation::None || !warpgroupMma)
      return {products(t, lane, x, xTile, whileMultiplying), products(t, lane, y, yTile)};
    llvm::SmallVector<mlir::Value> both = issueOnWarpgroup(t, x, xTile);
    size_t firstCount = both.size();
    llvm::append_range(both, issueOnWarpgroup(t, y, yTile));
    if (whileMultiplying)
      whileMultiplying();
    both = waitForProducts(t, both, /*pending=*/0);
    llvm::ArrayRef<mlir::Value> waited(both);
    return {llvm::SmallVector<mlir::Value>(waited.take_front(firstCount)),
            llvm::SmallVector<mlir::Value>(waited.drop_front(firstCount))};
  }

  /// A software-pipelined tile's products X T^T and Y U^T (as
  /// productPair, into the column accumulators `xArray` and `yArray`): a
  /// phase issues both, then `updateBefore(t, lane)` (the tile before's
  /// head-dim updates, one group of MMAs; none for a peeled tile); the
  /// next waits for the products, leaving the updates running, copies the
  /// next tiles (tile.copyNext) and builds `body(t, lane, xProducts,
  /// yProducts)`. Two phases, so that emulated, the updates read every
  /// lane's factors before any lane's body overwrites them. `first`: the
  /// block's first row.
  void pipelinedProductPair(
      const StreamedTile &tile, mlir::Value first, const RowFactor &x, mlir::Value xTile,
      const RowFactor &y, mlir::Value yTile, mlir::Value xArray, mlir::Value yArray,
      llvm::function_ref<void(mlir::Value, const Lane &)> updateBefore,
      llvm::function_ref<void(mlir::Value, const Lane &, llvm::ArrayRef<mlir::Value>,
                              llvm::ArrayRef<mlir::Value>)>
          body) {
    block.phase(
        [&](mlir::Value t) {
          Lane lane = laneOf(t, first);
          storeAccumulators(t, xArray, issueProducts(t, lane, x, xTile));
          storeAccumulators(t, yArray, issueProducts(t, lane, y, yTile));
          if (!tile.peeled)
            updateBefore(t, lane);
        },
        /*barrier=*/false);
    block.phase(
        [&](mlir::Value t) {
          llvm::SmallVector<mlir::Value> both = loadAccumulators(t, xArray, columnTiles);
          llvm::append_range(both, loadAccumulators(t, yArray, columnTiles));
          both = waitForProducts(t, both, tile.peeled ? 0 : 1);
          tile.copyNext(t);
          llvm::ArrayRef<mlir::Value> waited(both);
          body(t, laneOf(t, first), waited.take_front(waited.size() / 2),
               waited.drop_front(waited.size() / 2));
        },
        /*barrier=*/false);
  }

  /// products() left running where they are warpgroup MMAs (else done at
  /// once): readable after waitForProducts.
  llvm::SmallVector<mlir::Value> issueProducts(mlir::Value t, const Lane &lane, const RowFactor &x,
                                               mlir::Value tile) {
    if (emulate == Emulation::None && warpgroupMma)
      return issueOnWarpgroup(t, x, tile);
    return products(t, lane, x, tile);
  }
  /// Waits for issueProducts' `products` (passed through) until at most
  /// `pending` later groups of warpgroup MMAs are in flight.
  llvm::SmallVector<mlir::Value>
  waitForProducts(mlir::Value t, llvm::ArrayRef<mlir::Value> products, int64_t pending) {
    return waitForAccumulators(t, {}, pending, products);
  }

  /// acc += F T: F thread t's warp's [16 row tiles, columns] accumulators
  /// `factors` ([row tiles * column tiles, 4]), rounded to the MMA's type;
  /// T a shared tile. Warpgroup MMAs are left running: `acc` is readable
  /// after the next products() that names it pending, or after
  /// waitForAccumulators; T must stay until then. Where not `commit`, they
  /// join the next accumulate()'s group of MMAs.
  void accumulate(mlir::Value t, const Lane &lane, mlir::Value factors, mlir::Value tile,
                  mlir::Value acc, bool commit = true) {
    if (emulate != Emulation::None)
      accumulateEmulated(t, lane, factors, tile, acc);
    else if (warpgroupMma)
      accumulateOnWarpgroup(t, factors, tile, acc, commit);
    else
      accumulateOnTensorCores(t, lane, factors, tile, acc);
  }

  /// Thread t's entries of the [row tiles * tiles, 4] accumulator array
  /// `array`, in order, and their store.
  llvm::SmallVector<mlir::Value> loadAccumulators(mlir::Value t, mlir::Value array, int64_t tiles) {
    llvm::SmallVector<mlir::Value> values;
    for (int64_t n = 0; n < rowTiles * tiles; ++n)
      for (int64_t r = 0; r < kAccumulators; ++r)
        values.push_back(kb.load(array, entry(t, n, r)));
    return values;
  }
  void storeAccumulators(mlir::Value t, mlir::Value array, llvm::ArrayRef<mlir::Value> values) {
    for (auto [i, value] : llvm::enumerate(values))
      kb.store(value, array, entry(t, i / kAccumulators, i % kAccumulators));
  }
  /// Waits for the warpgroup MMAs accumulate() left running into the
  /// head-dim accumulators `arrays` (none elsewhere), until at most
  /// `pending` later groups of MMAs are in flight; returns `alsoWaited`,
  /// results of later MMAs the wait completes too, readable.
  llvm::SmallVector<mlir::Value> waitForAccumulators(mlir::Value t,
                                                     llvm::ArrayRef<mlir::Value> arrays,
                                                     int64_t pending = 0,
                                                     llvm::ArrayRef<mlir::Value> alsoWaited = {}) {
    if (!warpgroupMma || emulate != Emulation::None)
      return llvm::SmallVector<mlir::Value>(alsoWaited);
    llvm::SmallVector<mlir::Value> values;
    for (mlir::Value acc : arrays)
      llvm::append_range(values, loadAccumulators(t, acc, dimTiles));
    int64_t dims = values.size();
    llvm::append_range(values, alsoWaited);
    values = mma.waitForWarpgroupMma(values, pending);
    llvm::ArrayRef<mlir::Value> waited(values);
    int64_t size = dims / std::max<int64_t>(arrays.size(), 1);
    for (auto [i, acc] : llvm::enumerate(arrays))
      storeAccumulators(t, acc, waited.slice(i * size, size));
    return llvm::SmallVector<mlir::Value>(waited.drop_front(dims));
  }

  Emulation emulate;
  /// Products by warpgroup MMAs from tiles of core matrices (sm_90a).
  bool warpgroupMma;
  /// Shared stages of the streamed tiles.
  int64_t stages;
  /// Threads of a block, 16-row tiles of a warp, rows of a warp and of a
  /// block, and rows of a streamed tile.
  int64_t threads, rowTiles, rowsPerWarp, rowsPerBlock, columns;
  ThreadBlockBuilder block;
  MmaBuilder mma;
  /// MMA steps along the head dim, its words, its length padded to steps,
  /// and the accumulator tiles along it; accumulator tiles and MMA steps
  /// along a tile's columns.
  int64_t steps, words, paddedDim, dimTiles, columnTiles, columnSteps;

private:
  /// The A fragment of step `step` of row tile m of X.
  llvm::SmallVector<mlir::Value> rowFragment(mlir::Value t, const Lane &lane, const RowFactor &x,
                                             int64_t m, int64_t step) {
    if (x.shared) {
      // Lane l addresses row l % 16 of the row tile at column 16 step +
      // 8 (l / 16): the 8 x 8 matrices of rows 0-7 and 8-15 at columns
      // 0-7, then 8-15, are A registers 0-3.
      mlir::Value row =
          kb.addi(kb.addi(lane.warpRow, kb.remui(lane.lane, 16)), kb.index(m * MmaBuilder::kM));
      mlir::Value col =
          kb.addi(kb.muli(kb.divui(lane.lane, 16), 8), kb.index(step * MmaBuilder::kK));
      return mma.loadMatrices(x.array, {row, col}, 4, /*transposed=*/false);
    }
    llvm::SmallVector<mlir::Value> words;
    for (int64_t r = 0; r < kAccumulators; ++r)
      words.push_back(kb.load(x.array, entry(t, tileIndex(m, step, steps), r)));
    return words;
  }

  llvm::SmallVector<mlir::Value> productsOnTensorCores(mlir::Value t, const Lane &lane,
                                                       const RowFactor &x, mlir::Value tile) {
    // B of column tile n at step s is T[8n + g][16 s + 2q, + 1] and
    // [16 s + 8 + 2q, + 1]: the 8 x 8 matrices of T's rows 8n at columns
    // 16 s and 16 s + 8, those of column tile n + 1 with them in one
    // ldmatrix (lane l addresses row l % 8 of matrix l / 8), each for every
    // row tile. One step at a time: a row tile's A fragment is live for
    // one step only.
    static_assert(kAccumulators == 4, "two column tiles per ldmatrix");
    assert(columnTiles % 2 == 0 && "tiles of columns in pairs");
    mlir::Value row = kb.addi(kb.remui(lane.lane, 8), kb.muli(kb.divui(lane.lane, 16), 8));
    mlir::Value colInStep = kb.muli(kb.remui(kb.divui(lane.lane, 8), 2), 8);
    llvm::SmallVector<mlir::Value> result(rowTiles * columnTiles * kAccumulators, kb.f32(0.0));
    for (int64_t s = 0; s < steps; ++s) {
      llvm::SmallVector<llvm::SmallVector<mlir::Value>> a;
      for (int64_t m = 0; m < rowTiles; ++m)
        a.push_back(rowFragment(t, lane, x, m, s));
      mlir::Value col = kb.addi(colInStep, kb.index(s * MmaBuilder::kK));
      for (int64_t n = 0; n < columnTiles; n += 2) {
        llvm::SmallVector<mlir::Value> bWords = mma.loadMatrices(
            tile, {kb.addi(row, kb.index(n * MmaBuilder::kN)), col}, 4, /*transposed=*/false);
        for (int64_t pair = 0; pair < 2; ++pair) {
          for (int64_t m = 0; m < rowTiles; ++m) {
            auto acc = llvm::MutableArrayRef<mlir::Value>(result).slice(
                accumulatorIndex(m, n + pair, 0, columnTiles), kAccumulators);
            llvm::SmallVector<mlir::Value> updated =
                mma.multiply(a[m], llvm::ArrayRef<mlir::Value>(bWords).slice(pair * 2, 2), acc);
            llvm::copy(updated, acc.begin());
          }
        }
      }
    }
    return result;
  }

  /// The B of warpgroup MMAs of the 16 of K from step `step` of T: K along
  /// T's rows where `kAlongRows` (accumulate(): T N-major), else along its
  /// columns (products(): T K-major).
  MmaBuilder::SharedOperand stepOperand(mlir::Value tile, int64_t step, bool kAlongRows) {
    int64_t k0 = step * MmaBuilder::kK;
    return mma.matrixDescriptor(tile, {},
                                kAlongRows ? MmaBuilder::coreMatrixOffset(k0, 0, paddedDim)
                                           : MmaBuilder::coreMatrixOffset(0, k0, paddedDim),
                                paddedDim, kAlongRows);
  }

  /// The A of warpgroup MMAs of head-dim step s of products() whose X is
  /// the block's rows in the shared tile `rows` (K-major): the rows of
  /// thread t's warpgroup.
  MmaBuilder::SharedOperand rowsOperand(mlir::Value t, mlir::Value rows, int64_t s) {
    mlir::Value first = kb.muli(block.warpUniform(kb.divui(t, MmaBuilder::kWarpgroupThreads)),
                                MmaBuilder::kWarpgroupRows);
    return mma.matrixDescriptor(rows, mma.coreMatrixIndices(first, kb.index(0)),
                                MmaBuilder::coreMatrixOffset(0, s * MmaBuilder::kK, paddedDim),
                                paddedDim, /*kAlongRows=*/false);
  }

  /// Emulates products with T over `words` words (pairs of elements along
  /// K) by `update(first, end, tElement)` over the words [first, end), where
  /// `tElement(mn, k)` is T's element at N mn and K k (T's row k where
  /// `kAlongRows`, else its row mn): all words at once; or, emulating
  /// warpgroup MMAs, a step (16 of K) at a time, T read through the step's
  /// descriptor (stepOperand, describedElement) - so that the descriptors are
  /// checked on the CPU too.
  void forEachEmulatedStep(
      mlir::Value tile, int64_t words, bool kAlongRows,
      llvm::function_ref<void(int64_t, int64_t,
                              llvm::function_ref<mlir::Value(mlir::Value, mlir::Value)>)>
          update) {
    if (!warpgroupMma)
      return update(0, words, [&](mlir::Value mn, mlir::Value k) {
        return widen(kb.load(tile, kAlongRows ? tileAt(k, mn) : tileAt(mn, k)));
      });
    for (int64_t step = 0; step * MmaBuilder::kWords < words; ++step) {
      MmaBuilder::DescribedTile described =
          mma.describedTile(tile, stepOperand(tile, step, kAlongRows));
      update(step * MmaBuilder::kWords, (step + 1) * MmaBuilder::kWords,
             [&](mlir::Value mn, mlir::Value k) {
               return widen(mma.describedElement(described, mn, kb.remui(k, MmaBuilder::kK)));
             });
    }
  }

  /// The same products by warpgroup MMAs, one per head-dim step, issued as
  /// one group of MMAs.
  llvm::SmallVector<mlir::Value> issueOnWarpgroup(mlir::Value t, const RowFactor &x,
                                                  mlir::Value tile) {
    assert(rowTiles == 1 && "a warp's 16 rows of a warpgroup's 64");
    assert(x.shared && "loop-invariant rows by descriptor (RowFactor)");
    mma.fenceForWarpgroupMma({});
    llvm::SmallVector<mlir::Value> acc;
    for (int64_t s = 0; s < steps; ++s) {
      MmaBuilder::SharedOperand b = stepOperand(tile, s, /*kAlongRows=*/false);
      acc = mma.warpgroupMultiply(rowsOperand(t, x.array, s), b, acc, columns);
    }
    mma.commitWarpgroupMma();
    return acc;
  }
  /// ... and waited for.
  llvm::SmallVector<mlir::Value> productsOnWarpgroup(mlir::Value t, const RowFactor &x,
                                                     mlir::Value tile,
                                                     llvm::function_ref<void()> whileMultiplying,
                                                     mlir::Value pending) {
    llvm::SmallVector<mlir::Value> acc = issueOnWarpgroup(t, x, tile);
    if (whileMultiplying)
      whileMultiplying();
    // One wait for both: the head-dim accumulators' MMAs came first.
    llvm::SmallVector<mlir::Value> pendingArrays;
    if (pending)
      pendingArrays.push_back(pending);
    return waitForAccumulators(t, pendingArrays, /*pending=*/0, acc);
  }

  /// The update of accumulate() by warpgroup MMAs, one per column step;
  /// left running.
  void accumulateOnWarpgroup(mlir::Value t, mlir::Value factors, mlir::Value tile, mlir::Value acc,
                             bool commit) {
    assert(rowTiles == 1 && "a warp's 16 rows of a warpgroup's 64");
    llvm::SmallVector<mlir::Value> registers;
    for (int64_t ks = 0; ks < columnSteps; ++ks)
      llvm::append_range(registers, factorFragment(t, factors, 0, ks));
    int64_t aWords = registers.size();
    llvm::append_range(registers, loadAccumulators(t, acc, dimTiles));
    registers = mma.fenceForWarpgroupMma(registers);
    llvm::ArrayRef<mlir::Value> a(registers);
    llvm::SmallVector<mlir::Value> sums(a.drop_front(aWords));
    for (int64_t ks = 0; ks < columnSteps; ++ks)
      sums = mma.warpgroupMultiply(a.slice(ks * kAccumulators, kAccumulators),
                                   stepOperand(tile, ks, /*kAlongRows=*/true), sums, paddedDim);
    if (commit)
      mma.commitWarpgroupMma();
    storeAccumulators(t, acc, sums);
  }

  /// The same products, each a dot product over the words of the lane's
  /// row (from the fragments of the lane holding them, or the shared tile)
  /// and T's row.
  llvm::SmallVector<mlir::Value> productsEmulated(mlir::Value t, const Lane &lane,
                                                  const RowFactor &x, mlir::Value tile) {
    using namespace mlir;
    SmallVector<Value> tileRows;
    for (int64_t m = 0; m < rowTiles; ++m)
      for (int64_t n = 0; n < columnTiles; ++n)
        for (int64_t r = 0; r < kAccumulators; ++r)
          tileRows.push_back(columnOf(lane, n, r));
    SmallVector<Value> sums(tileRows.size(), kb.f32(0.0));
    forEachEmulatedStep(
        tile, words, /*kAlongRows=*/false, [&](int64_t first, int64_t end, auto tElement) {
          // Shared rows of warpgroup MMAs are read through their descriptor.
          std::optional<MmaBuilder::DescribedTile> xTile;
          if (x.shared && warpgroupMma)
            xTile = mma.describedTile(x.array, rowsOperand(t, x.array, first / MmaBuilder::kWords));
          ValueRange updated =
              kb.forLoop(kb.index(first), kb.index(end), 1, sums, [&](Value w, ValueRange carried) {
                // Word w of row g (+ 8) of row tile m is in register (row / 8) +
                // 2 ((w % 8) / 4) of step w / 8 of lane 4 g + w % 4.
                Value holder =
                    kb.addi(lane.warpThread, kb.addi(kb.muli(lane.group, 4), kb.remui(w, 4)));
                Value step = kb.divui(w, MmaBuilder::kWords);
                Value highWords = kb.muli(kb.divui(kb.remui(w, MmaBuilder::kWords), 4), 2);
                Value c = kb.muli(w, 2);
                SmallVector<Value> next;
                for (auto [i, partial] : llvm::enumerate(carried)) {
                  int64_t r = i % kAccumulators, m = i / (columnTiles * kAccumulators);
                  Value xLow, xHigh;
                  if (xTile) {
                    // The warp's row of the warpgroup's 64.
                    Value row = kb.addi(
                        kb.addi(kb.remui(lane.warpRow, MmaBuilder::kWarpgroupRows), lane.group),
                        kb.index((r / 2) * 8));
                    Value k = kb.remui(c, MmaBuilder::kK);
                    xLow = widen(mma.describedElement(*xTile, row, k));
                    xHigh = widen(mma.describedElement(*xTile, row, kb.addi(k, kb.index(1))));
                  } else if (x.shared) {
                    Value row = kb.addi(kb.addi(lane.warpRow, lane.group),
                                        kb.index(m * MmaBuilder::kM + (r / 2) * 8));
                    xLow = widen(kb.load(x.array, {row, c}));
                    xHigh = widen(kb.load(x.array, {row, kb.addi(c, kb.index(1))}));
                  } else {
                    Value reg = kb.addi(highWords, kb.index(r / 2));
                    Value fragment = kb.addi(step, kb.index(m * steps));
                    std::tie(xLow, xHigh) =
                        mma.unpack(kb.load(x.array, block.at(holder, {fragment, reg})));
                  }
                  Value tLow = tElement(tileRows[i], c);
                  Value tHigh = tElement(tileRows[i], kb.addi(c, kb.index(1)));
                  next.push_back(kb.fma(xHigh, tHigh, kb.fma(xLow, tLow, partial)));
                }
                return next;
              });
          sums.assign(updated.begin(), updated.end());
        });
    return sums;
  }

  /// The factors of column tiles 2 ks and 2 ks + 1 of row tile m, rounded
  /// and packed, are its A fragment of column step ks.
  llvm::SmallVector<mlir::Value> factorFragment(mlir::Value t, mlir::Value factors, int64_t m,
                                                int64_t ks) {
    auto packed = [&](int64_t n, int64_t r) {
      int64_t i = tileIndex(m, n, columnTiles);
      return mma.packRounded(kb.load(factors, entry(t, i, r)),
                             kb.load(factors, entry(t, i, r + 1)));
    };
    return {packed(2 * ks, 0), packed(2 * ks, 2), packed(2 * ks + 1, 0), packed(2 * ks + 1, 2)};
  }

  void accumulateOnTensorCores(mlir::Value t, const Lane &lane, mlir::Value factors,
                               mlir::Value tile, mlir::Value acc) {
    llvm::SmallVector<mlir::Value> tileWords;
    for (int64_t ks = 0; ks < columnSteps; ++ks) {
      llvm::SmallVector<llvm::SmallVector<mlir::Value>> a;
      for (int64_t m = 0; m < rowTiles; ++m)
        a.push_back(factorFragment(t, factors, m, ks));
      // B of dim tile n is T[16 ks + 2q, + 1][8n + g] and the same 8 rows
      // on: the 8 x 8 matrices of T's rows 16 ks and 16 ks + 8 at column
      // 8n, transposed; two dim tiles per ldmatrix, each for every row
      // tile.
      mlir::Value row =
          kb.addi(kb.addi(kb.remui(lane.lane, 8), kb.muli(kb.remui(kb.divui(lane.lane, 8), 2), 8)),
                  kb.index(ks * MmaBuilder::kK));
      for (int64_t n = 0; n < dimTiles; ++n) {
        if (n % 2 == 0) {
          mlir::Value col =
              kb.addi(kb.muli(kb.divui(lane.lane, 16), 8), kb.index(n * MmaBuilder::kN));
          tileWords = mma.loadMatrices(tile, {row, col}, 4, /*transposed=*/true);
        }
        llvm::ArrayRef<mlir::Value> bWords =
            llvm::ArrayRef<mlir::Value>(tileWords).slice((n % 2) * 2, 2);
        for (int64_t m = 0; m < rowTiles; ++m) {
          int64_t i = tileIndex(m, n, dimTiles);
          llvm::SmallVector<mlir::Value> sums;
          for (int64_t r = 0; r < kAccumulators; ++r)
            sums.push_back(kb.load(acc, entry(t, i, r)));
          for (auto [r, updated] : llvm::enumerate(mma.multiply(a[m], bWords, sums)))
            kb.store(updated, acc, entry(t, i, r));
        }
      }
    }
  }

  /// The same update, each accumulator a dot product over the columns of
  /// the row's rounded factors (from the lanes holding them) and T's column.
  void accumulateEmulated(mlir::Value t, const Lane &lane, mlir::Value factors, mlir::Value tile,
                          mlir::Value acc) {
    using namespace mlir;
    SmallVector<Value> dims, initial;
    for (int64_t i = 0; i < rowTiles * dimTiles; ++i) {
      for (int64_t r = 0; r < kAccumulators; ++r) {
        dims.push_back(columnOf(lane, i % dimTiles, r));
        initial.push_back(kb.load(acc, entry(t, i, r)));
      }
    }
    auto rounded = [&](Value x) {
      return widen(arith::TruncFOp::create(b, loc, mma.narrowType(), x));
    };
    SmallVector<Value> sums(initial);
    forEachEmulatedStep(
        tile, columns / 2, /*kAlongRows=*/true, [&](int64_t first, int64_t end, auto tElement) {
          ValueRange updated =
              kb.forLoop(kb.index(first), kb.index(end), 1, sums, [&](Value w, ValueRange carried) {
                // Columns 2w and 2w + 1 of row g (+ 8) of row tile m are
                // accumulators (row / 8) * 2 and + 1 of its tile w / 4 of lane
                // 4 g + w % 4.
                Value holder =
                    kb.addi(lane.warpThread, kb.addi(kb.muli(lane.group, 4), kb.remui(w, 4)));
                Value n = kb.divui(w, 4);
                Value column = kb.muli(w, 2);
                SmallVector<Value> next;
                for (auto [i, partial] : llvm::enumerate(carried)) {
                  int64_t r = i % kAccumulators, m = i / (dimTiles * kAccumulators);
                  Value factorTile = kb.addi(n, kb.index(m * columnTiles));
                  auto factor = [&](int64_t reg) {
                    return rounded(kb.load(factors, block.at(holder, {factorTile, kb.index(reg)})));
                  };
                  Value fLow = factor((r / 2) * 2), fHigh = factor((r / 2) * 2 + 1);
                  Value tLow = tElement(dims[i], column);
                  Value tHigh = tElement(dims[i], kb.addi(column, kb.index(1)));
                  next.push_back(kb.fma(fHigh, tHigh, kb.fma(fLow, tLow, partial)));
                }
                return next;
              });
          sums.assign(updated.begin(), updated.end());
        });
    for (int64_t i = 0; i < rowTiles * dimTiles; ++i)
      for (int64_t r = 0; r < kAccumulators; ++r)
        kb.store(sums[i * kAccumulators + r], acc, entry(t, i, r));
  }
};

} // namespace xfmr::gpu

#endif // XFMR_LIB_CONVERSION_XFMRTOGPU_GPUMMAATTENTIONBASE_H
