//===- LinalgLowering.h - the parts of convert-xfmr-to-linalg ---*- C++ -*-===//
//
// What the files of the linalg lowering share: row helpers of the fused
// kernels (FusedKernels.cpp) and each file's patterns.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_CONVERSION_XFMRTOLINALG_LINALGLOWERING_H
#define XFMR_LIB_CONVERSION_XFMRTOLINALG_LINALGLOWERING_H

#include "../LoweringUtils.h"

namespace xfmr::lowering {

/// Layer norm of each row of the 2-D `rows` [n, d]; gamma/beta may be null.
mlir::Value buildLayerNormRows(mlir::OpBuilder &b, mlir::Location loc, mlir::Value rows,
                               mlir::Value gamma, mlir::Value beta, double epsilon);

/// Per-row mean and (biased) variance of the 2-D `rows` [n, d], each [n].
std::pair<mlir::Value, mlir::Value> buildRowMoments(mlir::OpBuilder &b, mlir::Location loc,
                                                    mlir::Value rows);

/// Appends a unit dimension: [n] -> [n, 1], for broadcasting a per-row value.
mlir::Value asColumn(mlir::OpBuilder &b, mlir::Location loc, mlir::Value row);

/// Views [..., d] as [n, d].
mlir::Value asRows(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x);

/// Sums `input` over all but the last dimension: [..., d] -> [d].
mlir::Value sumRows(mlir::OpBuilder &b, mlir::Location loc, mlir::Value input);

/// Patterns for the fused kernels (FusedKernels.cpp).
void populateFusedKernelLoweringPatterns(mlir::RewritePatternSet &patterns);

/// Patterns for the backward ops (BackwardKernels.cpp).
void populateBackwardLoweringPatterns(mlir::RewritePatternSet &patterns);

/// Patterns for the training ops (TrainingKernels.cpp).
void populateTrainingLoweringPatterns(mlir::RewritePatternSet &patterns);

} // namespace xfmr::lowering

#endif // XFMR_LIB_CONVERSION_XFMRTOLINALG_LINALGLOWERING_H
