//===- TokenizerJson.cpp - a tokenizer made of tokenizer.json's parts -----===//
//
// PipelineTokenizer runs the components as tokenizers' Tokenizer does:
// added tokens matched in the raw text split it into stretches; each
// stretch is normalized, split again at the added tokens matched in
// normalized text, pre-tokenized, and each piece given ids by the model.
// Decoding maps ids to tokens (added tokens' contents included) and runs
// the decoder over the list.
//
//===----------------------------------------------------------------------===//

#include "Tokenizers/TokenizerPipeline.h"

#include "CommandLine.h"
#include "Tokenizers/TokenizerModels.h"

#include <algorithm>

using namespace xfmr::rt;

namespace {

class PipelineTokenizer : public Tokenizer {
public:
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> preTokenizer;
  std::unique_ptr<TokenizerModel> model;
  std::unique_ptr<Decoder> decoder;

  std::string decode(const std::vector<int32_t> &ids) const override {
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (int32_t id : ids) {
      if (addedToken(id))
        tokens.push_back(addedTokenText(id));
      else if (const std::string *token = model->token(id))
        tokens.push_back(*token);
    }
    std::string text;
    if (!decoder) {
      for (const std::string &token : tokens)
        text += (text.empty() ? "" : " ") + token;
      return text;
    }
    if (!tokens.empty())
      decoder->decode(tokens);
    for (const std::string &token : tokens)
      text += token;
    return text;
  }

  int64_t size() const override { return std::max(model->size(), addedLimit()); }

  int32_t tokenId(const std::string &token) const override {
    int32_t id = Tokenizer::tokenId(token);
    return id >= 0 ? id : model->id(token);
  }

