//===- Llama.cpp - Llama and the decoders built like it --------------------===//
//
// Llama-style decoders as transformers writes their checkpoints: pre-norm
// blocks of an RMS norm, rotary self-attention over grouped key/value heads
// and a gated MLP, then a final norm and a head (tied or not). Tensor names
// (under `model.` in a *ForCausalLM checkpoint): embed_tokens,
// layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj, post_attention_layernorm,
// mlp.{gate,up,down}_proj}, norm; lm_head at the top. The families differ in
// a few facts, each held by its DecoderStyle below. Layers attend fully or
// over a sliding window (`layer_types`, else the family's pattern); Gemma 3's
// windowed layers rotate with a rope of their own.
//
//===----------------------------------------------------------------------===//

#include "FrontendSupport.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>

using namespace mlir;
using namespace xfmr;
using namespace xfmr::frontend;

namespace {

/// What sets a family apart from Llama.
struct DecoderStyle {
  /// Biases of the q/k/v projections: always (Qwen2), or when the config's
  /// `attention_bias` says (then of o_proj too).
  bool alwaysQkvBias = false;
  /// Per-head RMS norms of queries and keys before the rotation (Qwen3).
  bool qkNorm = false;
  /// Gemma: embeddings times sqrt(hidden_size), norms scaled by
  /// (1 + weight).
  bool gemma = false;
  /// Phi-3: one qkv_proj and one gate_up_proj.
  bool fusedProjections = false;
  /// Gemma 2 and 3: norms after the attention and around the MLP
  /// (post_attention_layernorm on the attention's output,
  /// pre_/post_feedforward_layernorm), scores scaled by
  /// query_pre_attn_scalar^-0.5, soft-capped scores and logits.
  bool sandwichNorms = false;
  /// Without `layer_types`: every `windowPeriod`-th layer attends fully, the
  /// others over the sliding window (0: all windowed), or with a
  /// `windowSwitch` only when it says so, from layer max_window_layers on
  /// (Qwen's).
  int64_t windowPeriod = 0;
  StringRef windowSwitch;
  /// Gemma 3: windowed layers rotate by their own rope (rope_local_base_freq).
  bool localRope = false;
  /// Phi-3: rope types "su" and "yarn" are its configs' old names of
  /// "longrope".
  bool legacyLongrope = false;
  /// The activation's key (Gemma 2 and 3: hidden_activation) and default.
  StringRef activationKey = "hidden_act";
  StringRef defaultActivation = "silu";
  bool tiedByDefault = false;
  /// The defaults of transformers' config classes where a key is absent:
  /// attn_logit_softcapping and final_logit_softcapping, sliding_window
  /// (an explicit null: none), max_window_layers, rope_theta,
  /// original_max_position_embeddings (0: max_position_embeddings).
  std::optional<double> attentionSoftcap, logitSoftcap;
  int64_t defaultWindow = 0, defaultWindowLayers = 0;
  double defaultTheta = 1e4;
  int64_t defaultOriginalMax = 0;
};

DecoderStyle styleOf(StringRef modelType) {
  DecoderStyle style;
  if (modelType == "mistral") {
    style.defaultWindow = 4096;
  } else if (modelType == "qwen2" || modelType == "qwen3") {
    style.alwaysQkvBias = modelType == "qwen2";
    style.qkNorm = modelType == "qwen3";
    style.windowSwitch = "use_sliding_window";
    style.defaultWindow = 4096;
    style.defaultWindowLayers = 28;
  } else if (modelType.starts_with("gemma")) {
    style.gemma = true;
    style.defaultActivation = "gelu_pytorch_tanh";
    style.tiedByDefault = true;
    if (modelType == "gemma2") {
      style.sandwichNorms = true;
      style.windowPeriod = 2;
      style.attentionSoftcap = 50.0;
      style.logitSoftcap = 30.0;
    } else if (modelType == "gemma3_text") {
      style.sandwichNorms = true;
      style.qkNorm = true;
      style.windowPeriod = 6;
      style.localRope = true;
      style.defaultTheta = 1e6;
    }
    if (modelType != "gemma") {
      style.activationKey = "hidden_activation";
      style.defaultWindow = 4096;
    }
  } else if (modelType == "phi3") {
    style.fusedProjections = true;
    style.legacyLongrope = true;
    style.defaultOriginalMax = 4096;
  }
  return style;
}

/// The rotation's frequencies and the scaling of its sines and cosines.
struct Rope {
  std::vector<double> inverseFrequencies;
  double scaling = 1.0;
};

/// The rope of the config (transformers' ROPE_INIT_FUNCTIONS) for a model
/// whose entries see `context` positions. Frequencies are rounded to f32 as
/// transformers keeps them. longrope's factors depend on the sequence's
/// length: `context` fixes them, exactly as transformers picks them for a
/// forward of that length; a generation entry whose cache reaches past the
/// switch would see them change mid-sequence, which is refused.
/// `nested` holds the rope's parameters (rope_parameters, rope_scaling, or
/// one layer type's entry), if the config has them; `theta` is the base
/// where they do not say.
Rope readRope(ConfigReader &config, const DecoderStyle &style, ConfigReader *nested, double theta,
              int64_t headDim, int64_t maxPositions, int64_t context, bool generating) {
  Rope rope;
  ConfigReader &parameters = nested ? *nested : config;
  if (nested)
    theta = nested->positiveNumber("rope_theta", theta);
  std::string type = nested ? parameters.string({"rope_type", "type"}, "default") : "default";
  if (style.legacyLongrope && (type == "su" || type == "yarn"))
    type = "longrope";
  double partial = parameters.positiveNumber("partial_rotary_factor",
                                             config.positiveNumber("partial_rotary_factor", 1.0));
  // Errors name the key where the config has it.
  ConfigReader &partialKey = parameters.has("partial_rotary_factor") ? parameters : config;
  if (partial > 1) {
    partialKey.error("partial_rotary_factor", "is above 1");
    return rope;
  }
  int64_t dim = static_cast<int64_t>(static_cast<double>(headDim) * partial);
  if (dim < 2 || dim % 2 != 0) {
    partialKey.error("partial_rotary_factor", "rotates " + Twine(dim) + " of the head's " +
                                                  Twine(headDim) +
                                                  " features; an even number from 2 is needed");
    return rope;
  }
  // Phi-3 keeps the pretraining length beside the rope parameters.
  int64_t originalMax = config.nonNegativeInt(
      "original_max_position_embeddings",
      parameters.nonNegativeInt("original_max_position_embeddings", style.defaultOriginalMax
                                                                        ? style.defaultOriginalMax
                                                                        : maxPositions));
  auto baseFrequencies = [&](double base) {
    std::vector<double> frequencies;
    for (int64_t i = 0; i < dim; i += 2)
      frequencies.push_back(1.0 / std::pow(base, static_cast<double>(static_cast<float>(i) /
                                                                     static_cast<float>(dim))));
    return frequencies;
  };
  std::vector<double> &f = rope.inverseFrequencies;
  if (type == "default") {
    f = baseFrequencies(theta);
  } else if (type == "linear") {
    f = baseFrequencies(theta);
    double factor = parameters.positiveNumber("factor", 1.0);
    for (double &x : f)
      x /= factor;
  } else if (type == "dynamic") {
    // NTK scaling starts past max_position_embeddings, which no compiled
    // entry reaches: below it the frequencies are the default ones.
    f = baseFrequencies(theta);
  } else if (type == "llama3") {
    f = baseFrequencies(theta);
    double factor = parameters.positiveNumber("factor", 8.0);
    double low = parameters.positiveNumber("low_freq_factor", 1.0);
    double high = parameters.positiveNumber("high_freq_factor", 4.0);
    double old = static_cast<double>(originalMax);
    for (double &x : f) {
      double wavelength = 2 * llvm::numbers::pi / x;
      double scaled = wavelength > old / low ? x / factor : x;
      double smooth = (old / wavelength - low) / (high - low);
      bool medium = !(wavelength < old / high) && !(wavelength > old / low);
      x = medium ? (1 - smooth) * scaled / factor + smooth * scaled : scaled;
    }
  } else if (type == "yarn") {
    double factor = parameters.positiveNumber("factor", static_cast<double>(maxPositions) /
                                                            static_cast<double>(originalMax));
    auto mscale = [](double scale, double m) {
      return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0;
    };
    double m = parameters.positiveNumber("mscale", 0),
           mAll = parameters.positiveNumber("mscale_all_dim", 0);
    rope.scaling = parameters.positiveNumber(
        "attention_factor",
        m > 0 && mAll > 0 ? mscale(factor, m) / mscale(factor, mAll) : mscale(factor, 1));
    double fast = parameters.positiveNumber("beta_fast", 32),
           slow = parameters.positiveNumber("beta_slow", 1);
    bool truncate = parameters.boolean("truncate", true);
    double d = static_cast<double>(dim);
    auto correction = [&](double rotations) {
      return d * std::log(static_cast<double>(originalMax) / (rotations * 2 * llvm::numbers::pi)) /
             (2 * std::log(theta));
    };
    double lowDim = correction(fast), highDim = correction(slow);
    if (truncate) {
      lowDim = std::floor(lowDim);
      highDim = std::ceil(highDim);
    }
    lowDim = std::max(lowDim, 0.0);
    highDim = std::min(highDim, d - 1);
    if (lowDim == highDim)
      highDim += 0.001;
    std::vector<double> extrapolation = baseFrequencies(theta);
    for (size_t i = 0; i < extrapolation.size(); ++i) {
      double ramp = std::clamp((static_cast<double>(i) - lowDim) / (highDim - lowDim), 0.0, 1.0);
      double keep = 1 - ramp;
      f.push_back(extrapolation[i] / factor * (1 - keep) + extrapolation[i] * keep);
    }
  } else if (type == "longrope") {
    if (generating && context > originalMax)
      config.error("rope_type", "\"longrope\" rope changes its frequencies past "
                                "'original_max_position_embeddings' (" +
                                    Twine(originalMax) +
                                    ") during generation; compile with --max-context=" +
                                    Twine(originalMax) + " or less");
    double factor = parameters.positiveNumber("factor", static_cast<double>(maxPositions) /
                                                            static_cast<double>(originalMax));
    // The attention factor divides by log(original_max_position_embeddings)
    // (transformers raises ZeroDivisionError at 1).
    if (factor > 1 && originalMax < 2 && !parameters.has("attention_factor")) {
      config.error("original_max_position_embeddings",
                   "must be at least 2 for \"longrope\" rope scaling, got " + Twine(originalMax));
      return rope;
    }
    rope.scaling = parameters.positiveNumber(
        "attention_factor",
        factor <= 1 ? 1.0
                    : std::sqrt(1 + std::log(factor) / std::log(static_cast<double>(originalMax))));
    bool longFactors = context > originalMax;
    std::vector<double> factors = parameters.positiveNumbers(
        longFactors ? "long_factor" : "short_factor", static_cast<size_t>(dim / 2));
    f = baseFrequencies(theta);
    for (auto [x, scale] : llvm::zip_equal(f, factors))
      x /= scale;
  } else {
    parameters.error("rope_type", "unsupported rope type \"" + type +
                                      "\" (default, linear, dynamic, llama3, yarn, longrope)");
  }
  for (double &x : f)
    x = static_cast<double>(static_cast<float>(x));
  // Whatever else the parameters combine to: a rotation to compile.
  if (!std::isfinite(rope.scaling) || rope.scaling <= 0 ||
      llvm::any_of(f, [](double x) { return !std::isfinite(x) || x <= 0; }))
    parameters.error("rope_type", "\"" + type +
                                      "\" rope with these parameters gives frequencies or an "
                                      "attention factor that are not positive and finite");
  return rope;
}

struct DecoderConfig {
  int64_t layers = 0, dModel = 0, heads = 0, keyHeads = 0, headDim = 0, ffn = 0, vocab = 0;
  double epsilon = 1e-6;
  Activation activation = Activation::silu;
  bool qkvBias = false, outputBias = false, mlpBias = false;
  double residualDropout = 0, embeddingDropout = 0;
  /// The rope of fully attending layers, and of windowed ones.
  Rope rope, localRope;
  /// Per layer: whether it is a sliding-window layer, and its window over
  /// the compiled context (0 where it attends fully, or where the window
  /// covers the context).
  std::vector<bool> sliding;
  std::vector<int64_t> windows;
  ScoreOptions scores;
};

/// Which layers attend over a sliding window (`layer_types`, else the
/// family's pattern), and each one's window over a context of `context`
/// positions.
void readWindows(ConfigReader &config, const DecoderStyle &style, int64_t context,
                 DecoderConfig &c) {
  c.sliding.assign(c.layers, false);
  c.windows.assign(c.layers, 0);
  // Qwen's windows exist only with use_sliding_window; an explicit null
  // window is none.
  if ((!style.windowSwitch.empty() && !config.boolean(style.windowSwitch, false)) ||
      config.isNull("sliding_window"))
    return;
  int64_t window = config.nonNegativeInt("sliding_window", style.defaultWindow);
  std::vector<std::string> types = config.strings("layer_types", static_cast<size_t>(c.layers));
  for (int64_t i = 0; i < c.layers; ++i) {
    if (!types.empty()) {
      if (types[i] != "sliding_attention" && types[i] != "full_attention")
        config.error("layer_types", "unsupported layer type \"" + types[i] +
                                        "\" (sliding_attention, full_attention)");
      c.sliding[i] = types[i] == "sliding_attention";
    } else if (!style.windowSwitch.empty()) {
      c.sliding[i] = i >= config.nonNegativeInt("max_window_layers", style.defaultWindowLayers);
    } else {
      int64_t period = config.nonNegativeInt(
          "sliding_window_pattern",
          config.nonNegativeInt("_sliding_window_pattern", style.windowPeriod));
      c.sliding[i] = period == 0 || (i + 1) % period != 0;
    }
    if (c.sliding[i] && window > 0 && window < context)
      c.windows[i] = window;
  }
}

class DecoderBuilder {
public:
  DecoderBuilder(GraphBuilder &graph, const DecoderStyle &style, const DecoderConfig &config)
      : graph(graph), b(graph.builder()), loc(graph.location()), style(style), c(config) {}

