//===- GpuMmaAttentionBackward.cpp - bf16/f16 attention backward on tensor cores -*- C++ -*-===//
//
// FlashAttention-2 backward for bf16 or f16 q, k and v, every product on
// tensor cores (GpuMmaAttentionBase.h), as two kernels so that each gradient
// row has one writer and no atomics are needed. With the probabilities
// recomputed from the forward's log-sum-exp in base 2 (lse2 = log2(e) lse,
// P = 2^(log2(e) (scale S + masks) - lse2)) and D = rowsum(dO * O):
//
//   dQ: a block per (64 query rows, head, batch), 4 warps of 16 rows:
//     Q, dO fragments <- the warp's rows        registers, once
//     lse2, D of the lane's rows; D -> global   (for the dK/dV kernel)
//     for each key tile j of c keys (up to the block's causal limit):
//       K[c x d], V[c x d] -> shared stage j%2; barrier (the only one)
//       S = Q K^T, dP = dO V^T                  16 x c per warp
//       dS = P (dP - D)                         masks only on tiles that
//                                               may hide a key
//       dQ += dS K                              dS rounded to bf16/f16
//     dQ = scale dQ
//   dK, dV: a block per (64 key rows, head, batch), 4 warps of 16 rows:
//     K, V fragments <- the warp's rows         registers, once
//     for each query tile j of c queries that sees the block's keys:
//       Q[c x d], dO[c x d], lse2[c], D[c] -> shared stage j%2; barrier
//       S^T = K Q^T, dP^T = V dO^T              16 x c per warp
//       P^T = 2^(...), dS^T = P^T (dP^T - D)    query rows past seq_q get
//                                               lse2 = +inf: P = 0
//       dV += P^T dO, dK += dS^T Q              P, dS rounded to bf16/f16
//     dK = scale dK
//
// c is 64 for head dims up to 64, 32 above: a thread holds its rows'
// fragments, head-dim accumulators (two in dK/dV) and two 16 x c tiles of
// accumulators in registers; from head dim 128 on, the block's rows (Q and
// dO, K and V) are staged in shared memory instead, their fragments read by
// ldmatrix at each use. The tiles stream through two shared stages
// (streamTiles, GpuMmaAttentionBase.h): the next one copied asynchronously
// while the current one is computed.
//
// With warpgroup MMAs (sm_90a), a block's 4 warps are one warpgroup and
// every product a wgmma.mma_async of its 64 rows: the row factors by
// descriptor from the block's rows in shared memory; the streamed tiles
// (core matrices) as B, in five stages, copied two tiles ahead. Each
// kernel is software-pipelined as FlashAttention-3's intra-warpgroup
// overlap: a tile issues its two first products (S and dP), then the tile
// before's head-dim updates (dQ; dV and dK, one group), and waits for the
// first two only: the updates run on the tensor cores while the warps
// compute the tile's probabilities and dS. One group stays in flight
// across the loop's back edge (with two, ptxas serializes every MMA of the
// kernel: C7514), and no branch joins in the loop (ptxas waits for all
// MMAs there): masks split it into tiles with and without (streamTiles).
//
//===----------------------------------------------------------------------===//

#include "GpuKernels.h"
#include "GpuMmaAttentionBase.h"

using namespace mlir;
using namespace xfmr;
using namespace xfmr::kernels;
using namespace xfmr::gpu;

namespace {

constexpr int64_t kWarps = 4;

int64_t columnsFor(int64_t headDim) {
  return MmaAttentionKernelBase::dimSteps(headDim) <= 4 ? 64 : 32;
}

/// Whether a kernel's threads read the A fragments of their rows (Q and dO,
/// or K and V) by ldmatrix from the block's rows in shared memory rather
/// than hold them: from head dim 128 on, where the fragments and head-dim
/// accumulators overflow a thread's registers (ptxas, sm_90: the dK/dV
/// kernel spilled 76 bytes at head dim 128, 516 at 160; none now). Below,
/// the registers hold them without spilling and save the ldmatrix. With
/// warpgroup MMAs always in shared memory (GpuMmaAttentionBase.h).
bool rowsInSharedFor(int64_t headDim, bool warpgroupMma) {
  return warpgroupMma || MmaAttentionKernelBase::dimSteps(headDim) >= 8;
}

/// Where the warpgroup-MMA kernels read the tiles of their two streamed
/// operands: those of their head-dim updates (K: dQ += dS K; Q and dO: dK
/// += dS^T Q, dV += P^T dO) up to two tiles late: the next tile issues
/// the updates, behind its S and dP, and the one after waits for them.
SmallVector<MmaAttentionKernelBase::TileReads> streamedReads(bool queryGradient) {
  MmaAttentionKernelBase::TileReads late{/*first=*/0, /*last=*/2};
  return {late, queryGradient ? MmaAttentionKernelBase::TileReads{} : late};
}

class MmaQueryGradientKernel : MmaAttentionKernelBase {
public:
  /// `rowDots`: [batch, heads, seq_q] f32, D of every query row, written.
  MmaQueryGradientKernel(KernelBuilder &kb, const AttentionOperands &in, Emulation emulate,
                         bool warpgroupMma, Value rowDots)
      : MmaAttentionKernelBase(kb, in, emulate, kWarps, columnsFor(headDimOf(in)), /*rowTiles=*/1,
                               warpgroupMma, /*extraStages=*/2),
        rowsInShared(rowsInSharedFor(headDim, warpgroupMma)), rowDots(rowDots) {}

