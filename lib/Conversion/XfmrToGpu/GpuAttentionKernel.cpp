//===- GpuAttentionKernel.cpp - fused attention as GPU kernels ---*- C++ -*-===//
//
// Forward, one kernel: a thread block per (query tile, head, batch), a
// thread per query row:
//
//   q = scale * Q[row]; o = 0; m = -inf; l = 0        private to the thread
//   for each key tile (up to the block's causal limit):
//     K_tile, V_tile <- K, V                         shared, loaded by all
//     barrier
//     for each chunk of up to 16 of the tile's keys j:
//       s_j = q . K_tile[j] + biases, -inf if masked
//       m' = max(m, max_j s_j); p_j = e^(s_j - m')
//       o = o e^(m - m') + sum_j p_j V_tile[j]; l = l e^(m - m') + sum_j p_j
//     barrier
//   out[row] = o / l (0 where nothing was visible); lse = m + log l
//
// A chunk's scores are values, not an array, and up to head dim 128 the
// head-dim loops are unrolled: q, o and the scores stay in registers (with
// loops, ptxas places q and o in local memory and reads them per key).
//
// A few query rows (a decode step's) would leave all but one thread of a
// block idle behind a long loop over the keys: there, each row has up to a
// warp of lanes, lane l taking the keys l, l + lanes, ... of every tile
// with a state (m, l, o) of its own, read where they are rather than
// staged through shared memory (so a lane has its whole chunk's loads in
// flight, and no barrier waits for a tile); the lanes' states are then
// merged by shuffles (m the lanes' max, l and o their sums, each rescaled
// by e^(m_lane - m)).
//
// Backward (FlashAttention-2), two kernels, so that every gradient row has
// one writer and no atomics are needed. With P = e^(S - lse) recomputed
// from the forward's log-sum-exp and D = rowsum(dO * O):
//
//   dK/dV: a block per key tile, a thread per key row j:
//     for each query tile that sees the block's keys:
//       scale * Q_tile, dO_tile, lse_tile, D_tile -> shared; barrier
//       for each query i: p = e^(s_ij - lse_i); dV_j += p dO_i;
//                         dK_j += p (dO_i . V_j - D_i) scale Q_i
//       barrier
//   dQ: a block per query tile, a thread per query row i:
//     for each key tile the row's block sees:
//       K_tile, V_tile -> shared; barrier
//       for each key j: dQ_i += p (dO_i . V_j - D_i) scale K_j
//       barrier
//
// Up to head dim 64 the backward's head-dim loops are unrolled too, which
// keeps its per-row arrays in registers (dQ) or mostly so (dK/dV).
//
//===----------------------------------------------------------------------===//

#include "GpuAttentionKernelBase.h"
#include "GpuKernels.h"
#include "ThreadBlockBuilder.h"

using namespace mlir;
using namespace xfmr;
using namespace xfmr::kernels;
using namespace xfmr::gpu;

namespace {

class ForwardKernel : AttentionKernelBase {
public:
  ForwardKernel(KernelBuilder &kb, const AttentionOperands &in, Emulation emulate)
      : AttentionKernelBase(kb, in), keysPerTile(rowsPerTile(seqK)),
        lanesPerRow(lanesFor(seqQ, keysPerTile)),
        rowsPerBlock(lanesPerRow > 1 ? llvm::alignTo(seqQ * lanesPerRow, kWarp) / lanesPerRow
                                     : threadsFor(seqQ)),
        block(kb, emulate, rowsPerBlock * lanesPerRow) {
    unrollHeadDim = headDim <= kMaxUnrolledHeadDim;
  }

