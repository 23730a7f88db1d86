//===- GpuMmaAttentionKernel.cpp - bf16/f16 attention on tensor cores -*- C++ -*-===//
//
// FlashAttention-2 forward for bf16 or f16 q, k and v: both products on
// tensor cores (mma.sync.m16n8k16, GpuMma.h), the online softmax in f32
// registers. A block per (128 query rows, head, batch): up to head dim 128
// FlashAttention-2's 4 warps of 32 rows (two row tiles, which share each K
// and V fragment read from shared memory), above 8 warps of 16:
//
//   Q fragments <- the warp's rows of Q         registers, once; above head
//                                               dim 64, Q's rows -> shared
//                                               instead (copied with the
//                                               first tile), its fragments
//                                               by ldmatrix at each use
//   o = 0; m = -inf; l = 0                      registers
//   for each key tile j of 64 (up to the block's causal limit):
//     (K, V of tile j -> shared stage j%2)      copied asynchronously while
//                                               tile j - 1 was computed where
//                                               16-byte copies are possible
//                                               (0 past the ends), else
//                                               loaded element by element now
//     barrier                                   (the only one: two stages)
//     (K, V of tile j + 1 -> stage (j+1)%2)     cp.async, overlapping what
//                                               follows
//     S = log2(e) (scale Q K^T + masks)         32 x 64 per warp: 16 x d/16 MMAs
//                                               (K fragments by ldmatrix);
//                                               masks and biases only on
//                                               tiles that may hide a key
//     m' = max(m, rowmax S)                     a row's 4 lanes: 2 shuffles
//     P = 2^(S - m'); l = l 2^(m - m') + rowsum P   (l per lane, summed
//                                               over the row's lanes at the end;
//                                               on tiles without masks, S - m'
//                                               is one FFMA of the product)
//     o = o 2^(m - m') + P V                    (o rescaled only where m grew)
//                                               P's accumulators rounded and
//                                               repacked as A fragments:
//                                               8 x d/8 MMAs (V fragments by
//                                               ldmatrix.trans)
//   out = o / l (0 where nothing was visible); lse = m ln 2 + log l
//
// The exponentials are base 2 so that each is one approximate PTX
// instruction (ex2.approx, 2 ulp; math.exp2 with fastmath afn).
//
// With warpgroup MMAs (sm_90a): 8 warps of 16 rows, each product of a
// warpgroup's 64 rows by the whole tile per 16 of K or keys (wgmma.mma_async:
// d/16 MMAs of m64n{c}k16, then c/16 of m64n{d}k16, c = 128 keys a tile up
// to head dim 128, else 64), Q's rows in shared memory like the tiles (both
// factors of S by descriptor, as FlashAttention-3), the tiles in three
// stages (j % 3), software-pipelined as FlashAttention-3's intra-warpgroup
// overlap:
//
//   S_j = Q K_j^T; O += P_{j-1} V_{j-1}        issued, in that order
//   wait for S_j (P V left running)
//   (K of tile j + 2, V of tile j + 1)         cp.async, branch-free, into
//                                               the stages tile j - 1 read
//   masks, m', P_j = 2^(S_j - m'), l            while the tensor cores
//                                               compute P V
//   wait for P V; O = O 2^(m - m')              where m grew
//
// with the first tile built apart (no P V before it) and the last tile's
// P V after the loop. ptxas waits for all MMAs in flight where branches
// join, so the loop has none between the two waits: streamTiles splits it
// in tiles without masks and tiles with (for the block's first row; a
// causal block's diagonal tile, a cut last tile), and builds it for 16-byte
// copies and for element-by-element staging apart. A tile waits only for
// the copies issued two tiles before: ptxas issues a tile's copies late in
// its softmax (instructions 408-517 of the 647 of the s4096 d128 loop),
// and, copied one tile ahead, they had the rest of that tile to land.
//
// The tensor-core products and the staging are GpuMmaAttentionBase.h's.
//
//===----------------------------------------------------------------------===//

#include "GpuKernels.h"
#include "GpuMmaAttentionBase.h"

using namespace mlir;
using namespace xfmr;
using namespace xfmr::kernels;
using namespace xfmr::gpu;

