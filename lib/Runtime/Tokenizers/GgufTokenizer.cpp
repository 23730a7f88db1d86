//===- GgufTokenizer.cpp - the tokenizer a GGUF file describes ------------===//
//
// llama.cpp's converter stores a tokenizer as `tokenizer.ggml.*` metadata:
// the model kind ("gpt2": byte-level BPE; "llama": SentencePiece BPE), the
// tokens with their types and scores, BPE merges, the pre-tokenizer by name
// (`pre`), the special tokens' ids, and whether a BOS (EOS) is added. This
// spells them as the tokenizer.json and tokenizer_config.json of the
// checkpoint it was converted from, for the runtime's tokenizer.json reader
// and chat templates.
//
//===----------------------------------------------------------------------===//

#include "Weights/Gguf.h"

#include "CommandLine.h"
#include "Json.h"
#include "Tokenizers/Unicode.h"

#include <algorithm>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

using namespace xfmr::rt;

namespace {

/// The token types (llama.cpp's llama_token_type) that become added tokens.
enum TokenType { kControl = 3, kUserDefined = 4 };

constexpr const char *kLlama3Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char *kQwen2Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

/// A byte-level vocabulary's pre-tokenizer, by `tokenizer.ggml.pre`: the
/// split of the model's own tokenizer.json, whether that file's BPE takes
/// a word found whole in the vocabulary before merging (Llama 3), and
/// whether it composes text to NFC first (Qwen2).
struct PreTokenizer {
  const char *name, *split;
  bool ignoreMerges, nfc;
};

constexpr PreTokenizer kPreTokenizers[] = {
    {"gpt-2", nullptr, false, false},
    {"llama-bpe", kLlama3Split, true, false},
    {"llama3", kLlama3Split, true, false},
    {"llama-v3", kLlama3Split, true, false},
    {"smaug-bpe", kLlama3Split, true, false},
    {"qwen2", kQwen2Split, false, true},
    {"deepseek-r1-qwen", kQwen2Split, false, true},
};

class TokenizerMetadata {
public:
  explicit TokenizerMetadata(const GgufFile &file)
      : file(file), prefix("GGUF file '" + file.path() + "': ") {}

  [[noreturn]] void error(const std::string &key, const std::string &problem) const {
    fail(prefix + "key '" + key + "': " + problem);
  }

  const GgufValue *array(const std::string &key, GgufValue::Kind kind, size_t size) const {
    const GgufValue *value = file.find(key);
    if (!value)
      return nullptr;
    if (value->kind != GgufValue::Kind::Array)
      error(key, "expected an array");
    if (size != SIZE_MAX && value->items.size() != size)
      error(key, std::to_string(value->items.size()) + " entries for " + std::to_string(size) +
                     " tokens");
    for (const GgufValue &item : value->items) {
      if (item.kind != kind)
        error(key, "an entry has the wrong type");
      if (kind == GgufValue::Kind::String && !isValidUtf8(item.text))
        error(key, "an entry is not valid UTF-8");
    }
    return value;
  }

  std::string text(const std::string &key, const std::string &fallback) const {
    const GgufValue *value = file.find(key);
    if (!value)
      return fallback;
    if (value->kind != GgufValue::Kind::String)
      error(key, "expected a string");
    if (!isValidUtf8(value->text))
      error(key, "not valid UTF-8");
    return value->text;
  }

  bool flag(const std::string &key, bool fallback) const {
    const GgufValue *value = file.find(key);
    if (!value)
      return fallback;
    if (value->kind != GgufValue::Kind::Bool)
      error(key, "expected a bool");
    return value->integer != 0;
  }

