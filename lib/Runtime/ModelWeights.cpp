//===- ModelWeights.cpp - buffers and the weights a manifest names --------===//

#include "ModelWeights.h"

#include "Weights/Gguf.h"

#include "CommandLine.h"
#include "RuntimeSupport.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <functional>
#include <new>
#include <optional>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <tuple>
#include <unistd.h>

using namespace xfmr::rt;

/// Buffers from this size on live on 2 MiB pages where the kernel allows:
/// streaming a model's weights through 4 KiB pages halves the read bandwidth
/// (a TLB miss every 4 KiB).
static constexpr size_t kHugePage = size_t(2) << 20;

// Defined in GPU executables (libxfmr_cuda, CudaRuntime.cpp): buffers in CUDA
// managed memory, which the compiled functions use in place.
extern "C" void *xfmrGpuAllocShared(size_t bytes) __attribute__((weak));
extern "C" void xfmrGpuFreeShared(void *pointer) __attribute__((weak));

Buffer::Buffer(size_t bytes) : size(bytes) {
  if (xfmrGpuAllocShared) {
    data = static_cast<uint8_t *>(xfmrGpuAllocShared(bytes));
    std::memset(data, 0, size);
    return;
  }
  size_t alignment = bytes >= kHugePage ? kHugePage : 64;
  size_t rounded = std::max(alignment, (bytes + alignment - 1) / alignment * alignment);
  data = static_cast<uint8_t *>(std::aligned_alloc(alignment, rounded));
  if (!data)
    fail("out of memory allocating " + std::to_string(bytes) + " bytes");
  if (alignment == kHugePage)
    madvise(data, rounded, MADV_HUGEPAGE);
  std::memset(data, 0, size);
}

Buffer::Buffer(std::shared_ptr<Buffer> block, size_t offset, size_t bytes)
    : data(block->data + offset), size(bytes), owner(std::move(block)) {}

// The executables that map weights never write them (the mapping is
// read-only: a write would fault).
Buffer::Buffer(std::shared_ptr<const void> mapping, const void *bytes, size_t size)
    : data(const_cast<uint8_t *>(static_cast<const uint8_t *>(bytes))), size(size),
      owner(std::move(mapping)) {}

Buffer::~Buffer() {
  if (owner)
    return;
  if (xfmrGpuFreeShared)
    xfmrGpuFreeShared(data);
  else
    std::free(data);
}

static size_t bytesOf(const ArgSpec &arg) {
  return elementCount(arg.shape) * xfmr_dtype_size(arg.dtype);
}

std::unique_ptr<Buffer> xfmr::rt::allocate(const ArgSpec &arg) {
  return std::make_unique<Buffer>(bytesOf(arg));
}

EntryArgs::EntryArgs(const Manifest &manifest, const BufferMap &weights, BufferMap &states,
                     const Place &place, bool updateInPlace) {
  for (const ArgSpec &arg : manifest.args) {
    auto corrupt = [&](const std::string &why) {
      fail("corrupt model manifest: argument '" + arg.name + "' " + why);
    };
    Buffer *buffer = place ? place(arg) : nullptr;
    if (!buffer && arg.kind == ArgSpec::Kind::Param) {
      auto it = weights.find(arg.name);
      if (it == weights.end())
        corrupt("is a weight that was not loaded");
      buffer = it->second.get();
    } else if (!buffer && arg.kind == ArgSpec::Kind::State) {
      std::unique_ptr<Buffer> &state = states[arg.name];
      if (!state)
        state = allocate(arg);
      buffer = state.get();
    } else if (!buffer && updateInPlace && !arg.updates.empty()) {
      auto it = states.find(arg.updates);
      if (it == states.end())
        corrupt("updates unknown '" + arg.updates + "'");
      buffer = it->second.get();
    } else if (!buffer) {
      own.push_back(allocate(arg));
      buffer = own.back().get();
    }
    if (buffer->size != bytesOf(arg))
      corrupt("disagrees with its buffer on its size");
    pointers.push_back(buffer->data);
    bound[arg.name] = buffer;
  }
}

Buffer *EntryArgs::find(const std::string &name) const {
  auto it = bound.find(name);
  return it == bound.end() ? nullptr : it->second;
}

/// `value` rounded to the nearest integer, ties to even, for |value| <=
/// 2^22: adding and subtracting 1.5 * 2^23 leaves no fraction bits, in the
/// default rounding mode, as std::nearbyint would; unlike the libm call it
/// vectorizes.
static float roundToInteger(float value) {
  constexpr float kShift = 12582912.0f;
  return (value + kShift) - kShift;
}

/// Whether the `count` IEEE values of `Bits` at `data`, with exponent mask
/// `exponent`, are finite: bit tests over the whole tensor, which vectorize
/// and run at memory speed.
template <typename Bits> static bool allFiniteBits(const void *data, size_t count, Bits exponent) {
  const Bits *bits = static_cast<const Bits *>(data);
  Bits bad = 0;
  // An all-ones exponent is infinity or NaN.
  for (size_t i = 0; i < count; ++i)
    bad |= static_cast<Bits>((bits[i] & exponent) == exponent);
  return bad == 0;
}

/// Whether the `count` values of type `dtype` at `data` are finite; integers
/// always are.
static bool allFinite(xfmr_dtype dtype, const void *data, size_t count) {
  switch (dtype) {
  case XFMR_DTYPE_F32:
    return allFiniteBits<uint32_t>(data, count, 0x7F800000u);
  case XFMR_DTYPE_BF16:
    return allFiniteBits<uint16_t>(data, count, 0x7F80);
  case XFMR_DTYPE_F16:
    return allFiniteBits<uint16_t>(data, count, 0x7C00);
  case XFMR_DTYPE_F64:
    return allFiniteBits<uint64_t>(data, count, 0x7FF0000000000000ull);
  default:
    return true;
  }
}

