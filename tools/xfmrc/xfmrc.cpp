//===- xfmrc.cpp - the xfmr model compiler --------------------------------===//

#include "xfmr/Driver/Compiler.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/WithColor.h"

#include <cmath>

using namespace llvm;

static cl::OptionCategory category("xfmrc options");

static cl::opt<std::string> inputPath(cl::Positional, cl::Required,
                                      cl::desc("<checkpoint directory | config.json | model.mlir>"),
                                      cl::cat(category));
static cl::opt<std::string> outputPath("o", cl::desc("Output file (default: from the input name; "
                                                     "'-' = stdout for text formats)"),
                                       cl::value_desc("path"), cl::cat(category));
static cl::opt<xfmr::EmitKind> emit(
    "emit", cl::desc("What to produce"), cl::init(xfmr::EmitKind::Executable),
    cl::values(clEnumValN(xfmr::EmitKind::Executable, "exe", "a runnable executable (default)"),
               clEnumValN(xfmr::EmitKind::Object, "obj", "an object file to link elsewhere"),
               clEnumValN(xfmr::EmitKind::Header, "header", "the C header of --emit=obj"),
               clEnumValN(xfmr::EmitKind::Mlir, "mlir", "the model in the xfmr dialect"),
               clEnumValN(xfmr::EmitKind::Llvm, "llvm", "optimized LLVM IR"),
               clEnumValN(xfmr::EmitKind::RandomWeights, "random-weights",
                          "a .safetensors file of freshly initialised weights"),
               clEnumValN(xfmr::EmitKind::Ptx, "ptx", "the kernels as PTX (--target=nvptx)"),
               clEnumValN(xfmr::EmitKind::Cubin, "cubin",
                          "the kernels as a cubin (--target=nvptx; needs ptxas)"),
               clEnumValN(xfmr::EmitKind::Fatbin, "fatbin",
                          "the kernels as a fatbin (--target=nvptx; needs ptxas, fatbinary)")),
    cl::cat(category));
static cl::opt<bool> gradient(
    "grad",
    cl::desc("Compile the loss and its gradients: a config's training loss (labels input, "
             "dropout active), or the --entry of an .mlir model (its first result is the loss)"),
    cl::cat(category));
static cl::list<std::string> gradientInputs(
    "grad-inputs", cl::desc("With --grad: inputs to differentiate besides the weights "
                            "(names, or * for all float inputs)"),
    cl::CommaSeparated, cl::cat(category));
static cl::opt<bool> train(
    "train",
    cl::desc("Compile a training executable: a training step (loss, gradients, optimizer "
             "update) and a held-out evaluation, with the trainer as main() (see its --help)"),
    cl::cat(category));
static cl::opt<bool> generate(
    "generate",
    cl::desc("Compile a text generator: prefill and decode entries over a KV cache, with the "
             "sampler and the checkpoint's tokenizer as main() (see its --help)"),
    cl::cat(category));
static cl::opt<int64_t>
    maxContext("max-context",
               cl::desc("With --generate: positions the KV cache holds (default: the model's, "
                        "at most 4096)"),
               cl::init(0), cl::cat(category));
/// The KV cache's element type; by default the model's (--dtype).
static cl::opt<xfmr::ElementType> cacheDtype(
    "cache-dtype",
    cl::desc("With --generate: element type of the KV cache (default: the model's --dtype); "
             "bf16 halves the bytes attention reads per step"),
    cl::values(clEnumValN(xfmr::ElementType::F32, "f32", "float32"),
               clEnumValN(xfmr::ElementType::BF16, "bf16", "bfloat16")),
    cl::cat(category));
static cl::OptionCategory trainCategory("xfmrc --train options");
static cl::opt<std::string> optimizer("optimizer", cl::desc("adamw (default) or sgd"),
                                      cl::init("adamw"), cl::cat(trainCategory));
static cl::opt<double> learningRate("lr", cl::desc("Peak learning rate (default 1e-3)"),
                                    cl::init(1e-3), cl::cat(trainCategory));
static cl::opt<int64_t> warmupSteps("warmup-steps",
                                    cl::desc("Steps of linear learning-rate warm-up (default 0)"),
                                    cl::init(0), cl::cat(trainCategory));
