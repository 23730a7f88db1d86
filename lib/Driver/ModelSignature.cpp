//===- ModelSignature.cpp - load a model and describe its ABI ---*- C++ -*-===//

#include "xfmr/Driver/Compiler.h"

#include "xfmr/Dialect/XfmrOps.h"
#include "xfmr/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;
using namespace xfmr;

char LocatedDiagnosticsError::ID = 0;

namespace {

std::string shapeString(ArrayRef<int64_t> shape) {
  std::string text = "[";
  llvm::raw_string_ostream os(text);
  llvm::interleaveComma(shape, os);
  return text + "]";
}

/// The runtime's dtype of tensors of `type`, or nullopt for types entries
/// cannot take.
std::optional<xfmr_dtype> dtypeOf(Type type) {
  if (type.isF32())
    return XFMR_DTYPE_F32;
  if (type.isF64())
    return XFMR_DTYPE_F64;
  if (type.isF16())
    return XFMR_DTYPE_F16;
  if (type.isBF16())
    return XFMR_DTYPE_BF16;
  if (type.isInteger(64))
    return XFMR_DTYPE_I64;
  if (type.isInteger(32))
    return XFMR_DTYPE_I32;
  if (type.isInteger(8))
    return XFMR_DTYPE_I8;
  if (type.isInteger(1))
    return XFMR_DTYPE_BOOL;
  return std::nullopt;
}

/// The safetensors spelling of `type` ("F32", ...), or "".
std::string dtypeName(Type type) {
  std::optional<xfmr_dtype> dtype = dtypeOf(type);
  return dtype ? xfmr_dtype_name(*dtype) : "";
}

/// The vocabulary size an input of token ids indexes: the smallest table
/// any embedding looks it up in.
int64_t vocabularyOf(Value arg) {
  int64_t vocab = 0;
  for (Operation *user : arg.getUsers())
    if (auto embedding = dyn_cast<EmbeddingOp>(user); embedding && embedding.getIds() == arg) {
      int64_t rows = cast<RankedTensorType>(embedding.getTable().getType()).getDimSize(0);
      vocab = vocab ? std::min(vocab, rows) : rows;
    }
  return vocab;
}

LogicalResult signatureError(func::FuncOp func, const Twine &message) {
  return func.emitError() << "@" << func.getName() << ": " << message;
}

llvm::Expected<func::FuncOp> findEntry(ModuleOp module, StringRef requested, StringRef path) {
  SmallVector<func::FuncOp> candidates;
  for (auto func : module.getOps<func::FuncOp>())
    if (!func.isPrivate() && !func.isExternal() &&
        (requested.empty() || func.getName() == requested))
      candidates.push_back(func);
  if (candidates.size() == 1)
    return candidates.front();
  if (!requested.empty())
    return llvm::createStringError(path + ": no public function @" + requested);
  if (candidates.empty())
    return llvm::createStringError(path + ": no public function with a body to compile");
  return llvm::createStringError(path + ": " + Twine(candidates.size()) +
                                 " public functions; choose one with --entry");
}

/// How a fresh model initialises weight `arg`, from what uses it: layer-norm
/// scales 1, biases 0, everything else N(0, 0.02).
std::string initOf(Value arg) {
  for (OpOperand &use : arg.getUses()) {
    Operation *user = use.getOwner();
    // A master weight is used through its rounding.
    if (isa<arith::TruncFOp>(user))
      return initOf(user->getResult(0));
    if (auto norm = dyn_cast<LayerNormOp>(user)) {
      if (arg == norm.getGamma())
        return "ones";
      if (arg == norm.getBeta())
        return "zeros";
    }
    if (auto norm = dyn_cast<FusedAddLayerNormOp>(user)) {
      if (arg == norm.getGamma())
        return "ones";
      if (arg == norm.getBeta())
        return "zeros";
    }
    if (auto linear = dyn_cast<LinearOp>(user); linear && arg == linear.getBias())
      return "zeros";
    if (auto linear = dyn_cast<FusedLinearOp>(user); linear && arg == linear.getBias())
      return "zeros";
    if (auto gated = dyn_cast<GatedLinearOp>(user);
        gated && (arg == gated.getGateBias() || arg == gated.getUpBias()))
      return "zeros";
    if (auto mha = dyn_cast<MultiHeadAttentionOp>(user)) {
      if (arg == mha.getOutBias() || llvm::is_contained(mha.getInBiases(), arg))
        return "zeros";
    }
  }
  return "normal";
}

LogicalResult describeEntry(func::FuncOp func, const llvm::StringMap<std::string> &inits,
                            rt::Manifest &manifest) {
  llvm::StringSet<> names;
  llvm::StringMap<Type> updatable;
  auto addName = [&](StringRef name) -> LogicalResult {
    if (name.empty())
      return signatureError(func, "argument names must not be empty");
    if (!names.insert(name).second)
      return signatureError(func, "two arguments are named '" + name + "'");
    return success();
  };
  for (BlockArgument arg : func.getArguments()) {
    unsigned index = arg.getArgNumber();
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    auto input = func.getArgAttrOfType<StringAttr>(index, "xfmr.input");
    auto param = func.getArgAttrOfType<StringAttr>(index, "xfmr.param");
    auto state = func.getArgAttrOfType<StringAttr>(index, "xfmr.state");
    if (static_cast<int>(!!input) + static_cast<int>(!!param) + static_cast<int>(!!state) != 1)
      return signatureError(func, "argument " + Twine(index) +
                                      " needs exactly one of the attributes xfmr.input = "
                                      "\"<name>\" or xfmr.param = \"<weight name>\"");
    if (!type || !type.hasStaticShape() || !dtypeOf(type.getElementType()))
      return signatureError(func, "argument " + Twine(index) +
                                      " must be a statically shaped tensor of f32, f64, f16, "
                                      "bf16, i64, i32 or i1");
    rt::ArgSpec argument;
    argument.kind = input   ? rt::ArgSpec::Kind::Input
                    : param ? rt::ArgSpec::Kind::Param
                            : rt::ArgSpec::Kind::State;
    argument.name = (input ? input : param ? param : state).getValue().str();
    argument.dtype = *dtypeOf(type.getElementType());
    argument.shape.assign(type.getShape().begin(), type.getShape().end());
    Type element = type.getElementType();
    auto quantized = func.getArgAttrOfType<DictionaryAttr>(index, "xfmr.quantized");
    if (param && quantized) {
      // The int8 values or the scales of checkpoint tensor `name`
      // (xfmr-quantize-weights), or it as a float type (its bf16 rounding,
      // say), which the runtime computes from it.
      auto part = quantized.getAs<StringAttr>("part");
      auto axis = quantized.getAs<IntegerAttr>("axis");
      auto group = quantized.getAs<IntegerAttr>("group_size");
      bool rounded = part && (element.isF32() || element.isBF16() || element.isF16()) &&
                     part.getValue() == rt::floatPartName(argument.dtype);
      auto bits = quantized.getAs<IntegerAttr>("bits");
      bool scaleLike = part && (part.getValue() == "scales" || part.getValue() == "mins") &&
                       (element.isF32() || element.isBF16() || element.isF16());
      if (!part || type.getRank() != 2 || (bits && bits.getInt() != 4 && bits.getInt() != 8) ||
          !(rounded ||
            (axis && group && (part.getValue() == "values" ? element.isInteger(8) : scaleLike))))
        return signatureError(func, "weight '" + argument.name +
                                        "': xfmr.quantized needs part = \"values\" (i8) or "
                                        "\"scales\" or \"mins\" (f32, bf16 or f16) with axis, "
                                        "group_size and bits 8 or 4, or the argument's float "
                                        "type (\"f32\", \"bf16\", \"f16\")");
      argument.bits = bits ? bits.getInt() : 8;
      argument.source = argument.name;
      argument.transposed = static_cast<bool>(quantized.get("transposed"));
      argument.quantizedPart = part.getValue().str();
      argument.name += ":" + argument.quantizedPart + (argument.transposed ? ".T" : "");
      argument.axis = rounded ? 0 : axis.getInt();
      argument.groupSize = rounded ? 0 : group.getInt();
    } else if ((param || state) && !element.isF32() && !element.isBF16() && !element.isF16()) {
      return signatureError(func, (param ? "weight '" : "state '") + argument.name +
                                      "' must be f32, bf16 or f16");
    }
    if (input)
      argument.vocabSize = vocabularyOf(arg);
    if (param) {
      auto it = inits.find(argument.name);
      argument.init = it != inits.end() ? it->second : initOf(arg);
    }
    if (!input)
      updatable[argument.name] = type;
    if (failed(addName(argument.name)))
      return failure();
    manifest.args.push_back(std::move(argument));
  }
  for (auto [index, type] : llvm::enumerate(func.getResultTypes())) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || !tensor.hasStaticShape() || !dtypeOf(tensor.getElementType()))
      return signatureError(func, "result " + Twine(index) +
                                      " must be a statically shaped tensor");
    auto name = func.getResultAttrOfType<StringAttr>(index, "xfmr.output");
    rt::ArgSpec argument;
    argument.kind = rt::ArgSpec::Kind::Output;
    argument.name = name ? name.getValue().str() : "output" + std::to_string(index);
    argument.dtype = *dtypeOf(tensor.getElementType());
    argument.shape.assign(tensor.getShape().begin(), tensor.getShape().end());
    if (auto updates = func.getResultAttrOfType<StringAttr>(index, "xfmr.updates")) {
      auto it = updatable.find(updates.getValue());
      if (it == updatable.end() || it->second != type)
        return signatureError(func, "result " + Twine(index) + " updates '" +
                                        updates.getValue() +
                                        "', which is no weight or state of its type");
      argument.updates = updates.getValue().str();
    }
    if (failed(addName(argument.name)))
      return failure();
    manifest.args.push_back(std::move(argument));
  }
  if (func.getNumResults() == 0)
    return signatureError(func, "the entry function returns nothing");
  manifest.entry = func.getName().str();
  return success();
}

