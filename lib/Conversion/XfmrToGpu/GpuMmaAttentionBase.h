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
// The instructions of the two generations, and the CPU's emulation of
// either, are TensorCoreOps below, one implementation a file; the kernels
// and the staging and pipelining here are written once for all three.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_CONVERSION_XFMRTOGPU_GPUMMAATTENTIONBASE_H
#define XFMR_LIB_CONVERSION_XFMRTOGPU_GPUMMAATTENTIONBASE_H

#include "AsyncOrderChecker.h"
#include "GpuAttentionKernelBase.h"
#include "GpuMma.h"
#include "ThreadBlockBuilder.h"

#include "llvm/Support/MathExtras.h"

#include <memory>

namespace xfmr::gpu {

/// A thread's place in its warp: the first thread of its warp, its lane,
/// the lane's group g and index q in the group, its warp's first row in the
/// block, and its first row (the warp's row g; the others are g + 8, then
/// the same 16 rows on per row tile).
struct MmaLane {
  mlir::Value warpThread, lane, group, inGroup, warpRow, top;
};

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

class MmaAttentionKernelBase;

/// The operations of the kernels below that depend on the hardware: the
/// products X T^T and updates acc += F T, their waits, and the asynchronous
/// copies that stage tiles in shared memory - one implementation a file:
/// mma.sync (sm_80 and sm_90, GpuMmaSyncOps.cpp), warpgroup MMAs (sm_90a,
/// GpuWarpgroupMmaOps.cpp), and the CPU's emulation of either
/// (GpuEmulatedMmaOps.cpp), which also checks the order of the asynchronous
/// copies and MMAs. MmaAttentionKernelBase's methods of the same names say
/// what each does; the kernels call those.
class TensorCoreOps {
public:
  explicit TensorCoreOps(MmaAttentionKernelBase &kernel);
  virtual ~TensorCoreOps() = default;

  virtual llvm::SmallVector<mlir::Value> products(mlir::Value t, const MmaLane &lane,
                                                  const RowFactor &x, mlir::Value tile,
                                                  llvm::function_ref<void()> whileMultiplying,
                                                  mlir::Value pending) = 0;
  /// One products() after the other, unless the MMAs can run together.
  virtual std::pair<llvm::SmallVector<mlir::Value>, llvm::SmallVector<mlir::Value>>
  productPair(mlir::Value t, const MmaLane &lane, const RowFactor &x, mlir::Value xTile,
              const RowFactor &y, mlir::Value yTile, llvm::function_ref<void()> whileMultiplying) {
    return {products(t, lane, x, xTile, whileMultiplying, {}), products(t, lane, y, yTile, {}, {})};
  }
  /// products(), done at once unless MMAs can run on.
  virtual llvm::SmallVector<mlir::Value> issueProducts(mlir::Value t, const MmaLane &lane,
                                                       const RowFactor &x, mlir::Value tile) {
    return products(t, lane, x, tile, {}, {});
  }
  /// Nothing to wait for where MMAs complete as issued.
  virtual llvm::SmallVector<mlir::Value>
  waitForAccumulators(mlir::Value t, llvm::ArrayRef<mlir::Value> arrays, int64_t pending,
                      llvm::ArrayRef<mlir::Value> alsoWaited) {
    return llvm::SmallVector<mlir::Value>(alsoWaited);
  }
  virtual void accumulate(mlir::Value t, const MmaLane &lane, mlir::Value factors, mlir::Value tile,
                          mlir::Value acc, bool commit) = 0;
  /// cp.async copies, on a GPU of either generation.
  virtual void copyAsync(mlir::Value t, mlir::Value bi, mlir::Value hi, mlir::Value first,
                         int64_t seq, int64_t rows,
                         llvm::ArrayRef<std::pair<mlir::Value, mlir::Value>> operandsAndTiles,
                         mlir::Value enabled);
  virtual void waitForCopies(mlir::Value t, int64_t pending);
  /// After a barrier, orders the block's writes to shared memory before
  /// the MMAs that read it: needed by warpgroup MMAs (the async proxy).
  virtual void fenceShared() {}

protected:
  static constexpr int64_t kAccumulators = MmaBuilder::kAccumulators;

