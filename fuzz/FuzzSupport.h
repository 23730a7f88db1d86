//===- FuzzSupport.h - what the fuzz targets share --------------*- C++ -*-===//
//
// Readers that take a path (safetensors, token files, tokenizer files) are
// fuzzed through files in a scratch directory of this process, on tmpfs
// where there is one.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_FUZZ_FUZZSUPPORT_H
#define XFMR_FUZZ_FUZZSUPPORT_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <unistd.h>

namespace xfmr::fuzz {

/// This process's scratch directory, created on first use and removed at
/// exit.
inline const std::string &scratchDirectory() {
  static const std::string path = [] {
    std::string dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    std::string pattern = dir + "/xfmr-fuzz-XXXXXX";
    if (!mkdtemp(pattern.data())) {
      std::perror("xfmr-fuzz: mkdtemp");
      std::abort();
    }
    return pattern;
  }();
  static const int removal = std::atexit([] {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  });
  (void)removal;
  return path;
}

/// Writes `bytes` to `name` in the scratch directory; returns its path.
inline std::string writeScratchFile(const std::string &name, std::string_view bytes) {
  std::string path = scratchDirectory() + "/" + name;
  FILE *file = std::fopen(path.c_str(), "wb");
  if (!file || std::fwrite(bytes.data(), 1, bytes.size(), file) != bytes.size()) {
    std::perror(path.c_str());
    std::abort();
  }
  std::fclose(file);
  return path;
}

inline void removeScratchFile(const std::string &name) {
  std::remove((scratchDirectory() + "/" + name).c_str());
}

/// Splits `input` at the first occurrence of `separator`: the part before
/// it goes to `head`, the rest stays in `input`. Without one, all of it is
/// the head.
inline std::string_view takeUntil(std::string_view &input, std::string_view separator) {
  size_t at = input.find(separator);
  std::string_view head = input.substr(0, at);
  input = at == std::string_view::npos ? std::string_view() : input.substr(at + separator.size());
  return head;
}

inline std::string_view asText(const uint8_t *data, size_t size) {
  return std::string_view(reinterpret_cast<const char *>(data), size);
}

} // namespace xfmr::fuzz

#endif // XFMR_FUZZ_FUZZSUPPORT_H
