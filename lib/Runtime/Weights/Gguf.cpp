//===- Gguf.cpp - llama.cpp's GGUF model files ----------------------------===//
//
// Layout (little-endian): "GGUF", version, tensor count, metadata count;
// the metadata (key string, value type, value); the tensor infos (name,
// dims innermost first, ggml type, offset into the data); padding to the
// file's alignment (`general.alignment`, 32 by default); the data. Strings
// are a 64-bit length and bytes. Every count, length and offset is checked
// against the file before it is used.
//
//===----------------------------------------------------------------------===//

#include "Weights/Gguf.h"

#include "CommandLine.h"
#include "Json.h"
#include "RuntimeSupport.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <iterator>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace xfmr::rt;

namespace {

/// ggml's types (ggml.h's GGML_TYPE_*) that xfmr reads, with their blocks.
struct GgmlTypeInfo {
  uint32_t id;
  const char *name;
  xfmr_dtype dtype;
  int64_t blockValues, blockBytes;
};

constexpr GgmlTypeInfo kGgmlTypes[] = {
    {0, "F32", XFMR_DTYPE_F32, 1, 4},        {1, "F16", XFMR_DTYPE_F16, 1, 2},
    {30, "BF16", XFMR_DTYPE_BF16, 1, 2},     {2, "Q4_0", XFMR_DTYPE_Q4_0, 32, 18},
    {3, "Q4_1", XFMR_DTYPE_Q4_1, 32, 20},    {6, "Q5_0", XFMR_DTYPE_Q5_0, 32, 22},
    {7, "Q5_1", XFMR_DTYPE_Q5_1, 32, 24},    {8, "Q8_0", XFMR_DTYPE_Q8_0, 32, 34},
    {12, "Q4_K", XFMR_DTYPE_Q4_K, 256, 144}, {13, "Q5_K", XFMR_DTYPE_Q5_K, 256, 176},
    {14, "Q6_K", XFMR_DTYPE_Q6_K, 256, 210},
};

/// ggml's names of the types it has that xfmr does not read.
const char *unsupportedGgmlTypeName(uint32_t id) {
  static const char *const kNames[] = {
      "F32",   "F16",        "Q4_0",       "Q4_1",       "Q4_2",     "Q4_3",     "Q5_0",
      "Q5_1",  "Q8_0",       "Q8_1",       "Q2_K",       "Q3_K",     "Q4_K",     "Q5_K",
      "Q6_K",  "Q8_K",       "IQ2_XXS",    "IQ2_XS",     "IQ3_XXS",  "IQ1_S",    "IQ4_NL",
      "IQ3_S", "IQ2_S",      "IQ4_XS",     "I8",         "I16",      "I32",      "I64",
      "F64",   "IQ1_M",      "BF16",       "Q4_0_4_4",   "Q4_0_4_8", "Q4_0_8_8", "TQ1_0",
      "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4"};
  return id < std::size(kNames) ? kNames[id] : "unknown";
}

const GgmlTypeInfo *ggmlType(uint32_t id) {
  for (const GgmlTypeInfo &info : kGgmlTypes)
    if (info.id == id)
      return &info;
  return nullptr;
}

const GgmlTypeInfo &ggmlType(xfmr_dtype dtype) {
  for (const GgmlTypeInfo &info : kGgmlTypes)
    if (info.dtype == dtype)
      return info;
  fail("internal: not a ggml dtype");
}

/// A bounds-checked cursor over the file's bytes.
class Cursor {
public:
  Cursor(const uint8_t *begin, size_t size, const std::string &prefix)
      : begin(begin), at(begin), end(begin + size), prefix(prefix) {}

  [[noreturn]] void error(const std::string &problem) const {
    fail(prefix + problem + " (at byte " + std::to_string(at - begin) + ")");
  }

  size_t remaining() const { return static_cast<size_t>(end - at); }
  size_t offset() const { return static_cast<size_t>(at - begin); }

  template <typename T> T take(const char *what) {
    if (remaining() < sizeof(T))
      error(std::string("file ends inside ") + what + " (truncated?)");
    T value;
    std::memcpy(&value, at, sizeof(T));
    at += sizeof(T);
    return value;
  }

