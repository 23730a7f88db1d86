//===- Tokenizer.cpp - what every tokenizer shares ------------------------===//
//
// Added tokens, the sequence template (tokenizer.json's post_processor, or
// the slow tokenizer's class), finding a checkpoint's tokenizer files, and
// the C API.
//
//===----------------------------------------------------------------------===//

#include "Tokenizers/Tokenizer.h"

#include "xfmr-rt/xfmr_runtime.h"

#include "CommandLine.h"
#include "RuntimeSupport.h"
#include "Tokenizers/TokenizerModels.h"
#include "Tokenizers/Unicode.h"
#include "Weights/Gguf.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

using namespace xfmr::rt;

SentencePieceLoader xfmr::rt::sentencePieceLoader = nullptr;

//===----------------------------------------------------------------------===//
// Tokenizer
//===----------------------------------------------------------------------===//

std::vector<int32_t> Tokenizer::encode(std::string_view text, const std::string &what,
                                       bool addSpecialTokens) const {
  if (!isValidUtf8(text))
    fail(what + ": invalid UTF-8");
  std::vector<int32_t> ids;
  if (addSpecialTokens)
    ids = prefix;
  splitAddedTokens(
      text, /*normalized=*/false, /*atStart=*/true,
      [&](std::string_view stretch, bool atStart) { encodeSegment(stretch, atStart, ids); },
      [&](int32_t id) { ids.push_back(id); });
  if (addSpecialTokens)
    ids.insert(ids.end(), suffix.begin(), suffix.end());
  return ids;
}

void Tokenizer::splitAddedTokens(std::string_view text, bool normalized, bool atStart,
                                 const std::function<void(std::string_view, bool)> &onText,
                                 const std::function<void(int32_t)> &onToken) const {
  const std::vector<Match> *byFirstByte = candidates[normalized];
  // tokenizers matches leftmost-longest and goes on after a match it
  // rejects (single_word), not inside it.
  size_t done = 0;
  for (size_t i = 0; i < text.size();) {
    const Match *match = nullptr;
    for (const Match &candidate : byFirstByte[static_cast<uint8_t>(text[i])])
      if (text.compare(i, candidate.text.size(), candidate.text) == 0) {
        match = &candidate;
        break;
      }
    if (!match) {
      ++i;
      continue;
    }
    const AddedToken &token = added[match->token];
    size_t start = i, end = i + match->text.size();
    i = end;
    if (token.singleWord && ((start > 0 && endsWithWordCharacter(text.substr(0, start))) ||
                             (end < text.size() && startsWithWordCharacter(text.substr(end)))))
      continue;
    if (token.lstrip)
      start = std::max(done, start - trailingWhitespace(text.substr(0, start)));
    if (token.rstrip)
      end += leadingWhitespace(text.substr(end));
    if (start > done)
      onText(text.substr(done, start - done), atStart && done == 0);
    onToken(token.id);
    done = i = end;
  }
  if (done < text.size())
    onText(text.substr(done), atStart && done == 0);
}

void Tokenizer::addToken(const AddedToken &token, std::string matchAs) {
  if (token.content.empty())
    return;
  if (auto it = addedById.find(token.id); it != addedById.end()) {
    added[it->second] = token;
    // Only the latest definition of an id is matched.
    for (auto &lists : candidates)
      for (auto &list : lists)
        list.erase(std::remove_if(list.begin(), list.end(),
                                  [&](const Match &m) { return m.token == it->second; }),
                   list.end());
  } else {
    addedById[token.id] = added.size();
    added.push_back(token);
    addedText.emplace_back();
  }
  if (matchAs.empty() || !token.normalized)
    matchAs = token.content;
  addedText[addedById[token.id]] = matchAs;
  anyNormalized |= token.normalized;
  std::vector<Match> &list = candidates[token.normalized][static_cast<uint8_t>(matchAs[0])];
  // After the longer ones and those as long added before it.
  auto at = std::find_if(list.begin(), list.end(),
                         [&](const Match &other) { return other.text.size() < matchAs.size(); });
  list.insert(at, Match{matchAs, addedById[token.id]});
}

void Tokenizer::addSpecialToken(const std::string &content, int32_t id) {
  AddedToken token;
  token.content = content;
  token.id = id;
  addToken(token);
}

const AddedToken *Tokenizer::addedToken(int32_t id) const {
  auto it = addedById.find(id);
  return it == addedById.end() ? nullptr : &added[it->second];
}

int64_t Tokenizer::addedLimit() const {
  return addedById.empty() ? 0 : static_cast<int64_t>(addedById.rbegin()->first) + 1;
}

int32_t Tokenizer::tokenId(const std::string &token) const {
  for (const AddedToken &each : added)
    if (each.content == token)
      return each.id;
  return -1;
}