  Value norm(Value x, StringRef prefix) {
    if (!style.gemma)
      return graph.rmsNorm(x, prefix, c.epsilon);
    // Gemma scales by (1 + weight).
    int64_t d = cast<RankedTensorType>(x.getType()).getShape().back();
    Value gamma =
        AddOp::create(b, loc, graph.param((prefix + ".weight").str(), {d}), constant(1.0));
    return RmsNormOp::create(b, loc, x.getType(), x, gamma, b.getF64FloatAttr(c.epsilon));
  }

  /// The last dimension's [offset, offset + size) of x.
  Value slice(Value x, int64_t offset, int64_t size) {
    auto type = cast<RankedTensorType>(x.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape.back() = size;
    SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0)), sizes,
        strides(type.getRank(), b.getIndexAttr(1));
    offsets.back() = b.getIndexAttr(offset);
    for (int64_t size : shape)
      sizes.push_back(b.getIndexAttr(size));
    return tensor::ExtractSliceOp::create(b, loc, type.clone(shape), x, offsets, sizes, strides);
  }

  /// [batch, seq, heads * head_dim] as [batch, seq, heads, head_dim].
  Value splitHeads(Value x, int64_t heads) {
    auto type = cast<RankedTensorType>(x.getType());
    return ReshapeOp::create(
        b, loc,
        RankedTensorType::get({type.getDimSize(0), type.getDimSize(1), heads, c.headDim},
                              type.getElementType()),
        x);
  }

