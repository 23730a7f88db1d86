//===- Transformer.cpp - the original encoder-decoder transformer ---------===//
//
// "Attention Is All You Need": sinusoidal positions, embeddings scaled by
// sqrt(d_model), post-LN (or pre-LN with `normalize_before`), ReLU, causal
// self-attention and cross-attention in the decoder. Config keys and tensor
// names follow Hugging Face's BART/Marian family (`model.encoder.layers.0.
// self_attn.q_proj.weight`, `model.shared.weight`, `final_logits_bias`).
//
//===----------------------------------------------------------------------===//

#include "FrontendSupport.h"

#include <cmath>

using namespace mlir;
using namespace xfmr;
using namespace xfmr::frontend;

namespace {

struct TransformerConfig {
  int64_t dModel, vocab, positions;
  double epsilon, dropout;
  Activation activation;
  bool preLayerNorm;
};

class TransformerBuilder {
public:
  TransformerBuilder(GraphBuilder &graph, const TransformerConfig &config)
      : graph(graph), b(graph.builder()), loc(graph.location()), config(config) {}

  Value embed(Value ids, Value table) {
    double scale = embeddingScale;
    Value x = EmbeddingOp::create(b, loc, ids, table, b.getF64FloatAttr(scale));
    return graph.dropout(SinusoidalPositionEncodingOp::create(b, loc, x), config.dropout);
  }

  Value attention(Value x, Value memory, const std::string &prefix, int64_t heads, Value mask,
                  bool causal) {
    int64_t d = config.dModel;
    auto weight = [&](const char *name) {
      return graph.param(prefix + "." + name + ".weight", {d, d});
    };
    auto bias = [&](const char *name) { return graph.param(prefix + "." + name + ".bias", {d}); };
    return MultiHeadAttentionOp::create(
        b, loc, x, memory, ValueRange{weight("q_proj"), weight("k_proj"), weight("v_proj")},
        ValueRange{bias("q_proj"), bias("k_proj"), bias("v_proj")}, weight("out_proj"),
        bias("out_proj"), mask, /*attn_bias=*/Value(), heads, causal,
        /*transpose_weights=*/true, FloatAttr());
  }

  /// x + sublayer(x) with the layer norm before (pre-LN) or after (post-LN).
  template <typename Sublayer>
  Value residual(Value x, const std::string &normName, Sublayer sublayer) {
    if (config.preLayerNorm)
      return graph.add(x, graph.dropout(sublayer(graph.layerNorm(x, normName, config.epsilon)),
                                        config.dropout));
    return graph.layerNorm(graph.add(x, graph.dropout(sublayer(x), config.dropout)), normName,
                           config.epsilon);
  }

  Value feedForward(Value x, const std::string &prefix, int64_t ffn) {
    Value hidden = graph.activation(graph.linear(x, prefix + ".fc1", config.dModel, ffn, true),
                                    config.activation);
    return graph.linear(hidden, prefix + ".fc2", ffn, config.dModel, true);
  }

  double embeddingScale = 1.0;

private:
  GraphBuilder &graph;
  OpBuilder &b;
  Location loc;
  const TransformerConfig &config;
};

} // namespace

