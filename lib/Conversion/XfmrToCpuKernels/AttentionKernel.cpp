//===- AttentionKernel.cpp - flash attention on CPU vectors -----*- C++ -*-===//
//
// Threads take (batch, head) pairs, which all cost the same even with a
// causal mask, so everything a pair needs is private to its thread. Per
// pair, K^T (and for the backward V^T) is copied once into block-contiguous
// scratch, so products with it vectorize over keys like a GEMM over columns.
// A forward of a few queries (a decode step) instead reads each key and value
// once, in place, a dot product per key, its threads taking a sequence's
// heads together so that they read a [batch, seq, heads, head_dim] cache in
// the order it is stored.
//
// Forward: queries go in blocks of kBlockQ rows; for each block the key
// blocks up to the diagonal are visited:
//
//   S = (scale * Q_block) K^T_block      register-tiled, into a [bq][bk] tile
//   S += bias; masked entries = -inf     causal, key padding, past seq_k
//   per row: m' = max(m, max S); P = exp(S - m'); l = l e^(m - m') + sum P;
//            O *= e^(m - m')             (online softmax)
//   O += P V_block                       register-tiled over head_dim
//
// and finally O / l is written (0 where no key was visible), with the row
// log-sum-exp m + log l when the backward will need it. The forward keeps S
// in base 2 (Q scaled by log2 e as well), so that each exponential is an
// exp2 of a non-positive number, the cheapest kind. Over a KV cache
// (query_offset, key_length) the diagonal and the number of keys are runtime
// values per sequence; key blocks past them are neither packed nor visited.
//
// Backward (FlashAttention-2): for each key block, over the query blocks
// that see it, the probabilities are recomputed from the log-sum-exp:
//
//   P = exp(S - lse); dP = dO V^T; dS = P (dP - rowsum(dO O))
//   dV_block += P^T dO; dK_block += dS^T (scale Q); dQ += dS (scale K)
//
// dK and dV of the block stay in scratch until it is done; dQ accumulates
// in a per-pair buffer, which needs no atomics because the pair is the
// thread's. Extra memory is O(head_dim * seq) per thread; no [seq_q, seq_k]
// buffer exists.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using namespace xfmr;
using namespace xfmr::cpu;
using xfmr::kernels::AttentionLimits;

namespace {

constexpr int64_t kBlockQ = 64;
/// Up to this many queries (decoding), the forward reads keys and values
/// where they are: each is read once, and packing them would cost more than
/// it saves (a copy of the whole cache per step).
constexpr int64_t kInPlaceQueries = 8;
/// The tasks the in-place forward aims for, splitting a sequence's heads
/// when there are fewer sequences, and the most bytes of query and output
/// rows a task keeps (read again at every key: they should stay in L1).
constexpr int64_t kMinInPlaceTasks = 16;
constexpr int64_t kInPlaceRowBytes = 16 * 1024;
/// Keys per block, fewer for short key sequences (rounded up to a panel of
/// 2 vectors), which would otherwise compute mostly padding.
constexpr int64_t kMaxBlockK = 64;
constexpr double kLog2E = 1.4426950408889634;
constexpr double kLn2 = 0.6931471805599453;

/// What the forward and backward kernels share: the geometry, operand
/// packing, masks and the register-tiled block products.
class AttentionKernelBase {
public:
  AttentionKernelBase(VectorBuilder &kb, const AttentionOperands &in)
      : kb(kb), b(kb.builder()), loc(kb.location()), in(in), lanes(kb.cpu().lanes) {
    auto q = cast<MemRefType>(in.q.getType());
    auto k = cast<MemRefType>(in.k.getType());
    const AttentionDims &d = in.dims;
    batch = q.getDimSize(d.batch);
    heads = q.getDimSize(d.heads);
    seqQ = q.getDimSize(d.seq);
    headDim = q.getDimSize(d.headDim);
    seqK = k.getDimSize(d.seq);
    int64_t panel = 2 * lanes;
    blockK = std::min(kMaxBlockK, (seqK + panel - 1) / panel * panel);
    paddedK = (seqK + blockK - 1) / blockK * blockK;
  }

protected:
  Type f32() { return b.getF32Type(); }

  /// Calls `body(batch, head)` for each pair on the thread pool.
  void forEachPair(function_ref<void(Value, Value)> body) {
    kb.parallelFor(batch * heads, [&](Value pair) {
      body(kb.divui(pair, heads), kb.remui(pair, heads));
    });
  }