/// A weight quantized: its int8 values (4-bit ones two a byte), scales and,
/// for 4-bit groups with a minimum, mins.
struct QuantizedWeight {
  std::vector<int8_t> values;
  std::vector<float> scales, mins;
  /// What made the scales or mins unrepresentable in their type, or "".
  std::string problem;
};

/// Rounds `values` to `type`'s precision (kept as f32); what is wrong (a
/// value f16 cannot hold: from 65520 on it rounds to infinity), or "".
static std::string roundTo(xfmr_dtype type, std::vector<float> &values) {
  if (type == XFMR_DTYPE_F32)
    return "";
  if (type == XFMR_DTYPE_F16)
    for (float value : values)
      if (std::fabs(value) >= 65520.0f)
        return "value " + std::to_string(value) + " is out of f16's range (+-65504)";
  std::vector<uint8_t> narrow(values.size() * xfmr_dtype_size(type));
  convertElements(XFMR_DTYPE_F32, values.data(), values.size(), type, narrow.data());
  convertElements(type, narrow.data(), values.size(), XFMR_DTYPE_F32, values.data());
  return "";
}

/// Packs `levels` (4-bit ones, offset by `offset` to [0, 15]) two a byte as
/// xfmr.dequantize reads them: byte j of each block of 32 holds values j
/// and j + 16 in its low and high nibbles.
static std::vector<int8_t> packNibbles(const int8_t *levels, size_t count, int offset) {
  std::vector<int8_t> packed(count / 2, 0);
  auto *out = reinterpret_cast<uint8_t *>(packed.data());
  for (size_t i = 0; i < count; ++i)
    out[i / 32 * 16 + i % 16] |= static_cast<uint8_t>((levels[i] + offset) & 0xF)
                                 << (i % 32 / 16 * 4);
  return packed;
}

/// 4-bit quantization of the [rows, cols] `values` in groups of `group`
/// along the rows, stored as xfmr.dequantize reads them (byte j of each
/// block of 32 holds values j and j + 16 in its low and high nibbles).
/// Symmetric groups as llama.cpp's Q4_0: the value of largest magnitude m
/// maps to -8 (scale m / -8) and a nibble q is (q - 8) * scale; with `mins`
/// as Q4_1: scale (max - min) / 15 and q * scale + min. Scales and mins are
/// rounded to `scaleType` before the values are quantized with them.
static QuantizedWeight quantizeInt4(const float *values, int64_t rows, int64_t cols, int64_t group,
                                    xfmr_dtype scaleType, bool mins) {
  QuantizedWeight q;
  int64_t groups = cols / group;
  q.scales.resize(rows * groups);
  if (mins)
    q.mins.resize(rows * groups);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < groups; ++g) {
      const float *x = values + r * cols + g * group;
      float low = x[0], high = x[0], extreme = 0.0f;
      for (int64_t i = 0; i < group; ++i) {
        low = std::min(low, x[i]);
        high = std::max(high, x[i]);
        if (std::fabs(x[i]) > std::fabs(extreme))
          extreme = x[i];
      }
      if (mins) {
        q.scales[r * groups + g] = (high - low) / 15.0f;
        q.mins[r * groups + g] = low;
      } else {
        q.scales[r * groups + g] = extreme / -8.0f;
      }
    }
  q.problem = roundTo(scaleType, q.scales);
  if (q.problem.empty())
    q.problem = roundTo(scaleType, q.mins);
  std::vector<int8_t> levels(rows * cols);
  float offset = mins ? 0.0f : 8.0f;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < groups; ++g) {
      float scale = q.scales[r * groups + g], min = mins ? q.mins[r * groups + g] : 0.0f;
      int64_t begin = r * cols + g * group;
      for (int64_t i = begin; i < begin + group; ++i) {
        float level = scale == 0.0f ? offset : roundToInteger((values[i] - min) / scale) + offset;
        levels[i] = static_cast<int8_t>(std::clamp(level, 0.0f, 15.0f));
      }
    }
  q.values = packNibbles(levels.data(), levels.size(), 0);
  return q;
}

/// Symmetric int8 quantization of the [rows, cols] `values` in groups of
/// `group` along dimension `axis`: each group's scale is its largest
/// magnitude over 127 (0 for a group of zeros; rounded to `scaleType`'s
/// precision), each value its nearest multiple of the scale in [-127, 127].
static QuantizedWeight quantizeInt8(const float *values, const std::vector<int64_t> &shape,
                                    int64_t axis, int64_t group, xfmr_dtype scaleType) {
  int64_t rows = shape[0], cols = shape[1];
  // The scales of row r start at scaleRow(r): one per column (groups along
  // rows) or one per group of columns. Rounding is monotonic, so the
  // largest magnitude over 127 is the largest of the magnitudes over 127.
  int64_t scaleCols = axis == 0 ? cols : cols / group;
  std::vector<float> scales(rows / (axis == 0 ? group : 1) * scaleCols, 0.0f);
  auto scaleRow = [&](int64_t r) {
    return scales.data() + (axis == 0 ? r / group : r) * scaleCols;
  };
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = values + r * cols;
    float *scale = scaleRow(r);
    if (axis == 0)
      for (int64_t c = 0; c < cols; ++c)
        scale[c] = std::max(scale[c], std::fabs(row[c]));
    else
      for (int64_t s = 0; s < scaleCols; ++s) {
        float largest = 0.0f;
        for (int64_t c = s * group; c < (s + 1) * group; ++c)
          largest = std::max(largest, std::fabs(row[c]));
        scale[s] = largest;
      }
  }
  for (float &scale : scales)
    scale /= 127.0f;
  std::string problem = roundTo(scaleType, scales);
  auto quantize = [](float value, float scale) {
    float multiple = scale == 0.0f ? 0.0f : roundToInteger(value / scale);
    return static_cast<int8_t>(std::clamp(multiple, -127.0f, 127.0f));
  };
  std::vector<int8_t> q(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = values + r * cols, *scale = scaleRow(r);
    int8_t *out = q.data() + r * cols;
    if (axis == 0)
      for (int64_t c = 0; c < cols; ++c)
        out[c] = quantize(row[c], scale[c]);
    else
      for (int64_t s = 0; s < scaleCols; ++s)
        for (int64_t c = s * group; c < (s + 1) * group; ++c)
          out[c] = quantize(row[c], scale[s]);
  }
  return {std::move(q), std::move(scales), {}, problem};
}

