//===- Kernels.h - the CPU kernels of the fused xfmr ops --------*- C++ -*-===//
//
// The CPU's vector kernels, which its KernelSet (CpuKernels.cpp) hands to
// the shared rewrite patterns (../Kernels/KernelSet.h).
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_CONVERSION_XFMRTOCPUKERNELS_KERNELS_H
#define XFMR_LIB_CONVERSION_XFMRTOCPUKERNELS_KERNELS_H

#include "VectorBuilder.h"

#include "../Kernels/KernelSet.h"

namespace xfmr::cpu {

using kernels::AttentionOperands;
using kernels::KernelBuilder;
using kernels::KernelSet;
using kernels::kNegInf;
using kernels::LayerNormGradients;

/// Calls body(row) for rows [0, rows) of `width` values each, the rows split
/// into parallel chunks of enough work to amortise scheduling.
void forEachRow(VectorBuilder &kb, int64_t rows, int64_t width,
                llvm::function_ref<void(mlir::Value)> body);

/// activation(a @ b + bias) + residual for a [M, K] (or [K, M] with
/// `transposeA`), b [K, N] (or [N, K] with `transposeB`), bias [N] and
/// residual [M, N] (either may be null). Returns the [M, N] tensor.
mlir::Value emitGemm(VectorBuilder &kb, mlir::Value a, bool transposeA, mlir::Value b,
                     bool transposeB, mlir::Value bias, mlir::Value residual,
                     Activation activation);

/// C = activation(A G + gateBias) * (A U + upBias), a gated MLP's products
/// (G and U each stored [K, N], or [N, K] when transposed): the gate's
/// product, then up's multiplied by it in its epilogue.
mlir::Value emitGatedGemm(VectorBuilder &kb, mlir::Value a, mlir::Value gate, bool transposeGate,
                          mlir::Value up, bool transposeUp, mlir::Value gateBias,
                          mlir::Value upBias, Activation activation);

/// Softmax of each row of `x` [rows, n]: one pass for a per-lane online max
/// and sum, one for the output. Rows of only -inf give 0.
mlir::Value emitSoftmaxRows(VectorBuilder &kb, mlir::Value x);

/// Layer norm of each row of `x` [rows, d] (of `x + residual` when
/// `residual` is given, also returning that sum): one read of the row for
/// Welford mean and variance, one pass for the output. gamma/beta may be
/// null. Returns {sum or null, normalized}.
std::pair<mlir::Value, mlir::Value> emitLayerNormRows(VectorBuilder &kb, mlir::Value x,
                                                      mlir::Value residual, mlir::Value gamma,
                                                      mlir::Value beta, double epsilon);

/// The gradient through the softmax of each row of `y` (its output) [rows,
/// n] of `grad`: y * (grad - sum(grad * y)); one sweep for the sum, one for
/// the result.
mlir::Value emitSoftmaxBackwardRows(VectorBuilder &kb, mlir::Value y, mlir::Value grad);

/// The gradients of a layer norm of the rows of `x` [rows, d] (gamma [d] or
/// null) from the output gradient `grad`: three sweeps of each row (mean;
/// variance with the sums dx needs; dx), and with gamma the column sums of
/// gamma's and beta's gradients, threads taking vectors of columns.
LayerNormGradients emitLayerNormBackwardRows(VectorBuilder &kb, mlir::Value x, mlir::Value grad,
                                             mlir::Value gamma, double epsilon);

/// The mean over the rows of `logits` [rows, vocab] whose target (`targets`
/// [rows], integers) is not `ignoreIndex` of logsumexp(row) - row[target],
/// as a rank-0 tensor (0 when no target counts): rows in parallel, one
/// sweep each for max and sum of exponentials.
mlir::Value emitCrossEntropyRows(VectorBuilder &kb, mlir::Value logits, mlir::Value targets,
                                 int64_t ignoreIndex);

/// Its gradient at the logits scaled by the rank-0 `grad`: grad / count *
/// (softmax(row) - onehot(target)), 0 on rows whose target does not count;
/// two sweeps of each row.
mlir::Value emitCrossEntropyBackwardRows(VectorBuilder &kb, mlir::Value logits, mlir::Value targets,
                                         mlir::Value grad, int64_t ignoreIndex);

/// Writes softmax(scale q k^T + masks) v into `operands.out` (and the row
/// log-sum-exp into `operands.lse` when given).
void emitAttention(VectorBuilder &kb, const AttentionOperands &operands);

/// Writes the gradients of q, k and v from q, k, v, out, lse and gradOut.
void emitAttentionBackward(VectorBuilder &kb, const AttentionOperands &operands);

} // namespace xfmr::cpu

#endif // XFMR_LIB_CONVERSION_XFMRTOCPUKERNELS_KERNELS_H
