//===- Embedder.h - sentence embeddings from a compiled encoder -*- C++ -*-===//
//
// A model compiled from a sentence-transformers checkpoint (outputs
// `sentence_embedding` [B, D], pooled and normalized as its modules say) run
// on batches of token-id sequences, as /v1/embeddings serves them.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_RUNTIME_EMBEDDER_H
#define XFMR_LIB_RUNTIME_EMBEDDER_H

#include "Manifest.h"
#include "ModelWeights.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace xfmr::rt {

class Embedder {
public:
  /// Fails naming what the model lacks: the sentence_embedding output, or
  /// inputs other than input_ids, attention_mask and token_type_ids.
  Embedder(const Manifest &manifest, void (*entry)(void **), const BufferMap &weights);

  /// Each sequence's embedding (any thread; one batch runs at a time).
  /// Sequences must hold 1 .. tokens() ids.
  std::vector<std::vector<float>> embed(const std::vector<std::vector<int32_t>> &sequences);

  int64_t tokens() const { return sequenceLength; }
  /// Token ids the model takes, [0, vocab()) (0: unknown).
  int64_t vocab() const { return vocabSize; }
  int64_t width() const { return embeddingWidth; }

private:
  void (*entry)(void **);
  BufferMap states; // none: an encoder keeps no state
  std::unique_ptr<EntryArgs> args;
  Buffer *ids = nullptr, *mask = nullptr, *output = nullptr;
  xfmr_dtype outputType = XFMR_DTYPE_F32;
  int64_t batch = 0, sequenceLength = 0, embeddingWidth = 0, vocabSize = 0;
  std::mutex mutex;
};

} // namespace xfmr::rt

#endif // XFMR_LIB_RUNTIME_EMBEDDER_H