  std::string string(const char *what) {
    uint64_t length = take<uint64_t>(what);
    if (length > remaining())
      error(std::string(what) + " of " + std::to_string(length) + " bytes runs past the end");
    std::string text(reinterpret_cast<const char *>(at), length);
    at += length;
    return text;
  }

private:
  const uint8_t *begin, *at, *end;
  std::string prefix;
};

/// Reads one value of GGUF type `type` (gguf.md's gguf_metadata_value_type).
GgufValue readValue(Cursor &cursor, uint32_t type, const std::string &key, int depth = 0) {
  GgufValue value;
  switch (type) {
  case 0:
    value.integer = cursor.take<uint8_t>("a value");
    break;
  case 1:
    value.integer = cursor.take<int8_t>("a value");
    break;
  case 2:
    value.integer = cursor.take<uint16_t>("a value");
    break;
  case 3:
    value.integer = cursor.take<int16_t>("a value");
    break;
  case 4:
    value.integer = cursor.take<uint32_t>("a value");
    break;
  case 5:
    value.integer = cursor.take<int32_t>("a value");
    break;
  case 10: {
    uint64_t wide = cursor.take<uint64_t>("a value");
    if (wide > uint64_t(INT64_MAX))
      cursor.error("key '" + key + "': integer " + std::to_string(wide) + " is too large");
    value.integer = static_cast<int64_t>(wide);
    break;
  }
  case 11:
    value.integer = cursor.take<int64_t>("a value");
    break;
  case 6:
    value.kind = GgufValue::Kind::Float;
    value.number = cursor.take<float>("a value");
    break;
  case 12:
    value.kind = GgufValue::Kind::Float;
    value.number = cursor.take<double>("a value");
    break;
  case 7: {
    value.kind = GgufValue::Kind::Bool;
    uint8_t flag = cursor.take<uint8_t>("a value");
    if (flag > 1)
      cursor.error("key '" + key + "': bool value " + std::to_string(flag) + " is not 0 or 1");
    value.integer = flag;
    break;
  }
  case 8:
    value.kind = GgufValue::Kind::String;
    value.text = cursor.string("a string");
    break;
  case 9: {
    value.kind = GgufValue::Kind::Array;
    if (depth == 2)
      cursor.error("key '" + key + "': arrays nested deeper than two levels");
    uint32_t itemType = cursor.take<uint32_t>("an array's type");
    uint64_t count = cursor.take<uint64_t>("an array's length");
    // Each item takes at least its encoding's smallest size: a longer array
    // cannot fit (and is not reserved).
    static constexpr uint64_t kSmallest[] = {1, 1, 2, 2, 4, 4, 4, 1, 8, 12, 8, 8, 8};
    uint64_t smallest = itemType < std::size(kSmallest) ? kSmallest[itemType] : 1;
    if (count > cursor.remaining() / smallest)
      cursor.error("key '" + key + "': array of " + std::to_string(count) +
                   " items runs past the end");
    value.items.reserve(count);
    for (uint64_t i = 0; i < count; ++i)
      value.items.push_back(readValue(cursor, itemType, key, depth + 1));
    break;
  }
  default:
    cursor.error("key '" + key + "': unknown value type " + std::to_string(type));
  }
  return value;
}

/// A half-precision scale of a block.
float half(const uint8_t *bytes) {
  uint16_t bits;
  std::memcpy(&bits, bytes, 2);
  return halfToFloat(bits);
}

/// Q4_K and Q5_K: the 6-bit scale and minimum of sub-block `j` (ggml's
/// get_scale_min_k4).
std::pair<int, int> scaleMinK4(const uint8_t *scales, int j) {
  if (j < 4)
    return {scales[j] & 63, scales[j + 4] & 63};
  return {(scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4),
          (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4)};
}

/// One block of `type` as integer levels and the scales (and mins) of its
/// groups (ggmlIntegerLayout): ggml-common.h's layouts, unpacked as
/// ggml-quants.c's dequantize_row_* do. A K-quant's sub-block scale d * sc
/// and min dmin * m are exact in f32 (an f16 times a 6-bit integer), so
/// level * scale (+ min) rounds as ggml's d1 * q - m1.
void splitBlock(xfmr_dtype type, const uint8_t *b, int8_t *q, float *scales, float *mins) {
  switch (type) {
  case XFMR_DTYPE_Q4_0:
  case XFMR_DTYPE_Q4_1: {
    bool hasMin = type == XFMR_DTYPE_Q4_1;
    int offset = hasMin ? 0 : 8;
    scales[0] = half(b);
    if (hasMin)
      mins[0] = half(b + 2);
    const uint8_t *qs = b + (hasMin ? 4 : 2);
    for (int j = 0; j < 16; ++j) {
      q[j] = static_cast<int8_t>((qs[j] & 0xF) - offset);
      q[j + 16] = static_cast<int8_t>((qs[j] >> 4) - offset);
    }
    return;
  }
  case XFMR_DTYPE_Q5_0:
  case XFMR_DTYPE_Q5_1: {
    bool hasMin = type == XFMR_DTYPE_Q5_1;
    int offset = hasMin ? 0 : 16;
    scales[0] = half(b);
    if (hasMin)
      mins[0] = half(b + 2);
    uint32_t qh;
    std::memcpy(&qh, b + (hasMin ? 4 : 2), 4);
    const uint8_t *qs = b + (hasMin ? 8 : 6);
    for (int j = 0; j < 16; ++j) {
      q[j] = static_cast<int8_t>(((qs[j] & 0xF) | int((qh >> j) & 1) << 4) - offset);
      q[j + 16] = static_cast<int8_t>(((qs[j] >> 4) | int((qh >> (j + 16)) & 1) << 4) - offset);
    }
    return;
  }
  case XFMR_DTYPE_Q8_0:
    scales[0] = half(b);
    std::memcpy(q, b + 2, 32);
    return;
  case XFMR_DTYPE_Q4_K:
  case XFMR_DTYPE_Q5_K: {
    bool five = type == XFMR_DTYPE_Q5_K;
    float d = half(b), dmin = half(b + 2);
    const uint8_t *qh = b + 16, *qs = b + (five ? 48 : 16);
    for (int sub = 0; sub < 8; ++sub) {
      auto [scale, min] = scaleMinK4(b + 4, sub);
      scales[sub] = d * scale;
      mins[sub] = -(dmin * min);
      for (int l = 0; l < 32; ++l) {
        int value = (qs[(sub / 2) * 32 + l] >> ((sub % 2) * 4)) & 0xF;
        if (five)
          value |= ((qh[l] >> sub) & 1) << 4;
        q[sub * 32 + l] = static_cast<int8_t>(value);
      }
    }
    return;
  }
  case XFMR_DTYPE_Q6_K: {
    const uint8_t *ql = b, *qh = b + 128;
    const auto *subScales = reinterpret_cast<const int8_t *>(b + 192);
    float d = half(b + 208);
    for (int sub = 0; sub < 16; ++sub)
      scales[sub] = d * subScales[sub];
    for (int v = 0; v < 256; ++v) {
      int h = v / 128, r = v % 128;
      int low = (ql[h * 64 + r % 64] >> (4 * (r / 64))) & 0xF;
      int high = (qh[h * 32 + r % 32] >> (2 * (r / 32))) & 3;
      q[v] = static_cast<int8_t>((low | high << 4) - 32);
    }
    return;
  }
  default:
    fail("internal: not a ggml block dtype");
  }
}

} // namespace