namespace {

constexpr int64_t kKeysPerTile = 64;

/// How a block's 128 query rows are divided. Up to head dim 128,
/// FlashAttention-2's 4 warps of two 16-row tiles: each K and V fragment a
/// warp reads from shared memory serves 32 rows, half the reads per MMA of
/// 16-row warps (the 8-warp layout read 256 KB of shared memory per 64-key
/// tile at head dim 128, twice its MMAs' 1024 cycles at 128 bytes a cycle).
/// A thread then holds 32 x head-dim accumulators and 32 x 64 scores: the
/// Q fragments stay in its registers up to head dim 64, above Q's rows are
/// staged in shared memory and read by ldmatrix at each use (as
/// FlashAttention-2). Above 128, 8 warps of 16 rows, Q in registers. With
/// warpgroup MMAs (sm_90a), always the latter: two warpgroups of 64 rows,
/// whose tensor cores read Q, K and V from shared memory themselves, in
/// tiles of 128 keys up to head dim 128 (as FlashAttention-3): a tile's
/// fixed costs (the rescaling of O, copies, descriptors, barrier, waits)
/// then come once per 128 keys - ptxas 13.0, sm_90a, s4096 d128: 646
/// instructions a warp per 128 keys without masks, 253 registers, no
/// spill (causal: 255, and 24 bytes spilled around the loops, none in
/// them); three stages of them and Q's rows take 224 KB of shared memory.
/// Q never comes from registers there: ptxas 13.0 gave its loop-invariant
/// fragments the registers of P's (GpuMmaAttentionBase.h).
struct ForwardLayout {
  int64_t warps, rowTiles, keysPerTile;
  bool queryInShared, warpgroupMma;
};
ForwardLayout layoutFor(int64_t headDim, bool warpgroupMma) {
  int64_t steps = MmaAttentionKernelBase::dimSteps(headDim);
  if (steps <= 8 && !warpgroupMma)
    return {4, 2, kKeysPerTile, /*queryInShared=*/steps > 4, false};
  return {8, 1, warpgroupMma && steps <= 8 ? 2 * kKeysPerTile : kKeysPerTile,
          /*queryInShared=*/warpgroupMma, warpgroupMma};
}

class MmaForwardKernel : MmaAttentionKernelBase {
public:
  MmaForwardKernel(KernelBuilder &kb, const AttentionOperands &in, Emulation emulate,
                   ForwardLayout layout)
      : MmaAttentionKernelBase(kb, in, emulate, layout.warps, layout.keysPerTile, layout.rowTiles,
                               layout.warpgroupMma),
        queryInShared(layout.queryInShared) {}
  MmaForwardKernel(KernelBuilder &kb, const AttentionOperands &in, Emulation emulate,
                   bool warpgroupMma)
      : MmaForwardKernel(kb, in, emulate, layoutFor(headDimOf(in), warpgroupMma)) {}

  /// Whether a block's shared memory holds the two stages of K and V tiles
  /// (and Q's rows), and a thread's registers its state, in the mma.sync
  /// layout. The warpgroup-MMA one (sm_90a only) needs at most 224 KB (head
  /// dim 128), within sm_90's 227 KB.
  static bool fits(int64_t headDim) {
    ForwardLayout layout = layoutFor(headDim, /*warpgroupMma=*/false);
    int64_t queryBytes = layout.queryInShared
                             ? tileBytes(layout.warps * layout.rowTiles * MmaBuilder::kM, headDim)
                             : 0;
    return headDim <= kMaxHeadDim &&
           2 * kStages * tileBytes(kKeysPerTile, headDim) + queryBytes <= kMaxSharedBytes;
  }

  void emit() {
    forEachRowBlock(seqQ, sharedTileRows(queryInShared ? 1 : 0), {},
                    [&](Value bi, Value hi, Value q0, ArrayRef<Value> shared) {
                      emitBlock(bi, hi, q0, shared);
                    });
  }

private:
  /// Shared memory of a block: beyond the 48 KB of static shared memory
  /// (dynamic from head dim 72), within sm_80's 163 KB, and two blocks in
  /// an sm_90 SM's 228 KB (head dim 128: 102 KB).
  static constexpr int64_t kMaxSharedBytes = 112 * 1024;
  /// Head dims the tensor-core kernels take (forward and backward). Past
  /// 128, registers bound them (ptxas, sm_90): the forward spills from head
  /// dim 208; the backward's dK/dV kernel, whose threads hold two head-dim
  /// accumulators, spills 100 bytes at 176.
  static constexpr int64_t kMaxHeadDim = 176;

