//===- ModelBuilder.cpp - config.json to xfmr IR ----------------*- C++ -*-===//

#include "FrontendSupport.h"

#include "xfmr/Conversion/KernelLimits.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace xfmr;
using namespace xfmr::frontend;
namespace json = llvm::json;

//===----------------------------------------------------------------------===//
// ConfigReader
//===----------------------------------------------------------------------===//

static std::string keyList(ArrayRef<StringRef> keys) {
  std::string text = "'" + keys.front().str() + "'";
  for (StringRef key : keys.drop_front())
    text += " (or '" + key.str() + "')";
  return text;
}

void ConfigReader::fail(const Twine &message) {
  if (parent)
    return parent->fail(message);
  if (!firstError)
    firstError = message.str();
}

void ConfigReader::error(StringRef key, const Twine &message) {
  fail(path + ": key '" + prefix + key + "': " + message);
}

std::optional<ConfigReader> ConfigReader::nested(ArrayRef<StringRef> keys) {
  StringRef key;
  const json::Value *value = lookup(keys, key);
  if (!value)
    return std::nullopt;
  const json::Object *inner = value->getAsObject();
  if (!inner) {
    error(key, "expected an object");
    return std::nullopt;
  }
  ConfigReader reader(path, *inner);
  reader.parent = this;
  reader.prefix = (prefix + key + ".").str();
  return reader;
}

std::vector<std::string> ConfigReader::strings(StringRef key, size_t count) {
  const json::Value *value = lookup(key);
  if (!value)
    return {};
  const json::Array *items = value->getAsArray();
  std::vector<std::string> texts;
  if (items)
    for (const json::Value &item : *items)
      if (std::optional<StringRef> text = item.getAsString())
        texts.push_back(text->str());
  if (!items || texts.size() != items->size() || texts.size() != count) {
    error(key, "expected a list of " + Twine(count) + " strings");
    return {};
  }
  return texts;
}

std::vector<double> ConfigReader::positiveNumbers(StringRef key, size_t count) {
  const json::Value *value = lookup(key);
  const json::Array *items = value ? value->getAsArray() : nullptr;
  std::vector<double> numbers;
  if (items)
    for (const json::Value &item : *items)
      if (std::optional<double> number = item.getAsNumber();
          number && *number > 0 && std::isfinite(*number))
        numbers.push_back(*number);
  if (!items || numbers.size() != items->size() || numbers.size() != count) {
    error(key, "expected a list of " + Twine(count) + " positive numbers");
    numbers.assign(count, 1.0);
  }
  return numbers;
}

const json::Value *ConfigReader::lookup(ArrayRef<StringRef> keys, StringRef &found) {
  for (StringRef key : keys)
    if (const json::Value *value = object.get(key); value && !value->getAsNull()) {
      found = key;
      return value;
    }
  return nullptr;
}

const json::Value *ConfigReader::lookup(StringRef key) {
  StringRef found;
  return lookup(ArrayRef<StringRef>{key}, found);
}

/// The value as an int64, if it is an integer. llvm::json converts a double
/// of exactly 2^63 (out of int64's range: undefined behaviour), so such
/// doubles are refused first.
static std::optional<int64_t> integerOf(const json::Value &value) {
  if (std::optional<double> number = value.getAsNumber(); number && std::fabs(*number) >= 0x1p63)
    return std::nullopt;
  return value.getAsInteger();
}

int64_t ConfigReader::positiveInt(ArrayRef<StringRef> keys, int64_t fallback) {
  StringRef key;
  const json::Value *value = lookup(keys, key);
  if (!value) {
    if (fallback > 0)
      return fallback;
    SmallVector<std::string> named =
        llvm::map_to_vector(keys, [&](StringRef key) { return prefix + key.str(); });
    fail(path + ": missing key " + keyList(SmallVector<StringRef>(named.begin(), named.end())));
    return 1;
  }
  std::optional<int64_t> number = integerOf(*value);
  if (!number || *number <= 0) {
    std::string text;
    llvm::raw_string_ostream(text) << *value;
    error(key, "expected a positive integer, got " + text);
    return 1;
  }
  // Sizes beyond this cannot describe a real model and would overflow shape
  // arithmetic.
  if (*number > (int64_t(1) << 31)) {
    error(key, "value " + Twine(*number) + " is too large");
    return 1;
  }
  return *number;
}

int64_t ConfigReader::layerCount(ArrayRef<StringRef> keys, int64_t fallback) {
  // Each layer is IR to build and compile; the deepest real models have a
  // few hundred.
  constexpr int64_t kMaxLayers = 1024;
  int64_t layers = positiveInt(keys, fallback);
  if (layers > kMaxLayers) {
    StringRef key;
    lookup(keys, key);
    error(key, Twine(layers) + " layers is more than the supported " + Twine(kMaxLayers));
    return 1;
  }
  return layers;
}

int64_t ConfigReader::nonNegativeInt(StringRef key, int64_t fallback) {
  const json::Value *value = lookup(key);
  if (!value)
    return fallback;
  std::optional<int64_t> number = integerOf(*value);
  if (!number || *number < 0) {
    error(key, "expected a non-negative integer");
    return fallback;
  }
  return *number;
}

int64_t ConfigReader::tokenId(StringRef key) { return nonNegativeInt(key, -1); }

std::vector<int64_t> ConfigReader::tokenIds(StringRef key) {
  const json::Value *value = lookup(key);
  if (!value)
    return {};
  const json::Array *items = value->getAsArray();
  if (!items) {
    int64_t id = tokenId(key);
    return id < 0 ? std::vector<int64_t>() : std::vector<int64_t>{id};
  }
  std::vector<int64_t> ids;
  for (const json::Value &item : *items) {
    std::optional<int64_t> id = integerOf(item);
    if (!id || *id < 0) {
      error(key, "expected a token id or a list of token ids");
      return {};
    }
    ids.push_back(*id);
  }
  return ids;
}

int64_t ConfigReader::objectSize(StringRef key, int64_t fallback) {
  const json::Value *value = lookup(key);
  if (!value)
    return fallback;
  const json::Object *entries = value->getAsObject();
  if (!entries) {
    error(key, "expected an object");
    return fallback;
  }
  return static_cast<int64_t>(entries->size());
}

std::string ConfigReader::firstString(StringRef key) {
  const json::Value *value = lookup(key);
  if (!value)
    return "";
  const json::Array *items = value->getAsArray();
  std::optional<StringRef> first =
      items && !items->empty() ? (*items)[0].getAsString() : std::nullopt;
  if (!first) {
    error(key, "expected an array of strings");
    return "";
  }
  return first->str();
}