  /// A key-side operand of pair (b, h) transposed into key blocks,
  ///   packed[block][c][j] = X[b, block * bk + j, h, c],  0 past seq_k,
  /// so a block's 64 x head_dim values are 16 contiguous KiB rather than
  /// rows strided through the whole sequence (pages and prefetch).
  Value packTransposedBlocks(Value source, Value bi, Value hi) {
    Value packed = kb.allocate({paddedK / blockK, headDim, blockK}, f32());
    Value keys = limits().keyCount(bi);
    kb.forLoop(kb.index(0), paddedKeys(keys), 1, [&](Value j) {
      Value valid = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, j, keys);
      Value row = kb.mini(j, kb.index(seqK - 1));
      Value block = kb.divui(j, blockK), inBlock = kb.remui(j, blockK);
      kb.forLoop(kb.index(0), kb.index(headDim), 1, [&](Value c) {
        Value value = kb.loadWidened(source, in.at(bi, row, hi, c));
        kb.store(kb.select(valid, value, kb.f32(0.0)), packed, {block, c, inBlock});
      });
    });
    return packed;
  }

  /// packed[j][c] = factor * X[b, j, h, c] for j < rows, 0 up to
  /// `paddedRows` (of `allocatedRows`).
  Value packRows(Value source, Value bi, Value hi, Value rows, Value paddedRows,
                 int64_t allocatedRows, int64_t lastRow, double factor) {
    Value packed = kb.allocate({allocatedRows, headDim}, f32());
    kb.forLoop(kb.index(0), paddedRows, 1, [&](Value j) {
      Value valid = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, j, rows);
      Value row = kb.mini(j, kb.index(lastRow));
      kb.forLoop(kb.index(0), kb.index(headDim), 1, [&](Value c) {
        Value value = kb.loadWidened(source, in.at(bi, row, hi, c));
        if (factor != 1.0)
          value = kb.mul(value, kb.f32(factor));
        kb.store(kb.select(valid, value, kb.f32(0.0)), packed, {j, c});
      });
    });
    return packed;
  }

  /// The key range of each query (../Kernels/AttentionLimits.h).
  AttentionLimits limits() { return AttentionLimits(b, loc, in.masks()); }

  /// `keys` rounded up to whole key blocks.
  Value paddedKeys(Value keys) {
    return kb.muli(arith::CeilDivUIOp::create(b, loc, keys, kb.index(blockK)), blockK);
  }

  /// Calls `body(masked)` under an scf.if on whether key block `block` of
  /// the query block at q0 needs masking.
  void ifMasked(Value bi, Value block, Value q0, function_ref<void(bool)> body) {
    Value masked = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, block,
                                         limits().unmaskedKeyTiles(bi, q0, blockK));
    auto branch = scf::IfOp::create(b, loc, masked, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(branch.thenBlock()->getTerminator());
    body(true);
    b.setInsertionPoint(branch.elseBlock()->getTerminator());
    body(false);
  }

  /// dest[i][j] = sum_c lhs[row0 + i][c] packed[block][c][j] for i < rows
  /// and the bk keys of the block.
  void emitBlockProduct(Value lhs, Value row0, Value packed, Value block, int64_t rows,
                        Value dest) {
    int64_t panel = 2 * lanes;
    for (int64_t p = 0; p < blockK / panel; ++p) {
      Value col = kb.index(p * panel);
      kb.forRowTiles(kb.index(0), rows, kb.cpu().tileRows(), [&](Value row, int64_t tileRows) {
        Tile tile{tileRows, 2, {}};
        for (int64_t i = 0; i < tileRows * 2; ++i)
          tile.values.push_back(kb.splat(0.0));
        tile = emitTileUpdate(
            kb, tile, kb.index(0), kb.index(headDim),
            [&](int64_t i, Value c) {
              return kb.load(lhs, {kb.addi(row0, kb.addi(row, kb.index(i))), c});
            },
            [&](int64_t j, Value c) {
              return kb.loadVector(packed, {block, c, kb.addi(col, kb.index(j * lanes))});
            });
        for (int64_t i = 0; i < tileRows; ++i)
          for (int64_t j = 0; j < 2; ++j)
            kb.storeVector(tile.at(i, j), dest,
                           {kb.addi(row, kb.index(i)), kb.index(p * panel + j * lanes)});
      });
    }
  }

  /// acc[accRow0 + r][:] += sum over k in [kBegin, kEnd) of a(r, k) B(k)[:]
  /// for r < rows, register-tiled over panels of head_dim; `loadB(k, col,
  /// valid)` reads a vector of row k of B.
  void emitAccumulate(Value acc, Value accRow0, int64_t rows, Value kBegin, Value kEnd,
                      function_ref<Value(Value, Value)> loadA,
                      function_ref<Value(Value, Value, int64_t)> loadB) {
    int64_t panel = 2 * lanes;
    for (int64_t c0 = 0; c0 < headDim; c0 += panel) {
      int64_t width = std::min(panel, headDim - c0);
      int64_t vectors = (width + lanes - 1) / lanes;
      int64_t lastValid = width - (vectors - 1) * lanes;
      auto valid = [&](int64_t j) { return j + 1 == vectors ? lastValid : lanes; };
      kb.forRowTiles(kb.index(0), rows, kb.cpu().tileRows(), [&](Value row, int64_t tileRows) {
        auto accIndices = [&](int64_t i, int64_t j) -> SmallVector<Value> {
          return {kb.addi(accRow0, kb.addi(row, kb.index(i))), kb.index(c0 + j * lanes)};
        };
        Tile tile{tileRows, vectors, {}};
        for (int64_t i = 0; i < tileRows; ++i)
          for (int64_t j = 0; j < vectors; ++j)
            tile.values.push_back(kb.loadVector(acc, accIndices(i, j), valid(j)));
        tile = emitTileUpdate(
            kb, tile, kBegin, kEnd,
            [&](int64_t i, Value k) { return loadA(kb.addi(row, kb.index(i)), k); },
            [&](int64_t j, Value k) { return loadB(k, kb.index(c0 + j * lanes), valid(j)); });
        for (int64_t i = 0; i < tileRows; ++i)
          for (int64_t j = 0; j < vectors; ++j)
            kb.storeVector(tile.at(i, j), acc, accIndices(i, j), valid(j));
      });
    }
  }

  /// The bk / lanes score vectors of row i of `scores` (query qi, keys from
  /// k0) with bias and key padding added (times `biasFactor`, the scores'
  /// unit) and, when `masked`, the causal and past-seq_k entries set to -inf.
  SmallVector<Value> maskedRow(Value bi, Value hi, Value scores, Value i, Value qi, Value k0,
                               bool masked, double biasFactor = 1.0) {
    auto iotaType = VectorType::get({lanes}, b.getIndexType());
    Value iota = vector::StepOp::create(b, loc, iotaType);
    Value limit = limits().visibleEnd(bi, qi);
    Value limitVector = vector::BroadcastOp::create(b, loc, iotaType, limit);
    Value beginVector =
        in.window ? vector::BroadcastOp::create(b, loc, iotaType, limits().visibleBegin(bi, qi))
                  : Value();
    SmallVector<Value> row;
    for (int64_t v = 0; v < blockK / lanes; ++v) {
      Value j0 = kb.addi(k0, kb.index(v * lanes));
      Value score = kb.loadVector(scores, {i, kb.index(v * lanes)});
      if (in.softcap)
        score = lowering::softcapped(b, loc, score, in.softcap * biasFactor);
      auto addBias = [&](Value bias) {
        score = biasFactor == 1.0 ? kb.add(score, bias) : kb.fma(bias, kb.splat(biasFactor), score);
      };
      if (in.keyBias)
        addBias(kb.loadVectorClipped(in.keyBias, {bi, j0}, 0.0));
      if (in.bias)
        addBias(loadBias(bi, hi, qi, j0));
      if (masked) {
        Value keys = arith::AddIOp::create(b, loc, iota,
                                           vector::BroadcastOp::create(b, loc, iotaType, j0));
        Value visible = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, keys, limitVector);
        if (beginVector)
          visible = arith::AndIOp::create(
              b, loc, visible,
              arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, keys, beginVector));
        score = kb.select(visible, score, kb.splat(kNegInf));
      }
      row.push_back(score);
    }
    return row;
  }

  /// `lanes` bias values for query qi and keys [j0, j0 + lanes), reading the
  /// broadcast dims of the rank-4 bias at index 0.
  Value loadBias(Value bi, Value hi, Value qi, Value j0) {
    SmallVector<Value> indices = in.biasAt(kb.index(0), bi, hi, qi, j0);
    if (cast<MemRefType>(in.bias.getType()).getDimSize(3) == 1)
      return kb.splat(kb.load(in.bias, indices));
    // Lanes past seq_k are masked anyway.
    return kb.loadVectorClipped(in.bias, indices, 0.0);
  }

  /// Calls `body(c, valid)` for the vectors covering [0, head_dim).
  void forHeadDimVectors(function_ref<void(Value, int64_t)> body) {
    for (int64_t c = 0; c < headDim; c += lanes)
      body(kb.index(c), std::min(lanes, headDim - c));
  }

  VectorBuilder &kb;
  OpBuilder &b;
  Location loc;
  const AttentionOperands &in;
  int64_t lanes;
  int64_t batch, heads, seqQ, seqK, headDim, blockK, paddedK;
};