  void emit() {
    forEachRowBlock(seqQ, sharedTileRows(rowsInShared ? 2 : 0), {},
                    [&](Value bi, Value hi, Value q0, ArrayRef<Value> shared) {
                      emitBlock(bi, hi, q0, shared);
                    });
  }

private:
  /// `shared`: the K and V tiles of each stage, then the block's Q and dO
  /// rows where rowsInShared.
  void emitBlock(Value bi, Value hi, Value q0, ArrayRef<Value> shared) {
    SmallVector<RowFactor> rows = rowFactors(2, rowsInShared, shared.drop_front(2 * stages));
    // Copied asynchronously only where the streamed tiles are too (whose
    // waits then cover them).
    Value rowCopies = rowsInShared ? vectorCopies({in.q, in.gradOut, in.k, in.v}) : Value();
    Value gradScores = columnAccumulators();
    Value acc = dimAccumulators();
    // Per row (rowSlot): lse2 and D.
    Value lse2 = block.privateArray({rowSlots()}), dots = block.privateArray({rowSlots()});

    block.phase(
        [&](Value t) {
          Lane lane = laneOf(t, q0);
          loadRows(t, lane, bi, hi, q0, seqQ, {in.q, in.gradOut}, rows, rowCopies);
          zero(t, acc, dimTiles);
          for (int64_t m = 0; m < rowTiles; ++m) {
            for (int64_t half = 0; half < 2; ++half) {
              Value row = rowOf(lane, m, half * 2);
              Value source = kb.mini(row, kb.index(seqQ - 1));
              Value lse = kb.load(in.lse, {bi, hi, source});
              SmallVector<Value> slot = entry(t, rowSlot(m, half));
              kb.store(kb.mul(lse, kb.f32(llvm::numbers::log2e)), lse2, slot);
              Value rowDot =
                  dot([&](Value c) { return kb.loadWidened(in.gradOut, in.at(bi, source, hi, c)); },
                      [&](Value c) { return kb.loadWidened(in.out, in.at(bi, source, hi, c)); },
                      kb.f32(0.0));
              kb.store(rowDot, dots, slot);
              Value writer =
                  arith::AndIOp::create(b, loc, kb.below(row, seqQ), kb.below(lane.inGroup, 1));
              kb.ifThen(writer, [&] { kb.store(rowDot, rowDots, {bi, hi, row}); });
            }
          }
        },
        /*barrier=*/false);

    // dS of thread t's rows from the products S and dP of the key tile at
    // k0, with masks where `masked`.
    auto storeGradScores = [&](Value t, const Lane &lane, Value k0, ArrayRef<Value> qk,
                               ArrayRef<Value> gradP, bool masked) {
      forEachAccumulator(columnTiles, [&](int64_t m, int64_t n, int64_t r) {
        int64_t i = accumulatorIndex(m, n, r, columnTiles);
        SmallVector<Value> slot = entry(t, rowSlot(m, r / 2));
        Value key = kb.addi(k0, columnOf(lane, n, r));
        Value p = probability2(qk[i], bi, hi, rowOf(lane, m, r), key, kb.load(lse2, slot), masked);
        Value gradS = kb.mul(p, kb.sub(gradP[i], kb.load(dots, slot)));
        kb.store(gradS, gradScores, entry(t, tileIndex(m, n, columnTiles), r));
      });
    };
    Value tiles = limits().keyTiles(bi, q0, rowsPerBlock, columns);
    streamProductPairs(
        kb.index(0), tiles, bi, hi, seqK, {in.k, in.v}, stagesOf(shared, 2), q0, rows[0], rows[1],
        /*stageMore=*/nullptr,
        [&](Value k0, const Lane &lane) { return keyTileNeedsMask(bi, k0, lane); },
        [&] { return MaskSplit{firstMaskedTile(bi, q0)}; }, streamedReads(/*queryGradient=*/true),
        [&](Value t, const Lane &lane, const StreamedTile &tile, ArrayRef<Value> qk,
            ArrayRef<Value> gradP,
            bool masked) { storeGradScores(t, lane, tile.first, qk, gradP, masked); },
        // dQ += dS K.
        [&](Value t, const Lane &lane, ArrayRef<Value> stage) {
          accumulate(t, lane, gradScores, stage[0], acc);
        });

    block.phase(
        [&](Value t) {
          waitForAccumulators(t, {acc});
          storeRows(t, laneOf(t, q0), bi, hi, acc, in.gradQ, seqQ,
                    [&](int64_t, Value) { return kb.f32(in.scale); });
        },
        /*barrier=*/false);
  }