  void emit() {
    // Split rows read their keys and values where they are.
    SmallVector<SmallVector<int64_t>> tiles;
    if (lanesPerRow == 1)
      tiles.assign(2, {keysPerTile, headDim});
    block.forEachBlock({llvm::divideCeilSigned(seqQ, rowsPerBlock), heads, batch}, tiles,
                       [&](std::array<Value, 3> ids, ArrayRef<Value> shared) {
                         Value q0 = kb.muli(ids[0], rowsPerBlock);
                         emitBlock(ids[2], ids[1], q0, shared.empty() ? Value() : shared[0],
                                   shared.empty() ? Value() : shared[1]);
                       });
  }

private:
  /// Head dims up to which the head-dim loops are unrolled. At 128, q and
  /// o take 256 registers: ptxas spills about 400 bytes, but reads local
  /// memory 126 times per 16 keys (sm_90) instead of 528 with the loops.
  static constexpr int64_t kMaxUnrolledHeadDim = 128;
  static constexpr int64_t kMaxKeysPerChunk = 16;
  /// Query rows up to which each row's keys are split among lanes.
  static constexpr int64_t kMaxSplitRows = 4;

  /// Lanes a query row's keys are split among: for at most kMaxSplitRows
  /// rows, the most (up to a warp) that divide a key tile, else 1.
  static int64_t lanesFor(int64_t rows, int64_t keysPerTile) {
    if (rows > kMaxSplitRows)
      return 1;
    int64_t lanes = kWarp;
    while (keysPerTile % lanes != 0)
      lanes /= 2;
    return lanes;
  }

  /// The block row of thread t, and its lane in the row.
  Value rowOf(Value t) { return lanesPerRow > 1 ? kb.divui(t, lanesPerRow) : t; }
  Value laneOf(Value t) { return kb.remui(t, lanesPerRow); }

  void emitBlock(Value bi, Value hi, Value q0, Value keyTile, Value valueTile) {
    Value query = block.privateArray({headDim});
    Value acc = block.privateArray({headDim});
    Value max = block.privateArray({1});
    Value sum = block.privateArray({1});
    Value zero = kb.index(0);
    Value kvh = in.keyHead(b, loc, hi);

    block.phase(
        [&](Value t) {
          ifRowExists(q0, rowOf(t), seqQ, [&](Value row) {
            forHeadDim([&](Value c) {
              kb.store(kb.mul(kb.loadWidened(in.q, in.at(bi, row, hi, c)), kb.f32(in.scale)), query,
                       block.at(t, {c}));
              kb.store(kb.f32(0.0), acc, block.at(t, {c}));
            });
            kb.store(kb.f32(kNegInf), max, block.at(t, {zero}));
            kb.store(kb.f32(0.0), sum, block.at(t, {zero}));
          });
        },
        /*barrier=*/keyTile != nullptr);

    kb.forLoop(limits().firstKeyTile(bi, q0, keysPerTile),
               limits().keyTiles(bi, q0, rowsPerBlock, keysPerTile), 1, [&](Value tile) {
                 Value k0 = kb.muli(tile, keysPerTile);
                 if (keyTile)
                   block.phase([&](Value t) {
                     loadTiles(t, rowsPerBlock, bi, kvh, k0, keysPerTile, seqK,
                               {{in.k, keyTile}, {in.v, valueTile}});
                   });
                 block.phase(
                     [&](Value t) {
                       ifRowExists(q0, rowOf(t), seqQ, [&](Value row) {
                         kb.forLoop(zero, kb.index(keysPerTile), keysPerChunk() * lanesPerRow,
                                    [&](Value j0) {
                                      Value first = lanesPerRow > 1 ? kb.addi(j0, laneOf(t)) : j0;
                                      emitChunkUpdate(bi, hi, kvh, row, k0, first, keyTile,
                                                      valueTile, t, query, acc, max, sum);
                                    });
                       });
                     },
                     /*barrier=*/keyTile != nullptr);
               });
    if (lanesPerRow > 1)
      mergeLanes(q0, acc, max, sum);

    block.phase(
        [&](Value t) {
          ifRowExists(q0, rowOf(t), seqQ, [&](Value row) {
            if (lanesPerRow == 1)
              return storeRow(bi, hi, row, t, acc, max, sum);
            // After the merge every lane of the row holds its state.
            kb.ifThen(kb.below(laneOf(t), 1), [&] { storeRow(bi, hi, row, t, acc, max, sum); });
          });
        },
        /*barrier=*/false);
  }