static cl::opt<int64_t> trainSteps(
    "steps", cl::desc("Steps of the run: the cosine decay reaches --min-lr-ratio here, and the "
                      "trainer's --steps defaults to it (default 1000; 0: constant rate)"),
    cl::init(1000), cl::cat(trainCategory));
static cl::opt<double> minLrRatio("min-lr-ratio",
                                  cl::desc("Final learning rate / peak (default 0)"),
                                  cl::init(0.0), cl::cat(trainCategory));
static cl::opt<double> beta1("beta1", cl::desc("AdamW beta1 (default 0.9)"), cl::init(0.9),
                             cl::cat(trainCategory));
static cl::opt<double> beta2("beta2", cl::desc("AdamW beta2 (default 0.999)"), cl::init(0.999),
                             cl::cat(trainCategory));
static cl::opt<double> epsilon("adam-epsilon", cl::desc("AdamW epsilon (default 1e-8)"),
                               cl::init(1e-8), cl::cat(trainCategory));
static cl::opt<double> weightDecay(
    "weight-decay", cl::desc("AdamW decoupled / SGD L2 weight decay (default 0)"), cl::init(0.0),
    cl::cat(trainCategory));
static cl::opt<double> momentum("momentum", cl::desc("SGD momentum (default 0.9)"),
                                cl::init(0.9), cl::cat(trainCategory));
static cl::opt<double> maxGradNorm(
    "max-grad-norm", cl::desc("Clip gradients to this global norm (default 1; 0: no clipping)"),
    cl::init(1.0), cl::cat(trainCategory));
static cl::opt<double> lossScale(
    "loss-scale",
    cl::desc("Initial scale of dynamic loss scaling: the loss is multiplied by it before the "
             "backward, the gradients divided after; an overflow skips the step and halves it, "
             "--loss-scale-growth-interval finite steps double it (default 65536 with "
             "--dtype=f16, else 0: none)"),
    cl::init(65536.0), cl::cat(trainCategory));
static cl::opt<int64_t> lossScaleGrowthInterval(
    "loss-scale-growth-interval",
    cl::desc("Finite steps in a row after which the loss scale doubles (default 2000)"),
    cl::init(2000), cl::cat(trainCategory));
static cl::opt<bool> overlapAllReduce(
    "overlap-all-reduce",
    cl::desc("Under mpirun, start each gradient's reduction as soon as the backward has "
             "computed it, so it travels while the backward goes on (default on)"),
    cl::init(true), cl::cat(trainCategory));
static cl::opt<xfmr::ElementType> dtype(
    "dtype",
    cl::desc("Element type of a config model's weights and activations (default f32); with "
             "--grad or --train the weights stay f32 (master weights, rounded for use) and the "
             "loss and logits are f32"),
    cl::values(clEnumValN(xfmr::ElementType::F32, "f32", "float32"),
               clEnumValN(xfmr::ElementType::BF16, "bf16",
                          "bfloat16 storage, each op computed in f32"),
               clEnumValN(xfmr::ElementType::F16, "f16", "float16 storage, each op computed in f32")),
    cl::init(xfmr::ElementType::F32), cl::cat(category));
enum class WeightsDtype { Model, Int8, Int4, BF16 };
static cl::opt<WeightsDtype> weightsDtype(
    "weights-dtype",
    cl::desc("Storage of the weights of products (linear layers, attention projections, the "
             "LM head) in an inference or generation executable, converted from the checkpoint "
             "as it loads; activations stay f32 (default: --dtype's)"),
    cl::values(clEnumValN(WeightsDtype::Int8, "int8",
                          "int8 with a scale per group (--weight-group-size)"),
               clEnumValN(WeightsDtype::Int4, "int4",
                          "4 bits a value, a scale (and with --weight-mins a minimum) per group "
                          "(--weight-group-size, default 32)"),
               clEnumValN(WeightsDtype::BF16, "bf16", "bfloat16"),
               clEnumValN(WeightsDtype::Model, "model",
                          "--dtype's (the default; a GGUF file's quantized weights, kept as "
                          "ggml's integer groups by default, decoded to it)")),
    cl::init(WeightsDtype::Model), cl::cat(category));