  bool rowsInShared;
  Value rowDots;
};

class MmaKeyGradientKernel : MmaAttentionKernelBase {
public:
  /// `rowDots`: D of every query row, as MmaQueryGradientKernel wrote it.
  MmaKeyGradientKernel(KernelBuilder &kb, const AttentionOperands &in, Emulation emulate,
                       bool warpgroupMma, Value rowDots)
      : MmaAttentionKernelBase(kb, in, emulate, kWarps, columnsFor(headDimOf(in)), /*rowTiles=*/1,
                               warpgroupMma, /*extraStages=*/2),
        rowsInShared(rowsInSharedFor(headDim, warpgroupMma)), rowDots(rowDots) {}

  void emit() {
    forEachRowBlock(seqK, sharedTileRows(rowsInShared ? 2 : 0),
                    SmallVector<SmallVector<int64_t>>(2 * stages, {columns}),
                    [&](Value bi, Value hi, Value k0, ArrayRef<Value> shared) {
                      emitBlock(bi, hi, k0, shared);
                    });
  }

private:
  /// `shared`: the Q and dO tiles of each stage, the block's K and V rows
  /// where rowsInShared, then the lse2 and D arrays of each stage.
  void emitBlock(Value bi, Value hi, Value k0, ArrayRef<Value> shared) {
    ArrayRef<Value> lseAndDots = shared.take_back(2 * stages);
    SmallVector<SmallVector<Value>> stageArrays = stagesOf(shared, 2);
    for (auto [stage, statistics] : llvm::zip_equal(stageArrays, stagesOf(lseAndDots, 2)))
      llvm::append_range(stage, statistics);
    SmallVector<RowFactor> rows = rowFactors(2, rowsInShared, shared.drop_front(2 * stages));
    Value rowCopies = rowsInShared ? vectorCopies({in.k, in.v, in.q, in.gradOut}) : Value();
    Value probabilities = columnAccumulators(), gradScores = columnAccumulators();
    Value gradKey = dimAccumulators(), gradValue = dimAccumulators();

    block.phase(
        [&](Value t) {
          Lane lane = laneOf(t, k0);
          loadRows(t, lane, bi, hi, k0, seqK, {in.k, in.v}, rows, rowCopies);
          zero(t, gradKey, dimTiles);
          zero(t, gradValue, dimTiles);
        },
        /*barrier=*/false);

    // The query rows before the first that sees k0 see none of the block's
    // keys.
    Value firstTile = kb.divui(limits().firstQuerySeeing(bi, k0), columns);
    // lse2 and D of the tile's query rows with them.
    auto stageRowStatistics = [&](Value t, Value q0, ArrayRef<Value> stage) {
      Value lseTile = stage[2], dotTile = stage[3];
      kb.forLoop(t, kb.index(columns), threads, [&](Value i) {
        Value row = kb.addi(q0, i);
        Value inside = kb.below(row, seqQ);
        Value source = kb.mini(row, kb.index(seqQ - 1));
        Value lse2 = kb.mul(kb.load(in.lse, {bi, hi, source}), kb.f32(llvm::numbers::log2e));
        kb.store(kb.select(inside, lse2, kb.f32(std::numeric_limits<double>::infinity())), lseTile,
                 {i});
        kb.store(kb.select(inside, kb.load(rowDots, {bi, hi, source}), kb.f32(0.0)), dotTile, {i});
      });
    };
    // P^T and dS^T of thread t's rows (keys) from the products S^T and
    // dP^T of the query tile from q0 (its lse2 and D in `stage`), with
    // masks where `masked`.
    auto storeProbabilities = [&](Value t, const Lane &lane, Value q0, ArrayRef<Value> stage,
                                  ArrayRef<Value> kq, ArrayRef<Value> gradP, bool masked) {
      Value lseTile = stage[2], dotTile = stage[3];
      forEachAccumulator(columnTiles, [&](int64_t m, int64_t n, int64_t r) {
        int64_t i = accumulatorIndex(m, n, r, columnTiles);
        SmallVector<Value> at = entry(t, tileIndex(m, n, columnTiles), r);
        Value column = columnOf(lane, n, r);
        Value p = probability2(kq[i], bi, hi, kb.addi(q0, column), rowOf(lane, m, r),
                               kb.load(lseTile, {column}), masked);
        kb.store(p, probabilities, at);
        Value gradS = kb.mul(p, kb.sub(gradP[i], kb.load(dotTile, {column})));
        kb.store(gradS, gradScores, at);
      });
    };
    // dV += P^T dO, dK += dS^T Q for the tiles of `stage`: with warpgroup
    // MMAs one group, dV's first.
    auto updateDims = [&](Value t, const Lane &lane, ArrayRef<Value> stage) {
      accumulate(t, lane, probabilities, stage[1], gradValue, /*commit=*/false);
      accumulate(t, lane, gradScores, stage[0], gradKey);
    };
    Value tiles = kb.index(llvm::divideCeilSigned(seqQ, columns));
    streamProductPairs(
        firstTile, tiles, bi, hi, seqQ, {in.q, in.gradOut}, stageArrays, k0, rows[0], rows[1],
        stageRowStatistics,
        [&](Value q0, const Lane &lane) { return queryTileNeedsMask(bi, q0, lane); },
        // The causal tiles first.
        [&] {
          return MaskSplit{firstUnmaskedTile(bi, k0), /*maskedFirst=*/true};
        },
        streamedReads(/*queryGradient=*/false),
        [&](Value t, const Lane &lane, const StreamedTile &tile, ArrayRef<Value> kq,
            ArrayRef<Value> gradP, bool masked) {
          storeProbabilities(t, lane, tile.first, tile.stage, kq, gradP, masked);
        },
        updateDims);

    block.phase(
        [&](Value t) {
          Lane lane = laneOf(t, k0);
          waitForAccumulators(t, {gradKey, gradValue});
          storeRows(t, lane, bi, hi, gradKey, in.gradK, seqK,
                    [&](int64_t, Value) { return kb.f32(in.scale); });
          storeRows(t, lane, bi, hi, gradValue, in.gradV, seqK,
                    [&](int64_t, Value) { return kb.f32(1.0); });
        },
        /*barrier=*/false);
  }