double ConfigReader::positiveNumber(StringRef key, double fallback) {
  const json::Value *value = lookup(key);
  if (!value)
    return fallback;
  std::optional<double> number = value->getAsNumber();
  if (!number || !(*number > 0) || !std::isfinite(*number)) {
    error(key, "expected a positive number");
    return fallback;
  }
  return *number;
}

double ConfigReader::probability(StringRef key, double fallback) {
  const json::Value *value = lookup(key);
  if (!value)
    return fallback;
  std::optional<double> number = value->getAsNumber();
  if (!number || !(*number >= 0 && *number < 1)) {
    error(key, "expected a probability in [0, 1)");
    return fallback;
  }
  return *number;
}

bool ConfigReader::boolean(StringRef key, bool fallback) {
  const json::Value *value = lookup(key);
  if (!value)
    return fallback;
  std::optional<bool> flag = value->getAsBoolean();
  if (!flag) {
    error(key, "expected true or false");
    return fallback;
  }
  return *flag;
}

std::string ConfigReader::string(ArrayRef<StringRef> keys, StringRef fallback) {
  StringRef key;
  const json::Value *value = lookup(keys, key);
  if (!value)
    return fallback.str();
  std::optional<StringRef> text = value->getAsString();
  if (!text) {
    error(key, "expected a string");
    return fallback.str();
  }
  return text->str();
}

std::optional<Activation> ConfigReader::parseActivation(StringRef name) {
  return llvm::StringSwitch<std::optional<Activation>>(name)
      .Case("relu", Activation::relu)
      .Case("gelu", Activation::gelu)
      .Cases({"gelu_new", "gelu_pytorch_tanh", "gelu_fast"}, Activation::gelu_tanh)
      .Cases({"silu", "swish"}, Activation::silu)
      .Case("tanh", Activation::tanh)
      .Default(std::nullopt);
}

Activation ConfigReader::activation(ArrayRef<StringRef> keys, StringRef fallback) {
  std::string name = string(keys, fallback);
  if (std::optional<Activation> parsed = parseActivation(name))
    return *parsed;
  StringRef key;
  lookup(keys, key);
  error(key.empty() ? keys.front() : key,
        "unsupported activation \"" + name + "\" (" + kActivationNames + ")");
  return Activation::relu;
}

// The attention kernels keep a query row in registers; real models use head
// sizes up to 256.
static constexpr int64_t kMaxHeadSize = 1024;

void ConfigReader::requireDivisible(StringRef modelKey, int64_t dModel, StringRef headsKey,
                                    int64_t heads) {
  if (failed())
    return;
  if (dModel % heads != 0)
    error(modelKey, Twine(dModel) + " is not divisible by '" + headsKey + "' (" +
                        Twine(heads) + ")");
  else if (dModel / heads > kMaxHeadSize)
    error(modelKey, "head size " + Twine(dModel / heads) + " ('" + modelKey + "' / '" + headsKey +
                        "') is larger than the supported " + Twine(kMaxHeadSize));
}

void ConfigReader::requireHeadSize(StringRef key, int64_t headSize) {
  if (!failed() && headSize > kMaxHeadSize)
    error(key,
          "head size " + Twine(headSize) + " is larger than the supported " + Twine(kMaxHeadSize));
}

llvm::Expected<json::Value> xfmr::frontend::parseJsonFile(StringRef path, StringRef text) {
  constexpr int kMaxDepth = 64;
  int depth = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth)
        return llvm::createStringError(path + ": invalid JSON: nested deeper than " +
                                       Twine(kMaxDepth) + " levels");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  llvm::Expected<json::Value> value = json::parse(text);
  if (!value)
    return llvm::createStringError(path + ": invalid JSON: " + toString(value.takeError()));
  return value;
}

llvm::Error ConfigReader::takeError() {
  if (!firstError)
    return llvm::Error::success();
  return llvm::createStringError(*firstError);
}

/// The KV cache's positions unless --max-context says (or the model has
/// fewer): a model of 128K positions would otherwise reserve gigabytes.
static constexpr int64_t kDefaultMaxContext = 4096;

/// The tokens a call of the module's prefill entry reads per sequence.
static int64_t prefillChunk(ModuleOp module) {
  auto prefill = module.lookupSymbol<func::FuncOp>("prefill");
  for (BlockArgument arg : prefill.getArguments())
    if (auto name = prefill.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "xfmr.input"))
      if (name.getValue() == "input_ids" || name.getValue() == "decoder_input_ids")
        return cast<RankedTensorType>(arg.getType()).getDimSize(1);
  return 0;
}

/// Tokens per prefill call unless --seq-len says: a prompt of up to this
/// many runs in one call, whose products are as efficient as a full
/// forward's (chunks of 64 prefilled GPT-2 small 20% slower).
static constexpr int64_t kDefaultPrefillChunk = 128;

int64_t GraphBuilder::sequenceLength(ConfigReader &config, int64_t maxPositions,
                                     StringRef positionsKey, bool decoder) {
  int64_t requested = decoder ? request.decoderSeqLen : request.seqLen;
  if (!caching())
    return resolveSeqLen(config, requested, maxPositions, positionsKey,
                         decoder ? "--decoder-seq-len" : "--seq-len");
  cacheLength =
      request.cacheLength ? request.cacheLength : std::min(maxPositions, kDefaultMaxContext);
  if (entryKind == EntryKind::Decode)
    requested = 1;
  int64_t tokens = requested ? requested : std::min<int64_t>(kDefaultPrefillChunk, cacheLength);
  if (cacheLength > maxPositions)
    config.error(positionsKey, "--max-context=" + Twine(cacheLength) + " exceeds the model's " +
                                   Twine(maxPositions) + " positions");
  else if (tokens > cacheLength)
    config.error(positionsKey, "a prefill of " + Twine(tokens) + " tokens (" +
                                   (decoder ? "--decoder-seq-len" : "--seq-len") +
                                   ") exceeds the cache of " + Twine(cacheLength) +
                                   " positions (--max-context)");
  return std::min(tokens, cacheLength);
}

int64_t frontend::resolveSeqLen(ConfigReader &config, int64_t requested, int64_t maxPositions,
                                StringRef positionsKey, StringRef flag) {
  if (requested == 0)
    return maxPositions;
  if (requested > maxPositions)
    config.error(positionsKey, Twine(flag) + "=" + Twine(requested) +
                                   " exceeds the model's " + Twine(maxPositions) +
                                   " positions");
  return std::min(requested, maxPositions);
}

//===----------------------------------------------------------------------===//
// GraphBuilder
//===----------------------------------------------------------------------===//

