//===- EncoderDecoder.cpp - the encoder-decoder shared by families --------===//

#include "EncoderDecoder.h"

using namespace mlir;
using namespace xfmr;
using namespace xfmr::frontend;

namespace {

class EncoderDecoderBuilder {
public:
  EncoderDecoderBuilder(GraphBuilder &graph, const EncoderDecoderConfig &config)
      : graph(graph), b(graph.builder()), loc(graph.location()), config(config) {}

  /// Token embeddings, positions and (BART) their layer norm, under `stack`.
  Value embed(Value ids, Value table, const std::string &stack) {
    Value x = EmbeddingOp::create(b, loc, ids, table, b.getF64FloatAttr(config.embeddingScale));
    using Positions = EncoderDecoderConfig::Positions;
    if (config.positionKind == Positions::Learned)
      x = graph.learnedPositions(
          x, graph.param(stack + ".embed_positions.weight", {config.positions, config.dModel}),
          config.positionOffset);
    else
      x = graph.sinusoidalPositions(x, config.positionKind == Positions::SinusoidalHalves
                                           ? SinusoidLayout::halves
                                           : SinusoidLayout::interleaved);
    if (config.layerNormEmbedding)
      x = graph.layerNorm(x, stack + ".layernorm_embedding", config.epsilon);
    return graph.dropout(x, config.dropout);
  }

  /// The attention whose weights are named `prefix` (q_proj, ...).
  AttentionSpec attentionSpec(Value x, const std::string &prefix, int64_t heads, Value mask,
                              bool causal) {
    int64_t d = config.dModel;
    AttentionSpec spec;
    spec.query = x;
    for (const char *projection : {".q_proj", ".k_proj", ".v_proj"}) {
      spec.inWeights.push_back(graph.param(prefix + projection + ".weight", {d, d}));
      spec.inBiases.push_back(graph.param(prefix + projection + ".bias", {d}));
    }
    spec.outWeight = graph.param(prefix + ".out_proj.weight", {d, d});
    spec.outBias = graph.param(prefix + ".out_proj.bias", {d});
    spec.paddingMask = mask;
    spec.heads = heads;
    spec.causal = causal;
    return spec;
  }

  /// x + sublayer(x) with the layer norm before (pre-LN) or after (post-LN).
  template <typename Sublayer>
  Value residual(Value x, const std::string &normName, Sublayer sublayer) {
    if (config.preLayerNorm)
      return graph.add(
          x, graph.dropout(sublayer(graph.layerNorm(x, normName, config.epsilon)), config.dropout));
    return graph.layerNorm(graph.add(x, graph.dropout(sublayer(x), config.dropout)), normName,
                           config.epsilon);
  }

  Value feedForward(Value x, const std::string &prefix, int64_t ffn) {
    Value hidden = graph.activation(graph.linear(x, prefix + ".fc1", config.dModel, ffn, true),
                                    config.activation);
    hidden = graph.dropout(hidden, config.activationDropout);
    return graph.linear(hidden, prefix + ".fc2", ffn, config.dModel, true);
  }

private:
  GraphBuilder &graph;
  OpBuilder &b;
  Location loc;
  const EncoderDecoderConfig &config;
};

} // namespace

