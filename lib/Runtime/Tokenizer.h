//===- Tokenizer.h - text to token ids and back -----------------*- C++ -*-===//
//
// The tokenizers a checkpoint ships, read from its own files: byte-level
// BPE (GPT-2, BART: tokenizer.json, or vocab.json + merges.txt), WordPiece
// (BERT: tokenizer.json, or vocab.txt) and SentencePiece (Marian's
// source.spm + vocab.json, spiece.model; libxfmr_sentencepiece.a).
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_RUNTIME_TOKENIZER_H
#define XFMR_LIB_RUNTIME_TOKENIZER_H

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace xfmr::rt {

class JsonValue;

class Tokenizer {
public:
  virtual ~Tokenizer() = default;
  /// The ids of `text` (UTF-8; invalid UTF-8 is a Failure naming `what`):
  /// added tokens split out whole, the model's ids for the text between
  /// them, and the special tokens the tokenizer puts around a sequence
  /// (BERT's [CLS] ... [SEP], BART's <s> ... </s>, Marian's ... </s>).
  std::vector<int32_t> encode(std::string_view text, const std::string &what) const;
  /// The bytes token `id` adds to a stream of text (possibly part of a
  /// UTF-8 character).
  std::string tokenBytes(int32_t id) const;
  /// The text of `ids`, as the Hugging Face tokenizer decodes them with
  /// skip_special_tokens=False (not necessarily valid UTF-8).
  virtual std::string decode(const std::vector<int32_t> &ids) const;
  /// Ids 0 .. size() - 1 exist.
  virtual int64_t size() const = 0;

  /// Where the tokenizer was read from.
  std::string source;
  /// Reads the sequence template of tokenizer.json's `post_processor`.
  void setPostProcessor(const JsonValue &processor, const std::string &where);
  /// An added token: split out of the text whole, never seen by the model.
  void addSpecialToken(const std::string &content, int32_t id);
  std::vector<int32_t> prefix, suffix;

protected:
  /// Appends the model's ids of `text`, which holds no added token.
  virtual void encodeText(std::string_view text, const std::string &what,
                          std::vector<int32_t> &ids) const = 0;
  /// The bytes of a token of the model (not an added one).
  virtual std::string modelTokenBytes(int32_t id) const = 0;
  /// The content of added token `id`, or null.
  const std::string *specialToken(int32_t id) const;
  /// One past the largest added token id (0: none).
  int64_t specialLimit() const;

public:
  /// The id of added token `content` (a Failure naming `where` if none).
  int32_t specialId(const std::string &content, const std::string &where) const;

private:
  /// Longest first where two start alike.
  std::vector<std::pair<std::string, int32_t>> special;
  std::map<int32_t, std::string> specialById;
};

/// The files loadTokenizer reads, for messages.
inline constexpr const char *kTokenizerFiles =
    "tokenizer.json; vocab.json and merges.txt; vocab.txt; source.spm or spiece.model";

/// The tokenizer in checkpoint directory `directory`, or null if it holds
/// none of the files a supported tokenizer is read from. A file that is
/// there but corrupt or unsupported is a Failure naming it.
std::unique_ptr<Tokenizer> loadTokenizer(const std::string &directory);

} // namespace xfmr::rt

#endif // XFMR_LIB_RUNTIME_TOKENIZER_H