static Type toMlirType(ElementType type, MLIRContext *context) {
  switch (type) {
  case ElementType::BF16:
    return BFloat16Type::get(context);
  case ElementType::F16:
    return Float16Type::get(context);
  case ElementType::F32:
    break;
  }
  return Float32Type::get(context);
}

Type GraphBuilder::cacheElementType() const {
  return request.cacheElementType ? toMlirType(*request.cacheElementType, b.getContext())
                                  : elementType;
}

Value GraphBuilder::convertElements(Value value, Type element) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getElementType() == element)
    return value;
  if (element.getIntOrFloatBitWidth() > type.getElementTypeBitWidth())
    return arith::ExtFOp::create(b, loc, type.clone(element), value);
  return arith::TruncFOp::create(b, loc, type.clone(element), value);
}

GraphBuilder::GraphBuilder(ModuleOp module, EntryKind entry, const ModelRequest &request,
                           Type floatType, StringRef name)
    : entryKind(entry), b(module.getContext()), loc(module.getLoc()), request(request),
      elementType(floatType) {
  static constexpr StringLiteral names[] = {"forward", "loss", "encode", "prefill", "decode"};
  b.setInsertionPointToEnd(module.getBody());
  func =
      func::FuncOp::create(b, loc, name.empty() ? StringRef(names[static_cast<int>(entry)]) : name,
                           b.getFunctionType({}, {}));
  body = func.addEntryBlock();
  b.setInsertionPointToStart(body);
}

Value GraphBuilder::addArgument(Type type, StringRef attrName, StringRef name) {
  // The function's type and argument attributes are set once, by finish():
  // setting them per argument would copy all of them each time.
  argumentAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(attrName, b.getStringAttr(name))));
  return body->addArgument(type, loc);
}

Value GraphBuilder::input(StringRef name, int64_t length) {
  return addArgument(RankedTensorType::get({request.batch, length}, b.getI32Type()), "xfmr.input",
                     name);
}

Value GraphBuilder::param(StringRef name, ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, floatType());
  auto it = params.find(name);
  if (it != params.end()) {
    assert(it->second.getType() == type && "a tied weight is used with two shapes");
    return it->second;
  }
  // Training a narrow model keeps f32 master weights, which the optimizer
  // updates (bf16 would round most updates away), and rounds them for use.
  bool masterWeights = request.training && !elementType.isF32();
  Value arg = addArgument(masterWeights ? type.clone(b.getF32Type()) : type, "xfmr.param", name);
  Value weight = masterWeights ? arith::TruncFOp::create(b, loc, type, arg).getResult() : arg;
  params[name] = weight;
  return weight;
}

Value GraphBuilder::paddingMask(Value attentionMask) {
  auto type = cast<RankedTensorType>(attentionMask.getType());
  Value zeros = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(type, b.getI32IntegerAttr(0)));
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, attentionMask, zeros);
}

Value GraphBuilder::startPositions() {
  if (!positions)
    positions = addArgument(RankedTensorType::get({request.batch}, b.getI32Type()), "xfmr.input",
                            "positions");
  return positions;
}

Value GraphBuilder::learnedPositions(Value x, Value table, int64_t offset) {
  return LearnedPositionEncodingOp::create(b, loc, x, table, caching() ? startPositions() : Value(),
                                           offset);
}

Value GraphBuilder::sinusoidalPositions(Value x, SinusoidLayout layout) {
  return SinusoidalPositionEncodingOp::create(b, loc, x, caching() ? startPositions() : Value(),
                                              layout);
}

Value GraphBuilder::layerNorm(Value x, StringRef prefix, double epsilon) {
  int64_t d = cast<RankedTensorType>(x.getType()).getShape().back();
  return LayerNormOp::create(b, loc, x.getType(), x, param((prefix + ".weight").str(), {d}),
                             param((prefix + ".bias").str(), {d}),
                             b.getF64FloatAttr(epsilon));
}

Value GraphBuilder::rmsNorm(Value x, StringRef prefix, double epsilon) {
  int64_t d = cast<RankedTensorType>(x.getType()).getShape().back();
  return RmsNormOp::create(b, loc, x.getType(), x, param((prefix + ".weight").str(), {d}),
                           b.getF64FloatAttr(epsilon));
}

Value GraphBuilder::relativePositionBias(Value table, int64_t queries, bool bidirectional,
                                         int64_t maxDistance) {
  int64_t heads = cast<RankedTensorType>(table.getType()).getDimSize(1);
  // A generation entry's queries stand at each sequence's start position
  // and see the whole cache (the kernels mask what is not yet filled).
  Value offset = caching() ? startPositions() : Value();
  auto type = RankedTensorType::get(
      {caching() ? request.batch : 1, heads, queries, caching() ? cacheLength : queries},
      elementType);
  return RelativePositionBiasOp::create(b, loc, type, table, offset,
                                        b.getI64IntegerAttr(maxDistance),
                                        bidirectional ? b.getUnitAttr() : UnitAttr(),
                                        /*seq_q=*/IntegerAttr());
}

Value GraphBuilder::scale(Value x, double factor) {
  auto type = RankedTensorType::get({1}, elementType);
  Value constant = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(type, b.getFloatAttr(elementType, factor)));
  return MulOp::create(b, loc, x, constant);
}

Value GraphBuilder::linear(Value x, StringRef prefix, int64_t in, int64_t out, bool torchLayout,
                           bool bias) {
  SmallVector<int64_t> shape = torchLayout ? SmallVector<int64_t>{out, in}
                                           : SmallVector<int64_t>{in, out};
  return LinearOp::create(b, loc, x, param((prefix + ".weight").str(), shape),
                          bias ? param((prefix + ".bias").str(), {out}) : Value(), torchLayout);
}

Value GraphBuilder::add(Value x, Value y) { return AddOp::create(b, loc, x, y); }

Value GraphBuilder::dropout(Value x, double rate) {
  if (rate <= 0 || !request.training)
    return x;
  auto seedType = RankedTensorType::get({}, b.getI64Type());
  if (!dropoutSeed)
    dropoutSeed = addArgument(seedType, "xfmr.input", "dropout_seed");
  // Each dropout draws its own mask: seed + k * (an odd 64-bit constant),
  // which changes the seed's high and low words.
  Value seed = tensor::ExtractOp::create(b, loc, dropoutSeed, ValueRange{});
  Value offset = arith::ConstantOp::create(
      b, loc, b.getI64IntegerAttr(static_cast<int64_t>(0x9E3779B97F4A7C15ull * ++dropouts)));
  Value own = tensor::FromElementsOp::create(b, loc, seedType,
                                             ValueRange{arith::AddIOp::create(b, loc, seed, offset)});
  return DropoutOp::create(b, loc, x.getType(), x, own, b.getF64FloatAttr(rate));
}