  /// out[row] = o / l (0 where nothing was visible); lse = m + log l.
  void storeRow(Value bi, Value hi, Value row, Value t, Value acc, Value max, Value sum) {
    Value zero = kb.index(0);
    Value l = kb.load(sum, block.at(t, {zero}));
    Value empty = kb.equals(l, 0.0);
    Value inverse = kb.select(empty, kb.f32(0.0), kb.div(kb.f32(1.0), l));
    forHeadDim([&](Value c) {
      kb.storeRounded(kb.mul(kb.load(acc, block.at(t, {c})), inverse), in.out,
                      in.at(bi, row, hi, c));
    });
    if (in.lse) {
      Value lse = kb.add(kb.load(max, block.at(t, {zero})), kb.log(l));
      kb.store(kb.select(empty, kb.f32(kNegInf), lse), in.lse, {bi, hi, row});
    }
  }

  /// Merges the states of a row's lanes into each of them: m the lanes'
  /// max, l and o the sums of theirs rescaled by e^(m_lane - m).
  void mergeLanes(Value q0, Value acc, Value max, Value sum) {
    Value zero = kb.index(0);
    Value laneMax = block.privateArray({1});
    block.phase(
        [&](Value t) { kb.store(kb.load(max, block.at(t, {zero})), laneMax, block.at(t, {zero})); },
        /*barrier=*/false);
    block.allReduceLanes({max}, 1, lanesPerRow - 1, [&](Value x, Value y) { return kb.max(x, y); });
    block.phase(
        [&](Value t) {
          ifRowExists(q0, rowOf(t), seqQ, [&](Value) {
            Value correction = probability(kb.load(laneMax, block.at(t, {zero})),
                                           kb.load(max, block.at(t, {zero})));
            forHeadDim([&](Value c) {
              kb.store(kb.mul(kb.load(acc, block.at(t, {c})), correction), acc, block.at(t, {c}));
            });
            kb.store(kb.mul(kb.load(sum, block.at(t, {zero})), correction), sum,
                     block.at(t, {zero}));
          });
        },
        /*barrier=*/false);
    auto add = [&](Value x, Value y) { return kb.add(x, y); };
    block.allReduceLanes({acc}, headDim, lanesPerRow - 1, add);
    block.allReduceLanes({sum}, 1, lanesPerRow - 1, add);
  }

  /// Element c of key j of the tile from key k0: from its shared `tile`,
  /// or (split rows, which have none) from `operand` itself, clamped to the
  /// sequence (the score masks keys past it).
  Value tileValue(Value operand, Value tile, Value bi, Value hi, Value k0, Value j, Value c) {
    if (tile)
      return kb.load(tile, {j, c});
    Value key = kb.mini(kb.addi(k0, j), kb.index(seqK - 1));
    return kb.loadWidened(operand, in.at(bi, key, hi, c));
  }

  /// Keys of a chunk (of a lane's keys of a tile): the largest power of 2
  /// up to kMaxKeysPerChunk that divides them.
  int64_t keysPerChunk() const {
    int64_t keys = kMaxKeysPerChunk;
    while ((keysPerTile / lanesPerRow) % keys != 0)
      keys /= 2;
    return keys;
  }