class ForwardKernel : AttentionKernelBase {
public:
  using AttentionKernelBase::AttentionKernelBase;

  void emit() {
    if (seqQ <= kInPlaceQueries)
      return emitInPlace();
    forEachPair([&](Value bi, Value hi) {
      Value kvh = in.keyHead(b, loc, hi);
      Value keysT = packTransposedBlocks(in.k, bi, kvh);
      Value keys = limits().keyCount(bi);
      Value values = packRows(in.v, bi, kvh, keys, paddedKeys(keys), paddedK, seqK - 1, 1.0);
      Scratch scratch = allocateScratch(kBlockQ);
      kb.forRowTiles(kb.index(0), seqQ, kBlockQ, [&](Value q0, int64_t rows) {
        emitQueryBlock(bi, hi, keysT, values, scratch, q0, rows);
      });
    });
  }

private:
  struct Scratch {
    Value queries; // [bq][d], scaled
    Value scores;  // [bq][bk], scores then probabilities
    Value output;  // [bq][d], unnormalised
    Value max; // [bq]
    Value sum; // [bq][lanes], per-lane partial sums
  };

  Scratch allocateScratch(int64_t rows) {
    return {kb.allocate({rows, headDim}, f32()), kb.allocate({rows, blockK}, f32()),
            kb.allocate({rows, headDim}, f32()), kb.allocate({rows}, f32()),
            kb.allocate({rows, lanes}, f32())};
  }