int32_t Tokenizer::specialId(const std::string &content, const std::string &where) const {
  if (int32_t id = tokenId(content); id >= 0)
    return id;
  fail(where + ": the special token '" + content + "' is not an added token");
}

//===----------------------------------------------------------------------===//
// DecodeStream
//===----------------------------------------------------------------------===//

namespace {

/// Whether decoded text ends before a character does: bytes of an
/// incomplete UTF-8 sequence, or a replacement character a decoder put for
/// one.
bool endsIncomplete(const std::string &text) {
  return incompleteUtf8Tail(text) > 0 ||
         (text.size() >= 3 && text.compare(text.size() - 3, 3, "\xEF\xBF\xBD") == 0);
}

} // namespace

void DecodeStream::prime(const std::vector<int32_t> &context) {
  for (int32_t id : context)
    step(id);
}

std::string DecodeStream::step(int32_t id) {
  ids.push_back(id);
  std::string text = tokenizer.decode(ids);
  if (text.size() <= prefix.size() || endsIncomplete(text))
    return "";
  std::string added =
      text.compare(0, prefix.size(), prefix) == 0 ? text.substr(prefix.size()) : text;
  // The ids that made the new text become the context of the next step.
  size_t nextPrefixIndex = ids.size() - prefixIndex;
  ids.erase(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(prefixIndex));
  prefix = tokenizer.decode(ids);
  prefixIndex = nextPrefixIndex;
  return replaceInvalidUtf8(added);
}

std::string DecodeStream::finish() {
  std::string text = tokenizer.decode(ids);
  std::string rest =
      text.compare(0, prefix.size(), prefix) == 0 ? text.substr(prefix.size()) : std::string();
  ids.clear();
  prefix.clear();
  prefixIndex = 0;
  return replaceInvalidUtf8(rest);
}

void Tokenizer::setPostProcessor(const Json &processor, const std::string &where) {
  if (processor.is_null())
    return;
  const Json *type = field(processor, "type");
  std::string kind = type ? textOf(*type) : "";
  std::string key = where + ": key 'post_processor'";
  // {"sep": ["</s>", 2], "cls": ["<s>", 0]}: cls, the sequence, sep.
  auto pairId = [&](const char *name) {
    const Json *pair = field(processor, name);
    if (!pair || elements(*pair).size() != 2 || !asInt((*pair)[1]))
      fail(key + ": " + kind + " needs '" + name + "': [token, id]");
    return static_cast<int32_t>(*asInt((*pair)[1]));
  };
  if (kind == "ByteLevel")
    return;
  if (kind == "RobertaProcessing" || kind == "BertProcessing") {
    prefix.insert(prefix.begin(), pairId("cls"));
    suffix.push_back(pairId("sep"));
    return;
  }
  if (kind == "Sequence") {
    const Json *processors = field(processor, "processors");
    if (!processors || !processors->is_array())
      fail(key + ": a Sequence needs 'processors'");
    for (const Json &each : elements(*processors))
      setPostProcessor(each, where);
    return;
  }
  if (kind != "TemplateProcessing")
    fail(key + ": unsupported type '" + kind +
         "' (TemplateProcessing, RobertaProcessing, BertProcessing, ByteLevel and Sequence are "
         "supported)");
  // [{"SpecialToken": {"id": "[CLS]"}}, {"Sequence": {"id": "A"}}, ...], the
  // special tokens' ids under "special_tokens".
  const Json *single = field(processor, "single");
  const Json *tokens = field(processor, "special_tokens");
  if (!single || !single->is_array())
    fail(key + ": TemplateProcessing needs a 'single' template");
  bool afterSequence = false;
  std::vector<int32_t> before, after;
  for (const Json &piece : elements(*single)) {
    if (field(piece, "Sequence")) {
      afterSequence = true;
      continue;
    }
    const Json *token = field(piece, "SpecialToken");
    const Json *name = token ? field(*token, "id") : nullptr;
    const Json *entry = name && tokens ? field(*tokens, textOf(*name)) : nullptr;
    const Json *ids = entry ? field(*entry, "ids") : nullptr;
    if (!ids || !ids->is_array())
      fail(key + ": a template piece is neither a Sequence nor a SpecialToken with ids");
    for (const Json &id : elements(*ids)) {
      if (!asInt(id))
        fail(key + ": special token '" + textOf(*name) + "' has a non-integer id");
      (afterSequence ? after : before).push_back(static_cast<int32_t>(*asInt(id)));
    }
  }
  prefix.insert(prefix.begin(), before.begin(), before.end());
  suffix.insert(suffix.end(), after.begin(), after.end());
}

//===----------------------------------------------------------------------===//
// Files
//===----------------------------------------------------------------------===//

