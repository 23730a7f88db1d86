//===- Bart.cpp - BART and Marian as Hugging Face ships them --------------===//
//
// BartConfig / MarianConfig keys. Both are post-LN encoder-decoders with
// BART's tensor names (EncoderDecoder.h); they differ in positions -- BART
// learns a table whose first two rows are unused (offset 2), Marian adds a
// fixed sinusoid with the sines in the first half of the features -- and in
// BART's layer norm after the embeddings. Neither config places the layer
// norms: both families are post-LN. `scale_embedding` multiplies
// token embeddings by sqrt(d_model). The conditional-generation classes
// (BartForConditionalGeneration, MarianMTModel) add a head, tied to the
// decoder's embeddings unless tie_word_embeddings is false, plus
// `final_logits_bias`; the base classes return
// the decoder's and the encoder's last hidden states.
//
//===----------------------------------------------------------------------===//

#include "EncoderDecoder.h"

#include <cmath>

using namespace mlir;
using namespace xfmr;
using namespace xfmr::frontend;

llvm::Error frontend::buildBart(FamilyInputs &in) {
  ConfigReader &config = in.config;
  bool marian = in.info.modelType == "marian";
  EncoderDecoderConfig c;
  c.dModel = config.positiveInt({"d_model", "hidden_size"});
  c.vocab = config.positiveInt({"vocab_size"});
  c.encoderLayers = config.layerCount({"encoder_layers"}, 12);
  c.decoderLayers = config.layerCount({"decoder_layers"}, 12);
  c.encoderHeads = config.positiveInt({"encoder_attention_heads"}, 16);
  c.decoderHeads = config.positiveInt({"decoder_attention_heads"}, 16);
  c.encoderFfn = config.positiveInt({"encoder_ffn_dim"}, 4096);
  c.decoderFfn = config.positiveInt({"decoder_ffn_dim"}, 4096);
  c.dropout = config.probability("dropout", 0.1);
  c.activationDropout = config.probability("activation_dropout", 0.0);
  c.activation = config.activation({"activation_function"}, "gelu");
  c.embeddingScale =
      config.boolean("scale_embedding", false) ? std::sqrt(static_cast<double>(c.dModel)) : 1.0;
  c.sharedEmbeddings = !marian || config.boolean("share_encoder_decoder_embeddings", true);
  c.decoderVocab =
      c.sharedEmbeddings ? c.vocab : config.positiveInt({"decoder_vocab_size"}, c.vocab);
  c.tiedHead = config.boolean("tie_word_embeddings", true);
  c.sharingFollowsHead = true;
  c.languageModelHead =
      in.architecture == "BartForConditionalGeneration" || in.architecture == "MarianMTModel";
  int64_t positions = config.positiveInt({"max_position_embeddings"}, 1024);
  if (marian) {
    c.positionKind = EncoderDecoderConfig::Positions::SinusoidalHalves;
    c.positions = positions;
    if (c.dModel % 2)
      config.error("d_model", "must be even for sinusoidal positions, got " + Twine(c.dModel));
  } else {
    c.positionKind = EncoderDecoderConfig::Positions::Learned;
    c.positionOffset = 2;
    c.positions = positions + c.positionOffset;
    c.layerNormEmbedding = true;
  }
  in.info.padTokenId = config.nonNegativeInt("pad_token_id", marian ? 58100 : 1);
  config.requireDivisible("d_model", c.dModel, "encoder_attention_heads", c.encoderHeads);
  config.requireDivisible("d_model", c.dModel, "decoder_attention_heads", c.decoderHeads);
  if (config.failed())
    return config.takeError();
  in.info.decoderStartTokenId = config.nonNegativeInt("decoder_start_token_id", in.info.padTokenId);
  return buildEncoderDecoder(in, c);
}
