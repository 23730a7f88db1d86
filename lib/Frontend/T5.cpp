//===- T5.cpp - T5 as Hugging Face ships it -------------------------------===//
//
// T5Config keys and tensor names. T5 is a pre-LN encoder-decoder without
// position embeddings or biases: the attentions add a bias learned per
// relative-position bucket (block 0's `relative_attention_bias`, shared by
// the stack's layers; bidirectional in the encoder, causal in the decoder)
// and do not scale their scores; the norms are RMS norms (T5LayerNorm); the
// feed-forward is `wi` then `wo` with `feed_forward_proj`'s activation, or
// when "gated-<act>" act(wi_0 x) * wi_1 x (v1.1, "gated-gelu" being
// gelu_new). One `shared` table embeds source and target; the head is
// `lm_head.weight` where the checkpoint has one, else the table, and the
// decoder's output is scaled by d_model^-0.5 first unless the config says
// otherwise (`scale_decoder_outputs`, or an untied head in older configs).
//
//===----------------------------------------------------------------------===//

#include "FrontendSupport.h"

#include <cmath>

using namespace mlir;
using namespace xfmr;
using namespace xfmr::frontend;

namespace {

struct T5Config {
  int64_t dModel = 0, heads = 0, headDim = 0, ffn = 0, vocab = 0;
  int64_t encoderLayers = 0, decoderLayers = 0;
  int64_t buckets = 0, maxDistance = 0;
  double epsilon = 1e-6, dropout = 0.1;
  Activation activation = Activation::relu;
  bool gated = false;
};

class T5Builder {
public:
  T5Builder(GraphBuilder &graph, const T5Config &config) : graph(graph), config(config) {}

  Value embed(Value ids, Value table) {
    OpBuilder &b = graph.builder();
    return graph.dropout(
        EmbeddingOp::create(b, graph.location(), ids, table, b.getF64FloatAttr(1.0)),
        config.dropout);
  }

  /// The stack's position bias, from its block 0's table.
  Value positionBias(StringRef stack, int64_t queries, bool bidirectional) {
    Value table =
        graph.param((stack + ".block.0.layer.0.SelfAttention.relative_attention_bias.weight").str(),
                    {config.buckets, config.heads});
    return graph.relativePositionBias(table, queries, bidirectional, config.maxDistance);
  }

  AttentionSpec attentionSpec(Value x, const std::string &prefix, Value mask, bool causal,
                              Value bias) {
    int64_t d = config.dModel, inner = config.heads * config.headDim;
    AttentionSpec spec;
    spec.query = x;
    for (const char *projection : {".q", ".k", ".v"})
      spec.inWeights.push_back(graph.param(prefix + projection + ".weight", {inner, d}));
    spec.outWeight = graph.param(prefix + ".o.weight", {d, inner});
    spec.paddingMask = mask;
    spec.heads = config.heads;
    spec.causal = causal;
    spec.scale = 1.0;
    spec.bias = bias;
    return spec;
  }

  /// x + sublayer(rms_norm(x)).
  template <typename Sublayer>
  Value residual(Value x, const std::string &normName, Sublayer sublayer) {
    return graph.add(
        x, graph.dropout(sublayer(graph.rmsNorm(x, normName, config.epsilon)), config.dropout));
  }

  Value feedForward(Value x, const std::string &prefix) {
    int64_t d = config.dModel, ffn = config.ffn;
    Value hidden;
    if (config.gated) {
      hidden = graph.activation(graph.linear(x, prefix + ".wi_0", d, ffn, true, false),
                                config.activation);
      hidden = MulOp::create(graph.builder(), graph.location(), hidden,
                             graph.linear(x, prefix + ".wi_1", d, ffn, true, false));
    } else {
      hidden =
          graph.activation(graph.linear(x, prefix + ".wi", d, ffn, true, false), config.activation);
    }
    return graph.linear(graph.dropout(hidden, config.dropout), prefix + ".wo", ffn, d, true, false);
  }

