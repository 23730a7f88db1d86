//===- Transformer.cpp - the original encoder-decoder transformer ---------===//
//
// "Attention Is All You Need": sinusoidal positions, embeddings scaled by
// sqrt(d_model), post-LN (or pre-LN with `normalize_before`), ReLU, causal
// self-attention and cross-attention in the decoder. Config keys and tensor
// names follow Hugging Face's BART/Marian family (EncoderDecoder.h).
//
//===----------------------------------------------------------------------===//

#include "EncoderDecoder.h"

#include <cmath>

using namespace mlir;
using namespace xfmr;
using namespace xfmr::frontend;

llvm::Error frontend::buildTransformer(FamilyInputs &in) {
  ConfigReader &config = in.config;
  EncoderDecoderConfig c;
  c.dModel = config.positiveInt({"d_model", "hidden_size"});
  c.vocab = c.decoderVocab = config.positiveInt({"vocab_size"});
  c.positions = config.positiveInt({"max_position_embeddings", "n_positions"});
  c.encoderLayers = config.layerCount({"encoder_layers", "num_hidden_layers"});
  c.decoderLayers = config.layerCount({"decoder_layers"}, c.encoderLayers);
  c.encoderHeads = config.positiveInt({"encoder_attention_heads", "num_attention_heads"});
  c.decoderHeads = config.positiveInt({"decoder_attention_heads"}, c.encoderHeads);
  c.encoderFfn = config.positiveInt({"encoder_ffn_dim"}, 4 * c.dModel);
  c.decoderFfn = config.positiveInt({"decoder_ffn_dim"}, c.encoderFfn);
  c.epsilon = config.positiveNumber("layer_norm_eps", 1e-5);
  c.dropout = config.probability("dropout", 0.1);
  c.activation = config.activation({"activation_function"}, "relu");
  c.preLayerNorm = config.boolean("normalize_before", false);
  c.embeddingScale =
      config.boolean("scale_embedding", true) ? std::sqrt(static_cast<double>(c.dModel)) : 1.0;
  c.tiedHead = config.boolean("tie_word_embeddings", true);
  in.info.padTokenId = config.nonNegativeInt("pad_token_id", 0);
  config.requireDivisible("d_model", c.dModel, "encoder_attention_heads", c.encoderHeads);
  config.requireDivisible("d_model", c.dModel, "decoder_attention_heads", c.decoderHeads);
  if (c.dModel % 2)
    config.error("d_model", "must be even for sinusoidal positions, got " + Twine(c.dModel));
  if (config.failed())
    return config.takeError();
  in.info.decoderStartTokenId = config.nonNegativeInt("decoder_start_token_id", in.info.padTokenId);
  return buildEncoderDecoder(in, c);
}
