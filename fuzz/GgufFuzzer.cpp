//===- GgufFuzzer.cpp - the GGUF reader -----------------------------------===//
//
// A llama.cpp model file: the header, metadata, tensor infos, alignment and
// offsets (GgufFile), its tokenizer and chat template, the model read from
// it (names, permuted projections, config.json), then every tensor decoded
// as the runtime reads it.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"

#include "xfmr-rt/xfmr_runtime.h"

#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path = xfmr::fuzz::writeScratchFile("model.gguf", xfmr::fuzz::asText(data, size));
  char err[512];
  // The tokenizer and chat template spelled from its metadata.
  if (xfmr_tokenizer *tokenizer = xfmr_tokenizer_load(path.c_str(), err, sizeof(err))) {
    int32_t ids[64];
    xfmr_tokenizer_encode(tokenizer, "Hello, world! 123", 17, ids, 64, err, sizeof(err));
    xfmr_tokenizer_free(tokenizer);
  }
  if (xfmr_chat_template *chat = xfmr_chat_template_load(path.c_str(), err, sizeof(err)))
    xfmr_chat_template_free(chat);
  xfmr_weights *weights = xfmr_weights_open(path.c_str(), err, sizeof(err));
  if (!weights)
    return 0;
  if (!xfmr_weights_config_json(weights))
    __builtin_trap();
  for (size_t i = 0; i < xfmr_weights_count(weights); ++i) {
    xfmr_tensor_info info;
    if (xfmr_weights_get(weights, i, &info) != 0)
      __builtin_trap();
    uint64_t elements = 1;
    for (int32_t d = 0; d < info.rank; ++d)
      elements *= uint64_t(info.shape[d]);
    // Bounded: the reader checked each tensor's blocks against the file.
    std::vector<float> values(elements);
    if (xfmr_weights_read(weights, info.name, XFMR_DTYPE_F32, info.rank, info.shape, values.data(),
                          err, sizeof(err)) != 0)
      __builtin_trap();
  }
  xfmr_weights_close(weights);
  return 0;
}
