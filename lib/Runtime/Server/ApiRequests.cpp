//===- ApiRequests.cpp - OpenAI API request bodies ------------------------===//

#include "ApiRequests.h"

#include "Json.h"

#include <cmath>

using namespace xfmr::rt;
// Request bodies keep their members' order: a chat's messages and tools reach
// the template as written.
using json = OrderedJson;

json ApiError::body() const {
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", nullptr}}}};
}

namespace {

[[noreturn]] void invalid(const std::string &param, const std::string &message) {
  throw ApiError{400, "'" + param + "': " + message, param};
}

/// body[key] when present and not null.
const json *given(const json &body, const char *key) {
  const json *value = field(body, key);
  return value && !value->is_null() ? value : nullptr;
}

double number(const json &body, const char *key, double low, double high, double fallback) {
  const json *value = given(body, key);
  if (!value)
    return fallback;
  if (!value->is_number())
    invalid(key, "expected a number");
  double x = value->get<double>();
  if (!std::isfinite(x) || x < low || x > high)
    invalid(key, "must be in [" + json(low).dump() + ", " + json(high).dump() + "]");
  return x;
}

int64_t integer(const json &body, const char *key, int64_t low, int64_t high, int64_t fallback) {
  const json *value = given(body, key);
  if (!value)
    return fallback;
  if (!value->is_number_integer())
    invalid(key, "expected an integer");
  bool inRange = value->is_number_unsigned()
                     ? value->get<uint64_t>() <= static_cast<uint64_t>(high) &&
                           (low <= 0 || value->get<uint64_t>() >= static_cast<uint64_t>(low))
                     : value->get<int64_t>() >= low && value->get<int64_t>() <= high;
  if (!inRange)
    invalid(key, "must be in [" + std::to_string(low) + ", " + std::to_string(high) + "]");
  return value->get<int64_t>();
}

bool boolean(const json &body, const char *key, bool fallback) {
  const json *value = given(body, key);
  if (!value)
    return fallback;
  if (!value->is_boolean())
    invalid(key, "expected true or false");
  return value->get<bool>();
}

std::vector<int32_t> tokenIds(const json &array, const char *key) {
  std::vector<int32_t> ids;
  for (const json &id : array) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
      invalid(key, "expected a text or an array of token ids");
    ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return ids;
}

void parsePrompt(const json &body, CompletionRequest &request) {
  const json *prompt = given(body, "prompt");
  if (!prompt)
    invalid("prompt", "required");
  const json *single = prompt;
  if (prompt->is_array() && !prompt->empty() &&
      (prompt->front().is_string() || prompt->front().is_array())) {
    if (prompt->size() != 1)
      invalid("prompt", "one prompt per request (n choices may be asked for with 'n')");
    single = &prompt->front();
  }
  if (single->is_string()) {
    request.prompt = single->get<std::string>();
  } else if (single->is_array()) {
    request.promptIds = tokenIds(*single, "prompt");
    request.promptIsIds = true;
  } else {
    invalid("prompt", "expected a text or an array of token ids");
  }
}

/// The messages, each {role, content} with the content as text.
void parseMessages(const json &body, CompletionRequest &request) {
  const json *messages = given(body, "messages");
  if (!messages || !messages->is_array() || messages->empty())
    invalid("messages", "expected a non-empty array of messages");
  request.messages = json::array();
  for (const json &message : *messages) {
    if (!message.is_object())
      invalid("messages", "each message must be an object");
    const json *role = given(message, "role");
    if (!role || !role->is_string())
      invalid("messages", "each message needs a 'role' text");
    json copy = message;
    const json *content = given(message, "content");
    if (content && content->is_array()) {
      std::string text;
      for (const json &part : *content) {
        const json *type = part.is_object() ? given(part, "type") : nullptr;
        const json *partText = part.is_object() ? given(part, "text") : nullptr;
        if (!type || *type != "text" || !partText || !partText->is_string())
          invalid("messages", "content parts other than {\"type\": \"text\", \"text\": ...} are "
                              "not supported");
        text += partText->get<std::string>();
      }
      copy["content"] = text;
    } else if (content && !content->is_string()) {
      invalid("messages", "a message's 'content' must be a text or an array of text parts");
    } else if (!content) {
      copy["content"] = "";
    }
    request.messages.push_back(std::move(copy));
  }
}

void parseStops(const json &body, GenerationSettings &settings) {
  const json *stop = given(body, "stop");
  if (!stop)
    return;
  if (stop->is_string()) {
    settings.stops = {stop->get<std::string>()};
  } else if (stop->is_array() && stop->size() <= 4) {
    for (const json &text : *stop) {
      if (!text.is_string())
        invalid("stop", "expected a text or an array of up to 4 texts");
      settings.stops.push_back(text.get<std::string>());
    }
  } else {
    invalid("stop", "expected a text or an array of up to 4 texts");
  }
  for (const std::string &text : settings.stops)
    if (text.empty())
      invalid("stop", "a stop text must not be empty");
}

/// The body as a JSON object.
json parseBody(const std::string &text) {
  std::string error;
  std::optional<json> body = parseOrderedJson(text, error);
  if (!body)
    throw ApiError{400, "the body is not valid JSON: " + error, ""};
  if (!body->is_object())
    throw ApiError{400, "the body must be a JSON object", ""};
  if (const json *model = given(*body, "model"); model && !model->is_string())
    invalid("model", "expected a text");
  return std::move(*body);
}

} // namespace