Value GraphBuilder::activation(Value x, Activation activation) {
  return createActivation(b, loc, x, activation);
}

Value GraphBuilder::attention(const AttentionSpec &spec, StringRef group, int64_t layer) {
  if (caching() && !spec.keyValue)
    return cachedSelfAttention(spec, group, layer);
  SmallVector<Value, 3> qkv = projectHeads(spec, spec.keyValue);
  Value probabilities;
  if (wantsAttentions(layer) || !request.fuseAttention)
    probabilities = attentionProbabilities(qkv[0], qkv[1], spec.paddingMask, spec.bias,
                                           ScoreOptions{spec.scale}, spec.causal);
  if (wantsAttentions(layer))
    output((group + "." + Twine(layer)).str(), probabilities);
  if (request.fuseAttention)
    return attendAndProject(spec, qkv[0], qkv[1], qkv[2], spec.paddingMask, Value(), Value());
  return LinearOp::create(b, loc, weighValues(probabilities, qkv[2]), spec.outWeight, spec.outBias,
                          spec.torchLayout);
}

Value GraphBuilder::splitHeads(Value x, int64_t heads) {
  auto type = cast<RankedTensorType>(x.getType());
  return ReshapeOp::create(
      b, loc,
      RankedTensorType::get(
          {type.getDimSize(0), type.getDimSize(1), heads, type.getDimSize(2) / heads}, elementType),
      x);
}

SmallVector<Value, 3> GraphBuilder::projectHeads(const AttentionSpec &spec, Value memory) {
  auto project = [&](Value input, Value weight, Value bias) -> Value {
    return LinearOp::create(b, loc, input, weight, bias, spec.torchLayout);
  };
  auto bias = [&](size_t i) { return spec.inBiases.empty() ? Value() : spec.inBiases[i]; };
  SmallVector<Value, 3> qkv;
  if (spec.inWeights.size() == 1) {
    auto type = cast<RankedTensorType>(spec.query.getType());
    int64_t dModel = type.getDimSize(2);
    Value fused = project(spec.query, spec.inWeights[0], bias(0));
    for (int64_t part = 0; part < 3; ++part)
      qkv.push_back(tensor::ExtractSliceOp::create(
          b, loc, type, fused,
          ArrayRef<OpFoldResult>{b.getIndexAttr(0), b.getIndexAttr(0),
                                 b.getIndexAttr(part * dModel)},
          ArrayRef<OpFoldResult>{b.getIndexAttr(type.getDimSize(0)),
                                 b.getIndexAttr(type.getDimSize(1)), b.getIndexAttr(dModel)},
          ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1), b.getIndexAttr(1)}));
  } else {
    Value source = memory ? memory : spec.query;
    qkv = {project(spec.query, spec.inWeights[0], bias(0)),
           project(source, spec.inWeights[1], bias(1)),
           project(source, spec.inWeights[2], bias(2))};
  }
  for (Value &value : qkv)
    value = splitHeads(value, spec.heads);
  return qkv;
}

Value GraphBuilder::attendHeads(Value q, Value k, Value v, Value paddingMask, Value bias,
                                const ScoreOptions &options, bool causal, Value queryOffset,
                                Value keyLength) {
  auto type = cast<RankedTensorType>(q.getType());
  double scale =
      options.scale ? *options.scale : 1.0 / std::sqrt(static_cast<double>(type.getDimSize(3)));
  Value attended =
      FusedAttentionOp::create(b, loc, type, q, k, v, paddingMask, bias,
                               /*position_bias=*/Value(), queryOffset, keyLength,
                               b.getF64FloatAttr(scale), causal ? b.getUnitAttr() : UnitAttr(),
                               AttentionLayoutAttr::get(b.getContext(), AttentionLayout::bshd),
                               options.window ? b.getI64IntegerAttr(options.window) : IntegerAttr(),
                               options.softcap ? b.getF64FloatAttr(*options.softcap) : FloatAttr())
          .getResult();
  return ReshapeOp::create(b, loc,
                           RankedTensorType::get({type.getDimSize(0), type.getDimSize(1),
                                                  type.getDimSize(2) * type.getDimSize(3)},
                                                 elementType),
                           attended);
}

Value GraphBuilder::attendAndProject(const AttentionSpec &spec, Value q, Value k, Value v,
                                     Value paddingMask, Value queryOffset, Value keyLength) {
  Value merged = attendHeads(q, k, v, paddingMask, spec.bias, ScoreOptions{spec.scale}, spec.causal,
                             queryOffset, keyLength);
  return LinearOp::create(b, loc, merged, spec.outWeight, spec.outBias, spec.torchLayout);
}

Value GraphBuilder::attendOverCache(Value q, Value k, Value v, Value paddingMask, Value bias,
                                    const ScoreOptions &options, StringRef group, int64_t layer) {
  auto keysType = cast<RankedTensorType>(k.getType());
  int64_t batch = keysType.getDimSize(0), chunk = keysType.getDimSize(1);
  // The cache: rows 0 .. positions[b] + chunk - 1 of sequence b are filled
  // once this call's keys and values are written. It holds the key/value
  // heads (fewer than the query's under grouped-query attention).
  auto cacheType = RankedTensorType::get(
      {batch, cacheLength, keysType.getDimSize(2), keysType.getDimSize(3)}, cacheElementType());
  std::string name = ("cache." + group + "." + Twine(layer)).str();
  Value start = startPositions();
  SmallVector<Value, 2> caches;
  for (auto [values, suffix] : {std::pair{k, ".key"}, {v, ".value"}}) {
    std::string cacheName = name + suffix;
    Value cache = addArgument(cacheType, "xfmr.state", cacheName);
    // A chunk's padding (a sequence with fewer tokens this call) is not
    // written.
    cache = CacheUpdateOp::create(b, loc, cacheType, cache,
                                  convertElements(values, cacheType.getElementType()), start,
                                  paddingMask);
    output("new:" + cacheName, cache, cacheName);
    // The CPU kernels read a narrower cache as it is (widened in registers).
    caches.push_back(convertElements(cache, elementType));
  }
  auto lengthsType = RankedTensorType::get({batch}, b.getI32Type());
  Value chunkSize = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(lengthsType, b.getI32IntegerAttr(chunk)));
  Value keyLength = arith::AddIOp::create(b, loc, start, chunkSize);
  return attendHeads(q, caches[0], caches[1], /*paddingMask=*/Value(), bias, options,
                     /*causal=*/true, start, keyLength);
}