/// Writes the [rows, cols] `values` transposed to `result`, a cache-sized
/// tile at a time.
static void transposeInto(const float *values, int64_t rows, int64_t cols, float *result) {
  constexpr int64_t kTile = 32;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile)
    for (int64_t c0 = 0; c0 < cols; c0 += kTile)
      for (int64_t c = c0; c < std::min(cols, c0 + kTile); ++c)
        for (int64_t r = r0; r < std::min(rows, r0 + kTile); ++r)
          result[c * rows + r] = values[r * cols + c];
}

/// The part `part` of the quantized weight whose part `arg` is, if the
/// manifest has it.
static const ArgSpec *siblingPart(const Manifest &manifest, const ArgSpec &arg, const char *part) {
  for (const ArgSpec &other : manifest.args)
    if (other.quantizedPart == part && other.source == arg.source && other.axis == arg.axis &&
        other.groupSize == arg.groupSize && other.bits == arg.bits &&
        other.transposed == arg.transposed)
      return &other;
  return nullptr;
}

/// The parts of `arg`'s weight taken from a GGUF tensor's blocks as they
/// are, when the executable stores it as ggml does: groups as long as the
/// blocks', mins where they have them, values of as many bits or more,
/// scales f32 or of the blocks' type, not transposed. Nothing is rounded:
/// the values are ggml's.
static std::optional<QuantizedWeight>
ggmlParts(const std::string &path, const xfmr_tensor_info &info, const std::vector<int64_t> &shape,
          const Manifest &manifest, const ArgSpec &arg, xfmr_dtype scaleType) {
  if (!isGgmlBlockType(info.dtype))
    return std::nullopt;
  GgmlIntegerLayout layout = ggmlIntegerLayout(info.dtype);
  bool mins = siblingPart(manifest, arg, "mins") != nullptr;
  if (arg.axis != 1 || arg.transposed || arg.groupSize != layout.group || arg.bits < layout.bits ||
      mins != layout.mins || (scaleType != XFMR_DTYPE_F32 && scaleType != layout.scales))
    return std::nullopt;
  size_t count = elementCount(shape);
  QuantizedWeight parts;
  std::vector<int8_t> levels(count);
  parts.scales.resize(count / layout.group);
  parts.mins.resize(mins ? count / layout.group : 0);
  ggmlIntegerGroups(info.dtype, static_cast<const uint8_t *>(info.data),
                    static_cast<int64_t>(count), levels.data(), parts.scales.data(),
                    parts.mins.data());
  if (!allFinite(XFMR_DTYPE_F32, parts.scales.data(), parts.scales.size()) ||
      !allFinite(XFMR_DTYPE_F32, parts.mins.data(), parts.mins.size()))
    fail("weights file '" + path + "': tensor '" + info.name + "' has NaN or infinite scales");
  parts.values =
      arg.bits == 4 ? packNibbles(levels.data(), count, mins ? 0 : 8) : std::move(levels);
  return parts;
}

/// Copies the part of a quantized tensor that `arg` is into `buffer`.
static void copyQuantizedPart(const ArgSpec &arg, const QuantizedWeight &parts, Buffer &buffer) {
  if (arg.quantizedPart == "values") {
    std::memcpy(buffer.data, parts.values.data(), parts.values.size());
    return;
  }
  const std::vector<float> &floats = arg.quantizedPart == "mins" ? parts.mins : parts.scales;
  convertElements(XFMR_DTYPE_F32, floats.data(), floats.size(), arg.dtype, buffer.data);
}

/// The type of the scales of the quantized weight whose part `arg` is.
static xfmr_dtype scaleTypeOf(const Manifest &manifest, const ArgSpec &arg) {
  if (const ArgSpec *scales = siblingPart(manifest, arg, "scales"))
    return scales->dtype;
  fail("corrupt model manifest: no scales for the values of '" + arg.source + "'");
}

/// The name under which `xfmrc --quantize` stores a narrow part of checkpoint
/// tensor `source`: `<source>:values`, `<source>:scales`, `<source>:bf16`,
/// and `<source>:values.T`, `<source>:scales.T`, `<source>:bf16.T` for those
/// of its transpose.
static std::string storedPartName(const std::string &source, const std::string &part,
                                  bool transposed = false) {
  return source + ":" + part + (transposed ? ".T" : "");
}