  /// What `content`, an added token with normalized=true, is matched as.
  std::string normalizedContent(const std::string &content) const {
    std::string text = content;
    if (normalizer)
      normalizer->normalize(text);
    return text;
  }

protected:
  void encodeSegment(std::string_view text, bool atStart,
                     std::vector<int32_t> &ids) const override {
    std::string normalized(text);
    if (normalizer)
      normalizer->normalize(normalized);
    if (!hasNormalizedTokens()) {
      encodeNormalized(normalized, atStart, ids);
      return;
    }
    splitAddedTokens(
        normalized, /*normalized=*/true, atStart,
        [&](std::string_view stretch, bool start) { encodeNormalized(stretch, start, ids); },
        [&](int32_t id) { ids.push_back(id); });
  }

private:
  void encodeNormalized(std::string_view text, bool atStart, std::vector<int32_t> &ids) const {
    if (text.empty())
      return;
    std::vector<Piece> pieces{{std::string(text), atStart}};
    if (preTokenizer)
      preTokenizer->split(pieces);
    for (const Piece &piece : pieces)
      if (!piece.text.empty())
        model->encode(piece.text, ids);
  }
};

/// tokenizer.json's `added_tokens`.
void readAddedTokens(PipelineTokenizer &tokenizer, const Json &json, const std::string &where) {
  const Json *added = field(json, "added_tokens");
  if (!added || added->is_null())
    return;
  if (!added->is_array())
    fail(keyName(where, "added_tokens") + ": expected an array");
  for (const Json &entry : elements(*added)) {
    const Json *id = field(entry, "id");
    std::string content = stringKey(entry, "content", where + ": an added token", "");
    if (!id || !asInt(*id) || *asInt(*id) < 0 || *asInt(*id) > kMaxTokenId || content.empty())
      fail(where + ": an added token needs a 'content' and an 'id' up to " +
           std::to_string(kMaxTokenId));
    std::string what = where + ": added token '" + content + "'";
    AddedToken token;
    token.content = content;
    token.id = static_cast<int32_t>(*asInt(*id));
    token.special = boolKey(entry, "special", what, false);
    token.singleWord = boolKey(entry, "single_word", what, false);
    token.lstrip = boolKey(entry, "lstrip", what, false);
    token.rstrip = boolKey(entry, "rstrip", what, false);
    token.normalized = boolKey(entry, "normalized", what, !token.special);
    tokenizer.addToken(token, tokenizer.normalizedContent(content));
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// JSON helpers
//===----------------------------------------------------------------------===//

std::string xfmr::rt::keyName(const std::string &where, const std::string &key) {
  return where + ": key '" + key + "'";
}

const Json &xfmr::rt::requireKey(const Json &object, const char *key, const std::string &where) {
  const Json *value = field(object, key);
  if (!value)
    fail(keyName(where, key) + " is missing");
  return *value;
}

std::string xfmr::rt::stringKey(const Json &object, const char *key, const std::string &where,
                                const std::string &fallback) {
  const Json *value = field(object, key);
  if (!value || value->is_null())
    return fallback;
  if (!value->is_string())
    fail(keyName(where, key) + ": expected a string");
  return textOf(*value);
}

bool xfmr::rt::boolKey(const Json &object, const char *key, const std::string &where,
                       bool fallback) {
  const Json *value = field(object, key);
  if (!value || value->is_null())
    return fallback;
  if (!value->is_boolean())
    fail(keyName(where, key) + ": expected true or false");
  return value->get<bool>();
}

std::string xfmr::rt::componentType(const Json &json, const std::string &where) {
  if (json.is_null())
    return "";
  if (!json.is_object())
    fail(where + ": expected an object");
  std::string type = stringKey(json, "type", where, "");
  if (type.empty())
    fail(keyName(where, "type") + " is missing");
  return type;
}

std::string xfmr::rt::replaceAll(std::string_view text, std::string_view from,
                                 std::string_view to) {
  std::string out;
  for (size_t at; (at = text.find(from)) != std::string_view::npos;) {
    out.append(text.substr(0, at)).append(to);
    text.remove_prefix(at + from.size());
  }
  return out.append(text);
}

//===----------------------------------------------------------------------===//
// Vocabulary
//===----------------------------------------------------------------------===//

void Vocabulary::add(const std::string &token, int64_t id, const std::string &where) {
  if (id < 0 || id > kMaxTokenId)
    fail(where + ": token id " + std::to_string(id) + " of '" + token + "' is out of range (0 to " +
         std::to_string(kMaxTokenId) + ")");
  if (!ids.emplace(token, static_cast<int32_t>(id)).second)
    fail(where + ": token '" + token + "' appears twice");
  if (static_cast<size_t>(id) >= tokens.size()) {
    tokens.resize(id + 1);
    present.resize(id + 1);
  }
  if (present[id])
    fail(where + ": id " + std::to_string(id) + " is given to two tokens");
  tokens[id] = token;
  present[id] = true;
}

void Vocabulary::requireDense(const std::string &where) const {
  for (size_t id = 0; id < present.size(); ++id)
    if (!present[id])
      fail(where + ": no token has id " + std::to_string(id));
}

Vocabulary Vocabulary::fromObject(const Json &vocab, const std::string &where) {
  if (!vocab.is_object())
    fail(keyName(where, "vocab") + ": expected an object of token: id");
  Vocabulary result;
  result.ids.reserve(members(vocab).size());
  for (const auto &[token, id] : members(vocab)) {
    std::optional<int64_t> value = asInt(id);
    if (!value)
      fail(where + ": token '" + token + "' has no integer id");
    result.add(token, *value, where);
  }
  return result;
}

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

std::unique_ptr<Tokenizer>
xfmr::rt::makePipelineTokenizer(std::unique_ptr<Normalizer> normalizer,
                                std::unique_ptr<PreTokenizer> preTokenizer,
                                std::unique_ptr<TokenizerModel> model,
                                std::unique_ptr<Decoder> decoder, const std::string &source) {
  auto tokenizer = std::make_unique<PipelineTokenizer>();
  tokenizer->normalizer = std::move(normalizer);
  tokenizer->preTokenizer = std::move(preTokenizer);
  tokenizer->model = std::move(model);
  tokenizer->decoder = std::move(decoder);
  tokenizer->source = source;
  return tokenizer;
}

std::unique_ptr<Tokenizer> xfmr::rt::loadTokenizerJson(const std::string &path) {
  return loadTokenizerJson(parseTokenizerJson(path), tokenizerFileName(path), path);
}

std::unique_ptr<Tokenizer> xfmr::rt::loadTokenizerJson(const Json &json, const std::string &where,
                                                       const std::string &path) {
  if (!json.is_object())
    fail(where + ": expected an object");
  const Json &model = requireKey(json, "model", where);
  std::string modelWhere = where + ": model";
  // Files older than the `type` key hold a BPE model.
  std::string type = stringKey(model, "type", modelWhere, field(model, "merges") ? "BPE" : "");
  std::unique_ptr<TokenizerModel> reader;
  if (type == "BPE")
    reader = readBpeModel(model, modelWhere);
  else if (type == "WordPiece")
    reader = readWordPieceModel(model, modelWhere);
  else if (type == "Unigram")
    reader = readUnigramModel(model, modelWhere);
  else if (type == "WordLevel")
    reader = readWordLevelModel(model, modelWhere);
  else
    fail(keyName(where, "model.type") + ": unknown model '" + type +
         "' (BPE, WordPiece, Unigram and WordLevel are supported)");
  auto component = [&](const char *key) -> const Json & {
    static const Json none;
    const Json *value = field(json, key);
    return value ? *value : none;
  };
  auto tokenizer = makePipelineTokenizer(
      readNormalizer(component("normalizer"), keyName(where, "normalizer")),
      readPreTokenizer(component("pre_tokenizer"), keyName(where, "pre_tokenizer")),
      std::move(reader), readDecoder(component("decoder"), keyName(where, "decoder")), path);
  readAddedTokens(static_cast<PipelineTokenizer &>(*tokenizer), json, where);
  tokenizer->setPostProcessor(component("post_processor"), where);
  return tokenizer;
}
