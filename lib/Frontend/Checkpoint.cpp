//===- Checkpoint.cpp - model descriptions on disk ------------------------===//
//
// A config.json alone, a llama.cpp .gguf file (read by the runtime as the
// checkpoint it was converted from), or a checkpoint directory: config.json, the
// safetensors weights (one file or shards; read with the runtime's reader,
// which the executables use too) and, for sentence-transformers, modules.json
// naming the Transformer, Pooling and Normalize modules that turn token
// vectors into a sentence embedding.
//
//===----------------------------------------------------------------------===//

#include "FrontendSupport.h"
#include "xfmr/Frontend/ModelBuilder.h"

#include "xfmr-rt/xfmr_runtime.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace xfmr;
namespace json = llvm::json;

namespace {

llvm::Expected<std::string> readText(llvm::StringRef path) {
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!file)
    return llvm::createStringError(path + ": cannot read: " + file.getError().message());
  return (*file)->getBuffer().str();
}

/// Parses the JSON file at `path`; `what` describes the expected value.
llvm::Expected<json::Value> readJson(llvm::StringRef path) {
  llvm::Expected<std::string> text = readText(path);
  if (!text)
    return text.takeError();
  return frontend::parseJsonFile(path, *text);
}

std::string join(llvm::StringRef directory, llvm::StringRef name) {
  llvm::SmallString<256> path(directory);
  llvm::sys::path::append(path, name);
  return std::string(path);
}

/// The pooling mode of a sentence-transformers Pooling config: today's
/// "pooling_mode" (a name, or a list of names whose vectors are
/// concatenated), or the older "pooling_mode_*_tokens" flags.
llvm::Expected<std::string> readPooling(llvm::StringRef path) {
  llvm::Expected<json::Value> config = readJson(path);
  if (!config)
    return config.takeError();
  const json::Object *object = config->getAsObject();
  if (!object)
    return llvm::createStringError(path + ": expected a JSON object");
  static constexpr std::pair<llvm::StringLiteral, llvm::StringLiteral> kLegacyFlags[] = {
      {"pooling_mode_cls_token", "cls"},
      {"pooling_mode_max_tokens", "max"},
      {"pooling_mode_mean_tokens", "mean"},
      {"pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len_tokens"},
      {"pooling_mode_weightedmean_tokens", "weightedmean"},
      {"pooling_mode_lasttoken", "lasttoken"},
  };
  llvm::SmallVector<std::string> modes;
  llvm::StringRef key = "pooling_mode";
  if (const json::Value *mode = object->get(key)) {
    if (std::optional<llvm::StringRef> name = mode->getAsString())
      modes.push_back(name->str());
    else if (const json::Array *names = mode->getAsArray())
      for (const json::Value &entry : *names)
        modes.push_back(entry.getAsString().value_or("").str());
  } else {
    for (const auto &[flag, name] : kLegacyFlags)
      if (object->getBoolean(flag).value_or(false)) {
        modes.push_back(name.str());
        key = flag;
      }
  }
  if (modes.empty())
    return llvm::createStringError(path + ": no pooling mode ('pooling_mode')");
  if (modes.size() > 1)
    return llvm::createStringError(path + ": key '" + key +
                                   "': several pooling modes "
                                   "(concatenated embeddings) are not supported");
  static constexpr std::pair<llvm::StringLiteral, llvm::StringLiteral> kModes[] = {
      {"cls", "cls"}, {"mean", "mean"}, {"max", "max"}, {"mean_sqrt_len_tokens", "mean_sqrt_len"}};
  for (const auto &[name, mode] : kModes)
    if (modes.front() == name)
      return mode.str();
  return llvm::createStringError(path + ": key '" + key + "': unsupported pooling mode \"" +
                                 modes.front() +
                                 "\" (cls, mean, max and mean_sqrt_len_tokens "
                                 "are supported)");
}