static cl::opt<bool> quantizeEmbeddings(
    "quantize-embeddings",
    cl::desc("With --weights-dtype: store the token embedding tables that way too (a tied "
             "LM head then shares the int8 copy)"),
    cl::cat(category));
enum class ScalesDtype { F32, F16, BF16 };
static cl::opt<ScalesDtype> weightScalesDtype(
    "weight-scales-dtype",
    cl::desc("With --weights-dtype=int8 or int4: the scales' (and mins') storage"),
    cl::values(clEnumValN(ScalesDtype::F32, "f32", "float32 (default)"),
               clEnumValN(ScalesDtype::F16, "f16",
                          "float16, half their bytes (as llama.cpp's); the values are "
                          "quantized with the rounded scales"),
               clEnumValN(ScalesDtype::BF16, "bf16", "bfloat16, likewise")),
    cl::init(ScalesDtype::F32), cl::cat(category));
static cl::opt<bool> quantize(
    "quantize",
    cl::desc("Write the checkpoint directory's weights as the executable compiled with the "
             "same flags reads them (--weights-dtype's int8 values and scales or bf16; a "
             "generator's transposed weights; every tensor on a cache line) to the .safetensors "
             "file -o, which it then uses where the file is mapped, without converting "
             "(--weights=FILE)"),
    cl::cat(category));
static cl::opt<int64_t> weightGroupSize(
    "weight-group-size",
    cl::desc("With --weights-dtype=int8 or int4: values per scale along a weight's input side: "
             "32, 64, 128, or (int8) 0 for one scale per output channel (default: int8 0, "
             "int4 32)"),
    cl::init(0), cl::cat(category));
static cl::opt<bool> weightMins(
    "weight-mins",
    cl::desc("With --weights-dtype=int4: a minimum per group as well as a scale (value = q * "
             "scale + min, as llama.cpp's Q4_1) rather than symmetric groups (Q4_0)"),
    cl::cat(category));
static cl::opt<int64_t> batch("batch", cl::desc("Sequences per call (default 1)"), cl::init(1),
                              cl::cat(category));
static cl::opt<int64_t> seqLen("seq-len",
                               cl::desc("Tokens per sequence (default: the model's positions; "
                                        "with --generate, a decoder's tokens per prefill call: "
                                        "128, an encoder-decoder's longest source)"),
                               cl::init(0), cl::cat(category));
static cl::opt<int64_t>
    decoderSeqLen("decoder-seq-len",
                  cl::desc("Decoder tokens per sequence (default: --seq-len; with "
                           "--generate, per prefill call: 128)"),
                  cl::init(0), cl::cat(category));
static cl::opt<std::string>
    architecture("architecture",
                 cl::desc("Hugging Face class to build from a checkpoint or config (GPT2Model, "
                          "BertForMaskedLM, ...; default: the config's \"architectures\")"),
                 cl::cat(category));
static cl::list<std::string> outputAttentions(
    "output-attentions",
    cl::desc("Also output the attention probabilities of these layers (numbers, or 'all'), "
             "as transformers' output_attentions"),
    cl::CommaSeparated, cl::cat(category));
static cl::opt<std::string> entry("entry", cl::desc("Entry function of an .mlir model"),
                                  cl::cat(category));
static cl::opt<std::string> symbolPrefix(
    "name", cl::desc("Prefix of the symbols of --emit=obj/header (default: the input's name)"),
    cl::cat(category));
static cl::opt<xfmr::Target> target(
    "target", cl::desc("What the model runs on"), cl::init(xfmr::Target::Host),
    cl::values(clEnumValN(xfmr::Target::Host, "host", "this machine's CPU (default)"),
               clEnumValN(xfmr::Target::Nvptx, "nvptx", "an NVIDIA GPU (CUDA)")),
    cl::cat(category));
static cl::opt<std::string> gpuArch("gpu-arch",
                                    cl::desc("NVIDIA architecture of --target=nvptx: sm_80, "
                                             "sm_90, sm_90a (warpgroup MMAs), ... (default "
                                             "sm_90)"),
                                    cl::init("sm_90"), cl::cat(category));
