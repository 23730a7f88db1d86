//===- ModelSignature.cpp - load a model and describe its ABI ---*- C++ -*-===//

#include "xfmr/Driver/Compiler.h"

#include "xfmr/Dialect/XfmrOps.h"
#include "xfmr/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;
using namespace xfmr;

char LocatedDiagnosticsError::ID = 0;

namespace {

std::string dtypeName(Type type) {
  if (type.isF32())
    return "F32";
  if (type.isF64())
    return "F64";
  if (type.isF16())
    return "F16";
  if (type.isBF16())
    return "BF16";
  if (type.isInteger(64))
    return "I64";
  if (type.isInteger(32))
    return "I32";
  if (type.isInteger(1))
    return "BOOL";
  return "";
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

LogicalResult describeEntry(func::FuncOp func, ModelSignature &signature) {
  llvm::StringSet<> names;
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
    if (static_cast<bool>(input) == static_cast<bool>(param))
      return signatureError(func, "argument " + Twine(index) +
                                      " needs exactly one of the attributes xfmr.input = "
                                      "\"<name>\" or xfmr.param = \"<weight name>\"");
    if (!type || !type.hasStaticShape() || dtypeName(type.getElementType()).empty())
      return signatureError(func, "argument " + Twine(index) +
                                      " must be a statically shaped tensor of f32, f64, f16, "
                                      "bf16, i64, i32 or i1");
    ModelArgument argument;
    argument.kind = input ? ModelArgument::Kind::Input : ModelArgument::Kind::Param;
    argument.name = (input ? input : param).getValue().str();
    argument.dtype = dtypeName(type.getElementType());
    argument.shape.assign(type.getShape().begin(), type.getShape().end());
    if (param && !type.getElementType().isF32())
      return signatureError(func, "weight '" + argument.name + "' must be f32");
    if (input)
      argument.vocabSize = vocabularyOf(arg);
    if (failed(addName(argument.name)))
      return failure();
    signature.arguments.push_back(std::move(argument));
  }
  for (auto [index, type] : llvm::enumerate(func.getResultTypes())) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || !tensor.hasStaticShape() || dtypeName(tensor.getElementType()).empty())
      return signatureError(func, "result " + Twine(index) +
                                      " must be a statically shaped tensor");
    auto name = func.getResultAttrOfType<StringAttr>(index, "xfmr.output");
    ModelArgument argument;
    argument.kind = ModelArgument::Kind::Output;
    argument.name = name ? name.getValue().str() : "output" + std::to_string(index);
    argument.dtype = dtypeName(tensor.getElementType());
    argument.shape.assign(tensor.getShape().begin(), tensor.getShape().end());
    if (failed(addName(argument.name)))
      return failure();
    signature.arguments.push_back(std::move(argument));
  }
  if (func.getNumResults() == 0)
    return signatureError(func, "the entry function returns nothing");
  signature.entryName = func.getName().str();
  return success();
}

/// Prints diagnostics as `file:line:col: error: ...` while parsing and
/// verifying, and collects them into one error.
class CollectingDiagnostics {
public:
  CollectingDiagnostics(MLIRContext &context, llvm::SourceMgr &sourceMgr)
      : handler(sourceMgr, &context, stream) {}
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
  SourceMgrDiagnosticHandler handler;
};

} // namespace