  /// Query head `hi`'s rows q0 .. q0 + rows - 1 against the packed keys and
  /// values of its key/value head.
  void emitQueryBlock(Value bi, Value hi, Value keysT, Value values, const Scratch &s, Value q0,
                      int64_t rows) {
    Value zero = kb.index(0);
    initRows(bi, hi, s, zero, q0, rows);
    // Key blocks wholly before a sliding window or past the last visible
    // key are never read.
    kb.forLoop(limits().firstKeyTile(bi, q0, blockK), limits().keyTiles(bi, q0, rows, blockK), 1,
               [&](Value block) {
                 Value k0 = kb.muli(block, blockK);
                 emitBlockProduct(s.queries, zero, keysT, block, rows, s.scores);
                 ifMasked(bi, block, q0, [&](bool masked) {
                   emitSoftmaxUpdate(bi, hi, s, zero, q0, k0, rows, masked);
                 });
                 // O += P V over the block's keys before the key limit.
                 Value kEnd = kb.mini(kb.addi(k0, kb.index(blockK)), limits().keyCount(bi));
                 emitAccumulate(
                     s.output, zero, rows, k0, kEnd,
                     [&](Value i, Value key) {
                       return kb.load(s.scores, {i, arith::SubIOp::create(b, loc, key, k0)});
                     },
                     [&](Value key, Value col, int64_t valid) {
                       return kb.loadVector(values, {key, col}, valid);
                     });
               });
    finishRows(bi, hi, s, zero, q0, rows);
  }

