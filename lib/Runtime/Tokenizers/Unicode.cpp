//===- Unicode.cpp - UTF-8 and the character data tokenizers need --------===//

#include "Tokenizers/Unicode.h"

#include "CommandLine.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>

using namespace xfmr::rt;

namespace {

struct CodePointRange {
  uint32_t first, last;
};

template <size_t Width> struct CodePointMapping {
  uint32_t from;
  uint32_t to[Width]; // 0-padded
};

#include "Tokenizers/UnicodeTables.inc"

template <size_t N> bool inRanges(const CodePointRange (&ranges)[N], uint32_t cp) {
  auto it =
      std::upper_bound(std::begin(ranges), std::end(ranges), cp,
                       [](uint32_t value, const CodePointRange &r) { return value < r.first; });
  return it != std::begin(ranges) && cp <= std::prev(it)->last;
}

template <size_t N, size_t Width>
void appendMapped(const CodePointMapping<Width> (&table)[N], uint32_t cp,
                  std::vector<uint32_t> &out) {
  auto it = std::lower_bound(
      std::begin(table), std::end(table), cp,
      [](const CodePointMapping<Width> &m, uint32_t value) { return m.from < value; });
  if (it == std::end(table) || it->from != cp) {
    out.push_back(cp);
    return;
  }
  for (uint32_t to : it->to)
    if (to)
      out.push_back(to);
}

} // namespace

bool xfmr::rt::decodeUtf8(std::string_view text, std::vector<uint32_t> &points,
                          std::vector<size_t> &offsets) {
  for (size_t i = 0; i < text.size();) {
    size_t length = utf8Length(text, i);
    if (!length)
      return false;
    auto byte = [&](size_t k) { return static_cast<uint8_t>(text[i + k]); };
    uint32_t cp = length == 1   ? byte(0)
                  : length == 2 ? (byte(0) & 0x1F) << 6 | (byte(1) & 0x3F)
                  : length == 3 ? (byte(0) & 0x0F) << 12 | (byte(1) & 0x3F) << 6 | (byte(2) & 0x3F)
                                : (byte(0) & 0x07) << 18 | (byte(1) & 0x3F) << 12 |
                                      (byte(2) & 0x3F) << 6 | (byte(3) & 0x3F);
    points.push_back(cp);
    offsets.push_back(i);
    i += length;
  }
  offsets.push_back(text.size());
  return true;
}

void xfmr::rt::appendUtf8(std::string &out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | cp >> 6);
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | cp >> 12);
    out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | cp >> 18);
    out += static_cast<char>(0x80 | (cp >> 12 & 0x3F));
    out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool xfmr::rt::isLetter(uint32_t cp) { return inRanges(kLetters, cp); }
bool xfmr::rt::isNumber(uint32_t cp) { return inRanges(kNumbers, cp); }
bool xfmr::rt::isPunctuation(uint32_t cp) { return inRanges(kPunctuation, cp); }
bool xfmr::rt::isNonspacingMark(uint32_t cp) { return inRanges(kNonspacingMarks, cp); }
bool xfmr::rt::isOther(uint32_t cp) { return inRanges(kOther, cp); }

bool xfmr::rt::isSpace(uint32_t cp) {
  return (cp >= 0x9 && cp <= 0xD) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

void xfmr::rt::appendDecomposition(uint32_t cp, std::vector<uint32_t> &out) {
  // Hangul syllables decompose by formula into conjoining jamo.
  constexpr uint32_t syllableBase = 0xAC00, leadBase = 0x1100, vowelBase = 0x1161,
                     trailBase = 0x11A7, vowels = 21, trails = 28, syllables = 11172;
  if (cp >= syllableBase && cp < syllableBase + syllables) {
    uint32_t index = cp - syllableBase;
    out.push_back(leadBase + index / (vowels * trails));
    out.push_back(vowelBase + index % (vowels * trails) / trails);
    if (index % trails)
      out.push_back(trailBase + index % trails);
    return;
  }
  appendMapped(kDecompositions, cp, out);
}

void xfmr::rt::appendLowercase(uint32_t cp, std::vector<uint32_t> &out) {
  appendMapped(kLowercase, cp, out);
}
size_t xfmr::rt::utf8Length(std::string_view text, size_t i) {
  auto byte = [&](size_t k) -> int {
    return i + k < text.size() ? static_cast<uint8_t>(text[i + k]) : -1;
  };
  auto continuation = [&](size_t k) { return (byte(k) & 0xC0) == 0x80 && byte(k) >= 0; };
  int lead = byte(0);
  if (lead < 0)
    return 0;
  if (lead < 0x80)
    return 1;
  if (lead >= 0xC2 && lead <= 0xDF)
    return continuation(1) ? 2 : 0;
  if (lead >= 0xE0 && lead <= 0xEF) {
    int second = byte(1);
    bool ok = continuation(1) && continuation(2) && !(lead == 0xE0 && second < 0xA0) &&
              !(lead == 0xED && second >= 0xA0);
    return ok ? 3 : 0;
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    int second = byte(1);
    bool ok = continuation(1) && continuation(2) && continuation(3) &&
              !(lead == 0xF0 && second < 0x90) && !(lead == 0xF4 && second >= 0x90);
    return ok ? 4 : 0;
  }
  return 0;
}

std::string xfmr::rt::replaceInvalidUtf8(std::string_view bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size();) {
    if (size_t length = utf8Length(bytes, i)) {
      out.append(bytes.substr(i, length));
      i += length;
      continue;
    }
    // The lead byte and the continuation bytes that could still have
    // completed it form one ill-formed subsequence.
    auto lead = static_cast<uint8_t>(bytes[i]);
    size_t needed = lead >= 0xC2 && lead <= 0xDF   ? 2
                    : lead >= 0xE0 && lead <= 0xEF ? 3
                    : lead >= 0xF0 && lead <= 0xF4 ? 4
                                                   : 1;
    size_t skip = 1;
    while (skip < needed && i + skip < bytes.size()) {
      auto c = static_cast<uint8_t>(bytes[i + skip]);
      uint8_t low = 0x80, high = 0xBF;
      if (skip == 1) {
        low = lead == 0xE0 ? 0xA0 : lead == 0xF0 ? 0x90 : 0x80;
        high = lead == 0xED ? 0x9F : lead == 0xF4 ? 0x8F : 0xBF;
      }
      if (c < low || c > high)
        break;
      ++skip;
    }
    out += "\xEF\xBF\xBD";
    i += skip;
  }
  return out;
}