  /// Whether the query tile at q0 may hide a key of the lane's warp from
  /// one of its rows (rows are keys, columns queries): when causal, a key
  /// of the warp comes after the first query's last key. Null when every
  /// tile may (with biases, which each score adds). Keys past seq_k are
  /// never stored, queries past seq_q have probability 0: neither needs a
  /// mask.
  Value queryTileNeedsMask(Value bi, Value q0, const Lane &lane) {
    if (in.keyBias || in.bias)
      return Value();
    if (!in.causal)
      return arith::ConstantIntOp::create(b, loc, b.getI1Type(), 0);
    Value lastKey =
        kb.addi(arith::SubIOp::create(b, loc, lane.top, lane.group), kb.index(rowsPerWarp - 1));
    // The first query's last key.
    return kb.below(kb.addi(q0, limits().queryOffset(bi)), lastKey);
  }

  /// The first query tile whose queries see every key of the block from
  /// k0 (none with biases, which each score adds): when causal, the first
  /// query's keys reach the block's last key. Keys past seq_k are never
  /// stored, queries past seq_q have probability 0: neither needs a mask.
  Value firstUnmaskedTile(Value bi, Value k0) {
    if (in.keyBias || in.bias)
      return kb.index(llvm::divideCeilSigned(seqQ, columns));
    if (!in.causal)
      return kb.index(0);
    Value firstQuery = limits().firstQuerySeeing(bi, kb.addi(k0, kb.index(rowsPerBlock - 1)));
    return arith::CeilDivSIOp::create(b, loc, firstQuery, kb.index(columns));
  }

  bool rowsInShared;
  Value rowDots;
};

} // namespace

void xfmr::gpu::emitMmaAttentionBackward(KernelBuilder &kb, const AttentionOperands &operands,
                                         Emulation emulate, bool warpgroupMma) {
  assert(fitsMmaAttention(operands) && "windows and soft-caps are the f32 kernel's");
  auto q = cast<MemRefType>(operands.q.getType());
  Value rowDots = kb.allocate({q.getDimSize(operands.dims.batch), q.getDimSize(operands.dims.heads),
                               q.getDimSize(operands.dims.seq)},
                              kb.builder().getF32Type());
  MmaQueryGradientKernel(kb, operands, emulate, warpgroupMma, rowDots).emit();
  MmaKeyGradientKernel(kb, operands, emulate, warpgroupMma, rowDots).emit();
}
