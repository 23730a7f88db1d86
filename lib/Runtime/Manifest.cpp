//===- Manifest.cpp - a compiled entry's manifest, written and read -------===//

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

static constexpr std::pair<const char *, ArgSpec::Kind> kArgKinds[] = {
    {"input", ArgSpec::Kind::Input},
    {"param", ArgSpec::Kind::Param},
    {"output", ArgSpec::Kind::Output},
    {"state", ArgSpec::Kind::State}};

const ArgSpec *Manifest::find(const std::string &name, ArgSpec::Kind kind) const {
  for (const ArgSpec &arg : args)
    if (arg.kind == kind && arg.name == name)
      return &arg;
  return nullptr;
}

std::string xfmr::rt::writeManifest(const Manifest &manifest) {
  Json args = Json::array();
  for (const ArgSpec &spec : manifest.args) {
    Json arg = {{"kind", kArgKinds[static_cast<int>(spec.kind)].first},
                {"name", spec.name},
                {"dtype", xfmr_dtype_name(spec.dtype)},
                {"shape", spec.shape}};
    if (spec.vocabSize)
      arg["vocab_size"] = spec.vocabSize;
    if (!spec.init.empty())
      arg["init"] = spec.init;
    if (!spec.updates.empty())
      arg["updates"] = spec.updates;
    if (!spec.quantizedPart.empty())
      arg["quantized"] = {{"source", spec.source}, {"part", spec.quantizedPart},
                          {"axis", spec.axis},     {"group_size", spec.groupSize},
                          {"bits", spec.bits},     {"transposed", spec.transposed}};
    args.push_back(std::move(arg));
  }
  Json json = {{"format", 1},
               {"model_type", manifest.modelType},
               {"architecture", manifest.architecture},
               {"entry", manifest.entry},
               {"pad_token_id", manifest.padTokenId},
               {"weight_prefixes", manifest.weightPrefixes},
               {"default_weights", manifest.defaultWeights},
               {"bos_token_id", manifest.bosTokenId},
               {"causal_lm", manifest.causalLanguageModel},
               {"decoder_start_token_id", manifest.decoderStartTokenId},
               {"forced_bos_token_id", manifest.forcedBosTokenId},
               {"forced_eos_token_id", manifest.forcedEosTokenId},
               {"suppress_tokens", manifest.suppressedTokenIds},
               {"eos_token_ids", manifest.eosTokenIds},
               {"args", std::move(args)}};
  if (!manifest.arenas.empty())
    json["arenas"] = manifest.arenas;
  if (!manifest.optimizer.empty()) {
    Json training = manifest.training;
    training["optimizer"] = manifest.optimizer;
    json["training"] = std::move(training);
  }
  // Names come from checkpoints: bytes that are not UTF-8 are replaced
  // rather than thrown on.
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::optional<Manifest> xfmr::rt::readManifest(std::string_view text, std::string &error) {
  std::optional<Json> json = parseJson(text, error);
  if (!json)
    return std::nullopt;
  if (!json->is_object()) {
    error = "not a JSON object";
    return std::nullopt;
  }
  auto corrupt = [&](std::string why) -> std::optional<Manifest> {
    error = std::move(why);
    return std::nullopt;
  };
  Manifest manifest;
  if (const Json *type = field(*json, "model_type"))
    manifest.modelType = textOf(*type);
  if (const Json *architecture = field(*json, "architecture"))
    manifest.architecture = textOf(*architecture);
  if (const Json *entry = field(*json, "entry"))
    manifest.entry = textOf(*entry);
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
        return corrupt("arena of '" + function + "' is not a size");
      manifest.arenas[function] = *size;
    }
  const Json *args = field(*json, "args");
  if (!args || !args->is_array())
    return corrupt("no \"args\"");
  for (const Json &arg : elements(*args)) {
    ArgSpec spec;
    const Json *kind = field(arg, "kind");
    const Json *name = field(arg, "name");
    const Json *dtype = field(arg, "dtype");
    const Json *shape = field(arg, "shape");
    if (!kind || !name || !dtype || !shape)
      return corrupt("argument without kind/name/dtype/shape");
    auto known = std::find_if(std::begin(kArgKinds), std::end(kArgKinds),
                              [&](const auto &k) { return textOf(*kind) == k.first; });
    if (known == std::end(kArgKinds))
      return corrupt("argument kind '" + textOf(*kind) + "'");
    spec.kind = known->second;
    spec.name = textOf(*name);
    std::optional<xfmr_dtype> parsed = parseDtype(textOf(*dtype));
    if (!parsed)
      return corrupt("dtype " + textOf(*dtype));
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
        return corrupt("quantized argument '" + spec.name + "'");
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

Manifest xfmr::rt::parseManifest(const char *text) {
  std::string error;
  std::optional<Manifest> manifest = readManifest(text, error);
  if (!manifest)
    fail("corrupt model manifest: " + error);
  return std::move(*manifest);
}
