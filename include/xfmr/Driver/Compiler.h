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

#include <map>
#include <optional>
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

/// QuantizedWeights (xfmrc --quantize): the checkpoint's weights as the
/// executable would hold them (--weights-dtype), for it to load as they are.
enum class EmitKind {
  Executable,
  Object,
  Header,
  Mlir,
  Llvm,
  RandomWeights,
  Ptx,
  Cubin,
  Fatbin,
  QuantizedWeights
};

/// Whether `emit` asks for the GPU kernels alone (PTX, cubin, fatbin).
inline bool emitsKernelsOnly(EmitKind emit) {
  return emit == EmitKind::Ptx || emit == EmitKind::Cubin || emit == EmitKind::Fatbin;
}

/// What the model's code runs on.
enum class Target { Host, Nvptx };

/// What the compiled entry computes.
enum class CompileMode {
  /// The model's forward pass: logits.
  Inference,
  /// The loss and its gradients (xfmr-autodiff of the entry, or of the
  /// training loss a config builds).
  Gradient,
  /// A training step (xfmr-train-step) and a held-out evaluation entry.
  Train,
  /// Text generation: prefill and decode entries over a KV cache, linked
  /// with the generator (sampling, tokenizers).
  Generate,
};

/// Optimizer and schedule of a compiled training step (xfmr-train-step).
struct TrainOptions {
  std::string optimizer = "adamw";
  double learningRate = 1e-3;
  int64_t warmupSteps = 0;
  /// Steps of the run; the cosine decay ends here (0: constant after warm-up).
  int64_t steps = 1000;
  double minLrRatio = 0.0;
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
  double weightDecay = 0.0;
  double momentum = 0.9;
  /// Clip gradients to this global norm; 0 disables clipping.
  double maxGradNorm = 1.0;
  /// Initial scale of dynamic loss scaling; 0: none.
  double lossScale = 0.0;
  /// Finite steps in a row after which the loss scale doubles.
  int64_t lossScaleGrowthInterval = 2000;
  /// Start each gradient's reduction in a data-parallel job as soon as the
  /// backward has computed it.
  bool overlapAllReduce = true;
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
  TrainOptions train;
  /// Shapes, element type, head and outputs of a config model.
  ModelRequest model;
  /// Entry function of an .mlir input (default: its only public function).
  std::string entry;
  /// Prefix of the generated symbols (`<prefix>_forward`, ...).
  std::string symbolPrefix;
  /// Target CPU for code generation (host code, with --target=nvptx too);
  /// "native" is the host's.
  std::string cpu = "native";
  Target target = Target::Host;
  /// NVIDIA architecture of --target=nvptx (and of the kernels that
  /// emulateGpuKernels builds): sm_90a's attention uses warpgroup MMAs.
  std::string gpuArch = "sm_90";
  /// CUDA toolkit root: ptxas and fatbinary for cubin and fatbin output, and
  /// libxfmr_cuda for GPU executables.
  std::string cudaRoot;
  FusionOptions fusion;
  /// CPU: run parallel loops on OpenMP threads.
  bool openmp = true;
  /// Lanes of the generated vector code (8 or 16); 0 picks the target's
  /// widest. 16 on an AVX2 machine is legal (each vector takes two
  /// registers) and is how the AVX-512 code shape is tested there.
  int64_t vectorLanes = 0;
  /// CPU: products of integer weights quantize their activations to int8
  /// and use the target's integer dot product, where it has one: vpdpbusd
  /// (AVX-512 VNNI, AVX-VNNI) or vpmaddubsw (AVX2, AVX-512BW; not in GEMMs
  /// of int8 weights, which stay f32).
  bool int8Dot = true;
  /// With int8Dot: a portable integer dot product (plain vector arithmetic)
  /// rather than the target's instructions, so the integer kernels run on
  /// any host at any vector width (tests).
  bool portableInt8Dot = false;
  /// CPU: products of bf16 factors take the target's bf16 dot product, where
  /// it has one (AVX-512 BF16).
  bool bf16Dot = true;
  /// CPU: build the GPU kernels instead of the CPU ones, their thread blocks
  /// run as loops (how the GPU kernels are tested without a GPU).
  bool emulateGpuKernels = false;
  /// With emulateGpuKernels: each phase's threads run last to first (see
  /// convert-xfmr-to-gpu-kernels{reverse-threads}).
  bool reverseGpuThreads = false;
  /// Store the weights of products as "int8" or "int4" (a scale per group of
  /// weightGroupSize values along their input side, 0: per output channel)
  /// or "bf16", quantized or rounded by the runtime as it loads them; "":
  /// as the model's element type.
  std::string weightType;
  int64_t weightGroupSize = 0;
  /// With weightType: the embedding tables too.
  bool quantizeEmbeddings = false;
  /// With int8 or int4: the type of the scales (and mins), f32, bf16 or f16.
  std::string weightScaleType = "f32";
  /// With int4: a minimum per group besides its scale.
  bool weightMins = false;
  /// A GGUF file's quantized weights decoded to the model's type (an
  /// explicit --weights-dtype=model) rather than kept as ggml's integer
  /// groups.
  bool decodeGgufWeights = false;
  /// Seed of --emit=random-weights.
  uint64_t seed = 0;
  /// Where xfmrc finds libxfmr_runtime.a and libxfmr_main.a.
  std::string runtimeLibraryDir;
};

/// A compiled entry: its symbol is `<prefix>_<symbol>` (forward,
/// train_step, evaluate, prefill, decode, ...), and its manifest describes
/// its arguments to the runtime and to C callers.
struct ModelSignature {
  std::string symbol = "forward";
  rt::Manifest manifest;
};

/// Loads `options.inputPath` (.json config or .mlir), applies the
/// compilation mode (gradient, training step) and returns the module and
/// the signature of each entry, the main one first. Diagnostics name file
/// and line/key.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
loadModel(mlir::MLIRContext &context, const CompileOptions &options,
          std::vector<ModelSignature> &entries);

/// A C header declaring each entry (`<prefix>_forward` and friends).
std::string buildHeader(llvm::ArrayRef<ModelSignature> entries, llvm::StringRef prefix,
                        llvm::StringRef source);

/// Writes a .safetensors file with every weight of the model, initialised
/// as Hugging Face models are (ModelArgument::init): N(0, 0.02), 0 for
/// biases, 1 for layer-norm scales.
llvm::Error writeRandomWeights(const ModelSignature &signature, llvm::StringRef path,
                               uint64_t seed);

/// Runs the whole compilation described by `options`.
llvm::Error compileModel(const CompileOptions &options);

} // namespace xfmr

#endif // XFMR_DRIVER_COMPILER_H
