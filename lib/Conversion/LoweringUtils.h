//===- LoweringUtils.h - helpers shared by the xfmr lowerings --*- C++ -*-===//
//
// Building blocks of linalg-on-tensors code and scalar activations, used by
// the linalg lowering and by the kernels alike (library XfmrLoweringUtils,
// LoweringUtils.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_CONVERSION_LOWERINGUTILS_H
#define XFMR_LIB_CONVERSION_LOWERINGUTILS_H

#include "xfmr/Dialect/XfmrOps.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Transforms/DialectConversion.h"

namespace xfmr::lowering {

using BodyBuilder =
    llvm::function_ref<mlir::Value(mlir::OpBuilder &, mlir::Location, mlir::ValueRange)>;

inline mlir::RankedTensorType tensorTypeOf(mlir::Value value) {
  return llvm::cast<mlir::RankedTensorType>(value.getType());
}

/// `tensor.empty` of `type` filled with `value`.
mlir::Value filledTensor(mlir::OpBuilder &b, mlir::Location loc, mlir::RankedTensorType type,
                         double value);

/// A float constant of `type`: a scalar, or a splat vector or tensor.
mlir::Value floatConstant(mlir::OpBuilder &b, mlir::Location loc, mlir::Type type, double value);

/// The indexing map reading `operandShape` (right-aligned, size-1 dims
/// broadcast) inside a loop nest over `resultShape`.
mlir::AffineMap broadcastMap(mlir::MLIRContext *context, llvm::ArrayRef<int64_t> operandShape,
                             llvm::ArrayRef<int64_t> resultShape);

/// An all-parallel linalg.generic producing `resultType` from `inputs` that
/// broadcast numpy-style to it. `body` gets one scalar per input.
mlir::Value broadcastGeneric(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::RankedTensorType resultType, mlir::ValueRange inputs,
                             BodyBuilder body);

/// Reduces dimension `axis` of `input` with `combine` starting from `init`;
/// the result drops the axis.
mlir::Value reduceAxis(mlir::OpBuilder &b, mlir::Location loc, mlir::Value input, int64_t axis,
                       double init, BodyBuilder combine);

/// Reinterprets `input` as `resultType` (same element count, row-major).
mlir::Value reshapeTensor(mlir::OpBuilder &b, mlir::Location loc, mlir::Value input,
                          mlir::RankedTensorType resultType);

/// cap * tanh(x / cap) for a scalar or a vector: soft-capped attention
/// scores (Gemma 2), `cap` in the scores' unit.
mlir::Value softcapped(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x, double cap);
/// The derivative of softcapped at x, 1 - tanh^2(x / cap): what the
/// backward multiplies the capped scores' gradients by.
mlir::Value softcapSlope(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x, double cap);

/// activation(x) for a scalar or a vector.
mlir::Value buildActivation(mlir::OpBuilder &b, mlir::Location loc, Activation activation,
                            mlir::Value x);

/// d activation(x) / dx for a scalar or a vector.
mlir::Value buildActivationDerivative(mlir::OpBuilder &b, mlir::Location loc, Activation activation,
                                      mlir::Value x);

/// x @ weight over the last dim of x (weight [in, out], or [out, in] when
/// `transposeWeight`), as a linalg.matmul on x collapsed to 2-D. Returns the
/// 2-D [rows, out] product.
mlir::Value buildLinearProduct(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                               mlir::Value weight, bool transposeWeight);

} // namespace xfmr::lowering

#endif // XFMR_LIB_CONVERSION_LOWERINGUTILS_H
