//===- Encoder.cpp - a PyTorch nn.TransformerEncoder with a token head ----===//
//
// The encoder-only model of the PyTorch tutorials: token embedding, learned
// or sinusoidal positions, `nn.TransformerEncoderLayer`s (batch_first, pre-LN
// with `norm_first`, the default here, or post-LN) and a linear head that
// classifies every token. With `causal` (a causal mask in every layer) it is
// the tutorials' decoder-only language model, which can generate. Tensor names are those of the
// state_dict of
//
//   embedding = nn.Embedding(vocab_size, d_model)
//   position_embedding = nn.Embedding(max_position_embeddings, d_model)
//   encoder = nn.TransformerEncoder(layer, num_layers, norm=LayerNorm if norm_first)
//   head = nn.Linear(d_model, num_labels)
//
// so `encoder.layers.0.self_attn.in_proj_weight` ([3 d_model, d_model],
// torch.nn.Linear layout), `encoder.layers.0.linear1.weight`, `norm1`, ...
//
//===----------------------------------------------------------------------===//

#include "FrontendSupport.h"

#include <cmath>

using namespace mlir;
using namespace xfmr;
using namespace xfmr::frontend;

llvm::Error frontend::buildEncoder(FamilyInputs &in) {
  ConfigReader &config = in.config;
  GraphBuilder &graph = in.graph;
  int64_t layers = config.layerCount({"num_layers", "num_hidden_layers"});
  int64_t heads = config.positiveInt({"num_heads", "num_attention_heads"});
  int64_t dModel = config.positiveInt({"d_model", "hidden_size"});
  int64_t vocab = config.positiveInt({"vocab_size"});
  int64_t positions = config.positiveInt({"max_position_embeddings", "n_positions"});
  int64_t ffn = config.positiveInt({"dim_feedforward", "intermediate_size"}, 4 * dModel);
  int64_t labels = config.positiveInt({"num_labels"}, vocab);
  double epsilon = config.positiveNumber("layer_norm_eps", 1e-5);
  double dropout = config.probability("dropout", 0.1);
  Activation activation = config.activation({"activation"}, "relu");
  bool normFirst = config.boolean("norm_first", true);
  bool scaleEmbedding = config.boolean("scale_embedding", false);
  bool causal = config.boolean("causal", false);
  std::string positionKind = config.string({"position_embedding"}, "learned");
  in.info.padTokenId = config.nonNegativeInt("pad_token_id", 0);
  in.info.causalLanguageModel = causal;
  config.requireDivisible("d_model", dModel, "num_heads", heads);
  if (positionKind != "learned" && positionKind != "sinusoidal")
    config.error("position_embedding",
                 "expected \"learned\" or \"sinusoidal\", got \"" + positionKind + "\"");
  if (positionKind == "sinusoidal" && dModel % 2)
    config.error("d_model", "must be even for sinusoidal positions, got " + Twine(dModel));
  int64_t seqLen = graph.sequenceLength(config, positions, "max_position_embeddings");
  graph.checkAttentionLayers(config, "num_layers", layers);
  if (config.failed())
    return config.takeError();

  OpBuilder &b = graph.builder();
  Location loc = graph.location();
  Value ids = graph.input("input_ids", seqLen);
  Value mask = graph.paddingMask(graph.input("attention_mask", seqLen));
  double scale = scaleEmbedding ? std::sqrt(static_cast<double>(dModel)) : 1.0;
  Value x = EmbeddingOp::create(b, loc, ids, graph.param("embedding.weight", {vocab, dModel}),
                                b.getF64FloatAttr(scale));
  if (positionKind == "learned")
    x = graph.learnedPositions(x, graph.param("position_embedding.weight", {positions, dModel}));
  else
    x = graph.sinusoidalPositions(x);
  x = graph.dropout(x, dropout);

  for (int64_t i = 0; i < layers; ++i) {
    std::string prefix = "encoder.layers." + std::to_string(i);
    graph.beginLayer(prefix);
    auto selfAttention = [&](Value h) {
      AttentionSpec attention;
      attention.query = h;
      attention.inWeights = {
          graph.param(prefix + ".self_attn.in_proj_weight", {3 * dModel, dModel})};
      attention.inBiases = {graph.param(prefix + ".self_attn.in_proj_bias", {3 * dModel})};
      attention.outWeight = graph.param(prefix + ".self_attn.out_proj.weight", {dModel, dModel});
      attention.outBias = graph.param(prefix + ".self_attn.out_proj.bias", {dModel});
      attention.paddingMask = mask;
      attention.heads = heads;
      attention.causal = causal;
      return graph.attention(attention, "attentions", i);
    };
    auto feedForward = [&](Value h) {
      Value hidden = graph.activation(graph.linear(h, prefix + ".linear1", dModel, ffn, true),
                                      activation);
      return graph.linear(graph.dropout(hidden, dropout), prefix + ".linear2", ffn, dModel,
                          true);
    };
    if (normFirst) {
      x = graph.add(x, graph.dropout(selfAttention(graph.layerNorm(x, prefix + ".norm1", epsilon)),
                                     dropout));
      x = graph.add(x, graph.dropout(feedForward(graph.layerNorm(x, prefix + ".norm2", epsilon)),
                                     dropout));
    } else {
      x = graph.layerNorm(graph.add(x, graph.dropout(selfAttention(x), dropout)),
                          prefix + ".norm1", epsilon);
      x = graph.layerNorm(graph.add(x, graph.dropout(feedForward(x), dropout)),
                          prefix + ".norm2", epsilon);
    }
    graph.endLayer();
  }
  if (normFirst)
    x = graph.layerNorm(x, "encoder.norm", epsilon);
  x = graph.predictedPositions(x, mask);
  graph.output("logits", graph.linear(x, "head", dModel, labels, true));
  return llvm::Error::success();
}
