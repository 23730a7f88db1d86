//===- Decoders.cpp - tokenizer.json's decoders ---------------------------===//
//
// Each rewrites the list of token strings as tokenizers' decode_chain does;
// the tokenizer joins what is left. ByteLevel yields bytes that need not be
// valid UTF-8 (a stream holds incomplete characters back; callers that want
// text replace invalid bytes as tokenizers' from_utf8_lossy does).
//
//===----------------------------------------------------------------------===//

#include "Tokenizers/TokenizerPipeline.h"

#include "CommandLine.h"
#include "Tokenizers/Unicode.h"

using namespace xfmr::rt;

namespace {

constexpr const char *kReplacementCharacter = "\xEF\xBF\xBD";

class SequenceDecoder : public Decoder {
public:
  std::vector<std::unique_ptr<Decoder>> steps;
  void decode(std::vector<std::string> &tokens) const override {
    for (const auto &step : steps)
      step->decode(tokens);
  }
};

class ByteLevelDecoder : public Decoder {
public:
  void decode(std::vector<std::string> &tokens) const override {
    std::string bytes;
    for (const std::string &token : tokens) {
      // A token with a character bytes_to_unicode lacks stays as it is.
      std::string mapped;
      bool all = true;
      for (size_t i = 0; i < token.size() && all;) {
        size_t length = utf8Length(token, i);
        int byte = length ? byteOfByteLevelCharacter(codePointAt(token, i, length)) : -1;
        all = byte >= 0;
        mapped += static_cast<char>(byte);
        i += length;
      }
      bytes += all ? mapped : token;
    }
    tokens.assign(1, std::move(bytes));
  }
};

class ByteFallback : public Decoder {
public:
  void decode(std::vector<std::string> &tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    auto flush = [&] {
      if (bytes.empty())
        return;
      if (isValidUtf8(bytes))
        out.push_back(bytes);
      else
        out.insert(out.end(), bytes.size(), kReplacementCharacter);
      bytes.clear();
    };
    for (std::string &token : tokens) {
      if (int byte = byteOf(token); byte >= 0) {
        bytes += static_cast<char>(byte);
        continue;
      }
      flush();
      out.push_back(std::move(token));
    }
    flush();
    tokens.swap(out);
  }

private:
  /// The byte of a "<0xAB>" token, or -1.
  static int byteOf(const std::string &token) {
    if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>')
      return -1;
    auto digit = [](char c) {
      return c >= '0' && c <= '9'   ? c - '0'
             : c >= 'a' && c <= 'f' ? c - 'a' + 10
             : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                    : -1;
    };
    int high = digit(token[3]), low = digit(token[4]);
    return high < 0 || low < 0 ? -1 : high * 16 + low;
  }
};

class Fuse : public Decoder {
public:
  void decode(std::vector<std::string> &tokens) const override {
    std::string all;
    for (const std::string &token : tokens)
      all += token;
    tokens.assign(1, std::move(all));
  }
};

class StripDecoder : public Decoder {
public:
  StripDecoder(std::string content, size_t start, size_t stop)
      : content(std::move(content)), start(start), stop(stop) {}
  void decode(std::vector<std::string> &tokens) const override {
    for (std::string &token : tokens) {
      for (size_t n = 0; n < start && token.compare(0, content.size(), content) == 0; ++n)
        token.erase(0, content.size());
      for (size_t n = 0; n < stop && token.size() >= content.size() &&
                         token.compare(token.size() - content.size(), content.size(), content) == 0;
           ++n)
        token.resize(token.size() - content.size());
    }
  }

private:
  std::string content;
  size_t start, stop;
};

class ReplaceDecoder : public Decoder {
public:
  ReplaceDecoder(Regex pattern, std::string content)
      : pattern(std::move(pattern)), content(std::move(content)) {}
  void decode(std::vector<std::string> &tokens) const override {
    for (std::string &token : tokens) {
      if (!isValidUtf8(token))
        token = replaceInvalidUtf8(token);
      std::string out;
      size_t done = 0;
      for (auto [start, end] : pattern.findAll(token)) {
        out.append(token, done, start - done).append(content);
        done = end;
      }
      token = out.append(token, done, std::string::npos);
    }
  }

private:
  Regex pattern;
  std::string content;
};

class MetaspaceDecoder : public Decoder {
public:
  MetaspaceDecoder(std::string replacement, bool prepended)
      : replacement(std::move(replacement)), prepended(prepended) {}
  void decode(std::vector<std::string> &tokens) const override {
    // The first token's replacements were prepended, not spaces.
    for (size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = replaceAll(tokens[i], replacement, i != 0 || !prepended ? " " : "");
  }

private:
  std::string replacement;
  bool prepended;
};

class WordPieceDecoder : public Decoder {
public:
  WordPieceDecoder(std::string prefix, bool cleanup)
      : prefix(std::move(prefix)), cleanup(cleanup) {}
  void decode(std::vector<std::string> &tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string &token = tokens[i];
      if (i != 0)
        token = token.compare(0, prefix.size(), prefix) == 0 ? token.substr(prefix.size())
                                                             : " " + token;
      if (cleanup)
        token = cleanUp(token);
    }
  }

