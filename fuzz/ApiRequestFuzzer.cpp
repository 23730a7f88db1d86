//===- ApiRequestFuzzer.cpp - the server's request bodies -----------------===//
//
// A body of /v1/completions, /v1/chat/completions or /v1/embeddings (by its
// first byte modulo 3) as the server parses it: any input is a request or
// an ApiError with status 400 and a message; nothing else may come out.
//
//===----------------------------------------------------------------------===//

#include "Server/ApiRequests.h"

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int route = size > 0 ? data[0] % 3 : 0;
  bool chat = route == 1;
  std::string body(reinterpret_cast<const char *>(data), size);
  try {
    if (route == 2) {
      xfmr::rt::EmbeddingRequest request = xfmr::rt::parseEmbeddingRequest(body);
      if (request.inputs.empty() || request.inputs.size() > 2048 || request.dimensions < 0)
        __builtin_trap();
      return 0;
    }
    xfmr::rt::CompletionRequest request = xfmr::rt::parseCompletionRequest(body, chat);
    const xfmr::rt::GenerationSettings &s = request.settings;
    if (request.n < 1 || s.maxTokens < 1 || !(s.sampling.top_p > 0) || s.sampling.top_k < 0 ||
        s.topLogprobs > 20 || s.stops.size() > 4 || (chat && request.messages.empty()))
      __builtin_trap();
    // What the server does with the messages: dump them for the template.
    (void)request.messages.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (const xfmr::rt::ApiError &error) {
    if (error.status != 400 || error.message.empty())
      __builtin_trap();
    (void)error.body().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return 0;
}