Value GraphBuilder::cachedSelfAttention(const AttentionSpec &spec, StringRef group, int64_t layer) {
  cachesNonCausalAttention |= !spec.causal;
  SmallVector<Value, 3> qkv = projectHeads(spec, Value());
  Value merged = attendOverCache(qkv[0], qkv[1], qkv[2], spec.paddingMask, spec.bias,
                                 ScoreOptions{spec.scale}, group, layer);
  return LinearOp::create(b, loc, merged, spec.outWeight, spec.outBias, spec.torchLayout);
}

Value GraphBuilder::causalSelfAttention(Value q, Value k, Value v, Value paddingMask,
                                        const ScoreOptions &options, StringRef group,
                                        int64_t layer) {
  if (caching())
    return attendOverCache(q, k, v, paddingMask, Value(), options, group, layer);
  if (!request.fuseAttention)
    return weighValues(attentionProbabilities(q, k, paddingMask, Value(), options, /*causal=*/true),
                       v);
  return attendHeads(q, k, v, paddingMask, Value(), options, /*causal=*/true, Value(), Value());
}

static constexpr int64_t kToHeads[] = {0, 2, 1, 3};

/// `x` [batch, seq, key heads, head_dim] with each head repeated for its
/// group of query heads, to `heads`.
static Value repeatHeads(OpBuilder &b, Location loc, Value x, int64_t heads) {
  auto type = cast<RankedTensorType>(x.getType());
  int64_t batch = type.getDimSize(0), seq = type.getDimSize(1), keyHeads = type.getDimSize(2);
  int64_t headDim = type.getDimSize(3);
  if (keyHeads == heads)
    return x;
  auto grouped = [&](int64_t groups) {
    return type.clone({batch, seq, keyHeads, groups, headDim});
  };
  Value zeros = arith::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(grouped(heads / keyHeads), b.getFloatAttr(type.getElementType(), 0)));
  return ReshapeOp::create(b, loc, type.clone({batch, seq, heads, headDim}),
                           AddOp::create(b, loc, ReshapeOp::create(b, loc, grouped(1), x), zeros));
}

Value GraphBuilder::attentionProbabilities(Value q, Value k, Value paddingMask, Value bias,
                                           const ScoreOptions &options, bool causal) {
  auto queryType = cast<RankedTensorType>(q.getType());
  auto keyType = cast<RankedTensorType>(k.getType());
  int64_t batch = queryType.getDimSize(0), queries = queryType.getDimSize(1);
  int64_t keys = keyType.getDimSize(1), headDim = queryType.getDimSize(3);
  auto constant = [&](double value) {
    auto type = RankedTensorType::get({}, elementType);
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(type, b.getFloatAttr(elementType, value)));
  };
  k = repeatHeads(b, loc, k, queryType.getDimSize(2));
  Value scores = MatmulOp::create(b, loc, TransposeOp::create(b, loc, q, kToHeads),
                                  TransposeOp::create(b, loc, k, kToHeads), /*transpose_rhs=*/true);
  double scale = options.scale ? *options.scale : 1.0 / std::sqrt(static_cast<double>(headDim));
  scores = MulOp::create(b, loc, scores, constant(scale));
  if (options.softcap)
    scores = MulOp::create(
        b, loc,
        TanhOp::create(b, loc, MulOp::create(b, loc, scores, constant(1 / *options.softcap))),
        constant(*options.softcap));
  Value negInf = constant(-std::numeric_limits<double>::infinity());
  if (causal) {
    // Key j is visible from query i when j <= i + keys - queries (and within
    // the window: a constant band, which the frontend bounds in size).
    auto visibleType = RankedTensorType::get({queries, keys}, b.getI1Type());
    Value keep = CausalMaskOp::create(b, loc, visibleType);
    if (options.window) {
      SmallVector<bool> visible(queries * keys);
      for (int64_t i = 0; i < queries; ++i)
        for (int64_t j = 0; j < keys; ++j) {
          int64_t position = i + keys - queries;
          visible[i * keys + j] = j <= position && position - j < options.window;
        }
      keep = arith::ConstantOp::create(
          b, loc, DenseElementsAttr::get(visibleType, ArrayRef<bool>(visible)));
    }
    scores = SelectOp::create(b, loc, keep, scores, negInf);
  }
  if (paddingMask) {
    Value keep = ReshapeOp::create(
        b, loc, RankedTensorType::get({batch, 1, 1, keys}, b.getI1Type()), paddingMask);
    scores = SelectOp::create(b, loc, keep, scores, negInf);
  }
  if (bias)
    scores = AddOp::create(b, loc, scores, bias);
  return SoftmaxOp::create(b, loc, scores, /*axis=*/3);
}

Value GraphBuilder::weighValues(Value probabilities, Value v) {
  auto probabilitiesType = cast<RankedTensorType>(probabilities.getType());
  int64_t batch = probabilitiesType.getDimSize(0), heads = probabilitiesType.getDimSize(1);
  int64_t queries = probabilitiesType.getDimSize(2);
  int64_t headDim = cast<RankedTensorType>(v.getType()).getDimSize(3);
  v = repeatHeads(b, loc, v, heads);
  Value context = MatmulOp::create(b, loc, probabilities, TransposeOp::create(b, loc, v, kToHeads),
                                   /*transpose_rhs=*/false);
  return ReshapeOp::create(b, loc,
                           RankedTensorType::get({batch, queries, heads * headDim}, elementType),
                           TransposeOp::create(b, loc, context, kToHeads));
}

Value GraphBuilder::rotary(Value x, ArrayRef<double> inverseFrequencies, double scaling) {
  return RotaryEmbeddingOp::create(b, loc, x.getType(), x, caching() ? startPositions() : Value(),
                                   b.getDenseF64ArrayAttr(inverseFrequencies),
                                   b.getF64FloatAttr(scaling), UnitAttr());
}

Value GraphBuilder::crossAttention(const AttentionSpec &spec, Value memory, int64_t layer) {
  if (!caching()) {
    AttentionSpec withMemory = spec;
    withMemory.keyValue = memory;
    return attention(withMemory, "cross_attentions", layer);
  }
  // The source's keys and values, projected once by the encode entry.
  Value query = splitHeads(LinearOp::create(b, loc, spec.query, spec.inWeights[0],
                                            spec.inBiases.empty() ? Value() : spec.inBiases[0],
                                            spec.torchLayout),
                           spec.heads);
  auto queryType = cast<RankedTensorType>(query.getType());
  int64_t batch = queryType.getDimSize(0);
  if (!sourceMask) {
    sourceLength = sourceLength ? sourceLength : 1;
    sourceMask = paddingMask(input("encoder_attention_mask", sourceLength));
  }
  auto crossType = RankedTensorType::get(
      {batch, sourceLength, queryType.getDimSize(2), queryType.getDimSize(3)}, cacheElementType());
  std::string name = "cross." + std::to_string(layer);
  Value keys = addArgument(crossType, "xfmr.state", name + ".key");
  Value values = addArgument(crossType, "xfmr.state", name + ".value");
  return attendAndProject(spec, query, convertElements(keys, elementType),
                          convertElements(values, elementType), sourceMask, Value(), Value());
}