static cl::opt<std::string> cudaPath(
    "cuda-path", cl::desc("CUDA toolkit root, for ptxas and fatbinary (default " XFMR_CUDA_ROOT
                          ")"),
    cl::init(XFMR_CUDA_ROOT), cl::cat(category));
static cl::opt<std::string> cpu("mcpu", cl::desc("Target CPU (default: native)"),
                                cl::init("native"), cl::cat(category));
static cl::opt<uint64_t> seed("seed", cl::desc("Seed of --emit=random-weights"), cl::init(0),
                              cl::cat(category));
static cl::opt<bool> fuseAttention("fuse-attention", cl::desc("Fuse attention (default on)"),
                                   cl::init(true), cl::cat(category));
static cl::opt<bool> fuseSoftmax("fuse-softmax", cl::desc("Fuse softmax chains (default on)"),
                                 cl::init(true), cl::cat(category));
static cl::opt<bool> fuseLayerNorm("fuse-layer-norm",
                                   cl::desc("Fuse layer norms and residual adds (default on)"),
                                   cl::init(true), cl::cat(category));
static cl::opt<bool> fuseEpilogues("fuse-epilogues",
                                   cl::desc("Fuse matmul epilogues (default on)"),
                                   cl::init(true), cl::cat(category));
static cl::opt<bool>
    fuseElementwise("fuse-elementwise",
                    cl::desc("Fuse chains of elementwise ops into one loop nest (default on)"),
                    cl::init(true), cl::cat(category));
static cl::opt<bool> layerBodies(
    "layer-bodies",
    cl::desc("Compile each distinct layer once and call it per layer (default on for the "
             "host; off, as yet, for --target=nvptx; off: a copy of the code per layer)"),
    cl::init(true), cl::cat(category));
static cl::opt<int64_t> vectorLanes(
    "vector-lanes",
    cl::desc("f32 lanes of the generated vector code: 8 or 16 (default: the target's widest)"),
    cl::init(0), cl::cat(category), cl::Hidden);
static cl::opt<bool> int8Dot(
    "int8-dot",
    cl::desc("Products of integer weights quantize their activations to int8 and use the "
             "target's integer dot product: vpdpbusd (AVX-512 VNNI, AVX-VNNI) or vpmaddubsw "
             "(AVX2, AVX-512BW; not GEMMs of int8 weights) (default on)"),
    cl::init(true), cl::cat(category), cl::Hidden);
static cl::opt<bool>
    bf16Dot("bf16-dot",
            cl::desc("Products of bf16 factors (--dtype=bf16) take the target's bf16 dot product "
                     "(AVX-512 BF16) where it has one (default on)"),
            cl::init(true), cl::cat(category), cl::Hidden);
static cl::opt<bool> portableInt8Dot(
    "portable-int8-dot",
    cl::desc("With --int8-dot: vpdpbusd's arithmetic in plain vector code instead of the "
             "target's instructions, on any host and --vector-lanes (for testing)"),
    cl::init(false), cl::cat(category), cl::Hidden);
static cl::opt<bool> emulateGpuKernels(
    "emulate-gpu-kernels",
    cl::desc("Build the GPU kernels for the host, thread blocks run as loops (for testing)"),
    cl::init(false), cl::cat(category), cl::Hidden);
static cl::opt<bool> reverseGpuThreads(
    "reverse-gpu-threads",
    cl::desc("With --emulate-gpu-kernels, run each phase's threads last to first (finds races)"),
    cl::init(false), cl::cat(category), cl::Hidden);
static cl::opt<bool> openmp("openmp", cl::desc("Run parallel loops on OpenMP threads"),
                            cl::init(true), cl::cat(category));

/// What a model file or checkpoint directory is called: its file name
/// without extension.
static std::string modelName(StringRef path) {
  path = path.rtrim('/');
  return (sys::fs::is_directory(path) ? sys::path::filename(path) : sys::path::stem(path)).str();
}

static std::string identifierFrom(StringRef path) {
  std::string name;
  for (char c : modelName(path))
    name += isAlnum(c) ? c : '_';
  if (name.empty() || isDigit(name.front()))
    name.insert(name.begin(), 'm');
  return name;
}

