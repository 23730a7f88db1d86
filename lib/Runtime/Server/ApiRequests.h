//===- ApiRequests.h - OpenAI API request bodies ----------------*- C++ -*-===//
//
// The bodies of /v1/completions and /v1/chat/completions as OpenAI's API
// defines them, checked field by field: a field of the wrong type or out of
// range is an ApiError naming it (status 400); fields the server does not
// know are ignored, as OpenAI's own server does.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_RUNTIME_SERVER_APIREQUESTS_H
#define XFMR_LIB_RUNTIME_SERVER_APIREQUESTS_H

#include "Engine.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace xfmr::rt {

/// An error response: an HTTP status and OpenAI's error object.
struct ApiError {
  int status;
  std::string message;
  std::string param;
  std::string type = "invalid_request_error";

  nlohmann::ordered_json body() const;
};

struct CompletionRequest {
  bool chat = false;
  /// /v1/completions: the prompt's text, or its token ids.
  std::string prompt;
  std::vector<int32_t> promptIds;
  bool promptIsIds = false;
  /// /v1/chat/completions: the messages (content parts joined to text).
  nlohmann::ordered_json messages;
  GenerationSettings settings;
  bool seeded = false, maxTokensGiven = false;
  int64_t n = 1;
  bool stream = false, includeUsage = false;
  /// logprobs (completions: top_logprobs = logprobs; chat: logprobs: true).
  bool logprobs = false;
};

/// Parses a request body; an ApiError says what is wrong with it.
CompletionRequest parseCompletionRequest(const std::string &body, bool chat);

struct EmbeddingRequest {
  /// Each input: a text, or (textual false) token ids.
  struct Input {
    bool textual = true;
    std::string text;
    std::vector<int32_t> ids;
  };
  std::vector<Input> inputs;
  bool base64 = false;
  int64_t dimensions = 0; // 0: not given
};

/// Parses a body of /v1/embeddings (at most 2048 inputs).
EmbeddingRequest parseEmbeddingRequest(const std::string &body);

} // namespace xfmr::rt

#endif // XFMR_LIB_RUNTIME_SERVER_APIREQUESTS_H