  /// `shared`: the K and V tiles of each stage (2, or 3 with warpgroup
  /// MMAs), then Q's rows where queryInShared.
  void emitBlock(Value bi, Value hi, Value q0, ArrayRef<Value> shared) {
    RowFactor queries = rowFactors(1, queryInShared, shared.drop_front(2 * stages))[0];
    Value scores = columnAccumulators();
    Value acc = dimAccumulators();
    // Per row (rowSlot): the running max, this lane's part of the running
    // sum, and the current tile's max.
    Value max = block.privateArray({rowSlots()}), sum = block.privateArray({rowSlots()});
    Value tileMax = block.privateArray({rowSlots()});
    // Q's rows are copied asynchronously only where K's and V's are too:
    // streamTiles' waits then cover them.
    Value queryCopies = queryInShared ? vectorCopies({in.q, in.k, in.v}) : Value();
    // Grouped-query attention: the query head's key/value head.
    Value kvh = in.keyHead(b, loc, hi);

    block.phase(
        [&](Value t) {
          Lane lane = laneOf(t, q0);
          loadRows(t, lane, bi, hi, q0, seqQ, {in.q}, queries, queryCopies);
          zero(t, acc, dimTiles);
          for (int64_t slot = 0; slot < rowSlots(); ++slot) {
            kb.store(kb.f32(kNegInf), max, entry(t, slot));
            kb.store(kb.f32(0.0), sum, entry(t, slot));
          }
        },
        /*barrier=*/false);

    Value tiles = limits().keyTiles(bi, q0, rowsPerBlock, columns);
    SmallVector<SmallVector<Value>> stageArrays = stagesOf(shared, 2);
    // Calls body(masked) for thread t and the key tile at k0: masked where
    // some key of the tile may be hidden from some row (of the warp, or
    // where the loop is split by masks, of the block; a peeled first tile
    // always is).
    auto withMasks = [&](Value t, const StreamedTile &tile, function_ref<void(bool)> body) {
      if (warpgroupMma)
        return body(tile.masked.value_or(true));
      ifMasked(keyTileNeedsMask(bi, tile.first, laneOf(t, q0)), body);
    };
    // Thread t's scores of the key tile from its products `qk` - logits
    // where masked, else the products, scaled in their exponentials - and
    // their rows' maxima.
    auto storeScores = [&](Value t, const StreamedTile &tile, ArrayRef<Value> qk) {
      Lane lane = laneOf(t, q0);
      withMasks(t, tile, [&](bool masked) {
        SmallVector<Value> visible =
            masked ? visibleColumns(bi, lane, tile.first) : SmallVector<Value>();
        SmallVector<Value> rowMax(rowSlots(), kb.f32(kNegInf));
        forEachAccumulator(columnTiles, [&](int64_t m, int64_t n, int64_t r) {
          Value s = qk[accumulatorIndex(m, n, r, columnTiles)];
          if (!visible.empty()) {
            Value column =
                arith::ConstantIntOp::create(b, loc, b.getI32Type(), n * MmaBuilder::kN + r % 2);
            Value seen = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, column,
                                               visible[rowSlot(m, r / 2)]);
            s = kb.select(seen, kb.mul(s, kb.f32(logit2Factor())), kb.f32(kNegInf));
          } else if (masked) {
            s = maskedLogit2(s, bi, hi, rowOf(lane, m, r),
                             kb.addi(tile.first, columnOf(lane, n, r)));
          }
          kb.store(s, scores, entry(t, tileIndex(m, n, columnTiles), r));
          Value &slotMax = rowMax[rowSlot(m, r / 2)];
          slotMax = maximum(slotMax, s);
        });
        for (int64_t slot = 0; slot < rowSlots(); ++slot) {
          Value logitMax = masked ? rowMax[slot] : kb.mul(rowMax[slot], kb.f32(logit2Factor()));
          kb.store(logitMax, tileMax, entry(t, slot));
        }
      });
    };
    auto reduceTileMax = [&] {
      block.allReduceLanes({tileMax}, rowSlots(), /*laneBits=*/3,
                           [&](Value x, Value y) { return maximum(x, y); });
    };