  Value attention(Value x, const std::string &prefix, Value mask, int64_t layer) {
    const Rope &rope = c.sliding[layer] && style.localRope ? c.localRope : c.rope;
    int64_t queryWidth = c.heads * c.headDim, keyWidth = c.keyHeads * c.headDim;
    Value q, k, v;
    if (style.fusedProjections) {
      Value qkv = graph.linear(x, prefix + ".qkv_proj", c.dModel, queryWidth + 2 * keyWidth, true,
                               c.qkvBias);
      q = slice(qkv, 0, queryWidth);
      k = slice(qkv, queryWidth, keyWidth);
      v = slice(qkv, queryWidth + keyWidth, keyWidth);
    } else {
      q = graph.linear(x, prefix + ".q_proj", c.dModel, queryWidth, true, c.qkvBias);
      k = graph.linear(x, prefix + ".k_proj", c.dModel, keyWidth, true, c.qkvBias);
      v = graph.linear(x, prefix + ".v_proj", c.dModel, keyWidth, true, c.qkvBias);
    }
    q = splitHeads(q, c.heads);
    k = splitHeads(k, c.keyHeads);
    v = splitHeads(v, c.keyHeads);
    if (style.qkNorm) {
      q = norm(q, prefix + ".q_norm");
      k = norm(k, prefix + ".k_norm");
    }
    q = graph.rotary(q, rope.inverseFrequencies, rope.scaling);
    k = graph.rotary(k, rope.inverseFrequencies, rope.scaling);
    ScoreOptions scores = c.scores;
    scores.window = c.windows[layer];
    Value attended = graph.causalSelfAttention(q, k, v, mask, scores, "attentions", layer);
    if (!graph.caching() && graph.wantsAttentions(layer))
      graph.output("attentions." + std::to_string(layer),
                   graph.attentionProbabilities(q, k, mask, Value(), scores, /*causal=*/true));
    return graph.linear(attended, prefix + ".o_proj", queryWidth, c.dModel, true, c.outputBias);
  }