llvm::Error frontend::buildEncoderDecoder(FamilyInputs &in, const EncoderDecoderConfig &c) {
  ConfigReader &config = in.config;
  GraphBuilder &graph = in.graph;
  EntryKind entry = graph.entry();
  int64_t maxPositions = c.positions - c.positionOffset;
  int64_t sourceLen = resolveSeqLen(config, in.request.seqLen, maxPositions,
                                    "max_position_embeddings", "--seq-len");
  // The decoder's tokens a call: all of the target's, or a generation
  // entry's chunk.
  int64_t targetLen =
      graph.caching()
          ? graph.sequenceLength(config, maxPositions, "max_position_embeddings", true)
          : resolveSeqLen(config, in.request.decoderSeqLen ? in.request.decoderSeqLen : sourceLen,
                          maxPositions, "max_position_embeddings", "--decoder-seq-len");
  graph.checkAttentionLayers(config, "encoder_layers", std::max(c.encoderLayers, c.decoderLayers));
  if (config.failed())
    return config.takeError();
  in.info.weightPrefixes = {"", "model."};

  EncoderDecoderBuilder builder(graph, c);
  Value sourceTable, targetTable;
  bool shared = c.sharedEmbeddings && (c.tiedHead || !c.sharingFollowsHead ||
                                       !in.hasWeight("encoder.embed_tokens.weight"));
  auto tables = [&] {
    if (shared) {
      sourceTable = targetTable = graph.param("shared.weight", {c.vocab, c.dModel});
    } else {
      sourceTable = graph.param("encoder.embed_tokens.weight", {c.vocab, c.dModel});
      targetTable = graph.param("decoder.embed_tokens.weight", {c.decoderVocab, c.dModel});
    }
  };
  auto crossSpec = [&](Value x, int64_t layer, Value sourceMask) {
    return builder.attentionSpec(x, "decoder.layers." + std::to_string(layer) + ".encoder_attn",
                                 c.decoderHeads, sourceMask, false);
  };

  // The encoder, but in the decoder's generation entries (which read what
  // the encode entry computed from it).
  Value memory, sourceMask;
  if (!graph.caching()) {
    Value sourceIds = graph.input("input_ids", sourceLen);
    sourceMask = graph.paddingMask(graph.input("attention_mask", sourceLen));
    tables();
    memory = builder.embed(sourceIds, sourceTable, "encoder");
    for (int64_t i = 0; i < c.encoderLayers; ++i) {
      std::string prefix = "encoder.layers." + std::to_string(i);
      graph.beginLayer(prefix);
      memory = builder.residual(memory, prefix + ".self_attn_layer_norm", [&](Value x) {
        return graph.attention(
            builder.attentionSpec(x, prefix + ".self_attn", c.encoderHeads, sourceMask, false),
            "encoder_attentions", i);
      });
      memory = builder.residual(memory, prefix + ".final_layer_norm", [&](Value x) {
        return builder.feedForward(x, prefix, c.encoderFfn);
      });
      graph.endLayer();
    }
    if (c.preLayerNorm)
      memory = graph.layerNorm(memory, "encoder.layer_norm", c.epsilon);
  }
  if (entry == EntryKind::Encode) {
    for (int64_t i = 0; i < c.decoderLayers; ++i)
      graph.outputCrossKeysAndValues(crossSpec(memory, i, sourceMask), memory, i);
    return llvm::Error::success();
  }
  if (graph.caching()) {
    graph.setSourceLength(sourceLen);
    tables();
  }

  Value targetIds = graph.input("decoder_input_ids", targetLen);
  Value targetMask = graph.paddingMask(graph.input("decoder_attention_mask", targetLen));
  Value y = builder.embed(targetIds, targetTable, "decoder");
  for (int64_t i = 0; i < c.decoderLayers; ++i) {
    std::string prefix = "decoder.layers." + std::to_string(i);
    graph.beginLayer(prefix);
    y = builder.residual(y, prefix + ".self_attn_layer_norm", [&](Value x) {
      return graph.attention(
          builder.attentionSpec(x, prefix + ".self_attn", c.decoderHeads, targetMask, true),
          "decoder_attentions", i);
    });
    y = builder.residual(y, prefix + ".encoder_attn_layer_norm", [&](Value x) {
      return graph.crossAttention(crossSpec(x, i, sourceMask), memory, i);
    });
    y = builder.residual(y, prefix + ".final_layer_norm",
                         [&](Value x) { return builder.feedForward(x, prefix, c.decoderFfn); });
    graph.endLayer();
  }
  if (c.preLayerNorm)
    y = graph.layerNorm(y, "decoder.layer_norm", c.epsilon);

  if (!c.languageModelHead) {
    graph.output("last_hidden_state", y);
    graph.output("encoder_last_hidden_state", memory);
    return llvm::Error::success();
  }
  OpBuilder &b = graph.builder();
  Location loc = graph.location();
  y = graph.predictedPositions(y, targetMask);
  Value head = c.tiedHead ? targetTable : graph.param("lm_head.weight", {c.decoderVocab, c.dModel});
  Value logits = LinearOp::create(b, loc, y, head, Value(), /*transpose_weight=*/true);
  if (c.finalLogitsBias) {
    Value bias =
        ReshapeOp::create(b, loc, RankedTensorType::get({c.decoderVocab}, graph.floatType()),
                          graph.param("final_logits_bias", {1, c.decoderVocab}));
    logits = graph.add(logits, bias);
  }
  graph.output("logits", logits);
  return llvm::Error::success();
}