/// A copy of the training loss `loss` named `evaluate`, without dropout:
/// what a held-out evaluation runs.
func::FuncOp buildEvaluation(func::FuncOp loss) {
  OpBuilder b(loss);
  b.setInsertionPointAfter(loss);
  auto evaluate = cast<func::FuncOp>(b.clone(*loss));
  evaluate.setName("evaluate");
  evaluate.walk([](DropoutOp dropout) {
    dropout.getResult().replaceAllUsesWith(dropout.getInput());
    dropout.erase();
  });
  // The dropout seed and what derived per-dropout seeds from it.
  for (BlockArgument arg : llvm::reverse(evaluate.getArguments())) {
    auto name = evaluate.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "xfmr.input");
    if (!name || name.getValue() != "dropout_seed")
      continue;
    SmallVector<Operation *> derived;
    for (Operation *user : arg.getUsers())
      derived.push_back(user);
    while (!derived.empty()) {
      Operation *op = derived.pop_back_val();
      for (Operation *user : op->getUsers())
        derived.push_back(user);
      if (op->use_empty())
        op->erase();
    }
    if (arg.use_empty())
      (void)evaluate.eraseArgument(arg.getArgNumber());
  }
  return evaluate;
}

/// Checks the weights a checkpoint directory declares against the
/// parameters of the model built from its config, naming the first that
/// is missing or does not fit.
llvm::Error checkCheckpoint(ModuleOp module, const ModelSource &source, const ModelInfo &info) {
  if (source.directory.empty())
    return llvm::Error::success();
  for (auto func : module.getOps<func::FuncOp>())
    for (BlockArgument arg : func.getArguments()) {
      auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "xfmr.param");
      if (!name)
        continue;
      auto type = cast<RankedTensorType>(arg.getType());
      std::string needs = dtypeName(type.getElementType()) + " " + shapeString(type.getShape());
      const CheckpointTensor *found = nullptr;
      std::string foundName;
      for (const std::string &prefix : info.weightPrefixes) {
        auto it = source.tensors.find(prefix + name.getValue().str());
        if (!found && it != source.tensors.end()) {
          found = &it->second;
          foundName = it->first().str();
        }
      }
      if (!found)
        return llvm::createStringError(source.directory + ": no tensor '" + name.getValue() +
                                       "' (the model of " + source.configPath + " needs " + needs +
                                       ")");
      // ggml's block formats (GGUF files) are read as floats too.
      bool isFloat = llvm::is_contained({"F32", "F64", "F16", "BF16"}, found->dtype) ||
                     !found->integerStorage.empty();
      if (!isFloat || ArrayRef<int64_t>(found->shape) != type.getShape())
        return llvm::createStringError(source.directory + ": tensor '" + foundName + "' is " +
                                       found->dtype + " " + shapeString(found->shape) +
                                       ", the model of " + source.configPath + " needs " + needs);
    }
  return llvm::Error::success();
}

