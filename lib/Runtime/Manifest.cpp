//===- Manifest.cpp - a compiled entry's arguments ------------------------===//

#include "Manifest.h"

#include "CommandLine.h"
#include "Json.h"

#include <algorithm>
#include <optional>

using namespace xfmr::rt;

static std::optional<xfmr_dtype> parseDtype(const std::string &name) {
  for (int d = XFMR_DTYPE_F32; d <= XFMR_DTYPE_BOOL; ++d)
    if (name == xfmr_dtype_name(static_cast<xfmr_dtype>(d)))
      return static_cast<xfmr_dtype>(d);
  return std::nullopt;
}

std::string xfmr::rt::floatPartName(xfmr_dtype dtype) {
  switch (dtype) {
  case XFMR_DTYPE_F32:
    return "f32";
  case XFMR_DTYPE_BF16:
    return "bf16";
  case XFMR_DTYPE_F16:
    return "f16";
  default:
    return "";
  }
}

const ArgSpec *Manifest::find(const std::string &name, ArgSpec::Kind kind) const {
  for (const ArgSpec &arg : args)
    if (arg.kind == kind && arg.name == name)
      return &arg;
  return nullptr;
}

Manifest xfmr::rt::parseManifest(const char *text) {
  std::string error;
  std::optional<Json> json = parseJson(text, error);
  if (!json || !json->is_object())
    fail("corrupt model manifest: " + error);
  Manifest manifest;
  if (const Json *type = field(*json, "model_type"))
    manifest.modelType = textOf(*type);
  if (const Json *pad = field(*json, "pad_token_id"))
    manifest.padTokenId = asInt(*pad).value_or(0);
  if (const Json *prefixes = field(*json, "weight_prefixes")) {
    manifest.weightPrefixes.clear();
    for (const Json &prefix : elements(*prefixes))
      manifest.weightPrefixes.push_back(textOf(prefix));
  }
  if (const Json *weights = field(*json, "default_weights"))
    manifest.defaultWeights = textOf(*weights);
  if (const Json *bos = field(*json, "bos_token_id"))
    manifest.bosTokenId = asInt(*bos).value_or(-1);
  if (const Json *start = field(*json, "decoder_start_token_id"))
    manifest.decoderStartTokenId = asInt(*start).value_or(-1);
  if (const Json *forced = field(*json, "forced_bos_token_id"))
    manifest.forcedBosTokenId = asInt(*forced).value_or(-1);
  if (const Json *forced = field(*json, "forced_eos_token_id"))
    manifest.forcedEosTokenId = asInt(*forced).value_or(-1);
  if (const Json *suppressed = field(*json, "suppress_tokens"))
    for (const Json &id : elements(*suppressed))
      manifest.suppressedTokenIds.push_back(asInt(id).value_or(-1));
  if (const Json *causal = field(*json, "causal_lm"))
    manifest.causalLanguageModel = isTrue(*causal);
  if (const Json *eos = field(*json, "eos_token_ids"))
    for (const Json &id : elements(*eos))
      manifest.eosTokenIds.push_back(asInt(id).value_or(-1));
  else if (const Json *single = field(*json, "eos_token_id"))
    manifest.eosTokenIds = {asInt(*single).value_or(-1)};
  if (const Json *training = field(*json, "training"))
    for (const auto &[key, value] : members(*training)) {
      if (key == "optimizer")
        manifest.optimizer = textOf(value);
      else if (std::optional<double> number = asDouble(value))
        manifest.training[key] = *number;
    }
  if (const Json *arenas = field(*json, "arenas"))
    for (const auto &[function, bytes] : members(*arenas)) {
      std::optional<int64_t> size = asInt(bytes);
      if (!size || *size < 0)
        fail("corrupt model manifest: arena of '" + function + "' is not a size");
      manifest.arenas[function] = *size;
    }
  const Json *args = field(*json, "args");
  if (!args || !args->is_array())
    fail("corrupt model manifest: no \"args\"");
  for (const Json &arg : elements(*args)) {
    ArgSpec spec;
    const Json *kind = field(arg, "kind");
    const Json *name = field(arg, "name");
    const Json *dtype = field(arg, "dtype");
    const Json *shape = field(arg, "shape");
    if (!kind || !name || !dtype || !shape)
      fail("corrupt model manifest: argument without kind/name/dtype/shape");
    static constexpr std::pair<const char *, ArgSpec::Kind> kinds[] = {
        {"input", ArgSpec::Kind::Input},
        {"param", ArgSpec::Kind::Param},
        {"output", ArgSpec::Kind::Output},
        {"state", ArgSpec::Kind::State}};
    auto known = std::find_if(std::begin(kinds), std::end(kinds),
                              [&](const auto &k) { return textOf(*kind) == k.first; });
    if (known == std::end(kinds))
      fail("corrupt model manifest: argument kind '" + textOf(*kind) + "'");
    spec.kind = known->second;
    spec.name = textOf(*name);
    std::optional<xfmr_dtype> parsed = parseDtype(textOf(*dtype));
    if (!parsed)
      fail("corrupt model manifest: dtype " + textOf(*dtype));
    spec.dtype = *parsed;
    for (const Json &dim : elements(*shape))
      spec.shape.push_back(asInt(dim).value_or(0));
    if (const Json *vocab = field(arg, "vocab_size"))
      spec.vocabSize = asInt(*vocab).value_or(0);
    if (const Json *init = field(arg, "init"))
      spec.init = textOf(*init);
    if (const Json *updates = field(arg, "updates"))
      spec.updates = textOf(*updates);
    if (const Json *quantized = field(arg, "quantized")) {
      const Json *source = field(*quantized, "source"), *part = field(*quantized, "part");
      const Json *axis = field(*quantized, "axis"), *group = field(*quantized, "group_size");
      // A float part is the tensor converted to the argument's type.
      std::string floatPart = floatPartName(spec.dtype);
      bool rounded = part && !floatPart.empty() && textOf(*part) == floatPart;
      bool groups = axis && group && asInt(*axis) && *asInt(*axis) >= 0 && *asInt(*axis) <= 1 &&
                    asInt(*group) && *asInt(*group) > 0;
      const Json *bits = field(*quantized, "bits");
      spec.bits = bits ? asInt(*bits).value_or(0) : 8;
      bool scaleLike = (part && (textOf(*part) == "scales" || textOf(*part) == "mins")) &&
                       (spec.dtype == XFMR_DTYPE_F32 || spec.dtype == XFMR_DTYPE_BF16 ||
                        spec.dtype == XFMR_DTYPE_F16);
      bool packed = spec.bits == 8 ||
                    (spec.bits == 4 && groups && *asInt(*axis) == 1 && *asInt(*group) % 32 == 0);
      if (!source || !part || spec.shape.size() != 2 || !packed ||
          !(rounded ||
            (groups && ((textOf(*part) == "values" && spec.dtype == XFMR_DTYPE_I8) || scaleLike))))
        fail("corrupt model manifest: quantized argument '" + spec.name + "'");
      spec.source = textOf(*source);
      spec.quantizedPart = textOf(*part);
      if (!rounded) {
        spec.axis = *asInt(*axis);
        spec.groupSize = *asInt(*group);
      }
      if (const Json *transposed = field(*quantized, "transposed"))
        spec.transposed = isTrue(*transposed);
    }
    manifest.args.push_back(std::move(spec));
  }
  return manifest;
}
