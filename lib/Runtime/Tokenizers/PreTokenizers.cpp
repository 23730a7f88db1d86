//===- PreTokenizers.cpp - tokenizer.json's pre-tokenizers ----------------===//
//
// Each splits every piece at the matches of a pattern (a regular
// expression, or a character class matched one character at a time) and
// keeps, drops or merges the matches as tokenizers' SplitDelimiterBehavior
// says; empty pieces are dropped.
//
//===----------------------------------------------------------------------===//

#include "Tokenizers/TokenizerPipeline.h"

#include "CommandLine.h"
#include "Tokenizers/Unicode.h"

#include <array>

using namespace xfmr::rt;

namespace {

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

struct Span {
  size_t start, end;
  bool match;
};

/// The text between and at `matches`, in order, as Pattern::find_matches
/// gives them.
std::vector<Span> spans(size_t size, const std::vector<std::pair<size_t, size_t>> &matches,
                        bool invert) {
  std::vector<Span> result;
  size_t done = 0;
  for (auto [start, end] : matches) {
    if (start > done)
      result.push_back({done, start, invert});
    result.push_back({start, end, !invert});
    done = end;
  }
  if (done < size)
    result.push_back({done, size, invert});
  return result;
}

/// Splits `piece` into `out` by `behavior`.
void splitPiece(const Piece &piece, std::vector<Span> parts, Behavior behavior,
                std::vector<Piece> &out) {
  std::vector<Span> kept;
  switch (behavior) {
  case Behavior::Isolated:
  case Behavior::Removed:
    kept = std::move(parts);
    break;
  case Behavior::Contiguous:
  case Behavior::MergedWithPrevious: {
    bool previous = false;
    for (const Span &part : parts) {
      bool merge =
          behavior == Behavior::Contiguous ? part.match == previous : part.match && !previous;
      if (merge && !kept.empty())
        kept.back().end = part.end;
      else
        kept.push_back({part.start, part.end, false});
      previous = part.match;
    }
    break;
  }
  case Behavior::MergedWithNext: {
    bool previous = false;
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
      if (it->match && !previous && !kept.empty())
        kept.back().start = it->start;
      else
        kept.push_back({it->start, it->end, false});
      previous = it->match;
    }
    std::reverse(kept.begin(), kept.end());
    break;
  }
  }
  for (const Span &part : kept) {
    if ((behavior == Behavior::Removed && part.match) || part.end == part.start)
      continue;
    out.push_back(
        {piece.text.substr(part.start, part.end - part.start), piece.atStart && part.start == 0});
  }
}

/// Each character that satisfies `predicate`, a match of its own.
template <typename Predicate>
std::vector<std::pair<size_t, size_t>> characterMatches(const std::string &text,
                                                        Predicate predicate) {
  std::vector<std::pair<size_t, size_t>> matches;
  for (size_t i = 0; i < text.size();) {
    size_t length = utf8Length(text, i);
    if (predicate(codePointAt(text, i, length)))
      matches.emplace_back(i, i + length);
    i += length;
  }
  return matches;
}

/// Runs `splitOne(piece, out)` over every piece.
template <typename SplitOne> void splitEach(std::vector<Piece> &pieces, SplitOne splitOne) {
  std::vector<Piece> out;
  out.reserve(pieces.size());
  for (const Piece &piece : pieces)
    splitOne(piece, out);
  pieces.swap(out);
}

class SequencePreTokenizer : public PreTokenizer {
public:
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  void split(std::vector<Piece> &pieces) const override {
    for (const auto &step : steps)
      step->split(pieces);
  }
};

class Split : public PreTokenizer {
public:
  Split(Regex pattern, Behavior behavior, bool invert)
      : pattern(std::move(pattern)), behavior(behavior), invert(invert) {}
  void split(std::vector<Piece> &pieces) const override {
    splitEach(pieces, [&](const Piece &piece, std::vector<Piece> &out) {
      splitPiece(piece, spans(piece.text.size(), pattern.findAll(piece.text), invert), behavior,
                 out);
    });
  }

private:
  Regex pattern;
  Behavior behavior;
  bool invert;
};

/// Splits at characters: whitespace, punctuation or digits.
template <typename Predicate> class CharacterSplit : public PreTokenizer {
public:
  CharacterSplit(Predicate predicate, Behavior behavior)
      : predicate(predicate), behavior(behavior) {}
  void split(std::vector<Piece> &pieces) const override {
    splitEach(pieces, [&](const Piece &piece, std::vector<Piece> &out) {
      splitPiece(piece, spans(piece.text.size(), characterMatches(piece.text, predicate), false),
                 behavior, out);
    });
  }

private:
  Predicate predicate;
  Behavior behavior;
};