std::string xfmr::rt::readTokenizerFile(const std::string &path) {
  return readFileText(path, "tokenizer file");
}

bool xfmr::rt::isRegularFile(const std::string &path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

std::string xfmr::rt::tokenizerFileName(const std::string &path) {
  return "tokenizer file '" + path + "'";
}

Json xfmr::rt::parseTokenizerJson(const std::string &path) {
  std::string error;
  std::optional<Json> json = parseJson(readTokenizerFile(path), error);
  if (!json)
    fail(tokenizerFileName(path) + ": invalid JSON: " + error);
  return std::move(*json);
}

void xfmr::rt::readSpecialTokenConfig(Tokenizer &tokenizer, const std::string &configPath) {
  if (!isRegularFile(configPath))
    return;
  std::string where = tokenizerFileName(configPath);
  Json config = parseTokenizerJson(configPath);
  if (const Json *decoder = field(config, "added_tokens_decoder"))
    for (const auto &[id, token] : members(*decoder)) {
      char *end = nullptr;
      long value = std::strtol(id.c_str(), &end, 10);
      const Json *content = field(token, "content");
      if (id.empty() || *end || value < 0 || value > kMaxTokenId || !content)
        fail(where + ": key 'added_tokens_decoder': entry '" + id + "' is not an id up to " +
             std::to_string(kMaxTokenId) + " with a 'content'");
      tokenizer.addSpecialToken(textOf(*content), static_cast<int32_t>(value));
    }
  // The slow tokenizers' templates: [CLS] A [SEP] (BERT), <s> A </s>
  // (BART, RoBERTa).
  const Json *type = field(config, "tokenizer_class");
  std::string kind = type ? textOf(*type) : "";
  auto token = [&](const char *key, const char *fallback) {
    const Json *value = field(config, key);
    if (value && value->is_object())
      value = field(*value, "content");
    return tokenizer.specialId(value && value->is_string() ? textOf(*value) : fallback, where);
  };
  if (kind == "BertTokenizer" || kind == "BertTokenizerFast") {
    tokenizer.prefix = {token("cls_token", "[CLS]")};
    tokenizer.suffix = {token("sep_token", "[SEP]")};
  } else if (kind.rfind("BartTokenizer", 0) == 0 || kind.rfind("RobertaTokenizer", 0) == 0) {
    tokenizer.prefix = {token("bos_token", "<s>")};
    tokenizer.suffix = {token("eos_token", "</s>")};
  }
}

bool xfmr::rt::hasSentencePieceFiles(const std::string &directory) {
  return isRegularFile(directory + "/source.spm") || isRegularFile(directory + "/spiece.model");
}

bool xfmr::rt::isGgufFile(const std::string &path) {
  return path.size() > 5 && path.compare(path.size() - 5, 5, ".gguf") == 0 && isRegularFile(path);
}

Json xfmr::rt::ggufTokenizerFile(const std::string &path, bool config) {
  std::unique_ptr<GgufFile> file = GgufFile::open(path);
  return config ? ggufTokenizerConfigJson(*file) : ggufTokenizerJson(*file);
}

std::unique_ptr<Tokenizer> xfmr::rt::loadTokenizer(const std::string &directory) {
  if (isGgufFile(directory))
    return loadTokenizerJson(ggufTokenizerFile(directory, /*config=*/false),
                             "GGUF file '" + directory + "': its tokenizer", directory);
  std::string json = directory + "/tokenizer.json";
  std::string config = directory + "/tokenizer_config.json";
  if (isRegularFile(json))
    return loadTokenizerJson(json);
  if (hasSentencePieceFiles(directory)) {
    if (!sentencePieceLoader)
      fail("'" + directory +
           "' holds a SentencePiece tokenizer: link libxfmr_sentencepiece.a "
           "and -lsentencepiece, and call xfmr_tokenizer_enable_sentencepiece()");
    return sentencePieceLoader(directory);
  }
  std::string vocab = directory + "/vocab.json", merges = directory + "/merges.txt";
  if (isRegularFile(vocab) && isRegularFile(merges))
    return loadBytePairFiles(vocab, merges, config);
  if (isRegularFile(directory + "/vocab.txt"))
    return loadWordPieceVocab(directory + "/vocab.txt", config);
  return nullptr;
}

//===----------------------------------------------------------------------===//
// C API
//===----------------------------------------------------------------------===//


xfmr_tokenizer *xfmr_tokenizer_load(const char *directory, char *err, size_t errSize) {
  try {
    std::unique_ptr<Tokenizer> tokenizer = loadTokenizer(directory);
    if (!tokenizer) {
      setError(err, errSize,
               std::string("no tokenizer in '") + directory + "' (" + kTokenizerFiles + ")");
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