llvm::Expected<OwningOpRef<ModuleOp>>
xfmr::loadModel(MLIRContext &context, const CompileOptions &options, ModelSignature &signature) {
  StringRef path = options.inputPath;
  auto file = llvm::MemoryBuffer::getFileOrSTDIN(path, /*IsText=*/true);
  if (!file)
    return llvm::createStringError(path + ": cannot read: " + file.getError().message());

  OwningOpRef<ModuleOp> module;
  llvm::SourceMgr sourceMgr;
  StringRef contents = (*file)->getBuffer();
  CollectingDiagnostics diagnostics(context, sourceMgr);
  if (llvm::sys::path::extension(path) == ".json") {
    ModelShape shape = options.shape;
    shape.training = options.mode != CompileMode::Inference;
    auto built = buildModelFromConfig(context, path, contents, shape, signature.info);
    if (!built)
      return built.takeError();
    module = std::move(*built);
  } else if (llvm::sys::path::extension(path) == ".mlir") {
    sourceMgr.AddNewSourceBuffer(std::move(*file), llvm::SMLoc());
    module = parseSourceFile<ModuleOp>(sourceMgr, &context);
    if (!module)
      return diagnostics.error(path + ": cannot parse");
    if (auto type = (*module)->getAttrOfType<StringAttr>("xfmr.model_type"))
      signature.info.modelType = type.getValue().str();
  } else {
    return llvm::createStringError(path + ": unknown model file type (expected .json or .mlir)");
  }
  if (failed(verify(*module)))
    return diagnostics.error(path + ": the model does not verify");
  auto entry = findEntry(*module, options.entry, path);
  if (!entry)
    return entry.takeError();
  if (options.mode == CompileMode::Gradient) {
    PassManager pm(&context);
    buildGradientPipeline(pm, options.pipeline, entry->getName(), options.gradientInputs);
    if (failed(pm.run(*module)))
      return diagnostics.error(path + ": cannot differentiate @" + entry->getName());
    entry = (*module).lookupSymbol<func::FuncOp>((entry->getName() + "_grad").str());
  }
  if (failed(describeEntry(*entry, signature)))
    return diagnostics.error(path + ": unusable entry function");
  return std::move(module);
}

std::string xfmr::buildManifest(const ModelSignature &signature) {
  llvm::json::Array args;
  for (const ModelArgument &argument : signature.arguments) {
    static constexpr const char *kinds[] = {"input", "param", "output"};
    llvm::json::Object arg{{"kind", kinds[static_cast<int>(argument.kind)]},
                           {"name", argument.name},
                           {"dtype", argument.dtype},
                           {"shape", llvm::json::Array(argument.shape)}};
    if (argument.vocabSize)
      arg["vocab_size"] = argument.vocabSize;
    args.push_back(std::move(arg));
  }
  llvm::json::Object manifest{
      {"format", 1},
      {"model_type", signature.info.modelType},
      {"entry", signature.entryName},
      {"pad_token_id", signature.info.padTokenId},
      {"weight_prefixes", llvm::json::Array(signature.info.weightPrefixes)},
      {"args", std::move(args)}};
  std::string text;
  llvm::raw_string_ostream(text) << llvm::json::Value(std::move(manifest));
  return text;
}

