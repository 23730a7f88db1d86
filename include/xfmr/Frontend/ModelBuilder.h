//===- ModelBuilder.h - model descriptions to xfmr IR -----------*- C++ -*-===//

#ifndef XFMR_FRONTEND_MODELBUILDER_H
#define XFMR_FRONTEND_MODELBUILDER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace xfmr {

/// Element type of a model's weights and activations.
enum class ElementType { F32, BF16, F16 };

/// Static shapes (and the element type) the model is compiled for.
struct ModelShape {
  int64_t batch = 1;
  /// Tokens per (encoder) sequence; 0 means the model's max positions.
  int64_t seqLen = 0;
  /// Tokens per decoder sequence (encoder-decoder models); 0 means seqLen.
  int64_t decoderSeqLen = 0;
  /// Build the training form: `@loss` returning the mean cross-entropy of
  /// the logits against a `labels` input (-100 ignored) and the logits, with
  /// dropout active, its masks drawn from a `dropout_seed` input.
  bool training = false;
  /// bf16 or f16: weights, activations and logits stored in that type (each
  /// op still computes in f32, see xfmr-compute-in-f32).
  ElementType elementType = ElementType::F32;
};

/// What the runtime needs beyond the entry function's signature.
struct ModelInfo {
  std::string modelType;
  int64_t padTokenId = 0;
  /// Tried in order in front of each parameter name when looking it up in a
  /// weights file (Hugging Face checkpoints of one architecture differ in
  /// the head they were saved with).
  std::vector<std::string> weightPrefixes{""};
};

/// Builds `func.func @forward` (or, with `shape.training`, `@loss`) from a
/// Hugging Face style config.json: token inputs carry `xfmr.input =
/// "<name>"`, weights `xfmr.param = "<checkpoint name>"`, the logits result
/// `xfmr.output = "logits"`. Errors name the file and the offending key.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
buildModelFromConfig(mlir::MLIRContext &context, llvm::StringRef path,
                     llvm::StringRef contents, const ModelShape &shape, ModelInfo &info);

/// The architectures buildModelFromConfig knows (values of "model_type").
llvm::ArrayRef<llvm::StringRef> supportedModelTypes();

} // namespace xfmr

#endif // XFMR_FRONTEND_MODELBUILDER_H