GgmlIntegerLayout xfmr::rt::ggmlIntegerLayout(xfmr_dtype dtype) {
  switch (dtype) {
  case XFMR_DTYPE_Q4_0:
    return {32, false, 4, XFMR_DTYPE_F16};
  case XFMR_DTYPE_Q4_1:
    return {32, true, 4, XFMR_DTYPE_F16};
  case XFMR_DTYPE_Q4_K:
    return {32, true, 4, XFMR_DTYPE_F32};
  case XFMR_DTYPE_Q5_0:
  case XFMR_DTYPE_Q8_0:
    return {32, false, 8, XFMR_DTYPE_F16};
  case XFMR_DTYPE_Q5_1:
    return {32, true, 8, XFMR_DTYPE_F16};
  case XFMR_DTYPE_Q5_K:
    return {32, true, 8, XFMR_DTYPE_F32};
  case XFMR_DTYPE_Q6_K:
    return {16, false, 8, XFMR_DTYPE_F32};
  default:
    fail("internal: not a ggml block dtype");
  }
}

void xfmr::rt::ggmlIntegerGroups(xfmr_dtype dtype, const uint8_t *blocks, int64_t count,
                                 int8_t *levels, float *scales, float *mins) {
  auto [values, bytes] = ggmlBlockLayout(dtype);
  GgmlIntegerLayout layout = ggmlIntegerLayout(dtype);
  int64_t groups = values / layout.group;
  for (int64_t i = 0; i < count / values; ++i)
    splitBlock(dtype, blocks + i * bytes, levels + i * values, scales + i * groups,
               layout.mins ? mins + i * groups : nullptr);
}

bool xfmr::rt::isGgmlBlockType(xfmr_dtype dtype) {
  for (const GgmlTypeInfo &info : kGgmlTypes)
    if (info.dtype == dtype)
      return info.blockValues > 1;
  return false;
}

std::pair<int64_t, int64_t> xfmr::rt::ggmlBlockLayout(xfmr_dtype dtype) {
  const GgmlTypeInfo &info = ggmlType(dtype);
  return {info.blockValues, info.blockBytes};
}

void xfmr::rt::dequantizeBlocks(xfmr_dtype dtype, const uint8_t *blocks, float *out,
                                int64_t count) {
  GgmlIntegerLayout layout = ggmlIntegerLayout(dtype);
  std::vector<int8_t> levels(count);
  std::vector<float> scales(count / layout.group), mins(layout.mins ? scales.size() : 0);
  ggmlIntegerGroups(dtype, blocks, count, levels.data(), scales.data(), mins.data());
  for (int64_t i = 0; i < count; ++i) {
    float value = levels[i] * scales[i / layout.group];
    out[i] = layout.mins ? value + mins[i / layout.group] : value;
  }
}

const char *xfmr::rt::ggmlBlockTypeName(xfmr_dtype dtype) {
  for (const GgmlTypeInfo &info : kGgmlTypes)
    if (info.dtype == dtype && info.blockValues > 1)
      return info.name;
  return nullptr;
}

//===----------------------------------------------------------------------===//
// GgufFile
//===----------------------------------------------------------------------===//

GgufFile::~GgufFile() {
  if (mapping)
    munmap(mapping, fileSize);
}

const GgufValue *GgufFile::find(const std::string &key) const {
  auto it = metadata.find(key);
  return it == metadata.end() ? nullptr : &it->second;
}