llvm::Error frontend::buildTransformer(ConfigReader &config, GraphBuilder &graph,
                                       const ModelShape &shape, ModelInfo &info) {
  TransformerConfig c;
  c.dModel = config.positiveInt({"d_model", "hidden_size"});
  c.vocab = config.positiveInt({"vocab_size"});
  c.positions = config.positiveInt({"max_position_embeddings", "n_positions"});
  int64_t encoderLayers = config.positiveInt({"encoder_layers", "num_hidden_layers"});
  int64_t decoderLayers = config.positiveInt({"decoder_layers"}, encoderLayers);
  int64_t encoderHeads = config.positiveInt({"encoder_attention_heads", "num_attention_heads"});
  int64_t decoderHeads = config.positiveInt({"decoder_attention_heads"}, encoderHeads);
  int64_t encoderFfn = config.positiveInt({"encoder_ffn_dim"}, 4 * c.dModel);
  int64_t decoderFfn = config.positiveInt({"decoder_ffn_dim"}, encoderFfn);
  c.epsilon = config.positiveNumber("layer_norm_eps", 1e-5);
  c.dropout = config.probability("dropout", 0.1);
  c.activation = config.activation({"activation_function"}, "relu");
  c.preLayerNorm = config.boolean("normalize_before", false);
  bool scaleEmbedding = config.boolean("scale_embedding", true);
  bool tied = config.boolean("tie_word_embeddings", true);
  info.padTokenId = config.nonNegativeInt("pad_token_id", 0);
  config.requireDivisible("d_model", c.dModel, "encoder_attention_heads", encoderHeads);
  config.requireDivisible("d_model", c.dModel, "decoder_attention_heads", decoderHeads);
  if (c.dModel % 2)
    config.error("d_model", "must be even for sinusoidal positions, got " + Twine(c.dModel));
  int64_t sourceLen =
      resolveSeqLen(config, shape.seqLen, c.positions, "max_position_embeddings", "--seq-len");
  int64_t targetLen = resolveSeqLen(config, shape.decoderSeqLen ? shape.decoderSeqLen : sourceLen,
                                    c.positions, "max_position_embeddings", "--decoder-seq-len");
  if (config.failed())
    return config.takeError();

  TransformerBuilder builder(graph, c);
  builder.embeddingScale = scaleEmbedding ? std::sqrt(static_cast<double>(c.dModel)) : 1.0;
  Value sourceIds = graph.input("input_ids", sourceLen);
  Value sourceMask = graph.paddingMask(graph.input("attention_mask", sourceLen));
  Value targetIds = graph.input("decoder_input_ids", targetLen);
  Value targetMask = graph.paddingMask(graph.input("decoder_attention_mask", targetLen));
  Value shared = graph.param("model.shared.weight", {c.vocab, c.dModel});

  Value memory = builder.embed(sourceIds, shared);
  for (int64_t i = 0; i < encoderLayers; ++i) {
    std::string prefix = "model.encoder.layers." + std::to_string(i);
    memory = builder.residual(memory, prefix + ".self_attn_layer_norm", [&](Value x) {
      return builder.attention(x, Value(), prefix + ".self_attn", encoderHeads, sourceMask,
                               false);
    });
    memory = builder.residual(memory, prefix + ".final_layer_norm", [&](Value x) {
      return builder.feedForward(x, prefix, encoderFfn);
    });
  }
  if (c.preLayerNorm)
    memory = graph.layerNorm(memory, "model.encoder.layer_norm", c.epsilon);

  Value y = builder.embed(targetIds, shared);
  for (int64_t i = 0; i < decoderLayers; ++i) {
    std::string prefix = "model.decoder.layers." + std::to_string(i);
    y = builder.residual(y, prefix + ".self_attn_layer_norm", [&](Value x) {
      return builder.attention(x, Value(), prefix + ".self_attn", decoderHeads, targetMask,
                               true);
    });
    y = builder.residual(y, prefix + ".encoder_attn_layer_norm", [&](Value x) {
      return builder.attention(x, memory, prefix + ".encoder_attn", decoderHeads, sourceMask,
                               false);
    });
    y = builder.residual(y, prefix + ".final_layer_norm",
                         [&](Value x) { return builder.feedForward(x, prefix, decoderFfn); });
  }
  if (c.preLayerNorm)
    y = graph.layerNorm(y, "model.decoder.layer_norm", c.epsilon);

  OpBuilder &b = graph.builder();
  Location loc = graph.location();
  Value head = tied ? shared : graph.param("lm_head.weight", {c.vocab, c.dModel});
  Value logits = LinearOp::create(b, loc, y, head, Value(), /*transpose_weight=*/true);
  Value bias = ReshapeOp::create(b, loc, RankedTensorType::get({c.vocab}, graph.floatType()),
                                 graph.param("final_logits_bias", {1, c.vocab}));
  graph.finish(graph.add(logits, bias));
  return llvm::Error::success();
}