void GraphBuilder::outputCrossKeysAndValues(const AttentionSpec &spec, Value memory,
                                            int64_t layer) {
  AttentionSpec keysAndValues = spec;
  keysAndValues.query = memory;
  SmallVector<Value, 3> projected = projectHeads(keysAndValues, memory);
  std::string name = "cross." + std::to_string(layer);
  output(name + ".key", convertElements(projected[1], cacheElementType()));
  output(name + ".value", convertElements(projected[2], cacheElementType()));
}

Value GraphBuilder::predictedPositions(Value x, Value mask) {
  if (!caching())
    return x;
  return PoolOp::create(b, loc, x, mask, PoolMode::last);
}

void GraphBuilder::output(StringRef name, Value value, StringRef updates) {
  outputs.push_back({name.str(), value, updates.str()});
}

void GraphBuilder::checkAttentionLayers(ConfigReader &config, StringRef layersKey, int64_t layers) {
  for (int64_t layer : request.attentionLayers)
    if (layer < 0 || layer >= layers) {
      config.error(layersKey, "--output-attentions asks for layer " + Twine(layer) +
                                  " of a model with " + Twine(layers) + " layers");
      return;
    }
}

llvm::Error GraphBuilder::finish() {
  SmallVector<Value> results;
  SmallVector<std::string> names, updates;
  for (const Output &output : outputs) {
    results.push_back(output.value);
    names.push_back(output.name);
    updates.push_back(output.updates);
  }
  if (request.training) {
    // The loss is that of a language-model head: logits at every position.
    auto logits = llvm::find_if(outputs, [](const Output &o) { return o.name == "logits"; });
    if (logits == outputs.end() || cast<RankedTensorType>(logits->value.getType()).getRank() != 3)
      return llvm::createStringError(
          "the training form needs a head with logits at every position (a language-model "
          "head: GPT2LMHeadModel, BertForMaskedLM, BartForConditionalGeneration, ...)");
    // A narrow model's training form (mixed precision) returns f32 logits
    // and takes the loss from them, so that neither is rounded.
    Value logitsValue = logits->value;
    auto logitsType = cast<RankedTensorType>(logitsValue.getType());
    if (!elementType.isF32())
      logitsValue = arith::ExtFOp::create(b, loc, logitsType.clone(b.getF32Type()), logitsValue);
    auto labelsType = RankedTensorType::get(logitsType.getShape().drop_back(), b.getI32Type());
    Value labels = addArgument(labelsType, "xfmr.input", "labels");
    Value loss = CrossEntropyOp::create(b, loc, logitsValue, labels, b.getI64IntegerAttr(-100));
    results = {loss, logitsValue};
    names = {"loss", "logits"};
    updates = {"", ""};
  }
  if (caching() && !llvm::is_contained(names, "logits"))
    return llvm::createStringError("generation needs a language-model head (logits)");
  if (caching() && (cachesNonCausalAttention ||
                    llvm::none_of(updates, [](const std::string &u) { return !u.empty(); })))
    return llvm::createStringError("generation needs causal self-attention (a decoder) to cache");
  // A config asking for more memory than any machine has fails here, not in
  // hours of compiling or at the executable's first allocation.
  constexpr uint64_t kMaxArgumentBytes = uint64_t(1) << 40;
  uint64_t argumentBytes = 0;
  for (Type type : body->getArgumentTypes()) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || !tensor.hasStaticShape())
      continue;
    argumentBytes +=
        uint64_t(tensor.getNumElements()) * llvm::divideCeil(tensor.getElementTypeBitWidth(), 8);
    if (argumentBytes > kMaxArgumentBytes)
      return llvm::createStringError("its weights and inputs take more than " +
                                     Twine(kMaxArgumentBytes >> 30) +
                                     " GiB; no model this large is supported");
  }
  func::ReturnOp::create(b, loc, results);
  wrapLayers();
  func.setType(b.getFunctionType(body->getArgumentTypes(), ValueRange(results).getTypes()));
  func.setAllArgAttrs(argumentAttrs);
  for (auto [index, name] : llvm::enumerate(names)) {
    func.setResultAttr(index, "xfmr.output", b.getStringAttr(name));
    if (!updates[index].empty())
      func.setResultAttr(index, "xfmr.updates", b.getStringAttr(updates[index]));
  }
  return llvm::Error::success();
}

void GraphBuilder::beginLayer(StringRef name) {
  layers.push_back({name.str(), body->empty() ? nullptr : &body->back(), nullptr});
}

void GraphBuilder::endLayer() {
  Operation *last = body->empty() ? nullptr : &body->back();
  layers.back().last = last == layers.back().before ? nullptr : last;
}

void GraphBuilder::wrapLayers() {
  // The ranges first: wrapping one moves the op that bounds the next.
  SmallVector<std::pair<StringRef, SmallVector<Operation *>>> ranges;
  for (const LayerOps &layer : layers) {
    if (!layer.last)
      continue;
    Operation *first = layer.before ? layer.before->getNextNode() : &body->front();
    SmallVector<Operation *> ops;
    for (Operation *op = first;; op = op->getNextNode()) {
      ops.push_back(op);
      if (op == layer.last)
        break;
    }
    ranges.emplace_back(layer.name, std::move(ops));
  }
  for (auto &[name, ops] : ranges) {
    // What the layer computes from the function's arguments alone (a mask
    // made on first use, a dropout's seed, a rounded master weight) is
    // computed before it: the layer reads it, so layers that differ only in
    // such values have one body (xfmr-outline-layers moves constants and
    // what derives from weights alone back in).
    llvm::SmallPtrSet<Operation *, 16> hoisted;
    SmallVector<Operation *> kept;
    for (Operation *op : ops) {
      if (llvm::all_of(op->getOperands(), [&](Value v) {
            Operation *def = v.getDefiningOp();
            return def ? hoisted.contains(def) : v.getParentBlock() == body;
          }))
        hoisted.insert(op);
      else
        kept.push_back(op);
    }
    if (kept.empty())
      continue;
    for (Operation *op : ops)
      if (hoisted.contains(op))
        op->moveBefore(kept.front());
    llvm::DenseSet<Operation *> inLayer(kept.begin(), kept.end());
    SmallVector<Value> escaping;
    for (Operation *op : kept)
      for (Value result : op->getResults())
        if (llvm::any_of(result.getUsers(),
                         [&](Operation *user) { return !inLayer.contains(user); }))
          escaping.push_back(result);
    OpBuilder wrap(kept.front());
    auto layerOp = LayerOp::create(wrap, loc, ValueRange(escaping).getTypes(), name);
    Block *layerBody = wrap.createBlock(&layerOp.getBody());
    for (Operation *op : kept)
      op->moveBefore(layerBody, layerBody->end());
    wrap.setInsertionPointToEnd(layerBody);
    YieldOp::create(wrap, loc, escaping);
    for (auto [inner, outer] : llvm::zip_equal(escaping, layerOp.getResults()))
      inner.replaceUsesWithIf(
          outer, [&](OpOperand &use) { return !layerOp->isProperAncestor(use.getOwner()); });
  }
}