  /// A special token's id, checked against the vocabulary, or -1.
  int64_t tokenId(const char *name, size_t vocabulary) const {
    std::string key = std::string("tokenizer.ggml.") + name + "_token_id";
    const GgufValue *value = file.find(key);
    if (!value)
      return -1;
    if (value->kind != GgufValue::Kind::Integer || value->integer < 0 ||
        static_cast<uint64_t>(value->integer) >= vocabulary)
      error(key, "not a token id below " + std::to_string(vocabulary));
    return value->integer;
  }

private:
  const GgufFile &file;
  std::string prefix;
};

/// TemplateProcessing of `before` $A `after` (ids of `tokens`).
Json templateProcessor(const std::vector<std::string> &tokens, const std::vector<int64_t> &before,
                       const std::vector<int64_t> &after) {
  Json single = Json::array(), specials = Json::object();
  auto special = [&](int64_t id) {
    const std::string &name = tokens[id];
    single.push_back({{"SpecialToken", {{"id", name}, {"type_id", 0}}}});
    specials[name] = {{"id", name}, {"ids", {id}}, {"tokens", {name}}};
  };
  for (int64_t id : before)
    special(id);
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  for (int64_t id : after)
    special(id);
  return {{"type", "TemplateProcessing"}, {"single", single}, {"special_tokens", specials}};
}

/// The merges transformers derives from a SentencePiece vocabulary
/// (generate_merges): each token that splits into two tokens of the
/// vocabulary is a merge of them, the merges ordered by the token's score,
/// then by the lengths of the halves in characters, longer first; ties in
/// the order of the tokens and of the halves' ids. Merging by these ranks is
/// SentencePiece's BPE, which merges the best-scoring pair first.
std::vector<std::pair<std::string, std::string>>
mergesFromScores(const std::vector<std::string> &tokens, const std::vector<double> &scores) {
  std::unordered_map<std::string, int64_t> ids;
  std::unordered_map<std::string, double> score;
  std::vector<size_t> order;
  for (size_t i = 0; i < tokens.size(); ++i) {
    ids[tokens[i]] = static_cast<int64_t>(i);
    if (score.emplace(tokens[i], scores[i]).second)
      order.push_back(i);
    else
      score[tokens[i]] = scores[i];
  }
  struct Merge {
    std::string left, right;
    double score;
    size_t leftChars, rightChars;
  };
  std::vector<Merge> merges;
  for (size_t i : order) {
    const std::string &token = tokens[i];
    size_t chars = std::count_if(token.begin(), token.end(), [](char c) {
      return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    });
    std::vector<Merge> local;
    size_t leftChars = 0;
    for (size_t at = 1; at < token.size(); ++at) {
      if ((static_cast<unsigned char>(token[at]) & 0xC0) == 0x80)
        continue;
      ++leftChars;
      std::string left = token.substr(0, at), right = token.substr(at);
      if (ids.count(left) && ids.count(right))
        local.push_back({left, right, score[token], leftChars, chars - leftChars});
    }
    std::stable_sort(local.begin(), local.end(), [&](const Merge &a, const Merge &b) {
      return std::make_pair(ids[a.left], ids[a.right]) < std::make_pair(ids[b.left], ids[b.right]);
    });
    merges.insert(merges.end(), local.begin(), local.end());
  }
  std::stable_sort(merges.begin(), merges.end(), [](const Merge &a, const Merge &b) {
    return std::make_tuple(a.score, a.leftChars, a.rightChars) >
           std::make_tuple(b.score, b.leftChars, b.rightChars);
  });
  std::vector<std::pair<std::string, std::string>> pairs;
  for (Merge &merge : merges)
    pairs.emplace_back(std::move(merge.left), std::move(merge.right));
  return pairs;
}

/// The added tokens of tokenizer.json for `tokens` of `types` (null: all
/// normal): the control ones, and the user-defined ones the vocabulary
/// `spelled` holds as written (not those it spells anew).
Json addedTokensJson(const std::vector<std::string> &tokens, const GgufValue *types,
                     const std::vector<std::string> &spelled) {
  Json added = Json::array();
  for (size_t id = 0; types && id < tokens.size(); ++id) {
    int64_t type = types->items[id].integer;
    if (type == kControl || (type == kUserDefined && spelled[id] == tokens[id]))
      added.push_back({{"id", id},
                       {"content", tokens[id]},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", type == kControl}});
  }
  return added;
}

/// Gemma's vocabulary as transformers' GGUF loader spells it: a token of
/// white space with a space in it is stored as that space, where the
/// vocabulary holds it as "\u2581" times its length. Should that spelling
/// be another token's too, the later id keeps it, as in that loader.
std::vector<std::string> gemmaSpelling(std::vector<std::string> tokens) {
  for (std::string &token : tokens) {
    std::vector<uint32_t> points;
    std::vector<size_t> offsets;
    if (!decodeUtf8(token, points, offsets) || token.find(' ') == std::string::npos ||
        !std::all_of(points.begin(), points.end(), [](uint32_t cp) {
          // Python's str.isspace, which adds the separators U+001C..U+001F.
          return isSpace(cp) || (cp >= 0x1C && cp <= 0x1F);
        }))
      continue;
    token.clear();
    for (size_t i = 0; i < points.size(); ++i)
      token += "\u2581";
  }
  return tokens;
}

/// A BPE model of `tokens` and `merges`.
Json bpeModelJson(const std::vector<std::string> &tokens,
                  const std::vector<std::pair<std::string, std::string>> &merges) {
  Json vocab = Json::object(), pairs = Json::array();
  for (size_t id = 0; id < tokens.size(); ++id)
    vocab[tokens[id]] = id;
  for (const auto &[left, right] : merges)
    pairs.push_back({left, right});
  return {{"type", "BPE"}, {"vocab", std::move(vocab)}, {"merges", std::move(pairs)}};
}

} // namespace

Json xfmr::rt::ggufTokenizerJson(const GgufFile &file) {
  TokenizerMetadata metadata(file);
  std::string kind = metadata.text("tokenizer.ggml.model", "");
  if (kind.empty())
    fail("GGUF file '" + file.path() + "': no tokenizer (key 'tokenizer.ggml.model')");
  const GgufValue *tokenList =
      metadata.array("tokenizer.ggml.tokens", GgufValue::Kind::String, SIZE_MAX);
  if (!tokenList || tokenList->items.empty())
    metadata.error("tokenizer.ggml.tokens", "missing or empty");
  std::vector<std::string> tokens;
  std::unordered_set<std::string> seen;
  for (const GgufValue &token : tokenList->items) {
    if (!seen.insert(token.text).second)
      metadata.error("tokenizer.ggml.tokens", "token '" + token.text + "' appears twice");
    tokens.push_back(token.text);
  }
  const GgufValue *types =
      metadata.array("tokenizer.ggml.token_type", GgufValue::Kind::Integer, tokens.size());

  bool sentencePiece = kind == "llama";
  // Gemma's SentencePiece files: spaces respelled, and merges in the order
  // of the tokens, which Gemma's scores do not follow (transformers' GGUF
  // loader, gemma_tokenizer).
  std::string architecture = metadata.text("general.architecture", "");
  bool gemma = sentencePiece &&
               (architecture == "gemma" || architecture == "gemma2" || architecture == "gemma3");
  std::vector<std::string> spelled = gemma ? gemmaSpelling(tokens) : tokens;
  std::vector<int64_t> before, after;
  // llama.cpp adds a BOS to a SentencePiece vocabulary unless told not to.
  if (int64_t bos = metadata.tokenId("bos", tokens.size());
      bos >= 0 && metadata.flag("tokenizer.ggml.add_bos_token", sentencePiece))
    before.push_back(bos);
  if (int64_t eos = metadata.tokenId("eos", tokens.size());
      eos >= 0 && metadata.flag("tokenizer.ggml.add_eos_token", false))
    after.push_back(eos);
  Json json = {{"added_tokens", addedTokensJson(tokens, types, spelled)},
               {"post_processor", before.empty() && after.empty()
                                      ? Json()
                                      : templateProcessor(tokens, before, after)}};

  if (sentencePiece) {
    // As SentencePiece (and llama.cpp) encode: spaces as "\u2581", one more
    // before the text (also when it starts with a space, where transformers'
    // Metaspace adds none), BPE with merges ranked by the scores, bytes for
    // what has no token.
    const GgufValue *scoreList =
        metadata.array("tokenizer.ggml.scores", GgufValue::Kind::Float, tokens.size());
    if (!scoreList)
      metadata.error("tokenizer.ggml.scores", "a SentencePiece vocabulary needs its scores");
    std::vector<double> scores;
    for (const GgufValue &score : scoreList->items)
      scores.push_back(gemma ? -static_cast<double>(scores.size())
                       : score.kind == GgufValue::Kind::Integer ? score.integer
                                                                : score.number);
    // Gemma's tokenizer never adds one (transformers' GemmaTokenizer).
    bool prefix = !gemma && metadata.flag("tokenizer.ggml.add_space_prefix", true);
    Json normalizers = Json::array();
    if (prefix)
      normalizers.push_back({{"type", "Prepend"}, {"prepend", "\u2581"}});
    normalizers.push_back(
        {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}});
    Json decoders = {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                     {{"type", "ByteFallback"}},
                     {{"type", "Fuse"}}};
    if (prefix)
      decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    json["normalizer"] = {{"type", "Sequence"}, {"normalizers", std::move(normalizers)}};
    json["pre_tokenizer"] = nullptr;
    json["decoder"] = {{"type", "Sequence"}, {"decoders", std::move(decoders)}};
    json["model"] = bpeModelJson(spelled, mergesFromScores(spelled, scores));
    json["model"]["fuse_unk"] = true;
    json["model"]["byte_fallback"] = true;
    return json;
  }
  if (kind != "gpt2")
    metadata.error("tokenizer.ggml.model",
                   "unsupported tokenizer \"" + kind +
                       "\" (gpt2, byte-level BPE, and llama, SentencePiece, are supported)");
  std::string pre = metadata.text("tokenizer.ggml.pre", "gpt-2");
  const PreTokenizer *split = nullptr;
  for (const PreTokenizer &candidate : kPreTokenizers)
    if (pre == candidate.name)
      split = &candidate;
  if (!split) {
    std::string known;
    for (const PreTokenizer &candidate : kPreTokenizers)
      known += (known.empty() ? "" : ", ") + std::string(candidate.name);
    metadata.error("tokenizer.ggml.pre",
                   "unsupported pre-tokenizer \"" + pre + "\" (" + known + " are supported)");
  }
  const GgufValue *mergeList =
      metadata.array("tokenizer.ggml.merges", GgufValue::Kind::String, SIZE_MAX);
  if (!mergeList)
    metadata.error("tokenizer.ggml.merges", "a byte-level BPE vocabulary needs its merges");
  std::vector<std::pair<std::string, std::string>> merges;
  for (const GgufValue &merge : mergeList->items) {
    size_t space = merge.text.find(' ');
    if (space == std::string::npos)
      metadata.error("tokenizer.ggml.merges", "merge \"" + merge.text + "\" is not two tokens");
    merges.emplace_back(merge.text.substr(0, space), merge.text.substr(space + 1));
  }
  auto byteLevel = [](bool addPrefixSpace, bool useRegex) -> Json {
    return {{"type", "ByteLevel"},
            {"add_prefix_space", addPrefixSpace},
            {"trim_offsets", true},
            {"use_regex", useRegex}};
  };
  json["normalizer"] = split->nfc ? Json{{"type", "NFC"}} : Json();
  json["pre_tokenizer"] = split->split ? Json{{"type", "Sequence"},
                                              {"pretokenizers",
                                               {{{"type", "Split"},
                                                 {"pattern", {{"Regex", split->split}}},
                                                 {"behavior", "Isolated"},
                                                 {"invert", false}},
                                                byteLevel(false, false)}}}
                                       : byteLevel(false, true);
  json["decoder"] = byteLevel(true, true);
  json["model"] = bpeModelJson(tokens, merges);
  json["model"]["byte_fallback"] = false;
  json["model"]["ignore_merges"] = split->ignoreMerges;
  return json;
}

Json xfmr::rt::ggufTokenizerConfigJson(const GgufFile &file) {
  TokenizerMetadata metadata(file);
  Json json = Json::object();
  const GgufValue *tokenList =
      metadata.array("tokenizer.ggml.tokens", GgufValue::Kind::String, SIZE_MAX);
  size_t vocabulary = tokenList ? tokenList->items.size() : 0;
  static const std::pair<const char *, const char *> kKeys[] = {{"bos", "bos_token"},
                                                                {"eos", "eos_token"},
                                                                {"unknown", "unk_token"},
                                                                {"padding", "pad_token"}};
  for (const auto &[name, key] : kKeys)
    if (int64_t id = metadata.tokenId(name, vocabulary); id >= 0)
      json[key] = tokenList->items[id].text;
  if (file.find("tokenizer.chat_template"))
    json["chat_template"] = metadata.text("tokenizer.chat_template", "");
  return json;
}