  /// A few queries (decoding) read the keys and values where they are, each
  /// once. A task takes a sequence and a range of its heads and walks the
  /// keys position by position, all its heads at each: it streams through
  /// a [batch, seq, heads, head_dim] cache in the order it is stored (a
  /// position's heads side by side) instead of at the stride of a position,
  /// head after head.
  void emitInPlace() {
    // The fewest ranges of query heads that give the thread pool
    // kMinInPlaceTasks tasks with their query and output rows in
    // kInPlaceRowBytes, or a head a task.
    int64_t ranges = heads;
    for (int64_t candidate = 1; candidate < heads; ++candidate) {
      int64_t rowBytes = heads / candidate * seqQ * headDim * 2 * sizeof(float);
      if (heads % candidate == 0 && batch * candidate >= kMinInPlaceTasks &&
          rowBytes <= kInPlaceRowBytes) {
        ranges = candidate;
        break;
      }
    }
    int64_t taskHeads = heads / ranges;
    Value zero = kb.index(0);
    kb.parallelFor(batch * ranges, [&](Value index) {
      InPlaceTask task{kb.divui(index, ranges), kb.muli(kb.remui(index, ranges), taskHeads),
                       taskHeads, allocateScratch(taskHeads * seqQ)};
      Value bi = task.bi;
      const Scratch &s = task.scratch;
      forEachHead(task,
                  [&](Value hi, Value, Value row0) { initRows(bi, hi, s, row0, zero, seqQ); });
      kb.forLoop(limits().firstKeyTile(bi, zero, blockK), limits().keyTiles(bi, zero, seqQ, blockK),
                 1, [&](Value block) {
                   Value k0 = kb.muli(block, blockK);
                   emitScoresInPlace(task, k0);
                   ifMasked(bi, block, zero, [&](bool masked) {
                     forEachHead(task, [&](Value hi, Value, Value row0) {
                       emitSoftmaxUpdate(bi, hi, s, row0, zero, k0, seqQ, masked);
                     });
                   });
                   emitAccumulateInPlace(task, k0);
                 });
      forEachHead(task,
                  [&](Value hi, Value, Value row0) { finishRows(bi, hi, s, row0, zero, seqQ); });
    });
  }

  /// Sequence `bi`'s query heads head0 .. head0 + heads - 1; scratch row
  /// lh * seq_q + i holds query i of head head0 + lh.
  struct InPlaceTask {
    Value bi, head0;
    int64_t heads;
    Scratch scratch;
  };

  /// Calls `body(hi, kvh, row0)` for each of the task's query heads.
  void forEachHead(const InPlaceTask &task, function_ref<void(Value, Value, Value)> body) {
    kb.forLoop(kb.index(0), kb.index(task.heads), 1, [&](Value lh) {
      Value hi = kb.addi(task.head0, lh);
      body(hi, in.keyHead(b, loc, hi), kb.muli(lh, seqQ));
    });
  }

  /// The scores of the key block at k0, a dot product per key and query
  /// (keys past seq_k read its last row; the block's mask hides them).
  void emitScoresInPlace(const InPlaceTask &task, Value k0) {
    const Scratch &s = task.scratch;
    kb.forLoop(kb.index(0), kb.index(blockK), 1, [&](Value j) {
      Value key = kb.mini(kb.addi(k0, j), kb.index(seqK - 1));
      forEachHead(task, [&](Value, Value kvh, Value row0) {
        SmallVector<Value> sums(seqQ, kb.splat(0.0));
        forHeadDimVectors([&](Value c, int64_t valid) {
          Value k = kb.loadVectorWidened(in.k, in.at(task.bi, key, kvh, c), valid);
          for (int64_t i = 0; i < seqQ; ++i) {
            Value q = kb.loadVector(s.queries, {kb.addi(row0, kb.index(i)), c}, valid);
            sums[i] = kb.fma(q, k, sums[i]);
          }
        });
        for (int64_t i = 0; i < seqQ; ++i)
          kb.store(kb.reduceAdd(sums[i]), s.scores, {kb.addi(row0, kb.index(i)), j});
      });
    });
  }

  /// O += P V over the keys of the block at k0 before the key limit.
  void emitAccumulateInPlace(const InPlaceTask &task, Value k0) {
    const Scratch &s = task.scratch;
    Value kEnd = kb.mini(kb.addi(k0, kb.index(blockK)), limits().keyCount(task.bi));
    kb.forLoop(k0, kEnd, 1, [&](Value key) {
      Value j = arith::SubIOp::create(b, loc, key, k0);
      forEachHead(task, [&](Value, Value kvh, Value row0) {
        SmallVector<Value> probs;
        for (int64_t i = 0; i < seqQ; ++i)
          probs.push_back(kb.splat(kb.load(s.scores, {kb.addi(row0, kb.index(i)), j})));
        forHeadDimVectors([&](Value c, int64_t valid) {
          Value v = kb.loadVectorWidened(in.v, in.at(task.bi, key, kvh, c), valid);
          for (int64_t i = 0; i < seqQ; ++i) {
            SmallVector<Value> at{kb.addi(row0, kb.index(i)), c};
            kb.storeVector(kb.fma(probs[i], v, kb.loadVector(s.output, at, valid)), s.output, at,
                           valid);
          }
        });
      });
    });
  }

