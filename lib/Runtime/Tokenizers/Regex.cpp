//===- Regex.cpp - PCRE2 regular expressions for tokenizers ---------------===//

#include "Tokenizers/Regex.h"

#include "CommandLine.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

using namespace xfmr::rt;

struct Regex::Compiled {
  pcre2_code *code = nullptr;
  std::string where;
  ~Compiled() { pcre2_code_free(code); }
};

Regex::Regex(const std::string &pattern, const std::string &where)
    : compiled(std::make_unique<Compiled>()) {
  compiled->where = where;
  int error = 0;
  PCRE2_SIZE offset = 0;
  compiled->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                 PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (!compiled->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    fail(where + ": the regular expression '" + pattern + "' does not compile: " +
         reinterpret_cast<const char *>(message) + " at offset " + std::to_string(offset));
  }
  // Without JIT (a platform PCRE2 lacks it for) matching is slower, not
  // different.
  pcre2_jit_compile(compiled->code, PCRE2_JIT_COMPLETE);
}

Regex Regex::literal(std::string_view text, const std::string &where) {
  return Regex("\\Q" + std::string(text) + "\\E", where);
}

Regex::~Regex() = default;
Regex::Regex(Regex &&) noexcept = default;
Regex &Regex::operator=(Regex &&) noexcept = default;

std::vector<std::pair<size_t, size_t>> Regex::findAll(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> matches;
  pcre2_match_data *data = pcre2_match_data_create_from_pattern(compiled->code, nullptr);
  if (!data)
    fail("out of memory matching a regular expression");
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t searchFrom = 0;
  size_t lastMatchEnd = std::string_view::npos;
  // The whole subject's UTF-8 is checked once, not at every search.
  uint32_t options = 0;
  while (searchFrom <= text.size()) {
    int found =
        pcre2_match(compiled->code, subject, text.size(), searchFrom, options, data, nullptr);
    if (found == PCRE2_ERROR_NOMATCH)
      break;
    if (found < 0) {
      pcre2_match_data_free(data);
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(found, message, sizeof(message));
      fail(compiled->where +
           ": matching the regular expression failed: " + reinterpret_cast<const char *>(message));
    }
    options = PCRE2_NO_UTF_CHECK;
    PCRE2_SIZE *vector = pcre2_get_ovector_pointer(data);
    size_t start = vector[0], end = vector[1];
    // \K can put a match's start after its end; take it as empty.
    start = std::min(start, end);
    if (start == end && end == lastMatchEnd) {
      // Onto the next character.
      size_t step = 1;
      while (searchFrom + step < text.size() && (text[searchFrom + step] & 0xC0) == 0x80)
        ++step;
      searchFrom += step;
      continue;
    }
    searchFrom = lastMatchEnd = end;
    matches.emplace_back(start, end);
  }
  pcre2_match_data_free(data);
  return matches;
}
