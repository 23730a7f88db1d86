//===- FrontendSupport.h - config reading and graph building ---*- C++ -*-===//
//
// Shared by the per-architecture builders (Gpt2.cpp, Bert.cpp,
// Transformer.cpp), each of which holds all knowledge of its architecture:
// config keys, checkpoint tensor names and the block structure.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_FRONTEND_FRONTENDSUPPORT_H
#define XFMR_LIB_FRONTEND_FRONTENDSUPPORT_H

#include "xfmr/Dialect/XfmrOps.h"
#include "xfmr/Frontend/ModelBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"

namespace xfmr::frontend {

/// Reads typed, validated values from a config object. Every failure names
/// the file and key; the first one is kept and reported by `takeError`.
class ConfigReader {
public:
  ConfigReader(llvm::StringRef path, const llvm::json::Object &object)
      : path(path.str()), object(object) {}

  /// A positive integer under the first of `keys` present (HF configs use
  /// several spellings); `fallback` if none is present and it is > 0.
  int64_t positiveInt(llvm::ArrayRef<llvm::StringRef> keys, int64_t fallback = 0);
  int64_t nonNegativeInt(llvm::StringRef key, int64_t fallback);
  double positiveNumber(llvm::StringRef key, double fallback);
  /// A dropout rate in [0, 1).
  double probability(llvm::StringRef key, double fallback);
  bool boolean(llvm::StringRef key, bool fallback);
  std::string string(llvm::ArrayRef<llvm::StringRef> keys, llvm::StringRef fallback);
  /// The activation named under `keys` (relu, gelu, gelu_new, ...).
  Activation activation(llvm::ArrayRef<llvm::StringRef> keys, llvm::StringRef fallback);
  /// Records a failure about `key`.
  void error(llvm::StringRef key, const llvm::Twine &message);
  /// Requires `dModel % heads == 0`, naming both keys.
  void requireDivisible(llvm::StringRef modelKey, int64_t dModel, llvm::StringRef headsKey,
                        int64_t heads);

  bool failed() const { return static_cast<bool>(firstError); }
  llvm::Error takeError();

private:
  const llvm::json::Value *lookup(llvm::ArrayRef<llvm::StringRef> keys, llvm::StringRef &found);

  std::string path;
  const llvm::json::Object &object;
  std::optional<std::string> firstError;
};

/// Builds one entry function whose arguments appear as the body asks for
/// them: token inputs, then parameters in first-use order (a tied weight is
/// one argument used twice).
class GraphBuilder {
public:
  GraphBuilder(mlir::ModuleOp module, int64_t batch, bool training, mlir::Type floatType);

  mlir::OpBuilder &builder() { return b; }
  mlir::Location location() const { return loc; }
  /// The element type of weights and activations.
  mlir::Type floatType() const { return elementType; }

  /// An int32 [batch, length] token input.
  mlir::Value input(llvm::StringRef name, int64_t length);
  /// A weight named as in the checkpoint (in a bf16/f16 model's training
  /// form: an f32 argument, rounded).
  mlir::Value param(llvm::StringRef name, llvm::ArrayRef<int64_t> shape);
  /// The padding mask (i1, true = token) of an int32 attention_mask input.
  mlir::Value paddingMask(mlir::Value attentionMask);

  mlir::Value layerNorm(mlir::Value x, llvm::StringRef prefix, double epsilon);
  /// A linear layer with weight `<prefix>.weight` and bias `<prefix>.bias`;
  /// `torchLayout` selects torch.nn.Linear's [out, in] weight layout.
  mlir::Value linear(mlir::Value x, llvm::StringRef prefix, int64_t in, int64_t out,
                     bool torchLayout);
  mlir::Value add(mlir::Value x, mlir::Value y);
  /// Dropout, active (seeded) in the training form only.
  mlir::Value dropout(mlir::Value x, double rate);
  mlir::Value activation(mlir::Value x, Activation activation);

  /// Finishes the function returning `logits` as output "logits" (after
  /// the loss, in the training form).
  void finish(mlir::Value logits);

private:
  mlir::Value addArgument(mlir::Type type, llvm::StringRef attrName, llvm::StringRef name);

  mlir::OpBuilder b;
  mlir::Location loc;
  mlir::func::FuncOp func;
  mlir::Block *body;
  int64_t batch;
  bool training;
  mlir::Type elementType;
  llvm::StringMap<mlir::Value> params;
  /// The `dropout_seed` input, and how many dropouts drew from it.
  mlir::Value dropoutSeed;
  int64_t dropouts = 0;
};

/// One architecture: reads its config and emits its graph.
using ArchitectureBuilder = llvm::Error (*)(ConfigReader &config, GraphBuilder &graph,
                                            const ModelShape &shape, ModelInfo &info);

llvm::Error buildGpt2(ConfigReader &config, GraphBuilder &graph, const ModelShape &shape,
                      ModelInfo &info);
llvm::Error buildBert(ConfigReader &config, GraphBuilder &graph, const ModelShape &shape,
                      ModelInfo &info);
llvm::Error buildTransformer(ConfigReader &config, GraphBuilder &graph,
                             const ModelShape &shape, ModelInfo &info);
llvm::Error buildEncoder(ConfigReader &config, GraphBuilder &graph, const ModelShape &shape,
                         ModelInfo &info);

/// Resolves the compiled sequence length against the model's max positions,
/// naming `positionsKey` when it is too long.
int64_t resolveSeqLen(ConfigReader &config, int64_t requested, int64_t maxPositions,
                      llvm::StringRef positionsKey, llvm::StringRef flag);

} // namespace xfmr::frontend

#endif // XFMR_LIB_FRONTEND_FRONTENDSUPPORT_H