/// Reads modules.json: the Transformer module's directory, and the pooling
/// and normalization that follow it.
llvm::Error readSentenceTransformers(llvm::StringRef directory, ModelSource &source,
                                     std::string &transformerDirectory) {
  std::string path = join(directory, "modules.json");
  llvm::Expected<json::Value> modules = readJson(path);
  if (!modules)
    return modules.takeError();
  const json::Array *list = modules->getAsArray();
  if (!list)
    return llvm::createStringError(path + ": expected an array of modules");
  bool sawTransformer = false;
  for (const json::Value &module : *list) {
    const json::Object *object = module.getAsObject();
    std::optional<llvm::StringRef> type = object ? object->getString("type") : std::nullopt;
    std::optional<llvm::StringRef> where = object ? object->getString("path") : std::nullopt;
    if (!type || !where)
      return llvm::createStringError(path + ": each module needs a string 'type' and 'path'");
    if (where->contains("..") || llvm::sys::path::is_absolute(*where))
      return llvm::createStringError(path + ": module path '" + *where +
                                     "' must lie inside the checkpoint");
    // The module's class; its package moved between sentence-transformers
    // versions (sentence_transformers.models.Pooling, ...modules.pooling.Pooling).
    llvm::StringRef kind = type->rsplit('.').second;
    if (kind == "Transformer") {
      transformerDirectory = join(directory, *where);
      sawTransformer = true;
    } else if (kind == "Pooling") {
      llvm::Expected<std::string> mode = readPooling(join(join(directory, *where), "config.json"));
      if (!mode)
        return mode.takeError();
      source.sentencePooling = *mode;
    } else if (kind == "Normalize") {
      source.sentenceNormalize = true;
    } else {
      return llvm::createStringError(path + ": unsupported module type '" + *type +
                                     "' (Transformer, Pooling and Normalize are supported)");
    }
  }
  if (!sawTransformer || source.sentencePooling.empty())
    return llvm::createStringError(path + ": expected a Transformer and a Pooling module");
  return llvm::Error::success();
}

} // namespace

/// Adds the tensors of the weights at `path` (a checkpoint directory or a
/// .gguf file) to `source`.
static llvm::Error readTensors(const std::string &path, ModelSource &source) {
  char err[512];
  xfmr_weights *weights = xfmr_weights_open(path.c_str(), err, sizeof(err));
  if (!weights)
    return llvm::createStringError(err);
  for (size_t i = 0, e = xfmr_weights_count(weights); i < e; ++i) {
    xfmr_tensor_info info;
    xfmr_weights_get(weights, i, &info);
    CheckpointTensor &tensor = source.tensors[info.name];
    tensor = {xfmr_dtype_name(info.dtype), std::vector<int64_t>(info.shape, info.shape + info.rank),
              ""};
    int64_t group;
    int mins, bits;
    xfmr_dtype scales;
    if (!xfmr_dtype_integer_groups(info.dtype, &group, &mins, &bits, &scales))
      tensor.integerStorage = (bits == 4 ? "int4:" : "int8:") + std::to_string(group) +
                              (mins ? ":mins" : "") + (scales == XFMR_DTYPE_F16 ? ":f16" : ":f32");
  }
  if (const char *config = xfmr_weights_config_json(weights))
    source.configText = config;
  xfmr_weights_close(weights);
  return llvm::Error::success();
}

llvm::Expected<ModelSource> xfmr::readModelSource(llvm::StringRef path) {
  ModelSource source;
  if (path.ends_with(".gguf")) {
    // llama.cpp's file: the config comes from its metadata.
    source.configPath = source.directory = path.str();
    source.linearWeightsOutIn = true;
    if (llvm::Error error = readTensors(source.directory, source))
      return std::move(error);
    return std::move(source);
  }
  if (!llvm::sys::fs::is_directory(path)) {
    llvm::Expected<std::string> text = readText(path);
    if (!text)
      return text.takeError();
    source.configPath = path.str();
    source.configText = std::move(*text);
    return std::move(source);
  }

  std::string directory = path.str();
  if (llvm::sys::fs::exists(join(path, "modules.json")))
    if (llvm::Error error = readSentenceTransformers(path, source, directory))
      return std::move(error);
  source.directory = directory;
  source.configPath = join(directory, "config.json");
  if (!llvm::sys::fs::exists(source.configPath))
    return llvm::createStringError(directory + ": not a model checkpoint (no config.json)");
  llvm::Expected<std::string> text = readText(source.configPath);
  if (!text)
    return text.takeError();
  source.configText = std::move(*text);
  std::string generationConfig = join(directory, "generation_config.json");
  if (llvm::sys::fs::exists(generationConfig)) {
    llvm::Expected<std::string> generation = readText(generationConfig);
    if (!generation)
      return generation.takeError();
    source.generationConfigPath = generationConfig;
    source.generationConfigText = std::move(*generation);
  }

  if (llvm::Error error = readTensors(directory, source))
    return std::move(error);
  return std::move(source);
}