/// Whether every product of `func` reads a weight stored [out, in] (through
/// the transposes, widenings and dequantizations xfmr-quantize-weights
/// makes).
bool readsWeightsOutIn(func::FuncOp func) {
  auto outIn = [](Value weight, bool transposed) {
    while (Operation *def = weight.getDefiningOp()) {
      if (auto transpose = dyn_cast<TransposeOp>(def))
        transposed = !transposed;
      else if (!isa<arith::ExtFOp, DequantizeOp>(def))
        break;
      weight = def->getOperand(0);
    }
    return transposed;
  };
  return !func.walk([&](Operation *op) {
                bool ok = true;
                if (auto linear = dyn_cast<LinearOp>(op))
                  ok = outIn(linear.getWeight(), linear.getTransposeWeight());
                if (auto attention = dyn_cast<MultiHeadAttentionOp>(op))
                  ok = llvm::all_of(
                           attention.getInWeights(),
                           [&](Value w) { return outIn(w, attention.getTransposeWeights()); }) &&
                       outIn(attention.getOutWeight(), attention.getTransposeWeights());
                return ok ? WalkResult::advance() : WalkResult::interrupt();
              })
              .wasInterrupted();
}

/// Per-weight storages (xfmr-quantize-weights' per-weight) keeping the
/// weights `source` holds in ggml's block formats as their integer groups:
/// the executable then reads ggml's values, not a re-quantization of them.
std::vector<std::string> ggmlWeightStorage(ModuleOp module, const ModelSource &source,
                                           const ModelInfo &info) {
  std::vector<std::string> storage;
  llvm::StringSet<> seen;
  for (auto func : module.getOps<func::FuncOp>())
    for (BlockArgument arg : func.getArguments()) {
      auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "xfmr.param");
      if (!name || !seen.insert(name.getValue()).second)
        continue;
      for (const std::string &prefix : info.weightPrefixes) {
        auto it = source.tensors.find(prefix + name.getValue().str());
        if (it == source.tensors.end())
          continue;
        if (!it->second.integerStorage.empty())
          storage.push_back(name.getValue().str() + "=" + it->second.integerStorage);
        break;
      }
    }
  return storage;
}

