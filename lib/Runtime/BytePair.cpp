//===- BytePair.cpp - byte-level BPE as GPT-2 and tokenizers do it -------===//
//
// Text is split into pre-tokens by GPT-2's pattern
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// each pre-token's bytes are mapped to printable characters
// (bytes_to_unicode), and the merges are applied in rank order. Read from
// tokenizer.json (a BPE model with a ByteLevel pre-tokenizer) or from the
// slow tokenizer's vocab.json + merges.txt.
//
//===----------------------------------------------------------------------===//

#include "CommandLine.h"
#include "RuntimeSupport.h"
#include "TokenizerModels.h"
#include "Unicode.h"

#include <array>
#include <map>
#include <sstream>
#include <unordered_map>

using namespace xfmr::rt;

namespace {

/// GPT-2's pre-tokenization of code points [begin, end): the end of the
/// pre-token starting at `begin`.
size_t nextPreToken(const std::vector<uint32_t> &cp, size_t begin, size_t end) {
  size_t i = begin;
  auto at = [&](size_t k) -> uint32_t { return k < end ? cp[k] : 0; };
  auto run = [&](size_t k, auto predicate) {
    while (k < end && predicate(cp[k]))
      ++k;
    return k;
  };
  // Contractions.
  if (at(i) == '\'') {
    for (const char *suffix : {"s", "t", "re", "ve", "m", "ll", "d"}) {
      size_t k = i + 1, n = 0;
      while (suffix[n] && at(k + n) == static_cast<uint8_t>(suffix[n]))
        ++n;
      if (!suffix[n])
        return k + n;
    }
  }
  // An optional space, then letters, numbers or other symbols.
  size_t j = at(i) == ' ' && i + 1 < end ? i + 1 : i;
  auto isSymbol = [](uint32_t c) { return !isSpace(c) && !isLetter(c) && !isNumber(c); };
  if (j < end) {
    if (isLetter(cp[j]))
      return run(j, isLetter);
    if (isNumber(cp[j]))
      return run(j, isNumber);
    if (isSymbol(cp[j]))
      return run(j, isSymbol);
  }
  // Whitespace: all of it at the end of the text, else all but the last
  // space before what follows (which takes it as its prefix); one space
  // alone before a non-space.
  size_t spaces = run(i, isSpace);
  if (spaces == end || spaces - i == 1)
    return spaces;
  return spaces - 1;
}

/// GPT-2's bytes_to_unicode: printable bytes stand for themselves, the
/// others for code points 256 and up.
std::array<uint32_t, 256> byteToCodePoint() {
  std::array<uint32_t, 256> table{};
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    table[b] = printable ? b : next++;
  }
  return table;
}

class ByteLevelBpe : public Tokenizer {
public:
  /// The merge ranks, vocabulary and added tokens, each checked.
  void addToken(const std::string &token, int64_t id, const std::string &where) {
    if (id < 0 || id > kMaxTokenId)
      fail(where + ": token id " + std::to_string(id) + " of '" + token +
           "' is out of range (0 to " + std::to_string(kMaxTokenId) + ")");
    if (!vocab.emplace(token, static_cast<int32_t>(id)).second)
      fail(where + ": token '" + token + "' appears twice");
    if (static_cast<size_t>(id) >= tokens.size())
      tokens.resize(id + 1);
    if (!tokens[id].empty())
      fail(where + ": id " + std::to_string(id) + " is given to two tokens");
    tokens[id] = token;
  }

  void addMerge(const std::string &left, const std::string &right, const std::string &where) {
    if (left.empty() || right.empty())
      fail(where + ": merge " + std::to_string(ranks.size() + 1) + " is not two symbols");
    ranks.emplace(left + ' ' + right, static_cast<int32_t>(ranks.size()));
  }

