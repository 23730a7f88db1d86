//===- Manifest.h - what the runner and trainer share ----------*- C++ -*-===//
//
// A compiled entry carries a JSON manifest of its arguments. The runner
// (Runner.cpp) and the trainer (Trainer.cpp) both read it, allocate aligned
// buffers, load weights by name and read token files.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_RUNTIME_MANIFEST_H
#define XFMR_LIB_RUNTIME_MANIFEST_H

#include "xfmr-rt/xfmr_runtime.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace xfmr::rt {

/// Reported as `<argv0>: error: <message>` and exit code 1.
class Failure {
public:
  explicit Failure(std::string message) : message(std::move(message)) {}
  std::string message;
};

[[noreturn]] void fail(const std::string &message);

struct ArgSpec {
  enum class Kind { Input, Param, Output, State } kind;
  std::string name;
  xfmr_dtype dtype;
  std::vector<int64_t> shape;
  int64_t vocabSize = 0; // token inputs only
  std::string init;      // weights: normal, zeros or ones
  std::string updates;   // outputs: the weight or state they replace
  /// int8 weights: the part ("values" or "scales") of checkpoint tensor
  /// `source` quantized in groups of `groupSize` along dimension `axis`.
  std::string source, quantizedPart;
  int64_t axis = 0, groupSize = 0;
};

struct Manifest {
  std::string modelType;
  int64_t padTokenId = 0;
  std::vector<std::string> weightPrefixes{""};
  /// The checkpoint the model was compiled from, if any.
  std::string defaultWeights;
  /// Special tokens of the model's config (-1: none).
  int64_t bosTokenId = -1, eosTokenId = -1, decoderStartTokenId = -1;
  /// generate()'s token rules (ModelInfo's).
  int64_t forcedBosTokenId = -1, forcedEosTokenId = -1;
  std::vector<int64_t> suppressedTokenIds;
  /// Position t's logits predict token t + 1.
  bool causalLanguageModel = false;
  std::vector<ArgSpec> args;
  /// A training step's "training" object: the optimizer and the
  /// number-valued settings.
  std::string optimizer;
  std::map<std::string, double> training;

  const ArgSpec *find(const std::string &name, ArgSpec::Kind kind) const;
};

Manifest parseManifest(const char *text);

/// A zero-filled, 64-byte aligned buffer.
struct Buffer {
  explicit Buffer(size_t bytes);
  ~Buffer();
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  uint8_t *data;
  size_t size;
  template <typename T> T *as() { return reinterpret_cast<T *>(data); }
};

std::unique_ptr<Buffer> allocate(const ArgSpec &arg);

/// Reads every weight of `manifest` from the safetensors file at `path`
/// (trying the manifest's name prefixes) as finite float32.
std::map<std::string, std::unique_ptr<Buffer>> loadWeights(const Manifest &manifest,
                                                           const std::string &path);

/// One line of a token file: ids before and after an optional '|'.
struct Sequence {
  std::vector<int64_t> segments[2];
  int line;
};

/// Reads token-id lines from `path` ("-": stdin), skipping blank lines and
/// '#' comments. Errors name `displayName:line`.
std::vector<Sequence> readSequences(const std::string &path, const std::string &displayName);

/// Parses `--flag=value` / `--flag value` at argv[i]; advances i past a
/// separate value.
bool flagValue(int argc, char **argv, int &i, const char *flag, std::string &value);

/// A non-negative integer flag value no larger than `max`.
int64_t parseCount(const char *flag, const std::string &text, int64_t max = int64_t(1) << 40);

/// How a model input is filled from a line of a token file.
struct InputRole {
  const char *name;
  int segment;     // 0: before '|', 1: after
  bool isMask;     // 1 for real tokens, 0 for padding
  bool isTokenIds; // otherwise zeros (token_type_ids)
};

/// The role of the input called `name`, or null if a token file cannot fill it.
const InputRole *roleOf(const std::string &name);

/// Whether the command line asks for --help (or -h).
bool wantsHelp(int argc, char **argv);

/// Sets the OpenMP thread count; 0 keeps the default.
void setThreads(int threads);

/// Runs `body` as a program's main: with the heap tuned for per-call
/// temporaries, and a Failure reported as `argv0: error: ...`, exit code 1.
int runCommandLine(const char *argv0, const std::function<int()> &body);

} // namespace xfmr::rt

#endif // XFMR_LIB_RUNTIME_MANIFEST_H
