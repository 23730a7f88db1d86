//===- Bert.cpp - BERT: encoder, post-LN, padding mask --------------------===//
//
// Config keys and tensor names follow Hugging Face's BertConfig and its
// checkpoints: BertModel saves `embeddings.word_embeddings.weight`,
// `encoder.layer.0.attention.self.query.weight`, ..., `pooler.dense.weight`;
// the task classes save the same under `bert.` beside their heads
// (`cls.predictions.*` for BertForMaskedLM, whose decoder is tied to the word
// embeddings, `classifier.*` for BertForSequenceClassification). A
// sentence-transformers checkpoint is a BertModel whose token vectors are
// pooled (and normalized) into a sentence embedding. nn.Linear weights are
// [out, in].
//
//===----------------------------------------------------------------------===//

#include "FrontendSupport.h"

using namespace mlir;
using namespace xfmr;
using namespace xfmr::frontend;

llvm::Error frontend::buildBert(FamilyInputs &in) {
  ConfigReader &config = in.config;
  GraphBuilder &graph = in.graph;
  int64_t layers = config.layerCount({"num_hidden_layers", "n_layer"});
  int64_t heads = config.positiveInt({"num_attention_heads", "n_head"});
  int64_t dModel = config.positiveInt({"hidden_size", "n_embd"});
  int64_t vocab = config.positiveInt({"vocab_size"});
  int64_t positions = config.positiveInt({"max_position_embeddings", "n_positions"});
  int64_t inner = config.positiveInt({"intermediate_size"}, 4 * dModel);
  int64_t typeVocab = config.positiveInt({"type_vocab_size"}, 2);
  int64_t labels = config.objectSize("id2label", config.positiveInt({"num_labels"}, 2));
  double epsilon = config.positiveNumber("layer_norm_eps", 1e-12);
  Activation activation = config.activation({"hidden_act"}, "gelu");
  double dropout = config.probability("hidden_dropout_prob", 0.1);
  bool tied = config.boolean("tie_word_embeddings", true);
  std::string positionKind = config.string({"position_embedding_type"}, "absolute");
  if (positionKind != "absolute")
    config.error("position_embedding_type",
                 "unsupported \"" + positionKind + "\" (only \"absolute\" is)");
  if (config.boolean("is_decoder", false) || config.boolean("add_cross_attention", false))
    config.error("is_decoder", "BERT as a decoder (causal or with cross-attention) is not "
                               "supported");
  if (labels <= 0)
    config.error("id2label", "needs at least one label");
  in.info.padTokenId = config.nonNegativeInt("pad_token_id", 0);
  config.requireDivisible("hidden_size", dModel, "num_attention_heads", heads);
  int64_t seqLen = graph.sequenceLength(config, positions, "max_position_embeddings");
  graph.checkAttentionLayers(config, "num_hidden_layers", layers);
  bool sentence = !in.source.sentencePooling.empty();
  if (sentence && in.architecture != "BertModel")
    config.error("architectures", "a sentence-transformers checkpoint pools the token vectors "
                                  "of BertModel, not of " +
                                      in.architecture);
  if (config.failed())
    return config.takeError();
  in.info.weightPrefixes = {"", "bert."};

  OpBuilder &b = graph.builder();
  Location loc = graph.location();
  Value ids = graph.input("input_ids", seqLen);
  Value mask = graph.paddingMask(graph.input("attention_mask", seqLen));
  Value types = graph.input("token_type_ids", seqLen);

  Value words = graph.param("embeddings.word_embeddings.weight", {vocab, dModel});
  Value x = EmbeddingOp::create(b, loc, ids, words, b.getF64FloatAttr(1.0));
  x = graph.learnedPositions(
      x, graph.param("embeddings.position_embeddings.weight", {positions, dModel}));
  x = graph.add(x, EmbeddingOp::create(
                       b, loc, types,
                       graph.param("embeddings.token_type_embeddings.weight", {typeVocab, dModel}),
                       b.getF64FloatAttr(1.0)));
  x = graph.dropout(graph.layerNorm(x, "embeddings.LayerNorm", epsilon), dropout);

  for (int64_t i = 0; i < layers; ++i) {
    std::string prefix = "encoder.layer." + std::to_string(i);
    graph.beginLayer(prefix);
    std::string self = prefix + ".attention.self";
    AttentionSpec attention;
    attention.query = x;
    for (const char *projection : {".query", ".key", ".value"}) {
      attention.inWeights.push_back(graph.param(self + projection + ".weight", {dModel, dModel}));
      attention.inBiases.push_back(graph.param(self + projection + ".bias", {dModel}));
    }
    attention.outWeight = graph.param(prefix + ".attention.output.dense.weight", {dModel, dModel});
    attention.outBias = graph.param(prefix + ".attention.output.dense.bias", {dModel});
    attention.paddingMask = mask;
    attention.heads = heads;
    x = graph.layerNorm(
        graph.add(graph.dropout(graph.attention(attention, "attentions", i), dropout), x),
        prefix + ".attention.output.LayerNorm", epsilon);
    Value hidden = graph.activation(
        graph.linear(x, prefix + ".intermediate.dense", dModel, inner, true), activation);
    hidden = graph.linear(hidden, prefix + ".output.dense", inner, dModel, true);
    x = graph.layerNorm(graph.add(graph.dropout(hidden, dropout), x),
                        prefix + ".output.LayerNorm", epsilon);
    graph.endLayer();
  }

  // tanh(dense(first token)), what BertModel returns as pooler_output.
  auto pooler = [&] {
    Value first = PoolOp::create(b, loc, x, mask, PoolMode::cls);
    return graph.activation(graph.linear(first, "pooler.dense", dModel, dModel, true),
                            Activation::tanh);
  };
  if (in.architecture == "BertModel") {
    if (sentence) {
      auto mode = symbolizePoolMode(in.source.sentencePooling);
      Value embedding = PoolOp::create(b, loc, x, mask, *mode);
      if (in.source.sentenceNormalize)
        embedding = L2NormalizeOp::create(b, loc, embedding, b.getF64FloatAttr(1e-12));
      graph.output("sentence_embedding", embedding);
      return llvm::Error::success();
    }
    graph.output("last_hidden_state", x);
    if (in.hasWeight("pooler.dense.weight"))
      graph.output("pooler_output", pooler());
    return llvm::Error::success();
  }
  if (in.architecture == "BertForSequenceClassification") {
    double classifierDropout = config.probability("classifier_dropout", dropout);
    graph.output("logits", graph.linear(graph.dropout(pooler(), classifierDropout), "classifier",
                                        dModel, labels, true));
    return config.takeError();
  }
  Value transformed = graph.activation(
      graph.linear(x, "cls.predictions.transform.dense", dModel, dModel, true), activation);
  transformed = graph.layerNorm(transformed, "cls.predictions.transform.LayerNorm", epsilon);
  Value decoder = tied ? words : graph.param("cls.predictions.decoder.weight", {vocab, dModel});
  graph.output("logits", LinearOp::create(b, loc, transformed, decoder,
                                          graph.param("cls.predictions.bias", {vocab}),
                                          /*transpose_weight=*/true));
  return llvm::Error::success();
}
