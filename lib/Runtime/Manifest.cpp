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
  std::optional<JsonValue> json = parseJson(text, error);
  if (!json || !json->isObject())
    fail("corrupt model manifest: " + error);
  Manifest manifest;
  if (const JsonValue *type = json->get("model_type"))
    manifest.modelType = type->text;
  if (const JsonValue *pad = json->get("pad_token_id"))
    manifest.padTokenId = pad->asInt().value_or(0);
  if (const JsonValue *prefixes = json->get("weight_prefixes")) {
    manifest.weightPrefixes.clear();
    for (const JsonValue &prefix : prefixes->array)
      manifest.weightPrefixes.push_back(prefix.text);
  }
  if (const JsonValue *weights = json->get("default_weights"))
    manifest.defaultWeights = weights->text;
  if (const JsonValue *bos = json->get("bos_token_id"))
    manifest.bosTokenId = bos->asInt().value_or(-1);
  if (const JsonValue *start = json->get("decoder_start_token_id"))
    manifest.decoderStartTokenId = start->asInt().value_or(-1);
  if (const JsonValue *forced = json->get("forced_bos_token_id"))
    manifest.forcedBosTokenId = forced->asInt().value_or(-1);
  if (const JsonValue *forced = json->get("forced_eos_token_id"))
    manifest.forcedEosTokenId = forced->asInt().value_or(-1);
  if (const JsonValue *suppressed = json->get("suppress_tokens"))
    for (const JsonValue &id : suppressed->array)
      manifest.suppressedTokenIds.push_back(id.asInt().value_or(-1));
  if (const JsonValue *causal = json->get("causal_lm"))
    manifest.causalLanguageModel = causal->boolean;
  if (const JsonValue *eos = json->get("eos_token_ids"))
    for (const JsonValue &id : eos->array)
      manifest.eosTokenIds.push_back(id.asInt().value_or(-1));
  else if (const JsonValue *single = json->get("eos_token_id"))
    manifest.eosTokenIds = {single->asInt().value_or(-1)};
  if (const JsonValue *training = json->get("training"))
    for (const auto &[key, value] : training->object) {
      if (key == "optimizer")
        manifest.optimizer = value.text;
      else if (std::optional<double> number = value.asDouble())
        manifest.training[key] = *number;
    }
  const JsonValue *args = json->get("args");
  if (!args || !args->isArray())
    fail("corrupt model manifest: no \"args\"");
  for (const JsonValue &arg : args->array) {
    ArgSpec spec;
    const JsonValue *kind = arg.get("kind");
    const JsonValue *name = arg.get("name");
    const JsonValue *dtype = arg.get("dtype");
    const JsonValue *shape = arg.get("shape");
    if (!kind || !name || !dtype || !shape)
      fail("corrupt model manifest: argument without kind/name/dtype/shape");
    static constexpr std::pair<const char *, ArgSpec::Kind> kinds[] = {
        {"input", ArgSpec::Kind::Input},
        {"param", ArgSpec::Kind::Param},
        {"output", ArgSpec::Kind::Output},
        {"state", ArgSpec::Kind::State}};
    auto known = std::find_if(std::begin(kinds), std::end(kinds),
                              [&](const auto &k) { return kind->text == k.first; });
    if (known == std::end(kinds))
      fail("corrupt model manifest: argument kind '" + kind->text + "'");
    spec.kind = known->second;
    spec.name = name->text;
    std::optional<xfmr_dtype> parsed = parseDtype(dtype->text);
    if (!parsed)
      fail("corrupt model manifest: dtype " + dtype->text);
    spec.dtype = *parsed;
    for (const JsonValue &dim : shape->array)
      spec.shape.push_back(dim.asInt().value_or(0));
    if (const JsonValue *vocab = arg.get("vocab_size"))
      spec.vocabSize = vocab->asInt().value_or(0);
    if (const JsonValue *init = arg.get("init"))
      spec.init = init->text;
    if (const JsonValue *updates = arg.get("updates"))
      spec.updates = updates->text;
    if (const JsonValue *quantized = arg.get("quantized")) {
      const JsonValue *source = quantized->get("source"), *part = quantized->get("part");
      const JsonValue *axis = quantized->get("axis"), *group = quantized->get("group_size");
      // A float part is the tensor converted to the argument's type.
      std::string floatPart = floatPartName(spec.dtype);
      bool rounded = part && !floatPart.empty() && part->text == floatPart;
      bool groups = axis && group && axis->asInt() && *axis->asInt() >= 0 && *axis->asInt() <= 1 &&
                    group->asInt() && *group->asInt() > 0;
      const JsonValue *bits = quantized->get("bits");
      spec.bits = bits ? bits->asInt().value_or(0) : 8;
      bool scaleLike = (part && (part->text == "scales" || part->text == "mins")) &&
                       (spec.dtype == XFMR_DTYPE_F32 || spec.dtype == XFMR_DTYPE_BF16);
      bool packed = spec.bits == 8 ||
                    (spec.bits == 4 && groups && *axis->asInt() == 1 && *group->asInt() % 32 == 0);
      if (!source || !part || spec.shape.size() != 2 || !packed ||
          !(rounded ||
            (groups && ((part->text == "values" && spec.dtype == XFMR_DTYPE_I8) || scaleLike))))
        fail("corrupt model manifest: quantized argument '" + spec.name + "'");
      spec.source = source->text;
      spec.quantizedPart = part->text;
      if (!rounded) {
        spec.axis = *axis->asInt();
        spec.groupSize = *group->asInt();
      }
      if (const JsonValue *transposed = quantized->get("transposed"))
        spec.transposed = transposed->kind == JsonValue::Kind::Bool && transposed->boolean;
    }
    manifest.args.push_back(std::move(spec));
  }
  return manifest;
}