bool FamilyInputs::hasWeight(StringRef name) const {
  if (source.tensors.empty())
    return true;
  return llvm::any_of(info.weightPrefixes, [&](const std::string &prefix) {
    return source.tensors.contains(prefix + name.str());
  });
}

//===----------------------------------------------------------------------===//
// Entry point
//===----------------------------------------------------------------------===//

namespace {
/// How a family generates: not at all, a decoder alone, or a decoder over
/// an encoder's output.
enum class Generation { None, Decoder, EncoderDecoder };

struct Family {
  StringRef modelType;
  /// The Hugging Face classes it builds, the default (when the config names
  /// none) first; none for the project's tutorial types.
  ArrayRef<StringRef> architectures;
  FamilyBuilder build;
  Generation generation;
};
constexpr StringRef kGpt2Classes[] = {"GPT2LMHeadModel", "GPT2Model"};
constexpr StringRef kBertClasses[] = {"BertForMaskedLM", "BertModel",
                                      "BertForSequenceClassification"};
constexpr StringRef kMarianClasses[] = {"MarianMTModel", "MarianModel"};
constexpr StringRef kBartClasses[] = {"BartForConditionalGeneration", "BartModel"};
constexpr StringRef kT5Classes[] = {"T5ForConditionalGeneration", "T5Model", "T5EncoderModel"};
constexpr StringRef kLlamaClasses[] = {"LlamaForCausalLM", "LlamaModel"};
constexpr StringRef kMistralClasses[] = {"MistralForCausalLM", "MistralModel"};
constexpr StringRef kQwen2Classes[] = {"Qwen2ForCausalLM", "Qwen2Model"};
constexpr StringRef kQwen3Classes[] = {"Qwen3ForCausalLM", "Qwen3Model"};
constexpr StringRef kGemmaClasses[] = {"GemmaForCausalLM", "GemmaModel"};
constexpr StringRef kGemma2Classes[] = {"Gemma2ForCausalLM", "Gemma2Model"};
constexpr StringRef kGemma3Classes[] = {"Gemma3ForCausalLM", "Gemma3TextModel"};
constexpr StringRef kPhi3Classes[] = {"Phi3ForCausalLM", "Phi3Model"};
const Family kFamilies[] = {
    {"gpt2", kGpt2Classes, buildGpt2, Generation::Decoder},
    {"bert", kBertClasses, buildBert, Generation::None},
    {"marian", kMarianClasses, buildBart, Generation::EncoderDecoder},
    {"bart", kBartClasses, buildBart, Generation::EncoderDecoder},
    {"t5", kT5Classes, buildT5, Generation::EncoderDecoder},
    {"llama", kLlamaClasses, buildLlama, Generation::Decoder},
    {"mistral", kMistralClasses, buildLlama, Generation::Decoder},
    {"qwen2", kQwen2Classes, buildLlama, Generation::Decoder},
    {"qwen3", kQwen3Classes, buildLlama, Generation::Decoder},
    {"gemma", kGemmaClasses, buildLlama, Generation::Decoder},
    {"gemma2", kGemma2Classes, buildLlama, Generation::Decoder},
    {"gemma3_text", kGemma3Classes, buildLlama, Generation::Decoder},
    {"phi3", kPhi3Classes, buildLlama, Generation::Decoder},
    {"transformer", {}, buildTransformer, Generation::EncoderDecoder},
    {"encoder", {}, buildEncoder, Generation::Decoder},
};

/// The class to build: the request's, else the config's first
/// `architectures` entry, else the family's default.
std::string chooseArchitecture(ConfigReader &config, const Family &family,
                               const ModelRequest &request) {
  std::string fromConfig = config.firstString("architectures");
  bool requested = !request.architecture.empty();
  std::string chosen = requested ? request.architecture : fromConfig;
  if (family.architectures.empty()) {
    if (requested)
      config.error("model_type", "--architecture=" + chosen + ": model type \"" + family.modelType +
                                     "\" is one of xfmr's own, without Hugging Face classes");
    return "";
  }
  if (chosen.empty())
    return family.architectures.front().str();
  if (!llvm::is_contained(family.architectures, chosen)) {
    std::string message = "unsupported architecture \"" + chosen + "\" for model type \"" +
                          family.modelType.str() +
                          "\" (supported: " + llvm::join(family.architectures, ", ") + ")";
    config.error("architectures", requested ? "--architecture: " + message : message);
  }
  return chosen;
}
} // namespace

ArrayRef<StringRef> xfmr::supportedModelTypes() {
  static const SmallVector<StringRef> types = [] {
    SmallVector<StringRef> names;
    for (const Family &family : kFamilies)
      names.push_back(family.modelType);
    return names;
  }();
  return types;
}