/// Prints diagnostics as `file:line:col: error: ...` while parsing and
/// verifying, and collects them into one error.
class CollectingDiagnostics {
public:
  CollectingDiagnostics(MLIRContext &context, llvm::SourceMgr &sourceMgr)
      : printer(sourceMgr, &context, stream),
        // Source lines only of the .mlir file the source manager holds: a
        // built model's location names its checkpoint (a GGUF file's
        // "first line" is megabytes of binary metadata).
        handler(&context, [this, &sourceMgr](Diagnostic &diag) {
          auto inSource = [&](Location loc) {
            auto file = loc->findInstanceOf<FileLineColLoc>();
            for (unsigned id = 1; file && id <= sourceMgr.getNumBuffers(); ++id)
              if (sourceMgr.getMemoryBuffer(id)->getBufferIdentifier() == file.getFilename())
                return true;
            return false;
          };
          printer.emitDiagnostic(diag.getLocation(), diag.str(), diag.getSeverity(),
                                 inSource(diag.getLocation()));
          for (Diagnostic &note : diag.getNotes())
            printer.emitDiagnostic(note.getLocation(), note.str(), note.getSeverity(),
                                   inSource(note.getLocation()));
          return success();
        }) {}
  llvm::Error error(const Twine &fallback) {
    std::string text = stream.str();
    while (!text.empty() && text.back() == '\n')
      text.pop_back();
    if (text.empty())
      return llvm::createStringError(fallback);
    return llvm::make_error<LocatedDiagnosticsError>(text);
  }

private:
  std::string buffer;
  llvm::raw_string_ostream stream{buffer};
  SourceMgrDiagnosticHandler printer;
  ScopedDiagnosticHandler handler;
};

} // namespace