  void finish(const std::string &where) {
    tokens.resize(std::max<size_t>(tokens.size(), specialLimit()));
    for (size_t id = 0; id < tokens.size(); ++id)
      if (tokens[id].empty() && !specialToken(static_cast<int32_t>(id)))
        fail(where + ": no token has id " + std::to_string(id));
    std::array<uint32_t, 256> table = byteToCodePoint();
    for (uint32_t b = 0; b < 256; ++b) {
      std::string symbol;
      appendUtf8(symbol, table[b]);
      byteSymbols[b] = symbol;
      symbolBytes[table[b]] = static_cast<char>(b);
    }
  }

  int64_t size() const override { return static_cast<int64_t>(tokens.size()); }

  bool addPrefixSpace = false;
  bool ignoreMerges = false;

protected:
  void encodeText(std::string_view text, const std::string &what,
                  std::vector<int32_t> &ids) const override {
    if (text.empty())
      return;
    std::string prefixed;
    if (addPrefixSpace && text.front() != ' ') {
      prefixed = " " + std::string(text);
      text = prefixed;
    }
    std::vector<uint32_t> points;
    std::vector<size_t> offsets;
    if (!decodeUtf8(text, points, offsets))
      fail(what + ": invalid UTF-8");
    for (size_t begin = 0; begin < points.size();) {
      size_t end = nextPreToken(points, begin, points.size());
      encodeWord(text.substr(offsets[begin], offsets[end] - offsets[begin]), ids);
      begin = end;
    }
  }

  std::string modelTokenBytes(int32_t id) const override {
    if (id < 0 || static_cast<size_t>(id) >= tokens.size())
      return "";
    std::string bytes;
    std::vector<uint32_t> points;
    std::vector<size_t> offsets;
    decodeUtf8(tokens[id], points, offsets);
    for (uint32_t cp : points) {
      auto it = symbolBytes.find(cp);
      if (it != symbolBytes.end())
        bytes += it->second;
      else
        appendUtf8(bytes, cp);
    }
    return bytes;
  }

private:
  void encodeWord(std::string_view word, std::vector<int32_t> &ids) const {
    std::vector<std::string> symbols;
    for (char c : word)
      symbols.push_back(byteSymbols[static_cast<uint8_t>(c)]);
    if (ignoreMerges) {
      std::string whole;
      for (const std::string &symbol : symbols)
        whole += symbol;
      if (auto it = vocab.find(whole); it != vocab.end()) {
        ids.push_back(it->second);
        return;
      }
    }
    // Merge the lowest-ranked adjacent pair, everywhere it occurs, until no
    // pair has a merge.
    while (symbols.size() > 1) {
      int32_t best = INT32_MAX;
      for (size_t i = 0; i + 1 < symbols.size(); ++i)
        if (auto it = ranks.find(symbols[i] + ' ' + symbols[i + 1]);
            it != ranks.end() && it->second < best)
          best = it->second;
      if (best == INT32_MAX)
        break;
      std::vector<std::string> merged;
      for (size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size()) {
          auto it = ranks.find(symbols[i] + ' ' + symbols[i + 1]);
          if (it != ranks.end() && it->second == best) {
            merged.push_back(symbols[i] + symbols[i + 1]);
            ++i;
            continue;
          }
        }
        merged.push_back(symbols[i]);
      }
      symbols = std::move(merged);
    }
    for (const std::string &symbol : symbols) {
      auto it = vocab.find(symbol);
      if (it == vocab.end())
        fail(source + ": no token for '" + symbol + "' (the vocabulary lacks a byte)");
      ids.push_back(it->second);
    }
  }

  std::unordered_map<std::string, int32_t> vocab;
  std::unordered_map<std::string, int32_t> ranks;
  std::vector<std::string> tokens;
  std::array<std::string, 256> byteSymbols;
  std::map<uint32_t, char> symbolBytes;
};