static std::string describeGroups(int64_t group, int64_t inputs) {
  return group == inputs ? std::string("one scale per output channel")
                         : "a scale per " + std::to_string(group) + " values";
}

/// The narrow part `arg` as `xfmrc --quantize` stored it ahead of time, or
/// null when the file holds the checkpoint's own tensor instead.
static std::unique_ptr<Buffer>
readStoredPart(const xfmr_weights *file, const std::string &path, const Manifest &manifest,
               const ArgSpec &arg, const std::function<std::unique_ptr<Buffer>()> &allocate) {
  auto find = [&](const std::string &part) {
    xfmr_tensor_info info;
    for (const std::string &prefix : manifest.weightPrefixes) {
      std::string name = prefix + storedPartName(arg.source, part, arg.transposed);
      if (!xfmr_weights_find(file, name.c_str(), &info))
        return std::make_pair(name, info);
    }
    return std::make_pair(std::string(), info);
  };
  auto [found, info] = find(arg.quantizedPart);
  if (found.empty()) {
    // int8 values and their scales come together, or not at all.
    const char *sibling = arg.quantizedPart == "values"   ? "scales"
                          : arg.quantizedPart == "scales" ? "values"
                                                          : nullptr;
    if (sibling && !find(sibling).first.empty())
      fail("weights file '" + path + "': tensor '" + find(sibling).first + "' has no '" +
           storedPartName(arg.source, arg.quantizedPart, arg.transposed) + "' beside it");
    return nullptr;
  }
  std::string where = "weights file '" + path + "': tensor '" + found + "' ";
  std::vector<int64_t> shape(info.shape, info.shape + info.rank);
  if (shape != arg.shape) {
    // Scales of another grouping of the same weight.
    int64_t axis = arg.axis, other = 1 - arg.axis;
    if (arg.quantizedPart == "scales" && shape.size() == 2 && arg.shape.size() == 2 &&
        shape[other] == arg.shape[other] && shape[axis] > 0) {
      int64_t inputs = arg.shape[axis] * arg.groupSize;
      if (inputs % shape[axis] == 0) {
        int64_t group = inputs / shape[axis];
        bool supported = group == inputs || group == 32 || group == 64 || group == 128;
        fail(where + "holds " + describeGroups(group, inputs) +
             (supported ? ", but this executable was compiled for " +
                              describeGroups(arg.groupSize, inputs) + " (xfmrc --weight-group-size)"
                        : ", which is not supported (32, 64, 128, or one scale per output "
                          "channel)"));
      }
    }
    fail(where + "is " + xfmr_dtype_name(info.dtype) + " " + shapeToString(shape) +
         ", the model needs " + xfmr_dtype_name(arg.dtype) + " " + shapeToString(arg.shape) +
         " (quantized for another model?)");
  }
  if (info.dtype != arg.dtype)
    fail(where + "is " + xfmr_dtype_name(info.dtype) + ", but this executable reads " +
         xfmr_dtype_name(arg.dtype) +
         (arg.quantizedPart == "scales" ? " scales (xfmrc --weight-scales-dtype)" : ""));
  std::unique_ptr<Buffer> buffer = allocate();
  char err[512];
  if (xfmr_weights_read(file, found.c_str(), arg.dtype, static_cast<int32_t>(arg.shape.size()),
                        arg.shape.data(), buffer->data, err, sizeof(err)))
    fail("weights file " + std::string(err));
  // (Scales may be negative: a symmetric 4-bit group's carries the sign of
  // its largest value, and ggml's blocks have them.)
  if ((arg.quantizedPart == "scales" || arg.quantizedPart == "mins") &&
      !allFinite(arg.dtype, buffer->data, elementCount(arg.shape)))
    fail(where + "holds NaN or infinite " + arg.quantizedPart);
  return buffer;
}

/// The tensor of `file` holding `arg` as the kernels read it (a stored part,
/// else the checkpoint's own tensor: same type and shape, not transposed,
/// on a cache line, where a vector load reads one line rather than two: the
/// files xfmr writes align every tensor, transformers' do not): its name and
/// its bytes where the file is mapped; none when `arg` must be converted.
static std::optional<std::pair<std::string, const void *>>
storedAsRead(const xfmr_weights *file, const Manifest &manifest, const ArgSpec &arg) {
  auto lookup =
      [&](const std::string &name) -> std::optional<std::pair<std::string, const void *>> {
    xfmr_tensor_info info;
    for (const std::string &prefix : manifest.weightPrefixes)
      if (!xfmr_weights_find(file, (prefix + name).c_str(), &info)) {
        if (info.dtype != arg.dtype ||
            std::vector<int64_t>(info.shape, info.shape + info.rank) != arg.shape ||
            reinterpret_cast<uintptr_t>(info.data) % 64 != 0)
          return std::nullopt;
        return std::make_pair(prefix + name, info.data);
      }
    return std::nullopt;
  };
  if (!arg.quantizedPart.empty())
    if (auto stored = lookup(storedPartName(arg.source, arg.quantizedPart, arg.transposed)))
      return stored;
  if (arg.isIntegerPart() || arg.transposed)
    return std::nullopt;
  return lookup(arg.source.empty() ? arg.name : arg.source);
}

/// A mapped file that shrinks under the process turns reads past its new end
/// into SIGBUS: that becomes one error line rather than a crash.
static void reportTruncatedMapping(int) {
  static const char message[] =
      "error: a weights file in use shrank (truncated or rewritten while the model ran)\n";
  (void)!::write(STDERR_FILENO, message, sizeof(message) - 1);
  ::_exit(1);
}

