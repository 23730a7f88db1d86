//===- Manifest.h - a compiled entry's arguments ----------------*- C++ -*-===//
//
// A compiled entry carries a JSON manifest of its arguments (kinds, names,
// types, shapes, how weights are stored); the runner, the trainer and the
// generator read it.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_RUNTIME_MANIFEST_H
#define XFMR_LIB_RUNTIME_MANIFEST_H

#include "xfmr-rt/xfmr_runtime.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace xfmr::rt {

struct ArgSpec {
  enum class Kind { Input, Param, Output, State } kind;
  std::string name;
  xfmr_dtype dtype;
  std::vector<int64_t> shape;
  int64_t vocabSize = 0; // token inputs only
  std::string init;      // weights: normal, zeros or ones
  std::string updates;   // outputs: the weight or state they replace
  /// Weights stored as decoding reads them: the part ("values", "scales"
  /// or "mins") of checkpoint tensor `source` quantized to `bits` (8 or 4)
  /// in groups of `groupSize` along dimension `axis`, or it converted to
  /// `dtype` ("f32", "bf16", "f16"); `transposed`: of the tensor's
  /// transpose. 4-bit values are two a byte (docs/quantization.md).
  std::string source, quantizedPart;
  int64_t axis = 0, groupSize = 0, bits = 8;
  bool transposed = false;

  /// Whether this is the values, scales or mins of an integer weight.
  bool isIntegerPart() const {
    return quantizedPart == "values" || quantizedPart == "scales" || quantizedPart == "mins";
  }
};

/// The name of a float `dtype` as a stored part ("f32", "bf16", "f16"), or
/// empty for other types.
std::string floatPartName(xfmr_dtype dtype);

struct Manifest {
  std::string modelType;
  int64_t padTokenId = 0;
  std::vector<std::string> weightPrefixes{""};
  /// The checkpoint the model was compiled from, if any.
  std::string defaultWeights;
  /// Special tokens of the model's config (-1: none).
  int64_t bosTokenId = -1, decoderStartTokenId = -1;
  /// The tokens that end a sequence.
  std::vector<int64_t> eosTokenIds;
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
  /// The bytes of each compiled function's arena of temporaries that the
  /// entry runs, by function name.
  std::map<std::string, int64_t> arenas;

  const ArgSpec *find(const std::string &name, ArgSpec::Kind kind) const;
};

Manifest parseManifest(const char *text);

} // namespace xfmr::rt

#endif // XFMR_LIB_RUNTIME_MANIFEST_H
