//===- Gpt2.cpp - GPT-2: decoder-only, pre-LN, learned positions ----------===//
//
// Config keys and tensor names follow Hugging Face's GPT2Config and the
// `gpt2` checkpoint (`h.0.attn.c_attn.weight`, ...; GPT2LMHeadModel saves the
// same under `transformer.`). Conv1D weights are [in, out]; the LM head is
// tied to the token embedding.
//
//===----------------------------------------------------------------------===//

#include "FrontendSupport.h"

using namespace mlir;
using namespace xfmr;
using namespace xfmr::frontend;

llvm::Error frontend::buildGpt2(ConfigReader &config, GraphBuilder &graph,
                                const ModelShape &shape, ModelInfo &info) {
  int64_t layers = config.positiveInt({"n_layer", "num_hidden_layers"});
  int64_t heads = config.positiveInt({"n_head", "num_attention_heads"});
  int64_t dModel = config.positiveInt({"n_embd", "hidden_size"});
  int64_t vocab = config.positiveInt({"vocab_size"});
  int64_t positions = config.positiveInt({"n_positions", "max_position_embeddings"});
  int64_t inner = config.positiveInt({"n_inner"}, 4 * dModel);
  double epsilon = config.positiveNumber("layer_norm_epsilon", 1e-5);
  Activation activation = config.activation({"activation_function"}, "gelu_new");
  double residualDropout = config.probability("resid_pdrop", 0.1);
  double embeddingDropout = config.probability("embd_pdrop", 0.1);
  info.padTokenId = config.nonNegativeInt("pad_token_id", 0);
  config.requireDivisible("n_embd", dModel, "n_head", heads);
  int64_t seqLen = resolveSeqLen(config, shape.seqLen, positions, "n_positions", "--seq-len");
  if (config.failed())
    return config.takeError();
  info.weightPrefixes = {"", "transformer."};

  OpBuilder &b = graph.builder();
  Location loc = graph.location();
  Value ids = graph.input("input_ids", seqLen);
  Value mask = graph.paddingMask(graph.input("attention_mask", seqLen));
  Value wte = graph.param("wte.weight", {vocab, dModel});
  Value x = EmbeddingOp::create(b, loc, ids, wte, b.getF64FloatAttr(1.0));
  x = LearnedPositionEncodingOp::create(b, loc, x, graph.param("wpe.weight", {positions, dModel}));
  x = graph.dropout(x, embeddingDropout);

  for (int64_t i = 0; i < layers; ++i) {
    std::string prefix = "h." + std::to_string(i);
    Value normed = graph.layerNorm(x, prefix + ".ln_1", epsilon);
    Value attention = MultiHeadAttentionOp::create(
        b, loc, normed, /*key_value=*/Value(),
        ValueRange{graph.param(prefix + ".attn.c_attn.weight", {dModel, 3 * dModel})},
        ValueRange{graph.param(prefix + ".attn.c_attn.bias", {3 * dModel})},
        graph.param(prefix + ".attn.c_proj.weight", {dModel, dModel}),
        graph.param(prefix + ".attn.c_proj.bias", {dModel}), mask, /*attn_bias=*/Value(),
        heads, /*causal=*/true, /*transpose_weights=*/false, FloatAttr());
    x = graph.add(x, graph.dropout(attention, residualDropout));
    Value hidden = graph.linear(graph.layerNorm(x, prefix + ".ln_2", epsilon),
                                prefix + ".mlp.c_fc", dModel, inner, false);
    hidden = graph.linear(graph.activation(hidden, activation), prefix + ".mlp.c_proj", inner,
                          dModel, false);
    x = graph.add(x, graph.dropout(hidden, residualDropout));
  }
  x = graph.layerNorm(x, "ln_f", epsilon);
  graph.finish(LinearOp::create(b, loc, x, wte, Value(), /*transpose_weight=*/true));
  return llvm::Error::success();
}
