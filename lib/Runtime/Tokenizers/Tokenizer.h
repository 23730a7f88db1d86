//===- Tokenizer.h - text to token ids and back -----------------*- C++ -*-===//
//
// The tokenizers a checkpoint ships, read from its own files: tokenizer.json
// (any model, normalizer, pre-tokenizer, post-processor and decoder of the
// `tokenizers` library: TokenizerPipeline.h), the slow tokenizers' files
// (vocab.json + merges.txt, vocab.txt) as the same components, and
// SentencePiece models (Marian's source.spm + vocab.json, spiece.model;
// libxfmr_sentencepiece.a).
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_RUNTIME_TOKENIZER_H
#define XFMR_LIB_RUNTIME_TOKENIZER_H

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace xfmr::rt {

/// An added token (tokenizer.json's `added_tokens`): matched in the text
/// before the model sees it, as tokenizers' AddedVocabulary does.
struct AddedToken {
  std::string content;
  int32_t id = 0;
  /// Matched only with no word character on either side.
  bool singleWord = false;
  /// Takes the whitespace on its left or right with it.
  bool lstrip = false, rstrip = false;
  /// Matched in the normalized text (else in the raw text).
  bool normalized = false;
  bool special = true;
};

class Tokenizer {
public:
  virtual ~Tokenizer() = default;
  /// The ids of `text` (UTF-8; invalid UTF-8 is a Failure naming `what`):
  /// added tokens split out whole, the model's ids for the text between
  /// them, and, with `addSpecialTokens`, the special tokens of the
  /// sequence template (BERT's [CLS] ... [SEP], Llama's <s> ...).
  std::vector<int32_t> encode(std::string_view text, const std::string &what,
                              bool addSpecialTokens = true) const;
  /// The text of `ids`, as the Hugging Face tokenizer decodes them with
  /// skip_special_tokens=False (not necessarily valid UTF-8).
  virtual std::string decode(const std::vector<int32_t> &ids) const = 0;
  /// Ids 0 .. size() - 1 exist.
  virtual int64_t size() const = 0;

  /// Where the tokenizer was read from.
  std::string source;
  /// Reads the sequence template of tokenizer.json's `post_processor`.
  void setPostProcessor(const nlohmann::json &processor, const std::string &where);
  /// An added token; `normalized` ones are matched as `matchAs` (the
  /// content normalized), which defaults to the content.
  void addToken(const AddedToken &token, std::string matchAs = "");
  /// A special added token (not normalized, no flags).
  void addSpecialToken(const std::string &content, int32_t id);
  std::vector<int32_t> prefix, suffix;

  /// The id of added token `content` (a Failure naming `where` if none).
  int32_t specialId(const std::string &content, const std::string &where) const;
  /// The id of `token`, an added token or one of the model's, or -1.
  virtual int32_t tokenId(const std::string &token) const;

protected:
  /// Appends the ids of `text`, a stretch of valid UTF-8 between added
  /// tokens that are matched in the raw text; `atStart` if it begins the
  /// text.
  virtual void encodeSegment(std::string_view text, bool atStart,
                             std::vector<int32_t> &ids) const = 0;
  /// Calls onText(stretch, atStart) and onToken(id) for the stretches and
  /// added tokens of `text`, in order; with `normalized`, for the tokens
  /// matched in normalized text.
  void splitAddedTokens(std::string_view text, bool normalized, bool atStart,
                        const std::function<void(std::string_view, bool)> &onText,
                        const std::function<void(int32_t)> &onToken) const;
  /// The added token of `id`, or null.
  const AddedToken *addedToken(int32_t id) const;
  /// What added token `id` is matched as and decodes to: its content, or
  /// for a normalized one, its content normalized.
  const std::string &addedTokenText(int32_t id) const { return addedText[addedById.at(id)]; }
  /// One past the largest added token id (0: none).
  int64_t addedLimit() const;
  /// Whether any added token is matched in normalized text.
  bool hasNormalizedTokens() const { return anyNormalized; }

private:
  struct Match {
    std::string text;
    size_t token;
  };
  /// By first byte, longest first: what raw [0] and normalized [1] text may
  /// start with.
  std::vector<Match> candidates[2][256];
  std::vector<AddedToken> added;
  std::vector<std::string> addedText;
  std::map<int32_t, size_t> addedById;
  bool anyNormalized = false;
};

/// The text of a growing list of ids, a token at a time, as tokenizers'
/// DecodeStream gives it: each step decodes the last few ids and returns
/// what they add, holding back an incomplete character.
class DecodeStream {
public:
  explicit DecodeStream(const Tokenizer &tokenizer) : tokenizer(tokenizer) {}
  /// Takes `ids` as what came before (a prompt), returning no text.
  void prime(const std::vector<int32_t> &ids);
  /// The text `id` adds (empty while a character is incomplete).
  std::string step(int32_t id);
  /// What is held back, invalid bytes replaced.
  std::string finish();

private:
  const Tokenizer &tokenizer;
  std::vector<int32_t> ids;
  std::string prefix;
  size_t prefixIndex = 0;
};

/// The files loadTokenizer reads, for messages.
inline constexpr const char *kTokenizerFiles =
    "tokenizer.json; vocab.json and merges.txt; vocab.txt; source.spm or spiece.model; or a "
    ".gguf file";

/// The tokenizer in checkpoint directory `directory` (or GGUF file), or null
/// if it holds none of the files a supported tokenizer is read from. A file
/// that is there but corrupt or unsupported is a Failure naming it.
std::unique_ptr<Tokenizer> loadTokenizer(const std::string &directory);

} // namespace xfmr::rt

/// The C API's tokenizer.
struct xfmr_tokenizer {
  std::unique_ptr<xfmr::rt::Tokenizer> tokenizer;
};

#endif // XFMR_LIB_RUNTIME_TOKENIZER_H