    if (!warpgroupMma) {
      streamTiles(
          kb.index(0), tiles, bi, kvh, seqK, {in.k, in.v}, stageArrays,
          [&](const StreamedTile &tile) {
            block.phase(
                [&](Value t) {
                  SmallVector<Value> qk =
                      products(t, laneOf(t, q0), queries, tile.stage[0], [&] { tile.copyNext(t); });
                  storeScores(t, tile, qk);
                },
                /*barrier=*/false);
            reduceTileMax();
            block.phase(
                [&](Value t) {
                  withMasks(t, tile, [&](bool masked) {
                    rescale(t, acc, updateStatistics(t, scores, max, sum, tileMax, masked));
                  });
                },
                /*barrier=*/false);
            block.phase([&](Value t) { accumulate(t, laneOf(t, q0), scores, tile.stage[1], acc); },
                        /*barrier=*/false);
          });
    } else {
      // Software-pipelined as FlashAttention-3's intra-warpgroup overlap: a
      // tile's S products are issued, then the last tile's P V behind them;
      // the softmax of S runs while the tensor cores compute P V, which is
      // waited for only to rescale O. ptxas keeps the overlap only where no
      // branch joins in between (streamTiles' maskedFrom).
      Value logits = columnAccumulators();
      auto previousValueTile = [&](Value tile) {
        return stageOf(tile, stageArrays, /*later=*/-1)[1];
      };
      streamTiles(
          kb.index(0), tiles, bi, kvh, seqK, {in.k, in.v}, stageArrays,
          [&](const StreamedTile &tile) {
            block.phase(
                [&](Value t) {
                  Lane lane = laneOf(t, q0);
                  storeAccumulators(t, logits, issueProducts(t, lane, queries, tile.stage[0]));
                  if (!tile.peeled)
                    accumulate(t, lane, scores, previousValueTile(kb.divui(tile.first, columns)),
                               acc);
                },
                /*barrier=*/false);
            block.phase(
                [&](Value t) {
                  SmallVector<Value> qk = waitForProducts(
                      t, loadAccumulators(t, logits, columnTiles), tile.peeled ? 0 : 1);
                  tile.copyNext(t);
                  storeScores(t, tile, qk);
                },
                /*barrier=*/false);
            reduceTileMax();
            block.phase(
                [&](Value t) {
                  withMasks(t, tile, [&](bool masked) {
                    SmallVector<std::pair<Value, Value>> factors =
                        updateStatistics(t, scores, max, sum, tileMax, masked);
                    waitForAccumulators(t, {acc});
                    rescale(t, acc, factors);
                  });
                },
                /*barrier=*/false);
          },
          /*stageMore=*/nullptr, MaskSplit{firstMaskedTile(bi, q0)},
          /*reads=*/{{/*first=*/0, /*last=*/0}, {/*first=*/1, /*last=*/1}});
      // The last tile's P V.
      block.phase(
          [&](Value t) {
            kb.ifThen(kb.below(kb.index(0), tiles),
                      [&] { accumulate(t, laneOf(t, q0), scores, previousValueTile(tiles), acc); });
          },
          /*barrier=*/false);
    }

    block.allReduceLanes({sum}, rowSlots(), /*laneBits=*/3,
                         [&](Value x, Value y) { return kb.add(x, y); });
    block.phase(
        [&](Value t) {
          Lane lane = laneOf(t, q0);
          waitForAccumulators(t, {acc});
          storeRows(t, lane, bi, hi, acc, in.out, seqQ, [&](int64_t slot, Value row) {
            Value l = kb.load(sum, entry(t, slot));
            Value empty = kb.equals(l, 0.0);
            if (in.lse) {
              kb.ifThen(kb.below(lane.inGroup, 1), [&] {
                Value lse =
                    kb.fma(kb.load(max, entry(t, slot)), kb.f32(llvm::numbers::ln2), kb.log(l));
                kb.store(kb.select(empty, kb.f32(kNegInf), lse), in.lse, {bi, hi, row});
              });
            }
            return kb.select(empty, kb.f32(0.0), kb.div(kb.f32(1.0), l));
          });
        },
        /*barrier=*/false);
  }

