//===- FusionMatchers.h - recognising unfused chains ------------*- C++ -*-===//
//
// Small matchers shared by the fusion passes. Each recognises one primitive
// form and returns its parts, or nothing.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_TRANSFORMS_FUSIONMATCHERS_H
#define XFMR_LIB_TRANSFORMS_FUSIONMATCHERS_H

#include "xfmr/Dialect/XfmrOps.h"

#include <optional>

namespace xfmr::fusion {

/// The value of a splat floating-point constant (any shape), if `value` is one.
std::optional<double> splatValue(mlir::Value value);

/// True for constants a masked score takes: -inf, or a value so negative
/// (<= -1e30, e.g. torch.finfo(float32).min) that exp() of it is 0.
bool isMaskingConstant(mlir::Value value);

/// The normalised axis of a reduce of `kind`, if `value` is one.
std::optional<int64_t> reduceAxis(mlir::Value value, ReduceKind kind, mlir::Value &input);

/// A softmax written out: max / sub / exp / sum / div (or exp / sum / div).
struct SoftmaxChain {
  mlir::Value input;
  int64_t axis;
  /// The ops of the chain, last first, to check that nothing else uses them.
  llvm::SmallVector<mlir::Operation *> ops;
};
std::optional<SoftmaxChain> matchSoftmaxChain(mlir::Value result);

/// True if every op of `ops` but the first (the root) has all its uses inside
/// `ops`, so the chain can be replaced as a whole.
bool isSelfContained(llvm::ArrayRef<mlir::Operation *> ops);

/// True if `value` is available at `op`: a block argument of an enclosing
/// block, or defined earlier in `op`'s block or outside its region.
bool isDefinedBefore(mlir::Value value, mlir::Operation *op);

} // namespace xfmr::fusion

#endif // XFMR_LIB_TRANSFORMS_FUSIONMATCHERS_H
