//===- Tokenizer.cpp - byte-level BPE as GPT-2 and tokenizers do it ------===//
//
// Byte-level BPE: text is split into pre-tokens by GPT-2's pattern
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// (added tokens such as <|endoftext|> first split out whole), each
// pre-token's bytes are mapped to printable characters (bytes_to_unicode),
// and the merges are applied in rank order. Read from tokenizer.json (a
// Hugging Face fast tokenizer with a BPE model and a ByteLevel
// pre-tokenizer) or from the slow tokenizer's vocab.json + merges.txt.
//
//===----------------------------------------------------------------------===//

#include "Tokenizer.h"

#include "xfmr-rt/xfmr_runtime.h"

#include "Json.h"
#include "Manifest.h"
#include "RuntimeSupport.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <unordered_map>

using namespace xfmr::rt;

namespace {

struct CodePointRange {
  uint32_t first, last;
};
#include "UnicodeTables.inc"

template <size_t N> bool inRanges(const CodePointRange (&ranges)[N], uint32_t cp) {
  auto it =
      std::upper_bound(std::begin(ranges), std::end(ranges), cp,
                       [](uint32_t value, const CodePointRange &r) { return value < r.first; });
  return it != std::begin(ranges) && cp <= std::prev(it)->last;
}

bool isLetter(uint32_t cp) { return inRanges(kLetters, cp); }
bool isNumber(uint32_t cp) { return inRanges(kNumbers, cp); }
/// Unicode's White_Space property (what \s matches).
bool isSpace(uint32_t cp) {
  return (cp >= 0x9 && cp <= 0xD) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

/// Decodes `text` into code points with their byte offsets; false on
/// invalid UTF-8.
bool decodeUtf8(std::string_view text, std::vector<uint32_t> &points,
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

void appendUtf8(std::string &out, uint32_t cp) {
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
  auto isOther = [](uint32_t c) { return !isSpace(c) && !isLetter(c) && !isNumber(c); };
  if (j < end) {
    if (isLetter(cp[j]))
      return run(j, isLetter);
    if (isNumber(cp[j]))
      return run(j, isNumber);
    if (isOther(cp[j]))
      return run(j, isOther);
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

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail("cannot read '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool exists(const std::string &path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

JsonValue parseJsonFile(const std::string &path) {
  std::string error;
  std::optional<JsonValue> json = parseJson(readFile(path), error);
  if (!json)
    fail("tokenizer file '" + path + "': invalid JSON: " + error);
  return *json;
}

class ByteLevelBpe : public Tokenizer {
public:
  /// The merge ranks, vocabulary and added tokens, each checked.
  void addToken(const std::string &token, int64_t id, const std::string &where) {
    if (id < 0 || id > INT32_MAX)
      fail(where + ": token id " + std::to_string(id) + " of '" + token + "' is out of range");
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

  void addSpecial(const std::string &content, int32_t id) {
    if (content.empty())
      return;
    special.emplace_back(content, id);
    if (static_cast<size_t>(id) >= tokens.size())
      tokens.resize(id + 1);
    tokens[id] = content;
    specialIds.insert(id);
  }

  void finish(const std::string &where) {
    for (size_t id = 0; id < tokens.size(); ++id)
      if (tokens[id].empty())
        fail(where + ": no token has id " + std::to_string(id));
    std::array<uint32_t, 256> table = byteToCodePoint();
    for (uint32_t b = 0; b < 256; ++b) {
      std::string symbol;
      appendUtf8(symbol, table[b]);
      byteSymbols[b] = symbol;
      symbolBytes[table[b]] = static_cast<char>(b);
    }
    // Longest added token first where two start alike.
    std::sort(special.begin(), special.end(),
              [](const auto &a, const auto &b) { return a.first.size() > b.first.size(); });
  }

  std::vector<int32_t> encode(std::string_view text, const std::string &what) const override {
    std::vector<int32_t> ids;
    size_t start = 0;
    // Added tokens split the text first; what lies between is BPE'd.
    for (size_t i = 0; i <= text.size(); ++i) {
      const std::pair<std::string, int32_t> *match = nullptr;
      for (const auto &entry : special)
        if (text.compare(i, entry.first.size(), entry.first) == 0) {
          match = &entry;
          break;
        }
      if (!match && i < text.size())
        continue;
      encodeText(text.substr(start, i - start), what, ids);
      if (match) {
        ids.push_back(match->second);
        i += match->first.size() - 1;
        start = i + 1;
      }
    }
    return ids;
  }

  std::string tokenBytes(int32_t id) const override {
    if (id < 0 || static_cast<size_t>(id) >= tokens.size())
      return "";
    if (specialIds.count(id))
      return tokens[id];
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

  int64_t size() const override { return static_cast<int64_t>(tokens.size()); }

  bool addPrefixSpace = false;
  bool ignoreMerges = false;

private:
  void encodeText(std::string_view text, const std::string &what, std::vector<int32_t> &ids) const {
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
  std::vector<std::pair<std::string, int32_t>> special;
  std::set<int32_t> specialIds;
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

std::unique_ptr<Tokenizer> loadTokenizerJson(const std::string &path) {
  JsonValue json = parseJsonFile(path);
  const JsonValue *model = json.get("model");
  const JsonValue *type = model ? model->get("type") : nullptr;
  if (!model || !type)
    fail("tokenizer file '" + path + "': no 'model' with a 'type'");
  if (type->text != "BPE")
    fail("tokenizer file '" + path + "': key 'model.type': unsupported model '" + type->text +
         "' (BPE is supported)");
  if (const JsonValue *normalizer = json.get("normalizer");
      normalizer && normalizer->kind != JsonValue::Kind::Null)
    fail("tokenizer file '" + path +
         "': key 'normalizer': a byte-level BPE with a normalizer "
         "is not supported");
  auto bpe = std::make_unique<ByteLevelBpe>();
  bpe->source = path;
  bpe->addPrefixSpace =
      checkPreTokenizer(json.get("pre_tokenizer"), "tokenizer file '" + path + "'");
  if (const JsonValue *ignore = model->get("ignore_merges"))
    bpe->ignoreMerges = ignore->kind == JsonValue::Kind::Bool && ignore->boolean;
  const JsonValue *vocab = model->get("vocab");
  const JsonValue *merges = model->get("merges");
  std::string where = "tokenizer file '" + path + "'";
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
  if (const JsonValue *added = json.get("added_tokens"); added && added->isArray())
    for (const JsonValue &token : added->array) {
      const JsonValue *content = token.get("content");
      const JsonValue *id = token.get("id");
      if (!content || !id || !id->asInt() || *id->asInt() < 0 || *id->asInt() > INT32_MAX)
        fail(where + ": an added token needs a 'content' and an 'id'");
      bpe->addSpecial(content->text, static_cast<int32_t>(*id->asInt()));
    }
  bpe->finish(where);
  return bpe;
}

std::unique_ptr<Tokenizer> loadVocabAndMerges(const std::string &vocabPath,
                                              const std::string &mergesPath,
                                              const std::string &configPath) {
  auto bpe = std::make_unique<ByteLevelBpe>();
  bpe->source = vocabPath;
  JsonValue vocab = parseJsonFile(vocabPath);
  std::string where = "tokenizer file '" + vocabPath + "'";
  if (!vocab.isObject())
    fail(where + ": expected an object of token: id");
  for (const auto &[token, id] : vocab.object) {
    std::optional<int64_t> value = id.asInt();
    if (!value)
      fail(where + ": token '" + token + "' has no integer id");
    bpe->addToken(token, *value, where);
  }
  std::istringstream merges(readFile(mergesPath));
  std::string line;
  for (int number = 1; std::getline(merges, line); ++number) {
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.empty() || (number == 1 && line.rfind("#version", 0) == 0))
      continue;
    size_t space = line.find(' ', 1);
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
      fail("tokenizer file '" + mergesPath + "':" + std::to_string(number) +
           ": expected two symbols separated by a space");
    bpe->addMerge(line.substr(0, space), line.substr(space + 1), mergesPath);
  }
  // The slow tokenizer's special tokens (tokenizer_config.json), split out
  // whole as the fast tokenizer's added tokens are.
  if (exists(configPath)) {
    JsonValue config = parseJsonFile(configPath);
    if (const JsonValue *decoder = config.get("added_tokens_decoder"))
      for (const auto &[id, token] : decoder->object)
        if (const JsonValue *content = token.get("content"))
          bpe->addSpecial(content->text,
                          static_cast<int32_t>(std::strtol(id.c_str(), nullptr, 10)));
  }
  bpe->finish(where);
  return bpe;
}

} // namespace

std::string Tokenizer::decode(const std::vector<int32_t> &ids) const {
  std::string text;
  for (int32_t id : ids)
    text += tokenBytes(id);
  return text;
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

std::unique_ptr<Tokenizer> xfmr::rt::loadTokenizer(const std::string &directory) {
  std::string json = directory + "/tokenizer.json";
  if (exists(json))
    return loadTokenizerJson(json);
  std::string vocab = directory + "/vocab.json", merges = directory + "/merges.txt";
  if (exists(vocab) && exists(merges))
    return loadVocabAndMerges(vocab, merges, directory + "/tokenizer_config.json");
  return nullptr;
}

struct xfmr_tokenizer {
  std::unique_ptr<Tokenizer> tokenizer;
};

xfmr_tokenizer *xfmr_tokenizer_load(const char *directory, char *err, size_t errSize) {
  try {
    std::unique_ptr<Tokenizer> tokenizer = loadTokenizer(directory);
    if (!tokenizer) {
      setError(err, errSize,
               std::string("no tokenizer in '") + directory +
                   "' (tokenizer.json, or vocab.json and merges.txt)");
      return nullptr;
    }
    return new xfmr_tokenizer{std::move(tokenizer)};
  } catch (const Failure &failure) {
    setError(err, errSize, failure.message);
    return nullptr;
  }
}

void xfmr_tokenizer_free(xfmr_tokenizer *tokenizer) { delete tokenizer; }

int64_t xfmr_tokenizer_encode(const xfmr_tokenizer *tokenizer, const char *text, size_t length,
                              int32_t *ids, size_t capacity, char *err, size_t errSize) {
  try {
    std::vector<int32_t> encoded =
        tokenizer->tokenizer->encode(std::string_view(text, length), "text");
    std::copy_n(encoded.begin(), std::min(encoded.size(), capacity), ids);
    return static_cast<int64_t>(encoded.size());
  } catch (const Failure &failure) {
    setError(err, errSize, failure.message);
    return -1;
  }
}

size_t xfmr_tokenizer_decode(const xfmr_tokenizer *tokenizer, const int32_t *ids, size_t count,
                             char *text, size_t capacity) {
  std::string decoded =
      replaceInvalidUtf8(tokenizer->tokenizer->decode(std::vector<int32_t>(ids, ids + count)));
  std::copy_n(decoded.begin(), std::min(decoded.size(), capacity), text);
  return decoded.size();
}