static void catchTruncatedMappings() {
  struct sigaction action = {};
  action.sa_handler = reportTruncatedMapping;
  sigaction(SIGBUS, &action, nullptr);
}

BufferMap xfmr::rt::loadWeights(const Manifest &manifest, const std::string &path,
                                const std::set<std::string> &skip, bool mapInPlace,
                                WeightsLoaded *loaded) {
  char err[512];
  xfmr_weights *opened = xfmr_weights_open(path.c_str(), err, sizeof(err));
  if (!opened)
    fail(err);
  // Mapped weights keep the file open (and mapped) as long as they live.
  std::shared_ptr<xfmr_weights> file(opened, xfmr_weights_close);
  BufferMap weights;
  WeightsLoaded counts;
  // GPU executables keep their weights in memory the device reaches; an
  // entry that updates its weights needs them writable.
  std::set<std::string> updated;
  for (const ArgSpec &arg : manifest.args)
    updated.insert(arg.updates);
  mapInPlace &= xfmrGpuAllocShared == nullptr;
  if (mapInPlace)
    for (const ArgSpec &arg : manifest.args) {
      if (arg.kind != ArgSpec::Kind::Param || skip.count(arg.name) || updated.count(arg.name))
        continue;
      auto stored = storedAsRead(file.get(), manifest, arg);
      if (!stored)
        continue;
      if (!allFinite(arg.dtype, stored->second, elementCount(arg.shape)))
        fail("weights file '" + path + "': tensor '" + stored->first +
             "' contains NaN or "
             "infinity");
      weights[arg.name] = std::make_unique<Buffer>(file, stored->second, bytesOf(arg));
      counts.mapped += bytesOf(arg);
    }
  if (counts.mapped)
    catchTruncatedMappings();
  // Checkpoint tensors quantized so far (by name, axis, group size, scale
  // type and transposition): their int8 values and scales.
  std::map<std::tuple<std::string, int64_t, int64_t, int64_t, xfmr_dtype, bool>, QuantizedWeight>
      quantized;
  auto wanted = [&](const ArgSpec &arg) {
    return arg.kind == ArgSpec::Kind::Param && !skip.count(arg.name) && !weights.count(arg.name);
  };
  auto aligned = [](size_t bytes) { return (bytes + 63) / 64 * 64; };
  size_t total = 0;
  for (const ArgSpec &arg : manifest.args)
    if (wanted(arg))
      total += aligned(bytesOf(arg));
  auto block = std::make_shared<Buffer>(total);
  counts.converted = total;
  if (loaded) {
    loaded->mapped += counts.mapped;
    loaded->converted += counts.converted;
  }
  size_t offset = 0;
  for (const ArgSpec &arg : manifest.args) {
    if (!wanted(arg))
      continue;
    auto allocate = [&] {
      auto buffer = std::make_unique<Buffer>(block, offset, bytesOf(arg));
      offset += aligned(buffer->size);
      return buffer;
    };
    // A stored part is read as `xfmrc --quantize` stored it, or else int8
    // values or scales are computed from the checkpoint's tensor, and a
    // float part (a bf16 rounding, a transposed copy) is read as any weight
    // of its type.
    if (!arg.quantizedPart.empty())
      if (std::unique_ptr<Buffer> stored =
              readStoredPart(file.get(), path, manifest, arg, allocate)) {
        weights[arg.name] = std::move(stored);
        continue;
      }
    bool isQuantized = arg.isIntegerPart();
    const std::string &name = arg.source.empty() ? arg.name : arg.source;
    // A narrow weight reads the f32 tensor its values have the shape of (or
    // the transpose of).
    std::vector<int64_t> shape = arg.shape;
    if (isQuantized && arg.quantizedPart != "values")
      shape[arg.axis] *= arg.groupSize;
    else if (isQuantized)
      shape[1] = shape[1] * 8 / arg.bits;
    if (arg.transposed)
      std::swap(shape[0], shape[1]);
    xfmr_dtype dtype = isQuantized ? XFMR_DTYPE_F32 : arg.dtype;
    std::string found;
    xfmr_tensor_info info;
    for (const std::string &prefix : manifest.weightPrefixes)
      if (found.empty() && !xfmr_weights_find(file.get(), (prefix + name).c_str(), &info))
        found = prefix + name;
    if (found.empty()) {
      std::string hint;
      for (const std::string &stored :
           {storedPartName(name, "values"), storedPartName(name, "values", /*transposed=*/true),
            storedPartName(name, "bf16"), storedPartName(name, "bf16", /*transposed=*/true)})
        if (hint.empty() && !xfmr_weights_find(file.get(), stored.c_str(), &info))
          hint = "; the file holds it as '" + stored +
                 "' (xfmrc --quantize): compile with the --weights-dtype it was written for";
      fail("weights file '" + path + "': no tensor '" + name + "' (the model needs " +
           std::string(xfmr_dtype_name(dtype)) + " " + shapeToString(shape) + ")" + hint);
    }
    bool isFloat = info.dtype == XFMR_DTYPE_F32 || info.dtype == XFMR_DTYPE_F64 ||
                   info.dtype == XFMR_DTYPE_F16 || info.dtype == XFMR_DTYPE_BF16 ||
                   isGgmlBlockType(info.dtype);
    if (!isFloat)
      fail("weights file '" + path + "': tensor '" + found + "' is " + xfmr_dtype_name(info.dtype) +
           " " + shapeToString(std::vector<int64_t>(info.shape, info.shape + info.rank)) +
           ", the model needs " + xfmr_dtype_name(dtype) + " " + shapeToString(shape));
    // Read as f32 (checked finite): straight into the buffer of an f32
    // weight (or transposed into it), through a copy narrowed to the
    // model's type or quantized otherwise.
    std::unique_ptr<Buffer> buffer = allocate();
    size_t count = elementCount(shape);
    xfmr_dtype scaleType = isQuantized ? scaleTypeOf(manifest, arg) : XFMR_DTYPE_F32;
    auto key = std::make_tuple(found, arg.axis, arg.groupSize, arg.bits, scaleType, arg.transposed);
    auto done = quantized.find(key);
    if (isQuantized && done != quantized.end()) {
      copyQuantizedPart(arg, done->second, *buffer);
      weights[arg.name] = std::move(buffer);
      continue;
    }
    if (isQuantized)
      if (auto parts = ggmlParts(path, info, shape, manifest, arg, scaleType)) {
        xfmr_weights_release(file.get(), found.c_str());
        copyQuantizedPart(arg, quantized[key] = std::move(*parts), *buffer);
        weights[arg.name] = std::move(buffer);
        continue;
      }
    bool mins = isQuantized && siblingPart(manifest, arg, "mins") != nullptr;
    // int8 groups with mins are a GGUF file's Q5_1 or Q5_K blocks, which
    // ggmlParts takes as they are; nothing quantizes to them.
    if (mins && arg.bits == 8)
      fail("weights file '" + path + "': tensor '" + found + "' is " + xfmr_dtype_name(info.dtype) +
           ", but this executable keeps it as int8 groups of " + std::to_string(arg.groupSize) +
           " with minimums and " + xfmr_dtype_name(scaleType) +
           " scales, which only GGUF blocks of that layout give (compile for this file)");
    bool plainF32 = arg.dtype == XFMR_DTYPE_F32 && !isQuantized;
    std::vector<float> widened(plainF32 && !arg.transposed ? 0 : count);
    float *values = widened.empty() ? buffer->as<float>() : widened.data();
    if (xfmr_weights_read(file.get(), found.c_str(), XFMR_DTYPE_F32,
                          static_cast<int32_t>(shape.size()), shape.data(), values, err,
                          sizeof(err)))
      fail("weights file " + std::string(err));
    xfmr_weights_release(file.get(), found.c_str());
    if (!allFinite(XFMR_DTYPE_F32, values, count))
      fail("weights file '" + path + "': tensor '" + found + "' contains NaN or infinity");
    if (arg.transposed) {
      std::vector<float> transpose(plainF32 ? 0 : count);
      float *into = transpose.empty() ? buffer->as<float>() : transpose.data();
      transposeInto(values, shape[0], shape[1], into);
      widened = std::move(transpose);
      values = into;
      std::swap(shape[0], shape[1]);
    }
    if (isQuantized) {
      auto &parts = quantized[key] =
          arg.bits == 4 ? quantizeInt4(values, shape[0], shape[1], arg.groupSize, scaleType, mins)
                        : quantizeInt8(values, shape, arg.axis, arg.groupSize, scaleType);
      if (!parts.problem.empty())
        fail("weights file '" + path + "': tensor '" + found + "': a scale or minimum " +
             parts.problem + "; quantize it with --weight-scales-dtype=f32 or bf16");
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

/// The sum of `sizes`' values.
template <typename Size> static size_t sumOf(const std::map<std::string, Size> &sizes) {
  size_t total = 0;
  for (const auto &entry : sizes)
    total += static_cast<size_t>(entry.second);
  return total;
}

size_t xfmr::rt::activationBytes(const std::vector<const Manifest *> &manifests) {
  std::map<std::string, int64_t> arenas;
  for (const Manifest *manifest : manifests)
    arenas.insert(manifest->arenas.begin(), manifest->arenas.end());
  return sumOf(arenas);
}

void xfmr::rt::checkFitsInMemory(const std::vector<const Manifest *> &manifests) {
  std::map<std::string, size_t> weights, states;
  for (const Manifest *manifest : manifests)
    for (const ArgSpec &arg : manifest->args)
      if (arg.kind == ArgSpec::Kind::Param)
        weights[arg.name] = bytesOf(arg);
      else if (arg.kind == ArgSpec::Kind::State)
        // An entry over one sequence reads a row of another's state.
        states[arg.name] = std::max(states[arg.name], bytesOf(arg));
  size_t weightBytes = sumOf(weights), stateBytes = sumOf(states);
  size_t arenaBytes = activationBytes(manifests);
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || pageSize <= 0)
    return;
  size_t memory = static_cast<size_t>(pages) * static_cast<size_t>(pageSize);
  auto gib = [](size_t bytes) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.2f GiB", bytes / 1073741824.0);
    return std::string(text);
  };
  size_t needed = weightBytes + stateBytes + arenaBytes;
  if (needed > memory)
    fail(
        "the model needs " + gib(needed) + " (weights " + gib(weightBytes) +
        ", KV cache and other state " + gib(stateBytes) + ", activations " + gib(arenaBytes) +
        "), more than this machine's " + gib(memory) + " of memory" +
        (stateBytes > memory / 4 ? " (a smaller --max-context or --batch shrinks the cache)" : ""));
}

/// What a file being written is named: its final name, this, a unique tail.
static constexpr const char *kPartialInfix = ".partial.";

void xfmr::rt::writeWeights(const std::vector<const Manifest *> &manifests,
                            const BufferMap &weights, const std::string &path) {
  // Each tensor once, by the name the loader looks for first (a narrow
  // part's name is already storedPartName's).
  std::set<std::string> written;
  std::vector<xfmr_tensor_ref> refs;
  for (const Manifest *manifest : manifests)
    for (const ArgSpec &arg : manifest->args)
      if (arg.kind == ArgSpec::Kind::Param && written.insert(arg.name).second)
        refs.push_back({arg.name.c_str(), arg.dtype, static_cast<int32_t>(arg.shape.size()),
                        arg.shape.data(), weights.at(arg.name)->data});
  // A reader never sees a partial file (another process starting, or this
  // one stopped midway): the file is written under a name of its own, with
  // the permissions a new file gets, then renamed.
  std::string temporary = path + kPartialInfix + "XXXXXX";
  int descriptor = mkstemp(temporary.data());
  if (descriptor < 0)
    fail("cannot write '" + path + "': " + std::strerror(errno));
  mode_t mask = umask(0);
  umask(mask);
  fchmod(descriptor, 0666 & ~mask);
  close(descriptor);
  char err[512];
  if (xfmr_safetensors_write(temporary.c_str(), refs.data(), refs.size(), err, sizeof(err))) {
    std::remove(temporary.c_str());
    fail(err);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::string reason = std::strerror(errno);
    std::remove(temporary.c_str());
    fail("cannot write '" + path + "': " + reason);
  }
}

/// Weights caches are named kCachePrefix + a hash of the model's weights and
/// of the source's name + "-" + a hash of the files they are read from +
/// ".safetensors".
static constexpr const char *kCachePrefix = ".xfmr-weights-";
/// The cache's layout and conversions: a change of either is a new version.
static constexpr int64_t kCacheVersion = 1;

/// The caches in `cache`'s folder of the same model and source from other
/// files (an older checkpoint), and such caches' partial files left by a
/// writer that stopped an hour ago or more.
static void removeStaleCaches(const std::string &cache) {
  size_t slash = cache.find_last_of('/');
  std::string folder = cache.substr(0, slash), name = cache.substr(slash + 1);
  std::string model = name.substr(0, name.rfind('-') + 1);
  time_t hourAgo = time(nullptr) - 3600;
  if (DIR *entries = opendir(folder.c_str())) {
    while (dirent *entry = readdir(entries)) {
      std::string other = entry->d_name, path = folder + "/" + other;
      if (other == name || other.rfind(model, 0) != 0)
        continue;
      struct stat info;
      bool partial = other.find(kPartialInfix) != std::string::npos;
      if (other.size() == name.size() ||
          (partial && stat(path.c_str(), &info) == 0 && info.st_mtime < hourAgo))
        std::remove(path.c_str());
    }
    closedir(entries);
  }
}

/// FNV-1a, over the bytes of each piece of a key.
class Fingerprint {
public:
  template <typename... Pieces> void add(const Pieces &...pieces) { (addOne(pieces), ...); }
  std::string hex() const {
    char text[17];
    std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(hash));
    return text;
  }

private:
  void addOne(const std::string &text) {
    addBytes(text.data(), text.size());
    addBytes("", 1);
  }
  void addOne(int64_t value) { addBytes(&value, sizeof(value)); }
  void addBytes(const void *data, size_t size) {
    for (size_t i = 0; i < size; ++i)
      hash = (hash ^ static_cast<const uint8_t *>(data)[i]) * 0x100000001b3ull;
  }
  uint64_t hash = 0xcbf29ce484222325ull;
};

