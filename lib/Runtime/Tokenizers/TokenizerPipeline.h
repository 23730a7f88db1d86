//===- TokenizerPipeline.h - tokenizer.json's components --------*- C++ -*-===//
//
// Internal to the runtime. The Hugging Face `tokenizers` library builds a
// tokenizer from components, and tokenizer.json names them: a normalizer
// rewrites the text, a pre-tokenizer splits it into pieces, a model turns
// each piece into ids, a decoder turns tokens back into text. Each is read
// from its JSON object by type name (Normalizers.cpp, PreTokenizers.cpp,
// the models' files, Decoders.cpp); PipelineTokenizer (TokenizerJson.cpp)
// runs them, and the slow tokenizers' files become the same components.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_RUNTIME_TOKENIZERPIPELINE_H
#define XFMR_LIB_RUNTIME_TOKENIZERPIPELINE_H

#include "CommandLine.h"
#include "Json.h"
#include "Tokenizers/Regex.h"
#include "Tokenizers/Tokenizer.h"

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace xfmr::rt {

/// Rewrites valid UTF-8 text in place.
class Normalizer {
public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string &text) const = 0;
};

/// A piece of pre-tokenized text; `atStart` if it begins the original text
/// (Metaspace's prepend_scheme "first" prepends only there).
struct Piece {
  std::string text;
  bool atStart = false;
};

/// Splits each piece further (and may rewrite it, as ByteLevel does).
class PreTokenizer {
public:
  virtual ~PreTokenizer() = default;
  virtual void split(std::vector<Piece> &pieces) const = 0;
};

/// Token strings to ids and back.
class TokenizerModel {
public:
  virtual ~TokenizerModel() = default;
  /// Appends the ids of one pre-tokenized piece (valid UTF-8, not empty).
  virtual void encode(const std::string &piece, std::vector<int32_t> &ids) const = 0;
  /// The token of `id`, or null if the model has none.
  virtual const std::string *token(int32_t id) const = 0;
  /// The id of `token`, or -1.
  virtual int32_t id(const std::string &token) const = 0;
  /// Ids 0 .. size() - 1 may exist.
  virtual int64_t size() const = 0;
};

/// tokenizers' decode_chain: rewrites the list of tokens.
class Decoder {
public:
  virtual ~Decoder() = default;
  virtual void decode(std::vector<std::string> &tokens) const = 0;
};

/// Each component from its tokenizer.json object; a type the runtime does
/// not know, or a malformed object, is a Failure naming `where` and the key.
/// Null (JSON null) means none.
std::unique_ptr<Normalizer> readNormalizer(const Json &json, const std::string &where);
std::unique_ptr<PreTokenizer> readPreTokenizer(const Json &json, const std::string &where);
std::unique_ptr<Decoder> readDecoder(const Json &json, const std::string &where);
std::unique_ptr<TokenizerModel> readBpeModel(const Json &json, const std::string &where);
std::unique_ptr<TokenizerModel> readWordPieceModel(const Json &json, const std::string &where);
std::unique_ptr<TokenizerModel> readUnigramModel(const Json &json, const std::string &where);
std::unique_ptr<TokenizerModel> readWordLevelModel(const Json &json, const std::string &where);

/// The components the slow tokenizers' files mean.
std::unique_ptr<PreTokenizer> byteLevelPreTokenizer(bool addPrefixSpace);
std::unique_ptr<Decoder> byteLevelDecoder();
std::unique_ptr<Normalizer> bertNormalizer(bool lowercase, bool stripAccents,
                                           bool chineseCharacters, bool cleanText);
std::unique_ptr<PreTokenizer> bertPreTokenizer();
std::unique_ptr<Decoder> wordPieceDecoder(const std::string &prefix, bool cleanup);
/// A BPE model from vocabulary and merges (vocab.json + merges.txt).
std::unique_ptr<TokenizerModel>
bpeModel(std::vector<std::pair<std::string, int64_t>> vocab,
         const std::vector<std::pair<std::string, std::string>> &merges, const std::string &where);
