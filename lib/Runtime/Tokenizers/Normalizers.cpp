//===- Normalizers.cpp - tokenizer.json's normalizers ---------------------===//
//
// Each rewrites valid UTF-8 as its namesake in `tokenizers` does. Precompiled
// is SentencePiece's normalization rules compiled into a double-array trie
// (a model's precompiled_charsmap), applied per grapheme cluster as
// tokenizers does rather than per longest match as SentencePiece does.
//
//===----------------------------------------------------------------------===//

#include "Tokenizers/TokenizerPipeline.h"

#include "CommandLine.h"
#include "Tokenizers/Regex.h"
#include "Tokenizers/Unicode.h"

#include <algorithm>
#include <array>
#include <cstring>

using namespace xfmr::rt;

namespace {

/// Rewrites each code point through `map`, which appends its replacement.
template <typename Map> void mapCodePoints(std::string &text, Map map) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    size_t length = utf8Length(text, i);
    map(codePointAt(text, i, length), out);
    i += length;
  }
  text.swap(out);
}

class SequenceNormalizer : public Normalizer {
public:
  std::vector<std::unique_ptr<Normalizer>> steps;
  void normalize(std::string &text) const override {
    for (const auto &step : steps)
      step->normalize(text);
  }
};

class UnicodeForm : public Normalizer {
public:
  explicit UnicodeForm(std::string form) : form(std::move(form)) {}
  void normalize(std::string &text) const override { text = normalizeUnicode(text, form); }

private:
  std::string form;
};

class Lowercase : public Normalizer {
public:
  void normalize(std::string &text) const override {
    std::vector<uint32_t> lower;
    mapCodePoints(text, [&](uint32_t cp, std::string &out) {
      if (cp < 0x80) {
        out += static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
        return;
      }
      lower.clear();
      appendLowercase(cp, lower);
      for (uint32_t each : lower)
        appendUtf8(out, each);
    });
  }
};

class Strip : public Normalizer {
public:
  bool left = true, right = true;
  void normalize(std::string &text) const override {
    if (right)
      text.resize(text.size() - trailingWhitespace(text));
    if (left)
      text.erase(0, leadingWhitespace(text));
  }
};

class StripAccents : public Normalizer {
public:
  void normalize(std::string &text) const override {
    mapCodePoints(text, [](uint32_t cp, std::string &out) {
      if (!isMark(cp))
        appendUtf8(out, cp);
    });
  }
};

class Replace : public Normalizer {
public:
  Replace(Regex pattern, std::string content)
      : pattern(std::move(pattern)), content(std::move(content)) {}
  void normalize(std::string &text) const override {
    std::string out;
    size_t done = 0;
    for (auto [start, end] : pattern.findAll(text)) {
      out.append(text, done, start - done).append(content);
      done = end;
    }
    if (done == 0 && out.empty())
      return;
    text = out.append(text, done, std::string::npos);
  }

private:
  Regex pattern;
  std::string content;
};

class Prepend : public Normalizer {
public:
  explicit Prepend(std::string prefix) : prefix(std::move(prefix)) {}
  void normalize(std::string &text) const override {
    if (!text.empty())
      text.insert(0, prefix);
  }

private:
  std::string prefix;
};

class BertNormalizer : public Normalizer {
public:
  bool cleanText = true, chineseCharacters = true, stripAccents = true, lowercase = true;

  static bool isChinese(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
  }

  void normalize(std::string &text) const override {
    std::vector<uint32_t> mapped;
    mapCodePoints(text, [&](uint32_t cp, std::string &out) {
      bool tab = cp == '\t' || cp == '\n' || cp == '\r';
      if (cleanText) {
        if (cp == 0 || cp == 0xFFFD || (!tab && isOther(cp)))
          return;
        if (tab || isSpace(cp))
          cp = ' ';
      }
      if (chineseCharacters && isChinese(cp)) {
        out += ' ';
        appendUtf8(out, cp);
        out += ' ';
        return;
      }
      mapped.assign(1, cp);
      // Nonspacing marks are dropped, so their canonical order (which NFD
      // would also fix) does not matter.
      if (stripAccents) {
        mapped.clear();
        appendDecomposition(cp, mapped);
        mapped.erase(std::remove_if(mapped.begin(), mapped.end(), isNonspacingMark), mapped.end());
      }
      for (uint32_t each : mapped) {
        if (!lowercase) {
          appendUtf8(out, each);
          continue;
        }
        std::vector<uint32_t> lower;
        appendLowercase(each, lower);
        for (uint32_t l : lower)
          appendUtf8(out, l);
      }
    });
  }
};

