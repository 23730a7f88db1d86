//===- Passes.h - xfmr transform passes -------------------------*- C++ -*-===//

#ifndef XFMR_TRANSFORMS_PASSES_H
#define XFMR_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"

namespace xfmr {

#define GEN_PASS_DECL
#include "xfmr/Transforms/Passes.h.inc"

/// The `xfmr.input` name of the loss scale a gradient function built by
/// xfmr-autodiff{loss-scale} takes, which xfmr-train-step supplies.
inline constexpr llvm::StringLiteral kLossScaleInput = "loss_scale";

/// The function attribute in which xfmr-plan-buffers records the bytes of a
/// function's arena (an i64).
inline constexpr llvm::StringLiteral kArenaBytesAttr = "xfmr.arena_bytes";

/// Patterns rewriting high-level ops (multi_head_attention, softmax,
/// layer_norm, linear) into xfmr primitives.
void populateDecompositionPatterns(mlir::RewritePatternSet &patterns);

#define GEN_PASS_REGISTRATION
#include "xfmr/Transforms/Passes.h.inc"

} // namespace xfmr

#endif // XFMR_TRANSFORMS_PASSES_H
