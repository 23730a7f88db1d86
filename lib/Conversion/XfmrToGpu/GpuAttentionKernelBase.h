//===- GpuAttentionKernelBase.h - what the attention kernels share -*- C++ -*-===//
//
// The geometry of an attention (batch, heads, sequences, head dim) and the
// helpers the GPU attention kernels share: masked scores, probabilities
// from a row's max or log-sum-exp, causal tile counts, tile loads.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_CONVERSION_XFMRTOGPU_GPUATTENTIONKERNELBASE_H
#define XFMR_LIB_CONVERSION_XFMRTOGPU_GPUATTENTIONKERNELBASE_H

#include "../Kernels/KernelSet.h"

namespace xfmr::gpu {

/// The geometry and the helpers the attention kernels share.
class AttentionKernelBase {
protected:
  /// Rows (threads) per block of the f32 kernels, and the bytes of shared
  /// memory their two tiles may take (leaving room for two blocks per SM).
  static constexpr int64_t kMaxRowsPerBlock = 128;
  static constexpr int64_t kWarp = 32;
  static constexpr int64_t kSharedBytes = 32 * 1024;
  static constexpr int64_t kMaxRowsPerTile = 64;

  AttentionKernelBase(kernels::KernelBuilder &kb, const kernels::AttentionOperands &in)
      : kb(kb), b(kb.builder()), loc(kb.location()), in(in) {
    auto q = mlir::cast<mlir::MemRefType>(in.q.getType());
    auto k = mlir::cast<mlir::MemRefType>(in.k.getType());
    batch = q.getDimSize(in.dims.batch);
    heads = q.getDimSize(in.dims.heads);
    seqQ = q.getDimSize(in.dims.seq);
    headDim = q.getDimSize(in.dims.headDim);
    seqK = k.getDimSize(in.dims.seq);
  }

  /// Threads of a block with one thread per row of a sequence of `rows`.
  static int64_t threadsFor(int64_t rows) {
    return std::min(kMaxRowsPerBlock, (rows + kWarp - 1) / kWarp * kWarp);
  }
  /// Rows of the two [rows, head_dim] shared tiles streamed from a sequence
  /// of `seq` rows.
  int64_t rowsPerTile(int64_t seq) const {
    return std::min(std::clamp<int64_t>(kSharedBytes / (2 * 4 * headDim), 1, kMaxRowsPerTile), seq);
  }

  /// `body(c)` for each c along the head dim: a loop, or unrolled where
  /// `unrollHeadDim` (the per-thread arrays indexed by c then have constant
  /// indices only, which keeps them in registers).
  void forHeadDim(llvm::function_ref<void(mlir::Value)> body) {
    if (!unrollHeadDim)
      return kb.forLoop(kb.index(0), kb.index(headDim), 1, body);
    for (int64_t c = 0; c < headDim; ++c)
      body(kb.index(c));
  }
  /// init + sum over the head dim of x(c) * y(c).
  mlir::Value dot(llvm::function_ref<mlir::Value(mlir::Value)> x,
                  llvm::function_ref<mlir::Value(mlir::Value)> y, mlir::Value init) {
    if (unrollHeadDim) {
      forHeadDim([&](mlir::Value c) { init = kb.fma(x(c), y(c), init); });
      return init;
    }
    return kb.forLoop(
        kb.index(0), kb.index(headDim), 1, {init},
        [&](mlir::Value c, mlir::ValueRange partial) -> llvm::SmallVector<mlir::Value> {
          return {kb.fma(x(c), y(c), partial[0])};
        })[0];
  }

  /// Calls `body(row)` when row first + thread is inside a sequence of
  /// `count` rows.
  void ifRowExists(mlir::Value first, mlir::Value thread, int64_t count,
                   llvm::function_ref<void(mlir::Value)> body) {
    mlir::Value row = kb.addi(first, thread);
    kb.ifThen(kb.below(row, count), [&] { body(row); });
  }