llvm::Expected<OwningOpRef<ModuleOp>>
xfmr::loadModel(MLIRContext &context, const CompileOptions &options,
                std::vector<ModelSignature> &entries) {
  StringRef path = options.inputPath;
  OwningOpRef<ModuleOp> module;
  llvm::SourceMgr sourceMgr;
  CollectingDiagnostics diagnostics(context, sourceMgr);
  ModelInfo info;
  // The weights a GGUF file holds as ggml's integer groups, stored so.
  std::vector<std::string> ggmlStorage;
  StringRef extension = llvm::sys::path::extension(path);
  if (extension == ".json" || extension == ".gguf" || llvm::sys::fs::is_directory(path)) {
    llvm::Expected<ModelSource> source = readModelSource(path);
    if (!source)
      return source.takeError();
    ModelRequest request = options.model;
    request.training = options.mode == CompileMode::Gradient || options.mode == CompileMode::Train;
    request.generate = options.mode == CompileMode::Generate;
    request.fuseAttention = options.fusion.attention;
    auto built = buildModel(context, *source, request, info);
    if (!built)
      return built.takeError();
    module = std::move(*built);
    if (llvm::Error error = checkCheckpoint(*module, *source, info))
      return std::move(error);
    // On the host's f32 inference and generation, unless told otherwise.
    bool keepGgml =
        options.weightType.empty() && !options.decodeGgufWeights &&
        (options.mode == CompileMode::Inference || options.mode == CompileMode::Generate) &&
        options.target == Target::Host && !options.emulateGpuKernels &&
        options.model.elementType == ElementType::F32;
    if (keepGgml)
      ggmlStorage = ggmlWeightStorage(*module, *source, info);
    if (!source->directory.empty()) {
      SmallString<256> absolute(source->directory);
      llvm::sys::fs::make_absolute(absolute);
      info.defaultWeights = std::string(absolute);
    }
  } else if (extension == ".mlir") {
    auto file = llvm::MemoryBuffer::getFileOrSTDIN(path, /*IsText=*/true);
    if (!file)
      return llvm::createStringError(path + ": cannot read: " + file.getError().message());
    sourceMgr.AddNewSourceBuffer(std::move(*file), llvm::SMLoc());
    module = parseSourceFile<ModuleOp>(sourceMgr, &context);
    if (!module)
      return diagnostics.error(path + ": cannot parse");
    if (auto type = (*module)->getAttrOfType<StringAttr>("xfmr.model_type"))
      info.modelType = type.getValue().str();
  } else if (!llvm::sys::fs::exists(path)) {
    return llvm::createStringError(path + ": no such file or directory");
  } else {
    return llvm::createStringError(path + ": unknown model file type (expected a checkpoint "
                                          "directory, a config .json, a .gguf or an .mlir file)");
  }
  if (failed(verify(*module)))
    return diagnostics.error(path + ": the model does not verify");
  auto entry = findEntry(*module,
                         options.mode == CompileMode::Generate ? StringRef("prefill")
                                                               : StringRef(options.entry),
                         path);
  if (!entry)
    return entry.takeError();

  // A CPU generator keeps its weights as decoding streams them, [out, in],
  // in the model's type unless told another.
  std::string weightType = options.weightType;
  if (weightType.empty() && ((options.mode == CompileMode::Generate &&
                              options.target == Target::Host && !options.emulateGpuKernels) ||
                             !ggmlStorage.empty()))
    weightType = options.model.elementType == ElementType::BF16  ? "bf16"
                 : options.model.elementType == ElementType::F16 ? "f16"
                                                                 : "f32";
  if (!weightType.empty()) {
    PassManager pm(&context);
    XfmrQuantizeWeightsOptions quantize{weightType, options.weightGroupSize,
                                        options.quantizeEmbeddings, options.weightScaleType,
                                        options.weightMins};
    quantize.perWeight.assign(ggmlStorage.begin(), ggmlStorage.end());
    pm.addPass(createXfmrQuantizeWeights(quantize));
    if (failed(pm.run(*module)))
      return diagnostics.error(path + ": cannot store the weights as " + weightType);
  }
  // A batch's decode step and one of fewer rows compute a row alike where
  // their products take the same kernels: the CPU's dot products of weights
  // stored [out, in] (xfmr::kSmallProductRows). Weights [in, out] take other
  // kernels by the number of rows, and so do the GPU's products.
  for (StringRef name : {kRowDecodeEntry, kGroupDecodeEntry})
    if (auto rows = module->lookupSymbol<func::FuncOp>(name))
      if (options.target != Target::Host || options.emulateGpuKernels || !readsWeightsOutIn(rows))
        rows.erase();

  // Weight initialisation is read off the model as written, before the
  // transformations below rewrite the ops that reveal it.
  llvm::StringMap<std::string> inits;
  for (BlockArgument arg : entry->getArguments())
    if (auto name = entry->getArgAttrOfType<StringAttr>(arg.getArgNumber(), "xfmr.param"))
      inits[name.getValue()] = initOf(arg);

  SmallVector<std::pair<func::FuncOp, StringRef>> described = {{*entry, "forward"}};
  if (options.mode == CompileMode::Generate) {
    auto prefill = module->lookupSymbol<func::FuncOp>("prefill");
    auto decode = module->lookupSymbol<func::FuncOp>("decode");
    if (!prefill || !decode)
      return llvm::createStringError(path + ": generation needs the entries @prefill and "
                                            "@decode (a checkpoint or config builds them)");
    described = {{prefill, "prefill"}, {decode, "decode"}};
    if (auto encode = module->lookupSymbol<func::FuncOp>("encode"))
      described.insert(described.begin(), {encode, "encode"});
    for (StringRef name : {kRowPrefillEntry, kRowDecodeEntry, kGroupDecodeEntry})
      if (auto row = module->lookupSymbol<func::FuncOp>(name))
        described.push_back({row, name});
  } else if (options.mode != CompileMode::Inference) {
    func::FuncOp evaluation =
        options.mode == CompileMode::Train ? buildEvaluation(*entry) : func::FuncOp();
    PassManager pm(&context);
    if (options.mode == CompileMode::Train) {
      const TrainOptions &t = options.train;
      XfmrTrainStepOptions step;
      step.function = entry->getName().str();
      step.optimizer = t.optimizer;
      step.learningRate = t.learningRate;
      step.warmupSteps = t.warmupSteps;
      step.decaySteps = t.steps;
      step.minLrRatio = t.minLrRatio;
      step.beta1 = t.beta1;
      step.beta2 = t.beta2;
      step.epsilon = t.epsilon;
      step.weightDecay = t.weightDecay;
      step.momentum = t.momentum;
      step.maxGradNorm = t.maxGradNorm;
      step.lossScale = t.lossScale;
      step.lossScaleGrowthInterval = t.lossScaleGrowthInterval;
      // The trainer runs on the host CPU, under mpirun or alone.
      step.dataParallel = options.target == Target::Host;
      buildTrainStepPipeline(pm, options.fusion, step, options.gradientInputs);
    } else {
      buildGradientPipeline(pm, options.fusion, entry->getName(), options.gradientInputs);
    }
    std::string name = entry->getName().str();
    if (failed(pm.run(*module)))
      return diagnostics.error(path + ": cannot differentiate @" + name);
    if (options.mode == CompileMode::Train)
      described = {{(*module).lookupSymbol<func::FuncOp>("train_step"), "train_step"},
                   {evaluation, "evaluate"}};
    else
      described = {{(*module).lookupSymbol<func::FuncOp>(name + "_grad"), "forward"}};
  }
  for (auto [func, symbol] : described) {
    ModelSignature signature;
    signature.symbol = symbol.str();
    static_cast<ModelInfo &>(signature.manifest) = info;
    if (symbol == "train_step") {
      const TrainOptions &t = options.train;
      signature.manifest.optimizer = t.optimizer;
      signature.manifest.training = {{"lr", t.learningRate},
                                     {"warmup_steps", t.warmupSteps},
                                     {"steps", t.steps},
                                     {"min_lr_ratio", t.minLrRatio},
                                     {"weight_decay", t.weightDecay},
                                     {"max_grad_norm", t.maxGradNorm},
                                     {"loss_scale", t.lossScale}};
    }
    if (failed(describeEntry(func, inits, signature.manifest)))
      return diagnostics.error(path + ": unusable entry function");
    entries.push_back(std::move(signature));
  }
  return std::move(module);
}