/// SentencePiece's nmt_nfkc rules before the NFKC: control characters
/// dropped, some spaces and separators to a space.
class Nmt : public Normalizer {
public:
  void normalize(std::string &text) const override {
    mapCodePoints(text, [](uint32_t cp, std::string &out) {
      if ((cp >= 0x1 && cp <= 0x8) || cp == 0xB || (cp >= 0xE && cp <= 0x1F) || cp == 0x7F ||
          cp == 0x8F || cp == 0x9F)
        return;
      bool space = cp == 0x9 || cp == 0xA || cp == 0xC || cp == 0xD || cp == 0x1680 ||
                   (cp >= 0x200B && cp <= 0x200F) || cp == 0x2028 || cp == 0x2029 || cp == 0x2581 ||
                   cp == 0xFEFF || cp == 0xFFFD;
      appendUtf8(out, space ? ' ' : cp);
    });
  }
};

/// GPT-2's bytes_to_unicode as a normalizer: each byte to its character.
class ByteLevelNormalizer : public Normalizer {
public:
  void normalize(std::string &text) const override {
    std::string out;
    out.reserve(text.size() * 2);
    for (char c : text)
      appendUtf8(out, byteLevelCharacter(static_cast<uint8_t>(c)));
    text.swap(out);
  }
};

std::string decodeBase64(const std::string &text, const std::string &where) {
  std::array<int, 256> value;
  value.fill(-1);
  const char *alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int i = 0; i < 64; ++i)
    value[static_cast<uint8_t>(alphabet[i])] = i;
  std::string out;
  uint32_t bits = 0;
  int count = 0;
  for (char c : text) {
    if (c == '=')
      break;
    int v = value[static_cast<uint8_t>(c)];
    if (v < 0)
      fail(where + ": not base64");
    bits = bits << 6 | static_cast<uint32_t>(v);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out += static_cast<char>(bits >> count & 0xFF);
    }
  }
  return out;
}

class Precompiled : public Normalizer {
public:
  Precompiled(const std::string &charsmap, const std::string &where) {
    // A little-endian u32 trie size in bytes, the trie's u32 units, then
    // the replacement strings, each ending in NUL.
    if (charsmap.size() < 4)
      fail(where + ": the charsmap is shorter than its header");
    uint32_t trieBytes;
    std::memcpy(&trieBytes, charsmap.data(), 4);
    if (trieBytes % 4 || trieBytes == 0 || trieBytes > charsmap.size() - 4)
      fail(where + ": the charsmap's trie size " + std::to_string(trieBytes) +
           " does not fit its " + std::to_string(charsmap.size()) + " bytes");
    trie.resize(trieBytes / 4);
    std::memcpy(trie.data(), charsmap.data() + 4, trieBytes);
    replacements = charsmap.substr(4 + trieBytes);
  }

  void normalize(std::string &text) const override {
    std::string out;
    out.reserve(text.size());
    std::vector<size_t> clusters = graphemeBoundaries(text);
    for (size_t c = 0; c + 1 < clusters.size(); ++c) {
      std::string_view cluster =
          std::string_view(text).substr(clusters[c], clusters[c + 1] - clusters[c]);
      if (cluster.size() < 6)
        if (std::optional<std::string_view> replacement = transform(cluster)) {
          out += *replacement;
          continue;
        }
      for (size_t i = 0; i < cluster.size();) {
        std::string_view character = cluster.substr(i, utf8Length(cluster, i));
        std::optional<std::string_view> replacement = transform(character);
        out += replacement ? *replacement : character;
        i += character.size();
      }
    }
    text.swap(out);
  }

private:
  /// The replacement of the shortest prefix of `chunk` the trie holds (as
  /// spm_precompiled does: not necessarily all of `chunk`).
  std::optional<std::string_view> transform(std::string_view chunk) const {
    auto offset = [](uint32_t unit) { return (unit >> 10) << ((unit & (1u << 9)) >> 6); };
    size_t node = 0;
    uint32_t unit = trie[0];
    node ^= offset(unit);
    for (char c : chunk) {
      auto byte = static_cast<uint8_t>(c);
      if (byte == 0)
        break;
      node ^= byte;
      if (node >= trie.size())
        return std::nullopt;
      unit = trie[node];
      if ((unit & ((1u << 31) | 0xFF)) != byte)
        return std::nullopt;
      node ^= offset(unit);
      if (node >= trie.size())
        return std::nullopt;
      if (unit >> 8 & 1) {
        size_t at = trie[node] & ((1u << 31) - 1);
        if (at >= replacements.size())
          return std::nullopt;
        size_t end = replacements.find('\0', at);
        return std::string_view(replacements)
            .substr(at, (end == std::string::npos ? replacements.size() : end) - at);
      }
    }
    return std::nullopt;
  }