  MmaAttentionKernelBase &k;
  kernels::KernelBuilder &kb;
  MmaBuilder &mma;
};

std::unique_ptr<TensorCoreOps> createMmaSyncOps(MmaAttentionKernelBase &kernel);
std::unique_ptr<TensorCoreOps> createWarpgroupMmaOps(MmaAttentionKernelBase &kernel);
std::unique_ptr<TensorCoreOps> createEmulatedMmaOps(MmaAttentionKernelBase &kernel,
                                                    bool warpgroupMma);

class MmaAttentionKernelBase : protected AttentionKernelBase {
public:
  /// Elements a shared row is longer than its content, and of a 16-byte load.
  static constexpr int64_t kPadding = 8;
  static constexpr int64_t kVector = MmaBuilder::kVector;

  static int64_t headDimOf(const kernels::AttentionOperands &in) {
    return mlir::cast<mlir::MemRefType>(in.q.getType()).getDimSize(in.dims.headDim);
  }
  static int64_t dimSteps(int64_t headDim) {
    return llvm::divideCeilSigned(headDim, MmaBuilder::kK);
  }
  /// Where the tiles of a streamTiles operand are read, relative to the
  /// tile: operand tile j by products in flight from tile j + first to
  /// tile j + last (issued there, or left running into it: products
  /// waited for after a tile's barrier were in flight during that tile).
  /// Its stage takes another tile from tile j + last + 1's barrier on.
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
  MmaAttentionKernelBase(kernels::KernelBuilder &kb, const kernels::AttentionOperands &in,
                         Emulation emulate, int64_t warps, int64_t columns, int64_t rowTiles = 1,
                         bool warpgroupMma = false, int64_t extraStages = 0)
      : AttentionKernelBase(kb, in), warpgroupMma(warpgroupMma),
        stages(warpgroupMma ? kStages + 1 + extraStages : kStages), threads(warps * kWarpSize),
        rowTiles(rowTiles), rowsPerWarp(rowTiles * MmaBuilder::kM),
        rowsPerBlock(warps * rowsPerWarp), columns(columns), block(kb, emulate, threads),
        mma(kb, mlir::cast<mlir::MemRefType>(in.q.getType()).getElementType(),
            emulate != Emulation::None),
        steps(dimSteps(headDim)), words(steps * MmaBuilder::kWords),
        paddedDim(steps * MmaBuilder::kK), dimTiles(paddedDim / MmaBuilder::kN),
        columnTiles(columns / MmaBuilder::kN), columnSteps(columns / MmaBuilder::kK),
        asyncOrder(kb, block, /*enabled=*/emulate != Emulation::None),
        tensorCores(emulate != Emulation::None ? createEmulatedMmaOps(*this, warpgroupMma)
                    : warpgroupMma             ? createWarpgroupMmaOps(*this)
                                               : createMmaSyncOps(*this)) {}

  /// Builds `body(bi, hi, first, shared)` for each block of rowsPerBlock
  /// rows (from `first`) of a sequence of `seq` rows, per head and batch;
  /// `shared` holds a tile per entry of `tileRows` (that many rows of the
  /// padded head dim), then an f32 array per entry of `arrays`.
  void forEachRowBlock(
      int64_t seq, llvm::ArrayRef<int64_t> tileRows,
      llvm::ArrayRef<llvm::SmallVector<int64_t>> arrays,
      llvm::function_ref<void(mlir::Value, mlir::Value, mlir::Value, llvm::ArrayRef<mlir::Value>)>
          body);

  /// The indices of element (row, c) of a shared tile.
  llvm::SmallVector<mlir::Value> tileAt(mlir::Value row, mlir::Value c);

  /// The rows of a kernel's shared tiles: the stages of its two streamed
  /// tiles, then the block's rows of `blockOperands` operands (RowFactors
  /// in shared memory).
  llvm::SmallVector<int64_t> sharedTileRows(int64_t blockOperands) const;

