//===- Bert.cpp - BERT: encoder, post-LN, padding mask, MLM head ----------===//
//
// Config keys and tensor names follow Hugging Face's BertConfig and the
// BertForMaskedLM checkpoint (`bert.encoder.layer.0.attention.self.query.weight`,
// `cls.predictions.transform.dense.weight`, ...). nn.Linear weights are
// [out, in]; the MLM decoder is tied to the word embeddings.
//
//===----------------------------------------------------------------------===//

#include "FrontendSupport.h"

using namespace mlir;
using namespace xfmr;
using namespace xfmr::frontend;

llvm::Error frontend::buildBert(ConfigReader &config, GraphBuilder &graph,
                                const ModelShape &shape, ModelInfo &info) {
  int64_t layers = config.positiveInt({"num_hidden_layers", "n_layer"});
  int64_t heads = config.positiveInt({"num_attention_heads", "n_head"});
  int64_t dModel = config.positiveInt({"hidden_size", "n_embd"});
  int64_t vocab = config.positiveInt({"vocab_size"});
  int64_t positions = config.positiveInt({"max_position_embeddings", "n_positions"});
  int64_t inner = config.positiveInt({"intermediate_size"}, 4 * dModel);
  int64_t typeVocab = config.positiveInt({"type_vocab_size"}, 2);
  double epsilon = config.positiveNumber("layer_norm_eps", 1e-12);
  Activation activation = config.activation({"hidden_act"}, "gelu");
  double dropout = config.probability("hidden_dropout_prob", 0.1);
  info.padTokenId = config.nonNegativeInt("pad_token_id", 0);
  config.requireDivisible("hidden_size", dModel, "num_attention_heads", heads);
  int64_t seqLen =
      resolveSeqLen(config, shape.seqLen, positions, "max_position_embeddings", "--seq-len");
  if (config.failed())
    return config.takeError();

  OpBuilder &b = graph.builder();
  Location loc = graph.location();
  Value ids = graph.input("input_ids", seqLen);
  Value mask = graph.paddingMask(graph.input("attention_mask", seqLen));
  Value types = graph.input("token_type_ids", seqLen);

  Value words = graph.param("bert.embeddings.word_embeddings.weight", {vocab, dModel});
  Value x = EmbeddingOp::create(b, loc, ids, words, b.getF64FloatAttr(1.0));
  x = LearnedPositionEncodingOp::create(
      b, loc, x, graph.param("bert.embeddings.position_embeddings.weight", {positions, dModel}));
  x = graph.add(x, EmbeddingOp::create(
                       b, loc, types,
                       graph.param("bert.embeddings.token_type_embeddings.weight",
                                   {typeVocab, dModel}),
                       b.getF64FloatAttr(1.0)));
  x = graph.dropout(graph.layerNorm(x, "bert.embeddings.LayerNorm", epsilon), dropout);

  for (int64_t i = 0; i < layers; ++i) {
    std::string prefix = "bert.encoder.layer." + std::to_string(i);
    std::string self = prefix + ".attention.self";
    auto weight = [&](const std::string &name, int64_t out, int64_t in) {
      return graph.param(name + ".weight", {out, in});
    };
    auto bias = [&](const std::string &name, int64_t size) {
      return graph.param(name + ".bias", {size});
    };
    Value attention = MultiHeadAttentionOp::create(
        b, loc, x, /*key_value=*/Value(),
        ValueRange{weight(self + ".query", dModel, dModel), weight(self + ".key", dModel, dModel),
                   weight(self + ".value", dModel, dModel)},
        ValueRange{bias(self + ".query", dModel), bias(self + ".key", dModel),
                   bias(self + ".value", dModel)},
        weight(prefix + ".attention.output.dense", dModel, dModel),
        bias(prefix + ".attention.output.dense", dModel), mask, /*attn_bias=*/Value(), heads,
        /*causal=*/false, /*transpose_weights=*/true, FloatAttr());
    x = graph.layerNorm(graph.add(graph.dropout(attention, dropout), x),
                        prefix + ".attention.output.LayerNorm", epsilon);
    Value hidden = graph.activation(
        graph.linear(x, prefix + ".intermediate.dense", dModel, inner, true), activation);
    hidden = graph.linear(hidden, prefix + ".output.dense", inner, dModel, true);
    x = graph.layerNorm(graph.add(graph.dropout(hidden, dropout), x),
                        prefix + ".output.LayerNorm", epsilon);
  }

  Value transformed = graph.activation(
      graph.linear(x, "cls.predictions.transform.dense", dModel, dModel, true), activation);
  transformed = graph.layerNorm(transformed, "cls.predictions.transform.LayerNorm", epsilon);
  graph.finish(LinearOp::create(b, loc, transformed, words,
                                graph.param("cls.predictions.bias", {vocab}),
                                /*transpose_weight=*/true));
  return llvm::Error::success();
}