WeightsCache xfmr::rt::parseWeightsCache(const std::string &value) {
  if (value == "auto")
    return WeightsCache::Auto;
  if (value == "always")
    return WeightsCache::Always;
  if (value == "off")
    return WeightsCache::Off;
  fail("flag --weights-cache takes auto, always or off, got '" + value + "'");
}

void xfmr::rt::reportWeightsCache(const WeightsLoaded &loaded) {
  if (!loaded.cacheRead.empty())
    std::fprintf(stderr, "weights cache: read '%s'\n", loaded.cacheRead.c_str());
  if (!loaded.cacheWritten.empty())
    std::fprintf(stderr, "weights cache: wrote '%s' (the next start maps it)\n",
                 loaded.cacheWritten.c_str());
}

BufferMap xfmr::rt::loadModelWeights(const std::vector<const Manifest *> &manifests,
                                     const std::string &source, bool mapInPlace, WeightsCache cache,
                                     WeightsLoaded &loaded) {
  // Only a host that maps weights gains from a cache; a GPU executable
  // copies every weight anyway.
  mapInPlace &= xfmrGpuAllocShared == nullptr;
  std::string cachePath =
      cache != WeightsCache::Off && mapInPlace ? weightsCachePath(manifests, source) : "";
  WeightsLoaded before = loaded;
  auto loadFrom = [&](const std::string &path) {
    loaded = before;
    BufferMap weights;
    for (const Manifest *manifest : manifests) {
      std::set<std::string> skip;
      for (const auto &entry : weights)
        skip.insert(entry.first);
      weights.merge(loadWeights(*manifest, path, skip, mapInPlace, &loaded));
    }
    return weights;
  };
  struct stat info;
  if (!cachePath.empty() && stat(cachePath.c_str(), &info) == 0) {
    try {
      BufferMap weights = loadFrom(cachePath);
      loaded.cacheRead = cachePath;
      return weights;
    } catch (const Failure &failure) {
      std::fprintf(stderr, "warning: the weights cache is not usable (%s): reading '%s'\n",
                   failure.message.c_str(), source.c_str());
    } catch (const std::bad_alloc &) {
      std::fprintf(stderr,
                   "warning: the weights cache is not usable (out of memory): reading '%s'\n",
                   source.c_str());
    }
  }
  BufferMap weights = loadFrom(source);
  constexpr size_t kCacheFrom = size_t(64) << 20;
  if (!cachePath.empty() &&
      (cache == WeightsCache::Always || loaded.converted - before.converted >= kCacheFrom)) {
    // Room for the cache and a tenth more: a cache never fills the disk.
    size_t bytes = 0;
    for (const auto &entry : weights)
      bytes += entry.second->size;
    std::string folder = cachePath.substr(0, cachePath.find_last_of('/'));
    struct statvfs disk;
    if (statvfs(folder.c_str(), &disk) == 0 &&
        static_cast<double>(disk.f_bavail) * disk.f_frsize < 1.1 * static_cast<double>(bytes)) {
      std::fprintf(stderr, "warning: no weights cache: %.1f MiB free in '%s', it takes %.1f MiB\n",
                   static_cast<double>(disk.f_bavail) * disk.f_frsize / 1048576.0, folder.c_str(),
                   bytes / 1048576.0);
      return weights;
    }
    try {
      writeWeights(manifests, weights, cachePath);
      loaded.cacheWritten = cachePath;
      removeStaleCaches(cachePath);
    } catch (const Failure &failure) {
      std::fprintf(stderr, "warning: no weights cache: %s\n", failure.message.c_str());
    }
  }
  return weights;
}

