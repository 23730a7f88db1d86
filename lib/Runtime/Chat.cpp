//===- Chat.cpp - conversations through a checkpoint's chat template ------===//

#include "Chat.h"

#include "xfmr-rt/xfmr_runtime.h"

#include "CommandLine.h"
#include "Json.h"
#include "RuntimeSupport.h"
#include "Tokenizers/TokenizerModels.h"

using namespace xfmr::rt;

namespace {

/// A special token of tokenizer_config.json: a string, or an AddedToken
/// object's content.
const JsonValue *tokenText(const JsonValue &value) {
  if (value.isString())
    return &value;
  const JsonValue *content = value.isObject() ? value.get("content") : nullptr;
  return content && content->isString() ? content : nullptr;
}

} // namespace

ChatFormat::ChatFormat(const std::string &text, std::string source)
    : source(std::move(source)),
      chatTemplate(std::make_unique<ChatTemplate>(text, "chat template '" + this->source + "'")) {}

std::unique_ptr<ChatFormat> ChatFormat::load(const std::string &directory,
                                             const std::string &templateFile) {
  bool gguf = isGgufFile(directory);
  std::string configPath = gguf ? directory : directory + "/tokenizer_config.json";
  JsonValue config;
  if (gguf)
    config = ggufTokenizerFile(directory, /*config=*/true);
  else if (!directory.empty() && isRegularFile(configPath))
    config = parseTokenizerJson(configPath);
  std::string text, source;
  if (!templateFile.empty()) {
    text = readTokenizerFile(templateFile);
    source = templateFile;
  } else if (std::string jinja = directory + "/chat_template.jinja";
             !directory.empty() && isRegularFile(jinja)) {
    text = readTokenizerFile(jinja);
    source = jinja;
  } else if (const JsonValue *value = config.isObject() ? config.get("chat_template") : nullptr;
             value && value->kind != JsonValue::Kind::Null) {
    std::string key = tokenizerFileName(configPath) + ": key 'chat_template'";
    source = configPath;
    if (value->isString()) {
      text = value->text;
    } else if (value->isArray()) {
      for (const JsonValue &named : value->array) {
        const JsonValue *name = named.get("name");
        const JsonValue *body = named.get("template");
        if (!name || !name->isString() || !body || !body->isString())
          fail(key + ": expected a list of {\"name\": ..., \"template\": ...}");
        if (name->text == "default")
          text = body->text;
      }
      if (text.empty())
        fail(key + ": no template is named 'default'");
    } else {
      fail(key + ": expected a string or a list of named templates");
    }
  } else {
    return nullptr;
  }
  std::unique_ptr<ChatFormat> format(new ChatFormat(text, source));
  if (config.isObject())
    for (const auto &[key, value] : config.object)
      if (key.size() > 6 && key.compare(key.size() - 6, 6, "_token") == 0)
        if (const JsonValue *token = tokenText(value))
          format->specialTokens.emplace_back(key, token->text);
  return format;
}

std::unique_ptr<ChatFormat> ChatFormat::fromText(const std::string &text,
                                                 const std::string &source) {
  return std::unique_ptr<ChatFormat>(new ChatFormat(text, source));
}

std::string ChatFormat::render(const std::vector<ChatMessage> &messages,
                               bool addGenerationPrompt) const {
  std::string context = "{\"messages\": [";
  for (size_t i = 0; i < messages.size(); ++i) {
    context += i ? ", {\"role\": " : "{\"role\": ";
    appendJsonString(context, messages[i].role);
    context += ", \"content\": ";
    appendJsonString(context, messages[i].content);
    context += "}";
  }
  context += std::string("], \"add_generation_prompt\": ") +
             (addGenerationPrompt ? "true" : "false") + "}";
  return render(context);
}

std::string ChatFormat::render(const std::string &contextJson) const {
  std::string error;
  std::optional<JsonValue> context = parseJson(contextJson, error);
  if (!context || !context->isObject())
    fail("chat context: " + (context ? std::string("expected a JSON object") : error));
  for (const auto &[name, token] : specialTokens)
    if (!context->get(name)) {
      JsonValue value;
      value.kind = JsonValue::Kind::String;
      value.text = token;
      context->object.emplace_back(name, std::move(value));
    }
  return chatTemplate->render(*context);
}

//===----------------------------------------------------------------------===//
// C API
//===----------------------------------------------------------------------===//

struct xfmr_chat_template {
  std::unique_ptr<ChatFormat> format;
};

xfmr_chat_template *xfmr_chat_template_load(const char *directory, char *err, size_t errSize) {
  try {
    std::unique_ptr<ChatFormat> format = ChatFormat::load(directory, "");
    if (!format)
      fail(std::string("no chat template in '") + directory +
           "' (chat_template.jinja or tokenizer_config.json's chat_template)");
    return new xfmr_chat_template{std::move(format)};
  } catch (const Failure &failure) {
    setError(err, errSize, failure.message);
    return nullptr;
  }
}

xfmr_chat_template *xfmr_chat_template_parse(const char *source, size_t length, char *err,
                                             size_t errSize) {
  try {
    return new xfmr_chat_template{ChatFormat::fromText(std::string(source, length), "source")};
  } catch (const Failure &failure) {
    setError(err, errSize, failure.message);
    return nullptr;
  }
}

void xfmr_chat_template_free(xfmr_chat_template *chatTemplate) { delete chatTemplate; }

int64_t xfmr_chat_template_render(const xfmr_chat_template *chatTemplate, const char *contextJson,
                                  size_t jsonLength, char *text, size_t capacity, char *err,
                                  size_t errSize) {
  try {
    std::string rendered = chatTemplate->format->render(std::string(contextJson, jsonLength));
    std::copy_n(rendered.begin(), std::min(rendered.size(), capacity), text);
    return static_cast<int64_t>(rendered.size());
  } catch (const Failure &failure) {
    setError(err, errSize, failure.message);
    return -1;
  }
}
