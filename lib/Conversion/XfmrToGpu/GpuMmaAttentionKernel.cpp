//===- GpuMmaAttentionKernel.cpp - bf16/f16 attention on tensor cores -*- C++ -*-===//
//
// FlashAttention-2 forward for bf16 or f16 q, k and v: both products on
// tensor cores (mma.sync.m16n8k16, GpuMma.h), the online softmax in f32
// registers. A block per (16 x warps query rows, head, batch), 8 warps (4
// for head dims up to 64) of 16 rows:
//
//   Q fragments <- the warp's rows of Q         registers, once
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
//     S = log2(e) (scale Q K^T + masks)         16 x 64 per warp: 8 x d/16 MMAs
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
//                                               4 x d/8 MMAs (V fragments by
//                                               ldmatrix.trans)
//   out = o / l (0 where nothing was visible); lse = m ln 2 + log l
//
// The exponentials are base 2 so that each is one approximate PTX
// instruction (ex2.approx, 2 ulp; math.exp2 with fastmath afn).
//
// The tensor-core products and the staging are GpuMmaAttentionBase.h's.
//
//===----------------------------------------------------------------------===//

#include "GpuKernels.h"
#include "GpuMmaAttentionBase.h"

using namespace mlir;
using namespace xfmr;
using namespace xfmr::cpu;
using namespace xfmr::gpu;

namespace {

constexpr int64_t kKeysPerTile = 64;

/// Warps of a block (16 query rows each): 8 where a thread's registers
/// allow one block per SM at most anyway, 4 for head dims up to 64, whose
/// 4-warp blocks fit several per SM (measured on an H100: 4 warps 1.3-1.5x
/// faster at head dim 64, 8 warps up to 1.2x faster at 128).
int64_t warpsFor(int64_t headDim) { return MmaAttentionKernelBase::dimSteps(headDim) <= 4 ? 4 : 8; }

class MmaForwardKernel : MmaAttentionKernelBase {
public:
  MmaForwardKernel(KernelBuilder &kb, const AttentionOperands &in, Emulation emulate)
      : MmaAttentionKernelBase(kb, in, emulate, warpsFor(headDimOf(in)), kKeysPerTile) {}

  /// Whether the two stages of K and V tiles fit a block's shared memory.
  static bool fits(int64_t headDim) {
    return 2 * kStages * tileBytes(kKeysPerTile, headDim) <= kMaxStagedSharedBytes;
  }

  void emit() {
    forEachRowBlock(seqQ, 2 * kStages, {},
                    [&](Value bi, Value hi, Value q0, ArrayRef<Value> shared) {
                      emitBlock(bi, hi, q0, shared);
                    });
  }

private:
  /// Shared memory of the stages: beyond the 48 KB of static shared memory
  /// (dynamic from head dim 72), and within what sm_80 and sm_90 give a
  /// block; head dims up to 176.
  static constexpr int64_t kMaxStagedSharedBytes = 96 * 1024;