template <typename Predicate>
std::unique_ptr<PreTokenizer> characterSplit(Predicate predicate, Behavior behavior) {
  return std::make_unique<CharacterSplit<Predicate>>(predicate, behavior);
}

bool isPunctuationCharacter(uint32_t cp) {
  bool ascii = (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
               (cp >= 123 && cp <= 126);
  return ascii || isPunctuation(cp);
}

/// Whitespace: words (\w+) and runs of other non-spaces ([^\w\s]+), the
/// whitespace between them dropped.
class Whitespace : public PreTokenizer {
public:
  void split(std::vector<Piece> &pieces) const override {
    splitEach(pieces, [&](const Piece &piece, std::vector<Piece> &out) {
      const std::string &text = piece.text;
      for (size_t i = 0; i < text.size();) {
        size_t length = utf8Length(text, i);
        uint32_t cp = codePointAt(text, i, length);
        if (isSpace(cp)) {
          i += length;
          continue;
        }
        bool word = isWordCharacter(cp);
        size_t end = i + length;
        while (end < text.size()) {
          size_t next = utf8Length(text, end);
          uint32_t c = codePointAt(text, end, next);
          if (isSpace(c) || isWordCharacter(c) != word)
            break;
          end += next;
        }
        out.push_back({text.substr(i, end - i), piece.atStart && i == 0});
        i = end;
      }
    });
  }
};

class ByteLevel : public PreTokenizer {
public:
  ByteLevel(bool addPrefixSpace, bool useRegex)
      : addPrefixSpace(addPrefixSpace),
        pattern(useRegex ? std::make_unique<Regex>(
                               "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|"
                               "\\s+(?!\\S)|\\s+",
                               "ByteLevel")
                         : nullptr) {
    for (int b = 0; b < 256; ++b)
      appendUtf8(characters[b], byteLevelCharacter(static_cast<uint8_t>(b)));
  }

  void split(std::vector<Piece> &pieces) const override {
    splitEach(pieces, [&](const Piece &piece, std::vector<Piece> &out) {
      Piece prefixed = piece;
      if (addPrefixSpace && prefixed.text.front() != ' ')
        prefixed.text.insert(0, " ");
      size_t first = out.size();
      if (pattern)
        splitPiece(prefixed, spans(prefixed.text.size(), pattern->findAll(prefixed.text), false),
                   Behavior::Isolated, out);
      else
        out.push_back(prefixed);
      for (size_t i = first; i < out.size(); ++i) {
        std::string mapped;
        mapped.reserve(out[i].text.size() * 2);
        for (char c : out[i].text)
          mapped += characters[static_cast<uint8_t>(c)];
        out[i].text.swap(mapped);
      }
    });
  }

private:
  bool addPrefixSpace;
  std::unique_ptr<Regex> pattern;
  std::array<std::string, 256> characters;
};

enum class PrependScheme { Always, First, Never };

class Metaspace : public PreTokenizer {
public:
  Metaspace(std::string replacement, PrependScheme scheme, bool splitWords)
      : replacement(std::move(replacement)), scheme(scheme), splitWords(splitWords) {}

  void split(std::vector<Piece> &pieces) const override {
    splitEach(pieces, [&](const Piece &piece, std::vector<Piece> &out) {
      Piece replaced{"", piece.atStart};
      for (char c : piece.text)
        if (c == ' ')
          replaced.text += replacement;
        else
          replaced.text += c;
      bool prepend =
          scheme == PrependScheme::Always || (scheme == PrependScheme::First && piece.atStart);
      if (prepend && replaced.text.compare(0, replacement.size(), replacement) != 0)
        replaced.text.insert(0, replacement);
      if (!splitWords) {
        out.push_back(std::move(replaced));
        return;
      }
      std::vector<std::pair<size_t, size_t>> matches;
      for (size_t at = replaced.text.find(replacement); at != std::string::npos;
           at = replaced.text.find(replacement, at + replacement.size()))
        matches.emplace_back(at, at + replacement.size());
      splitPiece(replaced, spans(replaced.text.size(), matches, false), Behavior::MergedWithNext,
                 out);
    });
  }

private:
  std::string replacement;
  PrependScheme scheme;
  bool splitWords;
};

Behavior readBehavior(const Json &json, const std::string &where, Behavior fallback) {
  std::string name = stringKey(json, "behavior", where, "");
  if (name.empty())
    return fallback;
  if (name == "Removed")
    return Behavior::Removed;
  if (name == "Isolated")
    return Behavior::Isolated;
  if (name == "MergedWithPrevious")
    return Behavior::MergedWithPrevious;
  if (name == "MergedWithNext")
    return Behavior::MergedWithNext;
  if (name == "Contiguous")
    return Behavior::Contiguous;
  fail(keyName(where, "behavior") + ": unknown behavior '" + name +
       "' (Removed, Isolated, MergedWithPrevious, MergedWithNext and Contiguous are supported)");
}

std::unique_ptr<PreTokenizer> readMetaspace(const Json &json, const std::string &where) {
  std::string replacement = stringKey(json, "replacement", where, "\xE2\x96\x81");
  size_t length = replacement.empty() ? 0 : utf8Length(replacement, 0);
  if (length == 0 || length != replacement.size())
    fail(keyName(where, "replacement") + ": expected one character");
  // Files before prepend_scheme say add_prefix_space.
  std::string scheme =
      stringKey(json, "prepend_scheme", where,
                boolKey(json, "add_prefix_space", where, true) ? "always" : "never");
  PrependScheme prepend = PrependScheme::Never;
  if (scheme == "always")
    prepend = PrependScheme::Always;
  else if (scheme == "first")
    prepend = PrependScheme::First;
  else if (scheme != "never")
    fail(keyName(where, "prepend_scheme") + ": unknown scheme '" + scheme +
         "' (always, first and never are supported)");
  return std::make_unique<Metaspace>(replacement, prepend, boolKey(json, "split", where, true));
}

} // namespace