  /// The online-softmax step of one thread's row (of query head `hi`, key
  /// head `kvh`) over the keys j0, j0 + lanesPerRow, ... (keysPerChunk() of
  /// them) of a tile (from key k0).
  void emitChunkUpdate(Value bi, Value hi, Value kvh, Value row, Value k0, Value j0, Value keyTile,
                       Value valueTile, Value t, Value query, Value acc, Value max, Value sum) {
    Value zero = kb.index(0);
    SmallVector<Value> keys, scores;
    Value chunkMax = kb.f32(kNegInf);
    for (int64_t e = 0; e < keysPerChunk(); ++e) {
      Value j = kb.addi(j0, kb.index(e * lanesPerRow));
      Value qk =
          dot([&](Value c) { return kb.load(query, block.at(t, {c})); },
              [&](Value c) { return tileValue(in.k, keyTile, bi, kvh, k0, j, c); }, kb.f32(0.0));
      keys.push_back(j);
      scores.push_back(score(bi, hi, row, kb.addi(k0, j), qk));
      chunkMax = kb.max(chunkMax, scores.back());
    }
    Value oldMax = kb.load(max, block.at(t, {zero}));
    Value newMax = kb.max(chunkMax, oldMax);
    // Nothing visible yet: the state stays as it is.
    Value anything =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::ONE, newMax, kb.f32(kNegInf));
    kb.ifThen(anything, [&] {
      Value correction = probability(oldMax, newMax);
      Value chunkSum = kb.f32(0.0);
      SmallVector<Value> probabilities;
      for (Value s : scores) {
        probabilities.push_back(probability(s, newMax));
        chunkSum = kb.add(chunkSum, probabilities.back());
      }
      forHeadDim([&](Value c) {
        Value total = kb.mul(kb.load(acc, block.at(t, {c})), correction);
        for (auto [j, p] : llvm::zip_equal(keys, probabilities))
          total = kb.fma(p, tileValue(in.v, valueTile, bi, kvh, k0, j, c), total);
        kb.store(total, acc, block.at(t, {c}));
      });
      Value l = kb.load(sum, block.at(t, {zero}));
      kb.store(kb.fma(l, correction, chunkSum), sum, block.at(t, {zero}));
      kb.store(newMax, max, block.at(t, {zero}));
    });
  }

  int64_t keysPerTile, lanesPerRow, rowsPerBlock;
  ThreadBlockBuilder block;
};

class BackwardKernel : AttentionKernelBase {
public:
  BackwardKernel(KernelBuilder &kb, const AttentionOperands &in, Emulation emulate)
      : AttentionKernelBase(kb, in), emulate(emulate) {
    unrollHeadDim = headDim <= kMaxUnrolledHeadDim;
  }

  void emit() {
    emitKeyGradients();
    emitQueryGradients();
  }

private:
  /// Head dims up to which the head-dim loops are unrolled. At 64 (sm_90,
  /// per query of the inner loops): dQ 278 instructions, 14 local-memory
  /// accesses, instead of 456 and 192; dK/dV (K, V, dK and dV: 256 values
  /// a thread) 454 and 117 instead of 573 and 240.
  static constexpr int64_t kMaxUnrolledHeadDim = 64;

  /// rowsum(dO * O) of a query row.
  Value outputDot(Value bi, Value hi, Value row) {
    return dot([&](Value c) { return kb.loadWidened(in.gradOut, in.at(bi, row, hi, c)); },
               [&](Value c) { return kb.loadWidened(in.out, in.at(bi, row, hi, c)); }, kb.f32(0.0));
  }