size_t xfmr::rt::incompleteUtf8Tail(std::string_view bytes) {
  // A lead byte within the last three bytes whose character is cut off.
  for (size_t back = 1; back <= 3 && back <= bytes.size(); ++back) {
    auto c = static_cast<uint8_t>(bytes[bytes.size() - back]);
    if ((c & 0xC0) == 0x80)
      continue;
    size_t needed = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return needed > back ? back : 0;
  }
  return 0;
}

bool xfmr::rt::isValidUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    // ASCII runs are most of most text.
    if (static_cast<uint8_t>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t length = utf8Length(text, i);
    if (!length)
      return false;
    i += length;
  }
  return true;
}

uint32_t xfmr::rt::codePointAt(std::string_view text, size_t i, size_t length) {
  auto byte = [&](size_t k) { return static_cast<uint8_t>(text[i + k]); };
  return length == 1   ? byte(0)
         : length == 2 ? (byte(0) & 0x1F) << 6 | (byte(1) & 0x3F)
         : length == 3 ? (byte(0) & 0x0F) << 12 | (byte(1) & 0x3F) << 6 | (byte(2) & 0x3F)
                       : (byte(0) & 0x07) << 18 | (byte(1) & 0x3F) << 12 | (byte(2) & 0x3F) << 6 |
                             (byte(3) & 0x3F);
}

bool xfmr::rt::isMark(uint32_t cp) {
  utf8proc_category_t category = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return category == UTF8PROC_CATEGORY_MN || category == UTF8PROC_CATEGORY_MC ||
         category == UTF8PROC_CATEGORY_ME;
}

bool xfmr::rt::isWordCharacter(uint32_t cp) {
  if (cp < 0x80)
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
           cp == '_';
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
  case UTF8PROC_CATEGORY_LU:
  case UTF8PROC_CATEGORY_LL:
  case UTF8PROC_CATEGORY_LT:
  case UTF8PROC_CATEGORY_LM:
  case UTF8PROC_CATEGORY_LO:
  case UTF8PROC_CATEGORY_MN:
  case UTF8PROC_CATEGORY_MC:
  case UTF8PROC_CATEGORY_ME:
  case UTF8PROC_CATEGORY_ND:
  case UTF8PROC_CATEGORY_NL:
  case UTF8PROC_CATEGORY_PC:
    return true;
  default:
    return cp == 0x200C || cp == 0x200D;
  }
}

namespace {

/// The start of the character that ends at byte `end` of valid UTF-8.
size_t previousCharacter(std::string_view text, size_t end) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80)
    --start;
  return start;
}

} // namespace

bool xfmr::rt::startsWithWordCharacter(std::string_view text) {
  return !text.empty() && isWordCharacter(codePointAt(text, 0, utf8Length(text, 0)));
}

bool xfmr::rt::endsWithWordCharacter(std::string_view text) {
  if (text.empty())
    return false;
  size_t start = previousCharacter(text, text.size());
  return isWordCharacter(codePointAt(text, start, text.size() - start));
}

size_t xfmr::rt::leadingWhitespace(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    size_t length = utf8Length(text, i);
    if (!length || !isSpace(codePointAt(text, i, length)))
      break;
    i += length;
  }
  return i;
}

size_t xfmr::rt::trailingWhitespace(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    size_t start = previousCharacter(text, end);
    if (!isSpace(codePointAt(text, start, end - start)))
      break;
    end = start;
  }
  return text.size() - end;
}

std::string xfmr::rt::normalizeUnicode(std::string_view text, std::string_view form) {
  int options = UTF8PROC_STABLE;
  if (form == "NFC")
    options |= UTF8PROC_COMPOSE;
  else if (form == "NFD")
    options |= UTF8PROC_DECOMPOSE;
  else if (form == "NFKC")
    options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
  else
    options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
  utf8proc_uint8_t *result = nullptr;
  utf8proc_ssize_t length = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t *>(text.data()),
                                         static_cast<utf8proc_ssize_t>(text.size()), &result,
                                         static_cast<utf8proc_option_t>(options));
  if (length < 0)
    fail(std::string("Unicode normalization failed: ") + utf8proc_errmsg(length));
  std::string normalized(reinterpret_cast<const char *>(result), static_cast<size_t>(length));
  std::free(result);
  return normalized;
}

std::vector<size_t> xfmr::rt::graphemeBoundaries(std::string_view text) {
  std::vector<size_t> boundaries;
  utf8proc_int32_t state = 0, previous = -1;
  for (size_t i = 0; i < text.size();) {
    size_t length = utf8Length(text, i);
    auto cp = static_cast<utf8proc_int32_t>(codePointAt(text, i, length));
    if (previous < 0 || utf8proc_grapheme_break_stateful(previous, cp, &state))
      boundaries.push_back(i);
    previous = cp;
    i += length;
  }
  boundaries.push_back(text.size());
  return boundaries;
}