std::unique_ptr<GgufFile> GgufFile::open(const std::string &path) {
  std::unique_ptr<GgufFile> file(new GgufFile);
  file->filePath = path;
  std::string prefix = "GGUF file '" + path + "': ";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    fail(prefix + "cannot open: " + std::strerror(errno));
  struct stat info;
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    fail(prefix + "not a regular file");
  }
  file->fileSize = static_cast<size_t>(info.st_size);
  if (file->fileSize == 0) {
    ::close(fd);
    fail(prefix + "empty file");
  }
  void *mapping = mmap(nullptr, file->fileSize, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (mapping == MAP_FAILED)
    fail(prefix + "cannot map: " + std::strerror(errno));
  file->mapping = mapping;
  const auto *bytes = static_cast<const uint8_t *>(mapping);
  Cursor cursor(bytes, file->fileSize, prefix);

  if (cursor.take<uint32_t>("the magic") != 0x46554747)
    fail(prefix + "not a GGUF file (no \"GGUF\" magic)");
  uint32_t version = cursor.take<uint32_t>("the version");
  if (version != 2 && version != 3)
    fail(prefix + "GGUF version " + std::to_string(version) +
         " is not supported (2 and 3 are; a big-endian file reads as a huge version)");
  uint64_t tensorCount = cursor.take<uint64_t>("the tensor count");
  uint64_t metadataCount = cursor.take<uint64_t>("the metadata count");
  // A key/value pair takes at least 13 bytes and a tensor info 24.
  if (metadataCount > cursor.remaining() / 13 || tensorCount > cursor.remaining() / 24)
    cursor.error(std::to_string(metadataCount) + " metadata entries and " +
                 std::to_string(tensorCount) + " tensors cannot fit in the file");
  for (uint64_t i = 0; i < metadataCount; ++i) {
    std::string key = cursor.string("a metadata key");
    uint32_t type = cursor.take<uint32_t>("a value type");
    GgufValue value = readValue(cursor, type, key);
    if (!file->metadata.emplace(key, std::move(value)).second)
      cursor.error("key '" + key + "' appears twice");
  }

  uint64_t alignment = 32;
  if (const GgufValue *value = file->find("general.alignment")) {
    if (value->kind != GgufValue::Kind::Integer || value->integer <= 0 ||
        (value->integer & (value->integer - 1)) || value->integer > (1 << 20))
      fail(prefix + "key 'general.alignment' must be a power of two up to 2^20");
    alignment = static_cast<uint64_t>(value->integer);
  }

  std::vector<uint64_t> offsets;
  for (uint64_t i = 0; i < tensorCount; ++i) {
    GgufTensor tensor;
    tensor.name = cursor.string("a tensor name");
    uint32_t rank = cursor.take<uint32_t>("a tensor's rank");
    if (rank == 0 || rank > 4)
      cursor.error("tensor '" + tensor.name + "': rank " + std::to_string(rank) +
                   " (ggml tensors have 1 to 4 dimensions)");
    uint64_t elements = 1;
    for (uint32_t d = 0; d < rank; ++d) {
      uint64_t size = cursor.take<uint64_t>("a tensor's dimensions");
      if (size == 0 || size > (uint64_t(1) << 40) || elements > (uint64_t(1) << 50) / size)
        cursor.error("tensor '" + tensor.name + "': dimension " + std::to_string(size) +
                     " is zero or too large");
      elements *= size;
      tensor.shape.insert(tensor.shape.begin(), static_cast<int64_t>(size));
    }
    tensor.ggmlType = cursor.take<uint32_t>("a tensor's type");
    const GgmlTypeInfo *type = ggmlType(tensor.ggmlType);
    if (!type)
      cursor.error("tensor '" + tensor.name + "': ggml type " +
                   unsupportedGgmlTypeName(tensor.ggmlType) + " (" +
                   std::to_string(tensor.ggmlType) +
                   ") is not supported (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, "
                   "Q5_K and Q6_K are)");
    tensor.dtype = type->dtype;
    if (tensor.shape.back() % type->blockValues)
      cursor.error("tensor '" + tensor.name + "': rows of " + std::to_string(tensor.shape.back()) +
                   " values are not whole blocks of " + std::to_string(type->blockValues));
    tensor.bytes = elements / type->blockValues * type->blockBytes;
    uint64_t offset = cursor.take<uint64_t>("a tensor's offset");
    if (offset % alignment)
      cursor.error("tensor '" + tensor.name + "': offset " + std::to_string(offset) +
                   " is not a multiple of the alignment " + std::to_string(alignment));
    offsets.push_back(offset);
    file->tensorList.push_back(std::move(tensor));
  }
  uint64_t dataStart = (cursor.offset() + alignment - 1) / alignment * alignment;
  uint64_t dataSize = dataStart <= file->fileSize ? file->fileSize - dataStart : 0;
  std::vector<size_t> order;
  for (size_t i = 0; i < file->tensorList.size(); ++i) {
    GgufTensor &tensor = file->tensorList[i];
    uint64_t offset = offsets[i];
    if (offset > dataSize || tensor.bytes > dataSize - offset)
      fail(prefix + "tensor '" + tensor.name + "': its " + std::to_string(tensor.bytes) +
           " bytes at offset " + std::to_string(offset) + " run past the end of the data (" +
           std::to_string(dataSize) + " bytes; file truncated?)");
    tensor.data = bytes + dataStart + offset;
    order.push_back(i);
  }
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return offsets[a] < offsets[b]; });
  for (size_t i = 1; i < order.size(); ++i) {
    const GgufTensor &previous = file->tensorList[order[i - 1]];
    if (offsets[order[i - 1]] + previous.bytes > offsets[order[i]])
      fail(prefix + "tensors '" + previous.name + "' and '" + file->tensorList[order[i]].name +
           "' overlap");
  }
  std::vector<std::string> names;
  for (const GgufTensor &tensor : file->tensorList)
    names.push_back(tensor.name);
  std::sort(names.begin(), names.end());
  auto twice = std::adjacent_find(names.begin(), names.end());
  if (twice != names.end())
    fail(prefix + "tensor '" + *twice + "' appears twice");
  return file;
}

//===----------------------------------------------------------------------===//
// GgufModel
//===----------------------------------------------------------------------===//

