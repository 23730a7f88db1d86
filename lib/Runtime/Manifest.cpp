//===- Manifest.cpp - what the runner and trainer share -------------------===//

#include "Manifest.h"

#include "Json.h"
#include "RuntimeSupport.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <malloc.h>
#include <sys/mman.h>
#include <optional>
#include <sstream>

extern "C" void omp_set_num_threads(int) __attribute__((weak));

using namespace xfmr::rt;

void xfmr::rt::fail(const std::string &message) { throw Failure(message); }

static std::optional<xfmr_dtype> parseDtype(const std::string &name) {
  for (int d = XFMR_DTYPE_F32; d <= XFMR_DTYPE_BOOL; ++d)
    if (name == xfmr_dtype_name(static_cast<xfmr_dtype>(d)))
      return static_cast<xfmr_dtype>(d);
  return std::nullopt;
}

const ArgSpec *Manifest::find(const std::string &name, ArgSpec::Kind kind) const {
  for (const ArgSpec &arg : args)
    if (arg.kind == kind && arg.name == name)
      return &arg;
  return nullptr;
}

Manifest xfmr::rt::parseManifest(const char *text) {
  std::string error;
  std::optional<JsonValue> json = parseJson(text, error);
  if (!json || !json->isObject())
    fail("corrupt model manifest: " + error);
  Manifest manifest;
  if (const JsonValue *type = json->get("model_type"))
    manifest.modelType = type->text;
  if (const JsonValue *pad = json->get("pad_token_id"))
    manifest.padTokenId = pad->asInt().value_or(0);
  if (const JsonValue *prefixes = json->get("weight_prefixes")) {
    manifest.weightPrefixes.clear();
    for (const JsonValue &prefix : prefixes->array)
      manifest.weightPrefixes.push_back(prefix.text);
  }
  if (const JsonValue *weights = json->get("default_weights"))
    manifest.defaultWeights = weights->text;
  if (const JsonValue *bos = json->get("bos_token_id"))
    manifest.bosTokenId = bos->asInt().value_or(-1);
  if (const JsonValue *start = json->get("decoder_start_token_id"))
    manifest.decoderStartTokenId = start->asInt().value_or(-1);
  if (const JsonValue *forced = json->get("forced_bos_token_id"))
    manifest.forcedBosTokenId = forced->asInt().value_or(-1);
  if (const JsonValue *forced = json->get("forced_eos_token_id"))
    manifest.forcedEosTokenId = forced->asInt().value_or(-1);
  if (const JsonValue *suppressed = json->get("suppress_tokens"))
    for (const JsonValue &id : suppressed->array)
      manifest.suppressedTokenIds.push_back(id.asInt().value_or(-1));
  if (const JsonValue *causal = json->get("causal_lm"))
    manifest.causalLanguageModel = causal->boolean;
  if (const JsonValue *eos = json->get("eos_token_id"))
    manifest.eosTokenId = eos->asInt().value_or(-1);
  if (const JsonValue *training = json->get("training"))
    for (const auto &[key, value] : training->object) {
      if (key == "optimizer")
        manifest.optimizer = value.text;
      else if (std::optional<double> number = value.asDouble())
        manifest.training[key] = *number;
    }
  const JsonValue *args = json->get("args");
  if (!args || !args->isArray())
    fail("corrupt model manifest: no \"args\"");
  for (const JsonValue &arg : args->array) {
    ArgSpec spec;
    const JsonValue *kind = arg.get("kind");
    const JsonValue *name = arg.get("name");
    const JsonValue *dtype = arg.get("dtype");
    const JsonValue *shape = arg.get("shape");
    if (!kind || !name || !dtype || !shape)
      fail("corrupt model manifest: argument without kind/name/dtype/shape");
    static constexpr std::pair<const char *, ArgSpec::Kind> kinds[] = {
        {"input", ArgSpec::Kind::Input},
        {"param", ArgSpec::Kind::Param},
        {"output", ArgSpec::Kind::Output},
        {"state", ArgSpec::Kind::State}};
    auto known = std::find_if(std::begin(kinds), std::end(kinds),
                              [&](const auto &k) { return kind->text == k.first; });
    if (known == std::end(kinds))
      fail("corrupt model manifest: argument kind '" + kind->text + "'");
    spec.kind = known->second;
    spec.name = name->text;
    std::optional<xfmr_dtype> parsed = parseDtype(dtype->text);
    if (!parsed)
      fail("corrupt model manifest: dtype " + dtype->text);
    spec.dtype = *parsed;
    for (const JsonValue &dim : shape->array)
      spec.shape.push_back(dim.asInt().value_or(0));
    if (const JsonValue *vocab = arg.get("vocab_size"))
      spec.vocabSize = vocab->asInt().value_or(0);
    if (const JsonValue *init = arg.get("init"))
      spec.init = init->text;
    if (const JsonValue *updates = arg.get("updates"))
      spec.updates = updates->text;
    if (const JsonValue *quantized = arg.get("quantized")) {
      const JsonValue *source = quantized->get("source"), *part = quantized->get("part");
      const JsonValue *axis = quantized->get("axis"), *group = quantized->get("group_size");
      if (!source || !part || !axis || !group || spec.shape.size() != 2 ||
          (part->text != "values" && part->text != "scales") ||
          spec.dtype != (part->text == "values" ? XFMR_DTYPE_I8 : XFMR_DTYPE_F32) ||
          !axis->asInt() || *axis->asInt() < 0 || *axis->asInt() > 1 || !group->asInt() ||
          *group->asInt() <= 0)
        fail("corrupt model manifest: quantized argument '" + spec.name + "'");
      spec.source = source->text;
      spec.quantizedPart = part->text;
      spec.axis = *axis->asInt();
      spec.groupSize = *group->asInt();
    }
    manifest.args.push_back(std::move(spec));
  }
  return manifest;
}