void xfmr::rt::writeModelWeights(const std::vector<Manifest> &manifests, const std::string &source,
                                 const std::string &path) {
  std::vector<const Manifest *> all;
  for (const Manifest &manifest : manifests)
    all.push_back(&manifest);
  WeightsLoaded loaded;
  writeWeights(all, loadModelWeights(all, source, /*mapInPlace=*/false, WeightsCache::Off, loaded),
               path);
}

std::string xfmr::rt::weightsCachePath(const std::vector<const Manifest *> &manifests,
                                       const std::string &source) {
  struct stat info;
  if (stat(source.c_str(), &info) != 0)
    return "";
  size_t slash = source.find_last_of('/');
  std::string folder = S_ISDIR(info.st_mode)        ? source
                       : slash == std::string::npos ? "."
                                                    : source.substr(0, std::max<size_t>(slash, 1));
  // Another file of the same folder (another checkpoint of the model) has
  // caches of its own.
  bool directory = S_ISDIR(info.st_mode);
  std::string sourceName = directory ? "" : source.substr(slash + 1);
  Fingerprint model, files;
  model.add(kCacheVersion, sourceName);
  for (const Manifest *manifest : manifests) {
    for (const std::string &prefix : manifest->weightPrefixes)
      model.add(prefix);
    for (const ArgSpec &arg : manifest->args)
      if (arg.kind == ArgSpec::Kind::Param) {
        model.add(arg.name, arg.source, arg.quantizedPart, int64_t(arg.dtype), arg.axis,
                  arg.groupSize, arg.bits, int64_t(arg.transposed));
        for (int64_t size : arg.shape)
          model.add(size);
      }
  }
  // The files the weights are read from, by name in the folder: a file (a
  // safetensors or GGUF file); an index and the tensors beside it; a
  // checkpoint directory's tensors and index.
  std::set<std::string> names;
  if (!directory)
    names.insert(sourceName);
  DIR *entries = directory || endsWith(sourceName, ".json") ? opendir(folder.c_str()) : nullptr;
  if (entries) {
    while (dirent *entry = readdir(entries)) {
      std::string name = entry->d_name;
      if (name.rfind(kCachePrefix, 0) != 0 &&
          (endsWith(name, ".safetensors") || endsWith(name, ".safetensors.index.json")))
        names.insert(name);
    }
    closedir(entries);
  }
  for (const std::string &name : names)
    if (stat((folder + "/" + name).c_str(), &info) == 0 && S_ISREG(info.st_mode))
      files.add(name, int64_t(info.st_size), int64_t(info.st_mtim.tv_sec),
                int64_t(info.st_mtim.tv_nsec));
  return folder + "/" + kCachePrefix + model.hex() + "-" + files.hex() + ".safetensors";
}

