//===- Unicode.h - UTF-8 and the character data of tokenizers --*- C++ -*-===//
//
// UTF-8 decoding and encoding, general categories, canonical decomposition
// and lowercasing, from the tables scripts/gen-unicode-tables.py generates
// (UnicodeTables.inc).
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_RUNTIME_UNICODE_H
#define XFMR_LIB_RUNTIME_UNICODE_H

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace xfmr::rt {

/// The length of the UTF-8 character starting at text[i], or 0 if the bytes
/// there are not valid UTF-8.
size_t utf8Length(std::string_view text, size_t i);

/// How many bytes at the end of `bytes` start a UTF-8 character that is not
/// complete yet (what a stream must hold back).
size_t incompleteUtf8Tail(std::string_view bytes);

/// `bytes` as valid UTF-8: each maximal ill-formed subsequence replaced by
/// U+FFFD, as Python's decode(errors="replace") and so Hugging Face's
/// decoders do.
std::string replaceInvalidUtf8(std::string_view bytes);

/// Decodes `text` into code points and the byte offset of each (plus the
/// text's length at the end); false on invalid UTF-8.
bool decodeUtf8(std::string_view text, std::vector<uint32_t> &points, std::vector<size_t> &offsets);
void appendUtf8(std::string &out, uint32_t cp);

/// General categories L, N, P, Mn and C (Cc, Cf, Cn, Co, Cs).
bool isLetter(uint32_t cp);
bool isNumber(uint32_t cp);
bool isPunctuation(uint32_t cp);
bool isNonspacingMark(uint32_t cp);
bool isOther(uint32_t cp);
/// The White_Space property (what \s matches).
bool isSpace(uint32_t cp);

/// Whether `text` is valid UTF-8.
bool isValidUtf8(std::string_view text);
/// The code point of the valid UTF-8 character at text[i] (of `length`
/// bytes, utf8Length's).
uint32_t codePointAt(std::string_view text, size_t i, size_t length);

/// General category M (Mn, Mc, Me), what StripAccents drops.
bool isMark(uint32_t cp);
/// What \w matches in Rust's regex crate: letters, marks, decimal and
/// letter numbers, connector punctuation, joiners.
bool isWordCharacter(uint32_t cp);
/// Whether valid UTF-8 `text` starts (ends) with a word character.
bool startsWithWordCharacter(std::string_view text);
bool endsWithWordCharacter(std::string_view text);
/// The bytes of the whitespace that valid UTF-8 `text` starts (ends) with.
size_t leadingWhitespace(std::string_view text);
size_t trailingWhitespace(std::string_view text);
/// Valid UTF-8 `text` in Unicode normalization form `form` (NFC, NFD,
/// NFKC or NFKD).
std::string normalizeUnicode(std::string_view text, std::string_view form);
/// The byte offsets where the extended grapheme clusters of valid UTF-8
/// `text` begin, and its length at the end.
std::vector<size_t> graphemeBoundaries(std::string_view text);

/// Appends cp's full canonical decomposition (itself if it has none).
void appendDecomposition(uint32_t cp, std::vector<uint32_t> &out);
/// Appends cp's full lowercase mapping (itself if it has none).
void appendLowercase(uint32_t cp, std::vector<uint32_t> &out);

} // namespace xfmr::rt

#endif // XFMR_LIB_RUNTIME_UNICODE_H