/// Buffers from this size on live on 2 MiB pages where the kernel allows:
/// streaming a model's weights through 4 KiB pages halves the read bandwidth
/// (a TLB miss every 4 KiB).
static constexpr size_t kHugePage = size_t(2) << 20;

Buffer::Buffer(size_t bytes) : size(bytes) {
  size_t alignment = bytes >= kHugePage ? kHugePage : 64;
  size_t rounded = std::max(alignment, (bytes + alignment - 1) / alignment * alignment);
  data = static_cast<uint8_t *>(std::aligned_alloc(alignment, rounded));
  if (!data)
    fail("out of memory allocating " + std::to_string(bytes) + " bytes");
  if (alignment == kHugePage)
    madvise(data, rounded, MADV_HUGEPAGE);
  std::memset(data, 0, size);
}

Buffer::~Buffer() { std::free(data); }

std::unique_ptr<Buffer> xfmr::rt::allocate(const ArgSpec &arg) {
  return std::make_unique<Buffer>(elementCount(arg.shape) * xfmr_dtype_size(arg.dtype));
}

/// Symmetric int8 quantization of the [rows, cols] `values` in groups of
/// `group` along dimension `axis`: each group's scale is its largest
/// magnitude over 127 (0 for a group of zeros), each value its nearest
/// multiple of the scale.
static std::pair<std::vector<int8_t>, std::vector<float>>
quantizeInt8(const float *values, const std::vector<int64_t> &shape, int64_t axis, int64_t group) {
  int64_t rows = shape[0], cols = shape[1];
  std::vector<int64_t> scaleShape = shape;
  scaleShape[axis] /= group;
  std::vector<int8_t> q(rows * cols);
  std::vector<float> scales(scaleShape[0] * scaleShape[1], 0.0f);
  auto scaleIndex = [&](int64_t r, int64_t c) {
    return axis == 0 ? (r / group) * cols + c : r * scaleShape[1] + c / group;
  };
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float &scale = scales[scaleIndex(r, c)];
      scale = std::max(scale, std::fabs(values[r * cols + c]) / 127.0f);
    }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float scale = scales[scaleIndex(r, c)];
      q[r * cols + c] =
          scale == 0.0f ? 0 : static_cast<int8_t>(std::nearbyint(values[r * cols + c] / scale));
    }
  return {std::move(q), std::move(scales)};
}

