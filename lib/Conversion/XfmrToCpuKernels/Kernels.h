//===- Kernels.h - the CPU kernels of the fused xfmr ops --------*- C++ -*-===//

#ifndef XFMR_LIB_CONVERSION_XFMRTOCPUKERNELS_KERNELS_H
#define XFMR_LIB_CONVERSION_XFMRTOCPUKERNELS_KERNELS_H

#include "KernelBuilder.h"
#include "xfmr/Dialect/XfmrOps.h"

namespace xfmr::cpu {

/// activation(a @ b + bias) + residual for a [M, K] (or [K, M] with
/// `transposeA`), b [K, N] (or [N, K] with `transposeB`), bias [N] and
/// residual [M, N] (either may be null). Returns the [M, N] tensor.
mlir::Value emitGemm(KernelBuilder &kb, mlir::Value a, bool transposeA, mlir::Value b,
                     bool transposeB, mlir::Value bias, mlir::Value residual,
                     Activation activation);

/// Softmax of each row of `x` [rows, n]: one pass for a per-lane online max
/// and sum, one for the output. Rows of only -inf give 0.
mlir::Value emitSoftmaxRows(KernelBuilder &kb, mlir::Value x);

/// Layer norm of each row of `x` [rows, d] (of `x + residual` when
/// `residual` is given, also returning that sum): one read of the row for
/// Welford mean and variance, one pass for the output. gamma/beta may be
/// null. Returns {sum or null, normalized}.
std::pair<mlir::Value, mlir::Value> emitLayerNormRows(KernelBuilder &kb, mlir::Value x,
                                                      mlir::Value residual, mlir::Value gamma,
                                                      mlir::Value beta, double epsilon);

/// Buffers and attributes of one fused attention or its backward.
struct AttentionOperands {
  /// Rank-4 q, k, v buffers (strided views) and the output buffer, all in
  /// the dimension order `dims` gives.
  mlir::Value q, k, v, out;
  /// [batch, heads, seq_q] row log-sum-exp of the scores: written by the
  /// forward when non-null, read by the backward.
  mlir::Value lse;
  /// Backward only: the output gradient (rank 4, like out) and the gradient
  /// buffers to write.
  mlir::Value gradOut, gradQ, gradK, gradV;
  /// [batch, seq_k] additive 0 / -inf from the padding mask, or null.
  mlir::Value keyBias;
  /// Rank-4 additive bias with broadcast dims of size 1, or null.
  mlir::Value bias;
  AttentionDims dims;
  double scale;
  bool causal;
};

/// Writes softmax(scale q k^T + masks) v into `operands.out` (and the row
/// log-sum-exp into `operands.lse` when given).
void emitAttention(KernelBuilder &kb, const AttentionOperands &operands);

/// Writes the gradients of q, k and v from q, k, v, out, lse and gradOut.
void emitAttentionBackward(KernelBuilder &kb, const AttentionOperands &operands);

} // namespace xfmr::cpu

#endif // XFMR_LIB_CONVERSION_XFMRTOCPUKERNELS_KERNELS_H
