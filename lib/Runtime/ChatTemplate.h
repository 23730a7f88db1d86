//===- ChatTemplate.h - Hugging Face chat templates ------------*- C++ -*-===//
//
// The Jinja subset that chat templates (tokenizer_config.json's
// `chat_template`) are written in, rendered exactly as transformers'
// apply_chat_template renders them: jinja2's sandboxed environment with
// trim_blocks and lstrip_blocks, the loopcontrols extension, the
// `generation` tag, and the globals raise_exception and strftime_now.
//
// Templates come from model repositories, so they are untrusted input: the
// parser and the renderer bound nesting, recursion, loop iterations and the
// size of what they build, and every problem is one Failure line.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_RUNTIME_CHATTEMPLATE_H
#define XFMR_LIB_RUNTIME_CHATTEMPLATE_H

#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <string>

namespace xfmr::rt {

class ChatTemplate {
public:
  /// Parses `source`; a syntax error is a Failure naming `where` (e.g.
  /// "chat template 'X'") and the line: "chat template 'X': line 3:
  /// unclosed '{% for %}'".
  ChatTemplate(const std::string &source, const std::string &where);
  ~ChatTemplate();
  ChatTemplate(const ChatTemplate &) = delete;
  ChatTemplate &operator=(const ChatTemplate &) = delete;

  /// Renders with the variables of `context`, a JSON object (messages,
  /// tools, add_generation_prompt, bos_token, eos_token; any other key is a
  /// plain variable). raise_exception(msg) and run-time errors (an unknown
  /// filter, calling what is not callable, bad operand types, a limit
  /// reached) are a Failure naming `where`, the line and the message.
  std::string render(const nlohmann::ordered_json &context) const;

  /// The parsed template (the AST; ChatTemplate.cpp defines it).
  struct Program;

private:
  std::unique_ptr<Program> program;
  std::string where;
};

} // namespace xfmr::rt

#endif // XFMR_LIB_RUNTIME_CHATTEMPLATE_H
