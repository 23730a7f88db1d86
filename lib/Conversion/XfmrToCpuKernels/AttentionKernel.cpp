//===- AttentionKernel.cpp - flash attention on CPU vectors -----*- C++ -*-===//
//
// Threads take (batch, head) pairs, which all cost the same even with a
// causal mask. Per pair, K^T and V are copied once into block-contiguous
// scratch (K^T rows contiguous along the keys, so QK^T vectorizes over keys
// like a GEMM over columns). Queries go in blocks of kBlockQ rows; for each
// block the key blocks up to the diagonal are visited:
//
//   S = (scale * Q_block) K^T_block      register-tiled, into a [bq][bk] tile
//   S += bias; masked entries = -inf     causal, key padding, past seq_k
//   per row: m' = max(m, max S); P = exp(S - m'); l = l e^(m - m') + sum P;
//            O *= e^(m - m')             (online softmax)
//   O += P V_block                       register-tiled over head_dim
//
// and finally O / l is written (0 where no key was visible). Extra memory is
// O(head_dim * seq_k) per thread; no [seq_q, seq_k] buffer exists.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include <limits>

using namespace mlir;
using namespace xfmr;
using namespace xfmr::cpu;

namespace {

constexpr int64_t kBlockQ = 64;
constexpr int64_t kBlockK = 64;
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

class AttentionKernel {
public:
  AttentionKernel(KernelBuilder &kb, const AttentionOperands &in)
      : kb(kb), in(in), lanes(kb.cpu().lanes) {
    auto q = cast<MemRefType>(in.q.getType());
    auto k = cast<MemRefType>(in.k.getType());
    const FusedAttentionOp::Dims &d = in.dims;
    batch = q.getDimSize(d.batch);
    heads = q.getDimSize(d.heads);
    seqQ = q.getDimSize(d.seq);
    headDim = q.getDimSize(d.headDim);
    seqK = k.getDimSize(d.seq);
    paddedK = (seqK + kBlockK - 1) / kBlockK * kBlockK;
  }