EmbeddingRequest xfmr::rt::parseEmbeddingRequest(const std::string &text) {
  json body = parseBody(text);
  EmbeddingRequest request;
  const json *input = given(body, "input");
  if (!input)
    invalid("input", "required");
  const char *expected = "expected a text, an array of texts, an array of token ids or an array "
                         "of arrays of token ids";
  auto add = [&](const json &item) {
    EmbeddingRequest::Input one;
    if (item.is_string()) {
      one.text = item.get<std::string>();
    } else if (item.is_array()) {
      one.textual = false;
      one.ids = tokenIds(item, "input");
    } else {
      invalid("input", expected);
    }
    request.inputs.push_back(std::move(one));
  };
  if (input->is_string()) {
    add(*input);
  } else if (input->is_array() && !input->empty() && input->front().is_number_integer()) {
    add(*input);
  } else if (input->is_array() && !input->empty()) {
    if (input->size() > 2048)
      invalid("input", "at most 2048 inputs per request");
    for (const json &item : *input)
      if (item.is_string() || item.is_array())
        add(item);
      else
        invalid("input", expected);
  } else {
    invalid("input", expected);
  }
  if (const json *format = given(body, "encoding_format")) {
    if (*format != "float" && *format != "base64")
      invalid("encoding_format", "expected \"float\" or \"base64\"");
    request.base64 = *format == "base64";
  }
  request.dimensions = integer(body, "dimensions", 1, INT32_MAX, 0);
  return request;
}

CompletionRequest xfmr::rt::parseCompletionRequest(const std::string &text, bool chat) {
  json body = parseBody(text);
  CompletionRequest request;
  request.chat = chat;
  if (chat)
    parseMessages(body, request);
  else
    parsePrompt(body, request);
  GenerationSettings &settings = request.settings;
  // OpenAI's defaults: temperature 1, no top-p, no top-k, no penalty.
  settings.sampling.temperature = number(body, "temperature", 0, 2, 1.0);
  settings.sampling.top_p = number(body, "top_p", 0, 1, 1.0);
  if (settings.sampling.top_p <= 0)
    invalid("top_p", "must be in (0, 1]");
  settings.sampling.top_k = integer(body, "top_k", 0, INT32_MAX, 0);
  settings.sampling.repeat_penalty =
      number(body, "repetition_penalty", 1e-3, 1e3, number(body, "repeat_penalty", 1e-3, 1e3, 1));
  settings.frequencyPenalty = number(body, "frequency_penalty", -2, 2, 0);
  settings.presencePenalty = number(body, "presence_penalty", -2, 2, 0);
  request.seeded = given(body, "seed") != nullptr;
  settings.seed = static_cast<uint64_t>(integer(body, "seed", INT64_MIN, INT64_MAX, 0));
  const char *maxKey =
      given(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  request.maxTokensGiven = given(body, maxKey) != nullptr;
  // /v1/completions' default is 16 tokens; a chat's, as long as the context
  // allows (the server bounds it).
  settings.maxTokens = integer(body, maxKey, 1, INT32_MAX, chat ? INT32_MAX : 16);
  parseStops(body, settings);
  settings.ignoreEos = boolean(body, "ignore_eos", false);
  request.n = integer(body, "n", 1, 16, 1);
  request.stream = boolean(body, "stream", false);
  if (const json *options = given(body, "stream_options")) {
    if (!options->is_object())
      invalid("stream_options", "expected an object");
    if (!request.stream)
      invalid("stream_options", "only allowed with 'stream': true");
    request.includeUsage = boolean(*options, "include_usage", false);
  }
  if (chat) {
    request.logprobs = boolean(body, "logprobs", false);
    settings.topLogprobs = integer(body, "top_logprobs", 0, 20, 0);
    if (given(body, "top_logprobs") && !request.logprobs)
      invalid("top_logprobs", "needs 'logprobs': true");
  } else {
    request.logprobs = given(body, "logprobs") != nullptr;
    settings.topLogprobs = integer(body, "logprobs", 0, 5, 0);
    if (boolean(body, "echo", false))
      invalid("echo", "echoing the prompt is not supported");
    if (const json *suffix = given(body, "suffix"); suffix && !suffix->is_string())
      invalid("suffix", "expected a text");
    if (given(body, "suffix"))
      invalid("suffix", "insertion (a suffix) is not supported");
  }
  if (!request.logprobs)
    settings.topLogprobs = -1;
  return request;
}