/// The xfmr_dtype enumerator (xfmr-rt/xfmr_runtime.h) of a safetensors dtype.
static int dtypeEnum(StringRef dtype) {
  static constexpr StringLiteral order[] = {"F32", "F64", "F16", "BF16", "I64",
                                            "I32", "I16", "I8",  "U8",   "BOOL"};
  return llvm::find(order, dtype) - std::begin(order);
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

std::string xfmr::buildHeader(const ModelSignature &signature, StringRef prefix,
                              StringRef source) {
  std::string upper = StringRef(cIdentifier(prefix)).upper();
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "/* Generated by xfmrc from " << source << " ("
     << (signature.info.modelType.empty() ? "xfmr IR" : signature.info.modelType)
     << "). Do not edit.\n"
     << " *\n"
     << " * C ABI: every argument is a pointer to a dense, row-major buffer of the\n"
     << " * listed element type and shape (64-byte alignment recommended). Inputs and\n"
     << " * weights are only read; the caller owns the output buffers, which the call\n"
     << " * overwrites. Calls are reentrant; each uses the OpenMP thread pool. Weights\n"
     << " * load by name from a .safetensors file with xfmr_safetensors_read()\n"
     << " * (xfmr-rt/xfmr_runtime.h); link with libxfmr_runtime.a and -lomp. */\n"
     << "#ifndef " << upper << "_H\n#define " << upper << "_H\n\n"
     << "#include <stdint.h>\n\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
  size_t counts[3] = {0, 0, 0};
  for (const ModelArgument &argument : signature.arguments)
    ++counts[static_cast<int>(argument.kind)];
  os << "#define " << upper << "_NUM_INPUTS " << counts[0] << "\n#define " << upper
     << "_NUM_PARAMS " << counts[1] << "\n#define " << upper << "_NUM_OUTPUTS " << counts[2]
     << "\n\n";
  os << "void " << prefix << "_forward(";
  auto cType = [](const ModelArgument &argument) -> std::string {
    std::string base = argument.dtype == "F32"    ? "float"
                       : argument.dtype == "F64"  ? "double"
                       : argument.dtype == "I64"  ? "int64_t"
                       : argument.dtype == "I32"  ? "int32_t"
                       : argument.dtype == "BOOL" ? "uint8_t"
                                                  : "uint16_t";
    return argument.kind == ModelArgument::Kind::Output ? base + " *" : "const " + base + " *";
  };
  static constexpr const char *kinds[] = {"input", "weight", "output"};
  for (auto [index, argument] : llvm::enumerate(signature.arguments)) {
    os << (index ? ",\n    " : "\n    ") << cType(argument) << cIdentifier(argument.name)
       << " /* " << kinds[static_cast<int>(argument.kind)] << " "
       << cString(StringRef(argument.name).contains("*/") ? "?" : argument.name) << " "
       << argument.dtype << " [";
    llvm::interleaveComma(argument.shape, os);
    os << "]";
    if (argument.vocabSize)
      os << ", ids in [0, " << argument.vocabSize << ")";
    os << " */";
  }
  os << ");\n\n";

  // Argument tables, so a caller can fill `args` of the packed call in a
  // loop (load weights by name, size buffers by shape).
  size_t maxRank = 1;
  for (const ModelArgument &argument : signature.arguments)
    maxRank = std::max(maxRank, argument.shape.size());
  os << "#define " << upper << "_NUM_ARGS " << signature.arguments.size() << "\n"
     << "#define " << upper << "_MAX_RANK " << maxRank << "\n"
     << "enum { " << upper << "_INPUT = 0, " << upper << "_WEIGHT = 1, " << upper
     << "_OUTPUT = 2 };\n"
     << "static const char *const " << prefix << "_arg_names[] = {";
  for (auto [index, argument] : llvm::enumerate(signature.arguments))
    os << (index ? ", " : "") << cString(argument.name);
  os << "};\nstatic const int " << prefix << "_arg_kinds[] = {";
  for (auto [index, argument] : llvm::enumerate(signature.arguments))
    os << (index ? ", " : "") << static_cast<int>(argument.kind);
  os << "};\n/* Element types as xfmr_dtype values (xfmr-rt/xfmr_runtime.h). */\n"
     << "static const int " << prefix << "_arg_dtypes[] = {";
  for (auto [index, argument] : llvm::enumerate(signature.arguments))
    os << (index ? ", " : "") << dtypeEnum(argument.dtype);
  os << "};\nstatic const int " << prefix << "_arg_ranks[] = {";
  for (auto [index, argument] : llvm::enumerate(signature.arguments))
    os << (index ? ", " : "") << argument.shape.size();
  os << "};\nstatic const int64_t " << prefix << "_arg_shapes[][" << maxRank << "] = {";
  for (auto [index, argument] : llvm::enumerate(signature.arguments)) {
    os << (index ? ", {" : "{");
    llvm::interleaveComma(argument.shape, os);
    if (argument.shape.empty())
      os << "0";
    os << "}";
  }
  os << "};\n\n"
     << "/* The same call with args[i] pointing at the i-th argument above. */\n"
     << "void " << prefix << "_forward_packed(void **args);\n\n"
     << "/* JSON description of the arguments: kind, name, dtype, shape, vocab_size. */\n"
     << "extern const char " << prefix << "_manifest[];\n\n"
     << "#ifdef __cplusplus\n}\n#endif\n\n#endif /* " << upper << "_H */\n";
  return text;
}