  std::vector<uint32_t> trie;
  std::string replacements;
};

} // namespace

/// The pattern of a Split or Replace: {"String": s} or {"Regex": r}.
Regex xfmr::rt::readPattern(const Json &json, const std::string &where) {
  const Json &pattern = requireKey(json, "pattern", where);
  std::string key = keyName(where, "pattern");
  if (const Json *literal = field(pattern, "String"); literal && literal->is_string())
    return Regex::literal(textOf(*literal), key);
  if (const Json *regex = field(pattern, "Regex"); regex && regex->is_string())
    return Regex(textOf(*regex), key);
  if (pattern.is_string())
    return Regex::literal(textOf(pattern), key);
  fail(key + ": expected {\"String\": ...} or {\"Regex\": ...}");
}

std::unique_ptr<Normalizer> xfmr::rt::readNormalizer(const Json &json, const std::string &where) {
  std::string type = componentType(json, where);
  if (type.empty())
    return nullptr;
  std::string what = where + " (" + type + ")";
  if (type == "Sequence") {
    auto sequence = std::make_unique<SequenceNormalizer>();
    sequence->steps = readSequence<Normalizer>(json, "normalizers", what, readNormalizer);
    return sequence;
  }
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD")
    return std::make_unique<UnicodeForm>(type);
  if (type == "Lowercase")
    return std::make_unique<Lowercase>();
  if (type == "Strip") {
    auto strip = std::make_unique<Strip>();
    strip->left = boolKey(json, "strip_left", what, true);
    strip->right = boolKey(json, "strip_right", what, true);
    return strip;
  }
  if (type == "StripAccents")
    return std::make_unique<StripAccents>();
  if (type == "Replace")
    return std::make_unique<Replace>(readPattern(json, what), stringKey(json, "content", what, ""));
  if (type == "Prepend")
    return std::make_unique<Prepend>(stringKey(json, "prepend", what, ""));
  if (type == "BertNormalizer") {
    bool lowercase = boolKey(json, "lowercase", what, true);
    return bertNormalizer(lowercase, boolKey(json, "strip_accents", what, lowercase),
                          boolKey(json, "handle_chinese_chars", what, true),
                          boolKey(json, "clean_text", what, true));
  }
  if (type == "Nmt")
    return std::make_unique<Nmt>();
  if (type == "ByteLevel")
    return std::make_unique<ByteLevelNormalizer>();
  if (type == "Precompiled") {
    const Json *charsmap = field(json, "precompiled_charsmap");
    // An empty charsmap (a SentencePiece model without rules) does nothing.
    if (!charsmap || charsmap->is_null() || (charsmap->is_string() && textOf(*charsmap).empty()))
      return nullptr;
    if (!charsmap->is_string())
      fail(keyName(what, "precompiled_charsmap") + ": expected a base64 string");
    std::string key = keyName(what, "precompiled_charsmap");
    return std::make_unique<Precompiled>(decodeBase64(textOf(*charsmap), key), key);
  }
  fail(where + ": unknown normalizer type '" + type +
       "' (Sequence, NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Replace, Prepend, "
       "BertNormalizer, Nmt, ByteLevel and Precompiled are supported)");
}

std::unique_ptr<Normalizer> xfmr::rt::bertNormalizer(bool lowercase, bool stripAccents,
                                                     bool chineseCharacters, bool cleanText) {
  auto normalizer = std::make_unique<BertNormalizer>();
  normalizer->lowercase = lowercase;
  normalizer->stripAccents = stripAccents;
  normalizer->chineseCharacters = chineseCharacters;
  normalizer->cleanText = cleanText;
  return normalizer;
}