/// `text` as a C string literal.
static std::string cString(StringRef text) {
  std::string literal = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      literal += '\\';
    if (llvm::isPrint(c)) {
      literal += c;
      continue;
    }
    literal += '\\';
    for (int shift : {6, 3, 0})
      literal += static_cast<char>('0' + ((static_cast<unsigned char>(c) >> shift) & 7));
  }
  return literal + "\"";
}

static std::string cIdentifier(StringRef name) {
  std::string id;
  for (char c : name)
    id += llvm::isAlnum(c) ? c : '_';
  if (id.empty() || llvm::isDigit(id.front()))
    id.insert(id.begin(), '_');
  return id;
}

/// The declarations of one entry: `<prefix>_<symbol>`, its packed form, its
/// manifest and argument tables, named after `base` (the prefix itself for
/// the forward entry, `<prefix>_<symbol>` for the others).
static void emitEntryDeclarations(llvm::raw_ostream &os, const ModelSignature &signature,
                                  StringRef prefix) {
  std::string function = (prefix + "_" + signature.symbol).str();
  std::string base = signature.symbol == "forward" ? prefix.str() : function;
  std::string upper = StringRef(cIdentifier(base)).upper();
  size_t counts[4] = {0, 0, 0, 0};
  const std::vector<rt::ArgSpec> &arguments = signature.manifest.args;
  for (const rt::ArgSpec &argument : arguments)
    ++counts[static_cast<int>(argument.kind)];
  os << "#define " << upper << "_NUM_INPUTS " << counts[0] << "\n#define " << upper
     << "_NUM_PARAMS " << counts[1] << "\n#define " << upper << "_NUM_OUTPUTS " << counts[2]
     << "\n";
  if (counts[3])
    os << "#define " << upper << "_NUM_STATES " << counts[3] << "\n";
  os << "\nvoid " << function << "(";
  auto cType = [](const rt::ArgSpec &argument) -> std::string {
    std::string type = argument.dtype == XFMR_DTYPE_F32    ? "float"
                       : argument.dtype == XFMR_DTYPE_F64  ? "double"
                       : argument.dtype == XFMR_DTYPE_I64  ? "int64_t"
                       : argument.dtype == XFMR_DTYPE_I32  ? "int32_t"
                       : argument.dtype == XFMR_DTYPE_I8   ? "int8_t"
                       : argument.dtype == XFMR_DTYPE_BOOL ? "uint8_t"
                                                           : "uint16_t";
    return argument.kind == rt::ArgSpec::Kind::Output ? type + " *" : "const " + type + " *";
  };
  static constexpr const char *kinds[] = {"input", "weight", "output", "state"};
  for (auto [index, argument] : llvm::enumerate(arguments)) {
    os << (index ? ",\n    " : "\n    ") << cType(argument) << cIdentifier(argument.name) << " /* "
       << kinds[static_cast<int>(argument.kind)] << " "
       << cString(StringRef(argument.name).contains("*/") ? "?" : argument.name) << " "
       << xfmr_dtype_name(argument.dtype) << " [";
    llvm::interleaveComma(argument.shape, os);
    os << "]";
    if (argument.vocabSize)
      os << ", ids in [0, " << argument.vocabSize << ")";
    if (!argument.updates.empty())
      os << ", may be the buffer of "
         << cString(StringRef(argument.updates).contains("*/") ? "?" : argument.updates);
    os << " */";
  }
  os << ");\n\n";

  // Argument tables, so a caller can fill `args` of the packed call in a
  // loop (load weights by name, size buffers by shape).
  size_t maxRank = 1;
  for (const rt::ArgSpec &argument : arguments)
    maxRank = std::max(maxRank, argument.shape.size());
  os << "#define " << upper << "_NUM_ARGS " << arguments.size() << "\n"
     << "#define " << upper << "_MAX_RANK " << maxRank << "\n"
     << "enum { " << upper << "_INPUT = 0, " << upper << "_WEIGHT = 1, " << upper << "_OUTPUT = 2"
     << (counts[3] ? ", " + upper + "_STATE = 3" : "") << " };\n"
     << "static const char *const " << base << "_arg_names[] = {";
  for (auto [index, argument] : llvm::enumerate(arguments))
    os << (index ? ", " : "") << cString(argument.name);
  os << "};\nstatic const int " << base << "_arg_kinds[] = {";
  for (auto [index, argument] : llvm::enumerate(arguments))
    os << (index ? ", " : "") << static_cast<int>(argument.kind);
  os << "};\n/* Element types as xfmr_dtype values (xfmr-rt/xfmr_runtime.h). */\n"
     << "static const int " << base << "_arg_dtypes[] = {";
  for (auto [index, argument] : llvm::enumerate(arguments))
    os << (index ? ", " : "") << static_cast<int>(argument.dtype);
  os << "};\nstatic const int " << base << "_arg_ranks[] = {";
  for (auto [index, argument] : llvm::enumerate(arguments))
    os << (index ? ", " : "") << argument.shape.size();
  os << "};\nstatic const int64_t " << base << "_arg_shapes[][" << maxRank << "] = {";
  for (auto [index, argument] : llvm::enumerate(arguments)) {
    os << (index ? ", {" : "{");
    llvm::interleaveComma(argument.shape, os);
    if (argument.shape.empty())
      os << "0";
    os << "}";
  }
  os << "};\n\n"
     << "/* The same call with args[i] pointing at the i-th argument above. */\n"
     << "void " << function << "_packed(void **args);\n\n"
     << "/* JSON description of the arguments: kind, name, dtype, shape, vocab_size. */\n"
     << "extern const char " << base << "_manifest[];\n\n";
}