  /// tokenizers' wordpiece::cleanup: spaces before punctuation and
  /// contractions removed.
  static std::string cleanUp(std::string text) {
    static const std::pair<const char *, const char *> replacements[] = {
        {" .", "."},   {" ?", "?"},     {" !", "!"},    {" ,", ","},
        {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},  {" do not", " don't"},
        {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (const auto &[from, to] : replacements)
      text = replaceAll(text, from, to);
    return text;
  }

private:
  std::string prefix;
  bool cleanup;
};

/// BPEDecoder: the end-of-word suffix becomes a space, except at the end.
class BpeDecoder : public Decoder {
public:
  explicit BpeDecoder(std::string suffix) : suffix(std::move(suffix)) {}
  void decode(std::vector<std::string> &tokens) const override {
    if (suffix.empty())
      return;
    for (size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = replaceAll(tokens[i], suffix, i + 1 == tokens.size() ? "" : " ");
  }

private:
  std::string suffix;
};

size_t countKey(const Json &json, const char *key, const std::string &where) {
  const Json *value = field(json, key);
  std::optional<int64_t> count = value ? asInt(*value) : std::optional<int64_t>(0);
  if (!count || *count < 0)
    fail(keyName(where, key) + ": expected a count");
  return static_cast<size_t>(*count);
}

} // namespace

std::unique_ptr<Decoder> xfmr::rt::byteLevelDecoder() {
  return std::make_unique<ByteLevelDecoder>();
}

std::unique_ptr<Decoder> xfmr::rt::wordPieceDecoder(const std::string &prefix, bool cleanup) {
  return std::make_unique<WordPieceDecoder>(prefix, cleanup);
}

std::unique_ptr<Decoder> xfmr::rt::readDecoder(const Json &json, const std::string &where) {
  std::string type = componentType(json, where);
  if (type.empty())
    return nullptr;
  std::string what = where + " (" + type + ")";
  if (type == "Sequence") {
    auto sequence = std::make_unique<SequenceDecoder>();
    sequence->steps = readSequence<Decoder>(json, "decoders", what, readDecoder);
    return sequence;
  }
  if (type == "ByteLevel")
    return byteLevelDecoder();
  if (type == "ByteFallback")
    return std::make_unique<ByteFallback>();
  if (type == "Fuse")
    return std::make_unique<Fuse>();
  if (type == "Strip") {
    std::string content = stringKey(json, "content", what, " ");
    if (content.empty() || utf8Length(content, 0) != content.size())
      fail(keyName(what, "content") + ": expected one character");
    return std::make_unique<StripDecoder>(content, countKey(json, "start", what),
                                          countKey(json, "stop", what));
  }
  if (type == "Replace")
    return std::make_unique<ReplaceDecoder>(readPattern(json, what),
                                            stringKey(json, "content", what, ""));
  if (type == "Metaspace") {
    std::string scheme =
        stringKey(json, "prepend_scheme", what,
                  boolKey(json, "add_prefix_space", what, true) ? "always" : "never");
    return std::make_unique<MetaspaceDecoder>(stringKey(json, "replacement", what, "\xE2\x96\x81"),
                                              scheme != "never");
  }
  if (type == "WordPiece")
    return wordPieceDecoder(stringKey(json, "prefix", what, "##"),
                            boolKey(json, "cleanup", what, true));
  if (type == "BPEDecoder")
    return std::make_unique<BpeDecoder>(stringKey(json, "suffix", what, "</w>"));
  fail(where + ": unknown decoder type '" + type +
       "' (Sequence, ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace, WordPiece and "
       "BPEDecoder are supported)");
}
