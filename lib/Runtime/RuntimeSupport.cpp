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

static float halfToFloat(uint16_t h) {
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

bool xfmr::rt::convertToF32(xfmr_dtype dtype, const void *src, size_t count, float *dst) {
  const auto *bytes = static_cast<const uint8_t *>(src);
  switch (dtype) {
  case XFMR_DTYPE_F32:
    std::memcpy(dst, bytes, count * 4);
    return true;
  case XFMR_DTYPE_F64:
    for (size_t i = 0; i < count; ++i) {
      double value;
      std::memcpy(&value, bytes + 8 * i, 8);
      dst[i] = static_cast<float>(value);
    }
    return true;
  case XFMR_DTYPE_F16:
    for (size_t i = 0; i < count; ++i) {
      uint16_t h;
      std::memcpy(&h, bytes + 2 * i, 2);
      dst[i] = halfToFloat(h);
    }
    return true;
  case XFMR_DTYPE_BF16:
    for (size_t i = 0; i < count; ++i) {
      uint16_t h;
      std::memcpy(&h, bytes + 2 * i, 2);
      uint32_t bits = uint32_t(h) << 16;
      std::memcpy(dst + i, &bits, 4);
    }
    return true;
  default:
    return false;
  }
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
