//===- manifest.h - the schema of a compiled entry's manifest ---*- C++ -*-===//
//
// Every compiled entry carries a JSON manifest beside its code: the model's
// metadata (special tokens, generation rules, where its weights are) and its
// arguments (kinds, names, types, shapes, how weights are stored). xfmrc
// builds a Manifest and writes it with writeManifest; the runner, trainer,
// generator and embedders read it back with readManifest. Both live in the
// runtime library, so the format has one definition.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_RT_MANIFEST_H
#define XFMR_RT_MANIFEST_H

#include "xfmr-rt/xfmr_runtime.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace xfmr::rt {

/// What a model's config says beyond its entries' arguments.
struct ModelMetadata {
  std::string modelType;
  /// The Hugging Face class built (empty for the tutorial types).
  std::string architecture;
  int64_t padTokenId = 0;
  /// Tried in order in front of each parameter name when looking it up in a
  /// weights file (Hugging Face checkpoints of one architecture differ in
  /// the head they were saved with).
  std::vector<std::string> weightPrefixes{""};
  /// The checkpoint the model was compiled from, if any: where its weights
  /// are when none are given.
  std::string defaultWeights;
  /// Special tokens (-1: none); an encoder-decoder's decoder starts from
  /// decoderStartTokenId.
  int64_t bosTokenId = -1, decoderStartTokenId = -1;
  /// The tokens that end a sequence (Llama 3 lists several).
  std::vector<int64_t> eosTokenIds;
  /// generate()'s token rules, from generation_config.json (else the
  /// config): the first and last token it forces (-1: none) and the tokens
  /// it never generates (bad_words_ids of one token, suppress_tokens).
  int64_t forcedBosTokenId = -1, forcedEosTokenId = -1;
  std::vector<int64_t> suppressedTokenIds;
  /// A causal language model: position t's logits predict token t + 1.
  bool causalLanguageModel = false;
};

/// One argument or result of an entry, as the runtime and a C caller see it.
struct ArgSpec {
  /// State: an optimizer state tensor of a training step.
  enum class Kind { Input, Param, Output, State } kind;
  std::string name;
  xfmr_dtype dtype;
  std::vector<int64_t> shape;
  int64_t vocabSize = 0; // token inputs: the embedding table size ids index
  std::string init;      // weights: how a fresh model sets them (normal, zeros, ones)
  std::string updates;   // outputs: the weight or state whose buffer they may overwrite
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

struct Manifest : ModelMetadata {
  /// The entry's function in the compiled module.
  std::string entry;
  std::vector<ArgSpec> args;
  /// A training step's optimizer and its number-valued settings (lr,
  /// warmup_steps, steps, ...).
  std::string optimizer;
  std::map<std::string, double> training;
  /// The bytes of each compiled function's arena of temporaries that the
  /// entry runs, by function name.
  std::map<std::string, int64_t> arenas;

  const ArgSpec *find(const std::string &name, ArgSpec::Kind kind) const;
};

/// The manifest as JSON.
std::string writeManifest(const Manifest &manifest);

/// Parses a manifest; on failure returns nullopt and sets `error` to what
/// is wrong ("argument kind 'x'").
std::optional<Manifest> readManifest(std::string_view text, std::string &error);

} // namespace xfmr::rt

#endif // XFMR_RT_MANIFEST_H