  /// `shared`: the K and V tiles of stage 0, then of stage 1.
  void emitBlock(Value bi, Value hi, Value q0, ArrayRef<Value> shared) {
    Value queryFragments = fragmentArray();
    Value scores = columnAccumulators();
    Value acc = dimAccumulators();
    // Per row (g, g + 8): the running max, this lane's part of the running
    // sum, and the current tile's max.
    Value max = block.privateArray({2}), sum = block.privateArray({2});
    Value tileMax = block.privateArray({2});

    block.phase(
        [&](Value t) {
          Lane lane = laneOf(t, q0);
          loadFragments(t, lane, bi, hi, in.q, seqQ, queryFragments);
          zero(t, acc, dimTiles);
          for (int64_t half = 0; half < 2; ++half) {
            kb.store(kb.f32(kNegInf), max, entry(t, half));
            kb.store(kb.f32(0.0), sum, entry(t, half));
          }
        },
        /*barrier=*/false);

    Value tiles = keyTileCount(q0, rowsPerBlock, columns);
    streamTiles(
        kb.index(0), tiles, bi, hi, seqK, {in.k, in.v}, shared.take_front(2), shared.drop_front(2),
        [&](Value k0, ArrayRef<Value> stage) {
          Value keyTile = stage[0], valueTile = stage[1];
          block.phase(
              [&](Value t) {
                Lane lane = laneOf(t, q0);
                SmallVector<Value> qk = products(t, lane, queryFragments, keyTile);
                // Masks and biases only where some key of the tile may be
                // hidden from some row of the warp; elsewhere the scores stay
                // products, scaled in their exponentials.
                ifMasked(keyTileNeedsMask(k0, lane), [&](bool masked) {
                  SmallVector<Value> rowMax(2, kb.f32(kNegInf));
                  for (int64_t n = 0; n < columnTiles; ++n) {
                    for (int64_t r = 0; r < kAccumulators; ++r) {
                      Value key = kb.addi(k0, columnOf(lane, n, r));
                      Value s = qk[n * kAccumulators + r];
                      if (masked)
                        s = maskedLogit2(s, bi, hi, rowOf(lane, r), key);
                      kb.store(s, scores, entry(t, n, r));
                      rowMax[r / 2] = maximum(rowMax[r / 2], s);
                    }
                  }
                  for (int64_t half = 0; half < 2; ++half) {
                    Value logitMax =
                        masked ? rowMax[half] : kb.mul(rowMax[half], kb.f32(logit2Factor()));
                    kb.store(logitMax, tileMax, entry(t, half));
                  }
                });
              },
              /*barrier=*/false);
          block.allReduceLanes({tileMax}, 2, /*laneBits=*/3,
                               [&](Value x, Value y) { return maximum(x, y); });
          block.phase(
              [&](Value t) {
                ifMasked(keyTileNeedsMask(k0, laneOf(t, q0)), [&](bool masked) {
                  emitSoftmaxUpdate(t, scores, acc, max, sum, tileMax, masked);
                });
              },
              /*barrier=*/false);
          block.phase([&](Value t) { accumulate(t, laneOf(t, q0), scores, valueTile, acc); },
                      /*barrier=*/false);
        });

    block.allReduceLanes({sum}, 2, /*laneBits=*/3, [&](Value x, Value y) { return kb.add(x, y); });
    block.phase(
        [&](Value t) {
          Lane lane = laneOf(t, q0);
          storeRows(t, lane, bi, hi, acc, in.out, seqQ, [&](int64_t half, Value row) {
            Value l = kb.load(sum, entry(t, half));
            Value empty = kb.equals(l, 0.0);
            if (in.lse) {
              kb.ifThen(kb.below(lane.inGroup, 1), [&] {
                Value lse =
                    kb.fma(kb.load(max, entry(t, half)), kb.f32(llvm::numbers::ln2), kb.log(l));
                kb.store(kb.select(empty, kb.f32(kNegInf), lse), in.lse, {bi, hi, row});
              });
            }
            return kb.select(empty, kb.f32(0.0), kb.div(kb.f32(1.0), l));
          });
        },
        /*barrier=*/false);
  }

  /// The online-softmax step of the thread's two rows: the new max from
  /// the tile's, the scores (logits where `masked`, else products) turned
  /// into probabilities, the sums and accumulators rescaled.
  void emitSoftmaxUpdate(Value t, Value scores, Value acc, Value max, Value sum, Value tileMax,
                         bool masked) {
    for (int64_t half = 0; half < 2; ++half) {
      SmallVector<Value> row = entry(t, half);
      Value oldMax = kb.load(max, row);
      Value newMax = maximum(oldMax, kb.load(tileMax, row));
      Value correction = probability2(oldMax, newMax);
      Value tileSum = kb.f32(0.0);
      for (int64_t n = 0; n < columnTiles; ++n) {
        for (int64_t r = half * 2; r < half * 2 + 2; ++r) {
          Value score = kb.load(scores, entry(t, n, r));
          Value p = masked ? probability2(score, newMax) : productProbability2(score, newMax);
          kb.store(p, scores, entry(t, n, r));
          tileSum = kb.add(tileSum, p);
        }
      }
      kb.store(kb.fma(kb.load(sum, row), correction, tileSum), sum, row);
      kb.store(newMax, max, row);
      // The correction is exactly 1 where the max stays (most tiles after
      // the first few): the row's accumulators are rescaled only where it
      // grew (or is NaN).
      Value grew = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, newMax, oldMax);
      kb.ifThen(grew, [&] {
        for (int64_t n = 0; n < dimTiles; ++n)
          for (int64_t r = half * 2; r < half * 2 + 2; ++r)
            kb.store(kb.mul(kb.load(acc, entry(t, n, r)), correction), acc, entry(t, n, r));
      });
    }
  }
};

} // namespace

bool xfmr::gpu::fitsMmaAttention(const AttentionOperands &operands) {
  Type element = cast<MemRefType>(operands.q.getType()).getElementType();
  return (element.isBF16() || element.isF16()) &&
         MmaForwardKernel::fits(MmaAttentionKernelBase::headDimOf(operands));
}

void xfmr::gpu::emitMmaAttention(KernelBuilder &kb, const AttentionOperands &operands,
                                 Emulation emulate) {
  MmaForwardKernel(kb, operands, emulate).emit();
}