/// A WordPiece model from vocab.txt's lines.
std::unique_ptr<TokenizerModel> wordPieceModel(const std::vector<std::string> &vocab,
                                               const std::string &where);

/// GPT-2's bytes_to_unicode: printable bytes stand for themselves, the
/// others for code points 256 and up.
uint32_t byteLevelCharacter(uint8_t byte);
/// The byte a bytes_to_unicode character stands for, or -1.
int byteOfByteLevelCharacter(uint32_t cp);

/// The pattern of a Split or Replace: {"String": s} or {"Regex": r}.
Regex readPattern(const Json &json, const std::string &where);

/// JSON helpers the readers share.
const Json &requireKey(const Json &object, const char *key, const std::string &where);
std::string stringKey(const Json &object, const char *key, const std::string &where,
                      const std::string &fallback);
bool boolKey(const Json &object, const char *key, const std::string &where, bool fallback);
/// "where: key 'KEY'", how errors name a component's field.
std::string keyName(const std::string &where, const std::string &key);

/// The `type` of a component's JSON object, or "" for JSON null (none); a
/// Failure naming `where` for anything else.
std::string componentType(const Json &json, const std::string &where);

/// A Sequence's components: each element of its array `key`, read by
/// `read(element, where)` (null ones, JSON nulls, dropped).
template <typename Component, typename Read>
std::vector<std::unique_ptr<Component>> readSequence(const Json &json, const char *key,
                                                     const std::string &where, Read read) {
  const Json &steps = requireKey(json, key, where);
  if (!steps.is_array())
    fail(keyName(where, key) + ": expected an array");
  std::vector<std::unique_ptr<Component>> components;
  for (size_t i = 0; i < steps.size(); ++i)
    if (auto step = read(steps[i], where + "[" + std::to_string(i) + "]"))
      components.push_back(std::move(step));
  return components;
}

/// Appends the ids of `text`'s bytes' "<0xAB>" tokens, as BPE's and
/// Unigram's byte_fallback do, if `find(token)` (-1: none) knows them all;
/// returns whether it did.
template <typename Find>
bool appendByteFallback(const std::string &text, Find find, std::vector<int32_t> &ids) {
  size_t before = ids.size();
  for (char c : text) {
    static const char *digits = "0123456789ABCDEF";
    auto byte = static_cast<uint8_t>(c);
    int32_t id = find(std::string{'<', '0', 'x', digits[byte >> 4], digits[byte & 15], '>'});
    if (id < 0) {
      ids.resize(before);
      return false;
    }
    ids.push_back(id);
  }
  return true;
}

/// `text` with each occurrence of `from` (not empty) replaced by `to`.
std::string replaceAll(std::string_view text, std::string_view from, std::string_view to);

/// A checked vocabulary: unique tokens, ids from 0 to kMaxTokenId, no gaps.
class Vocabulary {
public:
  void add(const std::string &token, int64_t id, const std::string &where);
  /// Every id below the largest has a token (a Failure otherwise).
  void requireDense(const std::string &where) const;
  int32_t find(const std::string &token) const {
    auto it = ids.find(token);
    return it == ids.end() ? -1 : it->second;
  }
  const std::string *token(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < tokens.size() && present[id] ? &tokens[id]
                                                                             : nullptr;
  }
  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
  /// The vocabulary of a `vocab` object {token: id}.
  static Vocabulary fromObject(const Json &vocab, const std::string &where);

private:
  std::unordered_map<std::string, int32_t> ids;
  std::vector<std::string> tokens;
  std::vector<bool> present;
};

/// A tokenizer made of components (PipelineTokenizer, TokenizerJson.cpp).
std::unique_ptr<Tokenizer> makePipelineTokenizer(std::unique_ptr<Normalizer> normalizer,
                                                 std::unique_ptr<PreTokenizer> preTokenizer,
                                                 std::unique_ptr<TokenizerModel> model,
                                                 std::unique_ptr<Decoder> decoder,
                                                 const std::string &source);

} // namespace xfmr::rt

#endif // XFMR_LIB_RUNTIME_TOKENIZERPIPELINE_H