  Value mlp(Value x, const std::string &prefix) {
    Value gate, up;
    if (style.fusedProjections) {
      Value both = graph.linear(x, prefix + ".gate_up_proj", c.dModel, 2 * c.ffn, true, c.mlpBias);
      gate = slice(both, 0, c.ffn);
      up = slice(both, c.ffn, c.ffn);
    } else {
      gate = graph.linear(x, prefix + ".gate_proj", c.dModel, c.ffn, true, c.mlpBias);
      up = graph.linear(x, prefix + ".up_proj", c.dModel, c.ffn, true, c.mlpBias);
    }
    Value hidden = MulOp::create(b, loc, graph.activation(gate, c.activation), up);
    return graph.linear(hidden, prefix + ".down_proj", c.ffn, c.dModel, true, c.mlpBias);
  }

  Value layer(Value x, int64_t index, Value mask) {
    std::string prefix = "layers." + std::to_string(index);
    Value attended =
        attention(norm(x, prefix + ".input_layernorm"), prefix + ".self_attn", mask, index);
    if (style.sandwichNorms) {
      x = graph.add(x, norm(attended, prefix + ".post_attention_layernorm"));
      Value hidden = mlp(norm(x, prefix + ".pre_feedforward_layernorm"), prefix + ".mlp");
      return graph.add(x, norm(hidden, prefix + ".post_feedforward_layernorm"));
    }
    x = graph.add(x, graph.dropout(attended, c.residualDropout));
    Value hidden = mlp(norm(x, prefix + ".post_attention_layernorm"), prefix + ".mlp");
    return graph.add(x, graph.dropout(hidden, c.residualDropout));
  }