namespace {

/// What llama.cpp's converter did to an architecture's checkpoints, by the
/// `general.architecture` it wrote, with transformers' model type and class.
struct Architecture {
  const char *name, *modelType, *className;
  /// The rows of the query and key projections permuted for ggml's
  /// interleaved rope (Llama).
  bool permutesQueryKey;
  /// Norm weights stored plus one, as ggml scales by the weight where
  /// transformers scales by 1 + weight (Gemma).
  bool normsPlusOne;
  /// Norms after the attention and around the MLP: ffn_norm is then the
  /// MLP's input norm, not the one after the attention (Gemma 2 and 3).
  bool sandwichNorms;
  /// One query/key/value and one gate/up projection (Phi-3).
  bool fusedProjections;
  /// The block count of the one size whose queries llama.cpp scales by
  /// (hidden / heads)^-0.5 rather than head_dim^-0.5 (Gemma 2 and 3's 27B);
  /// 0: the architecture has no query_pre_attn_scalar.
  int64_t widthScaledQueriesAt;
  /// Windowed layers rotate at llama.cpp's fixed base of 10000 (Gemma 3).
  bool localRope;
  /// GPT-2: learned positions, layer norms, transformers' GPT-2 names.
  bool gpt2;
};

constexpr Architecture kArchitectures[] = {
    // name, model type, class, permuted q/k, norms + 1, sandwich, fused,
    // width-scaled queries at, local rope, GPT-2
    {"llama", "llama", "LlamaForCausalLM", true, false, false, false, 0, false, false},
    {"qwen2", "qwen2", "Qwen2ForCausalLM", false, false, false, false, 0, false, false},
    {"qwen3", "qwen3", "Qwen3ForCausalLM", false, false, false, false, 0, false, false},
    {"gemma", "gemma", "GemmaForCausalLM", false, true, false, false, 0, false, false},
    {"gemma2", "gemma2", "Gemma2ForCausalLM", false, true, true, false, 46, false, false},
    {"gemma3", "gemma3_text", "Gemma3ForCausalLM", false, true, true, false, 62, true, false},
    {"phi3", "phi3", "Phi3ForCausalLM", false, false, false, true, 0, false, false},
    {"gpt2", "gpt2", "GPT2LMHeadModel", false, false, false, false, 0, false, true},
};

using NamePair = std::pair<const char *, const char *>;

/// llama.cpp's tensor names (gguf-py's tensor_mapping.py) of a Llama-style
/// block, and transformers' names for them.
constexpr NamePair kLayerTensors[] = {
    {"attn_norm", "input_layernorm"},    {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},      {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"}, {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"}, {"ffn_norm", "post_attention_layernorm"},
    {"ffn_gate", "mlp.gate_proj"},       {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
};
/// Where a block of sandwich norms or fused projections differs.
constexpr NamePair kSandwichNormTensors[] = {
    {"ffn_norm", "pre_feedforward_layernorm"},
    {"post_attention_norm", "post_attention_layernorm"},
    {"post_ffw_norm", "post_feedforward_layernorm"},
};
constexpr NamePair kFusedTensors[] = {{"attn_qkv", "self_attn.qkv_proj"},
                                      {"ffn_up", "mlp.gate_up_proj"}};

constexpr NamePair kModelTensors[] = {
    {"token_embd", "model.embed_tokens"}, {"output_norm", "model.norm"}, {"output", "lm_head"}};

/// GPT-2's, under transformers' GPT2LMHeadModel names.
constexpr NamePair kGpt2LayerTensors[] = {
    {"attn_norm", "ln_1"}, {"attn_qkv", "attn.c_attn"}, {"attn_output", "attn.c_proj"},
    {"ffn_norm", "ln_2"},  {"ffn_up", "mlp.c_fc"},      {"ffn_down", "mlp.c_proj"},
};
constexpr NamePair kGpt2ModelTensors[] = {{"token_embd", "transformer.wte"},
                                          {"position_embd", "transformer.wpe"},
                                          {"output_norm", "transformer.ln_f"},
                                          {"output", "lm_head"}};

/// The transformers name of GGUF tensor `name` of `arch`, or "" if it has
/// none.
std::string transformersName(const std::string &name, const Architecture &arch) {
  size_t dot = name.rfind('.');
  if (dot == std::string::npos)
    return "";
  std::string stem = name.substr(0, dot), suffix = name.substr(dot);
  if (suffix != ".weight" && suffix != ".bias")
    return "";
  auto lookup = [](const auto &table, const std::string &gguf) -> std::string {
    for (const auto &[ggufName, hfName] : table)
      if (gguf == ggufName)
        return hfName;
    return "";
  };
  std::string model = arch.gpt2 ? lookup(kGpt2ModelTensors, stem) : lookup(kModelTensors, stem);
  if (!model.empty())
    return model + suffix;
  if (stem.rfind("blk.", 0) != 0)
    return "";
  size_t end = stem.find('.', 4);
  if (end == std::string::npos || end == 4 ||
      !std::all_of(stem.begin() + 4, stem.begin() + end,
                   [](char c) { return c >= '0' && c <= '9'; }))
    return "";
  std::string part = stem.substr(end + 1), layer = stem.substr(4, end - 4), found;
  if (arch.gpt2) {
    found = lookup(kGpt2LayerTensors, part);
    return found.empty() ? "" : "transformer.h." + layer + "." + found + suffix;
  }
  if (arch.sandwichNorms)
    found = lookup(kSandwichNormTensors, part);
  if (found.empty() && arch.fusedProjections)
    found = lookup(kFusedTensors, part);
  if (found.empty())
    found = lookup(kLayerTensors, part);
  return found.empty() ? "" : "model.layers." + layer + "." + found + suffix;
}

/// Reads the metadata the config is made of, naming the key in errors.
class Metadata {
public:
  explicit Metadata(const GgufFile &file) : file(file) {}

  const GgufValue *get(const std::string &key, GgufValue::Kind kind) const {
    const GgufValue *value = file.find(key);
    if (value && value->kind != kind &&
        !(kind == GgufValue::Kind::Float && value->kind == GgufValue::Kind::Integer))
      fail(prefix() + "key '" + key + "' has the wrong type");
    return value;
  }
  std::optional<int64_t> integer(const std::string &key, bool required = false) const {
    const GgufValue *value = get(key, GgufValue::Kind::Integer);
    if (!value && required)
      fail(prefix() + "missing key '" + key + "'");
    if (value && value->integer <= 0)
      fail(prefix() + "key '" + key + "' must be positive, got " + std::to_string(value->integer));
    return value ? std::optional<int64_t>(value->integer) : std::nullopt;
  }
  std::optional<double> number(const std::string &key) const {
    const GgufValue *value = get(key, GgufValue::Kind::Float);
    if (!value)
      return std::nullopt;
    double number = value->kind == GgufValue::Kind::Integer ? value->integer : value->number;
    if (!std::isfinite(number) || number <= 0)
      fail(prefix() + "key '" + key + "' must be positive and finite");
    return number;
  }
  std::string prefix() const { return "GGUF file '" + file.path() + "': "; }

private:
  const GgufFile &file;
};

} // namespace

GgufModel::GgufModel(const std::string &path) : gguf(GgufFile::open(path)) {
  Metadata metadata(*gguf);
  std::string prefix = metadata.prefix();
  const GgufValue *archValue = metadata.get("general.architecture", GgufValue::Kind::String);
  if (!archValue)
    fail(prefix + "missing key 'general.architecture'");
  const Architecture *arch = nullptr;
  std::string supported;
  for (const Architecture &candidate : kArchitectures) {
    if (archValue->text == candidate.name)
      arch = &candidate;
    supported += (supported.empty() ? "" : ", ") + std::string(candidate.name);
  }
  if (!arch)
    fail(prefix + "key 'general.architecture': unsupported architecture \"" + archValue->text +
         "\" (" + supported + " are supported)");
  std::string a = arch->name;
  int64_t heads = *metadata.integer(a + ".attention.head_count", true);
  int64_t kvHeads = metadata.integer(a + ".attention.head_count_kv").value_or(heads);
  int64_t hidden = *metadata.integer(a + ".embedding_length", true);
  int64_t layers = *metadata.integer(a + ".block_count", true);
  int64_t headDim = metadata.integer(a + ".attention.key_length").value_or(hidden / heads);
  if (headDim <= 0 || heads % kvHeads != 0 || hidden < heads)
    fail(prefix + "key '" + a + ".attention.head_count': " + std::to_string(heads) +
         " heads over " + std::to_string(kvHeads) + " key/value heads of a width of " +
         std::to_string(hidden) + " is no attention");

  int64_t context = metadata.integer(a + ".context_length").value_or(2048);
  int64_t ropeDims = metadata.integer(a + ".rope.dimension_count").value_or(headDim);
  if (ropeDims % 2 || ropeDims > headDim)
    fail(prefix + "key '" + a + ".rope.dimension_count': rotates " + std::to_string(ropeDims) +
         " of a head's " + std::to_string(headDim) +
         " features; an even number up to it is needed");
  bool hasHead = false;
  // Rope factors as llama.cpp's converter stores them, a divisor of each
  // frequency: Llama 3's (rope_freqs) and Phi-3's longrope (long, short).
  std::map<std::string, std::vector<float>> ropeFactors;
  for (const GgufTensor &tensor : gguf->tensors()) {
    GgufTensor entry = tensor;
    if (tensor.name == "rope_freqs.weight" || tensor.name == "rope_factors_long.weight" ||
        tensor.name == "rope_factors_short.weight") {
      if (tensor.dtype != XFMR_DTYPE_F32 || tensor.shape != std::vector<int64_t>{ropeDims / 2})
        fail(prefix + "tensor '" + tensor.name + "' is " + xfmr_dtype_name(tensor.dtype) + " " +
             shapeToString(tensor.shape) + ", expected F32 [" + std::to_string(ropeDims / 2) +
             "] (a factor per rotated pair)");
      std::vector<float> &factors = ropeFactors[tensor.name];
      factors.resize(ropeDims / 2);
      std::memcpy(factors.data(), tensor.data, tensor.bytes);
      for (float factor : factors)
        if (!(factor > 0) || !std::isfinite(factor))
          fail(prefix + "tensor '" + tensor.name +
               "' holds a factor that is not positive and finite");
      continue;
    }
    entry.name = transformersName(tensor.name, *arch);
    if (entry.name.empty())
      fail(prefix + "tensor '" + tensor.name + "' is not part of a " + a +
           " model as xfmr reads it");
    hasHead |= tensor.name == "output.weight";
    bool query = tensor.name.find(".attn_q.") != std::string::npos;
    bool key = tensor.name.find(".attn_k.") != std::string::npos;
    if (arch->permutesQueryKey && (query || key)) {
      // llama.cpp's converter stored row (h, s, j) of each head's
      // [2, head_dim / 2] halves as row (h, j, s).
      int64_t groups = query ? heads : kvHeads, rows = tensor.shape.front();
      if (rows != groups * headDim || headDim % 2)
        fail(prefix + "tensor '" + tensor.name + "' has " + std::to_string(rows) +
             " rows, not heads x head dim " + std::to_string(groups) + " x " +
             std::to_string(headDim));
      if (tensor.bytes % rows)
        fail(prefix + "tensor '" + tensor.name + "' is not whole rows of blocks");
      uint64_t rowBytes = tensor.bytes / rows;
      auto &rowsInOrder = rewritten.emplace_back(new uint8_t[tensor.bytes]);
      for (int64_t h = 0; h < groups; ++h)
        for (int64_t s = 0; s < 2; ++s)
          for (int64_t j = 0; j < headDim / 2; ++j)
            std::memcpy(rowsInOrder.get() + (h * headDim + s * headDim / 2 + j) * rowBytes,
                        tensor.data + (h * headDim + j * 2 + s) * rowBytes, rowBytes);
      entry.data = rowsInOrder.get();
      entry.inMapping = false;
    }
    if (arch->normsPlusOne && endsWith(entry.name, "norm.weight")) {
      // Back to transformers' weight, subtracting in f32 as its GGUF
      // loader does.
      if (tensor.dtype != XFMR_DTYPE_F32)
        fail(prefix + "tensor '" + tensor.name + "' is " + xfmr_dtype_name(tensor.dtype) +
             ", expected F32 (a norm llama.cpp's converter stored plus one)");
      auto &weights = rewritten.emplace_back(new uint8_t[tensor.bytes]);
      for (uint64_t at = 0; at < tensor.bytes; at += sizeof(float)) {
        float value;
        std::memcpy(&value, tensor.data + at, sizeof value);
        value -= 1.0f;
        std::memcpy(weights.get() + at, &value, sizeof value);
      }
      entry.data = weights.get();
      entry.inMapping = false;
    }
    renamed.push_back(std::move(entry));
  }

  const GgufTensor *embeddings = nullptr;
  for (const GgufTensor &tensor : renamed)
    if (tensor.name == (arch->gpt2 ? "transformer.wte.weight" : "model.embed_tokens.weight"))
      embeddings = &tensor;
  if (!embeddings || embeddings->shape.size() != 2)
    fail(prefix + "no 2-d tensor 'token_embd.weight'");

  Json json;
  if (arch->gpt2) {
    // transformers' GPT2Config (its head is the converter's copy of the
    // embeddings).
    json = {
        {"model_type", arch->modelType},
        {"architectures", {arch->className}},
        {"vocab_size", embeddings->shape[0]},
        {"n_embd", hidden},
        {"n_inner", *metadata.integer(a + ".feed_forward_length", true)},
        {"n_layer", layers},
        {"n_head", heads},
        {"n_positions", context},
        {"layer_norm_epsilon", metadata.number(a + ".attention.layer_norm_epsilon").value_or(1e-5)},
        {"activation_function", "gelu_new"},
        {"tie_word_embeddings", !hasHead}};
  } else {
    // config.json as transformers' GGUF loader (integrations/ggml.py) maps
    // it, and where that loader leaves a key at its class's default, as
    // llama.cpp reads the file.
    const char *activation = arch->normsPlusOne ? "gelu_pytorch_tanh" : "silu";
    json = {
        {"model_type", arch->modelType},
        {"architectures", {arch->className}},
        {"vocab_size", embeddings->shape[0]},
        {"hidden_size", hidden},
        {"intermediate_size", *metadata.integer(a + ".feed_forward_length", true)},
        {"num_hidden_layers", layers},
        {"num_attention_heads", heads},
        {"num_key_value_heads", kvHeads},
        {"head_dim", headDim},
        {"hidden_act", activation},
        {"hidden_activation", activation},
        {"max_position_embeddings", context},
        {"rms_norm_eps", metadata.number(a + ".attention.layer_norm_rms_epsilon").value_or(1e-6)}};
    if (arch->widthScaledQueriesAt)
      json["query_pre_attn_scalar"] =
          layers == arch->widthScaledQueriesAt ? hidden / heads : headDim;
    for (const char *softcap : {"attn_logit_softcapping", "final_logit_softcapping"})
      if (auto cap = metadata.number(a + "." + softcap))
        json[softcap] = *cap;

    Json rope = Json::object();
    const GgufValue *scaling = metadata.get(a + ".rope.scaling.type", GgufValue::Kind::String);
    std::optional<int64_t> original = metadata.integer(a + ".rope.scaling.original_context_length");
    bool longrope = ropeFactors.count("rope_factors_long.weight");
    if (longrope != static_cast<bool>(ropeFactors.count("rope_factors_short.weight")))
      fail(prefix + "tensors 'rope_factors_long.weight' and 'rope_factors_short.weight' come as a "
                    "pair");
    if (!ropeFactors.empty() && scaling && scaling->text != "none")
      fail(prefix + "key '" + a + ".rope.scaling.type': rope scaling \"" + scaling->text +
           "\" beside per-frequency factors");
    if (auto factors = ropeFactors.find("rope_freqs.weight"); factors != ropeFactors.end()) {
      if (longrope)
        fail(prefix + "tensor 'rope_freqs.weight' beside 'rope_factors_long.weight'");
      // Divisors of each frequency are transformers' longrope with one set
      // of factors at every length and no attention scaling.
      rope = {{"rope_type", "longrope"},        {"short_factor", factors->second},
              {"long_factor", factors->second}, {"factor", 1},
              {"attention_factor", 1},          {"original_max_position_embeddings", context}};
    } else if (longrope) {
      // Phi-3's: the short factors up to the pretraining length, the long
      // ones past it.
      rope = {{"rope_type", "longrope"},
              {"short_factor", ropeFactors["rope_factors_short.weight"]},
              {"long_factor", ropeFactors["rope_factors_long.weight"]}};
      rope["original_max_position_embeddings"] = original.value_or(context);
      if (auto attention = metadata.number(a + ".rope.scaling.attn_factor"))
        rope["attention_factor"] = *attention;
    } else if (!scaling || scaling->text == "none") {
      rope["rope_type"] = "default";
    } else if (scaling->text == "linear" || scaling->text == "yarn") {
      rope["rope_type"] = scaling->text;
      rope["factor"] = metadata.number(a + ".rope.scaling.factor").value_or(1);
      if (original)
        rope["original_max_position_embeddings"] = *original;
    } else {
      fail(prefix + "key '" + a + ".rope.scaling.type': unsupported rope scaling \"" +
           scaling->text + "\" (none, linear and yarn are supported)");
    }
    rope["rope_theta"] = metadata.number(a + ".rope.freq_base").value_or(10000.0);
    if (ropeDims != headDim)
      rope["partial_rotary_factor"] = double(ropeDims) / headDim;
    if (arch->localRope)
      rope = {{"full_attention", std::move(rope)},
              {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}};
    json["rope_parameters"] = std::move(rope);
    json["tie_word_embeddings"] = !hasHead;
    // Llama's q/k/v/o biases are optional (Qwen2's q/k/v ones are not).
    if (a == "llama")
      json["attention_bias"] =
          std::any_of(renamed.begin(), renamed.end(), [](const GgufTensor &tensor) {
            return tensor.name.find("q_proj.bias") != std::string::npos;
          });
    // A window of 0 is full attention (Phi-4 writes 0), and so is none in a
    // Gemma 3 file (llama.cpp's reading); elsewhere none is the family's
    // default (Gemma 2's 4096, where llama.cpp requires the key).
    const GgufValue *window =
        metadata.get(a + ".attention.sliding_window", GgufValue::Kind::Integer);
    if (window && window->integer < 0)
      fail(prefix + "key '" + a + ".attention.sliding_window' is negative");
    if (window && window->integer > 0)
      json["sliding_window"] = window->integer;
    else if (window || arch->localRope)
      json["sliding_window"] = nullptr;
  }
  int64_t vocabulary = embeddings->shape[0];
  auto tokenId = [&](const char *name) -> std::optional<int64_t> {
    std::string key = std::string("tokenizer.ggml.") + name + "_token_id";
    const GgufValue *id = metadata.get(key, GgufValue::Kind::Integer);
    if (id && (id->integer < 0 || id->integer >= vocabulary))
      fail(prefix + "key '" + key + "': not a token id below " + std::to_string(vocabulary));
    return id ? std::optional<int64_t>(id->integer) : std::nullopt;
  };
  if (auto bos = tokenId("bos"))
    json["bos_token_id"] = *bos;
  if (auto padding = tokenId("padding"))
    json["pad_token_id"] = *padding;
  // Generation ends where llama.cpp's does: at the EOS (first), the
  // end-of-turn and end-of-message tokens the file names, and the tokens it
  // knows by their text (a chat model's turn end, where the file's EOS is
  // the end of text).
  std::vector<int64_t> ends;
  for (const char *name : {"eos", "eot", "eom"})
    if (auto id = tokenId(name); id && std::find(ends.begin(), ends.end(), *id) == ends.end())
      ends.push_back(*id);
  static const char *const kEndTexts[] = {"<|eot_id|>",    "<|im_end|>",      "<|end|>",
                                          "<|return|>",    "<|call|>",        "<end_of_turn>",
                                          "<|endoftext|>", "<|eom_id|>",      "<EOT>",
                                          "_<EOT>",        "<|end_of_text|>", "<end_of_utterance>"};
  const GgufValue *tokens = gguf->find("tokenizer.ggml.tokens");
  for (int64_t id = 0; tokens && tokens->kind == GgufValue::Kind::Array &&
                       id < std::min<int64_t>(vocabulary, tokens->items.size());
       ++id) {
    const std::string &text = tokens->items[id].text;
    if (std::find(std::begin(kEndTexts), std::end(kEndTexts), text) != std::end(kEndTexts) &&
        std::find(ends.begin(), ends.end(), id) == ends.end())
      ends.push_back(id);
  }
  if (ends.size() == 1)
    json["eos_token_id"] = ends.front();
  else if (!ends.empty())
    json["eos_token_id"] = ends;
  config = json.dump();
}

int xfmr_dtype_integer_groups(xfmr_dtype dtype, int64_t *group, int *mins, int *bits,
                              xfmr_dtype *scales) {
  if (!isGgmlBlockType(dtype))
    return 1;
  GgmlIntegerLayout layout = ggmlIntegerLayout(dtype);
  *group = layout.group;
  *mins = layout.mins;
  *bits = static_cast<int>(layout.bits);
  *scales = layout.scales;
  return 0;
}
