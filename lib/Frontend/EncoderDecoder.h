//===- EncoderDecoder.h - the encoder-decoder shared by families -*- C++ -*-===//
//
// The original transformer, BART and Marian are one graph with different
// positions, embedding scales and layer-norm placements. Tensor names are
// BART's (`encoder.layers.0.self_attn.q_proj.weight`, `shared.weight`, ...);
// the conditional-generation classes save them under `model.`.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_FRONTEND_ENCODERDECODER_H
#define XFMR_LIB_FRONTEND_ENCODERDECODER_H

#include "FrontendSupport.h"

namespace xfmr::frontend {

struct EncoderDecoderConfig {
  int64_t dModel = 0, vocab = 0;
  /// The decoder's vocabulary: `vocab` unless the embeddings are separate.
  int64_t decoderVocab = 0;
  /// The rows of a learned position table: positions + offset.
  int64_t positions = 0;
  int64_t encoderLayers = 0, decoderLayers = 0, encoderHeads = 0, decoderHeads = 0;
  int64_t encoderFfn = 0, decoderFfn = 0;
  double epsilon = 1e-5, dropout = 0.1, activationDropout = 0.0;
  Activation activation = Activation::relu;
  /// Pre-LN blocks, with a layer norm after each stack (else post-LN).
  bool preLayerNorm = false;
  /// BART's `layernorm_embedding` after embeddings and positions.
  bool layerNormEmbedding = false;
  double embeddingScale = 1.0;
  enum class Positions {
    Sinusoidal,
    SinusoidalHalves,
    Learned
  } positionKind = Positions::Sinusoidal;
  /// Learned positions start at this row (BART: 2).
  int64_t positionOffset = 0;
  /// One `shared` table for source, target and (tied) head; else
  /// `encoder.embed_tokens` and `decoder.embed_tokens`.
  bool sharedEmbeddings = true;
  /// Whether the shared table is shared only along with a tied head
  /// (transformers v5's BART and Marian): untied checkpoints keep the
  /// encoder's and decoder's embeddings under their own names.
  bool sharingFollowsHead = false;
  /// The LM head is the decoder's embedding table.
  bool tiedHead = true;
  /// The LM head adds `final_logits_bias` [1, decoderVocab].
  bool finalLogitsBias = true;
  /// Return the LM head's logits; else the base model's
  /// `last_hidden_state` (the decoder's) and `encoder_last_hidden_state`.
  bool languageModelHead = true;
};

/// Reads the sequence lengths, builds the graph and records its outputs.
llvm::Error buildEncoderDecoder(FamilyInputs &in, const EncoderDecoderConfig &config);

} // namespace xfmr::frontend

#endif // XFMR_LIB_FRONTEND_ENCODERDECODER_H