int main(int argc, char **argv) {
  InitLLVM initLLVM(argc, argv);
  mlir::registerPassManagerCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
  cl::HideUnrelatedOptions({&category, &trainCategory});
  cl::ParseCommandLineOptions(argc, argv,
                              "xfmr model compiler: compiles a transformer model (a Hugging "
                              "Face checkpoint directory, a config.json or an xfmr .mlir file) "
                              "for the host CPU or an NVIDIA GPU\n");
  auto fail = [](const Twine &message) {
    WithColor::error(errs(), "xfmrc") << message << "\n";
    return 1;
  };
  if (batch <= 0)
    return fail("--batch must be positive, got " + Twine(batch));
  if (seqLen < 0 || decoderSeqLen < 0)
    return fail("--seq-len and --decoder-seq-len must not be negative");

  xfmr::CompileOptions options;
  options.inputPath = inputPath;
  options.emit = emit;
  if (!gradientInputs.empty() && !gradient)
    return fail("--grad-inputs needs --grad");
  if (static_cast<int>(gradient) + static_cast<int>(train) + static_cast<int>(generate) > 1)
    return fail("--grad, --train and --generate exclude each other");
  if (maxContext.getNumOccurrences() && !generate)
    return fail("--max-context needs --generate");
  if (maxContext < 0)
    return fail("--max-context must be positive, got " + Twine(maxContext));
  options.mode = train      ? xfmr::CompileMode::Train
                 : gradient ? xfmr::CompileMode::Gradient
                 : generate ? xfmr::CompileMode::Generate
                            : xfmr::CompileMode::Inference;
  options.model.cacheLength = maxContext;
  if (cacheDtype.getNumOccurrences()) {
    if (!generate)
      return fail("--cache-dtype needs --generate");
    options.model.cacheElementType = cacheDtype;
  }
  for (cl::Option *option :
       {static_cast<cl::Option *>(&optimizer), static_cast<cl::Option *>(&learningRate),
        static_cast<cl::Option *>(&warmupSteps), static_cast<cl::Option *>(&trainSteps),
        static_cast<cl::Option *>(&minLrRatio), static_cast<cl::Option *>(&beta1),
        static_cast<cl::Option *>(&beta2), static_cast<cl::Option *>(&epsilon),
        static_cast<cl::Option *>(&weightDecay), static_cast<cl::Option *>(&momentum),
        static_cast<cl::Option *>(&maxGradNorm), static_cast<cl::Option *>(&lossScale),
        static_cast<cl::Option *>(&lossScaleGrowthInterval),
        static_cast<cl::Option *>(&overlapAllReduce)})
    if (option->getNumOccurrences() && !train)
      return fail("--" + option->ArgStr + " needs --train");
  if (optimizer != "adamw" && optimizer != "sgd")
    return fail("--optimizer must be adamw or sgd, got '" + optimizer + "'");
  if (!(learningRate > 0))
    return fail("--lr must be positive, got " + formatv("{0}", learningRate.getValue()));
  if (warmupSteps < 0 || trainSteps < 0)
    return fail("--warmup-steps and --steps must not be negative");
  if (trainSteps && warmupSteps >= trainSteps)
    return fail("--warmup-steps (" + Twine(warmupSteps) + ") must be below --steps (" +
                Twine(trainSteps) + "), or --steps=0 for a constant rate");
  if (!(minLrRatio >= 0 && minLrRatio <= 1))
    return fail("--min-lr-ratio must be in [0, 1], got " + formatv("{0}", minLrRatio.getValue()));
  if (!(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1))
    return fail("--beta1 and --beta2 must be in [0, 1)");
  if (!(epsilon > 0))
    return fail("--adam-epsilon must be positive");
  if (!(weightDecay >= 0 && momentum >= 0 && momentum < 1 && maxGradNorm >= 0))
    return fail("--weight-decay and --max-grad-norm must not be negative, --momentum must be in "
                "[0, 1)");
  options.train.optimizer = optimizer;
  options.train.learningRate = learningRate;
  options.train.warmupSteps = warmupSteps;
  options.train.steps = trainSteps;
  options.train.minLrRatio = minLrRatio;
  options.train.beta1 = beta1;
  options.train.beta2 = beta2;
  options.train.epsilon = epsilon;
  options.train.weightDecay = weightDecay;
  options.train.momentum = momentum;
  options.train.maxGradNorm = maxGradNorm;
  options.gradientInputs.assign(gradientInputs.begin(), gradientInputs.end());
  options.model.batch = batch;
  options.model.seqLen = seqLen;
  options.model.decoderSeqLen = decoderSeqLen;
  options.model.architecture = architecture;
  for (StringRef layer : outputAttentions) {
    int64_t index;
    if (layer == "all")
      options.model.allAttentions = true;
    else if (layer.getAsInteger(10, index) || index < 0)
      return fail("--output-attentions takes layer numbers or 'all', got '" + layer + "'");
    else
      options.model.attentionLayers.push_back(index);
  }
  bool isMlir = sys::path::extension(inputPath) == ".mlir";
  if (dtype != xfmr::ElementType::F32 && isMlir)
    return fail("--dtype applies to checkpoints and configs; an .mlir model's types are its own");
  if (isMlir && (architecture.getNumOccurrences() || outputAttentions.getNumOccurrences()))
    return fail("--architecture and --output-attentions apply to checkpoints and configs");
  if (!(lossScale >= 0) || std::isinf(lossScale) || lossScaleGrowthInterval < 1)
    return fail("--loss-scale must be positive and finite (or 0: none) and "
                "--loss-scale-growth-interval at least 1");
  // f16 gradients underflow (or overflow) without it; bf16 has f32's range.
  bool f16 = dtype == xfmr::ElementType::F16;
  options.train.lossScale = lossScale.getNumOccurrences() || f16 ? lossScale.getValue() : 0.0;
  options.train.lossScaleGrowthInterval = lossScaleGrowthInterval;
  options.train.overlapAllReduce = overlapAllReduce;
  if (f16 && train && options.train.lossScale == 0)
    return fail("--dtype=f16 --train needs loss scaling (--loss-scale > 0): f16 gradients "
                "underflow without it");
  options.model.elementType = dtype;
  bool integerWeights = weightsDtype == WeightsDtype::Int8 || weightsDtype == WeightsDtype::Int4;
  if (weightGroupSize.getNumOccurrences() && !integerWeights)
    return fail("--weight-group-size needs --weights-dtype=int8 or int4");
  if (weightScalesDtype.getNumOccurrences() && !integerWeights)
    return fail("--weight-scales-dtype needs --weights-dtype=int8 or int4");
  if (weightMins && weightsDtype != WeightsDtype::Int4)
    return fail("--weight-mins needs --weights-dtype=int4");
  if (quantizeEmbeddings && weightsDtype == WeightsDtype::Model)
    return fail("--quantize-embeddings needs --weights-dtype=int8, int4 or bf16");
  options.decodeGgufWeights =
      weightsDtype == WeightsDtype::Model && weightsDtype.getNumOccurrences() > 0;
  if (weightsDtype != WeightsDtype::Model) {
    std::string name = weightsDtype == WeightsDtype::Int8   ? "int8"
                       : weightsDtype == WeightsDtype::Int4 ? "int4"
                                                            : "bf16";
    if (train || gradient)
      return fail("--weights-dtype=" + name +
                  " is for inference and generation, not --grad or --train");
    if (dtype != xfmr::ElementType::F32)
      return fail("--weights-dtype=" + name + " needs --dtype=f32 (activations stay f32)");
    bool int4 = weightsDtype == WeightsDtype::Int4;
    if ((weightGroupSize != 0 || int4) && weightGroupSize != 32 && weightGroupSize != 64 &&
        weightGroupSize != 128 && !(int4 && !weightGroupSize.getNumOccurrences()))
      return fail("--weight-group-size must be 32, 64, 128" +
                  Twine(int4 ? "" : " or 0 (per output channel)") +
                  " with --weights-dtype=" + name + ", got " + Twine(weightGroupSize));
    if (emit == xfmr::EmitKind::RandomWeights)
      return fail("--emit=random-weights writes f32 weights; drop --weights-dtype");
    options.weightType = name;
    options.weightGroupSize = int4 && !weightGroupSize.getNumOccurrences() ? 32 : weightGroupSize;
    options.weightMins = weightMins;
    options.quantizeEmbeddings = quantizeEmbeddings;
    options.weightScaleType = weightScalesDtype == ScalesDtype::BF16  ? "bf16"
                              : weightScalesDtype == ScalesDtype::F16 ? "f16"
                                                                      : "f32";
  }
  if (quantize) {
    if (emit.getNumOccurrences())
      return fail("--quantize writes weights; drop --emit");
    options.emit = xfmr::EmitKind::QuantizedWeights;
  }
  options.entry = entry;
  options.cpu = cpu;
  if (xfmr::emitsKernelsOnly(emit) && target != xfmr::Target::Nvptx)
    return fail("--emit=ptx, cubin and fatbin need --target=nvptx");
  if (gpuArch.getNumOccurrences() && target != xfmr::Target::Nvptx && !emulateGpuKernels)
    return fail("--gpu-arch needs --target=nvptx or --emulate-gpu-kernels");
  if (!Regex("^sm_[0-9]+a?$").match(gpuArch))
    return fail("--gpu-arch must look like sm_80 or sm_90a, got '" + gpuArch + "'");
  if (openmp.getNumOccurrences() && target == xfmr::Target::Nvptx)
    return fail("--openmp applies to --target=host only");
  if (overlapAllReduce.getNumOccurrences() && overlapAllReduce && target == xfmr::Target::Nvptx)
    return fail("--overlap-all-reduce applies to --target=host only (data-parallel jobs)");
  options.target = target;
  options.gpuArch = gpuArch;
  options.cudaRoot = cudaPath;
  options.openmp = openmp;
  options.fusion = {fuseAttention, fuseSoftmax, fuseLayerNorm, fuseEpilogues, fuseElementwise,
                    // On a GPU, until a GPU session has measured the
                    // synchronization each layer call's buffers cost.
                    layerBodies.getNumOccurrences() ? layerBodies : target != xfmr::Target::Nvptx};
  options.seed = seed;
  if (vectorLanes != 0 && vectorLanes != 8 && vectorLanes != 16)
    return fail("--vector-lanes must be 8 or 16, got " + Twine(vectorLanes));
  options.vectorLanes = vectorLanes;
  options.int8Dot = int8Dot;
  if (portableInt8Dot && !int8Dot)
    return fail("--portable-int8-dot needs --int8-dot");
  options.portableInt8Dot = portableInt8Dot;
  options.bf16Dot = bf16Dot;
  if (emulateGpuKernels && target == xfmr::Target::Nvptx)
    return fail("--emulate-gpu-kernels applies to --target=host only");
  if (reverseGpuThreads && !emulateGpuKernels)
    return fail("--reverse-gpu-threads needs --emulate-gpu-kernels");
  options.emulateGpuKernels = emulateGpuKernels;
  options.reverseGpuThreads = reverseGpuThreads;
  options.symbolPrefix = symbolPrefix.empty() ? identifierFrom(inputPath) : symbolPrefix;
  options.outputPath = outputPath;
  if (options.outputPath.empty()) {
    static constexpr const char *suffixes[] = {
        "",     ".o",     ".h",      ".xfmr.mlir",         ".ll", ".safetensors",
        ".ptx", ".cubin", ".fatbin", ".narrow.safetensors"};
    options.outputPath = modelName(inputPath) + suffixes[static_cast<int>(options.emit)];
  }
  std::string executable = sys::fs::getMainExecutable(argv[0], (void *)&main);
  SmallString<256> libDir(sys::path::parent_path(sys::path::parent_path(executable)));
  sys::path::append(libDir, "lib");
  options.runtimeLibraryDir = std::string(libDir);

  int status = 0;
  handleAllErrors(
      xfmr::compileModel(options),
      [&](const xfmr::LocatedDiagnosticsError &diagnostics) {
        diagnostics.log(errs());
        errs() << "\n";
        status = 1;
      },
      [&](const ErrorInfoBase &error) { status = fail(error.message()); });
  return status;
}