  Value constant(double value) {
    auto type = RankedTensorType::get({1}, graph.floatType());
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(type, b.getFloatAttr(graph.floatType(), value)));
  }

private:
  GraphBuilder &graph;
  OpBuilder &b;
  Location loc;
  const DecoderStyle &style;
  const DecoderConfig &c;
};

} // namespace

llvm::Error frontend::buildLlama(FamilyInputs &in) {
  ConfigReader &config = in.config;
  GraphBuilder &graph = in.graph;
  DecoderStyle style = styleOf(in.info.modelType);
  DecoderConfig c;
  c.layers = config.layerCount({"num_hidden_layers"});
  c.dModel = config.positiveInt({"hidden_size"});
  c.heads = config.positiveInt({"num_attention_heads"});
  c.keyHeads = config.positiveInt({"num_key_value_heads"}, c.heads);
  c.ffn = config.positiveInt({"intermediate_size"});
  c.vocab = config.positiveInt({"vocab_size"});
  int64_t positions = config.positiveInt({"max_position_embeddings"});
  c.epsilon = config.positiveNumber("rms_norm_eps", 1e-6);
  c.activation = config.activation({style.activationKey}, style.defaultActivation);
  // Gemma's configs say "gelu" and mean its tanh approximation (transformers
  // rewrites it so).
  if (in.info.modelType == "gemma" && c.activation == Activation::gelu)
    c.activation = Activation::gelu_tanh;
  bool attentionBias = config.boolean("attention_bias", false);
  c.qkvBias = style.alwaysQkvBias || attentionBias;
  c.outputBias = attentionBias;
  c.mlpBias = config.boolean("mlp_bias", false);
  c.residualDropout = config.probability("resid_pdrop", 0.0);
  c.embeddingDropout = config.probability("embd_pdrop", 0.0);
  bool tied = config.boolean("tie_word_embeddings", style.tiedByDefault);
  int64_t padToken = config.tokenId("pad_token_id");
  in.info.padTokenId = std::max<int64_t>(padToken, 0);
  if (config.failed())
    return config.takeError();
  if (c.heads % c.keyHeads != 0)
    config.error("num_attention_heads", Twine(c.heads) +
                                            " heads are not divisible by 'num_key_value_heads' (" +
                                            Twine(c.keyHeads) + ")");
  c.headDim = config.positiveInt({"head_dim"}, c.dModel / c.heads);
  config.requireHeadSize("head_dim", c.headDim);
  if (config.probability("attention_dropout", 0.0) > 0 && in.request.training)
    config.error("attention_dropout", "dropout of attention probabilities is not supported");
  int64_t seqLen = graph.sequenceLength(config, positions, "max_position_embeddings");
  int64_t context = graph.caching() ? graph.contextLength() : seqLen;
  double theta = config.positiveNumber("rope_theta", style.defaultTheta);
  double localTheta = config.positiveNumber("rope_local_base_freq", 1e4);
  std::optional<ConfigReader> ropes = config.nested({"rope_parameters", "rope_scaling"});
  if (ropes && ropes->has("full_attention")) {
    // Gemma 3's v5 form: one rope per layer type.
    std::optional<ConfigReader> full = ropes->nested({"full_attention"});
    std::optional<ConfigReader> local = ropes->nested({"sliding_attention"});
    c.rope = readRope(config, style, full ? &*full : nullptr, theta, c.headDim, positions, context,
                      graph.caching());
    c.localRope = readRope(config, style, local ? &*local : nullptr, localTheta, c.headDim,
                           positions, context, graph.caching());
  } else {
    c.rope = readRope(config, style, ropes ? &*ropes : nullptr, theta, c.headDim, positions,
                      context, graph.caching());
    if (style.localRope)
      c.localRope = readRope(config, style, nullptr, localTheta, c.headDim, positions, context,
                             graph.caching());
  }
  readWindows(config, style, context, c);
  if (style.sandwichNorms)
    c.scores.scale = 1.0 / std::sqrt(config.positiveNumber("query_pre_attn_scalar", 256));
  // An explicit null switches soft-capping off.
  auto softcap = [&](StringRef key, std::optional<double> fallback) -> std::optional<double> {
    if (config.isNull(key))
      return std::nullopt;
    double value = config.positiveNumber(key, fallback.value_or(0));
    return value > 0 ? std::optional<double>(value) : std::nullopt;
  };
  c.scores.softcap = softcap("attn_logit_softcapping", style.attentionSoftcap);
  std::optional<double> logitSoftcap = softcap("final_logit_softcapping", style.logitSoftcap);
  graph.checkAttentionLayers(config, "num_hidden_layers", c.layers);
  // A windowed layer's probabilities are masked by a [seq, seq] constant.
  constexpr int64_t kMaxWindowedAttentionsSeq = 4096;
  if (!graph.caching() && seqLen > kMaxWindowedAttentionsSeq &&
      llvm::any_of(llvm::seq<int64_t>(0, c.layers),
                   [&](int64_t i) { return c.windows[i] && graph.wantsAttentions(i); }))
    config.error("sliding_window", "--output-attentions of a windowed layer over more than " +
                                       Twine(kMaxWindowedAttentionsSeq) +
                                       " positions is not supported (--seq-len)");
  if (config.failed())
    return config.takeError();
  in.info.weightPrefixes = {"", "model."};
  in.info.causalLanguageModel = true;

  OpBuilder &b = graph.builder();
  Location loc = graph.location();
  DecoderBuilder decoder(graph, style, c);
  Value ids = graph.input("input_ids", seqLen);
  Value mask = graph.paddingMask(graph.input("attention_mask", seqLen));
  Value table = graph.param("embed_tokens.weight", {c.vocab, c.dModel});
  // Gemma's sqrt(hidden_size), rounded to the model's type as transformers does.
  double embeddingScale = 1.0;
  if (style.gemma) {
    llvm::APFloat scale(std::sqrt(static_cast<double>(c.dModel)));
    bool lost = false;
    scale.convert(cast<FloatType>(graph.floatType()).getFloatSemantics(),
                  llvm::APFloat::rmNearestTiesToEven, &lost);
    embeddingScale = scale.convertToDouble();
  }
  auto embedding = EmbeddingOp::create(b, loc, ids, table, b.getF64FloatAttr(embeddingScale));
  // transformers' embedding never trains the padding token's row.
  if (padToken >= 0 && padToken < c.vocab)
    embedding.setPaddingIdx(static_cast<uint64_t>(padToken));
  Value x = embedding;
  x = graph.dropout(x, c.embeddingDropout);
  for (int64_t i = 0; i < c.layers; ++i) {
    graph.beginLayer("layers." + std::to_string(i));
    x = decoder.layer(x, i, mask);
    graph.endLayer();
  }
  x = graph.predictedPositions(decoder.norm(x, "norm"), mask);
  if (in.architecture.ends_with("Model")) {
    graph.output("last_hidden_state", x);
    return llvm::Error::success();
  }
  Value head = tied ? table : graph.param("lm_head.weight", {c.vocab, c.dModel});
  Value logits = LinearOp::create(b, loc, x, head, Value(), /*transpose_weight=*/true);
  if (logitSoftcap)
    logits = graph.scale(TanhOp::create(b, loc, graph.scale(logits, 1.0 / *logitSoftcap)),
                         *logitSoftcap);
  graph.output("logits", logits);
  return llvm::Error::success();
}