  /// Scratch rows row0 .. row0 + rows - 1 start query head `hi`'s rows from
  /// q0: scaled queries, no output, an empty running max and sum.
  void initRows(Value bi, Value hi, const Scratch &s, Value row0, Value q0, int64_t rows) {
    kb.forLoop(kb.index(0), kb.index(rows), 1, [&](Value i) {
      Value qi = kb.addi(q0, i), row = kb.addi(row0, i);
      kb.forLoop(kb.index(0), kb.index(headDim), 1, [&](Value c) {
        kb.store(kb.mul(kb.load(in.q, in.at(bi, qi, hi, c)), kb.f32(in.scale * kLog2E)), s.queries,
                 {row, c});
        kb.store(kb.f32(0.0), s.output, {row, c});
      });
      kb.store(kb.f32(kNegInf), s.max, {row});
      kb.storeVector(kb.splat(0.0), s.sum, {row, kb.index(0)});
    });
  }

  /// out = O / l, 0 where nothing was visible; lse = m + log l.
  void finishRows(Value bi, Value hi, const Scratch &s, Value row0, Value q0, int64_t rows) {
    kb.forLoop(kb.index(0), kb.index(rows), 1, [&](Value i) {
      Value row = kb.addi(row0, i);
      Value l = kb.reduceAdd(kb.loadVector(s.sum, {row, kb.index(0)}));
      Value empty = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, l, kb.f32(0.0));
      Value inverse = kb.select(empty, kb.f32(0.0), kb.div(kb.f32(1.0), l));
      Value qi = kb.addi(q0, i);
      kb.forLoop(kb.index(0), kb.index(headDim), 1, [&](Value c) {
        kb.store(kb.mul(kb.load(s.output, {row, c}), inverse), in.out, in.at(bi, qi, hi, c));
      });
      if (in.lse)
        kb.store(kb.add(kb.mul(kb.load(s.max, {row}), kb.f32(kLn2)), kb.log(l)), in.lse,
                 {bi, hi, qi});
    });
  }

  /// The online-softmax update of each row of the score tile: probabilities
  /// in place of the scores, rescaled O, m and l. The exponentials read the
  /// scores back from the tile (written back first when masks or biases
  /// changed them); l is kept per lane and reduced once at the end.
  void emitSoftmaxUpdate(Value bi, Value hi, const Scratch &s, Value row0, Value q0, Value k0,
                         int64_t rows, bool masked) {
    bool rewritesScores = masked || in.bias || in.keyBias || in.softcap;
    kb.forLoop(kb.index(0), kb.index(rows), 1, [&](Value query) {
      Value i = kb.addi(row0, query);
      SmallVector<Value> scores =
          maskedRow(bi, hi, s.scores, i, kb.addi(q0, query), k0, masked, kLog2E);
      Value rowMax = kb.splat(kNegInf);
      for (auto [v, score] : llvm::enumerate(scores)) {
        rowMax = kb.max(rowMax, score);
        if (rewritesScores)
          kb.storeVector(score, s.scores, {i, kb.index(v * lanes)});
      }
      Value oldMax = kb.load(s.max, {i});
      Value newMax = kb.max(oldMax, kb.reduceMax(rowMax));
      // Nothing visible yet: keep probabilities and corrections at 0.
      Value none = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, newMax, kb.f32(kNegInf));
      Value shift = kb.splat(kb.select(none, kb.f32(0.0), newMax));
      // A vector exponential: the scalar one is a libm call.
      Value correction = kb.exp2NonPositive(kb.sub(kb.splat(oldMax), shift));
      kb.store(newMax, s.max, {i});
      Value rowSum = kb.mul(kb.loadVector(s.sum, {i, kb.index(0)}), correction);
      for (int64_t v = 0; v < blockK / lanes; ++v) {
        Value column = kb.index(v * lanes);
        Value p = kb.exp2NonPositive(kb.sub(kb.loadVector(s.scores, {i, column}), shift));
        kb.storeVector(p, s.scores, {i, column});
        rowSum = kb.add(rowSum, p);
      }
      kb.storeVector(rowSum, s.sum, {i, kb.index(0)});
      forHeadDimVectors([&](Value c, int64_t valid) {
        Value o = kb.loadVector(s.output, {i, c}, valid);
        kb.storeVector(kb.mul(o, correction), s.output, {i, c}, valid);
      });
    });
  }
};

class BackwardKernel : AttentionKernelBase {
public:
  using AttentionKernelBase::AttentionKernelBase;

