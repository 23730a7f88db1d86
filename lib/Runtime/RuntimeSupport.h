//===- RuntimeSupport.h - small helpers of the runtime ---------*- C++ -*-===//

#ifndef XFMR_LIB_RUNTIME_RUNTIMESUPPORT_H
#define XFMR_LIB_RUNTIME_RUNTIMESUPPORT_H

#include "xfmr-rt/xfmr_runtime.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace xfmr::rt {

/// Copies `message` into the caller's buffer (truncating, always terminated).
void setError(char *err, size_t errSize, const std::string &message);

/// Whether `text` ends with `suffix`.
inline bool endsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

/// "[2, 8, 64]".
std::string shapeToString(const std::vector<int64_t> &shape);

uint64_t elementCount(const std::vector<int64_t> &shape);

/// The float of IEEE half-precision bits.
float halfToFloat(uint16_t bits);

/// Converts `count` elements of `from` at the (possibly unaligned) `src` into
/// `to` at `dst` (floats to F32, integers to I32, U8 to BOOL, or the same
/// dtype); returns "" or what makes the conversion impossible.
std::string convertElements(xfmr_dtype from, const void *src, size_t count, xfmr_dtype to,
                            void *dst);

/// A FILE* that is closed on destruction and remembers write errors.
class OutputFile {
public:
  explicit OutputFile(const char *path);
  ~OutputFile();
  OutputFile(const OutputFile &) = delete;
  OutputFile &operator=(const OutputFile &) = delete;
  explicit operator bool() const { return file != nullptr; }
  void write(const void *data, size_t size);
  void print(const std::string &text) { write(text.data(), text.size()); }
  /// Flushes and closes; false if any write failed.
  bool close();

private:
  FILE *file;
  bool ownsFile;
  bool failed = false;
};

} // namespace xfmr::rt

#endif // XFMR_LIB_RUNTIME_RUNTIMESUPPORT_H
