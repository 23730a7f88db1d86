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
const Json *tokenText(const Json &value) {
  if (value.is_string())
    return &value;
  const Json *content = value.is_object() ? field(value, "content") : nullptr;
  return content && content->is_string() ? content : nullptr;
}

} // namespace

ChatFormat::ChatFormat(const std::string &text, std::string source)
    : source(std::move(source)),
      chatTemplate(std::make_unique<ChatTemplate>(text, "chat template '" + this->source + "'")) {}

std::unique_ptr<ChatFormat> ChatFormat::load(const std::string &directory,
                                             const std::string &templateFile) {
  bool gguf = isGgufFile(directory);
  std::string configPath = gguf ? directory : directory + "/tokenizer_config.json";
  Json config;
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
  } else if (const Json *value = config.is_object() ? field(config, "chat_template") : nullptr;
             value && !value->is_null()) {
    std::string key = tokenizerFileName(configPath) + ": key 'chat_template'";
    source = configPath;
    if (value->is_string()) {
      text = textOf(*value);
    } else if (value->is_array()) {
      for (const Json &named : elements(*value)) {
        const Json *name = field(named, "name");
        const Json *body = field(named, "template");
        if (!name || !name->is_string() || !body || !body->is_string())
          fail(key + ": expected a list of {\"name\": ..., \"template\": ...}");
        if (textOf(*name) == "default")
          text = textOf(*body);
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
  if (config.is_object())
    for (const auto &[key, value] : members(config))
      if (key.size() > 6 && key.compare(key.size() - 6, 6, "_token") == 0)
        if (const Json *token = tokenText(value))
          format->specialTokens.emplace_back(key, textOf(*token));
  return format;
}

std::unique_ptr<ChatFormat> ChatFormat::fromText(const std::string &text,
                                                 const std::string &source) {
  return std::unique_ptr<ChatFormat>(new ChatFormat(text, source));
}

std::string ChatFormat::render(const std::vector<ChatMessage> &messages,
                               bool addGenerationPrompt) const {
  OrderedJson context = {{"messages", OrderedJson::array()},
                         {"add_generation_prompt", addGenerationPrompt}};
  for (const ChatMessage &message : messages)
    context["messages"].push_back({{"role", message.role}, {"content", message.content}});
  return render(std::move(context));
}

std::string ChatFormat::render(const std::string &contextJson) const {
  std::string error;
  std::optional<OrderedJson> context = parseOrderedJson(contextJson, error);
  if (!context || !context->is_object())
    fail("chat context: " + (context ? std::string("expected a JSON object") : error));
  return render(std::move(*context));
}

std::string ChatFormat::render(OrderedJson context) const {
  for (const auto &[name, token] : specialTokens)
    if (!field(context, name))
      context[name] = token;
  return chatTemplate->render(context);
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