  /// Stages of the shared arrays a loop over tiles streams through: tile j
  /// in stage j % 2, so that staging it needs no barrier after the reads of
  /// tile j - 1 (the last reads of its stage, tile j - 2's, came before the
  /// barrier after staging tile j - 1): one barrier a tile. With warpgroup
  /// MMAs, a third (`stages`): tile j's second products run during tile
  /// j + 1 (the forward issues them there, behind its first), while tile
  /// j + 2 is staged, so elsewhere; the forward's software pipeline copies
  /// K's tile j + 2 and V's tile j + 1 during tile j (streamTiles). The
  /// backward's kernels take two more (`extraStages`) to copy their tiles
  /// two ahead too, their head-dim updates being in flight two tiles
  /// longer.
  static constexpr int64_t kStages = 2;
  /// The arrays of the stage, one of `stageArrays`, of the tile `later`
  /// tiles after `tile` (-stages < later < stages; the stage index is
  /// then tile's plus a select, where the tiles of a loop share tile's).
  llvm::SmallVector<mlir::Value> stageOf(mlir::Value tile,
                                         llvm::ArrayRef<llvm::SmallVector<mlir::Value>> stageArrays,
                                         int64_t later = 0);
  /// A kernel's stage arrays from its shared arrays: `perStage` arrays a
  /// stage, stage after stage.
  llvm::SmallVector<llvm::SmallVector<mlir::Value>> stagesOf(llvm::ArrayRef<mlir::Value> shared,
                                                             int64_t perStage) const;

  using Lane = MmaLane;
  /// A thread's place in a block whose first row is `first`.
  Lane laneOf(mlir::Value t, mlir::Value first);