  /// `dot` (the scaled q . k of a row and a key), soft-capped, plus the
  /// biases, or -inf where the mask hides the key (outside the row's visible
  /// range). Rows and keys outside the sequences
  /// read the biases of the last ones.
  mlir::Value score(mlir::Value bi, mlir::Value hi, mlir::Value row, mlir::Value key,
                    mlir::Value dot) {
    mlir::Value zero = kb.index(0);
    mlir::Value clampedKey = kb.mini(key, kb.index(seqK - 1));
    if (in.softcap)
      dot = lowering::softcapped(b, loc, dot, in.softcap);
    if (in.keyBias)
      dot = kb.add(dot, kb.load(in.keyBias, {bi, clampedKey}));
    if (in.bias)
      dot = kb.add(dot, kb.load(in.bias, in.biasAt(zero, bi, hi, kb.mini(row, kb.index(seqQ - 1)),
                                                   clampedKey)));
    return kb.select(limits().isVisible(bi, row, key), dot, kb.f32(kernels::kNegInf));
  }

  /// The gradient of the scaled score `dot` of probability `p`: p (dP -
  /// rowsum(dO O)), times the soft cap's slope at `dot` under one.
  mlir::Value scoreGradient(mlir::Value p, mlir::Value gradP, mlir::Value rowDot, mlir::Value dot) {
    mlir::Value gradS = kb.mul(p, kb.sub(gradP, rowDot));
    return in.softcap ? kb.mul(gradS, lowering::softcapSlope(b, loc, dot, in.softcap)) : gradS;
  }

  /// e^(score - lse), 0 where the score or the row's lse is -inf (a masked
  /// key, a row that sees nothing), without relying on the exponential's
  /// range.
  mlir::Value probability(mlir::Value score, mlir::Value lse) {
    return kb.select(kb.equals(lse, kernels::kNegInf), kb.f32(0.0), kb.expShifted(score, lse));
  }

  /// The key range of each query (../Kernels/AttentionLimits.h).
  kernels::AttentionLimits limits() { return kernels::AttentionLimits(b, loc, in.masks()); }

  /// A bf16 or f16 value as f32.
  mlir::Value widen(mlir::Value narrow) {
    return mlir::arith::ExtFOp::create(b, loc, b.getF32Type(), narrow);
  }

  /// A thread's share of loading rows [first, first + tileRows) of the
  /// rank-4 `operands` (a sequence of `seq` rows) into [tileRows, head_dim]
  /// shared `tiles`, times `scale`, 0 past the sequence. Consecutive
  /// threads read consecutive head-dim elements.
  void loadTiles(mlir::Value thread, int64_t threads, mlir::Value bi, mlir::Value hi,
                 mlir::Value first, int64_t tileRows, int64_t seq,
                 llvm::ArrayRef<std::pair<mlir::Value, mlir::Value>> operandsAndTiles,
                 double scale = 1.0) {
    kb.forLoop(thread, kb.index(tileRows * headDim), threads, [&](mlir::Value element) {
      mlir::Value j = kb.divui(element, headDim), c = kb.remui(element, headDim);
      mlir::Value row = kb.addi(first, j);
      mlir::Value source = kb.mini(row, kb.index(seq - 1));
      for (auto [operand, tile] : operandsAndTiles) {
        mlir::Value value = kb.loadWidened(operand, in.at(bi, source, hi, c));
        if (scale != 1.0)
          value = kb.mul(value, kb.f32(scale));
        kb.store(kb.select(kb.below(row, seq), value, kb.f32(0.0)), tile, {j, c});
      }
    });
  }

  kernels::KernelBuilder &kb;
  mlir::OpBuilder &b;
  mlir::Location loc;
  const kernels::AttentionOperands &in;
  int64_t batch, heads, seqQ, seqK, headDim;
  bool unrollHeadDim = false;
};

} // namespace xfmr::gpu

#endif // XFMR_LIB_CONVERSION_XFMRTOGPU_GPUATTENTIONKERNELBASE_H