  void emit() {
    kb.parallelFor(batch * heads, [&](Value pair) {
      OpBuilder &b = kb.builder();
      Location loc = kb.location();
      Value bi = arith::DivUIOp::create(b, loc, pair, kb.index(heads));
      Value hi = arith::RemUIOp::create(b, loc, pair, kb.index(heads));
      auto [keysT, values] = packKeysAndValues(bi, hi);
      Scratch scratch{kb.allocate({kBlockQ, headDim}, f32()), kb.allocate({kBlockQ, kBlockK}, f32()),
                      kb.allocate({kBlockQ, headDim}, f32()), kb.allocate({kBlockQ}, f32()),
                      kb.allocate({kBlockQ}, f32())};
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
    Value max, sum;
  };

  Type f32() { return kb.builder().getF32Type(); }

  /// Indices of element (b, s, h, c) of a q/k/v operand in its layout.
  SmallVector<Value> at(Value b, Value s, Value h, Value c) {
    SmallVector<Value> indices(4);
    indices[in.dims.batch] = b;
    indices[in.dims.seq] = s;
    indices[in.dims.heads] = h;
    indices[in.dims.headDim] = c;
    return indices;
  }

  /// Keys and values of pair (b, h) copied to block-contiguous scratch, so
  /// that a key block's 64 x head_dim values are 16 contiguous KiB rather
  /// than rows strided through the whole sequence (pages and prefetch):
  ///   keysT[block][c][j] = K[b, block * bk + j, h, c],
  ///   values[j][c]      = V[b, j, h, c],
  /// zero for the padding keys past seq_k.
  std::pair<Value, Value> packKeysAndValues(Value bi, Value hi) {
    Value keysT = kb.allocate({paddedK / kBlockK, headDim, kBlockK}, f32());
    Value values = kb.allocate({paddedK, headDim}, f32());
    OpBuilder &b = kb.builder();
    Location loc = kb.location();
    kb.forLoop(kb.index(0), kb.index(paddedK), 1, [&](Value j) {
      Value valid = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, j, kb.index(seqK));
      Value row = kb.mini(j, kb.index(seqK - 1));
      Value block = arith::DivUIOp::create(b, loc, j, kb.index(kBlockK));
      Value inBlock = arith::RemUIOp::create(b, loc, j, kb.index(kBlockK));
      kb.forLoop(kb.index(0), kb.index(headDim), 1, [&](Value c) {
        Value key = kb.load(in.k, at(bi, row, hi, c));
        kb.store(kb.select(valid, key, kb.f32(0.0)), keysT, {block, c, inBlock});
        Value value = kb.load(in.v, at(bi, row, hi, c));
        kb.store(kb.select(valid, value, kb.f32(0.0)), values, {j, c});
      });
    });
    return {keysT, values};
  }

  /// Number of key blocks a query block starting at q0 with `rows` rows sees.
  Value keyBlockCount(Value q0, int64_t rows) {
    Value all = kb.index(paddedK / kBlockK);
    if (!in.causal)
      return all;
    OpBuilder &b = kb.builder();
    Location loc = kb.location();
    Value end = kb.addi(q0, kb.index(rows + seqK - seqQ));
    Value blocks = arith::CeilDivUIOp::create(b, loc, end, kb.index(kBlockK));
    return arith::MinUIOp::create(b, loc, blocks, all);
  }

  void emitQueryBlock(Value bi, Value hi, Value keysT, Value values, const Scratch &s, Value q0,
                      int64_t rows) {
    OpBuilder &b = kb.builder();
    Location loc = kb.location();
    // Scaled queries, running max/sum and output.
    kb.forLoop(kb.index(0), kb.index(rows), 1, [&](Value i) {
      Value qi = kb.addi(q0, i);
      kb.forLoop(kb.index(0), kb.index(headDim), 1, [&](Value c) {
        kb.store(kb.mul(kb.load(in.q, at(bi, qi, hi, c)), kb.f32(in.scale)), s.queries, {i, c});
        kb.store(kb.f32(0.0), s.output, {i, c});
      });
      kb.store(kb.f32(kNegInf), s.max, {i});
      kb.store(kb.f32(0.0), s.sum, {i});
    });
    // Key blocks entirely visible from every row of the query block need no
    // masking: all blocks before the diagonal (causal) and before seq_k.
    Value unmasked = kb.index(seqK / kBlockK);
    if (in.causal)
      unmasked = kb.mini(unmasked, arith::DivUIOp::create(b, loc, kb.addi(q0, kb.index(seqK - seqQ + 1)),
                                                          kb.index(kBlockK)));
    Value blocks = keyBlockCount(q0, rows);
    kb.forLoop(kb.index(0), blocks, 1, [&](Value blockIndex) {
      Value k0 = kb.muli(blockIndex, kBlockK);
      emitScores(keysT, s, blockIndex, rows);
      Value masked = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, blockIndex, unmasked);
      auto branch = scf::IfOp::create(b, loc, masked, /*withElseRegion=*/true);
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(branch.thenBlock()->getTerminator());
        emitSoftmaxUpdate(bi, hi, s, q0, k0, rows, /*masked=*/true);
        b.setInsertionPoint(branch.elseBlock()->getTerminator());
        emitSoftmaxUpdate(bi, hi, s, q0, k0, rows, /*masked=*/false);
      }
      emitValueProduct(values, s, k0, rows);
    });
    // out = O / l, 0 where nothing was visible.
    kb.forLoop(kb.index(0), kb.index(rows), 1, [&](Value i) {
      Value l = kb.load(s.sum, {i});
      Value empty = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, l, kb.f32(0.0));
      Value inverse = kb.select(empty, kb.f32(0.0), kb.div(kb.f32(1.0), l));
      Value qi = kb.addi(q0, i);
      kb.forLoop(kb.index(0), kb.index(headDim), 1, [&](Value c) {
        kb.store(kb.mul(kb.load(s.output, {i, c}), inverse), in.out, at(bi, qi, hi, c));
      });
    });
  }

  /// scores[i][j] = sum_c queries[i][c] keysT[block][c][j] for a full key
  /// block.
  void emitScores(Value keysT, const Scratch &s, Value block, int64_t rows) {
    int64_t panel = 2 * lanes;
    for (int64_t p = 0; p < kBlockK / panel; ++p) {
      Value col = kb.index(p * panel);
      kb.forRowTiles(kb.index(0), rows, kb.cpu().tileRows(), [&](Value row, int64_t tileRows) {
        Tile tile{tileRows, 2, {}};
        for (int64_t i = 0; i < tileRows * 2; ++i)
          tile.values.push_back(kb.splat(0.0));
        tile = emitTileUpdate(
            kb, tile, kb.index(0), kb.index(headDim),
            [&](int64_t i, Value c) { return kb.load(s.queries, {kb.addi(row, kb.index(i)), c}); },
            [&](int64_t j, Value c) {
              return kb.loadVector(keysT, {block, c, kb.addi(col, kb.index(j * lanes))});
            });
        for (int64_t i = 0; i < tileRows; ++i)
          for (int64_t j = 0; j < 2; ++j)
            kb.storeVector(tile.at(i, j), s.scores,
                           {kb.addi(row, kb.index(i)), kb.index(p * panel + j * lanes)});
      });
    }
  }

  /// Masks (if `masked`: causal and past seq_k) and bias on the score tile,
  /// then the online-softmax update of each row: probabilities in place of
  /// the scores, rescaled O, m and l.
  void emitSoftmaxUpdate(Value bi, Value hi, const Scratch &s, Value q0, Value k0, int64_t rows,
                         bool masked) {
    OpBuilder &b = kb.builder();
    Location loc = kb.location();
    int64_t vectors = kBlockK / lanes;
    auto iotaType = VectorType::get({lanes}, b.getIndexType());
    Value iota = vector::StepOp::create(b, loc, iotaType);
    Value negInf = kb.splat(kNegInf);
    kb.forLoop(kb.index(0), kb.index(rows), 1, [&](Value i) {
      Value qi = kb.addi(q0, i);
      // Keys j may be seen from query qi iff j < seq_k and, when causal,
      // j <= qi + seq_k - seq_q.
      Value limit = kb.index(seqK);
      if (in.causal)
        limit = kb.mini(limit, kb.addi(qi, kb.index(seqK - seqQ + 1)));
      Value limitVector = vector::BroadcastOp::create(b, loc, iotaType, limit);
      SmallVector<Value> scores;
      Value rowMax = negInf;
      for (int64_t v = 0; v < vectors; ++v) {
        Value j0 = kb.addi(k0, kb.index(v * lanes));
        Value score = kb.loadVector(s.scores, {i, kb.index(v * lanes)});
        if (in.keyBias)
          score = kb.add(score, kb.loadVectorClipped(in.keyBias, {bi, j0}, 0.0));
        if (in.bias)
          score = kb.add(score, loadBias(bi, hi, qi, j0));
        if (masked) {
          Value keys = arith::AddIOp::create(b, loc, iota,
                                             vector::BroadcastOp::create(b, loc, iotaType, j0));
          Value visible =
              arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, keys, limitVector);
          score = kb.select(visible, score, negInf);
        }
        scores.push_back(score);
        rowMax = kb.max(rowMax, score);
      }
      Value oldMax = kb.load(s.max, {i});
      Value newMax = kb.max(oldMax, kb.reduceMax(rowMax));
      // Nothing visible yet: keep probabilities and corrections at 0.
      Value none = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, newMax, kb.f32(kNegInf));
      Value shift = kb.select(none, kb.f32(0.0), newMax);
      Value shiftVector = kb.splat(shift);
      Value rowSum = kb.splat(0.0);
      for (int64_t v = 0; v < vectors; ++v) {
        Value p = kb.exp(kb.sub(scores[v], shiftVector));
        kb.storeVector(p, s.scores, {i, kb.index(v * lanes)});
        rowSum = kb.add(rowSum, p);
      }
      Value correction = kb.exp(kb.sub(oldMax, shift));
      kb.store(newMax, s.max, {i});
      kb.store(kb.add(kb.mul(kb.load(s.sum, {i}), correction), kb.reduceAdd(rowSum)), s.sum, {i});
      Value correctionVector = kb.splat(correction);
      forHeadDimVectors([&](Value c, int64_t valid) {
        Value o = kb.loadVector(s.output, {i, c}, valid);
        kb.storeVector(kb.mul(o, correctionVector), s.output, {i, c}, valid);
      });
    });
  }

  /// `lanes` bias values for query qi and keys [j0, j0 + lanes), reading the
  /// broadcast dims of the rank-4 bias at index 0.
  Value loadBias(Value bi, Value hi, Value qi, Value j0) {
    auto type = cast<MemRefType>(in.bias.getType());
    Value zero = kb.index(0);
    SmallVector<Value> indices = {type.getDimSize(0) == 1 ? zero : bi,
                                  type.getDimSize(1) == 1 ? zero : hi,
                                  type.getDimSize(2) == 1 ? zero : qi, zero};
    if (type.getDimSize(3) == 1)
      return kb.splat(kb.load(in.bias, indices));
    indices[3] = j0;
    // Lanes past seq_k are masked anyway.
    return kb.loadVectorClipped(in.bias, indices, 0.0);
  }

  /// Calls `body(c, valid)` for the vectors covering [0, head_dim).
  void forHeadDimVectors(function_ref<void(Value, int64_t)> body) {
    for (int64_t c = 0; c < headDim; c += lanes)
      body(kb.index(c), std::min(lanes, headDim - c));
  }

  /// output[i][:] += sum_j scores[i][j] values[k0 + j][:] over the visible
  /// keys of the block, register-tiled over panels of head_dim.
  void emitValueProduct(Value values, const Scratch &s, Value k0, int64_t rows) {
    Value kEnd = kb.mini(kb.addi(k0, kb.index(kBlockK)), kb.index(seqK));
    int64_t panel = 2 * lanes;
    for (int64_t c0 = 0; c0 < headDim; c0 += panel) {
      int64_t width = std::min(panel, headDim - c0);
      int64_t vectors = (width + lanes - 1) / lanes;
      int64_t lastValid = width - (vectors - 1) * lanes;
      auto valid = [&](int64_t j) { return j + 1 == vectors ? lastValid : lanes; };
      kb.forRowTiles(kb.index(0), rows, kb.cpu().tileRows(), [&](Value row, int64_t tileRows) {
        Tile tile{tileRows, vectors, {}};
        for (int64_t i = 0; i < tileRows; ++i)
          for (int64_t j = 0; j < vectors; ++j)
            tile.values.push_back(kb.loadVector(
                s.output, {kb.addi(row, kb.index(i)), kb.index(c0 + j * lanes)}, valid(j)));
        tile = emitTileUpdate(
            kb, tile, k0, kEnd,
            [&](int64_t i, Value key) {
              Value j = arith::SubIOp::create(kb.builder(), kb.location(), key, k0);
              return kb.load(s.scores, {kb.addi(row, kb.index(i)), j});
            },
            [&](int64_t j, Value key) {
              return kb.loadVector(values, {key, kb.index(c0 + j * lanes)}, valid(j));
            });
        for (int64_t i = 0; i < tileRows; ++i)
          for (int64_t j = 0; j < vectors; ++j)
            kb.storeVector(tile.at(i, j), s.output,
                           {kb.addi(row, kb.index(i)), kb.index(c0 + j * lanes)}, valid(j));
      });
    }
  }

  KernelBuilder &kb;
  const AttentionOperands &in;
  int64_t lanes;
  int64_t batch, heads, seqQ, seqK, headDim, paddedK;
};

} // namespace

void xfmr::cpu::emitAttention(KernelBuilder &kb, const AttentionOperands &operands) {
  AttentionKernel(kb, operands).emit();
}
