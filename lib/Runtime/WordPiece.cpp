//===- WordPiece.cpp - BERT's tokenizer -----------------------------------===//
//
// tokenizers' BertNormalizer (drop control characters, whitespace to
// spaces, spaces around CJK ideographs, accents stripped by canonical
// decomposition, lowercase), BertPreTokenizer (split at whitespace, each
// punctuation character alone), then greedy longest-match WordPiece with
// "##" continuations; decoding joins pieces with spaces and cleans up
// spaces before punctuation. Read from tokenizer.json or from vocab.txt
// with tokenizer_config.json's settings.
//
//===----------------------------------------------------------------------===//

#include "CommandLine.h"
#include "TokenizerModels.h"
#include "Unicode.h"

#include <algorithm>
#include <sstream>
#include <unordered_map>

using namespace xfmr::rt;

namespace {

struct BertNormalizer {
  bool enabled = true, cleanText = true, chineseCharacters = true, stripAccents = true,
       lowercase = true;

  static bool isChinese(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
  }

  std::vector<uint32_t> apply(std::vector<uint32_t> text) const {
    if (!enabled)
      return text;
    std::vector<uint32_t> out;
    auto step = [&](auto transform) {
      out.clear();
      for (uint32_t cp : text)
        transform(cp);
      text.swap(out);
    };
    if (cleanText)
      step([&](uint32_t cp) {
        bool tab = cp == '\t' || cp == '\n' || cp == '\r';
        if (cp == 0 || cp == 0xFFFD || (!tab && isOther(cp)))
          return;
        out.push_back(tab || isSpace(cp) ? ' ' : cp);
      });
    if (chineseCharacters)
      step([&](uint32_t cp) {
        if (!isChinese(cp))
          return out.push_back(cp);
        out.insert(out.end(), {' ', cp, ' '});
      });
    // Nonspacing marks are dropped, so their canonical order (which NFD
    // would also fix) does not matter.
    if (stripAccents)
      step([&](uint32_t cp) {
        size_t start = out.size();
        appendDecomposition(cp, out);
        out.erase(std::remove_if(out.begin() + start, out.end(), isNonspacingMark), out.end());
      });
    if (lowercase)
      step([&](uint32_t cp) { appendLowercase(cp, out); });
    return text;
  }
};

bool isBertPunctuation(uint32_t cp) {
  bool ascii = (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
               (cp >= 123 && cp <= 126);
  return ascii || isPunctuation(cp);
}

class WordPiece : public Tokenizer {
public:
  void addToken(const std::string &token, int64_t id, const std::string &where) {
    if (id < 0 || id > kMaxTokenId)
      fail(where + ": token id " + std::to_string(id) + " of '" + token +
           "' is out of range (0 to " + std::to_string(kMaxTokenId) + ")");
    if (static_cast<size_t>(id) >= tokens.size())
      tokens.resize(id + 1);
    tokens[id] = token;
    vocab[token] = static_cast<int32_t>(id);
  }

  void finish(const std::string &where) {
    tokens.resize(std::max<size_t>(tokens.size(), specialLimit()));
    auto it = vocab.find(unknown);
    if (it == vocab.end())
      fail(where + ": the unknown token '" + unknown + "' is not in the vocabulary");
    unknownId = it->second;
  }

  int64_t size() const override { return static_cast<int64_t>(tokens.size()); }

  /// The id of `token` in the vocabulary, or -1.
  int32_t find(const std::string &token) const {
    auto it = vocab.find(token);
    return it == vocab.end() ? -1 : it->second;
  }

  std::string decode(const std::vector<int32_t> &ids) const override {
    std::string text;
    for (size_t i = 0; i < ids.size(); ++i) {
      std::string token = tokenText(ids[i]);
      if (i != 0)
        token = token.rfind(continuation, 0) == 0 ? token.substr(continuation.size()) : " " + token;
      text += cleanup ? cleanUp(token) : token;
    }
    return text;
  }

  BertNormalizer normalizer;
  std::string unknown = "[UNK]", continuation = "##";
  size_t maxCharacters = 100;
  bool cleanup = true;

protected:
  void encodeText(std::string_view text, const std::string &what,
                  std::vector<int32_t> &ids) const override {
    std::vector<uint32_t> points;
    std::vector<size_t> offsets;
    if (!decodeUtf8(text, points, offsets))
      fail(what + ": invalid UTF-8");
    std::vector<uint32_t> normalized = normalizer.apply(std::move(points));
    // Words end at whitespace (dropped) and around each punctuation mark.
    std::vector<uint32_t> word;
    auto flush = [&] {
      if (!word.empty())
        encodeWord(word, ids);
      word.clear();
    };
    for (uint32_t cp : normalized) {
      if (isSpace(cp)) {
        flush();
      } else if (isBertPunctuation(cp)) {
        flush();
        word.push_back(cp);
        flush();
      } else {
        word.push_back(cp);
      }
    }
    flush();
  }

  std::string modelTokenBytes(int32_t id) const override {
    std::string token = tokenText(id);
    return token.rfind(continuation, 0) == 0 ? token.substr(continuation.size()) : " " + token;
  }

private:
  std::string tokenText(int32_t id) const {
    if (const std::string *special = specialToken(id))
      return *special;
    return id >= 0 && static_cast<size_t>(id) < tokens.size() ? tokens[id] : "";
  }

  /// Greedy longest match from the left, "##" before all but the first
  /// piece; the unknown token for the whole word if a piece has no match.
  void encodeWord(const std::vector<uint32_t> &word, std::vector<int32_t> &ids) const {
    if (word.size() > maxCharacters)
      return ids.push_back(unknownId);
    std::vector<std::string> prefixes(word.size() + 1);
    for (size_t i = 0; i < word.size(); ++i) {
      prefixes[i + 1] = prefixes[i];
      appendUtf8(prefixes[i + 1], word[i]);
    }
    std::vector<int32_t> pieces;
    for (size_t start = 0; start < word.size();) {
      size_t end = word.size();
      int32_t found = -1;
      for (; end > start; --end) {
        std::string piece = prefixes[end].substr(prefixes[start].size());
        auto it = vocab.find(start > 0 ? continuation + piece : piece);
        if (it != vocab.end()) {
          found = it->second;
          break;
        }
      }
      if (found < 0)
        return ids.push_back(unknownId);
      pieces.push_back(found);
      start = end;
    }
    ids.insert(ids.end(), pieces.begin(), pieces.end());
  }

  static std::string cleanUp(std::string text) {
    static const std::pair<const char *, const char *> replacements[] = {
        {" .", "."},   {" ?", "?"},     {" !", "!"},    {" ,", ","},
        {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},  {" do not", " don't"},
        {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (const auto &[from, to] : replacements) {
      std::string out;
      std::string_view rest = text, pattern = from;
      for (size_t at; (at = rest.find(pattern)) != std::string_view::npos;) {
        out.append(rest.substr(0, at)).append(to);
        rest.remove_prefix(at + pattern.size());
      }
      text = out.append(rest);
    }
    return text;
  }

  std::unordered_map<std::string, int32_t> vocab;
  std::vector<std::string> tokens;
  int32_t unknownId = 0;
};

bool flag(const JsonValue &object, const char *key, bool fallback) {
  const JsonValue *value = object.get(key);
  return value && value->kind == JsonValue::Kind::Bool ? value->boolean : fallback;
}

/// strip_accents: a boolean, or null to follow lowercase.
bool stripAccents(const JsonValue &object, const char *key, bool lowercase) {
  const JsonValue *value = object.get(key);
  return value && value->kind == JsonValue::Kind::Bool ? value->boolean : lowercase;
}

} // namespace

std::unique_ptr<Tokenizer> xfmr::rt::loadWordPiece(const JsonValue &json, const std::string &path) {
  std::string where = tokenizerFileName(path);
  auto tokenizer = std::make_unique<WordPiece>();
  tokenizer->source = path;
  const JsonValue *normalizer = json.get("normalizer");
  if (!normalizer || normalizer->kind == JsonValue::Kind::Null) {
    tokenizer->normalizer.enabled = false;
  } else {
    const JsonValue *type = normalizer->get("type");
    if (!type || type->text != "BertNormalizer")
      fail(where + ": key 'normalizer': unsupported type '" + (type ? type->text : "") +
           "' for WordPiece (BertNormalizer or none is supported)");
    BertNormalizer &n = tokenizer->normalizer;
    n.cleanText = flag(*normalizer, "clean_text", true);
    n.chineseCharacters = flag(*normalizer, "handle_chinese_chars", true);
    n.lowercase = flag(*normalizer, "lowercase", true);
    n.stripAccents = stripAccents(*normalizer, "strip_accents", n.lowercase);
  }
  const JsonValue *pre = json.get("pre_tokenizer");
  const JsonValue *preType = pre ? pre->get("type") : nullptr;
  if (!preType || preType->text != "BertPreTokenizer")
    fail(where + ": key 'pre_tokenizer': unsupported type '" + (preType ? preType->text : "") +
         "' for WordPiece (BertPreTokenizer is supported)");
  const JsonValue *model = json.get("model");
  if (const JsonValue *unknown = model->get("unk_token"); unknown && unknown->isString())
    tokenizer->unknown = unknown->text;
  if (const JsonValue *prefix = model->get("continuing_subword_prefix");
      prefix && prefix->isString())
    tokenizer->continuation = prefix->text;
  if (const JsonValue *limit = model->get("max_input_chars_per_word"); limit && limit->asInt())
    tokenizer->maxCharacters = static_cast<size_t>(std::max<int64_t>(0, *limit->asInt()));
  const JsonValue *vocab = model->get("vocab");
  if (!vocab || !vocab->isObject())
    fail(where + ": the WordPiece model needs a 'vocab' object");
  for (const auto &[token, id] : vocab->object) {
    std::optional<int64_t> value = id.asInt();
    if (!value)
      fail(where + ": token '" + token + "' has no integer id");
    tokenizer->addToken(token, *value, where);
  }
  if (const JsonValue *decoder = json.get("decoder"); decoder && decoder->isObject())
    tokenizer->cleanup = flag(*decoder, "cleanup", true);
  readAddedTokens(*tokenizer, json, where);
  tokenizer->finish(where);
  return tokenizer;
}

std::unique_ptr<Tokenizer> xfmr::rt::loadWordPieceVocab(const std::string &vocabPath,
                                                        const std::string &configPath) {
  std::string where = tokenizerFileName(vocabPath);
  auto tokenizer = std::make_unique<WordPiece>();
  tokenizer->source = vocabPath;
  std::istringstream lines(readTokenizerFile(vocabPath));
  std::string line;
  for (int64_t id = 0; std::getline(lines, line); ++id) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
      line.pop_back();
    tokenizer->addToken(line, id, where);
  }
  // BertTokenizer's settings and special tokens; its template is [CLS] A
  // [SEP] unless the config names another class.
  BertNormalizer &n = tokenizer->normalizer;
  if (isRegularFile(configPath)) {
    JsonValue config = parseTokenizerJson(configPath);
    n.lowercase = flag(config, "do_lower_case", true);
    n.chineseCharacters = flag(config, "tokenize_chinese_chars", true);
    n.stripAccents = stripAccents(config, "strip_accents", n.lowercase);
  }
  for (const char *special : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"})
    if (int32_t id = tokenizer->find(special); id >= 0)
      tokenizer->addSpecialToken(special, id);
  readSpecialTokenConfig(*tokenizer, configPath);
  if (tokenizer->prefix.empty() && tokenizer->suffix.empty()) {
    tokenizer->prefix = {tokenizer->specialId("[CLS]", where)};
    tokenizer->suffix = {tokenizer->specialId("[SEP]", where)};
  }
  tokenizer->finish(where);
  return tokenizer;
}