/// Copies the part of a quantized tensor that `arg` is into `buffer`.
static void copyQuantizedPart(const ArgSpec &arg,
                              const std::pair<std::vector<int8_t>, std::vector<float>> &parts,
                              Buffer &buffer) {
  if (arg.quantizedPart == "values")
    std::memcpy(buffer.data, parts.first.data(), parts.first.size());
  else
    std::memcpy(buffer.data, parts.second.data(), parts.second.size() * sizeof(float));
}

std::map<std::string, std::unique_ptr<Buffer>>
xfmr::rt::loadWeights(const Manifest &manifest, const std::string &path) {
  char err[512];
  xfmr_weights *file = xfmr_weights_open(path.c_str(), err, sizeof(err));
  if (!file)
    fail(err);
  std::unique_ptr<xfmr_weights, void (*)(xfmr_weights *)> guard(file, xfmr_weights_close);
  std::map<std::string, std::unique_ptr<Buffer>> weights;
  // Checkpoint tensors quantized so far: their int8 values and scales.
  std::map<std::string, std::pair<std::vector<int8_t>, std::vector<float>>> quantized;
  for (const ArgSpec &arg : manifest.args) {
    if (arg.kind != ArgSpec::Kind::Param)
      continue;
    bool isQuantized = !arg.quantizedPart.empty();
    const std::string &name = isQuantized ? arg.source : arg.name;
    // A quantized weight reads the f32 tensor its values have the shape of.
    std::vector<int64_t> shape = arg.shape;
    if (isQuantized && arg.quantizedPart == "scales")
      shape[arg.axis] *= arg.groupSize;
    xfmr_dtype dtype = isQuantized ? XFMR_DTYPE_F32 : arg.dtype;
    std::string found;
    xfmr_tensor_info info;
    for (const std::string &prefix : manifest.weightPrefixes)
      if (found.empty() && !xfmr_weights_find(file, (prefix + name).c_str(), &info))
        found = prefix + name;
    if (found.empty())
      fail("weights file '" + path + "': no tensor '" + name + "' (the model needs " +
           std::string(xfmr_dtype_name(dtype)) + " " + shapeToString(shape) + ")");
    bool isFloat = info.dtype == XFMR_DTYPE_F32 || info.dtype == XFMR_DTYPE_F64 ||
                   info.dtype == XFMR_DTYPE_F16 || info.dtype == XFMR_DTYPE_BF16;
    if (!isFloat)
      fail("weights file '" + path + "': tensor '" + found + "' is " + xfmr_dtype_name(info.dtype) +
           " " + shapeToString(std::vector<int64_t>(info.shape, info.shape + info.rank)) +
           ", the model needs " + xfmr_dtype_name(dtype) + " " + shapeToString(shape));
    // Read as f32 (checked finite): straight into the buffer of an f32
    // weight, through a copy narrowed to the model's type or quantized
    // otherwise.
    std::unique_ptr<Buffer> buffer = allocate(arg);
    size_t count = elementCount(shape);
    auto done = quantized.find(found);
    if (isQuantized && done != quantized.end()) {
      copyQuantizedPart(arg, done->second, *buffer);
      weights[arg.name] = std::move(buffer);
      continue;
    }
    std::vector<float> widened(arg.dtype == XFMR_DTYPE_F32 && !isQuantized ? 0 : count);
    float *values = widened.empty() ? buffer->as<float>() : widened.data();
    if (xfmr_weights_read(file, found.c_str(), XFMR_DTYPE_F32, static_cast<int32_t>(shape.size()),
                          shape.data(), values, err, sizeof(err)))
      fail("weights file " + std::string(err));
    if (!std::all_of(values, values + count, [](float v) { return std::isfinite(v); }))
      fail("weights file '" + path + "': tensor '" + found + "' contains NaN or infinity");
    if (isQuantized) {
      auto &parts = quantized[found] = quantizeInt8(values, shape, arg.axis, arg.groupSize);
      copyQuantizedPart(arg, parts, *buffer);
    } else if (!widened.empty()) {
      std::string problem = convertElements(XFMR_DTYPE_F32, values, count, arg.dtype, buffer->data);
      if (!problem.empty())
        fail("weights file '" + path + "': tensor '" + found + "': " + problem);
    }
    weights[arg.name] = std::move(buffer);
  }
  return weights;
}