int xfmr_write_model_weights(const char *const *manifestsJson, size_t count, const char *source,
                             const char *path, char *err, size_t errSize) {
  try {
    std::vector<Manifest> manifests;
    for (size_t i = 0; i < count; ++i)
      manifests.push_back(parseManifest(manifestsJson[i]));
    writeModelWeights(manifests, source, path);
    return 0;
  } catch (const Failure &failure) {
    setError(err, errSize, failure.message);
    return 1;
  }
}

struct xfmr_model_weights {
  BufferMap buffers;
};

xfmr_model_weights *xfmr_model_weights_load(const char *manifestJson, const char *path, void **args,
                                            char *err, size_t errSize) {
  try {
    Manifest manifest = parseManifest(manifestJson);
    std::string source = path && *path ? path : manifest.defaultWeights;
    if (source.empty())
      fail("no weights: the model was not compiled from a checkpoint, pass a path");
    auto weights = std::make_unique<xfmr_model_weights>();
    weights->buffers = loadWeights(manifest, source, {}, /*mapInPlace=*/true);
    for (size_t i = 0; i < manifest.args.size(); ++i)
      if (manifest.args[i].kind == ArgSpec::Kind::Param)
        args[i] = weights->buffers.at(manifest.args[i].name)->data;
    return weights.release();
  } catch (const Failure &failure) {
    setError(err, errSize, failure.message);
    return nullptr;
  }
}

void xfmr_model_weights_free(xfmr_model_weights *weights) { delete weights; }
