//===- Tokenizer.h - text to token ids and back -----------------*- C++ -*-===//
//
// The tokenizers a checkpoint ships, read from its own files. Byte-level BPE
// (GPT-2): tokenizer.json, or vocab.json + merges.txt.
//
//===----------------------------------------------------------------------===//

#ifndef XFMR_LIB_RUNTIME_TOKENIZER_H
#define XFMR_LIB_RUNTIME_TOKENIZER_H

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace xfmr::rt {

class Tokenizer {
public:
  virtual ~Tokenizer() = default;
  /// The ids of `text` (UTF-8; invalid UTF-8 is a Failure naming `what`).
  virtual std::vector<int32_t> encode(std::string_view text, const std::string &what) const = 0;
  /// The bytes token `id` stands for (possibly part of a UTF-8 character).
  virtual std::string tokenBytes(int32_t id) const = 0;
  /// Ids 0 .. size() - 1 exist.
  virtual int64_t size() const = 0;
  /// The text of `ids`.
  std::string decode(const std::vector<int32_t> &ids) const;
  /// Where the tokenizer was read from.
  std::string source;
};

/// The tokenizer in checkpoint directory `directory`, or null if it holds
/// none of the files a supported tokenizer is read from. A file that is
/// there but corrupt or unsupported is a Failure naming it.
std::unique_ptr<Tokenizer> loadTokenizer(const std::string &directory);

/// The length of the UTF-8 character starting at text[i], or 0 if the bytes
/// there are not valid UTF-8.
size_t utf8Length(std::string_view text, size_t i);

/// How many bytes at the end of `bytes` start a UTF-8 character that is not
/// complete yet (what a stream must hold back).
size_t incompleteUtf8Tail(std::string_view bytes);

/// `bytes` as valid UTF-8: each maximal ill-formed subsequence replaced by
/// U+FFFD, as Python's decode(errors="replace") and so Hugging Face's
/// decoders do.
std::string replaceInvalidUtf8(std::string_view bytes);

} // namespace xfmr::rt

#endif // XFMR_LIB_RUNTIME_TOKENIZER_H