  void emit() {
    forEachPair([&](Value bi, Value hi) {
      Pair p;
      p.bi = bi;
      p.hi = hi;
      p.keysT = packTransposedBlocks(in.k, bi, hi);
      p.valuesT = packTransposedBlocks(in.v, bi, hi);
      p.keys =
          packRows(in.k, bi, hi, kb.index(seqK), kb.index(paddedK), paddedK, seqK - 1, in.scale);
      p.queries = packRows(in.q, bi, hi, kb.index(seqQ), kb.index(seqQ), seqQ, seqQ - 1, in.scale);
      p.gradOut = packRows(in.gradOut, bi, hi, kb.index(seqQ), kb.index(seqQ), seqQ, seqQ - 1, 1.0);
      p.gradQ = kb.allocate({seqQ, headDim}, f32());
      p.probs = kb.allocate({kBlockQ, blockK}, f32());
      p.gradScores = kb.allocate({kBlockQ, blockK}, f32());
      p.gradK = kb.allocate({blockK, headDim}, f32());
      p.gradV = kb.allocate({blockK, headDim}, f32());
      emitRowTerms(p);
      zeroRows(p.gradQ, kb.index(seqQ));
      kb.forLoop(kb.index(0), kb.index(paddedK / blockK), 1, [&](Value block) {
        emitKeyBlock(p, block);
      });
      kb.forLoop(kb.index(0), kb.index(seqQ), 1, [&](Value i) {
        forHeadDimVectors([&](Value c, int64_t valid) {
          kb.storeVector(kb.loadVector(p.gradQ, {i, c}, valid), in.gradQ, in.at(bi, i, hi, c), valid);
        });
      });
    });
  }

private:
  /// The buffers of one (batch, head) pair.
  struct Pair {
    Value bi, hi;
    Value keysT, valuesT; // [block][d][bk]
    Value keys;           // [paddedK][d], scaled
    Value queries;        // [seq_q][d], scaled
    Value gradOut;        // [seq_q][d]
    Value rowDot;         // [seq_q]: rowsum(dO * O)
    Value rowLse;         // [seq_q]: lse, +inf for rows that saw nothing
    Value gradQ;          // [seq_q][d], accumulated
    Value probs, gradScores; // [bq][bk] tiles
    Value gradK, gradV;      // [bk][d] of the current key block
  };

  void zeroRows(Value buffer, Value rows) {
    kb.forLoop(kb.index(0), rows, 1, [&](Value i) {
      forHeadDimVectors([&](Value c, int64_t valid) {
        kb.storeVector(kb.splat(0.0), buffer, {i, c}, valid);
      });
    });
  }