/// A tokenizers pre-tokenizer that byte-level BPE can run: ByteLevel with
/// GPT-2's pattern. Returns its add_prefix_space.
bool checkPreTokenizer(const JsonValue *pre, const std::string &where) {
  if (!pre || !pre->isObject())
    fail(where + ": key 'pre_tokenizer': a byte-level BPE needs a ByteLevel pre-tokenizer");
  const JsonValue *type = pre->get("type");
  if (!type || type->text != "ByteLevel")
    fail(where + ": key 'pre_tokenizer': unsupported type '" + (type ? type->text : "") +
         "' (ByteLevel is supported)");
  const JsonValue *regex = pre->get("use_regex");
  if (regex && regex->kind == JsonValue::Kind::Bool && !regex->boolean)
    fail(where + ": key 'pre_tokenizer': ByteLevel without its regex is not supported");
  const JsonValue *prefix = pre->get("add_prefix_space");
  return prefix && prefix->kind == JsonValue::Kind::Bool && prefix->boolean;
}

} // namespace

std::unique_ptr<Tokenizer> xfmr::rt::loadBytePair(const JsonValue &json, const std::string &path) {
  std::string where = tokenizerFileName(path);
  const JsonValue *model = json.get("model");
  if (const JsonValue *normalizer = json.get("normalizer");
      normalizer && normalizer->kind != JsonValue::Kind::Null)
    fail(where + ": key 'normalizer': a byte-level BPE with a normalizer is not supported");
  auto bpe = std::make_unique<ByteLevelBpe>();
  bpe->source = path;
  bpe->addPrefixSpace = checkPreTokenizer(json.get("pre_tokenizer"), where);
  if (const JsonValue *ignore = model->get("ignore_merges"))
    bpe->ignoreMerges = ignore->kind == JsonValue::Kind::Bool && ignore->boolean;
  const JsonValue *vocab = model->get("vocab");
  const JsonValue *merges = model->get("merges");
  if (!vocab || !vocab->isObject() || !merges || !merges->isArray())
    fail(where + ": the BPE model needs a 'vocab' object and a 'merges' array");
  for (const auto &[token, id] : vocab->object) {
    std::optional<int64_t> value = id.asInt();
    if (!value)
      fail(where + ": token '" + token + "' has no integer id");
    bpe->addToken(token, *value, where);
  }
  for (const JsonValue &merge : merges->array) {
    if (merge.isString()) {
      size_t space = merge.text.find(' ', 1);
      if (space == std::string::npos)
        fail(where + ": merge '" + merge.text + "' is not two symbols");
      bpe->addMerge(merge.text.substr(0, space), merge.text.substr(space + 1), where);
    } else if (merge.isArray() && merge.array.size() == 2) {
      bpe->addMerge(merge.array[0].text, merge.array[1].text, where);
    } else {
      fail(where + ": a merge is neither \"a b\" nor [\"a\", \"b\"]");
    }
  }
  readAddedTokens(*bpe, json, where);
  bpe->finish(where);
  return bpe;
}

std::unique_ptr<Tokenizer> xfmr::rt::loadBytePairFiles(const std::string &vocabPath,
                                                       const std::string &mergesPath,
                                                       const std::string &configPath) {
  auto bpe = std::make_unique<ByteLevelBpe>();
  bpe->source = vocabPath;
  JsonValue vocab = parseTokenizerJson(vocabPath);
  std::string where = tokenizerFileName(vocabPath);
  if (!vocab.isObject())
    fail(where + ": expected an object of token: id");
  for (const auto &[token, id] : vocab.object) {
    std::optional<int64_t> value = id.asInt();
    if (!value)
      fail(where + ": token '" + token + "' has no integer id");
    bpe->addToken(token, *value, where);
  }
  std::istringstream merges(readTokenizerFile(mergesPath));
  std::string line;
  for (int number = 1; std::getline(merges, line); ++number) {
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.empty() || (number == 1 && line.rfind("#version", 0) == 0))
      continue;
    size_t space = line.find(' ', 1);
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
      fail(tokenizerFileName(mergesPath) + ":" + std::to_string(number) +
           ": expected two symbols separated by a space");
    bpe->addMerge(line.substr(0, space), line.substr(space + 1), mergesPath);
  }
  readSpecialTokenConfig(*bpe, configPath);
  bpe->finish(where);
  return bpe;
}
