//===- ChatTemplateFuzzer.cpp - chat templates: parsing and rendering -----===//
//
// A chat template (untrusted: it comes with a model's tokenizer_config.json),
// optionally followed by kSeparator and a JSON context; without one, or when
// the context is not a JSON object, a fixed conversation with a system
// prompt, a tool call, a tool result and tools. Errors are fine; crashes,
// hangs and leaks are not.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"

#include "xfmr-rt/xfmr_runtime.h"

#include <vector>

namespace {

constexpr std::string_view kSeparator = "\n#-#\n";

constexpr std::string_view kContext = R"({
  "messages": [
    {"role": "system", "content": "You are helpful.\n"},
    {"role": "user", "content": "Weather in São Paulo? 😀 \"quoted\""},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "call12345", "type": "function",
      "function": {"name": "get_weather", "arguments": {"city": "São Paulo"}}}]},
    {"role": "tool", "tool_call_id": "call12345", "content": "{\"temp\": 22.5}"},
    {"role": "assistant", "content": "<think>\nwarm\n</think>\n\nIt is 22.5 °C."}
  ],
  "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
    "required": ["city"]}}}],
  "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "n": 3, "f": 0.5
})";

int64_t render(const xfmr_chat_template *chatTemplate, std::string_view context) {
  char err[512];
  std::vector<char> text(1 << 12);
  return xfmr_chat_template_render(chatTemplate, context.data(), context.size(), text.data(),
                                   text.size(), err, sizeof(err));
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view input = xfmr::fuzz::asText(data, size);
  std::string_view source = xfmr::fuzz::takeUntil(input, kSeparator);
  char err[512];
  xfmr_chat_template *chatTemplate =
      xfmr_chat_template_parse(source.data(), source.size(), err, sizeof(err));
  if (!chatTemplate)
    return 0;
  if (input.empty() || render(chatTemplate, input) < 0)
    render(chatTemplate, kContext);
  xfmr_chat_template_free(chatTemplate);
  return 0;
}
