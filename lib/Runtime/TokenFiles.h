//===- TokenFiles.h - token-id lines ----------------------------*- C++ -*-===//
//
// The runner's and trainer's token files: lines of ids, an optional '|'
// between an encoder's and a decoder's, and the model inputs they fill.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_RUNTIME_TOKENFILES_H
#define XFMR_LIB_RUNTIME_TOKENFILES_H

#include <cstdint>
#include <string>
#include <vector>

namespace xfmr::rt {

/// One line of a token file: ids before and after an optional '|'.
struct Sequence {
  std::vector<int64_t> segments[2];
  int line;
};

/// Reads token-id lines from `path` ("-": stdin), skipping blank lines and
/// '#' comments. Errors name `displayName:line`.
std::vector<Sequence> readSequences(const std::string &path, const std::string &displayName);

/// How a model input is filled from a line of a token file.
struct InputRole {
  const char *name;
  int segment;     // 0: before '|', 1: after
  bool isMask;     // 1 for real tokens, 0 for padding
  bool isTokenIds; // otherwise zeros (token_type_ids)
};

/// The role of the input called `name`, or null if a token file cannot fill it.
const InputRole *roleOf(const std::string &name);

} // namespace xfmr::rt

#endif // XFMR_LIB_RUNTIME_TOKENFILES_H