  /// Entry (i[, j]) of a private array of thread t.
  llvm::SmallVector<mlir::Value> entry(mlir::Value t, int64_t i,
                                       std::optional<int64_t> j = std::nullopt);
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
                          llvm::function_ref<void(int64_t, int64_t, int64_t)> body) const;
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
                                                                    mlir::Value c, int64_t width);

  /// Element (row, c) of such an operand in the MMA's type (f32 operands
  /// rounded), 0 past its `seq` rows or the head dim.
  mlir::Value element(mlir::Value operand, mlir::Value bi, mlir::Value hi, mlir::Value row,
                      int64_t seq, mlir::Value c);

  /// The word of elements 2w and 2w + 1 along the head dim of a row.
  mlir::Value rowWord(mlir::Value operand, mlir::Value bi, mlir::Value hi, mlir::Value row,
                      int64_t seq, mlir::Value w);

  /// A [row tiles * steps, 4] i32 private array for a thread's A fragments
  /// of its warp's rows.
  mlir::Value fragmentArray() {
    return block.privateArray({rowTiles * steps, kAccumulators}, b.getI32Type());
  }
  /// Thread t's A fragments of its warp's rows of `operand` (`seq` rows).
  void loadFragments(mlir::Value t, const Lane &lane, mlir::Value bi, mlir::Value hi,
                     mlir::Value operand, int64_t seq, mlir::Value fragments);

  /// A [row tiles * head dim tiles, 4] f32 private array of accumulators,
  /// and one of [row tiles * column tiles, 4].
  mlir::Value dimAccumulators() { return block.privateArray({rowTiles * dimTiles, kAccumulators}); }
  mlir::Value columnAccumulators() {
    return block.privateArray({rowTiles * columnTiles, kAccumulators});
  }
  void zero(mlir::Value t, mlir::Value accumulators, int64_t tiles);

  /// Stores the head-dim accumulators `acc` of thread t into `out`, times
  /// `factor(slot, row)` (rowSlot(m, half): half 0 the lane's row g of row
  /// tile m, 1 its row g + 8), for the rows inside its `seq` rows; `factor`
  /// runs inside the row's branch and may store more of the row.
  void storeRows(mlir::Value t, const Lane &lane, mlir::Value bi, mlir::Value hi, mlir::Value acc,
                 mlir::Value out, int64_t seq,
                 llvm::function_ref<mlir::Value(int64_t, mlir::Value)> factor);

  /// 2^x: one ex2.approx (math.exp2 with fastmath afn).
  mlir::Value exp2(mlir::Value x);
  /// 2^(x - max), 0 where x is -inf (a masked key, or any key of a row
  /// that has seen none).
  mlir::Value probability2(mlir::Value x, mlir::Value max) {
    return kb.select(kb.equals(x, kernels::kNegInf), kb.f32(0.0), exp2(kb.sub(x, max)));
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
                           mlir::Value key, mlir::Value max, bool masked);

  /// Whether the key tile at k0 may hide a key from a query row of the
  /// lane's warp (rows are queries, columns keys): it runs past seq_k or,
  /// when causal, past the warp's first row's last key. Null when every
  /// tile may (with biases, which each score adds).
  mlir::Value keyTileNeedsMask(mlir::Value bi, mlir::Value k0, const Lane &lane);

  /// The first key tile that may hide a key from some row of the block
  /// whose first row is q0: past seq_k, or, when causal, past q0's last
  /// key; 0 with biases, which each score adds.
  mlir::Value firstMaskedTile(mlir::Value bi, mlir::Value q0);

  /// Calls `body(masked)` with masked true where `needsMask` (null: always)
  /// and false elsewhere: a uniform branch per warp.
  void ifMasked(mlir::Value needsMask, llvm::function_ref<void(bool)> body);

  /// Whether the rows of `operands` can be staged 16 bytes per copy, or
  /// null where they never can: null unless each has a head dim of whole
  /// 16-byte vectors with unit stride, in the MMA's type; else whether, at
  /// run time, their addresses, offsets and other strides are multiples of
  /// 16 bytes.
  mlir::Value vectorCopies(llvm::ArrayRef<mlir::Value> operands);

  /// Elements c to c + 7 of a row, 0 past the `seq` rows or the head dim.
  mlir::Value rowVector(mlir::Value operand, mlir::Value bi, mlir::Value hi, mlir::Value row,
                        int64_t seq, mlir::Value c);

  /// Calls `body(row, c)` for thread t's 16-byte vectors of a tile of
  /// `rows` rows: row `row` of the tile, elements c to c + 7. Slot j of
  /// thread t holds vector t + j * threads of the tile: row-major (paddedDim
  /// / 8 a row), or, in tiles of core matrices, in their order (8 threads
  /// write one core matrix's 128 bytes, free of bank conflicts).
  void forEachVector(mlir::Value t, int64_t rows,
                     llvm::function_ref<void(mlir::Value, mlir::Value)> body);

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
    tensorCores->copyAsync(t, bi, hi, first, seq, rows, operandsAndTiles, enabled);
  }
  /// Waits for the thread's groups of copies but the last `pending` (the
  /// block's copies are then visible to all its threads after a barrier).
  void waitForCopies(mlir::Value t, int64_t pending = 0) { tensorCores->waitForCopies(t, pending); }
  /// Thread t's share of staging rows [first, first + rows) of the
  /// (operand, tile) pairs element by element, consecutive threads along
  /// the head dim.
  void stageElements(mlir::Value t, mlir::Value bi, mlir::Value hi, mlir::Value first, int64_t seq,
                     int64_t rows, llvm::ArrayRef<Staged> operandsAndTiles);
  /// Thread t's share of staging the block's rows [first, first +
  /// rowsPerBlock) of `operand` into the shared `tile` (a RowFactor):
  /// asynchronously where `aligned` (vectorCopies; not null), as one group
  /// of copies, else element by element. streamTiles waits for the copies
  /// (at its first tile, else after its loop) if its operands' `aligned`
  /// holds where this one's does; its first barrier publishes the tile.
  void stageRows(mlir::Value t, mlir::Value bi, mlir::Value hi, mlir::Value first, int64_t seq,
                 mlir::Value operand, mlir::Value tile, mlir::Value aligned);

  /// The warp's rows of each of `count` operands as RowFactors: A fragments
  /// in private arrays, or, where `inShared`, the block's rows in the
  /// shared tiles `tiles`.
  llvm::SmallVector<RowFactor> rowFactors(int64_t count, bool inShared,
                                          llvm::ArrayRef<mlir::Value> tiles);
  /// Thread t's part of filling `factors` with the rows of `operands` (`seq`
  /// rows, the block's from `first`): fragments loaded, or rows staged
  /// (stageRows, asynchronously where `aligned`).
  void loadRows(mlir::Value t, const Lane &lane, mlir::Value bi, mlir::Value hi, mlir::Value first,
                int64_t seq, llvm::ArrayRef<mlir::Value> operands,
                llvm::ArrayRef<RowFactor> factors, mlir::Value aligned);

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
  /// five and K or Q read up to two tiles late (the sm_90a backward), both
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
                   llvm::ArrayRef<TileReads> reads = {});

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
    return tensorCores->products(t, lane, x, tile, whileMultiplying, pending);
  }

  /// The products X T^T and Y U^T (products()), built so that the second
  /// needs no wait for the first: warpgroup MMAs issue both, then build
  /// `whileMultiplying`, then wait for both at once.
  std::pair<llvm::SmallVector<mlir::Value>, llvm::SmallVector<mlir::Value>>
  productPair(mlir::Value t, const Lane &lane, const RowFactor &x, mlir::Value xTile,
              const RowFactor &y, mlir::Value yTile,
              llvm::function_ref<void()> whileMultiplying = nullptr) {
    return tensorCores->productPair(t, lane, x, xTile, y, yTile, whileMultiplying);
  }

  /// The loop of the backward kernels over the tiles [begin, end) of the
  /// streamed `operands` (streamTiles, with `stageMore` and `reads`): per
  /// tile the products X T^T and Y U^T of the rows `x` and `y` and the
  /// stage's first two tiles, `body(t, lane, tile, xProducts, yProducts,
  /// masked)`, and the head-dim updates `update(t, lane, stage)` that read
  /// the tile's stage. With mma.sync, a phase of products and body (with
  /// masks where `needsMask(tile.first, lane)` holds, null: always), then
  /// one of updates. With warpgroup MMAs, software-pipelined: a phase
  /// issues the tile's products, then the tile before's updates (one group
  /// of MMAs; none for a peeled tile); the next waits for the products,
  /// leaving the updates running, copies the next tiles and builds body -
  /// two phases, so that emulated, the updates read every lane's factors
  /// before any lane's body overwrites them; the loop split by masks at
  /// `split()`, the last tile's updates after it. `first`: the block's
  /// first row.
  void streamProductPairs(
      mlir::Value begin, mlir::Value end, mlir::Value bi, mlir::Value hi, int64_t seq,
      llvm::ArrayRef<mlir::Value> operands,
      llvm::ArrayRef<llvm::SmallVector<mlir::Value>> stageArrays, mlir::Value first,
      const RowFactor &x, const RowFactor &y,
      llvm::function_ref<void(mlir::Value, mlir::Value, llvm::ArrayRef<mlir::Value>)> stageMore,
      llvm::function_ref<mlir::Value(mlir::Value, const Lane &)> needsMask,
      llvm::function_ref<MaskSplit()> split, llvm::ArrayRef<TileReads> reads,
      llvm::function_ref<void(mlir::Value, const Lane &, const StreamedTile &,
                              llvm::ArrayRef<mlir::Value>, llvm::ArrayRef<mlir::Value>, bool)>
          body,
      llvm::function_ref<void(mlir::Value, const Lane &, llvm::ArrayRef<mlir::Value>)> update);

  /// products() left running where they are warpgroup MMAs (else done at
  /// once): readable after waitForProducts.
  llvm::SmallVector<mlir::Value> issueProducts(mlir::Value t, const Lane &lane, const RowFactor &x,
                                               mlir::Value tile) {
    return tensorCores->issueProducts(t, lane, x, tile);
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
    tensorCores->accumulate(t, lane, factors, tile, acc, commit);
  }

  /// Thread t's entries of the [row tiles * tiles, 4] accumulator array
  /// `array`, in order, and their store.
  llvm::SmallVector<mlir::Value> loadAccumulators(mlir::Value t, mlir::Value array, int64_t tiles);
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
    return tensorCores->waitForAccumulators(t, arrays, pending, alsoWaited);
  }

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
  friend class TensorCoreOps;
  friend class MmaSyncOps;
  friend class WarpgroupMmaOps;
  friend class EmulatedMmaOps;

  /// Emulated, the checks of the order of the async copies and MMAs.
  AsyncOrderChecker asyncOrder;
  std::unique_ptr<TensorCoreOps> tensorCores;

  /// The B of warpgroup MMAs of the 16 of K from step `step` of T: K along
  /// T's rows where `kAlongRows` (accumulate(): T N-major), else along its
  /// columns (products(): T K-major).
  MmaBuilder::SharedOperand stepOperand(mlir::Value tile, int64_t step, bool kAlongRows);

  /// The A of warpgroup MMAs of head-dim step s of products() whose X is
  /// the block's rows in the shared tile `rows` (K-major): the rows of
  /// thread t's warpgroup.
  MmaBuilder::SharedOperand rowsOperand(mlir::Value t, mlir::Value rows, int64_t s);

  /// The factors of column tiles 2 ks and 2 ks + 1 of row tile m, rounded
  /// and packed, are its A fragment of column step ks.
  llvm::SmallVector<mlir::Value> factorFragment(mlir::Value t, mlir::Value factors, int64_t m,
                                                int64_t ks);
};

} // namespace xfmr::gpu

#endif // XFMR_LIB_CONVERSION_XFMRTOGPU_GPUMMAATTENTIONBASE_H
