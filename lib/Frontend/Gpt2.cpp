//===- Gpt2.cpp - GPT-2: decoder-only, pre-LN, learned positions ----------===//
//
// Config keys and tensor names follow Hugging Face's GPT2Config and its
// checkpoints: GPT2Model saves `h.0.attn.c_attn.weight`, ..., and
// GPT2LMHeadModel the same under `transformer.`, plus `lm_head.weight` when
// the head is not tied to the token embedding. Conv1D weights are [in, out]
// (a GGUF file's are [out, in]: ModelSource::linearWeightsOutIn).
//
//===----------------------------------------------------------------------===//

#include "FrontendSupport.h"

#include <cmath>

using namespace mlir;
using namespace xfmr;
using namespace xfmr::frontend;

llvm::Error frontend::buildGpt2(FamilyInputs &in) {
  ConfigReader &config = in.config;
  GraphBuilder &graph = in.graph;
  int64_t layers = config.layerCount({"n_layer", "num_hidden_layers"});
  int64_t heads = config.positiveInt({"n_head", "num_attention_heads"});
  int64_t dModel = config.positiveInt({"n_embd", "hidden_size"});
  int64_t vocab = config.positiveInt({"vocab_size"});
  int64_t positions = config.positiveInt({"n_positions", "max_position_embeddings"});
  int64_t inner = config.positiveInt({"n_inner"}, 4 * dModel);
  double epsilon = config.positiveNumber("layer_norm_epsilon", 1e-5);
  Activation activation = config.activation({"activation_function"}, "gelu_new");
  double residualDropout = config.probability("resid_pdrop", 0.1);
  double embeddingDropout = config.probability("embd_pdrop", 0.1);
  bool scaleAttention = config.boolean("scale_attn_weights", true);
  bool scaleByLayer = config.boolean("scale_attn_by_inverse_layer_idx", false);
  bool tied = config.boolean("tie_word_embeddings", true);
  if (config.boolean("add_cross_attention", false))
    config.error("add_cross_attention", "GPT-2 with cross-attention (a decoder of an "
                                        "encoder-decoder model) is not supported");
  in.info.padTokenId = config.nonNegativeInt("pad_token_id", 0);
  config.requireDivisible("n_embd", dModel, "n_head", heads);
  int64_t seqLen = graph.sequenceLength(config, positions, "n_positions");
  graph.checkAttentionLayers(config, "n_layer", layers);
  if (config.failed())
    return config.takeError();
  in.info.weightPrefixes = {"", "transformer."};
  in.info.causalLanguageModel = true;

  OpBuilder &b = graph.builder();
  Location loc = graph.location();
  Value ids = graph.input("input_ids", seqLen);
  Value mask = graph.paddingMask(graph.input("attention_mask", seqLen));
  Value wte = graph.param("wte.weight", {vocab, dModel});
  Value x = EmbeddingOp::create(b, loc, ids, wte, b.getF64FloatAttr(1.0));
  x = graph.learnedPositions(x, graph.param("wpe.weight", {positions, dModel}));
  x = graph.dropout(x, embeddingDropout);

  bool outIn = in.source.linearWeightsOutIn;
  auto matrix = [&](int64_t inputs, int64_t outputs) {
    return outIn ? SmallVector<int64_t>{outputs, inputs} : SmallVector<int64_t>{inputs, outputs};
  };
  // The scores' scale where it is not the default 1/sqrt(head_dim).
  auto attentionScale = [&](int64_t layer) -> std::optional<double> {
    if (scaleAttention && !scaleByLayer)
      return std::nullopt;
    double scale = scaleAttention ? 1.0 / std::sqrt(static_cast<double>(dModel / heads)) : 1.0;
    return scaleByLayer ? scale / static_cast<double>(layer + 1) : scale;
  };
  for (int64_t i = 0; i < layers; ++i) {
    std::string prefix = "h." + std::to_string(i);
    graph.beginLayer(prefix);
    AttentionSpec attention;
    attention.query = graph.layerNorm(x, prefix + ".ln_1", epsilon);
    attention.inWeights = {graph.param(prefix + ".attn.c_attn.weight", matrix(dModel, 3 * dModel))};
    attention.inBiases = {graph.param(prefix + ".attn.c_attn.bias", {3 * dModel})};
    attention.outWeight = graph.param(prefix + ".attn.c_proj.weight", matrix(dModel, dModel));
    attention.outBias = graph.param(prefix + ".attn.c_proj.bias", {dModel});
    attention.paddingMask = mask;
    attention.heads = heads;
    attention.causal = true;
    attention.torchLayout = outIn;
    attention.scale = attentionScale(i);
    x = graph.add(x, graph.dropout(graph.attention(attention, "attentions", i), residualDropout));
    Value hidden = graph.linear(graph.layerNorm(x, prefix + ".ln_2", epsilon), prefix + ".mlp.c_fc",
                                dModel, inner, outIn);
    hidden = graph.linear(graph.activation(hidden, activation), prefix + ".mlp.c_proj", inner,
                          dModel, outIn);
    x = graph.add(x, graph.dropout(hidden, residualDropout));
    graph.endLayer();
  }
  x = graph.predictedPositions(graph.layerNorm(x, "ln_f", epsilon), mask);
  if (in.architecture == "GPT2Model") {
    graph.output("last_hidden_state", x);
    return llvm::Error::success();
  }
  Value head = tied ? wte : graph.param("lm_head.weight", {vocab, dModel});
  graph.output("logits", LinearOp::create(b, loc, x, head, Value(), /*transpose_weight=*/true));
  return llvm::Error::success();
}
