//===- Embedder.cpp - sentence embeddings from a compiled encoder ---------===//

#include "Embedder.h"

#include "CommandLine.h"
#include "RuntimeSupport.h"

#include <algorithm>
#include <cstring>

using namespace xfmr::rt;

Embedder::Embedder(const Manifest &manifest, void (*entry)(void **), const BufferMap &weights)
    : entry(entry) {
  for (const ArgSpec &arg : manifest.args)
    if (arg.kind == ArgSpec::Kind::State ||
        (arg.kind == ArgSpec::Kind::Input &&
         (arg.shape.size() != 2 || arg.dtype != XFMR_DTYPE_I32 ||
          (arg.name != "input_ids" && arg.name != "attention_mask" &&
           arg.name != "token_type_ids"))))
      fail("--serve embeds with an encoder of input_ids, attention_mask and token_type_ids; "
           "this model also takes '" +
           arg.name + "'");
  const ArgSpec *tokens = manifest.find("input_ids", ArgSpec::Kind::Input);
  const ArgSpec *embedding = manifest.find("sentence_embedding", ArgSpec::Kind::Output);
  if (!tokens || !manifest.find("attention_mask", ArgSpec::Kind::Input) || !embedding ||
      embedding->shape.size() != 2)
    fail("--serve embeds with a model compiled from a sentence-transformers checkpoint (its "
         "'sentence_embedding' output, from input_ids and attention_mask)");
  args = std::make_unique<EntryArgs>(manifest, weights, states);
  ids = args->find("input_ids");
  mask = args->find("attention_mask");
  output = args->find("sentence_embedding");
  batch = tokens->shape[0];
  sequenceLength = tokens->shape[1];
  vocabSize = tokens->vocabSize;
  outputType = embedding->dtype;
  embeddingWidth = embedding->shape[1];
}

std::vector<std::vector<float>>
Embedder::embed(const std::vector<std::vector<int32_t>> &sequences) {
  std::lock_guard<std::mutex> lock(mutex);
  std::vector<std::vector<float>> embeddings;
  std::vector<float> rows(batch * embeddingWidth);
  for (size_t first = 0; first < sequences.size(); first += batch) {
    auto *idData = ids->as<int32_t>();
    auto *maskData = mask->as<int32_t>();
    std::memset(idData, 0, ids->size);
    std::memset(maskData, 0, mask->size);
    for (int64_t b = 0; b < batch; ++b) {
      // Rows past the last sequence attend to one padding token.
      const std::vector<int32_t> *sequence =
          first + b < sequences.size() ? &sequences[first + b] : nullptr;
      if (sequence &&
          (sequence->empty() || static_cast<int64_t>(sequence->size()) > sequenceLength))
        fail("internal error: a sequence of " + std::to_string(sequence->size()) + " tokens");
      size_t length = sequence ? sequence->size() : 1;
      for (size_t t = 0; t < length; ++t) {
        idData[b * sequenceLength + t] = sequence ? (*sequence)[t] : 0;
        maskData[b * sequenceLength + t] = 1;
      }
    }
    entry(args->data());
    convertElements(outputType, output->data, rows.size(), XFMR_DTYPE_F32, rows.data());
    for (int64_t b = 0; b < batch && first + b < sequences.size(); ++b)
      embeddings.emplace_back(rows.begin() + b * embeddingWidth,
                              rows.begin() + (b + 1) * embeddingWidth);
  }
  return embeddings;
}
