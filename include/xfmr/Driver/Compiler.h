//===- Compiler.h - model file to executable, object or header -*- C++ -*-===//
//
// The library behind `xfmrc`: load a model description, lower it with the
// pipelines, generate native code and link it with the runtime.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_DRIVER_COMPILER_H
#define XFMR_DRIVER_COMPILER_H

#include "xfmr/Frontend/ModelBuilder.h"
#include "xfmr/Pipelines/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace xfmr {

/// Diagnostics that already carry their `file:line:col: error:` prefix;
/// tools print them as they are.
class LocatedDiagnosticsError : public llvm::ErrorInfo<LocatedDiagnosticsError> {
public:
  static char ID;
  explicit LocatedDiagnosticsError(std::string text) : text(std::move(text)) {}
  void log(llvm::raw_ostream &os) const override { os << text; }
  std::error_code convertToErrorCode() const override { return llvm::inconvertibleErrorCode(); }

private:
  std::string text;
};

enum class EmitKind { Executable, Object, Header, Mlir, Llvm, RandomWeights };

/// What the compiled entry computes.
enum class CompileMode {
  /// The model's forward pass: logits.
  Inference,
  /// The loss and its gradients (xfmr-autodiff of the entry, or of the
  /// training loss a config builds).
  Gradient,
};

struct CompileOptions {
  std::string inputPath;
  /// "-" writes text formats to stdout.
  std::string outputPath;
  EmitKind emit = EmitKind::Executable;
  CompileMode mode = CompileMode::Inference;
  /// Gradient mode: inputs differentiated besides the weights (`*`: all
  /// float inputs).
  std::vector<std::string> gradientInputs;
  ModelShape shape;
  /// Entry function of an .mlir input (default: its only public function).
  std::string entry;
  /// Prefix of the generated symbols (`<prefix>_forward`, ...).
  std::string symbolPrefix;
  /// Target CPU for code generation; "native" is the host's.
  std::string cpu = "native";
  CpuPipelineOptions pipeline;
  /// Lanes of the generated vector code (8 or 16); 0 picks the target's
  /// widest. 16 on an AVX2 machine is legal (each vector takes two
  /// registers) and is how the AVX-512 code shape is tested there.
  int64_t vectorLanes = 0;
  /// Seed of --emit=random-weights.
  uint64_t seed = 0;
  /// Where xfmrc finds libxfmr_runtime.a and libxfmr_main.a.
  std::string runtimeLibraryDir;
};

/// One argument or result of a model's entry function, as the runtime and a
/// C caller see it.
struct ModelArgument {
  enum class Kind { Input, Param, Output } kind;
  std::string name;
  std::string dtype; // safetensors spelling: F32, I32, ...
  std::vector<int64_t> shape;
  /// For token-id inputs: the embedding table size their ids index.
  int64_t vocabSize = 0;
};

struct ModelSignature {
  ModelInfo info;
  std::string entryName;
  std::vector<ModelArgument> arguments;
};

/// Loads `options.inputPath` (.json config or .mlir), checks and returns
/// the module and its signature. Diagnostics name file and line/key.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
loadModel(mlir::MLIRContext &context, const CompileOptions &options, ModelSignature &signature);

/// The JSON manifest the runner reads.
std::string buildManifest(const ModelSignature &signature);

/// A C header declaring `<prefix>_forward` and friends.
std::string buildHeader(const ModelSignature &signature, llvm::StringRef prefix,
                        llvm::StringRef source);

/// Writes a .safetensors file with every weight of the model, initialised
/// as Hugging Face models are: N(0, 0.02) for matrices, 0 for biases, 1 for
/// layer-norm scales.
llvm::Error writeRandomWeights(const ModelSignature &signature, llvm::StringRef path,
                               uint64_t seed);

/// Runs the whole compilation described by `options`.
llvm::Error compileModel(const CompileOptions &options);

} // namespace xfmr

#endif // XFMR_DRIVER_COMPILER_H