/// The token rules of generate() that the generator applies, from the
/// checkpoint's generation_config.json if it has one (where transformers
/// saves them), else from the config. Rules it cannot apply are errors.
static llvm::Error readGenerationRules(const ModelSource &source, const json::Object &config,
                                       ModelInfo &info) {
  std::optional<json::Value> generation;
  const json::Object *object = &config;
  StringRef path = source.configPath;
  if (!source.generationConfigText.empty()) {
    path = source.generationConfigPath;
    llvm::Expected<json::Value> parsed = parseJsonFile(path, source.generationConfigText);
    if (!parsed)
      return parsed.takeError();
    generation = std::move(*parsed);
    object = generation->getAsObject();
    if (!object)
      return llvm::createStringError(path + ": must be a JSON object");
  }
  ConfigReader reader(path, *object);
  info.forcedBosTokenId = reader.tokenId("forced_bos_token_id");
  // generate() ends a sequence at generation_config.json's end tokens.
  if (std::vector<int64_t> eos = reader.tokenIds("eos_token_id"); !eos.empty())
    info.eosTokenIds = eos;
  info.forcedEosTokenId = reader.tokenId("forced_eos_token_id");
  auto tokenLists = [&](StringRef key, bool nested) -> llvm::Error {
    const json::Value *value = object->get(key);
    if (!value || value->kind() == json::Value::Null)
      return llvm::Error::success();
    const json::Array *list = value->getAsArray();
    if (!list)
      return llvm::createStringError(path + ": key '" + key + "': expected a list");
    for (const json::Value &entry : *list) {
      const json::Value *token = &entry;
      if (nested) {
        const json::Array *words = entry.getAsArray();
        if (!words || words->size() != 1)
          return llvm::createStringError(
              path + ": key '" + key +
              "': only single-token entries are supported (a token never generated)");
        token = &words->front();
      }
      std::optional<int64_t> id = integerOf(*token);
      if (!id || *id < 0)
        return llvm::createStringError(path + ": key '" + key + "': expected token ids");
      info.suppressedTokenIds.push_back(*id);
    }
    return llvm::Error::success();
  };
  if (llvm::Error error = tokenLists("bad_words_ids", true))
    return error;
  if (llvm::Error error = tokenLists("suppress_tokens", false))
    return error;
  // Rules of generate() the generator does not apply.
  for (StringRef key : {"no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "min_length",
                        "min_new_tokens", "begin_suppress_tokens", "sequence_bias"}) {
    const json::Value *value = object->get(key);
    bool unset = !value || value->kind() == json::Value::Null ||
                 (integerOf(*value) && *integerOf(*value) == 0) ||
                 (value->getAsArray() && value->getAsArray()->empty());
    if (!unset)
      llvm::errs() << "xfmrc: warning: " << path << ": key '" << key
                   << "': not applied by the generator\n";
  }
  return reader.takeError();
}

llvm::Expected<OwningOpRef<ModuleOp>> xfmr::buildModel(MLIRContext &context,
                                                       const ModelSource &source,
                                                       const ModelRequest &request,
                                                       ModelInfo &info) {
  context.loadDialect<XfmrDialect, func::FuncDialect, arith::ArithDialect,
                      tensor::TensorDialect>();
  StringRef path = source.configPath;
  llvm::Expected<json::Value> parsed = frontend::parseJsonFile(path, source.configText);
  if (!parsed)
    return parsed.takeError();
  const json::Object *object = parsed->getAsObject();
  if (!object)
    return llvm::createStringError(path + ": the config must be a JSON object");
  ConfigReader config(path, *object);

  std::string modelType = config.string({"model_type"}, "");
  if (modelType.empty())
    return llvm::createStringError(path + ": missing key 'model_type' (one of " +
                                   llvm::join(supportedModelTypes(), ", ") + ")");
  const Family *family = llvm::find_if(
      kFamilies, [&](const Family &candidate) { return candidate.modelType == modelType; });
  if (family == std::end(kFamilies))
    return llvm::createStringError(path + ": key 'model_type': unsupported model type \"" +
                                   modelType + "\" (supported: " +
                                   llvm::join(supportedModelTypes(), ", ") + ")");
  if (request.batch <= 0)
    return llvm::createStringError("the batch size must be positive");
  if (!source.sentencePooling.empty() && modelType != "bert")
    return llvm::createStringError(path +
                                   ": sentence-transformers pooling is supported for "
                                   "BERT checkpoints, not for model type \"" +
                                   modelType + "\"");
  std::string architecture = chooseArchitecture(config, *family, request);
  if (config.failed())
    return config.takeError();

  OwningOpRef<ModuleOp> module =
      ModuleOp::create(FileLineColLoc::get(&context, path, 1, 1));
  (*module)->setAttr("xfmr.model_type", StringAttr::get(&context, modelType));
  Type floatType = toMlirType(request.elementType, &context);
  if (request.generate && family->generation == Generation::None)
    return llvm::createStringError(path + ": model type \"" + modelType +
                                   "\" has no decoder to generate with");
  // One entry, or generation's: an encoder-decoder's encode, then the
  // decoder's prefill and decode, built alike; over a batch, a prefill of
  // one sequence too (kRowPrefillEntry), with which reading a few prompts
  // beside the others' decode steps costs those prompts' work alone, and
  // decode steps of one (kRowDecodeEntry) and of a group of a few
  // (kGroupDecodeEntry), with which a few sequences' steps do. Their
  // products must compute each row as the batch's entry does (a sequence's
  // logits may not depend on which entry read it), so a chunk of so few
  // tokens that its products would take the kernels of small products has
  // no prefill_row, and a batch too large for them no decode_row or
  // decode_group (the driver drops them where the weights' kernels differ).
  struct EntryToBuild {
    EntryKind kind;
    StringRef name;
    int64_t batch;
  };
  SmallVector<EntryToBuild, 6> entries;
  if (!request.generate) {
    entries.push_back({request.training ? EntryKind::Loss : EntryKind::Forward, "", request.batch});
  } else {
    if (family->generation == Generation::EncoderDecoder)
      entries.push_back({EntryKind::Encode, "", request.batch});
    entries.push_back({EntryKind::Prefill, "", request.batch});
    entries.push_back({EntryKind::Decode, "", request.batch});
    if (request.batch > 1)
      entries.push_back({EntryKind::Prefill, kRowPrefillEntry, 1});
    if (request.batch > 1 && request.batch <= kSmallProductRows)
      entries.push_back({EntryKind::Decode, kRowDecodeEntry, 1});
    if (request.batch > kDecodeGroupRows && request.batch % kDecodeGroupRows == 0 &&
        request.batch <= kSmallProductRows)
      entries.push_back({EntryKind::Decode, kGroupDecodeEntry, kDecodeGroupRows});
  }
  for (const EntryToBuild &entry : entries) {
    if (entry.name == kRowPrefillEntry && prefillChunk(*module) <= kSmallProductRows)
      continue;
    ModelRequest entryRequest = request;
    entryRequest.batch = entry.batch;
    GraphBuilder graph(*module, entry.kind, entryRequest, floatType, entry.name);
    info = ModelInfo();
    info.modelType = modelType;
    info.architecture = architecture;
    info.bosTokenId = config.tokenId("bos_token_id");
    info.eosTokenIds = config.tokenIds("eos_token_id");
    FamilyInputs inputs{config, graph, entryRequest, architecture, source, info};
    if (llvm::Error error = family->build(inputs))
      return std::move(error);
    if (config.failed())
      return config.takeError();
    if (llvm::Error error = graph.finish())
      return llvm::createStringError(path + ": " +
                                     (architecture.empty() ? modelType : architecture) + ": " +
                                     toString(std::move(error)));
  }
  if (request.generate)
    if (llvm::Error error = readGenerationRules(source, *object, info))
      return std::move(error);
  return std::move(module);
}