uint32_t xfmr::rt::byteLevelCharacter(uint8_t byte) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> result{};
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      result[b] = printable ? b : next++;
    }
    return result;
  }();
  return table[byte];
}

int xfmr::rt::byteOfByteLevelCharacter(uint32_t cp) {
  static const std::array<int, 324> table = [] {
    std::array<int, 324> result;
    result.fill(-1);
    for (int b = 0; b < 256; ++b)
      result[byteLevelCharacter(static_cast<uint8_t>(b))] = b;
    return result;
  }();
  return cp < table.size() ? table[cp] : -1;
}

std::unique_ptr<PreTokenizer> xfmr::rt::byteLevelPreTokenizer(bool addPrefixSpace) {
  return std::make_unique<ByteLevel>(addPrefixSpace, /*useRegex=*/true);
}

std::unique_ptr<PreTokenizer> xfmr::rt::bertPreTokenizer() {
  auto sequence = std::make_unique<SequencePreTokenizer>();
  sequence->steps.push_back(characterSplit(isSpace, Behavior::Removed));
  sequence->steps.push_back(characterSplit(isPunctuationCharacter, Behavior::Isolated));
  return sequence;
}

std::unique_ptr<PreTokenizer> xfmr::rt::readPreTokenizer(const Json &json,
                                                         const std::string &where) {
  std::string type = componentType(json, where);
  if (type.empty())
    return nullptr;
  std::string what = where + " (" + type + ")";
  if (type == "Sequence") {
    auto sequence = std::make_unique<SequencePreTokenizer>();
    sequence->steps = readSequence<PreTokenizer>(json, "pretokenizers", what, readPreTokenizer);
    return sequence;
  }
  if (type == "Split") {
    if (!field(json, "behavior"))
      fail(keyName(what, "behavior") + " is missing");
    return std::make_unique<Split>(readPattern(json, what),
                                   readBehavior(json, what, Behavior::Removed),
                                   boolKey(json, "invert", what, false));
  }
  if (type == "ByteLevel")
    return std::make_unique<ByteLevel>(boolKey(json, "add_prefix_space", what, true),
                                       boolKey(json, "use_regex", what, true));
  if (type == "Metaspace")
    return readMetaspace(json, what);
  if (type == "Whitespace")
    return std::make_unique<Whitespace>();
  if (type == "WhitespaceSplit")
    return characterSplit(isSpace, Behavior::Removed);
  if (type == "Punctuation")
    return characterSplit(isPunctuationCharacter, readBehavior(json, what, Behavior::Isolated));
  if (type == "Digits")
    return characterSplit(isNumber, boolKey(json, "individual_digits", what, false)
                                        ? Behavior::Isolated
                                        : Behavior::Contiguous);
  if (type == "BertPreTokenizer")
    return bertPreTokenizer();
  if (type == "CharDelimiterSplit") {
    std::string delimiter = stringKey(json, "delimiter", what, "");
    if (delimiter.empty() || utf8Length(delimiter, 0) != delimiter.size())
      fail(keyName(what, "delimiter") + ": expected one character");
    uint32_t cp = codePointAt(delimiter, 0, delimiter.size());
    return characterSplit([cp](uint32_t c) { return c == cp; }, Behavior::Removed);
  }
  fail(where + ": unknown pre-tokenizer type '" + type +
       "' (Sequence, Split, ByteLevel, Metaspace, Whitespace, WhitespaceSplit, Punctuation, "
       "Digits, BertPreTokenizer and CharDelimiterSplit are supported)");
}
