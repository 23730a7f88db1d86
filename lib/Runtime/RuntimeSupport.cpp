//===- RuntimeSupport.cpp - small helpers of the runtime ------------------===//

#include "RuntimeSupport.h"

#include <cstring>

using namespace xfmr::rt;

void xfmr::rt::setError(char *err, size_t errSize, const std::string &message) {
  if (!err || errSize == 0)
    return;
  size_t length = std::min(message.size(), errSize - 1);
  std::memcpy(err, message.data(), length);
  err[length] = '\0';
}

std::string xfmr::rt::shapeToString(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

uint64_t xfmr::rt::elementCount(const std::vector<int64_t> &shape) {
  uint64_t count = 1;
  for (int64_t d : shape)
    count *= static_cast<uint64_t>(d);
  return count;
}

float xfmr::rt::halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exponent = (h >> 10) & 0x1F;
  uint32_t mantissa = h & 0x3FF;
  uint32_t bits;
  if (exponent == 0x1F) {
    bits = sign | 0x7F800000 | (mantissa << 13);
  } else if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {
      // Subnormal: normalise.
      int shift = 0;
      while (!(mantissa & 0x400)) {
        mantissa <<= 1;
        ++shift;
      }
      mantissa &= 0x3FF;
      bits = sign | uint32_t(127 - 15 - shift + 1) << 23 | (mantissa << 13);
    }
  } else {
    bits = sign | (exponent + 127 - 15) << 23 | (mantissa << 13);
  }
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

static bool isFloat(xfmr_dtype dtype) {
  return dtype == XFMR_DTYPE_F32 || dtype == XFMR_DTYPE_F64 || dtype == XFMR_DTYPE_F16 ||
         dtype == XFMR_DTYPE_BF16;
}

static bool isInteger(xfmr_dtype dtype) {
  return dtype == XFMR_DTYPE_I64 || dtype == XFMR_DTYPE_I32 || dtype == XFMR_DTYPE_I16 ||
         dtype == XFMR_DTYPE_I8 || dtype == XFMR_DTYPE_U8;
}

/// One element of `dtype` at `src`, widened.
template <typename T>
static T load(const uint8_t *src) {
  T value;
  std::memcpy(&value, src, sizeof(T));
  return value;
}

static double loadFloat(xfmr_dtype dtype, const uint8_t *src) {
  switch (dtype) {
  case XFMR_DTYPE_F32: return load<float>(src);
  case XFMR_DTYPE_F64: return load<double>(src);
  case XFMR_DTYPE_F16: return halfToFloat(load<uint16_t>(src));
  default: {
    uint32_t bits = uint32_t(load<uint16_t>(src)) << 16;
    float value;
    std::memcpy(&value, &bits, 4);
    return value;
  }
  }
}

/// `value >> shift`, rounded to nearest, ties to even.
static uint32_t shiftRoundingToEven(uint32_t value, uint32_t shift) {
  uint32_t result = value >> shift;
  uint32_t rest = value & ((1u << shift) - 1), half = 1u << (shift - 1);
  return result + (rest > half || (rest == half && (result & 1)));
}

/// The nearest IEEE half of `value` (ties to even; infinities on
/// overflow, subnormals and signed zeros below the normal range).
static uint16_t floatToHalf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  uint32_t sign = (bits >> 16) & 0x8000, exponent = (bits >> 23) & 0xFF, mantissa = bits & 0x7FFFFF;
  if (exponent == 0xFF)
    return sign | 0x7C00 | (mantissa ? 0x200 : 0);
  int32_t halfExponent = int32_t(exponent) - 127 + 15;
  if (halfExponent >= 0x1F)
    return sign | 0x7C00;
  if (halfExponent <= 0) {
    if (halfExponent < -10)
      return sign;
    // Units of 2^-24: a carry into bit 10 is the smallest normal, as encoded.
    return sign | shiftRoundingToEven(mantissa | 0x800000, 14 - halfExponent);
  }
  // A carry out of the mantissa increments the exponent (to infinity at the top).
  return sign | shiftRoundingToEven((uint32_t(halfExponent) << 23) | mantissa, 13);
}

/// The nearest bfloat16 of `value` (ties to even; NaNs stay quiet NaNs).
static uint16_t floatToBfloat(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7FFFFFFF) > 0x7F800000)
    return uint16_t((bits >> 16) | 0x40);
  return uint16_t(shiftRoundingToEven(bits, 16));
}

static int64_t loadInteger(xfmr_dtype dtype, const uint8_t *src) {
  switch (dtype) {
  case XFMR_DTYPE_I64: return load<int64_t>(src);
  case XFMR_DTYPE_I32: return load<int32_t>(src);
  case XFMR_DTYPE_I16: return load<int16_t>(src);
  case XFMR_DTYPE_I8: return load<int8_t>(src);
  default: return load<uint8_t>(src);
  }
}

std::string xfmr::rt::convertElements(xfmr_dtype from, const void *source, size_t count,
                                      xfmr_dtype to, void *dst) {
  const auto *src = static_cast<const uint8_t *>(source);
  size_t size = xfmr_dtype_size(from);
  if (from == to) {
    std::memcpy(dst, src, count * size);
    return "";
  }
  if (to == XFMR_DTYPE_F32 && isFloat(from)) {
    auto *out = static_cast<float *>(dst);
    for (size_t i = 0; i < count; ++i)
      out[i] = static_cast<float>(loadFloat(from, src + i * size));
    return "";
  }
  if ((to == XFMR_DTYPE_BF16 || to == XFMR_DTYPE_F16) && isFloat(from)) {
    auto *out = static_cast<uint16_t *>(dst);
    for (size_t i = 0; i < count; ++i) {
      auto value = static_cast<float>(loadFloat(from, src + i * size));
      out[i] = to == XFMR_DTYPE_BF16 ? floatToBfloat(value) : floatToHalf(value);
    }
    return "";
  }
  if (to == XFMR_DTYPE_I32 && isInteger(from)) {
    auto *out = static_cast<int32_t *>(dst);
    for (size_t i = 0; i < count; ++i) {
      int64_t value = loadInteger(from, src + i * size);
      if (value < INT32_MIN || value > INT32_MAX)
        return "value " + std::to_string(value) + " does not fit in int32";
      out[i] = static_cast<int32_t>(value);
    }
    return "";
  }
  if (to == XFMR_DTYPE_BOOL && from == XFMR_DTYPE_U8) {
    auto *out = static_cast<uint8_t *>(dst);
    for (size_t i = 0; i < count; ++i)
      out[i] = src[i] != 0;
    return "";
  }
  return std::string("dtype ") + xfmr_dtype_name(from) + " cannot be read as " +
         xfmr_dtype_name(to);
}

OutputFile::OutputFile(const char *path)
    : file(std::strcmp(path, "-") == 0 ? stdout : std::fopen(path, "wb")),
      ownsFile(std::strcmp(path, "-") != 0) {}

OutputFile::~OutputFile() { close(); }

void OutputFile::write(const void *data, size_t size) {
  if (file && size && std::fwrite(data, 1, size, file) != size)
    failed = true;
}

bool OutputFile::close() {
  if (!file)
    return !failed;
  if (std::fflush(file) != 0)
    failed = true;
  if (ownsFile && std::fclose(file) != 0)
    failed = true;
  file = nullptr;
  return !failed;
}