  /// Without biases, what masks a tile's keys (from k0) from the lane's
  /// rows: per row slot, the row's keys there (from seq_k and the causal
  /// limit) less the lane's first column, as i32 - a key is seen where its
  /// accumulator's constant column offset (columnOf less the lane's first
  /// column) is below it, one compare (the key's index and a 64-bit compare
  /// per score took the registers that spilled in the masked tiles of the
  /// sm_90a kernels). None with biases (maskedLogit2).
  SmallVector<Value> visibleColumns(Value bi, const Lane &lane, Value k0) {
    if (in.keyBias || in.bias)
      return {};
    Value laneColumn = kb.addi(k0, columnOf(lane, 0, 0));
    SmallVector<Value> visible;
    for (int64_t slot = 0; slot < rowSlots(); ++slot) {
      Value keys = limits().visibleEnd(bi, rowOf(lane, slot / 2, (slot % 2) * 2));
      Value columns = arith::SubIOp::create(b, loc, keys, laneColumn);
      visible.push_back(arith::IndexCastOp::create(b, loc, b.getI32Type(), columns));
    }
    return visible;
  }

  /// The online-softmax step of the thread's rows: the new max from the
  /// tile's, the scores (logits where `masked`, else products) turned into
  /// probabilities, the sums updated. Returns per row slot whether its max
  /// grew (or is NaN) and the factor of its accumulators then.
  SmallVector<std::pair<Value, Value>> updateStatistics(Value t, Value scores, Value max, Value sum,
                                                        Value tileMax, bool masked) {
    SmallVector<std::pair<Value, Value>> factors;
    for (int64_t slot = 0; slot < rowSlots(); ++slot) {
      int64_t m = slot / 2, half = slot % 2;
      SmallVector<Value> row = entry(t, slot);
      Value oldMax = kb.load(max, row);
      Value newMax = maximum(oldMax, kb.load(tileMax, row));
      Value tileSum = kb.f32(0.0);
      for (int64_t n = 0; n < columnTiles; ++n) {
        for (int64_t r = half * 2; r < half * 2 + 2; ++r) {
          SmallVector<Value> at = entry(t, tileIndex(m, n, columnTiles), r);
          Value score = kb.load(scores, at);
          Value p = masked ? probability2(score, newMax) : productProbability2(score, newMax);
          kb.store(p, scores, at);
          tileSum = kb.add(tileSum, p);
        }
      }
      Value correction = probability2(oldMax, newMax);
      kb.store(kb.fma(kb.load(sum, row), correction, tileSum), sum, row);
      kb.store(newMax, max, row);
      factors.push_back(
          {arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, newMax, oldMax), correction});
    }
    return factors;
  }

  /// Rescales the head-dim accumulators of each row slot by its factor
  /// where `factors` (updateStatistics) says so: the factor is exactly 1
  /// where the max stays (most tiles after the first few).
  void rescale(Value t, Value acc, ArrayRef<std::pair<Value, Value>> factors) {
    for (int64_t slot = 0; slot < rowSlots(); ++slot) {
      int64_t m = slot / 2, half = slot % 2;
      auto [rescaled, factor] = factors[slot];
      kb.ifThen(rescaled, [&, factor = factor] {
        for (int64_t n = 0; n < dimTiles; ++n) {
          for (int64_t r = half * 2; r < half * 2 + 2; ++r) {
            SmallVector<Value> at = entry(t, tileIndex(m, n, dimTiles), r);
            kb.store(kb.mul(kb.load(acc, at), factor), acc, at);
          }
        }
      });
    }
  }

  bool queryInShared;
};

} // namespace

bool xfmr::gpu::fitsMmaAttention(const AttentionOperands &operands) {
  // Sliding windows and soft-capped scores are the f32 kernel's (which
  // widens narrow loads) until the tensor-core kernels take them.
  Type element = cast<MemRefType>(operands.q.getType()).getElementType();
  return (element.isBF16() || element.isF16()) && !operands.window && !operands.softcap &&
         MmaForwardKernel::fits(MmaAttentionKernelBase::headDimOf(operands));
}

void xfmr::gpu::emitMmaAttention(KernelBuilder &kb, const AttentionOperands &operands,
                                 Emulation emulate, bool warpgroupMma) {
  assert(fitsMmaAttention(operands) && "windows and soft-caps are the f32 kernel's");
  MmaForwardKernel(kb, operands, emulate, warpgroupMma).emit();
}