  void emitKeyGradients() {
    int64_t threads = threadsFor(seqK), queriesPerTile = rowsPerTile(seqQ);
    ThreadBlockBuilder block(kb, emulate, threads);
    SmallVector<int64_t> tileShape = {queriesPerTile, headDim}, rowShape = {queriesPerTile};
    block.forEachBlock(
        {llvm::divideCeilSigned(seqK, threads), heads, batch},
        {tileShape, tileShape, rowShape, rowShape},
        [&](std::array<Value, 3> ids, ArrayRef<Value> shared) {
          Value bi = ids[2], hi = ids[1], k0 = kb.muli(ids[0], threads);
          Value queryTile = shared[0], gradOutTile = shared[1], lseTile = shared[2],
                dotTile = shared[3];
          Value key = block.privateArray({headDim}), value = block.privateArray({headDim});
          Value gradKey = block.privateArray({headDim}), gradValue = block.privateArray({headDim});
          // Only private state: no barrier.
          block.phase(
              [&](Value t) {
                ifRowExists(k0, t, seqK, [&](Value row) {
                  forHeadDim([&](Value c) {
                    kb.store(kb.loadWidened(in.k, in.at(bi, row, hi, c)), key, block.at(t, {c}));
                    kb.store(kb.loadWidened(in.v, in.at(bi, row, hi, c)), value, block.at(t, {c}));
                    kb.store(kb.f32(0.0), gradKey, block.at(t, {c}));
                    kb.store(kb.f32(0.0), gradValue, block.at(t, {c}));
                  });
                });
              },
              /*barrier=*/false);

          // The query rows before the first that sees k0, and under a window
          // those after the last whose window reaches the block's last key,
          // see none of the block's keys.
          Value firstTile = kb.divui(limits().firstQuerySeeing(bi, k0), queriesPerTile);
          Value endTile =
              limits().queryTilesSeeing(bi, kb.addi(k0, kb.index(threads - 1)), queriesPerTile);
          kb.forLoop(
              firstTile, endTile, 1, [&](Value tile) {
                Value q0 = kb.muli(tile, queriesPerTile);
                block.phase([&](Value t) {
                  loadTiles(t, threads, bi, hi, q0, queriesPerTile, seqQ, {{in.q, queryTile}},
                            in.scale);
                  loadTiles(t, threads, bi, hi, q0, queriesPerTile, seqQ,
                            {{in.gradOut, gradOutTile}});
                  // Rows past seq_q get an lse of -inf: they contribute nothing.
                  kb.forLoop(t, kb.index(queriesPerTile), threads, [&](Value i) {
                    Value row = kb.addi(q0, i);
                    Value source = kb.mini(row, kb.index(seqQ - 1));
                    Value lse = kb.load(in.lse, {bi, hi, source});
                    kb.store(kb.select(kb.below(row, seqQ), lse, kb.f32(kNegInf)), lseTile, {i});
                    kb.store(outputDot(bi, hi, source), dotTile, {i});
                  });
                });
                block.phase([&](Value t) {
                  ifRowExists(k0, t, seqK, [&](Value keyRow) {
                    kb.forLoop(kb.index(0), kb.index(queriesPerTile), 1, [&](Value i) {
                      Value qk = dot(
                          [&](Value c) {
                            return kb.load(queryTile, {i, c});
                          },
                          [&](Value c) { return kb.load(key, block.at(t, {c})); }, kb.f32(0.0));
                      Value s = score(bi, hi, kb.addi(q0, i), keyRow, qk);
                      Value p = probability(s, kb.load(lseTile, {i}));
                      Value gradP = dot(
                          [&](Value c) {
                            return kb.load(gradOutTile, {i, c});
                          },
                          [&](Value c) { return kb.load(value, block.at(t, {c})); }, kb.f32(0.0));
                      Value gradS = scoreGradient(p, gradP, kb.load(dotTile, {i}), qk);
                      forHeadDim([&](Value c) {
                        SmallVector<Value> at = block.at(t, {c});
                        kb.store(kb.fma(p, kb.load(gradOutTile, {i, c}), kb.load(gradValue, at)),
                                 gradValue, at);
                        kb.store(kb.fma(gradS, kb.load(queryTile, {i, c}), kb.load(gradKey, at)),
                                 gradKey, at);
                      });
                    });
                  });
                });
              });

          block.phase(
              [&](Value t) {
                ifRowExists(k0, t, seqK, [&](Value row) {
                  forHeadDim([&](Value c) {
                    kb.storeRounded(kb.load(gradKey, block.at(t, {c})), in.gradK,
                                    in.at(bi, row, hi, c));
                    kb.storeRounded(kb.load(gradValue, block.at(t, {c})), in.gradV,
                                    in.at(bi, row, hi, c));
                  });
                });
              },
              /*barrier=*/false);
        });
  }