  /// rowsum(dO * O) and the log-sum-exp with -inf (no visible key) as
  /// +inf, so that exp(S - lse) is 0 on such rows rather than NaN.
  void emitRowTerms(Pair &p) {
    p.rowDot = kb.allocate({seqQ}, f32());
    p.rowLse = kb.allocate({seqQ}, f32());
    kb.forLoop(kb.index(0), kb.index(seqQ), 1, [&](Value i) {
      Value dot = kb.splat(0.0);
      forHeadDimVectors([&](Value c, int64_t valid) {
        Value o = kb.loadVector(in.out, in.at(p.bi, i, p.hi, c), valid);
        dot = kb.fma(o, kb.loadVector(p.gradOut, {i, c}, valid), dot);
      });
      kb.store(kb.reduceAdd(dot), p.rowDot, {i});
      Value lse = kb.load(in.lse, {p.bi, p.hi, i});
      Value none = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, lse, kb.f32(kNegInf));
      kb.store(kb.select(none, kb.f32(std::numeric_limits<double>::infinity()), lse), p.rowLse, {i});
    });
  }

  void emitKeyBlock(Pair &p, Value block) {
    Value k0 = kb.muli(block, blockK);
    zeroRows(p.gradK, kb.index(blockK));
    zeroRows(p.gradV, kb.index(blockK));
    // Query blocks that see this key block: from the first row that sees
    // k0, to the last whose window reaches the block's last key (the end
    // without a window).
    Value firstBlock = kb.divui(limits().firstQuerySeeing(p.bi, k0), kBlockQ);
    Value lastKey = kb.addi(k0, kb.index(blockK - 1));
    int64_t fullBlocks = seqQ / kBlockQ;
    Value endBlock =
        kb.mini(limits().queryTilesSeeing(p.bi, lastKey, kBlockQ), kb.index(fullBlocks));
    kb.forLoop(kb.muli(firstBlock, kBlockQ), kb.muli(endBlock, kBlockQ), kBlockQ,
               [&](Value q0) { emitTile(p, block, q0, kBlockQ); });
    // A partial last query block, where a row of it sees the block.
    if (int64_t tail = seqQ % kBlockQ) {
      Value tailStart = kb.index(fullBlocks * kBlockQ);
      Value seen = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, tailStart,
                                         limits().queriesSeeingEnd(p.bi, lastKey));
      kb.ifThen(seen, [&] { emitTile(p, block, tailStart, tail); });
    }
    // Write dK, dV for the block's keys before seq_k.
    Value rows = kb.mini(kb.index(blockK), kb.index(seqK));
    rows = kb.mini(rows, arith::SubIOp::create(b, loc, kb.index(seqK), k0));
    kb.forLoop(kb.index(0), rows, 1, [&](Value j) {
      Value key = kb.addi(k0, j);
      forHeadDimVectors([&](Value c, int64_t valid) {
        kb.storeVector(kb.loadVector(p.gradK, {j, c}, valid), in.gradK, in.at(p.bi, key, p.hi, c),
                       valid);
        kb.storeVector(kb.loadVector(p.gradV, {j, c}, valid), in.gradV, in.at(p.bi, key, p.hi, c),
                       valid);
      });
    });
  }

  /// The contributions of the (query block at q0, key block) tile.
  void emitTile(Pair &p, Value block, Value q0, int64_t rows) {
    Value k0 = kb.muli(block, blockK);
    emitBlockProduct(p.queries, q0, p.keysT, block, rows, p.probs);
    emitBlockProduct(p.gradOut, q0, p.valuesT, block, rows, p.gradScores);
    ifMasked(p.bi, block, q0, [&](bool masked) {
      kb.forLoop(kb.index(0), kb.index(rows), 1, [&](Value i) {
        Value qi = kb.addi(q0, i);
        SmallVector<Value> scores = maskedRow(p.bi, p.hi, p.probs, i, qi, k0, masked);
        Value lse = kb.splat(kb.load(p.rowLse, {qi}));
        Value dot = kb.splat(kb.load(p.rowDot, {qi}));
        for (auto [v, score] : llvm::enumerate(scores)) {
          Value column = kb.index(v * lanes);
          Value prob = kb.exp(kb.sub(score, lse));
          Value gradProb = kb.loadVector(p.gradScores, {i, column});
          Value gradScore = kb.mul(prob, kb.sub(gradProb, dot));
          // Through the cap, at the scaled score (finite: a masked key's
          // probability of 0 keeps its gradient 0).
          if (in.softcap)
            gradScore = kb.mul(
                gradScore,
                lowering::softcapSlope(b, loc, kb.loadVector(p.probs, {i, column}), in.softcap));
          kb.storeVector(prob, p.probs, {i, column});
          kb.storeVector(gradScore, p.gradScores, {i, column});
        }
      });
    });
    Value zero = kb.index(0);
    auto transposedTile = [&](Value tile) {
      return [&, tile](Value key, Value i) { return kb.load(tile, {i, key}); };
    };
    auto rowsOf = [&](Value buffer, Value row0) {
      return [&, buffer, row0](Value k, Value col, int64_t valid) {
        return kb.loadVector(buffer, {kb.addi(row0, k), col}, valid);
      };
    };
    // dV += P^T dO and dK += dS^T (scale Q), over the tile's query rows.
    emitAccumulate(p.gradV, zero, blockK, zero, kb.index(rows), transposedTile(p.probs),
                   rowsOf(p.gradOut, q0));
    emitAccumulate(p.gradK, zero, blockK, zero, kb.index(rows), transposedTile(p.gradScores),
                   rowsOf(p.queries, q0));
    // dQ += dS (scale K), over the block's keys.
    emitAccumulate(
        p.gradQ, q0, rows, zero, kb.index(blockK),
        [&](Value i, Value key) { return kb.load(p.gradScores, {i, key}); },
        rowsOf(p.keys, k0));
  }
};

} // namespace

void xfmr::cpu::emitAttention(VectorBuilder &kb, const AttentionOperands &operands) {
  ForwardKernel(kb, operands).emit();
}

void xfmr::cpu::emitAttentionBackward(VectorBuilder &kb, const AttentionOperands &operands) {
  BackwardKernel(kb, operands).emit();
}
