//===- Chat.h - conversations through a checkpoint's chat template -*- C++ -*-===//
//
// Chat checkpoints ship the Jinja template that turns a conversation into
// the text their model was trained on (tokenizer_config.json's
// `chat_template`, or chat_template.jinja). ChatFormat finds it and renders
// conversations as transformers' apply_chat_template does: the messages,
// add_generation_prompt, and the tokenizer's special tokens as variables.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_RUNTIME_CHAT_H
#define XFMR_LIB_RUNTIME_CHAT_H

#include "ChatTemplate.h"

#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace xfmr::rt {

struct ChatMessage {
  std::string role, content;
};

class ChatFormat {
public:
  /// The chat template of the tokenizer in `directory`: chat_template.jinja,
  /// else tokenizer_config.json's `chat_template` (a string, or a list of
  /// {name, template} of which "default" is used); or the file
  /// `templateFile` if given. Null if the checkpoint has none. A template
  /// that does not parse is a Failure naming its file.
  static std::unique_ptr<ChatFormat> load(const std::string &directory,
                                          const std::string &templateFile);

  /// A template from its text, without special tokens.
  static std::unique_ptr<ChatFormat> fromText(const std::string &text, const std::string &source);

  /// The text of `messages`, with the assistant's header after them if
  /// `addGenerationPrompt`.
  std::string render(const std::vector<ChatMessage> &messages, bool addGenerationPrompt) const;
  /// The same from `context`, a JSON object of the template's variables
  /// (messages, tools, ...): the special tokens are added where absent.
  std::string render(const std::string &contextJson) const;
  std::string render(nlohmann::ordered_json context) const;

  /// Where the template was read from.
  std::string source;

private:
  ChatFormat(const std::string &text, std::string source);

  std::unique_ptr<ChatTemplate> chatTemplate;
  /// tokenizer_config.json's special tokens (bos_token, eos_token, ...).
  std::vector<std::pair<std::string, std::string>> specialTokens;
};

} // namespace xfmr::rt

#endif // XFMR_LIB_RUNTIME_CHAT_H