  void emitQueryGradients() {
    int64_t threads = threadsFor(seqQ), keysPerTile = rowsPerTile(seqK);
    ThreadBlockBuilder block(kb, emulate, threads);
    SmallVector<int64_t> tileShape = {keysPerTile, headDim};
    block.forEachBlock(
        {llvm::divideCeilSigned(seqQ, threads), heads, batch}, {tileShape, tileShape},
        [&](std::array<Value, 3> ids, ArrayRef<Value> shared) {
          Value bi = ids[2], hi = ids[1], q0 = kb.muli(ids[0], threads);
          Value keyTile = shared[0], valueTile = shared[1];
          Value query = block.privateArray({headDim}), gradOut = block.privateArray({headDim});
          Value gradQuery = block.privateArray({headDim});
          // The row's lse and rowsum(dO * O).
          Value rowTerms = block.privateArray({2});
          Value zero = kb.index(0), one = kb.index(1);
          block.phase(
              [&](Value t) {
                ifRowExists(q0, t, seqQ, [&](Value row) {
                  forHeadDim([&](Value c) {
                    SmallVector<Value> at = block.at(t, {c});
                    kb.store(kb.mul(kb.loadWidened(in.q, in.at(bi, row, hi, c)), kb.f32(in.scale)),
                             query, at);
                    kb.store(kb.loadWidened(in.gradOut, in.at(bi, row, hi, c)), gradOut, at);
                    kb.store(kb.f32(0.0), gradQuery, at);
                  });
                  kb.store(kb.load(in.lse, {bi, hi, row}), rowTerms, block.at(t, {zero}));
                  kb.store(outputDot(bi, hi, row), rowTerms, block.at(t, {one}));
                });
              },
              /*barrier=*/false);

          kb.forLoop(
              limits().firstKeyTile(bi, q0, keysPerTile),
              limits().keyTiles(bi, q0, threads, keysPerTile), 1, [&](Value tile) {
                Value k0 = kb.muli(tile, keysPerTile);
                block.phase([&](Value t) {
                  loadTiles(t, threads, bi, hi, k0, keysPerTile, seqK,
                            {{in.k, keyTile}, {in.v, valueTile}});
                });
                block.phase([&](Value t) {
                  ifRowExists(q0, t, seqQ, [&](Value row) {
                    Value lse = kb.load(rowTerms, block.at(t, {zero}));
                    Value rowDot = kb.load(rowTerms, block.at(t, {one}));
                    kb.forLoop(zero, kb.index(keysPerTile), 1, [&](Value j) {
                      Value qk = dot([&](Value c) { return kb.load(query, block.at(t, {c})); },
                                     [&](Value c) {
                                       return kb.load(keyTile, {j, c});
                                     },
                                     kb.f32(0.0));
                      Value p = probability(score(bi, hi, row, kb.addi(k0, j), qk), lse);
                      Value gradP = dot([&](Value c) { return kb.load(gradOut, block.at(t, {c})); },
                                        [&](Value c) {
                                          return kb.load(valueTile, {j, c});
                                        },
                                        kb.f32(0.0));
                      Value gradS = scoreGradient(p, gradP, rowDot, qk);
                      forHeadDim([&](Value c) {
                        SmallVector<Value> at = block.at(t, {c});
                        kb.store(kb.fma(gradS, kb.load(keyTile, {j, c}), kb.load(gradQuery, at)),
                                 gradQuery, at);
                      });
                    });
                  });
                });
              });

          block.phase(
              [&](Value t) {
                ifRowExists(q0, t, seqQ, [&](Value row) {
                  forHeadDim([&](Value c) {
                    kb.storeRounded(kb.mul(kb.load(gradQuery, block.at(t, {c})), kb.f32(in.scale)),
                                    in.gradQ, in.at(bi, row, hi, c));
                  });
                });
              },
              /*barrier=*/false);
        });
  }

  Emulation emulate;
};

} // namespace

void xfmr::gpu::emitAttention(KernelBuilder &kb, const AttentionOperands &operands,
                              Emulation emulate, bool warpgroupMma) {
  if (fitsMmaAttention(operands))
    return emitMmaAttention(kb, operands, emulate, warpgroupMma);
  ForwardKernel(kb, operands, emulate).emit();
}

void xfmr::gpu::emitAttentionBackward(KernelBuilder &kb, const AttentionOperands &operands,
                                      Emulation emulate, bool warpgroupMma) {
  if (fitsMmaAttention(operands))
    return emitMmaAttentionBackward(kb, operands, emulate, warpgroupMma);
  BackwardKernel(kb, operands, emulate).emit();
}
