//===- Regex.h - PCRE2 regular expressions for tokenizers -------*- C++ -*-===//
//
// tokenizer.json's Split and Replace patterns are Oniguruma expressions
// (Unicode classes, look-around, possessive and lazy quantifiers); PCRE2
// with UTF and Unicode properties reads the ones real tokenizers ship, and
// JIT-compiles them.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_RUNTIME_REGEX_H
#define XFMR_LIB_RUNTIME_REGEX_H

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace xfmr::rt {

class Regex {
public:
  /// Compiles `pattern` (a Failure naming `where` and the error if it does
  /// not compile).
  Regex(const std::string &pattern, const std::string &where);
  /// A regular expression that matches `text` literally.
  static Regex literal(std::string_view text, const std::string &where);
  ~Regex();
  Regex(Regex &&) noexcept;
  Regex &operator=(Regex &&) noexcept;

  /// The byte ranges of the successive non-overlapping matches in `text`
  /// (valid UTF-8), as Oniguruma's find_iter gives them: an empty match
  /// moves the search on by one character.
  std::vector<std::pair<size_t, size_t>> findAll(std::string_view text) const;

private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled;
};

} // namespace xfmr::rt

#endif // XFMR_LIB_RUNTIME_REGEX_H