  Value finalNorm(Value x, StringRef stack) {
    return graph.dropout(graph.rmsNorm(x, (stack + ".final_layer_norm").str(), config.epsilon),
                         config.dropout);
  }

private:
  GraphBuilder &graph;
  const T5Config &config;
};

} // namespace

llvm::Error frontend::buildT5(FamilyInputs &in) {
  ConfigReader &config = in.config;
  GraphBuilder &graph = in.graph;
  T5Config c;
  c.dModel = config.positiveInt({"d_model"}, 512);
  c.heads = config.positiveInt({"num_heads"}, 8);
  c.headDim = config.positiveInt({"d_kv"}, 64);
  c.ffn = config.positiveInt({"d_ff"}, 2048);
  c.vocab = config.positiveInt({"vocab_size"}, 32128);
  c.encoderLayers = config.layerCount({"num_layers"}, 6);
  c.decoderLayers = config.layerCount({"num_decoder_layers"}, c.encoderLayers);
  c.buckets = config.positiveInt({"relative_attention_num_buckets"}, 32);
  c.maxDistance = config.positiveInt({"relative_attention_max_distance"}, 128);
  c.epsilon = config.positiveNumber("layer_norm_epsilon", 1e-6);
  c.dropout = config.probability("dropout_rate", 0.1);
  std::string projection = config.string({"feed_forward_proj"}, "relu");
  StringRef activation = projection;
  c.gated = activation.consume_front("gated-");
  // transformers' spelling for T5 v1.1's feed-forward.
  if (projection == "gated-gelu")
    activation = "gelu_new";
  if (std::optional<Activation> parsed = ConfigReader::parseActivation(activation))
    c.activation = *parsed;
  else
    config.error("feed_forward_proj", "unsupported feed-forward \"" + projection +
                                          "\" (an activation or gated-<activation>; activations: " +
                                          ConfigReader::kActivationNames + ")");
  bool encoderOnly = in.architecture == "T5EncoderModel";
  // A causal (one-directional) stack's exact buckets are half of them, a
  // bidirectional one's a quarter; past them, the logarithmic buckets
  // reach max_distance.
  int64_t exactBuckets = encoderOnly ? c.buckets / 4 : c.buckets / 2;
  if (c.buckets < 4)
    config.error("relative_attention_num_buckets", "must be at least 4, got " + Twine(c.buckets));
  else if (c.maxDistance <= exactBuckets)
    config.error("relative_attention_max_distance", "must exceed the exact buckets (" +
                                                        Twine(exactBuckets) + "), got " +
                                                        Twine(c.maxDistance));
  config.requireHeadSize("d_kv", c.headDim);
  if (encoderOnly && graph.entry() != EntryKind::Forward && graph.entry() != EntryKind::Loss)
    config.error("architectures", "T5EncoderModel has no decoder to generate with");
  // Relative positions have no table to outgrow; n_positions bounds the
  // compiled lengths and is their default.
  int64_t maxPositions = config.positiveInt({"n_positions"}, 512);
  int64_t sourceLen =
      resolveSeqLen(config, in.request.seqLen, maxPositions, "n_positions", "--seq-len");
  int64_t targetLen =
      graph.caching()
          ? graph.sequenceLength(config, maxPositions, "n_positions", true)
          : resolveSeqLen(config, in.request.decoderSeqLen ? in.request.decoderSeqLen : sourceLen,
                          maxPositions, "n_positions", "--decoder-seq-len");
  graph.checkAttentionLayers(config, "num_layers", std::max(c.encoderLayers, c.decoderLayers));
  in.info.padTokenId = config.nonNegativeInt("pad_token_id", 0);
  in.info.decoderStartTokenId = config.nonNegativeInt("decoder_start_token_id", in.info.padTokenId);
  bool tied = config.boolean("tie_word_embeddings", true);
  bool scaleOutputs = config.boolean("scale_decoder_outputs", tied);
  if (config.failed())
    return config.takeError();
  in.info.weightPrefixes = {""};

  T5Builder builder(graph, c);
  Value table;
  auto crossSpec = [&](Value x, int64_t layer, Value sourceMask) {
    return builder.attentionSpec(
        x, "decoder.block." + std::to_string(layer) + ".layer.1.EncDecAttention", sourceMask, false,
        Value());
  };

  // The encoder, but in the decoder's generation entries.
  Value memory, sourceMask;
  if (!graph.caching()) {
    Value sourceIds = graph.input("input_ids", sourceLen);
    sourceMask = graph.paddingMask(graph.input("attention_mask", sourceLen));
    table = graph.param("shared.weight", {c.vocab, c.dModel});
    memory = builder.embed(sourceIds, table);
    Value bias = builder.positionBias("encoder", sourceLen, /*bidirectional=*/true);
    for (int64_t i = 0; i < c.encoderLayers; ++i) {
      std::string prefix = "encoder.block." + std::to_string(i);
      graph.beginLayer(prefix);
      memory = builder.residual(memory, prefix + ".layer.0.layer_norm", [&](Value x) {
        return graph.attention(
            builder.attentionSpec(x, prefix + ".layer.0.SelfAttention", sourceMask, false, bias),
            "encoder_attentions", i);
      });
      memory = builder.residual(memory, prefix + ".layer.1.layer_norm", [&](Value x) {
        return builder.feedForward(x, prefix + ".layer.1.DenseReluDense");
      });
      graph.endLayer();
    }
    memory = builder.finalNorm(memory, "encoder");
  }
  if (encoderOnly) {
    graph.output("last_hidden_state", memory);
    return llvm::Error::success();
  }
  if (graph.entry() == EntryKind::Encode) {
    for (int64_t i = 0; i < c.decoderLayers; ++i)
      graph.outputCrossKeysAndValues(crossSpec(memory, i, sourceMask), memory, i);
    return llvm::Error::success();
  }
  if (graph.caching()) {
    graph.setSourceLength(sourceLen);
    table = graph.param("shared.weight", {c.vocab, c.dModel});
  }

  Value targetIds = graph.input("decoder_input_ids", targetLen);
  Value targetMask = graph.paddingMask(graph.input("decoder_attention_mask", targetLen));
  Value y = builder.embed(targetIds, table);
  Value bias = builder.positionBias("decoder", targetLen, /*bidirectional=*/false);
  for (int64_t i = 0; i < c.decoderLayers; ++i) {
    std::string prefix = "decoder.block." + std::to_string(i);
    graph.beginLayer(prefix);
    y = builder.residual(y, prefix + ".layer.0.layer_norm", [&](Value x) {
      return graph.attention(
          builder.attentionSpec(x, prefix + ".layer.0.SelfAttention", targetMask, true, bias),
          "decoder_attentions", i);
    });
    y = builder.residual(y, prefix + ".layer.1.layer_norm", [&](Value x) {
      return graph.crossAttention(crossSpec(x, i, sourceMask), memory, i);
    });
    y = builder.residual(y, prefix + ".layer.2.layer_norm", [&](Value x) {
      return builder.feedForward(x, prefix + ".layer.2.DenseReluDense");
    });
    graph.endLayer();
  }
  y = builder.finalNorm(y, "decoder");

  if (in.architecture == "T5Model") {
    graph.output("last_hidden_state", y);
    graph.output("encoder_last_hidden_state", memory);
    return llvm::Error::success();
  }
  y = graph.predictedPositions(y, targetMask);
  if (scaleOutputs)
    y = graph.scale(y, 1.0 / std::sqrt(static_cast<double>(c.dModel)));
  bool ownHead = in.source.tensors.empty() ? !tied : in.hasWeight("lm_head.weight");
  Value head = ownHead ? graph.param("lm_head.weight", {c.vocab, c.dModel}) : table;
  graph.output("logits", LinearOp::create(graph.builder(), graph.location(), y, head, Value(),
                                          /*transpose_weight=*/true));
  return llvm::Error::success();
}
