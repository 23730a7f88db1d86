//===- Weights.cpp - a model's weights: one file or a checkpoint ---------===//
//
// Hugging Face's `save_pretrained` writes `model.safetensors`, or, past its
// shard size, `model.safetensors.index.json` ({"weight_map": {tensor: shard
// file}}) and the shards beside it. Each shard is opened and validated as a
// safetensors file; the index must name shards inside the directory and
// tensors they hold. A .gguf file is read through GgufModel, as the
// checkpoint it was converted from.
//
//===----------------------------------------------------------------------===//

#include "xfmr-rt/xfmr_runtime.h"

#include "CommandLine.h"
#include "Json.h"
#include "RuntimeSupport.h"
#include "Weights/Gguf.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace xfmr::rt;

namespace {

using SafetensorsPtr = std::unique_ptr<xfmr_safetensors, void (*)(xfmr_safetensors *)>;

bool isDirectory(const std::string &path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

bool isFile(const std::string &path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

std::string directoryOf(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

} // namespace

struct xfmr_weights {
  std::vector<SafetensorsPtr> files;
  std::unique_ptr<GgufModel> gguf;
  std::map<std::string, const GgufTensor *> ggufTensors;
  /// Every tensor: the file holding it, in the order of the files.
  std::map<std::string, const xfmr_safetensors *> owner;
  std::vector<std::string> names;

  /// Opens `path` as one more file; "" or an error message.
  std::string add(const std::string &path, char *err, size_t errSize) {
    xfmr_safetensors *file = xfmr_safetensors_open(path.c_str(), err, errSize);
    if (!file)
      return err;
    files.emplace_back(file, xfmr_safetensors_close);
    return "";
  }

  /// Reads the index at `indexPath` and opens the shards it names.
  std::string addIndex(const std::string &indexPath, char *err, size_t errSize) {
    std::string prefix = "checkpoint index '" + indexPath + "': ";
    std::ifstream in(indexPath);
    if (!in)
      return prefix + "cannot open: " + std::strerror(errno);
    std::stringstream text;
    text << in.rdbuf();
    std::string jsonError;
    std::optional<Json> index = parseJson(text.str(), jsonError);
    if (!index || !index->is_object())
      return prefix + (index ? "not a JSON object" : "invalid JSON: " + jsonError);
    const Json *map = field(*index, "weight_map");
    if (!map || !map->is_object())
      return prefix + "no \"weight_map\" object";
    std::string directory = directoryOf(indexPath);
    std::map<std::string, const xfmr_safetensors *> shards;
    for (const auto &[tensor, shard] : members(*map)) {
      if (!shard.is_string() || textOf(shard).empty() ||
          textOf(shard).find('/') != std::string::npos || textOf(shard) == "." ||
          textOf(shard) == "..")
        return prefix + "tensor '" + tensor +
               "': the shard must be a file name in the checkpoint's directory";
      auto it = shards.find(textOf(shard));
      if (it == shards.end()) {
        std::string problem = add(directory + "/" + textOf(shard), err, errSize);
        if (!problem.empty())
          return problem;
        it = shards.emplace(textOf(shard), files.back().get()).first;
      }
      xfmr_tensor_info info;
      if (xfmr_safetensors_find(it->second, tensor.c_str(), &info))
        return prefix + "tensor '" + tensor + "' is not in its shard '" + textOf(shard) + "'";
      if (!owner.emplace(tensor, it->second).second)
        return prefix + "tensor '" + tensor + "' is listed twice";
      names.push_back(tensor);
    }
    return "";
  }

  /// Indexes the tensors of files opened without an index.
  std::string indexFiles() {
    for (const SafetensorsPtr &file : files)
      for (size_t i = 0, e = xfmr_safetensors_count(file.get()); i < e; ++i) {
        xfmr_tensor_info info;
        xfmr_safetensors_get(file.get(), i, &info);
        if (!owner.emplace(info.name, file.get()).second)
          return std::string("tensor '") + info.name + "' appears in two files";
        names.push_back(info.name);
      }
    return "";
  }

  /// Opens the GGUF file at `path`; "" or an error message.
  std::string addGguf(const std::string &path) {
    try {
      gguf = std::make_unique<GgufModel>(path);
    } catch (const Failure &failure) {
      return failure.message;
    } catch (const std::bad_alloc &) {
      return "GGUF file '" + path + "': out of memory reading its metadata";
    }
    for (const GgufTensor &tensor : gguf->tensors()) {
      ggufTensors[tensor.name] = &tensor;
      names.push_back(tensor.name);
    }
    return "";
  }

  const xfmr_safetensors *find(const char *name) const {
    auto it = owner.find(name);
    return it == owner.end() ? nullptr : it->second;
  }
};

xfmr_weights *xfmr_weights_open(const char *path, char *err, size_t errSize) {
  auto weights = std::make_unique<xfmr_weights>();
  std::string location = path;
  std::string problem;
  if (isDirectory(location)) {
    std::string single = location + "/model.safetensors";
    std::string index = location + "/model.safetensors.index.json";
    if (isFile(single)) {
      problem = weights->add(single, err, errSize);
      if (problem.empty())
        problem = weights->indexFiles();
    } else if (isFile(index)) {
      problem = weights->addIndex(index, err, errSize);
    } else {
      problem = "checkpoint directory '" + location +
                "': no model.safetensors or model.safetensors.index.json (PyTorch .bin "
                "checkpoints are not read: save with safe_serialization=True)";
    }
  } else if (endsWith(location, ".gguf")) {
    problem = weights->addGguf(location);
  } else if (endsWith(location, ".json")) {
    problem = weights->addIndex(location, err, errSize);
  } else {
    problem = weights->add(location, err, errSize);
    if (problem.empty())
      problem = weights->indexFiles();
  }
  if (!problem.empty()) {
    setError(err, errSize, problem);
    return nullptr;
  }
  return weights.release();
}

void xfmr_weights_close(xfmr_weights *weights) { delete weights; }

size_t xfmr_weights_count(const xfmr_weights *weights) { return weights->names.size(); }

int xfmr_weights_get(const xfmr_weights *weights, size_t index, xfmr_tensor_info *info) {
  if (index >= weights->names.size())
    return 1;
  return xfmr_weights_find(weights, weights->names[index].c_str(), info);
}

int xfmr_weights_find(const xfmr_weights *weights, const char *name, xfmr_tensor_info *info) {
  if (weights->gguf) {
    auto it = weights->ggufTensors.find(name);
    if (it == weights->ggufTensors.end())
      return 1;
    const GgufTensor &tensor = *it->second;
    *info = {tensor.name.c_str(), tensor.dtype, static_cast<int32_t>(tensor.shape.size()),
             tensor.shape.data(), tensor.data,  tensor.bytes};
    return 0;
  }
  const xfmr_safetensors *file = weights->find(name);
  return file ? xfmr_safetensors_find(file, name, info) : 1;
}

/// xfmr_weights_read of a GGUF file's tensor: ggml blocks decoded to f32
/// first.
static int readGguf(const xfmr_weights *weights, const char *name, xfmr_dtype dtype, int32_t rank,
                    const int64_t *shape, void *dst, char *err, size_t errSize) {
  std::vector<int64_t> expected(shape, shape + rank);
  std::string prefix = "'" + weights->gguf->file().path() + "': ";
  auto it = weights->ggufTensors.find(name);
  if (it == weights->ggufTensors.end()) {
    setError(err, errSize,
             prefix + "no tensor '" + name + "' (the model needs " + xfmr_dtype_name(dtype) + " " +
                 shapeToString(expected) + ")");
    return 1;
  }
  const GgufTensor &tensor = *it->second;
  if (tensor.shape != expected) {
    setError(err, errSize,
             prefix + "tensor '" + name + "' is " + xfmr_dtype_name(tensor.dtype) + " " +
                 shapeToString(tensor.shape) + ", the model needs " + xfmr_dtype_name(dtype) + " " +
                 shapeToString(expected));
    return 1;
  }
  size_t count = elementCount(expected);
  const void *source = tensor.data;
  xfmr_dtype sourceType = tensor.dtype;
  std::vector<float> decoded;
  if (isGgmlBlockType(tensor.dtype)) {
    decoded.resize(dtype == XFMR_DTYPE_F32 ? 0 : count);
    float *out = decoded.empty() ? static_cast<float *>(dst) : decoded.data();
    dequantizeBlocks(tensor.dtype, tensor.data, out, static_cast<int64_t>(count));
    if (decoded.empty())
      return 0;
    source = decoded.data();
    sourceType = XFMR_DTYPE_F32;
  }
  std::string problem = convertElements(sourceType, source, count, dtype, dst);
  if (!problem.empty()) {
    setError(err, errSize, prefix + "tensor '" + name + "': " + problem);
    return 1;
  }
  return 0;
}

int xfmr_weights_read(const xfmr_weights *weights, const char *name, xfmr_dtype dtype, int32_t rank,
                      const int64_t *shape, void *dst, char *err, size_t errSize) {
  if (weights->gguf)
    return readGguf(weights, name, dtype, rank, shape, dst, err, errSize);
  const xfmr_safetensors *file = weights->find(name);
  if (!file) {
    std::vector<int64_t> expected(shape, shape + rank);
    setError(err, errSize,
             std::string("no tensor '") + name + "' (the model needs " + xfmr_dtype_name(dtype) +
                 " " + shapeToString(expected) + ")");
    return 1;
  }
  return xfmr_safetensors_read(file, name, dtype, rank, shape, dst, err, errSize);
}

const char *xfmr_weights_config_json(const xfmr_weights *weights) {
  return weights->gguf ? weights->gguf->configJson().c_str() : nullptr;
}

void xfmr_weights_release(const xfmr_weights *weights, const char *name) {
  xfmr_tensor_info info;
  if (xfmr_weights_find(weights, name, &info))
    return;
  if (weights->gguf && !weights->ggufTensors.at(name)->inMapping)
    return; // memory of the model's own, which dropping its pages would zero
  uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t begin = (reinterpret_cast<uintptr_t>(info.data) + page - 1) & ~(page - 1);
  uintptr_t end = (reinterpret_cast<uintptr_t>(info.data) + info.num_bytes) & ~(page - 1);
  if (end > begin)
    madvise(reinterpret_cast<void *>(begin), end - begin, MADV_DONTNEED);
}