std::string xfmr::buildHeader(ArrayRef<ModelSignature> entries, StringRef prefix,
                              StringRef source) {
  std::string upper = StringRef(cIdentifier(prefix)).upper();
  std::string text;
  llvm::raw_string_ostream os(text);
  const ModelInfo &info = entries.front().manifest;
  os << "/* Generated by xfmrc from " << source << " ("
     << (info.modelType.empty() ? "xfmr IR" : info.modelType) << "). Do not edit.\n"
     << " *\n"
     << " * C ABI: every argument is a pointer to a dense, row-major buffer of the\n"
     << " * listed element type and shape (64-byte alignment recommended). Inputs,\n"
     << " * weights and states are only read; the caller owns the output buffers,\n"
     << " * which the call overwrites (an output marked 'may be the buffer of' X may\n"
     << " * be given X's own buffer, updating it in place). Calls are reentrant; each\n"
     << " * uses the OpenMP thread pool. Weights load by name from a .safetensors\n"
     << " * file with xfmr_safetensors_read() (xfmr-rt/xfmr_runtime.h); link with\n"
     << " * libxfmr_runtime.a and -lomp. */\n"
     << "#ifndef " << upper << "_H\n#define " << upper << "_H\n\n"
     << "#include <stdint.h>\n\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
  for (const ModelSignature &signature : entries)
    emitEntryDeclarations(os, signature, prefix);
  os << "#ifdef __cplusplus\n}\n#endif\n\n#endif /* " << upper << "_H */\n";
  return text;
}