std::vector<Sequence> xfmr::rt::readSequences(const std::string &path,
                                              const std::string &displayName) {
  std::ifstream file;
  std::istream *in = &std::cin;
  if (path != "-") {
    file.open(path);
    if (!file)
      fail("cannot open input '" + path + "': " + std::strerror(errno));
    in = &file;
  }
  std::vector<Sequence> sequences;
  std::string line;
  for (int lineNumber = 1; std::getline(*in, line); ++lineNumber) {
    size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#')
      continue;
    Sequence sequence;
    sequence.line = lineNumber;
    int segment = 0;
    std::istringstream words(line);
    std::string word;
    while (words >> word) {
      if (word == "|") {
        if (++segment > 1)
          fail(displayName + ":" + std::to_string(lineNumber) + ": more than one '|'");
        continue;
      }
      char *end = nullptr;
      errno = 0;
      long long id = std::strtoll(word.c_str(), &end, 10);
      if (*end || errno == ERANGE)
        fail(displayName + ":" + std::to_string(lineNumber) + ": '" + word +
             "' is not a token id");
      sequence.segments[segment].push_back(id);
    }
    sequences.push_back(std::move(sequence));
  }
  if (in->bad())
    fail("error reading input '" + displayName + "'");
  return sequences;
}

bool xfmr::rt::flagValue(int argc, char **argv, int &i, const char *flag, std::string &value) {
  std::string arg = argv[i];
  std::string prefix = std::string(flag) + "=";
  if (arg.rfind(prefix, 0) == 0) {
    value = arg.substr(prefix.size());
    return true;
  }
  if (arg != flag)
    return false;
  if (i + 1 >= argc)
    fail(std::string("flag ") + flag + " needs a value");
  value = argv[++i];
  return true;
}

int64_t xfmr::rt::parseCount(const char *flag, const std::string &text, int64_t max) {
  char *end = nullptr;
  errno = 0;
  long long parsed = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || errno == ERANGE || parsed < 0 || parsed > max)
    fail(std::string("flag ") + flag + " needs an integer in [0, " + std::to_string(max) +
         "], got '" + text + "'");
  return parsed;
}

const InputRole *xfmr::rt::roleOf(const std::string &name) {
  static constexpr InputRole roles[] = {
      {"input_ids", 0, false, true},
      {"attention_mask", 0, true, false},
      {"token_type_ids", 0, false, false},
      {"decoder_input_ids", 1, false, true},
      {"decoder_attention_mask", 1, true, false},
  };
  for (const InputRole &role : roles)
    if (name == role.name)
      return &role;
  return nullptr;
}

bool xfmr::rt::wantsHelp(int argc, char **argv) {
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h"))
      return true;
  return false;
}

void xfmr::rt::setThreads(int threads) {
  if (threads > 0 && omp_set_num_threads)
    omp_set_num_threads(threads);
}

int xfmr::rt::runCommandLine(const char *argv0, const std::function<int()> &body) {
  // Models allocate their intermediate tensors on every call. Served by
  // mmap, each would cost fresh zeroed pages per call; kept in the heap they
  // are reused.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  try {
    return body();
  } catch (const Failure &failure) {
    std::fprintf(stderr, "%s: error: %s\n", argv0, failure.message.c_str());
    return 1;
  }
}
