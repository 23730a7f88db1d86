//===- ApiRequestFuzzer.cpp - the server's request bodies -----------------===//
//
// A body of /v1/completions (or, when its first byte is odd, of
// /v1/chat/completions) as the server parses it: any input is a request or
// an ApiError with status 400 and a message; nothing else may come out.
//
//===----------------------------------------------------------------------===//

#include "../lib/Runtime/Server/ApiRequests.h"

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  bool chat = size > 0 && (data[0] & 1);
  std::string body(reinterpret_cast<const char *>(data), size);
  try {
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
